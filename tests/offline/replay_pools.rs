//! `ebb replay --interruptions` over a month of the simulated two-zone training fleet
//! (tests/fixtures/two-zone): four checkpointing p4d jobs that may move to p4d or p4de spot,
//! eu-central-1a cheaper and reclaimed every 3 hours, eu-central-1b 2 % dearer and reclaimed
//! every 10 days, with the interruption
//! history the simulator reclaims by. Issue 31's "Done means": placed by expected cost, the
//! jobs lose fewer GPU-hours of work and cost no more than placed cheapest first. The figures
//! are in BENCHMARKS.md, "Spot placement by expected cost (issue 31)": `cargo test --test offline
//! two_zone -- --nocapture` prints them.

use crate::common::ebb;
use chrono::{DateTime, Duration, Utc};
use serde_json::Value;
use std::path::{Path, PathBuf};

const FROM: &str = "2026-12-01T00:00:00Z";
const TO: &str = "2026-12-31T00:00:00Z";

fn at(s: &str) -> DateTime<Utc> {
    ebb::when::parse_time(s).unwrap()
}

fn fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/two-zone")
}

/// The interruption history of the fleet's spot zones over `[from, to)` as CSV, from the
/// simulator's reclaim function: when the simulated fleet reclaims each pool.
fn history(zones: &ebb::cloud::sim::SpotZones, from: DateTime<Utc>, to: DateTime<Utc>) -> String {
    let mut rows = Vec::new();
    for (region, in_region) in zones {
        for zone in in_region {
            let Some(every) = zone.reclaim_every else {
                continue;
            };
            for instance_type in zone.spot.keys() {
                for t in
                    ebb::cloud::sim::reclaims(region, &zone.zone, instance_type, every, from, to)
                {
                    rows.push((t, region.clone(), zone.zone.clone(), instance_type.clone()));
                }
            }
        }
    }
    rows.sort();
    let mut csv = String::from("time,region,zone,instance_type\n");
    for (t, region, zone, instance_type) in rows {
        csv.push_str(&format!(
            "{},{region},{zone},{instance_type}\n",
            t.format("%Y-%m-%dT%H:%M:%SZ")
        ));
    }
    csv
}

