-- The GPU utilisation readings ticks take, kept for EBB_METRICS_RETENTION: one row per instance
-- and hour, its twelve five-minute readings in order (NULL where none was taken), so that a
-- month of a large fleet is a few million short rows, not a row per sample.
CREATE TABLE gpu_readings (
    instance text NOT NULL,
    hour     timestamptz NOT NULL,
    percent  real[] NOT NULL CHECK (cardinality(percent) = 12),
    PRIMARY KEY (instance, hour)
);
-- Pruned and exported by time.
CREATE INDEX gpu_readings_hour ON gpu_readings (hour);
