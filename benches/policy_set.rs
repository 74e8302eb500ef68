//! Benchmarks of a large organisation's policy set (see BENCHMARKS.md, "Policy sets of a large
//! organisation"): N one-team policies, each with its own priority, team tag, time zone and one
//! period of work hours, as one policy per researcher or per project gives.
//!
//! - `policy_set/validate_one_file/N`: what `ebb validate` does with the N policies in one file
//!   (read, parse, check, locate each policy's line).
//! - `policy_set/validate_file_each/N`: the same with one file per policy.
//! - `policy_set/plan/N`: what `ebb plan --format json` does with the N policies in one file
//!   and a one-instance fleet: load both, decide, render the plan.
//!
//! `cargo test --all-targets` runs this file once in criterion's test mode, in a debug build,
//! with a hundredth of each N.

use chrono::{DateTime, Utc};
use criterion::{BenchmarkId, Criterion, Throughput};
use ebb::{engine, output, policy, snapshot};
use std::fmt::Write as _;
use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::time::Duration;

#[allow(dead_code)] // the shared helpers: only `measuring` here
mod common;

/// The policy counts measured, from 1,000 to a 10,000-researcher organisation.
const SIZES: [usize; 4] = [1_000, 2_000, 5_000, 10_000];

/// Time zones the teams work in.
const ZONES: [&str; 5] = [
    "Europe/Berlin",
    "America/New_York",
    "Asia/Shanghai",
    "Asia/Kolkata",
    "Pacific/Auckland",
];

/// Monday 2026-12-07, 10:00 UTC: open in some zones, closed in others.
const NOW: &str = "2026-12-07T10:00:00Z";

/// `n` when measuring; a hundredth of it in test mode, a debug build.
fn scale(n: usize) -> usize {
    if common::measuring() {
        n
    } else {
        n / 100
    }
}

/// Team `i`'s policy, as an item of a `policies` list.
fn team_policy(i: usize) -> String {
    format!(
        r#"  - name: team-{i}-hours
    description: Dev boxes of team {i}
    priority: {priority}
    match:
      tags: {{team: team-{i}, env: dev}}
    work_hours:
      timezone: {zone}
      periods:
        - {{days: mon-fri, start: "{start:02}:00", stop: "{stop}:00"}}
      outside_hours: stop
      start_at_open: stopped-by-ebb
"#,
        priority = i + 1,
        zone = ZONES[i % ZONES.len()],
        start = 7 + i % 3,
        stop = 18 + i % 4,
    )
}

/// Writes `n` team policies into `dir`: all in one file, or one file each.
fn write_policies(dir: &Path, n: usize, one_file: bool) -> PathBuf {
    std::fs::create_dir_all(dir).expect("policy directory");
    if one_file {
        let mut text = String::from("policies:\n");
        for i in 0..n {
            text.push_str(&team_policy(i));
        }
        std::fs::write(dir.join("teams.yaml"), text).expect("write policies");
    } else {
        for i in 0..n {
            let text = format!("policies:\n{}", team_policy(i));
            std::fs::write(dir.join(format!("team-{i:05}.yaml")), text).expect("write policy");
        }
    }
    dir.to_path_buf()
}

/// A fleet of one instance, of team `team`, as `file`.
fn write_fleet(file: &Path, team: usize) -> PathBuf {
    let mut text = String::from("instances:\n");
    let _ = write!(
        text,
        "  - id: i-0team\n    region: eu-central-1\n    type: g5.xlarge\n    state: running\n    \
         tags: {{team: team-{team}, env: dev}}\n"
    );
    std::fs::write(file, text).expect("write fleet");
    file.to_path_buf()
}

/// What `ebb plan --policies DIR --fleet FILE --at NOW --format json` does, minus printing.
fn plan(policies: &Path, fleet_file: &Path, now: DateTime<Utc>) -> String {
    let set = policy::load(&[policies.to_path_buf()]).expect("policies");
    let (fleet, prior) = snapshot::load_snapshot(fleet_file).expect("fleet");
    let decisions = engine::decide(now, &set, &fleet, &prior);
    output::plan_json(&decisions, &fleet.instances)
}

fn main() {
    let tmp = tempfile::TempDir::new().expect("temporary directory");
    let now: DateTime<Utc> = NOW.parse().expect("NOW is RFC 3339");
    let mut c = Criterion::default().configure_from_args();
    let mut group = c.benchmark_group("policy_set");
    group
        .sample_size(10)
        .measurement_time(Duration::from_secs(10));
    for n in SIZES.map(scale) {
        let one = write_policies(&tmp.path().join(format!("one-{n}")), n, true);
        let each = write_policies(&tmp.path().join(format!("each-{n}")), n, false);
        let set = policy::load(std::slice::from_ref(&one)).expect("generated policies");
        assert_eq!(set.policies.len(), n);
        // Each policy knows its own line: the one located by the single pass over the file.
        let last = &set.policies[n - 1];
        assert_eq!(
            (last.name.as_str(), last.source.line),
            (&*format!("team-{}-hours", n - 1), 2 + 11 * (n - 1))
        );
        group.throughput(Throughput::Elements(n as u64));
        group.bench_function(BenchmarkId::new("validate_one_file", n), |b| {
            b.iter(|| policy::load(black_box(std::slice::from_ref(&one))).expect("valid"))
        });
        group.bench_function(BenchmarkId::new("validate_file_each", n), |b| {
            b.iter(|| policy::load(black_box(std::slice::from_ref(&each))).expect("valid"))
        });
        let fleet = write_fleet(&tmp.path().join(format!("fleet-{n}.yaml")), n - 1);
        let json = plan(&one, &fleet, now);
        assert!(json.contains(&format!("team-{}-hours", n - 1)), "{json}");
        group.bench_function(BenchmarkId::new("plan", n), |b| {
            b.iter(|| plan(&one, &fleet, black_box(now)))
        });
    }
    group.finish();
    c.final_summary();
}
