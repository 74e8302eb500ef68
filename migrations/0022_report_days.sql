-- Daily rollups of the report (store/report_days.rs, report/rollup.rs): each whole UTC day's
-- stopped stretches, one row per instance and the stop's policy ('' for none), made by the
-- leader once the day is over. A report of 30 days over 10,000 instances then reads at most
-- 300,000 of these rows, summed in one statement, instead of every stop, start and state change
-- of the window. report_rollup.rolled_until is the first day not rolled up yet.
CREATE TABLE report_days (
    day date NOT NULL,
    instance text NOT NULL,
    policy text NOT NULL,
    stops integer NOT NULL,
    hibernations integer NOT NULL,
    people_starts integer NOT NULL,
    stopped_hours double precision NOT NULL,
    PRIMARY KEY (day, instance, policy)
);
-- Whether an instance has rows in a window, for the tag keys a report offers.
CREATE INDEX report_days_instance ON report_days (instance, day);

CREATE TABLE report_rollup (
    only_row boolean PRIMARY KEY DEFAULT true CHECK (only_row),
    rolled_until date NOT NULL
);
