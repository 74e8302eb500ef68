-- A stop of a box inside a capacity reservation held outside ebb (outcome code
-- stopped_in_reservation) saves nothing: the reservation is paid whether the box runs or not.
-- Each rolled instance-day keeps those hours apart (store/report_days.rs), so that a report
-- counts them in reserved_covered_usd and leaves them out of the hours commitments cover. The
-- rollups made before counted them as saved: they are emptied, and the leader's roll-up task
-- makes them again, oldest day first; until then a report reads those days from the history.
DELETE FROM report_days;
DELETE FROM report_rollup;
DELETE FROM report_hours;
ALTER TABLE report_days ADD COLUMN reserved_hours double precision NOT NULL DEFAULT 0;
