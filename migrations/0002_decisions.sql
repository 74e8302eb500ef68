-- The leader's latest decision about each instance, so that every replica can answer "what will
-- ebb do" (GET /v1/plan) without deciding again.
ALTER TABLE instances
    ADD COLUMN decided_action text,
    ADD COLUMN decided_code   text,
    ADD COLUMN decided_reason text,
    -- Since when the decision has been what it is.
    ADD COLUMN decided_since  timestamptz;

-- Leadership is a session-level advisory lock held by the leader's connection (a dead leader's
-- session ends and frees it); the lease table was never used.
DROP TABLE leader_lease;
