//! Benchmarks of the decision core (see BENCHMARKS.md for results and how to reproduce them).
//!
//! - `decide/N`: [`ebb::engine::decide`] over N instances and 50 policies, fleet in memory.
//! - `plan_end_to_end/N`: what `ebb plan --format json` does, from files on disk: load the
//!   JSON fleet snapshot, load the policy directory, decide, render the JSON plan.
//! - `plan_stages/<stage>/<size>`: each stage of `plan_end_to_end/100000` alone (loading the
//!   snapshot, loading the 50 policies, rendering the JSON plan), to show which one dominates.
//!
//! The inputs are generated here, deterministically (a fixed-seed xorshift generator): 50
//! policies in 9 YAML files plus a calendars file (work hours in eight time zones, periods and
//! cron, idle rules, notices, spot, holiday calendars, several priorities) and a fleet spread
//! over 40 teams, 6 regions and 10 instance types, each instance with 12 GPU samples 5 minutes
//! apart before [`NOW`].
//!
//! `EBB_BENCH_INPUTS=DIR cargo bench --bench decide` writes the inputs (`DIR/policies/`,
//! `DIR/fleet-10000.json`, `DIR/fleet-100000.json`) for timing the real binary, then exits.
//!
//! `cargo test --all-targets` runs this file once in criterion's test mode, in a debug build; it
//! then uses fleets 100 times smaller (see [`scale`]) so the test run stays quick.

use chrono::{DateTime, Duration, SecondsFormat, Utc};
use criterion::{BenchmarkId, Criterion, Throughput};
use ebb::engine::{self, Action, Code, Decision};
use ebb::{output, policy, snapshot};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::fs;
use std::hint::black_box;
use std::io::{BufWriter, Write as _};
use std::path::{Path, PathBuf};
use std::time::Duration as StdDuration;

/// The decision time: Wednesday 2026-12-02 09:10 UTC, which is 17:10 in Shanghai, 04:10 in
/// New York, 10:10 in Berlin, 14:40 in Kolkata and 22:10 in Auckland: some policies are in
/// work hours, others are not.
const NOW: &str = "2026-12-02T09:10:00Z";

/// Instance counts of `decide/N`, at full scale.
const DECIDE_SIZES: [usize; 3] = [10_000, 50_000, 100_000];

/// Instance counts of `plan_end_to_end/N`, at full scale.
const PLAN_SIZES: [usize; 2] = [10_000, 100_000];

/// The number of policies generated.
const POLICIES: usize = 50;

/// Teams in the fleet; each has one work-hours policy for its dev boxes.
const TEAMS: usize = 40;

/// GPU samples per instance, 5 minutes apart.
const SAMPLES: usize = 12;

const REGIONS: [&str; 6] = [
    "us-east-1",
    "us-west-2",
    "eu-central-1",
    "ap-east-1",
    "ap-south-1",
    "ap-southeast-2",
];

/// Instance types with their on-demand $/hour in us-east-1.
const TYPES: [(&str, f64); 10] = [
    ("g4dn.xlarge", 0.526),
    ("g5.xlarge", 1.006),
    ("g5.2xlarge", 1.212),
    ("g5.12xlarge", 5.672),
    ("g6.xlarge", 0.805),
    ("g6e.2xlarge", 2.242),
    ("p3.2xlarge", 3.06),
    ("p4d.24xlarge", 32.773),
    ("p4de.24xlarge", 40.966),
    ("p5.48xlarge", 98.32),
];

const ZONES: [&str; 8] = [
    "Asia/Shanghai",
    "America/New_York",
    "Europe/Berlin",
    "Asia/Kolkata",
    "Pacific/Auckland",
    "America/Los_Angeles",
    "Asia/Tokyo",
    "Europe/London",
];

/// The holiday calendar each zone's policies skip, if any.
fn calendar_for(zone: &str) -> Option<&'static str> {
    match zone {
        "Asia/Shanghai" => Some("cn-holidays"),
        "America/New_York" | "America/Los_Angeles" => Some("us-holidays"),
        "Europe/Berlin" => Some("de-holidays"),
        "Asia/Kolkata" => Some("in-holidays"),
        _ => None,
    }
}

