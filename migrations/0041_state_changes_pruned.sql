-- How far back instance state changes are gone (store/retention.rs), so that the report's
-- roll-up never freezes a day from changes that were pruned before it was rolled up: such a day
-- is refused, listed in report_days_uncounted, and reports say they do not count it. The pruner
-- keeps the changes of days not rolled up yet; an earlier ebb did not, and if its first kept
-- change is later than ebb's first stop, everything before that change may be gone.
CREATE TABLE state_changes_pruned (
    only_row boolean PRIMARY KEY DEFAULT true CHECK (only_row),
    before timestamptz NOT NULL
);
INSERT INTO state_changes_pruned (before)
SELECT coalesce((SELECT min(at) FROM instance_events), now())
WHERE EXISTS (
    SELECT 1 FROM audit_log
    WHERE actor = 'scheduler' AND NOT dry_run AND outcome = 'succeeded'
      AND action IN ('stop', 'hibernate')
      AND at < coalesce((SELECT min(at) FROM instance_events), 'infinity')
);

CREATE TABLE report_days_uncounted (
    day date PRIMARY KEY
);
