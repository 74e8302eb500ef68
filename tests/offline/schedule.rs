//! Work-hour schedules: parsing, DST rules, skipped dates and working days, and properties of
//! `status`.

use chrono::{DateTime, NaiveDate, TimeDelta, Utc, Weekday};
use chrono_tz::Tz;
use ebb::schedule::*;
use proptest::prelude::*;
use std::sync::Arc;

const NEW_YORK: Tz = chrono_tz::America::New_York;
const AUCKLAND: Tz = chrono_tz::Pacific::Auckland;
const KOLKATA: Tz = chrono_tz::Asia::Kolkata;
const UTC: Tz = chrono_tz::UTC;

fn at(s: &str) -> DateTime<Utc> {
    s.parse().unwrap_or_else(|e| panic!("bad instant {s}: {e}"))
}

fn period(days: &str, start: &str, stop: &str) -> Period {
    Period {
        days: days.parse().unwrap(),
        start: start.parse().unwrap(),
        stop: stop.parse().unwrap(),
    }
}

fn periods(tz: Tz, list: &[(&str, &str, &str)]) -> Schedule {
    Schedule {
        timezone: tz,
        hours: Hours::Periods(list.iter().map(|(d, a, b)| period(d, a, b)).collect()),
        skip: Vec::new(),
        workdays: Vec::new(),
    }
}

fn cron(tz: Tz, start: &str, stop: &str) -> Schedule {
    Schedule {
        timezone: tz,
        hours: Hours::Cron {
            start: start.parse().unwrap(),
            stop: stop.parse().unwrap(),
        },
        skip: Vec::new(),
        workdays: Vec::new(),
    }
}

fn skipping(mut schedule: Schedule, dates: &[&str]) -> Schedule {
    schedule.skip.push(Arc::new(Calendar {
        name: "holidays".into(),
        dates: dates.iter().map(|d| d.parse().unwrap()).collect(),
        workdays: Vec::new(),
    }));
    schedule
}

/// Asserts the full status at `now`.
#[track_caller]
fn check(schedule: &Schedule, now: &str, in_hours: bool, since: Option<&str>, next: Option<&str>) {
    let expected = ScheduleStatus {
        in_hours,
        since: since.map(at),
        next: next.map(at),
    };
    assert_eq!(schedule.status(at(now)), expected, "status at {now}");
}

#[track_caller]
fn open_at(schedule: &Schedule, now: &str) -> bool {
    schedule.status(at(now)).in_hours
}

// ---- times of day ----

#[test]
fn times_of_day_parse_to_minutes() {
    let minutes = |s: &str| s.parse::<TimeOfDay>().unwrap().minutes();
    assert_eq!(minutes("00:00"), 0);
    assert_eq!(minutes("08:37"), 8 * 60 + 37);
    assert_eq!(minutes("23:59"), 23 * 60 + 59);
    assert_eq!(minutes("24:00"), 24 * 60);
    assert_eq!("08:05".parse::<TimeOfDay>().unwrap().to_string(), "08:05");
    assert_eq!("24:00".parse::<TimeOfDay>().unwrap().to_string(), "24:00");
}

#[test]
fn bad_times_of_day_are_rejected_with_the_input_quoted() {
    let err = "25:00".parse::<TimeOfDay>().unwrap_err();
    assert_eq!(
        err.to_string(),
        r#""25:00" is not a time of day (HH:MM, 00:00-24:00)"#
    );
    for bad in [
        "24:01", "8:00", "08:60", "08:00:00", "", "ab:cd", "0800", " 08:00", "+8:00", "08:-1",
    ] {
        assert!(
            bad.parse::<TimeOfDay>().is_err(),
            "{bad:?} should be rejected"
        );
    }
}

// ---- days ----

fn days_in(set: &str) -> Vec<Weekday> {
    let set: DaySet = set.parse().unwrap();
    [
        Weekday::Mon,
        Weekday::Tue,
        Weekday::Wed,
        Weekday::Thu,
        Weekday::Fri,
        Weekday::Sat,
        Weekday::Sun,
    ]
    .into_iter()
    .filter(|d| set.contains(*d))
    .collect()
}

#[test]
fn day_sets_parse_days_ranges_and_lists() {
    use Weekday::*;
    assert_eq!(days_in("mon"), [Mon]);
    assert_eq!(days_in("mon-fri"), [Mon, Tue, Wed, Thu, Fri]);
    assert_eq!(days_in("fri-mon"), [Mon, Fri, Sat, Sun]);
    assert_eq!(days_in("sat,sun"), [Sat, Sun]);
    assert_eq!(days_in("mon-wed,fri"), [Mon, Tue, Wed, Fri]);
    assert_eq!(days_in("MON-Fri"), [Mon, Tue, Wed, Thu, Fri]);
    assert_eq!(days_in("monday-wednesday"), [Mon, Tue, Wed]);
    assert_eq!(days_in(" sat , sun "), [Sat, Sun]);
    assert_eq!(days_in("sun-sat"), [Mon, Tue, Wed, Thu, Fri, Sat, Sun]);
}