/// The month replayed with `extra` flags, in `format`: the recording and the history (from a
/// week before, which the ranking learns from) written to a directory of its own.
fn replay(format: &str, extra: &[&str]) -> String {
    let root = fixture();
    let fleet = root.join("fleet.yaml");
    let sim = ebb::snapshot::load_simulated(&fleet).unwrap();
    let d = tempfile::tempdir().unwrap();
    let mut csv = Vec::new();
    ebb::cloud::sim::write_utilisation(&sim.fleet, &sim.behaviours, at(FROM), at(TO), &mut csv)
        .unwrap();
    std::fs::write(d.path().join("util.csv"), csv).unwrap();
    let week_before = at(FROM) - Duration::days(7);
    std::fs::write(
        d.path().join("interruptions.csv"),
        history(&sim.zones, week_before, at(TO)),
    )
    .unwrap();
    let p = |path: PathBuf| path.to_str().unwrap().to_string();
    let (policies, fleet) = (p(root.join("policies")), p(fleet));
    let (util, interruptions) = (
        p(d.path().join("util.csv")),
        p(d.path().join("interruptions.csv")),
    );
    let mut args = vec![
        "replay",
        "--policies",
        &policies,
        "--fleet",
        &fleet,
        "--utilisation",
        &util,
        "--from",
        FROM,
        "--to",
        TO,
        "--format",
        format,
    ];
    let flag = ["--interruptions", interruptions.as_str()];
    if !extra.contains(&"--no-interruptions") {
        args.extend(flag);
    }
    args.extend(extra.iter().filter(|a| **a != "--no-interruptions"));
    let o = ebb(&args);
    assert!(
        o.status.success(),
        "ebb replay: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8(o.stdout).unwrap()
}

fn f(v: &Value, key: &str) -> f64 {
    v[key].as_f64().unwrap_or_else(|| panic!("{key} in {v:#}"))
}

#[test]
fn a_month_of_two_zone_training_loses_less_work_and_costs_no_more_by_expected_cost() {
    let json: Value = serde_json::from_str(&replay("json", &[])).unwrap();
    let s = &json["scenarios"];
    let (expected, cheapest) = (&s["policies"], &s["cheapest_first"]);
    eprintln!("{}", replay("table", &[]));
    // Both moved every job to spot, and both were reclaimed.
    assert!(f(cheapest, "interruptions") > 0.0, "{s:#}");
    assert!(f(expected, "interruptions") > 0.0, "{s:#}");
    assert!(
        f(expected, "lost_gpu_hours") < f(cheapest, "lost_gpu_hours"),
        "{s:#}"
    );
    // The dollars: the bill and the lost work at the on-demand rate (what the ranking weighs).
    let total = |t: &Value| f(t, "cost_usd") + f(t, "lost_work_usd");
    assert!(total(expected) <= total(cheapest), "{s:#}");
    // And the bill alone: cheapest first walked down the price ladder into three reclaims in
    // a day, and fell back to on-demand.
    assert!(f(expected, "cost_usd") <= f(cheapest, "cost_usd"), "{s:#}");
}

#[test]
fn without_an_interruption_history_nothing_is_reclaimed_and_no_placement_is_compared() {
    let json: Value = serde_json::from_str(&replay("json", &["--no-interruptions"])).unwrap();
    let s = &json["scenarios"];
    assert_eq!(s["policies"]["interruptions"], 0, "{s:#}");
    assert!(s.get("cheapest_first").is_none(), "{s:#}");
}

#[test]
fn each_reclaim_loses_the_work_since_the_last_checkpoint_and_a_relaunch() {
    let per_reclaim = |extra: &[&str]| -> f64 {
        let json: Value = serde_json::from_str(&replay("json", extra)).unwrap();
        let p = &json["scenarios"]["policies"];
        f(p, "lost_work_hours") / f(p, "interruptions")
    };
    // A checkpoint every 5 minutes: at most 5 minutes of work and the 15-minute relaunch.
    let short = per_reclaim(&["--checkpoint-every", "5m"]);
    assert!(short > 0.25 && short <= 20.0 / 60.0, "{short}");
    // The policy's checkpoint_max_age, 30 minutes: up to 45 minutes.
    let policy = per_reclaim(&[]);
    assert!(policy > short && policy <= 45.0 / 60.0, "{policy}");
}

/// A recorded month, not the simulator's (issue 50): one p4d.24xlarge training at 95 % all of
/// December in eu-central-1, whose two spot zones are `a` at $9.83 (reclaimed every 6 hours)
/// and `b` at $11.47 (weekly), on-demand $32.77; the history starts two weeks before `--from`.
/// `checkpoint` is the snapshot's `ebb:checkpoint-at`, if any; `policy_extra` adds to the spot
/// rule. The replay's JSON and its table.
fn recorded_month(checkpoint: Option<&str>, policy_extra: &str, flags: &[&str]) -> (Value, String) {
    let d = tempfile::tempdir().unwrap();
    let path = |name: &str| d.path().join(name).to_str().unwrap().to_string();
    let tag = checkpoint.map_or(String::new(), |t| {
        format!(", \"ebb:checkpoint-at\": \"{t}\"")
    });
    let fleet = format!(
        r#"instances:
  - id: i-0trainer
    region: eu-central-1
    type: p4d.24xlarge
    state: running
    launched_at: 2026-11-30T00:00:00Z
    tags: {{workload: training, "ebb:interruptible": "true"{tag}}}
prices:
  eu-central-1:
    p4d.24xlarge: {{on_demand: 32.77, spot: 9.83}}
spot_zones:
  eu-central-1:
    - zone: eu-central-1a
      spot: {{p4d.24xlarge: 9.83}}
    - zone: eu-central-1b
      spot: {{p4d.24xlarge: 11.47}}
"#
    );
    std::fs::write(path("fleet.yaml"), fleet).unwrap();
    std::fs::create_dir(path("policies")).unwrap();
    let policy = format!(
        "policies:\n  - name: interruptible-training\n    match:\n      tags: {{workload: training, \"ebb:interruptible\": \"true\"}}\n    spot:\n      min_savings: 40%\n      checkpoint_max_age: 30m\n{policy_extra}"
    );
    std::fs::write(path("policies/training.yaml"), policy).unwrap();
    let stamp = |t: DateTime<Utc>| t.format("%Y-%m-%dT%H:%M:%SZ").to_string();
    let mut util = String::from("instance,time,gpu_util\n");
    let mut t = at(FROM) - Duration::hours(1);
    while t < at(TO) {
        util.push_str(&format!("i-0trainer,{},95\n", stamp(t)));
        t += Duration::minutes(5);
    }
    std::fs::write(path("util.csv"), util).unwrap();
    let start = at(FROM) - Duration::days(14);
    let mut reclaims = Vec::new();
    for (zone, first, every) in [
        ("eu-central-1a", Duration::hours(3), Duration::hours(6)),
        ("eu-central-1b", Duration::hours(53), Duration::days(7)),
    ] {
        let mut t = start + first;
        while t < at(TO) {
            reclaims.push((t, zone));
            t += every;
        }
    }
    reclaims.sort();
    let mut history = String::from("time,region,zone,instance_type\n");
    for (t, zone) in reclaims {
        history.push_str(&format!("{},eu-central-1,{zone},p4d.24xlarge\n", stamp(t)));
    }
    std::fs::write(path("interruptions.csv"), history).unwrap();
    let run = |format: &str| {
        let mut args = vec![
            "replay".to_string(),
            "--policies".into(),
            path("policies"),
            "--fleet".into(),
            path("fleet.yaml"),
            "--utilisation".into(),
            path("util.csv"),
            "--interruptions".into(),
            path("interruptions.csv"),
            "--from".into(),
            FROM.into(),
            "--to".into(),
            TO.into(),
            "--format".into(),
            format.into(),
        ];
        args.extend(flags.iter().map(|f| f.to_string()));
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let o = ebb(&args);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        String::from_utf8(o.stdout).unwrap()
    };
    let json = serde_json::from_str(&run("json")).unwrap();
    (json, run("table"))
}

#[test]
fn a_recorded_month_stays_on_spot_after_a_reclaim_placed_by_expected_cost() {
    let cases = [
        // The snapshot's checkpoint at --from: the job checkpoints every checkpoint_max_age.
        (Some("2026-12-01T00:00:00Z"), &[][..]),
        // No tag, or one in the future: --checkpoint-every says how the job checkpoints.
        (None, &["--checkpoint-every", "30m"][..]),
        (
            Some("2027-01-05T00:00:00Z"),
            &["--checkpoint-every", "30m"][..],
        ),
    ];
    for (checkpoint, flags) in cases {
        let (json, table) = recorded_month(checkpoint, "      max_interruptions: 20\n", flags);
        let s = &json["scenarios"];
        let (expected, cheapest) = (&s["policies"], &s["cheapest_first"]);
        let total = |t: &Value| f(t, "cost_usd") + f(t, "lost_work_usd");
        assert!(
            f(expected, "cost_usd") <= f(&s["always_on"], "cost_usd") / 2.0,
            "{checkpoint:?}: {s:#}"
        );
        assert!(
            f(expected, "interruptions") < f(cheapest, "interruptions"),
            "{checkpoint:?}: {s:#}"
        );
        assert!(total(expected) < total(cheapest), "{checkpoint:?}: {s:#}");
        // On spot all month, most of it in the weekly zone; the table says where.
        assert_eq!(f(expected, "spot_hours"), 720.0, "{s:#}");
        let line = table
            .lines()
            .find(|l| l.starts_with("expected_cost") && l.contains("eu-central-1b"))
            .unwrap_or_else(|| panic!("{table}"));
        let hours: f64 = line.split_whitespace().last().unwrap().parse().unwrap();
        assert!(hours > 600.0, "{table}");
    }
}

#[test]
fn a_job_that_fell_back_to_on_demand_goes_back_to_spot_after_back_to_spot_after() {
    let extra = "      max_interruptions: 2\n      back_to_spot_after: 12h\n";
    let (json, _) = recorded_month(Some("2026-12-01T00:00:00Z"), extra, &[]);
    let s = &json["scenarios"];
    for t in [&s["policies"], &s["cheapest_first"]] {
        // It fell back, and each time went back to spot 12 hours later rather than staying on
        // demand for the rest of the month.
        assert!(f(t, "fallback_on_demand_hours") > 0.0, "{s:#}");
        assert!(f(t, "spot_hours") > 0.0, "{s:#}");
        let (spot, fallback) = (f(t, "spot_hours"), f(t, "fallback_on_demand_hours"));
        assert_eq!(spot + fallback, 720.0, "{s:#}");
    }
    let fallback = f(&s["policies"], "fallback_on_demand_hours");
    assert!(fallback < 100.0, "{s:#}");
    assert!(
        fallback < f(&s["cheapest_first"], "fallback_on_demand_hours"),
        "{s:#}"
    );
}

#[test]
fn a_replay_without_checkpoints_says_why_nothing_moved() {
    let (json, table) = recorded_month(None, "", &[]);
    assert_eq!(json["scenarios"]["policies"]["spot_hours"], 0.0);
    assert!(
        table.contains("spot placement: no job moved to spot: the recording shows no checkpoint of 1 instance(s)"),
        "{table}"
    );
    assert!(table.contains("--checkpoint-every"), "{table}");
    assert!(
        !table.contains("cost+lost_usd"),
        "no table of zeros: {table}"
    );
}
