//! `ebb advise` on a generated month: the demo fleet (`deploy/demo-fleet.yaml`) copied to
//! 10,000 instances, 30 days of 5-minute readings from the workload generator, under the
//! example policies: the run time and peak resident memory of the binary, both passes over the
//! CSV, the policies' replay and every candidate change's included.
//!
//! `cargo bench --bench advise` measures 10,000 instances × 30 days (`EBB_BENCH_ADVISE=NxD`
//! picks another size); the test run (`cargo test --bench advise`) advises on 64 instances × 8
//! days once and checks the report, so the bench keeps working. `EBB_BENCH_INPUTS=DIR cargo
//! bench --bench advise` writes the inputs to `DIR` and prints the command instead, so that
//! one run can be timed from outside (each of criterion's runs takes a minute or more).

// The shared helpers also make databases, which this benchmark does not need.
#[path = "common/binary.rs"]
mod binary;
#[allow(dead_code)]
mod common;

use binary::{inputs_only, print_command, run_binary, write_inputs};
use common::{measuring, root};
use criterion::{criterion_group, Criterion, Throughput};
use ebb::cloud::sim::RowOrder;
use std::path::Path;
use std::time::Duration;

/// The instances and days to advise on.
fn size() -> (usize, i64) {
    let chosen = std::env::var("EBB_BENCH_ADVISE").ok().and_then(|s| {
        let (n, d) = s.split_once('x')?;
        Some((n.parse().ok()?, d.parse().ok()?))
    });
    match chosen {
        Some(size) => size,
        None if measuring() => (10_000, 30),
        None => (64, 8),
    }
}

/// The `ebb advise` arguments over inputs written to `dir` for `n` instances and `days` days;
/// how many samples they hold.
fn advise_args(dir: &Path, n: usize, days: i64) -> (Vec<String>, u64) {
    let (inputs, samples) = write_inputs(dir, n, days, RowOrder::ByInstance);
    let policies = root().join("policies").to_str().unwrap().to_string();
    let mut args: Vec<String> = vec!["advise".into(), "--policies".into(), policies];
    args.extend(inputs);
    args.extend(["--format".to_string(), "json".to_string()]);
    (args, samples)
}

fn advise(c: &mut Criterion) {
    let (n, days) = size();
    let dir = tempfile::tempdir().unwrap();
    let (args, samples) = advise_args(dir.path(), n, days);
    let mut group = c.benchmark_group("advise");
    group.sample_size(10);
    group.throughput(Throughput::Elements(samples));
    group.bench_function(format!("{n}x{days}d"), |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                let (took, peak_mib, cpu, report) = run_binary(&args, dir.path());
                let report: serde_json::Value = serde_json::from_str(&report).unwrap();
                for section in ["rightsize", "commitments", "policy_changes"] {
                    assert!(report[section].is_array(), "{section} in {report}");
                }
                eprintln!(
                    "advise {n}x{days}d: {:.2} s, {cpu:.1} CPU s, peak resident {peak_mib:.0} MiB, {} policy changes",
                    took.as_secs_f64(),
                    report["policy_changes"].as_array().map_or(0, Vec::len)
                );
                total += took;
            }
            total
        })
    });
    group.finish();
}

criterion_group!(benches, advise);

/// With `EBB_BENCH_INPUTS=DIR`, writes the inputs of the chosen size to `DIR` and prints the
/// command to run, for `/usr/bin/time -v`; otherwise runs the benchmark.
fn main() {
    if let Some(dir) = inputs_only() {
        let (n, days) = size();
        std::fs::create_dir_all(&dir).unwrap();
        let (args, _) = advise_args(&dir, n, days);
        print_command(&args);
        return;
    }
    benches();
    Criterion::default().configure_from_args().final_summary();
}