#[test]
fn day_sets_print_canonically() {
    let show = |s: &str| s.parse::<DaySet>().unwrap().to_string();
    assert_eq!(show("mon-fri"), "mon-fri");
    assert_eq!(show("sun,sat"), "sat,sun");
    assert_eq!(show("fri-mon"), "mon,fri-sun");
    assert_eq!(show("wed,mon-tue,fri"), "mon-wed,fri");
    assert_eq!(show("tue-mon"), "mon-sun");
    for text in ["mon,fri-sun", "mon-wed,fri", "tue", "sat,sun"] {
        assert_eq!(show(&show(text)), show(text));
    }
}

#[test]
fn bad_day_sets_are_rejected() {
    let err = |s: &str| s.parse::<DaySet>().unwrap_err().to_string();
    assert_eq!(
        err("mon-fry"),
        r#""mon-fry": unknown day "fry" (expected mon, tue, wed, thu, fri, sat, sun)"#
    );
    assert!(err("").starts_with(r#""": no day given"#), "{}", err(""));
    assert!(err("mon,,tue").starts_with(r#""mon,,tue": no day given"#));
    assert!(err("mon-tue-wed").contains(r#""mon-tue-wed" is not a day or a range"#));
    assert!(err("weekdays").contains(r#"unknown day "weekdays""#));
}

// ---- dates and calendars ----

#[test]
fn date_ranges_parse_single_dates_and_ranges() {
    let date = |s: &str| NaiveDate::parse_from_str(s, "%Y-%m-%d").unwrap();
    let one: DateRange = "2026-10-01".parse().unwrap();
    assert_eq!(
        (one.first, one.last),
        (date("2026-10-01"), date("2026-10-01"))
    );
    let week: DateRange = "2026-10-01..2026-10-07".parse().unwrap();
    assert_eq!(
        (week.first, week.last),
        (date("2026-10-01"), date("2026-10-07"))
    );
    let calendar = Calendar {
        name: "shutdown".into(),
        dates: vec![one, "2026-12-24..2026-12-26".parse().unwrap()],
        workdays: Vec::new(),
    };
    assert!(calendar.contains(date("2026-10-01")));
    assert!(!calendar.contains(date("2026-10-02")));
    assert!(!calendar.contains(date("2026-12-23")));
    assert!(calendar.contains(date("2026-12-24")));
    assert!(calendar.contains(date("2026-12-26")));
    assert!(!calendar.contains(date("2026-12-27")));
}

#[test]
fn bad_dates_are_rejected() {
    let err = |s: &str| s.parse::<DateRange>().unwrap_err().to_string();
    assert_eq!(
        err("2026-13-01"),
        r#""2026-13-01" is not a date (YYYY-MM-DD or YYYY-MM-DD..YYYY-MM-DD)"#
    );
    assert!(err("2026-02-30").starts_with(r#""2026-02-30" is not a date"#));
    assert!(err("2026-1-1").starts_with(r#""2026-1-1" is not a date"#));
    assert!(err("2026-10-01..2026-10-32").contains(r#""2026-10-32" is not a date"#));
    assert!(
        err("2026-10-07..2026-10-01").contains("ends before it starts"),
        "{}",
        err("2026-10-07..2026-10-01")
    );
}

// ---- cron parsing ----

#[test]
fn cron_errors_name_the_field() {
    let err = |s: &str| s.parse::<CronEvents>().unwrap_err().to_string();
    assert_eq!(
        err("61 8 * * mon-fri"),
        r#"invalid cron expression "61 8 * * mon-fri": minute field "61": 61 is out of range 0-59"#
    );
    assert_eq!(
        err("0 8 * * mon-fri 2026"),
        r#"invalid cron expression "0 8 * * mon-fri 2026": expected 5 fields (minute hour day-of-month month day-of-week), found 6"#
    );
    assert!(err("0 8 * *").ends_with("found 4"));
    assert!(err("0 24 * * *").contains(r#"hour field "24": 24 is out of range 0-23"#));
    assert!(err("0 8 0 * *").contains(r#"day-of-month field "0": 0 is out of range 1-31"#));
    assert!(err("0 8 * 13 *").contains(r#"month field "13""#));
    assert!(err("0 8 * * 8").contains(r#"day-of-week field "8": 8 is out of range 0-7"#));
    assert!(err("0 8 * * mon-fry").contains(r#"day-of-week field "mon-fry": "fry" is not a value"#));
    assert!(err("0 8 * * 5-1").contains(r#"day-of-week field "5-1": range 5-1 runs backwards"#));
    assert!(err("*/0 8 * * *").contains(r#"minute field "*/0": step "0""#));
    assert!(err("0 8 ? * *").contains(r#"day-of-month field "?""#));
    assert!(err("0,,5 8 * * *").contains("minute field"));
}

#[test]
fn cron_events_keep_their_text() {
    let events: CronEvents = "0 9 * * mon-fri".parse().unwrap();
    assert_eq!(events.to_string(), "0 9 * * mon-fri");
    assert_eq!(events.as_str(), "0 9 * * mon-fri");
}

// ---- cron semantics ----

#[test]
fn cron_numeric_days_of_week_are_standard() {
    // 2026-03-02 is a Monday. In the crate's own numbering 1-5 would be Sunday to Thursday.
    let s = cron(UTC, "0 9 * * 1-5", "0 17 * * 1-5");
    assert!(open_at(&s, "2026-03-02T12:00:00Z"), "Monday");
    assert!(open_at(&s, "2026-03-06T12:00:00Z"), "Friday");
    assert!(!open_at(&s, "2026-03-07T12:00:00Z"), "Saturday");
    assert!(!open_at(&s, "2026-03-08T12:00:00Z"), "Sunday");
    check(
        &s,
        "2026-03-04T12:00:00Z",
        true,
        Some("2026-03-04T09:00:00Z"),
        Some("2026-03-04T17:00:00Z"),
    );
    check(
        &s,
        "2026-03-07T12:00:00Z",
        false,
        Some("2026-03-06T17:00:00Z"),
        Some("2026-03-09T09:00:00Z"),
    );
}

#[test]
fn cron_sunday_is_0_and_7() {
    for dow in ["0", "7", "sun", "SUN"] {
        let s = cron(UTC, &format!("0 9 * * {dow}"), "0 17 * * *");
        assert!(open_at(&s, "2026-03-08T12:00:00Z"), "{dow}: Sunday");
        assert!(!open_at(&s, "2026-03-07T12:00:00Z"), "{dow}: Saturday");
        assert!(!open_at(&s, "2026-03-09T12:00:00Z"), "{dow}: Monday");
    }
}

#[test]
fn cron_day_names_and_ranges_through_sunday() {
    let names = cron(UTC, "0 9 * * MON-fri", "0 17 * * *");
    let numbers = cron(UTC, "0 9 * * 1-5", "0 17 * * *");
    let weekend = cron(UTC, "0 9 * * fri-sun", "0 17 * * *");
    for day in 1..=14 {
        let now = format!("2026-03-{day:02}T12:00:00Z");
        assert_eq!(open_at(&names, &now), open_at(&numbers, &now), "{now}");
        let weekday = at(&now).date_naive().format("%a").to_string();
        let in_weekend = ["Fri", "Sat", "Sun"].contains(&weekday.as_str());
        assert_eq!(open_at(&weekend, &now), in_weekend, "{now}");
    }
}

#[test]
fn cron_day_of_month_or_day_of_week() {
    // Both restricted: the 1st of the month or any Monday.
    let either = cron(UTC, "0 9 1 * mon", "0 17 * * *");
    assert!(
        open_at(&either, "2026-04-01T12:00:00Z"),
        "Wednesday the 1st"
    );
    assert!(open_at(&either, "2026-04-06T12:00:00Z"), "Monday the 6th");
    assert!(!open_at(&either, "2026-04-07T12:00:00Z"), "Tuesday the 7th");
    // A `*` day of month leaves only the day of week.
    let mondays = cron(UTC, "0 9 * * mon", "0 17 * * *");
    assert!(!open_at(&mondays, "2026-04-01T12:00:00Z"));
    assert!(open_at(&mondays, "2026-04-06T12:00:00Z"));
    // A field starting with `*` counts as unrestricted, so both must match: odd days that are
    // Mondays (2026-03-09 is odd, 2026-03-02 and 2026-03-16 are even).
    let both = cron(UTC, "0 9 */2 * mon", "0 17 * * *");
    assert!(open_at(&both, "2026-03-09T12:00:00Z"));
    assert!(!open_at(&both, "2026-03-02T12:00:00Z"));
    assert!(!open_at(&both, "2026-03-11T12:00:00Z"));
}

#[test]
fn cron_stop_wins_over_a_start_at_the_same_minute() {
    let never = cron(UTC, "0 9 * * *", "0 9 * * *");
    let status = never.status(at("2026-03-04T09:00:00Z"));
    assert!(!status.in_hours);
    // Hours never opened, so there is no change of state to report.
    assert_eq!(status.since, None);
    assert_eq!(status.next, None);
    assert!(!open_at(&never, "2026-03-04T12:00:00Z"));

    // Opens every day at 09:00, closes Mondays at 09:00: the Monday start is lost, and the
    // hours reopen on Tuesday.
    let mondays_off = cron(UTC, "0 9 * * *", "0 9 * * mon");
    check(
        &mondays_off,
        "2026-03-03T12:00:00Z",
        true,
        Some("2026-03-03T09:00:00Z"),
        Some("2026-03-09T09:00:00Z"),
    );

    // Opens every day at 09:00, closes Mondays at 09:00 (and 17:00): the Monday start is lost.
    let s = cron(UTC, "0 9 * * *", "0 9,17 * * mon");
    check(
        &s,
        "2026-03-02T09:00:00Z",
        false,
        Some("2026-03-02T09:00:00Z"),
        Some("2026-03-03T09:00:00Z"),
    );
    check(
        &s,
        "2026-03-01T12:00:00Z",
        true,
        Some("2026-02-24T09:00:00Z"),
        Some("2026-03-02T09:00:00Z"),
    );
}

// ---- DST ----

#[test]
fn spring_forward_start_in_the_gap_happens_at_the_transition() {
    // New York skips 02:00-03:00 on 2026-03-08; 02:30 happens at 03:00 EDT = 07:00Z.
    assert_eq!(
        zone::resolve(
            NEW_YORK,
            NaiveDate::from_ymd_opt(2026, 3, 8)
                .unwrap()
                .and_hms_opt(2, 30, 0)
                .unwrap()
        ),
        at("2026-03-08T07:00:00Z")
    );
    let by_period = periods(NEW_YORK, &[("mon-sun", "02:30", "12:00")]);
    let by_cron = cron(NEW_YORK, "30 2 * * *", "0 12 * * *");
    for s in [&by_period, &by_cron] {
        check(
            s,
            "2026-03-08T06:59:00Z",
            false,
            Some("2026-03-07T17:00:00Z"),
            Some("2026-03-08T07:00:00Z"),
        );
        check(
            s,
            "2026-03-08T07:00:00Z",
            true,
            Some("2026-03-08T07:00:00Z"),
            Some("2026-03-08T16:00:00Z"),
        );
    }
}

#[test]
fn fall_back_stop_in_the_repeated_hour_happens_at_its_first_occurrence() {
    // New York repeats 01:00-02:00 on 2026-11-01: the first 01:30 is 05:30Z (EDT), the second
    // 06:30Z (EST).
    let by_period = periods(NEW_YORK, &[("mon-sun", "00:00", "01:30")]);
    let by_cron = cron(NEW_YORK, "0 0 * * *", "30 1 * * *");
    for s in [&by_period, &by_cron] {
        check(
            s,
            "2026-11-01T05:29:00Z",
            true,
            Some("2026-11-01T04:00:00Z"),
            Some("2026-11-01T05:30:00Z"),
        );
        for now in [
            "2026-11-01T05:30:00Z",
            "2026-11-01T06:30:00Z",
            "2026-11-01T06:45:00Z",
        ] {
            // The next midnight is in EST.
            check(
                s,
                now,
                false,
                Some("2026-11-01T05:30:00Z"),
                Some("2026-11-02T05:00:00Z"),
            );
        }
    }
}

#[test]
fn window_inside_a_gap_never_opens() {
    // 02:10-02:50 does not exist on 2026-03-08 in New York; the days around it are normal.
    let s = periods(NEW_YORK, &[("mon-sun", "02:10", "02:50")]);
    check(
        &s,
        "2026-03-08T12:00:00Z",
        false,
        Some("2026-03-07T07:50:00Z"),
        Some("2026-03-09T06:10:00Z"),
    );
}

#[test]
fn auckland_monday_morning_is_sunday_in_utc() {
    // Monday 2026-03-02 08:00 NZDT (UTC+13) is Sunday 2026-03-01 19:00Z.
    let by_period = periods(AUCKLAND, &[("mon", "08:00", "17:00")]);
    let by_cron = cron(AUCKLAND, "0 8 * * mon", "0 17 * * mon");
    for s in [&by_period, &by_cron] {
        check(
            s,
            "2026-03-01T18:59:00Z",
            false,
            Some("2026-02-23T04:00:00Z"),
            Some("2026-03-01T19:00:00Z"),
        );
        check(
            s,
            "2026-03-01T19:00:00Z",
            true,
            Some("2026-03-01T19:00:00Z"),
            Some("2026-03-02T04:00:00Z"),
        );
        assert!(!open_at(s, "2026-03-02T19:00:00Z"), "Tuesday morning NZ");
    }
}

#[test]
fn kolkata_half_hour_offset() {
    // 09:00 IST is 03:30Z; 2026-03-02 is a Monday.
    let by_period = periods(KOLKATA, &[("mon-fri", "09:00", "17:00")]);
    let by_cron = cron(KOLKATA, "0 9 * * 1-5", "0 17 * * 1-5");
    for s in [&by_period, &by_cron] {
        check(
            s,
            "2026-03-02T03:29:59Z",
            false,
            Some("2026-02-27T11:30:00Z"),
            Some("2026-03-02T03:30:00Z"),
        );
        check(
            s,
            "2026-03-02T03:30:00Z",
            true,
            Some("2026-03-02T03:30:00Z"),
            Some("2026-03-02T11:30:00Z"),
        );
    }
}

// ---- periods ----

#[test]
fn wrapping_and_listed_days() {
    let s = periods(UTC, &[("fri-mon", "09:00", "17:00")]);
    let weekend = periods(UTC, &[("sat,sun", "09:00", "17:00")]);
    // 2026-03-02 is a Monday.
    let open = [true, false, false, false, true, true, true];
    for (i, expected) in open.into_iter().enumerate() {
        let now = format!("2026-03-{:02}T12:00:00Z", i + 2);
        assert_eq!(open_at(&s, &now), expected, "fri-mon at {now}");
        assert_eq!(open_at(&weekend, &now), i >= 5, "sat,sun at {now}");
    }
}

#[test]
fn overnight_windows_belong_to_their_start_day() {
    let s = periods(UTC, &[("sun-thu", "22:00", "02:00")]);
    // Thursday 2026-03-05 22:00 to Friday 02:00.
    check(
        &s,
        "2026-03-06T01:00:00Z",
        true,
        Some("2026-03-05T22:00:00Z"),
        Some("2026-03-06T02:00:00Z"),
    );
    // No window starts on Friday or Saturday.
    check(
        &s,
        "2026-03-06T23:00:00Z",
        false,
        Some("2026-03-06T02:00:00Z"),
        Some("2026-03-08T22:00:00Z"),
    );
    assert!(!open_at(&s, "2026-03-07T01:00:00Z"), "Saturday early");
    assert!(!open_at(&s, "2026-03-08T01:00:00Z"), "Sunday early");
    assert!(open_at(&s, "2026-03-08T23:00:00Z"), "Sunday late");
    assert!(open_at(&s, "2026-03-09T01:59:59Z"), "Monday early");
}

#[test]
fn whole_days_merge_across_midnight() {
    let always = periods(UTC, &[("mon-sun", "00:00", "24:00")]);
    for now in [
        "2026-03-04T00:00:00Z",
        "2026-03-04T12:00:00Z",
        "2027-01-01T00:00:00Z",
    ] {
        check(&always, now, true, None, None);
    }
    let weekdays = periods(UTC, &[("mon-fri", "00:00", "24:00")]);
    check(
        &weekdays,
        "2026-03-04T12:00:00Z",
        true,
        Some("2026-03-02T00:00:00Z"),
        Some("2026-03-07T00:00:00Z"),
    );
    check(
        &weekdays,
        "2026-03-07T00:00:00Z",
        false,
        Some("2026-03-07T00:00:00Z"),
        Some("2026-03-09T00:00:00Z"),
    );
    // Overlapping periods merge too.
    let overlapping = periods(
        UTC,
        &[
            ("mon", "09:00", "13:00"),
            ("mon", "12:00", "17:00"),
            ("mon", "17:00", "18:00"),
        ],
    );
    check(
        &overlapping,
        "2026-03-02T12:30:00Z",
        true,
        Some("2026-03-02T09:00:00Z"),
        Some("2026-03-02T18:00:00Z"),
    );
}

#[test]
fn equal_start_and_stop_is_a_whole_day() {
    let s = periods(UTC, &[("mon", "08:00", "08:00"), ("wed", "00:00", "00:00")]);
    check(
        &s,
        "2026-03-03T07:59:00Z",
        true,
        Some("2026-03-02T08:00:00Z"),
        Some("2026-03-03T08:00:00Z"),
    );
    check(
        &s,
        "2026-03-04T23:59:00Z",
        true,
        Some("2026-03-04T00:00:00Z"),
        Some("2026-03-05T00:00:00Z"),
    );
}

#[test]
fn minute_precision() {
    let s = periods(UTC, &[("mon-fri", "08:37", "17:00")]);
    check(
        &s,
        "2026-03-04T08:36:59Z",
        false,
        Some("2026-03-03T17:00:00Z"),
        Some("2026-03-04T08:37:00Z"),
    );
    check(
        &s,
        "2026-03-04T08:37:00Z",
        true,
        Some("2026-03-04T08:37:00Z"),
        Some("2026-03-04T17:00:00Z"),
    );
}

// ---- skipped dates ----

#[test]
fn skipped_date_keeps_its_window_closed() {
    // Wednesday 2026-03-04 is a holiday.
    let by_period = skipping(
        periods(UTC, &[("mon-fri", "09:00", "17:00")]),
        &["2026-03-04"],
    );
    let by_cron = skipping(cron(UTC, "0 9 * * 1-5", "0 17 * * 1-5"), &["2026-03-04"]);
    for s in [&by_period, &by_cron] {
        check(
            s,
            "2026-03-04T12:00:00Z",
            false,
            Some("2026-03-03T17:00:00Z"),
            Some("2026-03-05T09:00:00Z"),
        );
    }
}

#[test]
fn overnight_window_runs_into_a_skipped_date() {
    let by_period = skipping(
        periods(UTC, &[("mon-fri", "22:00", "06:00")]),
        &["2026-03-04"],
    );
    let by_cron = skipping(cron(UTC, "0 22 * * 1-5", "0 6 * * *"), &["2026-03-04"]);
    for s in [&by_period, &by_cron] {
        // Tuesday's window runs into the holiday.
        check(
            s,
            "2026-03-04T03:00:00Z",
            true,
            Some("2026-03-03T22:00:00Z"),
            Some("2026-03-04T06:00:00Z"),
        );
        // The holiday's own window does not open.
        check(
            s,
            "2026-03-04T23:00:00Z",
            false,
            Some("2026-03-04T06:00:00Z"),
            Some("2026-03-05T22:00:00Z"),
        );
    }
}

#[test]
fn cron_hours_open_at_the_first_start_not_skipped() {
    // Closes on Friday evenings; Saturday 2026-03-07 is a holiday, so Sunday's start opens.
    let s = skipping(cron(UTC, "0 9 * * *", "0 17 * * fri"), &["2026-03-07"]);
    check(
        &s,
        "2026-03-07T12:00:00Z",
        false,
        Some("2026-03-06T17:00:00Z"),
        Some("2026-03-08T09:00:00Z"),
    );
    check(
        &s,
        "2026-03-09T12:00:00Z",
        true,
        Some("2026-03-08T09:00:00Z"),
        Some("2026-03-13T17:00:00Z"),
    );
}

#[test]
fn skipped_date_ranges() {
    let s = skipping(
        periods(UTC, &[("mon-fri", "09:00", "17:00")]),
        &["2026-03-04..2026-03-06"],
    );
    check(
        &s,
        "2026-03-05T12:00:00Z",
        false,
        Some("2026-03-03T17:00:00Z"),
        Some("2026-03-09T09:00:00Z"),
    );
    assert!(open_at(&s, "2026-03-03T12:00:00Z"));
    assert!(open_at(&s, "2026-03-09T12:00:00Z"));
}

#[test]
fn last_window_before_a_long_skip() {
    let s = skipping(
        periods(UTC, &[("mon", "09:00", "17:00")]),
        &["2026-03-03..2027-12-31"],
    );
    check(
        &s,
        "2026-03-02T12:00:00Z",
        true,
        Some("2026-03-02T09:00:00Z"),
        Some("2026-03-02T17:00:00Z"),
    );
    check(
        &s,
        "2026-03-02T18:00:00Z",
        false,
        Some("2026-03-02T17:00:00Z"),
        None,
    );
}

#[test]
fn never_open_schedules_have_no_next() {
    let s = skipping(
        periods(UTC, &[("mon", "09:00", "17:00")]),
        &["2026-01-01..2028-12-31"],
    );
    check(&s, "2027-06-01T00:00:00Z", false, None, None);
}

// ---- properties ----

const ZONES: [Tz; 7] = [
    chrono_tz::America::New_York,
    chrono_tz::Europe::London,
    chrono_tz::Pacific::Auckland,
    chrono_tz::Asia::Kolkata,
    chrono_tz::Australia::Lord_Howe,
    chrono_tz::America::Sao_Paulo,
    chrono_tz::UTC,
];

/// DST transitions of the zones above in 2026-2027, to test around.
const TRANSITIONS: [&str; 12] = [
    "2026-03-08T07:00:00Z",
    "2026-11-01T06:00:00Z",
    "2027-03-14T07:00:00Z",
    "2026-03-29T01:00:00Z",
    "2026-10-25T01:00:00Z",
    "2026-04-04T14:00:00Z",
    "2026-09-26T14:00:00Z",
    "2026-04-04T15:00:00Z",
    "2026-10-03T15:30:00Z",
    "2027-04-03T15:00:00Z",
    "2027-10-02T15:30:00Z",
    "2027-04-03T14:00:00Z",
];

const DAY_NAMES: [&str; 7] = ["mon", "tue", "wed", "thu", "fri", "sat", "sun"];

fn instants() -> impl Strategy<Value = DateTime<Utc>> {
    let minutes = -3 * 24 * 60..3 * 24 * 60i64;
    let seconds = prop_oneof![Just(0i64), Just(59), 0..60i64];
    let near_transition = (
        prop::sample::select(&TRANSITIONS[..]),
        minutes,
        seconds.clone(),
    )
        .prop_map(|(t, m, s)| at(t) + TimeDelta::minutes(m) + TimeDelta::seconds(s));
    let anywhere = (0..2 * 365 * 24 * 60i64, seconds).prop_map(|(m, s)| {
        at("2026-01-01T00:00:00Z") + TimeDelta::minutes(m) + TimeDelta::seconds(s)
    });
    prop_oneof![near_transition, anywhere]
}

fn days() -> impl Strategy<Value = String> {
    let range =
        (0..7usize, 0..7usize).prop_map(|(a, b)| format!("{}-{}", DAY_NAMES[a], DAY_NAMES[b]));
    let list = (1u8..128).prop_map(|bits| {
        let names: Vec<&str> = (0..7)
            .filter(|d| bits & (1 << d) != 0)
            .map(|d| DAY_NAMES[d])
            .collect();
        names.join(",")
    });
    prop_oneof![range, list]
}

fn time_of_day() -> impl Strategy<Value = String> {
    let special = prop::sample::select(vec![
        "00:00", "24:00", "01:30", "02:00", "02:30", "03:00", "01:00", "12:00", "23:00",
    ])
    .prop_map(str::to_owned);
    let any = (0..24u32, 0..60u32).prop_map(|(h, m)| format!("{h:02}:{m:02}"));
    let quarter = (0..24u32, 0..4u32).prop_map(|(h, q)| format!("{h:02}:{:02}", q * 15));
    prop_oneof![special, any, quarter]
}

fn period_schedules() -> impl Strategy<Value = Schedule> {
    let periods = prop::collection::vec((days(), time_of_day(), time_of_day()), 1..4);
    (prop::sample::select(&ZONES[..]), periods).prop_map(|(tz, list)| Schedule {
        timezone: tz,
        hours: Hours::Periods(list.iter().map(|(d, a, b)| period(d, a, b)).collect()),
        skip: Vec::new(),
        workdays: Vec::new(),
    })
}

fn cron_expression() -> impl Strategy<Value = String> {
    let minute = prop_oneof![
        Just("0".to_owned()),
        Just("30".to_owned()),
        (0..60u32).prop_map(|m| m.to_string())
    ];
    let hour = prop_oneof![
        (0..24u32).prop_map(|h| h.to_string()),
        Just("1,2".to_owned()),
        (0..24u32, 0..24u32).prop_map(|(a, b)| format!("{},{}", a.min(b), a.max(b))),
    ];
    let day_of_month = prop_oneof![
        4 => Just("*".to_owned()),
        1 => (1..29u32).prop_map(|d| d.to_string()),
        1 => Just("1-15".to_owned()),
    ];
    let day_of_week = prop_oneof![
        Just("*".to_owned()),
        (0..8u32, 0..8u32).prop_map(|(a, b)| format!("{}-{}", a.min(b), a.max(b))),
        (0..7usize, 0..7usize).prop_map(|(a, b)| format!("{},{}", DAY_NAMES[a], DAY_NAMES[b])),
        Just("mon-fri".to_owned()),
    ];
    (minute, hour, day_of_month, day_of_week)
        .prop_map(|(m, h, dom, dow)| format!("{m} {h} {dom} * {dow}"))
}

fn cron_schedules() -> impl Strategy<Value = Schedule> {
    (
        prop::sample::select(&ZONES[..]),
        cron_expression(),
        cron_expression(),
    )
        .prop_map(|(tz, start, stop)| cron(tz, &start, &stop))
}

fn schedules() -> impl Strategy<Value = Schedule> {
    prop_oneof![period_schedules(), cron_schedules()]
}

/// A calendar of up to three short date ranges in 2026-2027, often none.
fn calendars() -> impl Strategy<Value = Vec<String>> {
    let range = (0..730u64, 0..5u64).prop_map(|(first, len)| {
        let first = NaiveDate::from_ymd_opt(2026, 1, 1).unwrap() + chrono::Days::new(first);
        format!("{first}..{}", first + chrono::Days::new(len))
    });
    prop::collection::vec(range, 0..4)
}

/// Schedules with skipped dates and make-up workdays (which periods open as the weekday given).
fn skipping_schedules() -> impl Strategy<Value = Schedule> {
    (schedules(), calendars(), calendars(), 0..7u8).prop_map(
        |(schedule, dates, workdays, as_day)| {
            let dates: Vec<&str> = dates.iter().map(String::as_str).collect();
            let mut schedule = skipping(schedule, &dates);
            schedule.workdays.push(Arc::new(Calendar {
                name: "makeup".into(),
                dates: Vec::new(),
                workdays: workdays
                    .iter()
                    .map(|d| Workday {
                        dates: d.parse().unwrap(),
                        as_day: Weekday::try_from(as_day).unwrap(),
                    })
                    .collect(),
            }));
            schedule
        },
    )
}

/// Checks the four properties of `status` at `now`, sampling the interval up to `next` at the
/// given fractions.
fn check_properties(
    schedule: &Schedule,
    now: DateTime<Utc>,
    fractions: &[f64],
) -> Result<(), TestCaseError> {
    let second = TimeDelta::seconds(1);
    let here = schedule.status(now);
    // (2) since is not after now, next is strictly after it.
    if let Some(since) = here.since {
        prop_assert!(since <= now, "since {since} after {now}: {here:?}");
    }
    if let Some(next) = here.next {
        prop_assert!(next > now, "next {next} not after {now}: {here:?}");
    }
    // (1) nothing changes before next.
    let end = here.next.unwrap_or(now + TimeDelta::days(3));
    let span = (end - now).num_seconds();
    let mut samples = vec![now, end - second];
    samples.extend(
        fractions
            .iter()
            .map(|f| now + TimeDelta::seconds((span as f64 * f) as i64)),
    );
    for u in samples.into_iter().filter(|u| *u >= now && *u < end) {
        let there = schedule.status(u);
        prop_assert_eq!(
            there.in_hours,
            here.in_hours,
            "at {} vs {}: {:?}",
            u,
            now,
            here
        );
        // The same change of state, unless the horizon has moved past it.
        match (here.since, there.since) {
            (Some(a), Some(b)) => prop_assert_eq!(a, b, "since at {} vs {}", u, now),
            (None, b) => prop_assert_eq!(b, None, "since at {} vs {}", u, now),
            (Some(_), None) => {}
        }
        if here.next.is_some() {
            prop_assert_eq!(there.next, here.next, "next at {} vs {}", u, now);
        }
    }
    // (3) next is a real transition, and the new state starts there.
    if let Some(next) = here.next {
        let after = schedule.status(next);
        prop_assert_ne!(after.in_hours, here.in_hours, "no change at next {}", next);
        prop_assert_ne!(after.in_hours, schedule.status(next - second).in_hours);
        prop_assert_eq!(
            after.since,
            Some(next),
            "since at next {}: {:?}",
            next,
            after
        );
    }
    // (4) since is a real transition.
    if let Some(since) = here.since {
        prop_assert_ne!(
            schedule.status(since - second).in_hours,
            here.in_hours,
            "no change at since {}",
            since
        );
    }
    Ok(())
}

proptest! {
    #[test]
    fn period_status_is_consistent(
        schedule in period_schedules(),
        now in instants(),
        fractions in prop::collection::vec(0.0..1.0f64, 4),
    ) {
        check_properties(&schedule, now, &fractions)?;
    }

    #[test]
    fn cron_status_is_consistent(
        schedule in cron_schedules(),
        now in instants(),
        fractions in prop::collection::vec(0.0..1.0f64, 4),
    ) {
        check_properties(&schedule, now, &fractions)?;
    }

    #[test]
    fn any_schedule_status_is_consistent_at_its_own_transitions(
        schedule in skipping_schedules(),
        now in instants(),
    ) {
        // Walk a few transitions forward, checking the properties at each.
        let mut t = now;
        for _ in 0..4 {
            check_properties(&schedule, t, &[0.5])?;
            match schedule.status(t).next {
                Some(next) => t = next,
                None => break,
            }
        }
    }

    #[test]
    fn same_day_periods_agree_with_cron(
        tz in prop::sample::select(&ZONES[..]),
        days in days(),
        (start, stop) in (0..24 * 60u32, 0..24 * 60u32)
            .prop_filter("start before stop", |(a, b)| a < b),
        now in instants(),
        skipped in calendars(),
    ) {
        // A window that does not pass midnight is a start and a stop event on the same days;
        // the two implementations must agree exactly.
        let hhmm = |m: u32| format!("{:02}:{:02}", m / 60, m % 60);
        // Cron ranges do not wrap, the canonical form does not either.
        let cron_days = days.parse::<DaySet>().unwrap().to_string();
        let skipped: Vec<&str> = skipped.iter().map(String::as_str).collect();
        let by_period = periods(tz, &[(&days, &hhmm(start), &hhmm(stop))]);
        let by_period = skipping(by_period, &skipped);
        let by_cron = cron(
            tz,
            &format!("{} {} * * {cron_days}", start % 60, start / 60),
            &format!("{} {} * * {cron_days}", stop % 60, stop / 60),
        );
        let by_cron = skipping(by_cron, &skipped);
        prop_assert_eq!(by_period.status(now), by_cron.status(now), "at {}", now);
    }

    #[test]
    fn day_sets_print_and_parse_back(text in days()) {
        let set: DaySet = text.parse().unwrap();
        let again: DaySet = set.to_string().parse().unwrap();
        prop_assert_eq!(set, again);
    }

    #[test]
    fn resolve_is_monotonic(
        tz in prop::sample::select(&ZONES[..]),
        instant in instants(),
        minutes in 0..180i64,
    ) {
        let local = instant.with_timezone(&tz).naive_local();
        let later = local + TimeDelta::minutes(minutes);
        prop_assert!(zone::resolve(tz, local) <= zone::resolve(tz, later));
        // A time that exists maps back to a time showing the same wall clock.
        let back = zone::resolve(tz, local).with_timezone(&tz).naive_local();
        prop_assert_eq!(back, local);
    }
}
