//! `ebb replay` on a generated month: the demo fleet (`deploy/demo-fleet.yaml`) copied to
//! 10,000 instances, 30 days of 5-minute readings from the workload generator (86 million
//! samples), under the example policies with the example policies as the baseline: the run time
//! and peak resident memory of the `ebb replay` binary, reading the CSV included.
//!
//! `cargo bench --bench replay` measures 10,000 instances × 30 days (`EBB_BENCH_REPLAY=NxD`
//! picks another size), once over the recording written instance by instance (`replay/`, the
//! order `ebb metrics export` writes) and once over the same recording in time order
//! (`replay_time_ordered/`, as Prometheus or DCGM dumps are, which `ebb replay` sorts through
//! temporary files first); the test run (`cargo test --benches`) replays 64 instances × 2 days
//! once in each order and checks that both give the same report, so the bench keeps working.

// The shared helpers also make databases, which this benchmark does not need.
#[allow(dead_code)]
mod common;

use common::{measuring, root, snapshot};
use criterion::{criterion_group, criterion_main, Criterion};
use ebb::cloud::sim::RowOrder;
use std::io::BufWriter;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Monday 2026-11-30, the demo fleet's first day.
const FROM: &str = "2026-11-30T00:00:00Z";

/// The instances and days to replay.
fn size() -> (usize, i64) {
    let chosen = std::env::var("EBB_BENCH_REPLAY").ok().and_then(|s| {
        let (n, d) = s.split_once('x')?;
        Some((n.parse().ok()?, d.parse().ok()?))
    });
    match chosen {
        Some(size) => size,
        None if measuring() => (10_000, 30),
        None => (64, 2),
    }
}

/// The shipped on-demand table's us-east-1 prices for every region of the demo fleet.
fn prices(dir: &Path) -> PathBuf {
    let table: serde_yaml::Value =
        serde_yaml::from_str(&std::fs::read_to_string(root().join("deploy/prices.yaml")).unwrap())
            .unwrap();
    let us = &table["prices"]["us-east-1"];
    let mut regions = serde_yaml::Mapping::new();
    for region in ["ap-east-1", "eu-central-1", "us-east-1", "us-west-2"] {
        regions.insert(region.into(), us.clone());
    }
    let mut out = serde_yaml::Mapping::new();
    out.insert("source".into(), "deploy/prices.yaml, us-east-1".into());
    out.insert("as_of".into(), "2025-05-01".into());
    out.insert("prices".into(), regions.into());
    let path = dir.join("prices.yaml");
    std::fs::write(&path, serde_yaml::to_string(&out).unwrap()).unwrap();
    path
}

/// Writes the generated recording of `fleet` over `days` in `order`; how many samples.
fn recording(fleet: &Path, days: i64, path: &Path, order: RowOrder) -> u64 {
    let (fleet, behaviours) = ebb::snapshot::load_simulation(fleet).unwrap();
    let from = ebb::when::parse_time(FROM).unwrap();
    let mut out = BufWriter::new(std::fs::File::create(path).unwrap());
    ebb::cloud::sim::write_utilisation_in(
        order,
        &fleet,
        &behaviours,
        (from, from + chrono::Duration::days(days)),
        &mut out,
    )
    .unwrap()
}

/// The CPU seconds (user and system, all threads) process `pid` has used so far.
fn cpu_seconds(pid: u32) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // After the command name in parentheses: state is field 3, utime 14, stime 15.
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    let ticks: f64 = fields.get(11)?.parse::<f64>().ok()? + fields.get(12)?.parse::<f64>().ok()?;
    // Linux counts them at USER_HZ, 100 a second.
    Some(ticks / 100.0)
}

