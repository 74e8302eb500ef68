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
