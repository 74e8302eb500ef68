-- The Auto Scaling groups' capacity over time, for the console's group page (issue 28): a row
-- each time a tick's listing finds a group's min, desired or max size, its number of members
-- or its tags changed (ebb's changes and people's alike), so a group that stays as it is adds
-- nothing. The newest row is the group as last listed. Rows are few and are not pruned.
CREATE TABLE scaling_group_sizes (
    region       text NOT NULL,
    name         text NOT NULL,
    at           timestamptz NOT NULL,
    min_size     integer NOT NULL,
    desired_size integer NOT NULL,
    max_size     integer NOT NULL,
    -- The instances the group had when listed, in any state but ended.
    members      integer NOT NULL,
    tags         jsonb NOT NULL,
    PRIMARY KEY (region, name, at)
);

-- The changes of a group's capacity in the audit log (the reconciler's `scale_down_group` and
-- `restore_group` rows, of no instance), newest first by region, for the group's page.
CREATE INDEX audit_log_group_changes ON audit_log (region, seq)
    WHERE action IN ('scale_down_group', 'restore_group');
