-- The last reading of each activity signal (`idle.activity`) a tick asked a server for
-- (Jupyter, Prometheus), by instance and signal name: when the signal last showed use (Jupyter),
-- or its newest value and that value's time (Prometheus), or why it could not be read. One row
-- per instance and signal, replaced at each read: what the console shows and explains with.
-- Pruned with the GPU readings.
CREATE TABLE activity_readings (
    instance text NOT NULL,
    signal text NOT NULL,
    read_at timestamptz NOT NULL,
    last_use timestamptz,
    value double precision,
    value_at timestamptz,
    unread text,
    PRIMARY KEY (instance, signal)
);
