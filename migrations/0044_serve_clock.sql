-- The simulated clock of an `ebb serve` on a simulated fleet (the demo of scripts/run),
-- published every few seconds (serve/clock_publisher.rs) so that the commands run against the
-- same database count to its time, not the system's (store/serve_clock.rs). One row at most;
-- a serve on a real cloud never writes it.
CREATE TABLE serve_clock (
    id boolean PRIMARY KEY DEFAULT true CHECK (id),
    simulated_at timestamptz NOT NULL,
    speed double precision NOT NULL CHECK (speed > 0),
    published_at timestamptz NOT NULL
);
