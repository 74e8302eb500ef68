-- How far `EBB_EVENTS_URL` has been sent the audit log (issue 29): every row up to and
-- including `delivered_through` has been delivered as an event, or is not one (an intent, a dry
-- run). The audit log is the outbox: its `seq` is gapless and committed in order (appends
-- queue on one advisory lock), so a cursor over it loses no row and keeps every instance's
-- order. One row, made when `serve` first runs with `EBB_EVENTS_URL`; moved forward only.
CREATE TABLE event_cursor (
    one               boolean PRIMARY KEY DEFAULT true CHECK (one),
    delivered_through bigint NOT NULL,
    updated_at        timestamptz NOT NULL DEFAULT now()
);
