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
//! `EBB_BENCH_INPUTS=DIR cargo bench --bench replay` writes the inputs to `DIR` and prints the
//! commands instead, so that a run can be timed from outside (`EBB_BENCH_ORDER=time` writes
//! only the time-ordered recording).

// The shared helpers also make databases, which this benchmark does not need.
#[path = "common/binary.rs"]
mod binary;
#[allow(dead_code)]
mod common;

use binary::{inputs_only, print_command, run_binary, write_inputs};
use common::{measuring, root};
use criterion::{criterion_group, Criterion};
use ebb::cloud::sim::RowOrder;
use std::path::Path;
use std::time::Duration;

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

/// The `ebb replay` arguments (the example policies against themselves) over inputs written to
/// `dir` for `n` instances and `days` days, the recording's rows in `order`; how many samples
/// they hold.
fn replay_args(dir: &Path, n: usize, days: i64, order: RowOrder) -> (Vec<String>, u64) {
    let (inputs, samples) = write_inputs(dir, n, days, order);
    let policies = root().join("policies").to_str().unwrap().to_string();
    let mut args: Vec<String> = ["replay", "--policies", &policies]
        .iter()
        .chain(&["--baseline-policies", &policies])
        .map(|s| s.to_string())
        .collect();
    args.extend(inputs);
    args.extend(["--format".to_string(), "json".to_string()]);
    (args, samples)
}

/// The benchmark `group` of replays of the recording written in `order`; the test run also
/// checks that the report is the one of the recording instance by instance.
fn replay_in(c: &mut Criterion, group: &str, order: RowOrder) {
    let (n, days) = size();
    let dir = tempfile::tempdir().unwrap();
    // Made on the first run only: a group the filter leaves out writes no 3 GB file.
    let made: std::cell::OnceCell<(Vec<String>, u64)> = std::cell::OnceCell::new();
    let setup = || {
        if !measuring() && order != RowOrder::ByInstance {
            // The same recording instance by instance (written first to the same files) replays
            // the same.
            let (args, _) = replay_args(dir.path(), n, days, RowOrder::ByInstance);
            let (_, _, _, expected) = run_binary(&args, dir.path());
            let made = replay_args(dir.path(), n, days, order);
            let (_, _, _, got) = run_binary(&made.0, dir.path());
            assert_eq!(
                got, expected,
                "{group}: another report than instance by instance"
            );
            return made;
        }
        replay_args(dir.path(), n, days, order)
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
                // Every instance is reported once: in dollars, or in its cloud's currency.
                let count = |r: &serde_json::Value| r["instances"].as_array().unwrap().len();
                let others = report["other_currencies"].as_array().unwrap();
                assert_eq!(count(&report) + others.iter().map(count).sum::<usize>(), n);
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

/// With `EBB_BENCH_INPUTS=DIR`, writes the inputs of the chosen size to `DIR/by-instance/` and
/// `DIR/by-time/` (or only the one `EBB_BENCH_ORDER=instance|time` names) and prints the
/// command for each, for `/usr/bin/time -v`; otherwise runs the benchmarks.
fn main() {
    if let Some(dir) = inputs_only() {
        let (n, days) = size();
        let only = std::env::var("EBB_BENCH_ORDER").ok();
        for (name, order) in [
            ("instance", RowOrder::ByInstance),
            ("time", RowOrder::ByTime),
        ] {
            if only.as_deref().is_some_and(|o| o != name) {
                continue;
            }
            let dir = dir.join(format!("by-{name}"));
            std::fs::create_dir_all(&dir).unwrap();
            let (args, _) = replay_args(&dir, n, days, order);
            print_command(&args);
        }
        return;
    }
    benches();
    Criterion::default().configure_from_args().final_summary();
}
