//! Make-up workdays (China's 调休): calendars' `workdays`, the schedule that opens on them as
//! the weekday they name, `validate`'s errors, and `ebb plan` and `ebb explain` with the
//! shipped Chinese calendar.

use crate::common::ebb;
use chrono::{DateTime, NaiveDate, Utc, Weekday};
use chrono_tz::Tz;
use ebb::schedule::*;
use std::path::Path;
use std::process::Output;
use std::sync::Arc;

const SHANGHAI: Tz = chrono_tz::Asia::Shanghai;

fn at(s: &str) -> DateTime<Utc> {
    s.parse().unwrap()
}

fn date(s: &str) -> NaiveDate {
    s.parse().unwrap()
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// Work hours in Shanghai on `periods` (days, start, stop).
fn shanghai(periods: &[(&str, &str, &str)]) -> Schedule {
    Schedule {
        timezone: SHANGHAI,
        hours: Hours::Periods(
            periods
                .iter()
                .map(|(days, start, stop)| Period {
                    days: days.parse().unwrap(),
                    start: start.parse().unwrap(),
                    stop: stop.parse().unwrap(),
                })
                .collect(),
        ),
        skip: Vec::new(),
        workdays: Vec::new(),
    }
}

/// A calendar named `name` with `dates` skipped and `workdays` (date, as).
fn calendar(name: &str, dates: &[&str], workdays: &[(&str, Weekday)]) -> Arc<Calendar> {
    Arc::new(Calendar {
        name: name.into(),
        dates: dates.iter().map(|d| d.parse().unwrap()).collect(),
        workdays: workdays
            .iter()
            .map(|(d, as_day)| Workday {
                dates: d.parse().unwrap(),
                as_day: *as_day,
            })
            .collect(),
    })
}

#[test]
fn a_make_up_saturday_opens_with_the_hours_of_the_weekday_it_works_as() {
    let mut s = shanghai(&[("mon-fri", "09:00", "18:00")]);
    // Without the calendar, Saturday 2026-02-14 is closed from Friday's close to Monday.
    let plain = s.status(at("2026-02-14T02:00:00Z"));
    assert!(!plain.in_hours);
    assert_eq!(plain.next, Some(at("2026-02-16T01:00:00Z")));
    s.workdays.push(calendar(
        "cn-workdays",
        &[],
        &[("2026-02-14", Weekday::Mon)],
    ));
    // Friday evening: the next opening is Saturday 09:00 Shanghai (01:00 UTC).
    let friday = s.status(at("2026-02-13T12:00:00Z"));
    assert_eq!(
        (friday.in_hours, friday.next),
        (false, Some(at("2026-02-14T01:00:00Z")))
    );
    // Saturday 10:00 Shanghai: open since 09:00, closing at 18:00.
    let saturday = s.status(at("2026-02-14T02:00:00Z"));
    assert_eq!(
        (saturday.in_hours, saturday.since, saturday.next),
        (
            true,
            Some(at("2026-02-14T01:00:00Z")),
            Some(at("2026-02-14T10:00:00Z"))
        )
    );
    // Sunday is a weekend day again.
    let sunday = s.status(at("2026-02-15T02:00:00Z"));
    assert_eq!(
        (sunday.in_hours, sunday.since, sunday.next),
        (
            false,
            Some(at("2026-02-14T10:00:00Z")),
            Some(at("2026-02-16T01:00:00Z"))
        )
    );
    assert_eq!(
        s.date_rule(date("2026-02-14")),
        Some(DateRule::WorkingDay {
            calendar: "cn-workdays",
            as_day: Weekday::Mon
        })
    );
    assert_eq!(s.date_rule(date("2026-02-15")), None);
}

#[test]
fn a_working_day_takes_the_periods_of_the_weekday_it_names_and_keeps_its_own() {
    let mut s = shanghai(&[
        ("mon", "09:00", "12:00"),
        ("fri", "13:00", "17:00"),
        ("sun", "20:00", "21:00"),
    ]);
    s.workdays
        .push(calendar("swap", &[], &[("2026-09-20", Weekday::Fri)]));
    // Sunday 2026-09-20 works as a Friday: 13:00-17:00, not Monday's 09:00-12:00...
    assert!(!s.status(at("2026-09-20T02:00:00Z")).in_hours);
    let afternoon = s.status(at("2026-09-20T06:00:00Z"));
    assert_eq!(
        (afternoon.in_hours, afternoon.since, afternoon.next),
        (
            true,
            Some(at("2026-09-20T05:00:00Z")),
            Some(at("2026-09-20T09:00:00Z"))
        )
    );
    // ...and its own Sunday period still opens.
    assert!(s.status(at("2026-09-20T12:30:00Z")).in_hours);
}

#[test]
fn a_working_day_wins_over_a_date_another_calendar_skips() {
    let mut s = shanghai(&[("mon-fri", "09:00", "18:00")]);
    s.skip
        .push(calendar("holidays", &["2026-10-01..2026-10-10"], &[]));
    assert!(!s.status(at("2026-10-10T02:00:00Z")).in_hours);
    assert!(
        !s.status(at("2026-10-09T02:00:00Z")).in_hours,
        "a skipped Friday"
    );
    s.workdays.push(calendar(
        "cn-workdays",
        &[],
        &[("2026-10-10", Weekday::Mon)],
    ));
    assert!(s.status(at("2026-10-10T02:00:00Z")).in_hours);
    assert!(!s.status(at("2026-10-09T02:00:00Z")).in_hours);
    assert_eq!(
        s.date_rule(date("2026-10-09")),
        Some(DateRule::Skipped {
            calendar: "holidays"
        })
    );
}

#[test]
fn an_overnight_window_of_a_working_day_runs_into_the_next_morning() {
    let mut s = shanghai(&[("mon-fri", "22:00", "02:00")]);
    s.workdays.push(calendar(
        "cn-workdays",
        &[],
        &[("2026-05-09", Weekday::Mon)],
    ));
    // Saturday 2026-05-09 22:00 Shanghai to Sunday 02:00.
    let night = s.status(at("2026-05-09T17:00:00Z"));
    assert_eq!(
        (night.in_hours, night.since, night.next),
        (
            true,
            Some(at("2026-05-09T14:00:00Z")),
            Some(at("2026-05-09T18:00:00Z"))
        )
    );
}

// ---- validate ----

/// A valid file: a calendar of each kind and a policy that names both.
const GOOD: &str = "\
calendars:
  holidays:
    dates: [\"2026-10-01..2026-10-07\"]
  makeup:
    workday_as: mon
    workdays:
      - \"2026-09-20\"
      - {date: \"2026-10-10\", as: fri}
policies:
  - name: dev
    match: {}
    work_hours:
      timezone: Asia/Shanghai
      periods:
        - {days: mon-fri, start: \"09:00\", stop: \"18:00\"}
      skip: [holidays]
      workdays: [makeup]
";

/// `ebb validate` on a directory holding `text` as `team.yaml`: its output lines, each
/// without the file's path, and whether it succeeded.
fn validate(text: &str) -> (bool, Vec<String>) {
    let d = tempfile::tempdir().unwrap();
    let file = d.path().join("team.yaml");
    std::fs::write(&file, text).unwrap();
    let o = ebb(&["validate", d.path().to_str().unwrap()]);
    let prefix = format!("{}:", file.display());
    let lines = stdout(&o)
        .lines()
        .map(|l| l.strip_prefix(&prefix).unwrap_or(l).to_string())
        .collect();
    (o.status.success(), lines)
}

#[test]
fn validate_checks_workdays_like_dates() {
    let (ok, lines) = validate(GOOD);
    assert!(ok, "{lines:?}");
    // The same error for a bad date under `dates` and under `workdays`.
    let (_, in_dates) = validate(&GOOD.replace("2026-10-01..2026-10-07", "2026-13-01"));
    let (ok, in_workdays) = validate(&GOOD.replace("\"2026-09-20\"", "\"2026-13-01\""));
    assert!(!ok);
    let message = "\"2026-13-01\" is not a date (YYYY-MM-DD or YYYY-MM-DD..YYYY-MM-DD)";
    // A calendar with a problem is left out, so the policy that names it says so too.
    assert_eq!(
        in_dates,
        [
            format!("3:13: {message}"),
            "16:14: unknown calendar \"holidays\"".into()
        ]
    );
    assert_eq!(
        in_workdays,
        [
            format!("7:9: {message}"),
            "17:18: unknown calendar \"makeup\"".into()
        ]
    );
    let cases = [
        (
            "{date: \"2026-10-10\", as: fri}",
            "{date: \"2026-10-12..2026-10-10\", as: fri}",
            "8:16: \"2026-10-12..2026-10-10\": the range ends before it starts (expected FIRST..LAST with FIRST on or before LAST)",
        ),
        (
            "as: fri}",
            "as: fry}",
            "8:34: \"fry\": unknown day \"fry\" (expected mon, tue, wed, thu, fri, sat, sun)",
        ),
        (
            "workday_as: mon",
            "workday_as: someday",
            "5:17: \"someday\": unknown day \"someday\"",
        ),
        (
            "{date: \"2026-10-10\", as: fri}",
            "{dates: \"2026-10-10\"}",
            "8:10: unknown key \"dates\" (did you mean \"date\"?)",
        ),
        (
            "workdays:\n      - \"2026-09-20\"\n      - {date: \"2026-10-10\", as: fri}",
            "workdays: \"2026-09-20\"",
            "6:15: expected a list of dates (YYYY-MM-DD or YYYY-MM-DD..YYYY-MM-DD), found a string",
        ),
        (
            "workdays: [makeup]",
            "workdays: [makeupp]",
            "17:18: unknown calendar \"makeupp\" (did you mean \"makeup\"?)",
        ),
        (
            "workdays: [makeup]",
            "workdays: [holidays]",
            "17:18: calendar \"holidays\" has dates to skip and no working days: name it under \"skip\"",
        ),
        (
            "skip: [holidays]",
            "skip: [makeup]",
            "16:14: calendar \"makeup\" has working days and no dates to skip: name it under \"workdays\"",
        ),
        (
            "    workday_as: mon\n    workdays:\n      - \"2026-09-20\"\n      - {date: \"2026-10-10\", as: fri}\n",
            "    description: nothing yet\n",
            "5:5: calendar \"makeup\" needs \"dates\" (days that open no window), \"workdays\" (working days whatever their weekday), or a \"file\" or \"url\" of them",
        ),
    ];
    for (from, to, want) in cases {
        assert!(GOOD.contains(from), "{from}");
        let (ok, lines) = validate(&GOOD.replace(from, to));
        assert!(!ok, "{to}: {lines:?}");
        assert!(
            lines.iter().any(|l| l.starts_with(want)),
            "want {want}\ngot {lines:?}"
        );
    }
}

#[test]
fn a_date_that_is_skipped_and_a_working_day_in_one_calendar_is_an_error() {
    let text = GOOD.replace(
        "  holidays:\n    dates: [\"2026-10-01..2026-10-07\"]\n",
        "  holidays:\n    dates: [\"2026-10-01..2026-10-07\"]\n    workdays: [\"2026-10-03\"]\n",
    );
    let (ok, lines) = validate(&text);
    assert!(!ok);
    assert_eq!(
        lines,
        [
            "4:15: calendar \"holidays\": 2026-10-03 is a working day and 2026-10-01..2026-10-07 a skipped date; a date is one or the other (remove it from \"dates\" or \"workdays\")",
            "17:14: unknown calendar \"holidays\"",
        ]
    );
}

#[test]
fn workdays_are_for_periods_not_cron_events() {
    let text = GOOD.replace(
        "      periods:\n        - {days: mon-fri, start: \"09:00\", stop: \"18:00\"}\n",
        "      cron: {start: \"0 9 * * mon-fri\", stop: \"0 18 * * mon-fri\"}\n",
    );
    let (ok, lines) = validate(&text);
    assert!(!ok);
    assert_eq!(
        lines,
        ["16:17: workdays is for periods: cron events open on the dates their expressions name (add the working days to them, or write periods)"]
    );
}

// ---- plan and explain with the shipped calendar ----

/// A directory with `policies/`: the repository's `policies/calendars.yaml` and a policy for
/// Beijing office hours on weekdays, the Chinese holidays skipped and the make-up workdays open;
/// and `fleet.yaml`: a running and a stopped GPU box.
fn chinese_policies() -> tempfile::TempDir {
    let d = tempfile::tempdir().unwrap();
    let policies = d.path().join("policies");
    std::fs::create_dir(&policies).unwrap();
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    std::fs::copy(
        root.join("policies/calendars.yaml"),
        policies.join("calendars.yaml"),
    )
    .unwrap();
    std::fs::write(
        policies.join("beijing.yaml"),
        "policies:\n  - name: beijing-gpu\n    match: {}\n    work_hours:\n      timezone: Asia/Shanghai\n      periods: [{days: mon-fri, start: \"09:00\", stop: \"19:00\"}]\n      skip: [cn-holidays]\n      workdays: [cn-workdays]\n      start_at_open: all\n",
    )
    .unwrap();
    std::fs::write(
        d.path().join("fleet.yaml"),
        "instances:\n  - {id: i-running, region: cn-hangzhou, type: ecs.gn7i-c8g1.2xlarge, state: running}\n  - {id: i-stopped, region: cn-hangzhou, type: ecs.gn7i-c8g1.2xlarge, state: stopped, state_since: 2026-01-01T00:00:00Z}\n",
    )
    .unwrap();
    d
}

/// `ebb COMMAND... --policies D/policies --fleet D/fleet.yaml --at AT`.
fn offline(d: &Path, command: &[&str], at: &str) -> Output {
    let policies = d.join("policies");
    let fleet = d.join("fleet.yaml");
    let mut args = command.to_vec();
    args.extend([
        "--policies",
        policies.to_str().unwrap(),
        "--fleet",
        fleet.to_str().unwrap(),
        "--at",
        at,
    ]);
    let o = ebb(&args);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    o
}

/// `ebb plan --format json` at `at`: (instance, action, code, reason) in instance order.
fn plan(d: &Path, at: &str) -> Vec<(String, String, String, String)> {
    let o = offline(d, &["plan", "--format", "json"], at);
    let items: Vec<serde_json::Value> = serde_json::from_slice(&o.stdout).unwrap();
    let mut rows: Vec<_> = items
        .iter()
        .map(|i| {
            let s = |k: &str| i[k].as_str().unwrap().to_string();
            (s("instance"), s("action"), s("code"), s("reason"))
        })
        .collect();
    rows.sort();
    rows
}

#[test]
fn plan_opens_a_mon_fri_policy_on_2026s_make_up_days_and_keeps_the_holidays_closed() {
    let d = chinese_policies();
    // 10:00 in Beijing on each day: (date in UTC at 02:00, open).
    let days = [
        ("2026-09-18", true),  // Friday
        ("2026-09-19", false), // Saturday
        ("2026-09-20", true),  // Sunday, a make-up workday for National Day
        ("2026-10-01", false), // Thursday, National Day
        ("2026-10-02", false), // Friday, National Day
        ("2026-10-05", false), // Monday, National Day
        ("2026-10-07", false), // Wednesday, National Day
        ("2026-10-08", true),  // Thursday
        ("2026-10-10", true),  // Saturday, a make-up workday for National Day
        ("2026-02-14", true),  // Saturday, a make-up workday for the Spring Festival
        ("2026-02-16", false), // Monday, Spring Festival
    ];
    for (day, open) in days {
        let rows = plan(d.path(), &format!("{day}T02:00:00Z"));
        let [running, stopped] = &rows[..] else {
            panic!("{rows:?}")
        };
        let want = if open {
            [("none", "in_hours"), ("start", "start_at_open")]
        } else {
            [("stop", "outside_hours"), ("none", "stopped_outside_hours")]
        };
        let got = [
            (running.1.as_str(), running.2.as_str()),
            (stopped.1.as_str(), stopped.2.as_str()),
        ];
        assert_eq!(got, want, "{day}: {rows:?}");
    }
    let rows = plan(d.path(), "2026-09-20T02:00:00Z");
    for row in &rows {
        assert!(
            row.3.contains(
                "2026-09-20 (sun) is a working day (调休) by cn-workdays: hours as on mon"
            ),
            "{row:?}"
        );
    }
    let rows = plan(d.path(), "2026-10-01T02:00:00Z");
    for row in &rows {
        assert!(
            row.3.contains("2026-10-01 (thu) is skipped by cn-holidays"),
            "{row:?}"
        );
    }
    let rows = plan(d.path(), "2026-09-18T02:00:00Z");
    assert!(rows.iter().all(|r| !r.3.contains("cn-")), "{rows:?}");
}

#[test]
fn explain_says_a_make_up_day_is_a_working_day_by_its_calendar() {
    let d = chinese_policies();
    let o = offline(d.path(), &["explain", "i-running"], "2026-10-10T02:00:00Z");
    let out = stdout(&o);
    assert!(
        out.contains("work hours (Asia/Shanghai): open since 09:00 Asia/Shanghai, close 19:00 Asia/Shanghai; 2026-10-10 (sat) is a working day (调休) by cn-workdays: hours as on mon"),
        "{out}"
    );
}

/// The shipped 2026 calendars written as an iCalendar file (the holidays, an all-day event per
/// range) and as holiday-cn's JSON (the holidays off, the make-up days on), as a team would
/// download them; a policy directory whose calendars are those files.
fn chinese_policies_from_files() -> tempfile::TempDir {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let shipped = ebb::policy::load(&[root.join("policies/calendars.yaml")]).unwrap();
    let (holidays, workdays) = (
        &shipped.calendars["cn-holidays"],
        &shipped.calendars["cn-workdays"],
    );
    let mut ics = String::from("BEGIN:VCALENDAR\r\nVERSION:2.0\r\nPRODID:-//ebb tests//EN\r\n");
    let mut days = Vec::new();
    for (k, range) in holidays.dates.iter().enumerate() {
        let end = range.last.succ_opt().unwrap();
        ics.push_str(&format!(
            "BEGIN:VEVENT\r\nUID:{k}@ebb\r\nSUMMARY:holiday {k}\r\nDTSTART;VALUE=DATE:{}\r\nDTEND;VALUE=DATE:{}\r\nEND:VEVENT\r\n",
            range.first.format("%Y%m%d"),
            end.format("%Y%m%d")
        ));
        for day in range.first.iter_days().take_while(|d| *d <= range.last) {
            days.push(
                serde_json::json!({"name": "holiday", "date": day.to_string(), "isOffDay": true}),
            );
        }
    }
    ics.push_str("END:VCALENDAR\r\n");
    for w in &workdays.workdays {
        days.push(serde_json::json!({"name": "调休", "date": w.dates.first.to_string(), "isOffDay": false}));
    }
    let d = chinese_policies();
    let policies = d.path().join("policies");
    std::fs::write(policies.join("cn-holidays.ics"), ics).unwrap();
    let json = serde_json::json!({"year": 2026, "papers": [], "days": days});
    std::fs::write(policies.join("cn-2026.json"), json.to_string()).unwrap();
    std::fs::write(
        policies.join("calendars.yaml"),
        "calendars:\n  cn-holidays:\n    file: cn-holidays.ics\n  cn-workdays:\n    file: cn-2026.json\n    format: holiday-cn\n",
    )
    .unwrap();
    d
}

#[test]
fn calendars_from_an_ics_file_and_a_holiday_cn_file_open_and_skip_the_yaml_ones_days() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let shipped = ebb::policy::load(&[root.join("policies/calendars.yaml")]).unwrap();
    let from_files = chinese_policies_from_files();
    let policies = from_files.path().join("policies");
    let loaded = ebb::policy::load(std::slice::from_ref(&policies)).unwrap();
    // Every day of 2026 is skipped, or a working day, by both alike; the holiday-cn file's
    // off days are its skipped dates.
    let (ics, json) = (
        &loaded.calendars["cn-holidays"],
        &loaded.calendars["cn-workdays"],
    );
    for day in date("2026-01-01").iter_days().take(365) {
        let holiday = shipped.calendars["cn-holidays"].contains(day);
        assert_eq!(ics.contains(day), holiday, "{day}");
        assert_eq!(json.contains(day), holiday, "{day}");
        assert_eq!(
            json.working_day(day),
            shipped.calendars["cn-workdays"].working_day(day),
            "{day}"
        );
    }
    // The policies open and close alike, and the files are part of the policy version.
    let yaml = chinese_policies();
    for day in [
        "2026-09-20",
        "2026-10-01",
        "2026-10-10",
        "2026-02-16",
        "2026-09-18",
    ] {
        let at = format!("{day}T02:00:00Z");
        let codes = |rows: Vec<(String, String, String, String)>| -> Vec<(String, String)> {
            rows.into_iter().map(|r| (r.1, r.2)).collect()
        };
        assert_eq!(
            codes(plan(from_files.path(), &at)),
            codes(plan(yaml.path(), &at)),
            "{day}"
        );
    }
    let before = loaded.version.content_hash.clone();
    std::fs::write(
        policies.join("cn-holidays.ics"),
        "BEGIN:VCALENDAR\r\nVERSION:2.0\r\nEND:VCALENDAR\r\n",
    )
    .unwrap();
    let changed = ebb::policy::load(std::slice::from_ref(&policies)).unwrap();
    assert_ne!(changed.version.content_hash, before);
    assert_eq!(changed.calendar_files.len(), 2);
}

#[test]
fn a_calendar_file_that_cannot_be_read_is_a_problem_at_its_key() {
    for (calendar, line, says) in [
        ("file: missing.ics", "3:", "cannot read calendar file"),
        (
            "file: dates.txt",
            "3:",
            "say the format of dates.txt (format: ics or holiday-cn)",
        ),
        (
            "file: dates.txt\n    format: pdf",
            "4:",
            "unknown format \"pdf\": use ics or holiday-cn",
        ),
    ] {
        let text = format!(
            "calendars:\n  holidays:\n    {calendar}\npolicies:\n  - name: p\n    match: {{}}\n    work_hours:\n      timezone: UTC\n      periods: [{{days: mon-fri, start: \"09:00\", stop: \"18:00\"}}]\n      skip: [holidays]\n"
        );
        let (ok, lines) = validate(&text);
        assert!(!ok, "{calendar}");
        assert!(
            lines
                .iter()
                .any(|l| l.starts_with(line) && l.contains(says)),
            "{calendar}: {lines:?}"
        );
    }
}

/// In 2027, which the shipped calendars do not cover yet, a decision says it takes the day as
/// an ordinary one: the Spring Festival week opens as any week would.
#[test]
fn a_decision_on_a_day_its_calendars_do_not_cover_says_so() {
    let d = chinese_policies();
    let rows = plan(d.path(), "2027-02-08T02:00:00Z");
    assert!(!rows.is_empty());
    for row in &rows {
        assert!(
            row.3.contains("calendars cn-holidays, cn-workdays name no date in 2027: 2027-02-08 is taken as an ordinary day (add 2027's dates)"),
            "{row:?}"
        );
    }
    // A day they cover says nothing of it.
    let rows = plan(d.path(), "2026-09-18T02:00:00Z");
    assert!(
        rows.iter().all(|r| !r.3.contains("names no date")),
        "{rows:?}"
    );
}
