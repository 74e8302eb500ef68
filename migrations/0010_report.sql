-- `ebb report` (store/report.rs): ebb's succeeded stops, hibernations and starts, found by time
-- for a window and by instance for the last one before it, without reading the rest of the
-- audit log.
CREATE INDEX audit_log_ebb_actions_at ON audit_log (at)
    WHERE actor = 'scheduler' AND NOT dry_run AND outcome = 'succeeded'
      AND action IN ('stop', 'hibernate', 'start');
CREATE INDEX audit_log_ebb_actions_instance ON audit_log (instance, at)
    WHERE actor = 'scheduler' AND NOT dry_run AND outcome = 'succeeded'
      AND action IN ('stop', 'hibernate', 'start');
-- Overrides in force in a window, revoked ones included.
CREATE INDEX overrides_until ON overrides (until);
