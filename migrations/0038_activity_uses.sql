-- When each activity signal (`idle.activity`) showed an instance in use, as the ticks read it:
-- the latest use each tick read, one row per instance, signal and five-minute slot (the GPU
-- readings' period), so that a box in use all day adds twelve rows an hour, not one a tick.
-- What `ebb metrics export` writes in its `activity:NAME` columns and `ebb replay` reads from
-- Postgres. Pruned with the GPU readings.
CREATE TABLE activity_uses (
    instance text NOT NULL,
    signal text NOT NULL,
    slot timestamptz NOT NULL,
    used_at timestamptz NOT NULL,
    PRIMARY KEY (instance, signal, slot)
);
