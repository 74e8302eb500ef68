-- The last heartbeat each instance posted through the API (POST /v1/instances/{id}/activity),
-- at the database's time: the idle rule's heartbeat signal reads it beside the ebb:active-at
-- tag. One row per instance, replaced by each heartbeat.
CREATE TABLE heartbeats (
    instance_id text PRIMARY KEY,
    at timestamptz NOT NULL
);
