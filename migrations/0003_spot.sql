-- Spot migrations: one row per move of an on-demand instance to spot, advanced a step per tick
-- by the leader and resumable after a crash at any step (see src/spot/).
-- Migration 0001 sketched the table before the state machine existed; no ebb ever wrote to it.
DROP TABLE spot_migrations;

CREATE TABLE spot_migrations (
    id              bigserial PRIMARY KEY,
    -- The on-demand instance that was moved.
    original        text NOT NULL,
    region          text NOT NULL,
    policy          text NOT NULL,
    state           text NOT NULL CHECK (state IN ('planned', 'stopping', 'imaging', 'launching',
                        'verifying', 'done', 'rolled_back', 'failed')),
    -- The instance that runs the workload now (a spot instance, or on-demand after a fallback).
    current         text,
    -- spot | on-demand: the market of `current`, or of the launch under way.
    market          text NOT NULL DEFAULT 'spot',
    -- The image of the original the replacements are launched from.
    image           text,
    instance_type   text,
    zone            text,
    subnet          text,
    -- $/hour of the original on-demand, and of the replacement when it was launched.
    on_demand_price double precision,
    price           double precision,
    -- Launches so far; names the idempotency tag of the next one.
    launches        integer NOT NULL DEFAULT 0,
    -- Dollars saved by earlier replacements; the current one's are added when read.
    saved_before    double precision NOT NULL DEFAULT 0,
    -- [{"at", "instance", "instance_type", "zone"}]: spot reclaims.
    interruptions   jsonb NOT NULL DEFAULT '[]',
    -- [{"at", "state", "detail"}]: every step taken.
    steps           jsonb NOT NULL DEFAULT '[]',
    -- How the original was launched: what every replacement copies, even after the original
    -- is gone.
    launch_spec     jsonb,
    error           text,
    created_at      timestamptz NOT NULL,
    -- When the state last changed; a step waiting too long is judged from it.
    state_since     timestamptz NOT NULL,
    -- When the current replacement was found running.
    running_since   timestamptz,
    -- When the stopped original was terminated (after keep_original_for).
    original_terminated_at timestamptz,
    -- When the original was found running again (someone started it) and left to people.
    original_returned_at timestamptz,
    -- When ebb stopped following the migration (its instance terminated by someone else).
    ended_at        timestamptz
);

-- Spot interruption warnings read from EBB_INTERRUPTION_QUEUE: EC2 reclaims these instances
-- within two minutes of `warned_at`.
CREATE TABLE spot_warnings (
    instance  text PRIMARY KEY,
    warned_at timestamptz NOT NULL
);

-- One live migration per instance: a second plan for the same instance is refused.
CREATE UNIQUE INDEX spot_migrations_one_live ON spot_migrations (original)
    WHERE state NOT IN ('rolled_back', 'failed') AND ended_at IS NULL;
