-- The history of the Auto Scaling groups' capacity changes that succeeded (issue 28), for
-- `ebb report`: one row per change, written in the transaction of its outcome. `up_desired` is
-- the capacity the group had (and gets back) while up, `to_desired` the one the change set;
-- a scale-down's members removed are their difference, priced at `instance_type` for as long as
-- the group stays down. `policy` is the intent's. The audit log holds the same changes, but not
-- the group's name or sizes as columns.
CREATE TABLE scaling_group_changes (
    region        text NOT NULL,
    name          text NOT NULL,
    at            timestamptz NOT NULL,
    scale_down    boolean NOT NULL,
    up_desired    integer NOT NULL,
    to_desired    integer NOT NULL,
    instance_type text,
    policy        text
);

CREATE INDEX scaling_group_changes_at ON scaling_group_changes (at);
CREATE INDEX scaling_group_changes_group ON scaling_group_changes (region, name, at);
