//! `ebb replay` on hand-made traces whose answers are worked out by hand in each test, through
//! the built binary: an office box under office hours, a notebook under an idle rule, a
//! training run past the close under busy deferral; and the errors a user can hit.

use crate::common::ebb;
use serde_json::Value;
use std::path::Path;
use std::process::Command;

/// The tick every test replays at, in hours: the tolerance is one tick.
const TICK_H: f64 = 5.0 / 60.0;

/// A directory holding `files`.
fn dir(files: &[(&str, &str)]) -> tempfile::TempDir {
    let d = tempfile::tempdir().unwrap();
    for (name, text) in files {
        std::fs::write(d.path().join(name), text).unwrap();
    }
    d
}

fn at(s: &str) -> chrono::DateTime<chrono::Utc> {
    ebb::when::parse_time(s).unwrap()
}

/// The CSV of one instance sampled every 5 minutes over `[from, to)`, at `percent(time)`.
fn trace(
    instance: &str,
    from: &str,
    to: &str,
    percent: impl Fn(chrono::DateTime<chrono::Utc>) -> f64,
) -> String {
    let mut csv = String::from("instance,time,gpu_util\n");
    let mut t = at(from);
    while t < at(to) {
        csv.push_str(&format!(
            "{instance},{},{}\n",
            t.format("%Y-%m-%dT%H:%M:%SZ"),
            percent(t)
        ));
        t += chrono::Duration::minutes(5);
    }
    csv
}

/// Busy (60 %) when `t` falls in one of `spans` (RFC 3339 pairs), idle (1 %) otherwise.
fn busy_in(
    spans: &'static [(&'static str, &'static str)],
) -> impl Fn(chrono::DateTime<chrono::Utc>) -> f64 {
    move |t| {
        if spans.iter().any(|(a, b)| at(a) <= t && t < at(b)) {
            60.0
        } else {
            1.0
        }
    }
}

