-- The type an instance had before ebb changed it to one of its policy's start.fallback_types
-- for lack of capacity, and the fallback type ebb gave it: with start.restore_type, a later
-- start changes it back, only while it still has the type ebb gave it (a person's own change
-- of type since then is left alone). Cleared once it has started as its own type again.
ALTER TABLE instances ADD COLUMN own_type text, ADD COLUMN fallback_type text;
CREATE INDEX instances_on_fallback_types ON instances (id) WHERE own_type IS NOT NULL;

-- The starts EC2 refused for lack of capacity, which idle.min_gap weighs before an idle stop:
-- read at every tick over the last idle.capacity_memory at most (30 days).
CREATE INDEX audit_log_capacity_failures ON audit_log (at)
    WHERE action = 'start' AND outcome = 'failed' AND code = 'insufficient_capacity';