/// A small deterministic generator (xorshift64*), so every run sees the same inputs.
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Self {
        Rng(seed | 1)
    }

    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// Uniform in `0..n`.
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    /// True with probability `percent` %.
    fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }

    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len() as u64) as usize]
    }
}

/// Whether this is a real benchmark run (`cargo bench`), not criterion's test mode
/// (`cargo test --all-targets`, or `cargo bench -- --test`).
fn benchmarking() -> bool {
    let args: Vec<String> = std::env::args().collect();
    args.iter().any(|a| a == "--bench") && !args.iter().any(|a| a == "--test")
}

/// `n` at full scale; in test mode, a hundredth of it, because test mode runs every benchmark
/// once in a debug build, where generating and parsing 100k instances takes too long.
fn scale(n: usize) -> usize {
    if benchmarking() {
        n
    } else {
        n / 100
    }
}

fn now() -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(NOW)
        .expect("NOW is RFC 3339")
        .with_timezone(&Utc)
}

fn rfc3339(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Secs, true)
}

/// Work hours of team `n`'s policy: a zone, periods or cron, and what happens at the edges.
fn team_work_hours(n: usize) -> String {
    let zone = ZONES[n % ZONES.len()];
    let hours = match n % 5 {
        0 => r#"      periods:
        - {days: mon-fri, start: "08:30", stop: "20:00"}"#
            .to_string(),
        1 => r#"      periods:
        - {days: mon-fri, start: "07:00", stop: "21:00"}
        - {days: sat, start: "10:00", stop: "14:00"}"#
            .to_string(),
        2 => r#"      cron: {start: "30 8 * * mon-fri", stop: "0 20 * * mon-fri"}"#.to_string(),
        3 => r#"      periods:
        - {days: mon-fri, start: "09:00", stop: "18:00"}
        - {days: sun-thu, start: "22:00", stop: "02:00"}"#
            .to_string(),
        _ => r#"      periods:
        - {days: fri-mon, start: "00:00", stop: "24:00"}
        - {days: tue-thu, start: "06:00", stop: "23:30"}"#
            .to_string(),
    };
    let skip = calendar_for(zone).map_or(String::new(), |c| format!("\n      skip: [{c}]"));
    let outside = ["stop", "hibernate", "stop", "none"][n % 4];
    let start = ["stopped-by-ebb", "stopped-by-ebb", "all", "never"][n % 4];
    let defer = if n % 3 == 0 {
        "\n      max_defer: 4h"
    } else {
        ""
    };
    format!(
        "    work_hours:\n      timezone: {zone}\n{hours}{skip}\n      outside_hours: {outside}\n      start_at_open: {start}\n      busy_defers_stop: {}{defer}\n",
        n % 7 != 6
    )
}

/// The 40 per-team policies: each team's dev boxes follow the team's office hours.
fn team_policy(n: usize) -> String {
    let mut p = format!(
        "  - name: team-{n:02}-dev-hours\n    description: Dev boxes of team-{n}\n    priority: {}\n    match:\n      tags: {{team: team-{n}, env: dev}}\n",
        10 + n % 3
    );
    if n % 4 == 1 {
        p += "      instance_types: [\"g5.*\", \"g6*\", \"g4dn.*\", \"p3.2xlarge\"]\n";
    }
    if n % 5 == 2 {
        p += "      regions: [us-east-1, us-west-2, eu-central-1, ap-east-1, ap-south-1]\n";
    }
    p += &team_work_hours(n);
    if n % 3 == 1 {
        let when = if n % 2 == 0 {
            "always"
        } else {
            "outside_hours"
        };
        p += &format!(
            "    idle:\n      gpu_below: {}\n      for: 45m\n      grace_after_start: 20m\n      when: {when}\n",
            3 + n % 5
        );
    }
    if n % 2 == 0 {
        p += &format!("    notify:\n      before: {}m\n", 10 + 5 * (n % 3));
    }
    if n % 10 == 9 {
        p += "    dry_run: true\n";
    }
    p
}

