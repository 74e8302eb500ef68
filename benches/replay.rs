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
#[path = "common/binary.rs"]
mod binary;
#[allow(dead_code)]
mod common;

use binary::{demo_prices, demo_recording_in, run_binary, FROM};
use common::{measuring, root, snapshot};
use criterion::{criterion_group, criterion_main, Criterion};
use ebb::cloud::sim::RowOrder;
use std::path::Path;
use std::time::{Duration, Instant};

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
        let samples = demo_recording_in(&fleet, days, &util, order);
        eprintln!(
            "{group}: {n} instances × {days} days: {samples} samples generated in {:.1} s",
            started.elapsed().as_secs_f64()
        );
        let from = ebb::when::parse_time(FROM).unwrap();
        let to = (from + chrono::Duration::days(days)).to_rfc3339();
        let path = |p: &Path| p.to_str().unwrap().to_string();
        let policies = path(&root().join("policies"));
        let prices = path(&demo_prices(dir.path()));
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
            demo_recording_in(&fleet, days, &grouped, RowOrder::ByInstance);
            let (_, _, _, expected) = run_binary(&args(&grouped), dir.path());
            let (_, _, _, got) = run_binary(&args(&util), dir.path());
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
                let (took, peak_mib, cpu, report) = run_binary(args, dir.path());
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
