-- What ebb saw in spot pools (an instance type in one zone of one account) that no other table
-- keeps: the spot interruption warnings and rebalance recommendations read from the
-- interruption queue, for any instance ebb knows (spot_warnings keeps only a live migration's
-- replacement's, and only the last). The reclaims a migration saw are in
-- spot_migrations.interruptions and the capacity errors in the audit log (0029's index): `ebb
-- pools` and the spot ranking read them there, not copied. account is empty for ebb's own
-- (the queue's); zone is empty when ebb could not tell it. Pruned after EBB_RETENTION.
CREATE TABLE pool_events (
    id            bigserial PRIMARY KEY,
    at            timestamptz NOT NULL,
    kind          text NOT NULL CHECK (kind IN ('interruption', 'rebalance')),
    account       text NOT NULL,
    region        text NOT NULL,
    zone          text NOT NULL,
    instance_type text NOT NULL,
    instance      text NOT NULL,
    -- A message the queue shows again is one event.
    UNIQUE (instance, kind, at)
);
CREATE INDEX pool_events_at ON pool_events (at);

-- Spot launches refused for lack of capacity, read with the starts' over the last 30 days.
CREATE INDEX audit_log_launch_failures ON audit_log (at)
    WHERE outcome = 'failed' AND action IN ('migrate_to_spot', 'relaunch_spot');
