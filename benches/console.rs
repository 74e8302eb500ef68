//! The web console's fleet page for a large fleet (DATABASE_URL, as scripts/test sets it up):
//! the time from request to the last byte of `GET /`, over HTTP from the console's router as
//! `ebb serve` serves it (the API's reader pool of 4 connections), for the first page, the last
//! page, a filtered and sorted page, and a tag filter.
//!
//! The fleet is the demo fleet (`deploy/demo-fleet.yaml`) copied to 10,000 instances with the
//! example policies, written to Postgres by one real tick (inventory, decisions, audit rows,
//! readings), so each row has its decision, reason, policy and next change. `cargo bench --bench
//! console` measures 10,000; the test run (`cargo test --benches`) renders each page once on
//! 1,000, so the bench keeps working.

mod common;

use common::{database, measuring, reconciler, snapshot, Database};
use criterion::{criterion_group, criterion_main, Criterion};
use ebb::api::{self, ApiLimits, ApiState, Tokens};
use ebb::clock::Clock;
use ebb::cloud::sim::SimProvider;
use ebb::control::Control;
use ebb::reconcile::Reconciler;
use ebb::store::Leadership;
use std::sync::Arc;
use std::time::Duration;
use tokio::runtime::Runtime;

/// Monday 12:30 UTC: Shanghai has closed, Berlin and New York are at work.
const START: &str = "2026-11-30T12:30:00Z";

const CONSOLE_DATABASE: Database = (
    "ebb_bench_console",
    [
        "DROP DATABASE IF EXISTS ebb_bench_console WITH (FORCE)",
        "CREATE DATABASE ebb_bench_console",
    ],
);

/// What the server keeps alive: the tick's reconciler and leadership, as `ebb serve`'s.
type Kept = (Reconciler<SimProvider>, Leadership);

/// The console's routes for the fleet of `n` on a free port, after one tick wrote it; the
/// base URL.
fn serve(rt: &Runtime, n: usize) -> (String, Kept) {
    let dir = tempfile::tempdir().unwrap();
    let url = database(rt, CONSOLE_DATABASE);
    let fleet = snapshot(n, dir.path());
    let start = ebb::when::parse_time(START).unwrap();
    let clock = Clock::Fixed(start);
    let (reconciler, mut leader) = reconciler(rt, &url, &fleet, clock);
    let report = rt.block_on(reconciler.tick(start, &mut leader)).unwrap();
    assert_eq!(report.instances, n, "{report:?}");
    // The readers' pool is made lazily, on the runtime.
    let _runtime = rt.enter();
    let state = ApiState {
        // As `ebb serve`: the API's and the console's reads have a pool of their own.
        store: reconciler.store().for_readers(4, Duration::from_secs(10)),
        policies: reconciler.policies().clone(),
        control: Arc::new(Control::default()),
        tokens: Arc::new(Tokens::default()),
        clock,
        checkpoints: None,
        limits: ApiLimits {
            public_reads: true,
            ..ApiLimits::default()
        },
        prices: Default::default(),
        change_budgets: Default::default(),
        audit_verified: Default::default(),
    };
    let routes = api::router(state.clone()).merge(ebb::console::router(state));
    let base = rt.block_on(async {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, routes).await });
        base
    });
    (base, (reconciler, leader))
}

/// The fleet page at `path`, which must list rows.
async fn page(http: &reqwest::Client, base: &str, path: &str) -> usize {
    let r = http.get(format!("{base}{path}")).send().await.unwrap();
    assert_eq!(r.status(), 200, "{path}");
    let html = r.text().await.unwrap();
    assert!(html.contains("<th scope=\"row\">"), "{path}: no rows");
    html.len()
}

fn fleet_page(c: &mut Criterion) {
    let rt = Runtime::new().unwrap();
    let n = if measuring() { 10_000 } else { 1_000 };
    let (base, _kept) = serve(&rt, n);
    let http = reqwest::Client::new();
    let last = n.div_ceil(200);
    let pages = [
        ("first", "/".to_string()),
        ("last", format!("/?page={last}")),
        ("running_by_type", "/?state=running&sort=type".to_string()),
        ("tag", "/?tag=team%3Dresearch".to_string()),
    ];
    let mut group = c.benchmark_group(format!("console_fleet_page/{n}"));
    group.sample_size(20);
    for (name, path) in &pages {
        group.bench_function(*name, |b| {
            b.iter(|| rt.block_on(page(&http, &base, path)));
        });
    }
    group.finish();
}

criterion_group!(benches, fleet_page);
criterion_main!(benches);
