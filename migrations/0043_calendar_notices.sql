-- The warnings that a calendar the policies use names no date of a year (policy/mod.rs,
-- calendars_running_out), each noticed once: an audit row (action calendar_notice, posted as a
-- CloudEvent) and a webhook post, by the leader's tick (reconcile/calendars.rs).
CREATE TABLE calendar_notices (
    warning text PRIMARY KEY,
    noticed_at timestamptz NOT NULL
);
