-- ebb's memory: what the cloud said about each instance and what ebb did, the tamper-evident
-- audit log, overrides, spot migrations and the leader lease.

CREATE TABLE instances (
    id                text PRIMARY KEY,
    region            text NOT NULL,
    instance_type     text NOT NULL,
    state             text NOT NULL,
    lifecycle         text NOT NULL,
    launched_at       timestamptz,
    tags              jsonb NOT NULL DEFAULT '{}',
    -- sha256 (first 8 bytes) of the cloud facts above: an unchanged instance is not rewritten.
    fingerprint       bigint NOT NULL,
    first_seen_at     timestamptz NOT NULL,
    -- When the facts last changed. Unchanged rows are not rewritten at each sync, so a live
    -- instance was last seen at its region's region_syncs.synced_at.
    changed_at        timestamptz NOT NULL,
    -- Set when the cloud no longer lists the instance; rows are never deleted.
    gone_at           timestamptz,
    -- When ebb saw it enter its current state.
    state_since       timestamptz NOT NULL,
    -- The policy that governed it at the last decision.
    policy            text,
    -- When ebb last stopped it; cleared when it is seen running again.
    stopped_by_ebb_at timestamptz,
    started_by_ebb_at timestamptz,
    notified_at       timestamptz
);
CREATE INDEX instances_region ON instances (region);

CREATE TABLE region_syncs (
    region    text PRIMARY KEY,
    synced_at timestamptz NOT NULL
);

CREATE TABLE instance_events (
    id         bigserial PRIMARY KEY,
    instance   text NOT NULL REFERENCES instances (id),
    at         timestamptz NOT NULL,
    -- The state before: an EC2 state, or 'gone'.
    from_state text NOT NULL,
    -- An EC2 state, or 'gone' when the cloud stopped listing the instance.
    to_state   text NOT NULL,
    -- observed | reappeared | gone (a new instance's first state is in its row)
    cause      text NOT NULL
);
CREATE INDEX instance_events_instance ON instance_events (instance, at);

CREATE TABLE audit_log (
    seq            bigint PRIMARY KEY CHECK (seq > 0),
    at             timestamptz NOT NULL,
    actor          text NOT NULL,
    instance       text,
    region         text,
    action         text NOT NULL,
    outcome        text NOT NULL CHECK (outcome IN ('intent', 'succeeded', 'failed', 'skipped')),
    policy         text,
    policy_version text,
    code           text,
    reason         text NOT NULL,
    dry_run        boolean NOT NULL,
    request_id     text,
    error          text,
    -- For an outcome: the intent it resolves.
    intent_seq     bigint REFERENCES audit_log (seq),
    prev_hash      bytea NOT NULL CHECK (length(prev_hash) = 32),
    hash           bytea NOT NULL CHECK (length(hash) = 32)
);
CREATE INDEX audit_log_at ON audit_log (at);
CREATE INDEX audit_log_instance ON audit_log (instance, seq);
CREATE UNIQUE INDEX audit_log_one_outcome_per_intent ON audit_log (intent_seq);
-- A change of policy-set version is an audit row; the last one is looked up at each load.
CREATE INDEX audit_log_policy_versions ON audit_log (seq) WHERE action = 'policy_version';

CREATE FUNCTION audit_log_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'audit_log is append-only: % is not allowed', TG_OP
        USING ERRCODE = 'insufficient_privilege';
END;
$$;
CREATE TRIGGER audit_log_no_update_delete BEFORE UPDATE OR DELETE ON audit_log
    FOR EACH ROW EXECUTE FUNCTION audit_log_append_only();
CREATE TRIGGER audit_log_no_truncate BEFORE TRUNCATE ON audit_log
    FOR EACH STATEMENT EXECUTE FUNCTION audit_log_append_only();

CREATE TABLE overrides (
    id         bigserial PRIMARY KEY,
    instance   text NOT NULL,
    until      timestamptz NOT NULL,
    reason     text NOT NULL,
    created_by text NOT NULL,
    created_at timestamptz NOT NULL,
    revoked_at timestamptz,
    revoked_by text
);
CREATE INDEX overrides_active ON overrides (instance, until) WHERE revoked_at IS NULL;

CREATE TABLE spot_migrations (
    id                 bigserial PRIMARY KEY,
    original_instance  text NOT NULL,
    region             text NOT NULL,
    policy             text NOT NULL,
    state              text NOT NULL CHECK (state IN ('planned', 'stopping', 'imaging', 'launching',
                           'verifying', 'done', 'rolled_back', 'failed')),
    image_id           text,
    spot_instance      text,
    spot_type          text,
    availability_zone  text,
    interruptions      integer NOT NULL DEFAULT 0,
    -- Every step taken, in order: [{"at", "state", "detail"}].
    steps              jsonb NOT NULL DEFAULT '[]',
    created_at         timestamptz NOT NULL,
    updated_at         timestamptz NOT NULL,
    error              text
);
CREATE UNIQUE INDEX spot_migrations_one_open ON spot_migrations (original_instance)
    WHERE state NOT IN ('done', 'rolled_back', 'failed');

CREATE TABLE leader_lease (
    name       text PRIMARY KEY,
    holder     text NOT NULL,
    expires_at timestamptz NOT NULL
);
