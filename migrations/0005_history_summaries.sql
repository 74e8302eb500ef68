-- What each instance's row keeps of its audit history, kept with every append (store/summary.rs),
-- so that a tick reads it without scanning the log: the newest audit row about the instance
-- (is it a dry run of the same decision?), and its failure streak (how long to back off).
ALTER TABLE instances
    ADD COLUMN last_audit_seq bigint,
    ADD COLUMN failing_action text,
    -- The code of the streak's last failure (insufficient_capacity is retried sooner).
    ADD COLUMN failing_code   text,
    ADD COLUMN failures       integer NOT NULL DEFAULT 0,
    ADD COLUMN last_failed_at timestamptz;

UPDATE instances AS i SET last_audit_seq = a.seq
FROM (SELECT instance, max(seq) AS seq FROM audit_log WHERE instance IS NOT NULL GROUP BY instance) AS a
WHERE a.instance = i.id;

-- The streak as the tick computed it from the log: the scheduler's latest real outcomes, newest
-- first, leaving out interrupted ones; the failures in a row of the newest one's action.
WITH outcomes AS (
    SELECT instance, action, outcome, at, code,
           row_number() OVER (PARTITION BY instance ORDER BY seq DESC) AS n
    FROM audit_log
    WHERE instance IS NOT NULL AND actor = 'scheduler' AND NOT dry_run
      AND outcome IN ('succeeded', 'failed')
      AND (error IS NULL OR error NOT LIKE 'interrupted;%')
)
UPDATE instances AS i
SET failing_action = s.action, failing_code = s.code, failures = s.failures,
    last_failed_at = s.at
FROM (
    SELECT latest.instance, latest.action, latest.code, latest.at,
           coalesce(
               (SELECT min(o.n) FROM outcomes AS o
                WHERE o.instance = latest.instance
                  AND NOT (o.outcome = 'failed' AND o.action = latest.action)),
               (SELECT max(o.n) + 1 FROM outcomes AS o WHERE o.instance = latest.instance)
           ) - 1 AS failures
    FROM outcomes AS latest
    WHERE latest.n = 1 AND latest.outcome = 'failed'
) AS s
WHERE s.instance = i.id;

-- Gone instances leave the working set: the sync loads only live ones by region.
CREATE INDEX instances_live_region ON instances (region) WHERE gone_at IS NULL;
-- Overrides past their end leave the active set: the scan starts at now.
CREATE INDEX overrides_active_until ON overrides (until) WHERE revoked_at IS NULL;
-- Instance state changes are pruned by time (store/retention.rs).
CREATE INDEX instance_events_at ON instance_events (at);