/// One run of the binary: how long it took, its peak resident memory in MiB (VmHWM, read
/// until it exits), the CPU seconds it used (as last read before it exited: the machine is
/// shared, so this says more than the wall time), and what it printed.
fn run(args: &[String], dir: &Path) -> (Duration, f64, f64, String) {
    let out = dir.join("report.json");
    let started = Instant::now();
    let mut child = Command::new(env!("CARGO_BIN_EXE_ebb"))
        .args(args)
        .stdout(std::fs::File::create(&out).unwrap())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let mut peak_kib = 0.0f64;
    let mut cpu = 0.0f64;
    let status = loop {
        if let Ok(status) = std::fs::read_to_string(format!("/proc/{}/status", child.id())) {
            let hwm = status
                .lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok());
            peak_kib = peak_kib.max(hwm.unwrap_or(0.0));
        }
        cpu = cpu_seconds(child.id()).unwrap_or(cpu);
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let took = started.elapsed();
    assert!(status.success(), "ebb replay failed");
    (
        took,
        peak_kib / 1024.0,
        cpu,
        std::fs::read_to_string(out).unwrap(),
    )
}

/// The benchmark `group` of replays of the recording written in `order`; the test run also
/// checks that the report is the one of the recording instance by instance.
fn replay_in(c: &mut Criterion, group: &str, order: RowOrder) {
    let (n, days) = size();
    let dir = tempfile::tempdir().unwrap();
    // Made on the first run only: a group the filter leaves out writes no 3 GB file.
    let made: std::cell::OnceCell<(Vec<String>, u64)> = std::cell::OnceCell::new();
    let setup = || {
        let fleet = snapshot(n, dir.path());
        let util = dir.path().join("util.csv");
        let started = Instant::now();
        let samples = recording(&fleet, days, &util, order);
        eprintln!(
            "{group}: {n} instances × {days} days: {samples} samples generated in {:.1} s",
            started.elapsed().as_secs_f64()
        );
        let from = ebb::when::parse_time(FROM).unwrap();
        let to = (from + chrono::Duration::days(days)).to_rfc3339();
        let path = |p: &Path| p.to_str().unwrap().to_string();
        let policies = path(&root().join("policies"));
        let prices = path(&prices(dir.path()));
        let args = |util: &Path| -> Vec<String> {
            [
                "replay",
                "--policies",
                &policies,
                "--baseline-policies",
                &policies,
                "--fleet",
                &path(&fleet),
                "--utilisation",
                &path(util),
                "--prices",
                &prices,
                "--from",
                FROM,
                "--to",
                &to,
                "--format",
                "json",
            ]
            .iter()
            .map(|s| s.to_string())
            .collect()
        };
        if !measuring() && order != RowOrder::ByInstance {
            // The same recording instance by instance replays the same.
            let grouped = dir.path().join("grouped.csv");
            recording(&fleet, days, &grouped, RowOrder::ByInstance);
            let (_, _, _, expected) = run(&args(&grouped), dir.path());
            let (_, _, _, got) = run(&args(&util), dir.path());
            assert_eq!(
                got, expected,
                "{group}: another report than instance by instance"
            );
        }
        (args(&util), samples)
    };
    let mut group = c.benchmark_group(group);
    group.sample_size(10);
    group.bench_function(format!("{n}x{days}d"), |b| {
        let (args, samples) = made.get_or_init(setup);
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                let (took, peak_mib, cpu, report) = run(args, dir.path());
                let report: serde_json::Value = serde_json::from_str(&report).unwrap();
                assert_eq!(report["instances"].as_array().unwrap().len(), n);
                eprintln!(
                    "{order:?} {n}x{days}d: {:.2} s, {cpu:.1} CPU s, peak resident {peak_mib:.0} MiB, {:.2} µs a sample",
                    took.as_secs_f64(),
                    took.as_secs_f64() * 1e6 / *samples as f64
                );
                total += took;
            }
            total
        })
    });
    group.finish();
}

fn replay(c: &mut Criterion) {
    replay_in(c, "replay", RowOrder::ByInstance);
}

fn replay_time_ordered(c: &mut Criterion) {
    replay_in(c, "replay_time_ordered", RowOrder::ByTime);
}

criterion_group!(benches, replay, replay_time_ordered);
criterion_main!(benches);
