-- When a person started each running instance: set by the sync that sees an instance it had
-- stopped (or stopping) pending or running again with no start of ebb's since it was seen stopped
-- and none in flight (an open start intent), to the instance's launch time (EC2's time of its
-- last start) when that falls in between, else the sync's time; cleared when it is seen in any
-- other state. The engine keeps such a start outside work hours running until it has gone idle
-- (work_hours.late_start). Instances running at the upgrade have none: their starts were not
-- watched.
ALTER TABLE instances ADD COLUMN started_by_person_at timestamptz;
-- The read phase asks for the live ones at every tick, to read their GPUs over the late start's
-- idle window.
CREATE INDEX instances_started_by_person ON instances (id)
    WHERE started_by_person_at IS NOT NULL AND gone_at IS NULL;