/// The 10 fleet-wide policies, by workload, environment and region, with different priorities
/// so that no two of them tie at the top for the same instance.
fn shared_policies() -> String {
    r#"policies:
  - name: interruptible-training
    description: Checkpointing training moves to spot
    priority: 40
    match:
      tags: {workload: training, "ebb:interruptible": "true"}
    spot:
      min_savings: 40%
      checkpoint_max_age: 30m
      instance_types: [p4d.24xlarge, p4de.24xlarge]
      max_interruptions: 3
      keep_original_for: 6h
    idle:
      gpu_below: 5
      for: 45m
      missing_metrics: busy
      action: stop

  - name: training-idle-nights
    description: Other training boxes, stopped when idle outside Berlin office hours
    priority: 30
    match:
      tags: {workload: training}
    work_hours:
      timezone: Europe/Berlin
      periods:
        - {days: mon-fri, start: "08:00", stop: "19:00"}
      skip: [de-holidays]
      outside_hours: none
      start_at_open: never
    idle:
      gpu_below: 5
      for: 45m
      when: outside_hours
      action: stop

  - name: notebooks-idle
    description: Jupyter boxes of every team
    priority: 25
    match:
      tags: {workload: notebook}
    idle:
      gpu_below: 5
      for: 45m
      grace_after_start: 20m
      missing_metrics: busy
      action: stop
    notify:
      before: 10m

  - name: inference-prod
    description: Production inference is watched, never stopped
    priority: 50
    match:
      tags: {workload: inference, env: prod}
    idle:
      gpu_below: 2
      for: 45m
      missing_metrics: busy
    dry_run: true

  - name: staging-apac
    description: Staging in Asia-Pacific follows Kolkata hours
    priority: 8
    match:
      regions: [ap-east-1, ap-south-1, ap-southeast-2]
      tags: {env: staging}
    work_hours:
      timezone: Asia/Kolkata
      periods:
        - {days: mon-fri, start: "09:30", stop: "19:30"}
      skip: [in-holidays]
      outside_hours: stop
      start_at_open: all
    notify:
      before: 15m

  - name: staging-us
    description: Staging in the US follows New York hours
    priority: 8
    match:
      regions: [us-east-1, us-west-2]
      tags: {env: staging}
    work_hours:
      timezone: America/New_York
      cron: {start: "0 7 * * 1-5", stop: "0 22 * * 1-5"}
      skip: [us-holidays]
      outside_hours: hibernate
      start_at_open: stopped-by-ebb
      max_defer: 2h

  - name: staging-eu
    description: Staging in Europe follows Berlin hours
    priority: 8
    match:
      regions: [eu-central-1]
      tags: {env: staging}
    work_hours:
      timezone: Europe/Berlin
      periods:
        - {days: mon-fri, start: "07:30", stop: "19:00"}
      skip: [de-holidays]

  - name: big-gpus-idle
    description: The expensive types are stopped after 45 idle minutes
    priority: 3
    match:
      tags: {env: "*"}
      instance_types: ["p4d.*", "p4de.*", "p5.*"]
    idle:
      gpu_below: 10
      for: 45m
      missing_metrics: idle
      action: hibernate
    notify:
      before: 5m

  - name: prod-default
    description: Other production boxes, reported when idle
    priority: 1
    match:
      tags: {env: prod}
    idle:
      gpu_below: 5
      for: 45m
    dry_run: true

  - name: fleet-default
    description: Everything with a cost center follows Auckland hours, never stopped by them
    priority: -10
    match:
      tags: {cost-center: "*"}
    work_hours:
      timezone: Pacific/Auckland
      periods:
        - {days: mon-fri, start: "08:00", stop: "18:00"}
      outside_hours: none
      start_at_open: never
    idle:
      gpu_below: 3
      for: 45m
      when: always
"#
    .to_string()
}

const CALENDARS: &str = r#"calendars:
  cn-holidays:
    dates: ["2026-10-01..2026-10-07", "2027-01-01", "2027-02-06..2027-02-13"]
  us-holidays:
    dates: ["2026-11-26..2026-11-27", "2026-12-24..2026-12-25", "2027-01-01"]
  de-holidays:
    dates: ["2026-10-03", "2026-12-24..2026-12-26", "2027-01-01"]
  in-holidays:
    dates: ["2026-10-02", "2026-11-08", "2027-01-26"]