/// `ebb replay --format json` over the files in `d` (policies/, fleet.yaml, util.csv).
fn replay(d: &Path, from: &str, to: &str, extra: &[&str]) -> Value {
    let p = |name: &str| d.join(name).to_str().unwrap().to_string();
    let (policies, fleet, util) = (p("policies"), p("fleet.yaml"), p("util.csv"));
    let mut args = vec![
        "replay",
        "--policies",
        &policies,
        "--fleet",
        &fleet,
        "--utilisation",
        &util,
        "--from",
        from,
        "--to",
        to,
        "--format",
        "json",
    ];
    args.extend(extra);
    let o = ebb(&args);
    assert!(
        o.status.success(),
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    serde_json::from_slice(&o.stdout).unwrap()
}

/// Writes `policies/p.yaml`, `fleet.yaml` and `util.csv` into a new directory.
fn files(policy: &str, fleet: &str, csv: &str) -> tempfile::TempDir {
    let d = dir(&[("fleet.yaml", fleet), ("util.csv", csv)]);
    std::fs::create_dir(d.path().join("policies")).unwrap();
    std::fs::write(d.path().join("policies/p.yaml"), policy).unwrap();
    d
}

/// Asserts the hours and dollars of `m` within one tick of the hand calculation, and its
/// counts exactly.
fn assert_measures(m: &Value, hours: [f64; 3], price: f64, counts: [u64; 3]) {
    let close = |key: &str, want: f64, within: f64| {
        let got = m[key].as_f64().unwrap_or_else(|| panic!("{key} in {m}"));
        assert!(
            (got - want).abs() <= within + 1e-9,
            "{key}: {got}, by hand {want} (within {within}) in {m}"
        );
    };
    close("running_hours", hours[0], TICK_H);
    close("idle_running_hours", hours[1], TICK_H);
    close("unserved_busy_hours", hours[2], TICK_H);
    close("cost_usd", hours[0] * price, TICK_H * price);
    let count = |key: &str| m[key].as_u64().unwrap();
    assert_eq!(
        [count("stops"), count("starts"), count("wrongful_stops")],
        counts,
        "stops, starts, wrongful stops in {m}"
    );
}

const OFFICE: &str = "
policies:
  - name: office
    match: {tags: {team: office}}
    work_hours:
      timezone: UTC
      periods: [{days: mon-fri, start: \"08:00\", stop: \"18:00\"}]
";

const OFFICE_FLEET: &str = "
instances:
  - id: i-office
    region: us-east-1
    type: g5.xlarge
    state: stopped
    state_since: 2026-11-27T18:00:00Z
    stopped_by_ebb_at: 2026-11-27T18:00:00Z
    tags: {team: office}
prices:
  us-east-1: {g5.xlarge: {on_demand: 1.0}}
";

const OFFICE_BUSY: &[(&str, &str)] = &[
    ("2026-11-30T09:00:00Z", "2026-11-30T17:00:00Z"),
    ("2026-12-01T09:00:00Z", "2026-12-01T17:00:00Z"),
    ("2026-12-02T09:00:00Z", "2026-12-02T17:00:00Z"),
    ("2026-12-03T09:00:00Z", "2026-12-03T17:00:00Z"),
    ("2026-12-04T09:00:00Z", "2026-12-04T17:00:00Z"),
];

/// An office box busy 09:00-17:00 Monday to Friday under 08:00-18:00 hours, $1/h. By hand:
/// ebb starts it at each 08:00 and stops it at each 18:00: 5 × 10 h = 50 h, of which 5 × 2 h
/// idle, $50; always on is 120 h ($120, 80 h idle), the oracle 40 h ($40, 5 starts, 5 stops);
/// savings $70, waste over the oracle 25 %. Nothing unserved, no wrongful stop.
#[test]
fn an_office_box_under_office_hours_matches_the_hand_calculation() {
    let (from, to) = ("2026-11-30T00:00:00Z", "2026-12-05T00:00:00Z");
    let d = files(
        OFFICE,
        OFFICE_FLEET,
        &trace("i-office", from, to, busy_in(OFFICE_BUSY)),
    );
    let r = replay(d.path(), from, to, &[]);
    assert_eq!(
        (r["from"].as_str(), r["to"].as_str()),
        (Some(from), Some(to))
    );
    let s = &r["scenarios"];
    assert_measures(&s["policies"], [50.0, 10.0, 0.0], 1.0, [5, 5, 0]);
    assert_measures(&s["always_on"], [120.0, 80.0, 0.0], 1.0, [0, 0, 0]);
    assert_measures(&s["oracle"], [40.0, 0.0, 0.0], 1.0, [5, 5, 0]);
    let savings = s["policies"]["savings_vs_always_on_usd"].as_f64().unwrap();
    assert!((savings - 70.0).abs() <= TICK_H, "{savings}");
    let waste = s["policies"]["waste_over_oracle_pct"].as_f64().unwrap();
    assert!((waste - 25.0).abs() <= 100.0 * TICK_H / 40.0, "{waste}");
    assert!(s.get("baseline").is_none(), "no baseline asked for: {s}");
    // The same numbers per policy and per instance.
    assert_eq!(r["policies"][0]["policy"], "office");
    assert_eq!(r["policies"][0]["scenarios"], *s);
    assert_eq!(r["instances"][0]["instance"], "i-office");
    assert_eq!(r["instances"][0]["policy"], "office");
    assert_eq!(r["instances"][0]["scenarios"], *s);
}

/// The office box against a baseline of 07:00-20:00 hours (65 h, $65): the Markdown comment
/// puts both side by side with the difference, and names the instance.
#[test]
fn markdown_compares_the_baseline_and_the_policies() {
    let (from, to) = ("2026-11-30T00:00:00Z", "2026-12-05T00:00:00Z");
    let d = files(
        OFFICE,
        OFFICE_FLEET,
        &trace("i-office", from, to, busy_in(OFFICE_BUSY)),
    );
    let base = d.path().join("base");
    std::fs::create_dir(&base).unwrap();
    std::fs::write(
        base.join("p.yaml"),
        OFFICE
            .replace("\"08:00\"", "\"07:00\"")
            .replace("\"18:00\"", "\"20:00\""),
    )
    .unwrap();
    let base = base.to_str().unwrap();
    let r = replay(d.path(), from, to, &["--baseline-policies", base]);
    assert_measures(
        &r["scenarios"]["baseline"],
        [65.0, 25.0, 0.0],
        1.0,
        [5, 5, 0],
    );
    let p = |name: &str| d.path().join(name).to_str().unwrap().to_string();
    let (policies, fleet, util) = (p("policies"), p("fleet.yaml"), p("util.csv"));
    let o = ebb(&[
        "replay",
        "--policies",
        &policies,
        "--fleet",
        &fleet,
        "--utilisation",
        &util,
        "--from",
        from,
        "--to",
        to,
        "--baseline-policies",
        base,
        "--format",
        "markdown",
    ]);
    assert!(o.status.success());
    let md = String::from_utf8_lossy(&o.stdout);
    assert!(
        md.contains("| | baseline | policies | difference |"),
        "{md}"
    );
    assert!(
        md.contains("| cost (USD) | 65.00 | 50.00 | -15.00 |"),
        "{md}"
    );
    assert!(
        md.contains("| running hours | 65.0 | 50.0 | -15.0 |"),
        "{md}"
    );
    assert!(
        md.contains("| i-office | office | 65.00 | 50.00 | -15.00 |"),
        "{md}"
    );
}

const NOTEBOOK: &str = "
policies:
  - name: notebooks
    match: {tags: {kind: notebook}}
    idle: {gpu_below: 5, for: 45m}
";

/// One notebook, running since before the replay, at $2/h.
const NOTEBOOK_FLEET: &str = "
instances:
  - id: i-notebook
    region: eu-central-1
    type: g5.xlarge
    state: running
    launched_at: 2026-11-29T00:00:00Z
    tags: {kind: notebook}
prices:
  eu-central-1: {g5.xlarge: {on_demand: 2.0}}
";

/// A notebook used Tuesday 10:00-12:00 and Thursday 14:00-16:00 under an idle rule (below 5 %
/// for 45 minutes), $2/h, over a week. By hand: samples start Monday 00:00, so the 45-minute
/// window is first covered at 00:35 (its first sample 10 minutes in): stopped then (35 min).
/// Tuesday's 10:00 demand finds it stopped: 5 minutes unserved, its person starts it at 10:05;
/// the last busy sample is 11:55, so the window is idle from 12:45: stopped (160 min, 45 idle).
/// Thursday the same. Running 35 + 2 × 160 = 355 min, idle 35 + 2 × 45 = 125 min, unserved
/// 10 min; 3 stops, 2 starts (a person's), none wrongful. The oracle runs 4 h.
#[test]
fn a_notebook_used_twice_a_week_under_an_idle_rule_matches_the_hand_calculation() {
    let (from, to) = ("2026-11-30T00:00:00Z", "2026-12-07T00:00:00Z");
    let fleet = NOTEBOOK_FLEET;
    let used: &[(&str, &str)] = &[
        ("2026-12-01T10:00:00Z", "2026-12-01T12:00:00Z"),
        ("2026-12-03T14:00:00Z", "2026-12-03T16:00:00Z"),
    ];
    let d = files(
        NOTEBOOK,
        fleet,
        &trace("i-notebook", from, to, busy_in(used)),
    );
    let s = &replay(d.path(), from, to, &[])["scenarios"];
    assert_measures(
        &s["policies"],
        [355.0 / 60.0, 125.0 / 60.0, 10.0 / 60.0],
        2.0,
        [3, 2, 0],
    );
    assert_measures(&s["always_on"], [168.0, 164.0, 0.0], 2.0, [0, 0, 0]);
    assert_measures(&s["oracle"], [4.0, 0.0, 0.0], 2.0, [2, 2, 0]);
}

/// A training run 10:00-21:00 on a box under 08:00-18:00 hours with busy deferral, $3/h, over
/// Monday. By hand: started at 08:00; at 18:00 and after, a busy sample in the last 10 minutes
/// defers the stop; the last busy sample is 20:55, so 21:10 is the first tick without one:
/// stopped then. Running 13 h 10 min, 2 h 10 min idle, nothing unserved, one start, one stop.
#[test]
fn a_training_run_past_the_close_is_deferred_and_leaves_no_unserved_demand() {
    let (from, to) = ("2026-11-30T00:00:00Z", "2026-12-01T00:00:00Z");
    let fleet = "
instances:
  - id: i-train
    region: us-east-1
    type: p4d.24xlarge
    state: stopped
    state_since: 2026-11-27T18:00:00Z
    stopped_by_ebb_at: 2026-11-27T18:00:00Z
    tags: {team: office}
prices:
  us-east-1: {p4d.24xlarge: {on_demand: 3.0}}
";
    let run: &[(&str, &str)] = &[("2026-11-30T10:00:00Z", "2026-11-30T21:00:00Z")];
    let d = files(OFFICE, fleet, &trace("i-train", from, to, busy_in(run)));
    let s = &replay(d.path(), from, to, &[])["scenarios"];
    assert_measures(
        &s["policies"],
        [13.0 + 10.0 / 60.0, 2.0 + 10.0 / 60.0, 0.0],
        3.0,
        [1, 1, 0],
    );
    assert_eq!(s["policies"]["unserved_busy_hours"].as_f64(), Some(0.0));
    // Without deferral the close cuts the run. By hand: stopped at 18:00; its person starts it
    // at 18:05, a late start, kept until idle for an hour: the last busy sample is 20:55, so
    // 22:00 is the first tick whose hour has none: stopped then. Running 10 h + 3 h 55 min,
    // 2 h + 1 h idle, 5 min unserved; 2 stops (the first wrongful), 2 starts.
    let d = files(
        &OFFICE.replace("periods:", "busy_defers_stop: false\n      periods:"),
        fleet,
        &trace("i-train", from, to, busy_in(run)),
    );
    let s = &replay(d.path(), from, to, &[])["scenarios"];
    assert_measures(
        &s["policies"],
        [13.0 + 55.0 / 60.0, 3.0, 5.0 / 60.0],
        3.0,
        [2, 2, 1],
    );
    // With `late_start: enforce`, in the same replay: ebb stops it again at 18:10, its person
    // starts it at 18:15, and so on until the stop at 21:00 after the run: 19 stops, 18 of them
    // wrongful, 1 + 18 starts, 18 × 5 min unserved, running 10 h + 18 × 5 min.
    assert_measures(
        &s["late_start_enforce"],
        [11.5, 2.0, 1.5],
        3.0,
        [19, 19, 18],
    );
}

/// The mistakes a user can make get a message naming the file and line and what to do, and
/// no report.
#[test]
fn bad_input_is_refused_with_the_file_line_and_what_to_do() {
    let (from, to) = ("2026-11-30T00:00:00Z", "2026-12-01T00:00:00Z");
    let good = trace("i-office", from, "2026-11-30T00:15:00Z", |_| 1.0);
    let cases: [(&str, String, &str, &str); 6] = [
        (
            "bad time",
            good.replace("2026-11-30T00:05:00Z", "monday"),
            "util.csv:3: \"monday\" is not an RFC 3339 time",
            to,
        ),
        (
            "bad percent",
            good.replace("00:05:00Z,1", "00:05:00Z,140"),
            "util.csv:3: gpu_util \"140\" is not a percent from 0 to 100",
            to,
        ),
        (
            "short line",
            format!("{good}i-office,2026-11-30T00:20:00Z\n"),
            "util.csv:5: ",
            to,
        ),
        (
            "unknown instance",
            format!("{good}i-nope,2026-11-30T00:20:00Z,3\n"),
            "util.csv:5: instance i-nope is not in the fleet file",
            to,
        ),
        (
            "bad header",
            good.replacen("gpu_util", "util", 1),
            "util.csv:1: the header is \"instance,time,util\"; it must be instance,time,gpu_util, optionally followed by gpu_mem_mib and gpus_busy",
            to,
        ),
        (
            "to before from",
            good.clone(),
            "--to 2026-11-29T00:00:00+00:00 is not after --from",
            "2026-11-29T00:00:00Z",
        ),
    ];
    for (case, csv, message, to) in cases {
        let d = files(OFFICE, OFFICE_FLEET, &csv);
        let p = |name: &str| d.path().join(name).to_str().unwrap().to_string();
        let (policies, fleet, util) = (p("policies"), p("fleet.yaml"), p("util.csv"));
        let o = ebb(&[
            "replay",
            "--policies",
            &policies,
            "--fleet",
            &fleet,
            "--utilisation",
            &util,
            "--from",
            from,
            "--to",
            to,
        ]);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{case}: {err}");
        assert!(err.contains(message), "{case}: {err}");
        assert!(o.stdout.is_empty(), "{case}: no report");
    }
}

/// Rows in any order replay as the same rows grouped by instance: rows of one instance apart
/// (a concatenation of two exports), out of time order within an instance, or the whole file
/// in time order as Prometheus and DCGM dumps are (sorted through temporary files).
#[test]
fn rows_in_any_order_replay_as_the_file_grouped_by_instance() {
    let (from, to) = ("2026-11-30T00:00:00Z", "2026-12-01T00:00:00Z");
    let fleet = OFFICE_FLEET.replace(
        "prices:",
        "  - {id: i-other, region: us-east-1, type: g5.xlarge, state: running, tags: {team: office}}\nprices:",
    );
    let ordered = "instance,time,gpu_util\ni-office,2026-11-30T00:00:00Z,1\ni-office,2026-11-30T00:05:00Z,50\ni-other,2026-11-30T00:00:00Z,1\n";
    let apart = "instance,time,gpu_util\ni-office,2026-11-30T00:00:00Z,1\ni-other,2026-11-30T00:00:00Z,1\ni-office,2026-11-30T00:05:00Z,50\n";
    let shuffled = "instance,time,gpu_util\ni-office,2026-11-30T00:05:00Z,50\ni-office,2026-11-30T00:00:00Z,1\ni-other,2026-11-30T00:00:00Z,1\n";
    let a = replay(files(OFFICE, &fleet, ordered).path(), from, to, &[]);
    assert_eq!(a["instances"].as_array().unwrap().len(), 2);
    assert!(a["scenarios"]["oracle"]["running_hours"].as_f64().unwrap() > 0.0);
    for other in [apart, shuffled] {
        assert_eq!(
            replay(files(OFFICE, &fleet, other).path(), from, to, &[]),
            a
        );
    }

    // A day of both boxes, office hours busy, written instance by instance and in time order.
    let office = trace(
        "i-office",
        from,
        to,
        busy_in(&[("2026-11-30T09:00:00Z", "2026-11-30T17:00:00Z")]),
    );
    let other = trace(
        "i-other",
        from,
        to,
        busy_in(&[("2026-11-30T13:00:00Z", "2026-11-30T15:00:00Z")]),
    );
    let grouped = format!(
        "{office}{}",
        other.replacen("instance,time,gpu_util\n", "", 1)
    );
    let (o, t): (Vec<&str>, Vec<&str>) = (
        office.lines().skip(1).collect(),
        other.lines().skip(1).collect(),
    );
    let mut by_time = String::from("instance,time,gpu_util\n");
    for (a, b) in o.iter().zip(&t) {
        by_time.push_str(&format!("{b}\n{a}\n"));
    }
    let g = replay(files(OFFICE, &fleet, &grouped).path(), from, to, &[]);
    let b = replay(files(OFFICE, &fleet, &by_time).path(), from, to, &[]);
    assert_eq!(g, b);
    // The busy hours are there, so the comparison is of something.
    assert!(g["scenarios"]["oracle"]["running_hours"].as_f64().unwrap() >= 10.0);

    // An instance not in the fleet is refused in a time-ordered file as in a grouped one.
    let stray = by_time.replacen("i-other", "i-stray", 1);
    let d = files(OFFICE, &fleet, &stray);
    let p = |name: &str| d.path().join(name).to_str().unwrap().to_string();
    let (policies, fleet_file, util) = (p("policies"), p("fleet.yaml"), p("util.csv"));
    let o = ebb(&[
        "replay",
        "--policies",
        &policies,
        "--fleet",
        &fleet_file,
        "--utilisation",
        &util,
        "--from",
        from,
        "--to",
        to,
    ]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("util.csv:2: instance i-stray is not in the fleet file"),
        "{err}"
    );
}

/// The optional columns `ebb metrics export` writes (`gpu_mem_mib`, `gpus_busy`), in either
/// order and with empty cells, load: under policies that do not look at memory the replay is
/// the one of the three columns alone.
#[test]
fn files_with_the_memory_and_busy_columns_replay_as_without_them() {
    let (from, to) = ("2026-11-30T00:00:00Z", "2026-12-01T00:00:00Z");
    let plain = trace(
        "i-office",
        from,
        to,
        busy_in(&[("2026-11-30T09:00:00Z", "2026-11-30T17:00:00Z")]),
    );
    let mut lines = plain.lines();
    lines.next();
    let mut with = String::from("instance,time,gpu_util,gpus_busy,gpu_mem_mib\n");
    for (k, line) in lines.enumerate() {
        let extra = match k % 3 {
            0 => ",1,12288",
            1 => ",,",
            _ => ",0,",
        };
        with.push_str(&format!("{line}{extra}\n"));
    }
    let a = replay(files(OFFICE, OFFICE_FLEET, &plain).path(), from, to, &[]);
    let b = replay(files(OFFICE, OFFICE_FLEET, &with).path(), from, to, &[]);
    assert_eq!(a, b);
    assert!(a["scenarios"]["oracle"]["running_hours"].as_f64().unwrap() > 0.0);
}

/// A spot move happens at the snapshot's spot price, and an override in the snapshot blocks
/// stops until it ends. By hand: the interruptible box (on-demand $10/h, spot $3/h, checkpoint
/// fresh) moves at the first tick and runs the 10 h on spot: $30, where always on pays $100.
#[test]
fn spot_moves_are_costed_at_the_spot_price() {
    let (from, to) = ("2026-11-30T00:00:00Z", "2026-11-30T10:00:00Z");
    let policy = "
policies:
  - name: training
    match: {tags: {workload: training}}
    spot: {min_savings: 40%, checkpoint_max_age: 30m}
";
    let fleet = "
instances:
  - id: i-train
    region: us-east-1
    type: p4d.24xlarge
    state: running
    launched_at: 2026-11-29T00:00:00Z
    tags: {workload: training, \"ebb:interruptible\": \"true\", \"ebb:checkpoint-at\": \"2026-11-30T00:00:00Z\"}
prices:
  us-east-1: {p4d.24xlarge: {on_demand: 10.0, spot: 3.0}}
";
    let d = files(policy, fleet, &trace("i-train", from, to, |_| 95.0));
    let s = &replay(d.path(), from, to, &[])["scenarios"];
    assert_measures(&s["policies"], [10.0, 0.0, 0.0], 3.0, [0, 0, 0]);
    assert_measures(&s["always_on"], [10.0, 0.0, 0.0], 10.0, [0, 0, 0]);
    assert_eq!(
        s["policies"]["savings_vs_always_on_usd"].as_f64(),
        Some(70.0)
    );
    // All 10 hours on spot, none on demand after a fallback; always on never moves.
    assert_eq!(s["policies"]["spot_hours"].as_f64(), Some(10.0));
    assert_eq!(
        s["policies"]["fallback_on_demand_hours"].as_f64(),
        Some(0.0)
    );
    assert_eq!(s["always_on"]["spot_hours"].as_f64(), Some(0.0));
}

/// The office box with an override until Monday 20:00: Monday's stop waits until then (12 h
/// that day, 52 h in the week).
#[test]
fn an_override_in_the_snapshot_blocks_stops_until_it_ends() {
    let (from, to) = ("2026-11-30T00:00:00Z", "2026-12-05T00:00:00Z");
    let fleet = format!(
        "{OFFICE_FLEET}overrides:\n  - {{instance: i-office, until: 2026-11-30T20:00:00Z, reason: demo}}\n"
    );
    let d = files(
        OFFICE,
        &fleet,
        &trace("i-office", from, to, busy_in(OFFICE_BUSY)),
    );
    let s = &replay(d.path(), from, to, &[])["scenarios"];
    assert_measures(&s["policies"], [52.0, 12.0, 0.0], 1.0, [5, 5, 0]);
}

/// The demo week's recording, from the workload generator, of the demo fleet with `extra`
/// (more instances, as YAML list items) added, replayed under the example policies with the
/// shipped price table for every region: the fleet replayed and the JSON report. Without
/// prices for ap-east-1 the replay cannot cost and says so.
fn demo_week(extra: &str) -> (ebb::fleet::Fleet, Value) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let d = tempfile::tempdir().unwrap();
    let demo = d.path().join("demo-fleet.yaml");
    let text = std::fs::read_to_string(root.join("deploy/demo-fleet.yaml")).unwrap();
    // The instances' list ends where the groups' begins.
    let (instances, rest) = text.split_once("\ngroups:").unwrap();
    std::fs::write(&demo, format!("{instances}\n{extra}groups:{rest}")).unwrap();
    let (fleet, behaviours) = ebb::snapshot::load_simulation(&demo).unwrap();
    let (from, to) = ("2026-11-30T00:00:00Z", "2026-12-07T00:00:00Z");
    let mut csv = Vec::new();
    let rows = ebb::cloud::sim::write_utilisation(&fleet, &behaviours, at(from), at(to), &mut csv)
        .unwrap();
    assert!(rows > 20 * 7 * 288, "{rows}");
    std::fs::write(d.path().join("util.csv"), csv).unwrap();
    let table: serde_yaml::Value =
        serde_yaml::from_str(&std::fs::read_to_string(root.join("deploy/prices.yaml")).unwrap())
            .unwrap();
    let us = table["prices"]["us-east-1"].clone();
    let regions = ["ap-east-1", "eu-central-1", "us-east-1", "us-west-2"];
    let prices = serde_yaml::to_string(&serde_json::json!({
        "source": "deploy/prices.yaml's us-east-1, for every region",
        "as_of": "2025-05-01",
        "prices": regions.iter().map(|r| (r.to_string(), serde_json::to_value(&us).unwrap())).collect::<serde_json::Map<_, _>>(),
    }))
    .unwrap();
    std::fs::write(d.path().join("prices.yaml"), prices).unwrap();
    let p = |name: &str| d.path().join(name).to_str().unwrap().to_string();
    let (util, prices) = (p("util.csv"), p("prices.yaml"));
    let args = [
        "replay",
        "--policies",
        "policies",
        "--fleet",
        demo.to_str().unwrap(),
        "--utilisation",
        &util,
        "--from",
        from,
        "--to",
        to,
        "--format",
        "json",
    ];
    let o = Command::new(env!("CARGO_BIN_EXE_ebb"))
        .args(args)
        .current_dir(root)
        .output()
        .unwrap();
    assert_eq!(
        o.status.code(),
        Some(2),
        "without prices for ap-east-1 it cannot cost"
    );
    assert!(String::from_utf8_lossy(&o.stderr).contains("no on-demand price for"));
    let o = Command::new(env!("CARGO_BIN_EXE_ebb"))
        .args(args)
        .args(["--prices", &prices])
        .current_dir(root)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    (fleet, serde_json::from_slice(&o.stdout).unwrap())
}

/// The workload generator's week of the demo fleet (notebooks and forgotten boxes in four
/// offices' zones, a training run past Shanghai's close, busy and idle boxes), replayed under
/// the example policies: every instance is reported, the policies run less than always on and
/// save money, the totals are the sums of the instances, and the training run's stop waits for
/// it (nothing of it unserved). The same replay shows the policies with `late_start: enforce`:
/// hours, dollars and unserved demand.
#[test]
fn the_generated_demo_fleet_workload_replays_under_the_example_policies() {
    let (fleet, r) = demo_week("");
    let instances = r["instances"].as_array().unwrap();
    // The Hangzhou boxes are billed in yuan: reported apart, never in the dollars' sums.
    let cny = &r["other_currencies"][0];
    assert_eq!(cny["currency"], "CNY", "{r:#}");
    let in_cny = cny["instances"].as_array().unwrap();
    let alibaba: Vec<&str> = fleet
        .instances
        .iter()
        .filter(|i| i.billing.cloud == ebb::fleet::Cloud::Alibaba)
        .map(|i| i.id.as_str())
        .collect();
    let cny_ids: Vec<&str> = in_cny
        .iter()
        .map(|i| i["instance"].as_str().unwrap())
        .collect();
    assert_eq!(cny_ids, alibaba);
    assert!(
        cny["scenarios"]["policies"]["savings_vs_always_on_cny"]
            .as_f64()
            .unwrap()
            > 0.0,
        "{cny:#}"
    );
    assert_eq!(instances.len() + in_cny.len(), fleet.instances.len());
    let s = &r["scenarios"];
    let m = |scenario: &str, key: &str| s[scenario][key].as_f64().unwrap();
    assert!(
        m("policies", "running_hours") < m("always_on", "running_hours"),
        "{s}"
    );
    assert!(
        m("oracle", "running_hours") < m("policies", "running_hours"),
        "{s}"
    );
    assert!(m("policies", "savings_vs_always_on_usd") > 0.0, "{s}");
    for key in ["running_hours", "cost_usd", "unserved_busy_hours"] {
        let sum: f64 = instances
            .iter()
            .map(|i| i["scenarios"]["policies"][key].as_f64().unwrap())
            .sum();
        assert!(
            (sum - m("policies", key)).abs() < 0.01,
            "{key}: {sum} vs {s}"
        );
        // Nobody starts a box after a close in the demo week: keeping late starts changes
        // nothing there.
        assert!(
            (m("late_start_enforce", key) - m("policies", key)).abs() < 0.01,
            "{key}: {s}"
        );
    }
    let training = instances
        .iter()
        .find(|i| i["instance"] == "i-0research08")
        .unwrap();
    let t = &training["scenarios"]["policies"];
    assert_eq!(t["unserved_busy_hours"].as_f64(), Some(0.0), "{training}");
    assert_eq!(t["wrongful_stops"].as_u64(), Some(0), "{training}");
}

/// The demo week with one more research box whose person works on it in three 15-minute bursts
/// from 21:00 Shanghai on Tuesday, after ebb stopped it at the 20:00 close. Kept (the default),
/// the late start runs until an hour after the last burst and serves all but the first five
/// minutes; under `late_start: enforce` (in the same replay) each gap between bursts stops it,
/// so every burst starts on a stopped box: more stops, more demand unserved, fewer hours.
#[test]
fn the_demo_week_shows_a_late_start_kept_against_enforce() {
    let late_box = "  - id: i-0research11
    region: ap-east-1
    type: g5.xlarge
    state: running
    launched_at: 2026-11-30T00:30:00Z
    tags: {team: research, env: dev, owner: lin}
    sim: {usage: training, runs: [{start: 2026-12-01T13:00:00Z, hours: 0.25}, {start: 2026-12-01T13:30:00Z, hours: 0.25}, {start: 2026-12-01T14:00:00Z, hours: 0.25}]}
";
    let (_, r) = demo_week(late_box);
    let late = r["instances"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["instance"] == "i-0research11")
        .unwrap();
    let (kept, enforce) = (
        &late["scenarios"]["policies"],
        &late["scenarios"]["late_start_enforce"],
    );
    let m = |t: &Value, key: &str| t[key].as_f64().unwrap();
    assert!(
        (m(kept, "unserved_busy_hours") - 5.0 / 60.0).abs() < 1e-3,
        "{late}"
    );
    assert!(
        m(enforce, "unserved_busy_hours") >= 3.0 * 5.0 / 60.0 - 1e-3,
        "{late}"
    );
    assert!(
        m(kept, "running_hours") > m(enforce, "running_hours"),
        "{late}"
    );
    assert!(m(kept, "cost_usd") > m(enforce, "cost_usd"), "{late}");
    assert!(kept["stops"].as_u64() < enforce["stops"].as_u64(), "{late}");
    // The totals show both, as the issue asks: hours, dollars and unserved demand.
    let s = &r["scenarios"];
    for key in ["running_hours", "cost_usd", "unserved_busy_hours"] {
        assert!(s["policies"][key].is_number(), "{s}");
        assert!(s["late_start_enforce"][key].is_number(), "{s}");
    }
    assert!(
        m(&s["policies"], "unserved_busy_hours")
            < m(&s["late_start_enforce"], "unserved_busy_hours"),
        "{s}"
    );
}

/// Notices count for the stop after them: the office box under office hours with a 15-minute
/// notice gets it at 17:45 each day and is stopped at 18:00, as without one (50 h, 5 stops).
#[test]
fn notices_count_for_the_stop_after_them() {
    let (from, to) = ("2026-11-30T00:00:00Z", "2026-12-05T00:00:00Z");
    let policy = format!("{OFFICE}    notify: {{before: 15m}}\n");
    let d = files(
        &policy,
        OFFICE_FLEET,
        &trace("i-office", from, to, busy_in(OFFICE_BUSY)),
    );
    let s = &replay(d.path(), from, to, &[])["scenarios"];
    assert_measures(&s["policies"], [50.0, 10.0, 0.0], 1.0, [5, 5, 0]);
}

/// A terminated instance (or one shutting down) never runs in any scenario and needs no
/// price; one pending at the start counts as running.
#[test]
fn terminated_instances_cost_nothing_and_pending_ones_run() {
    let (from, to) = ("2026-11-30T00:00:00Z", "2026-11-30T10:00:00Z");
    let fleet = "
instances:
  - {id: i-gone, region: us-east-1, type: p5.48xlarge, state: terminated, tags: {team: office}}
  - {id: i-going, region: us-east-1, type: p5.48xlarge, state: shutting-down, tags: {team: office}}
  - {id: i-new, region: us-east-1, type: g5.xlarge, state: pending, tags: {kind: notebook}}
prices:
  us-east-1: {g5.xlarge: {on_demand: 1.0}}
";
    let csv = format!(
        "{}{}",
        trace("i-gone", from, to, |_| 90.0),
        trace("i-new", from, to, |_| 90.0).replacen("instance,time,gpu_util\n", "", 1)
    );
    let d = files(NOTEBOOK, fleet, &csv);
    let r = replay(d.path(), from, to, &[]);
    for i in r["instances"].as_array().unwrap() {
        let s = &i["scenarios"];
        let want = if i["instance"] == "i-new" { 10.0 } else { 0.0 };
        for scenario in ["policies", "always_on", "oracle"] {
            assert_measures(&s[scenario], [want, 0.0, 0.0], 1.0, [0, 0, 0]);
        }
    }
}

/// The office box of [`an_office_box_under_office_hours_matches_the_hand_calculation`] with a
/// reservation of its type held ($0.60/h): always on it would have run 120 h, all covered
/// ($120 at $1/h on demand, $72 of the reservation used); under the policies 50 h ($50
/// covered, $30 used). The 70 h the policies stop are gross savings ($70) that the
/// reservation would have covered: net $0, and 70 × $0.60 = $42 of it unused because of the
/// stops.
#[test]
fn a_reservation_covering_the_stopped_hours_leaves_no_net_savings() {
    let (from, to) = ("2026-11-30T00:00:00Z", "2026-12-05T00:00:00Z");
    let d = files(
        OFFICE,
        OFFICE_FLEET,
        &trace("i-office", from, to, busy_in(OFFICE_BUSY)),
    );
    let prices = d.path().join("prices.yaml");
    std::fs::write(
        &prices,
        "source: test\nas_of: today\nprices:\n  us-east-1: {g5.xlarge: 1.0}\n\
         reserved:\n  source: test\n  as_of: today\n  rates:\n    us-east-1: {g5.xlarge: {1y: 0.6}}\n\
         commitments:\n  reserved_instances:\n    - {instance_type: g5.xlarge, region: us-east-1, count: 1, term: 1y}\n",
    )
    .unwrap();
    let r = replay(d.path(), from, to, &["--prices", prices.to_str().unwrap()]);
    let c = &r["commitments"];
    let close = |key: &str, want: f64, within: f64| {
        let got = c[key].as_f64().unwrap();
        assert!(
            (got - want).abs() <= within,
            "{key}: {got} against {want}: {r:#}"
        );
    };
    close("gross_savings_usd", 70.0, TICK_H);
    close("commitment_covered_usd", 70.0, TICK_H);
    close("unused_commitment_usd", 42.0, 0.6 * TICK_H);
    close("net_savings_usd", 0.0, 1e-9);
    // Without commitments held, nothing of the kind.
    assert_eq!(replay(d.path(), from, to, &[])["commitments"], Value::Null);
}

/// A recording without the idle rule's activity signals: the same notebook under the
/// same rule with a heartbeat signal is never stopped for idleness (each signal counts as in
/// use, as a tick counts one it could not read), even with an `ebb:active-at` tag that a tick
/// would find stale; and the replay says why on stderr. A replay never claims the stops the
/// signals might have allowed.
#[test]
fn a_replay_counts_activity_signals_as_in_use_and_says_so() {
    let (from, to) = ("2026-11-30T00:00:00Z", "2026-12-07T00:00:00Z");
    let fleet = "
instances:
  - id: i-notebook
    region: eu-central-1
    type: g5.xlarge
    state: running
    launched_at: 2026-11-29T00:00:00Z
    tags: {kind: notebook, 'ebb:active-at': '2026-11-01T00:00:00Z'}
prices:
  eu-central-1: {g5.xlarge: {on_demand: 2.0}}
";
    let used: &[(&str, &str)] = &[("2026-12-01T10:00:00Z", "2026-12-01T12:00:00Z")];
    let policy = NOTEBOOK.replace(
        "idle: {gpu_below: 5, for: 45m}",
        "idle: {gpu_below: 5, for: 45m, activity: [{heartbeat: {max_age: 10m}}]}",
    );
    let d = files(
        &policy,
        fleet,
        &trace("i-notebook", from, to, busy_in(used)),
    );
    let s = &replay(d.path(), from, to, &[])["scenarios"];
    assert_eq!(s["policies"]["stops"], 0, "{}", s["policies"]);
    // Nothing recorded of the signal: no comparison that would take the stops an unknown
    // signal holds back for stops it prevented.
    assert_eq!(s["without_activity"], Value::Null, "{s}");
    assert_eq!(
        s["policies"]["running_hours"],
        s["always_on"]["running_hours"]
    );
    let p = |name: &str| d.path().join(name).to_str().unwrap().to_string();
    let o = ebb(&[
        "replay",
        "--policies",
        &p("policies"),
        "--fleet",
        &p("fleet.yaml"),
        "--utilisation",
        &p("util.csv"),
        "--from",
        from,
        "--to",
        to,
    ]);
    let err = String::from_utf8(o.stderr).unwrap();
    assert!(
        err.contains(
            "policy notebooks: the recording has no history of its activity signals heartbeat"
        ),
        "{err}"
    );
}

/// The notebook's GPU busy Tuesday 10:00-12:00 and 13:00-14:00, and its Jupyter used 12:00-13:00
/// between them (the `activity:jupyter` column: the last use by each row's time). Without the
/// signal, the idle rule stops it at 12:45 and its person starts it again at 13:05, a wrongful
/// stop; with it, it runs through. The replay plays the signal as recorded, and says what it
/// prevented and what that cost against the same policies without it, which replay as the
/// rule without signals does.
#[test]
fn a_recorded_activity_signal_prevents_a_stop_and_the_replay_says_what_it_cost() {
    let (from, to) = ("2026-11-30T00:00:00Z", "2026-12-07T00:00:00Z");
    let fleet = NOTEBOOK_FLEET;
    let gpu: &[(&str, &str)] = &[
        ("2026-12-01T10:00:00Z", "2026-12-01T12:00:00Z"),
        ("2026-12-01T13:00:00Z", "2026-12-01T14:00:00Z"),
    ];
    let plain = trace("i-notebook", from, to, busy_in(gpu));
    let (reading, read) = (at("2026-12-01T12:00:00Z"), at("2026-12-01T13:00:00Z"));
    let mut csv = String::from("instance,time,gpu_util,activity:jupyter\n");
    for row in plain.lines().skip(1) {
        let t = at(row.split(',').nth(1).unwrap());
        let last = match t {
            t if t < reading => String::new(),
            t if t < read => row.split(',').nth(1).unwrap().to_string(),
            _ => "2026-12-01T12:55:00Z".to_string(),
        };
        csv.push_str(&format!("{row},{last}\n"));
    }
    let policy = NOTEBOOK.replace(
        "idle: {gpu_below: 5, for: 45m}",
        "idle: {gpu_below: 5, for: 45m, activity: [{jupyter: {}}]}",
    );
    let d = files(&policy, fleet, &csv);
    let s = &replay(d.path(), from, to, &[])["scenarios"];
    let without_signals = files(NOTEBOOK, fleet, &plain);
    let w = &replay(without_signals.path(), from, to, &[])["scenarios"]["policies"];
    let (with, without) = (&s["policies"], &s["without_activity"]);
    for key in [
        "stops",
        "starts",
        "wrongful_stops",
        "running_hours",
        "cost_usd",
    ] {
        assert_eq!(without[key], w[key], "{key}: {without} against {w}");
    }
    assert_eq!(
        without["stops"].as_u64().unwrap() - with["stops"].as_u64().unwrap(),
        1
    );
    assert_eq!(
        (
            with["wrongful_stops"].as_u64(),
            without["wrongful_stops"].as_u64()
        ),
        (Some(0), Some(1)),
        "{with} {without}"
    );
    let hours = |m: &Value, key: &str| m[key].as_f64().unwrap();
    let kept = hours(with, "running_hours") - hours(without, "running_hours");
    assert!((kept - 20.0 / 60.0).abs() < 0.02, "{kept}");
    let cost = hours(with, "cost_usd") - hours(without, "cost_usd");
    assert!((cost - 2.0 * 20.0 / 60.0).abs() < 0.04, "{cost}");

    let p = |name: &str| d.path().join(name).to_str().unwrap().to_string();
    let o = ebb(&[
        "replay",
        "--policies",
        &p("policies"),
        "--fleet",
        &p("fleet.yaml"),
        "--utilisation",
        &p("util.csv"),
        "--from",
        from,
        "--to",
        to,
    ]);
    let (out, err) = (
        String::from_utf8(o.stdout).unwrap(),
        String::from_utf8(o.stderr).unwrap(),
    );
    assert!(
        out.contains("The activity signals, against the same policies without them: stops prevented 1, running hours +0.3, cost +0.67 USD."),
        "{out}"
    );
    assert!(!err.contains("no history of its activity signals"), "{err}");

    // A use after its row's time, a repeated column, and rows out of order are refused.
    let late = csv.replacen(",2026-12-01T12:55:00Z\n", ",2026-12-09T00:00:00Z\n", 1);
    let twice = csv.replacen("activity:jupyter", "activity:jupyter,activity:jupyter", 1);
    let mut rows: Vec<&str> = csv.lines().collect();
    rows.swap(1, 2);
    let unsorted = rows.join("\n") + "\n";
    let other = "i-other,2026-11-30T00:00:00Z,1,\n";
    let unsorted = unsorted.replacen("\n", &format!("\n{other}"), 1) + other;
    for (file, says) in [
        (
            late,
            "activity:jupyter \"2026-12-09T00:00:00Z\" is after the row's time",
        ),
        (
            twice,
            "an activity:NAME column for each activity signal recorded, each at most once",
        ),
        (
            unsorted,
            "which the activity:jupyter column needs: sort the file by instance",
        ),
    ] {
        std::fs::write(d.path().join("util.csv"), &file).unwrap();
        let o = ebb(&[
            "replay",
            "--policies",
            &p("policies"),
            "--fleet",
            &p("fleet.yaml"),
            "--utilisation",
            &p("util.csv"),
            "--from",
            from,
            "--to",
            to,
        ]);
        let err = String::from_utf8(o.stderr).unwrap();
        assert!(!o.status.success() && err.contains(says), "{says}: {err}");
    }
}

/// A fleet the prices leave two types of unpriced is refused once, naming both and where to
/// add them, rather than one per run.
#[test]
fn every_missing_price_is_named_at_once() {
    let (from, to) = ("2026-11-30T00:00:00Z", "2026-11-30T10:00:00Z");
    let policy = "
policies:
  - name: training
    match: {tags: {workload: training}}
    idle: {gpu_below: 5, for: 30m}
";
    let fleet = "
instances:
  - {id: i-a, region: ap-east-1, type: g5.xlarge, state: running, tags: {workload: training}}
  - {id: i-b, region: ap-east-1, type: g5.xlarge, state: running, tags: {workload: training}}
  - {id: i-c, region: eu-central-1, type: p4d.24xlarge, state: running, tags: {workload: training}}
  - {id: i-d, region: us-east-1, type: g5.xlarge, state: running, tags: {workload: training}}
prices:
  us-east-1: {g5.xlarge: {on_demand: 1.0}}
";
    let d = files(policy, fleet, &trace("i-a", from, to, |_| 95.0));
    let p = |name: &str| d.path().join(name).to_str().unwrap().to_string();
    let o = ebb(&[
        "replay",
        "--policies",
        &p("policies"),
        "--fleet",
        &p("fleet.yaml"),
        "--utilisation",
        &p("util.csv"),
        "--from",
        from,
        "--to",
        to,
    ]);
    assert_eq!(o.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(
        stderr.contains("no on-demand price for 2 instance type(s) the replay costs: g5.xlarge in ap-east-1 (2 instances), p4d.24xlarge in eu-central-1 (1 instance); add them to the fleet file's prices, or give --prices"),
        "{stderr}"
    );
}

/// The demo week under the example policies, whose `platform-daily` budget
/// (policies/budgets.yaml) gives the platform team's five boxes $60 a New York day: the replay
/// names each day the amount was reached and when, and what ran past it; the days' spend adds
/// up to what the policies ran of the team's boxes.
#[test]
fn the_demo_week_names_the_day_a_budget_is_reached() {
    let (fleet, r) = demo_week("");
    let periods = r["budgets"].as_array().unwrap();
    // The week's New York days, the first and last cut by the replay's UTC midnights.
    assert_eq!(periods.len(), 8, "{periods:#?}");
    assert!(periods.iter().all(|p| p["budget"] == "platform-daily"));
    let reached: Vec<&str> = periods
        .iter()
        .filter_map(|p| p["reached_local"].as_str())
        .collect();
    // The boxes run their fourteen-hour weekdays: $60 is reached at 19:29 each weekday, and
    // never on the weekend, when they are stopped.
    assert_eq!(
        reached,
        [
            "2026-11-30 (Mon) 19:29 America/New_York",
            "2026-12-01 (Tue) 19:29 America/New_York",
            "2026-12-02 (Wed) 19:29 America/New_York",
            "2026-12-03 (Thu) 19:29 America/New_York",
            "2026-12-04 (Fri) 19:29 America/New_York",
        ]
    );
    for p in periods {
        let (spent, past) = (
            p["spent_usd"].as_f64().unwrap(),
            p["past_limit_usd"].as_f64().unwrap(),
        );
        match p["reached_at"].is_null() {
            true => assert!(spent < 60.0 && past == 0.0, "{p}"),
            false => assert!((spent - 60.0 - past).abs() < 1e-6 && past > 0.0, "{p}"),
        }
    }
    // The days' spend is what the policies ran of the team's boxes.
    let platform: Vec<&str> = fleet
        .instances
        .iter()
        .filter(|i| i.tag("team") == Some("platform"))
        .map(|i| i.id.as_str())
        .collect();
    let cost: f64 = r["instances"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|i| platform.contains(&i["instance"].as_str().unwrap()))
        .map(|i| i["scenarios"]["policies"]["cost_usd"].as_f64().unwrap())
        .sum();
    let spent: f64 = periods
        .iter()
        .map(|p| p["spent_usd"].as_f64().unwrap())
        .sum();
    assert!(
        cost > 300.0 && (spent - cost).abs() < 0.01,
        "{spent} vs {cost}"
    );
}
