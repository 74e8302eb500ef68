-- The capacity reservations ebb makes for starts (start.reserve_capacity), one row each from
-- before its first call to its cancellation: its token (the call's client token and the
-- ebb:reservation tag, so that only a reservation carrying it is ever taken as ebb's), the
-- reservation EC2 made, and the step it is at. `reserving`: to make (or made, the answer
-- lost); `targeting`: made, the instance to be made to start into it; `targeted`: the start
-- next; `cancelling`: the instance runs or the deadline passed; `cancelled`: done, the
-- instance still made to start into it; `released`: the instance back on open capacity;
-- `refused`: EC2 made none, the start went on without.
CREATE TABLE capacity_reservations (
    token text PRIMARY KEY,
    instance text NOT NULL,
    region text NOT NULL,
    policy text,
    state text NOT NULL,
    reservation_id text,
    instance_type text,
    ends_at timestamptz NOT NULL,
    created_at timestamptz NOT NULL,
    made_at timestamptz,
    cancelled_at timestamptz,
    updated_at timestamptz NOT NULL
);
-- At most one reservation of an instance in use at a time; every tick reads the live ones.
CREATE UNIQUE INDEX capacity_reservations_live ON capacity_reservations (instance)
    WHERE state NOT IN ('released', 'refused');