"#;

/// Writes the 50 policies into `dir`: `calendars.yaml`, `shared.yaml` (10 policies) and
/// `teams-0.yaml` to `teams-7.yaml` (5 team policies each).
fn write_policies(dir: &Path) {
    fs::create_dir_all(dir).expect("create policy directory");
    fs::write(dir.join("calendars.yaml"), CALENDARS).expect("write calendars");
    fs::write(dir.join("shared.yaml"), shared_policies()).expect("write shared policies");
    for file in 0..TEAMS / 5 {
        let mut text = String::from("policies:\n");
        for n in file * 5..file * 5 + 5 {
            text += &team_policy(n);
            text.push('\n');
        }
        fs::write(dir.join(format!("teams-{file}.yaml")), text).expect("write team policies");
    }
}

/// One generated instance as a snapshot JSON object.
fn instance(rng: &mut Rng, index: usize, now: DateTime<Utc>) -> Value {
    let mins = |m: u64| Duration::minutes(m as i64);
    let region = *rng.pick(&REGIONS);
    let (instance_type, _) = *rng.pick(&TYPES);
    let env = match rng.below(10) {
        0..=4 => "dev",
        5..=6 => "prod",
        _ => "staging",
    };
    let workload = match rng.below(20) {
        0..=4 => "notebook",
        5..=11 => "training",
        12..=15 => "inference",
        _ => "dev",
    };
    let state = match rng.below(100) {
        0..=74 => "running",
        75..=92 => "stopped",
        93..=94 => "pending",
        95..=96 => "stopping",
        _ => "terminated",
    };
    let mut tags = BTreeMap::new();
    tags.insert("team", format!("team-{}", rng.below(TEAMS as u64)));
    tags.insert("env", env.to_string());
    tags.insert("workload", workload.to_string());
    tags.insert("owner", format!("user-{}", rng.below(2_000)));
    tags.insert("project", format!("proj-{}", rng.below(300)));
    tags.insert("Name", format!("{workload}-{index}"));
    if rng.chance(90) {
        tags.insert("cost-center", format!("cc-{}", rng.below(50)));
    }
    if workload == "training" && rng.chance(50) {
        tags.insert("ebb:interruptible", "true".into());
        if rng.chance(80) {
            tags.insert("ebb:checkpoint-at", rfc3339(now - mins(rng.below(60))));
        }
    }
    if rng.chance(2) {
        tags.insert("ebb:keep-until", rfc3339(now + mins(30 + rng.below(600))));
    }
    if rng.chance(1) {
        tags.insert("ebb:skip", "true".into());
    }
    // Idle, busy, or busy that went idle recently; the newest sample 0-4 minutes old.
    let profile = rng.below(10);
    let newest = now - mins(rng.below(5));
    let gpu_util: Vec<Value> = (0..SAMPLES)
        .map(|k| {
            let at = newest - mins(5 * (SAMPLES - 1 - k) as u64);
            let pct = match profile {
                0..=3 => rng.below(5),
                4..=7 => 40 + rng.below(61),
                _ if k < SAMPLES / 2 => 60 + rng.below(41),
                _ => rng.below(4),
            };
            json!([rfc3339(at), pct])
        })
        .collect();
    let mut obj = json!({
        "id": format!("i-{:08x}{:09x}", rng.next() as u32, index),
        "region": region,
        "type": instance_type,
        "state": state,
        "lifecycle": if rng.chance(10) { "spot" } else { "on-demand" },
        "launched_at": rfc3339(now - mins(5 + rng.below(4 * 24 * 60))),
        "tags": tags,
        "gpu_util": gpu_util,
    });
    let extra = obj.as_object_mut().expect("an object");
    if state == "stopped" {
        let since = now - mins(30 + rng.below(3 * 24 * 60));
        extra.insert("state_since".into(), json!(rfc3339(since)));
        if rng.chance(60) {
            extra.insert("stopped_by_ebb_at".into(), json!(rfc3339(since)));
        }
    }
    if state == "running" && rng.chance(5) {
        extra.insert(
            "notified_at".into(),
            json!(rfc3339(now - mins(rng.below(30)))),
        );
    }
    obj
}

