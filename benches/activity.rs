//! What reading the idle rule's activity signals costs a tick, against the real servers
//! (results in BENCHMARKS.md):
//!
//! - `activity/jupyter/N`: N boxes' Jupyter Servers asked as a tick asks them
//!   (`reconcile/read/activity.rs`: 32 at a time, `/api/kernels` and `/api/terminals` each).
//!   Every box's tag names the same real Jupyter Server here, with one kernel, so the figure is
//!   bounded by that one server's throughput; a fleet's servers answer side by side.
//! - `activity/prometheus/N`: the one range query a tick sends for a signal, over the 55 minutes
//!   a 45-minute idle rule reads, answered by a real Prometheus holding N instances' remote
//!   session counts (node_exporter's `node_logind_sessions`) a minute apart, and parsed.
//!
//! `cargo bench --bench activity` measures 1,000 and 10,000; the test run (`cargo test
//! --benches`, scripts/test) reads 100 once, so the bench keeps working.

#[allow(dead_code)] // the benchmark uses a part of the shared helpers
mod common;
// The real servers, as the tests start them; the benchmark uses a part of them.
#[allow(dead_code)]
#[path = "../tests/common/jupyter.rs"]
mod jupyter;
#[allow(dead_code)]
#[path = "../tests/common/prometheus.rs"]
mod prometheus;
#[path = "../tests/common/wait.rs"]
mod wait;

use chrono::{DateTime, Duration, Utc};
use common::measuring;
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use ebb::cloud::jupyter::{Jupyter, JupyterToken};
use ebb::cloud::prometheus::{Prometheus, PrometheusSettings};
use futures_util::StreamExt;
use std::hint::black_box;
use tokio::runtime::Runtime;
// What the servers' helpers wait with, as `super::eventually`.
use wait::eventually;

/// As many servers as a tick asks at once (`JUPYTER_AT_ONCE`).
const AT_ONCE: usize = 32;

fn sizes() -> Vec<usize> {
    match measuring() {
        true => vec![1_000, 10_000],
        false => vec![100],
    }
}

fn activity(c: &mut Criterion) {
    let rt = Runtime::new().unwrap();
    let mut group = c.benchmark_group("activity");
    group.sample_size(10);

    let server = rt.block_on(jupyter::Server::start("b3nch-token"));
    let kernel = rt.block_on(server.kernel());
    server.run(&kernel, "1 + 1", false);
    let client = Jupyter::new(Some(JupyterToken::Value("b3nch-token".into()))).unwrap();
    let now = Utc::now();
    for n in sizes() {
        group.throughput(Throughput::Elements(n as u64));
        group.bench_with_input(BenchmarkId::new("jupyter", n), &n, |b, &n| {
            b.iter(|| {
                let read = rt.block_on(
                    futures_util::stream::iter(0..n)
                        .map(|_| client.last_use(&server.url, now))
                        .buffer_unordered(AT_ONCE)
                        .collect::<Vec<_>>(),
                );
                assert!(read.iter().all(Result::is_ok), "{:?}", read.first());
                black_box(read)
            })
        });
    }
    drop(server);

    let until = Utc::now() - Duration::hours(1);
    for n in sizes() {
        let prometheus = rt.block_on(prometheus::Server::with_history(&sessions(n, until)));
        let client = Prometheus::new(PrometheusSettings::new(&prometheus.url)).unwrap();
        let query = r#"sum by (instance_id) (node_logind_sessions{remote="true"})"#;
        group.throughput(Throughput::Elements(n as u64));
        group.bench_with_input(BenchmarkId::new("prometheus", n), &n, |b, &n| {
            b.iter(|| {
                let from = until - Duration::minutes(55);
                let read = rt.block_on(client.values(query, from, until)).unwrap();
                assert_eq!(read.len(), n);
                black_box(read)
            })
        });
    }
    group.finish();
}

/// OpenMetrics text of `node_logind_sessions` for `n` instances, a sample a minute for the hour
/// to `until`: one remote session open on every third instance.
fn sessions(n: usize, until: DateTime<Utc>) -> String {
    let mut text = String::from(
        "# HELP node_logind_sessions Number of sessions registered in logind.\n# TYPE node_logind_sessions gauge\n",
    );
    let to = until.timestamp();
    for k in 0..n {
        let open = u8::from(k % 3 == 0);
        let mut at = to - 3600;
        while at <= to {
            text.push_str(&format!(
                "node_logind_sessions{{instance_id=\"i-{k:05}\",remote=\"true\"}} {open} {at}\n"
            ));
            at += 60;
        }
    }
    text.push_str("# EOF\n");
    text
}

criterion_group!(benches, activity);
criterion_main!(benches);
