//! `ebb advise` on a generated month: the demo fleet (`deploy/demo-fleet.yaml`) copied to
//! 10,000 instances, 30 days of 5-minute readings from the workload generator, under the
//! example policies: the run time and peak resident memory of the binary, both passes over the
//! CSV, the policies' replay and every candidate change's included.
//!
//! `cargo bench --bench advise` measures 10,000 instances × 30 days (`EBB_BENCH_ADVISE=NxD`
//! picks another size); the test run (`cargo test --bench advise`) advises on 64 instances × 8
//! days once and checks the report, so the bench keeps working.

// The shared helpers also make databases, which this benchmark does not need.
#[path = "common/binary.rs"]
mod binary;
#[allow(dead_code)]
mod common;

use binary::{demo_prices, demo_recording_in, run_binary, FROM};
use common::{measuring, root, snapshot};
use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use ebb::cloud::sim::RowOrder;
use std::path::Path;
use std::time::{Duration, Instant};

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

fn advise(c: &mut Criterion) {
    let (n, days) = size();
    let dir = tempfile::tempdir().unwrap();
    let fleet = snapshot(n, dir.path());
    let util = dir.path().join("util.csv");
    let made = Instant::now();
    let samples = demo_recording_in(&fleet, days, &util, RowOrder::ByInstance);
    eprintln!(
        "advise: {n} instances × {days} days: {samples} samples generated in {:.1} s",
        made.elapsed().as_secs_f64()
    );
    let from = ebb::when::parse_time(FROM).unwrap();
    let to = (from + chrono::Duration::days(days)).to_rfc3339();
    let path = |p: &Path| p.to_str().unwrap().to_string();
    let policies = path(&root().join("policies"));
    let args: Vec<String> = [
        "advise",
        "--policies",
        &policies,
        "--fleet",
        &path(&fleet),
        "--utilisation",
        &path(&util),
        "--prices",
        &path(&demo_prices(dir.path())),
        "--from",
        FROM,
        "--to",
        &to,
        "--format",
        "json",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
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
criterion_main!(benches);