/// The prices table: on-demand scaled by region, spot 25-75 % of on-demand.
fn prices(rng: &mut Rng) -> Value {
    let mut by_region = serde_json::Map::new();
    for (r, region) in REGIONS.iter().enumerate() {
        let mut by_type = serde_json::Map::new();
        for (instance_type, base) in TYPES {
            let on_demand = base * (1.0 + 0.04 * r as f64);
            let spot = on_demand * (25 + rng.below(51)) as f64 / 100.0;
            by_type.insert(
                instance_type.into(),
                json!({"on_demand": (on_demand * 1000.0).round() / 1000.0,
                       "spot": (spot * 1000.0).round() / 1000.0}),
            );
        }
        by_region.insert((*region).into(), Value::Object(by_type));
    }
    Value::Object(by_region)
}

/// Writes a fleet snapshot of `n` instances to `path` (JSON, the format of docs/commands.md's "Fleet snapshot").
fn write_fleet(path: &Path, n: usize) {
    let now = now();
    let mut rng = Rng::new(0x0ebb_5eed_2026_1202);
    let instances: Vec<Value> = (0..n).map(|i| instance(&mut rng, i, now)).collect();
    let snapshot = json!({"instances": instances, "prices": prices(&mut rng)});
    let file = fs::File::create(path).expect("create fleet file");
    let mut out = BufWriter::new(file);
    serde_json::to_writer(&mut out, &snapshot).expect("write fleet file");
    out.flush().expect("flush fleet file");
}

/// Generated inputs on disk: a policy directory and fleet files by instance count.
struct Inputs {
    policies: PathBuf,
    fleets: BTreeMap<usize, PathBuf>,
}

impl Inputs {
    fn write(dir: &Path, sizes: &[usize]) -> Self {
        let policies = dir.join("policies");
        write_policies(&policies);
        let fleets = sizes
            .iter()
            .map(|&n| {
                let path = dir.join(format!("fleet-{n}.json"));
                write_fleet(&path, n);
                (n, path)
            })
            .collect();
        Inputs { policies, fleets }
    }

    fn policy_set(&self) -> policy::PolicySet {
        policy::load(std::slice::from_ref(&self.policies)).expect("generated policies are valid")
    }
}

/// Checks that the benchmark measures real work: the generated policies load as 50, most
/// instances are governed by one, none is in conflict, and many get an action. Prints the
/// breakdown once when benchmarking.
fn sanity_check(decisions: &[Decision], policies: usize) {
    assert_eq!(policies, POLICIES, "expected {POLICIES} policies");
    let n = decisions.len();
    let governed = decisions.iter().filter(|d| d.policy.is_some()).count();
    let acting = decisions
        .iter()
        .filter(|d| d.action != Action::None)
        .count();
    let mut codes: BTreeMap<&str, usize> = BTreeMap::new();
    for d in decisions {
        *codes.entry(d.code.as_str()).or_default() += 1;
    }
    assert!(
        governed * 100 >= n * 85,
        "only {governed} of {n} instances governed by a policy"
    );
    assert!(acting * 100 >= n * 10, "only {acting} of {n} get an action");
    assert_eq!(
        codes.get(Code::Conflict.as_str()),
        None,
        "conflicts: {codes:?}"
    );
    if benchmarking() {
        eprintln!(
            "sanity: {n} instances, {governed} governed by a policy ({:.1}%), {acting} with an action; codes: {codes:?}",
            100.0 * governed as f64 / n as f64
        );
    }
}

/// `decide/N`: the pure decision over a fleet already in memory.
fn bench_decide(c: &mut Criterion, inputs: &Inputs) {
    let set = inputs.policy_set();
    let now = now();
    let mut group = c.benchmark_group("decide");
    group
        .sample_size(10)
        .measurement_time(StdDuration::from_secs(20));
    for n in DECIDE_SIZES.map(scale) {
        let (fleet, prior) = snapshot::load_snapshot(&inputs.fleets[&n]).expect("generated fleet");
        if n == scale(DECIDE_SIZES[2]) {
            sanity_check(
                &engine::decide(now, &set, &fleet, &prior),
                set.policies.len(),
            );
        }
        group.throughput(Throughput::Elements(n as u64));
        group.bench_function(BenchmarkId::from_parameter(n), |b| {
            b.iter(|| engine::decide(black_box(now), &set, &fleet, &prior))
        });
    }
    group.finish();
}

