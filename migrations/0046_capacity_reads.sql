-- Each successful read of a region's capacity reservations held outside ebb, as the leader
-- makes it hourly (reconcile/capacity_reads.rs): every active reservation with its size and
-- how much of it was in use, and the instances of the types they hold that the same tick listed
-- running on demand in no reservation (what could have used them). `ebb advise` and the console's Advice page count the reserved
-- hours no instance used from them; a time no read stands for is unread, never unused.
CREATE TABLE capacity_reads (
    region text NOT NULL,
    read_at timestamptz NOT NULL,
    reservations jsonb NOT NULL,
    ran_outside jsonb NOT NULL,
    PRIMARY KEY (region, read_at)
);
CREATE INDEX capacity_reads_read_at ON capacity_reads (read_at);
