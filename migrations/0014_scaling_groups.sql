-- The Auto Scaling groups ebb schedules through their capacity (issue 28), one row per group
-- and region. `up_*` is the capacity the opening restores: the one ebb found before it scaled
-- the group down, or a person's change while the group was up; `types` the members' instance
-- types while up (a group scaled to zero has no member to match a policy by); `down_since`
-- when ebb scaled it down. `intent_seq` is the intent of a change whose outcome is not written
-- yet, with the capacity it asked for: written with the intent and cleared with the outcome,
-- each in one transaction, so that a crash between them is resolved from the group's real
-- capacity.
CREATE TABLE scaling_groups (
    region         text NOT NULL,
    name           text NOT NULL,
    up_min         integer NOT NULL,
    up_desired     integer NOT NULL,
    up_max         integer NOT NULL,
    types          text[] NOT NULL DEFAULT '{}',
    down_since     timestamptz,
    -- No foreign key: a key into audit_log would stand in the way of its append-only trigger.
    intent_seq     bigint,
    intent_at      timestamptz,
    intent_min     integer,
    intent_desired integer,
    intent_max     integer,
    PRIMARY KEY (region, name)
);