/// What `ebb plan --policies DIR --fleet FILE.json --at NOW --format json` does, minus
/// printing.
fn plan(policies: &Path, fleet_file: &Path, now: DateTime<Utc>) -> String {
    let set = policy::load(&[policies.to_path_buf()]).expect("policies");
    let (fleet, prior) = snapshot::load_snapshot(fleet_file).expect("fleet");
    let decisions = engine::decide(now, &set, &fleet, &prior);
    output::plan_json(&decisions, &fleet.instances)
}

/// `plan_end_to_end/N`: files on disk to the JSON plan.
fn bench_plan(c: &mut Criterion, inputs: &Inputs) {
    let now = now();
    let mut group = c.benchmark_group("plan_end_to_end");
    group
        .sample_size(10)
        .measurement_time(StdDuration::from_secs(30));
    for n in PLAN_SIZES.map(scale) {
        group.throughput(Throughput::Elements(n as u64));
        group.bench_function(BenchmarkId::from_parameter(n), |b| {
            b.iter(|| plan(&inputs.policies, &inputs.fleets[&n], black_box(now)))
        });
    }
    group.finish();
}

/// `plan_stages/<stage>/<size>`: the stages of `plan_end_to_end` at the largest size, one by
/// one.
fn bench_stages(c: &mut Criterion, inputs: &Inputs) {
    let n = scale(PLAN_SIZES[1]);
    let file = &inputs.fleets[&n];
    let set = inputs.policy_set();
    let (fleet, prior) = snapshot::load_snapshot(file).expect("generated fleet");
    let decisions = engine::decide(now(), &set, &fleet, &prior);
    let mut group = c.benchmark_group("plan_stages");
    group
        .sample_size(10)
        .measurement_time(StdDuration::from_secs(15));
    group.throughput(Throughput::Elements(n as u64));
    group.bench_function(BenchmarkId::new("load_snapshot", n), |b| {
        b.iter(|| snapshot::load_snapshot(black_box(file)).expect("fleet"))
    });
    group.throughput(Throughput::Elements(POLICIES as u64));
    group.bench_function(BenchmarkId::new("policy_load", POLICIES), |b| {
        b.iter(|| policy::load(black_box(std::slice::from_ref(&inputs.policies))).expect("ok"))
    });
    group.throughput(Throughput::Elements(n as u64));
    group.bench_function(BenchmarkId::new("plan_json", n), |b| {
        b.iter(|| output::plan_json(black_box(&decisions), &fleet.instances))
    });
    group.finish();
}

/// With `EBB_BENCH_INPUTS=DIR`, writes the inputs to `DIR` and exits; otherwise generates them
/// in a temporary directory and runs the benchmarks.
fn main() {
    if let Some(dir) = std::env::var_os("EBB_BENCH_INPUTS") {
        let dir = PathBuf::from(dir);
        let inputs = Inputs::write(&dir, &PLAN_SIZES);
        println!("wrote {}", inputs.policies.display());
        for file in inputs.fleets.values() {
            println!("wrote {}", file.display());
        }
        println!("decide at {NOW}");
        return;
    }
    let tmp = tempfile::TempDir::new().expect("temporary directory");
    let mut sizes: Vec<usize> = DECIDE_SIZES.iter().chain(&PLAN_SIZES).copied().collect();
    sizes.sort_unstable();
    sizes.dedup();
    let inputs = Inputs::write(
        tmp.path(),
        &sizes.into_iter().map(scale).collect::<Vec<_>>(),
    );
    let mut c = Criterion::default().configure_from_args();
    bench_decide(&mut c, &inputs);
    bench_plan(&mut c, &inputs);
    bench_stages(&mut c, &inputs);
    c.final_summary();
}
