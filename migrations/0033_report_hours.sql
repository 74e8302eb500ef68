-- The report's rollups gain what the commitments and a stopped box's own costs need
-- (store/report_days.rs, report/covered.rs): each rolled instance-day's hours stopped by stops
-- its cloud still bills, and each rolled hour's totals of what ran and what ebb kept stopped,
-- by region and type. A report then nets commitments and disks from the rollups too, instead
-- of reading the whole window's history hour by hour. The rollups made before lack both: they
-- are emptied, and the leader's roll-up task makes them again, oldest day first; until then a
-- report reads those days from the history.
DELETE FROM report_days;
DELETE FROM report_rollup;
ALTER TABLE report_days ADD COLUMN charging_hours double precision NOT NULL DEFAULT 0;

CREATE TABLE report_hours (
    hour timestamptz NOT NULL,
    region text NOT NULL,
    instance_type text NOT NULL,
    running_hours double precision NOT NULL,
    stopped_hours double precision NOT NULL,
    PRIMARY KEY (hour, region, instance_type)
);
