-- Spot migrations that never lose a workload's disks (issue 16).
-- `rolling_back`: a roll-back that could not finish yet (the original's start found no
-- capacity); it is tried again, with a growing wait, until the original runs.
ALTER TABLE spot_migrations DROP CONSTRAINT spot_migrations_state_check;
ALTER TABLE spot_migrations ADD CONSTRAINT spot_migrations_state_check
    CHECK (state IN ('planned', 'stopping', 'imaging', 'launching', 'verifying', 'done',
                     'rolling_back', 'rolled_back', 'failed'));

-- Failed attempts in a row of the step under way (a roll-back, the original's clean-up), and
-- when it may be tried again: a step that keeps failing waits longer each time, as actions do.
ALTER TABLE spot_migrations ADD COLUMN failures integer NOT NULL DEFAULT 0;
ALTER TABLE spot_migrations ADD COLUMN retry_at timestamptz;

-- Until when the image is kept after the migration ended: while the original is gone it is the
-- only copy of the workload's disks (the policy's keep_image_for, 7 days by default).
ALTER TABLE spot_migrations ADD COLUMN image_kept_until timestamptz;
