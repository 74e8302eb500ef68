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
//!
//! `console_savings_page` measures `GET /savings` over 30 days (and by a tag) for the same
//! fleet with 30 days of history: every instance stopped by ebb each evening and started each
//! morning (600,000 audit rows and as many state changes for 10,000 instances), those days
//! rolled up as the leader rolls them up (`report_days`).

mod common;

use common::{database, measuring, reconciler, snapshot, Database};
use criterion::{criterion_group, criterion_main, Criterion};
use ebb::api::{self, ApiLimits, ApiState, Tokens};
use ebb::clock::Clock;
use ebb::cloud::sim::SimProvider;
use ebb::control::Control;
use ebb::fleet::money::PriceTable;
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

const SAVINGS_DATABASE: Database = (
    "ebb_bench_savings",
    [
        "DROP DATABASE IF EXISTS ebb_bench_savings WITH (FORCE)",
        "CREATE DATABASE ebb_bench_savings",
    ],
);

/// Days of history of the savings page's fleet.
const DAYS: i32 = 30;

/// What the server keeps alive: the tick's reconciler and leadership, as `ebb serve`'s.
type Kept = (Reconciler<SimProvider>, Leadership);

/// The console's routes for the fleet of `n` on a free port, after one tick wrote it, with the
/// shipped price table; the base URL.
fn serve(rt: &Runtime, n: usize) -> (String, Kept) {
    let start = ebb::when::parse_time(START).unwrap();
    let (mut bases, kept) = serve_on(rt, n, CONSOLE_DATABASE, start, |_| {}, &[shipped_prices()]);
    (bases.remove(0), kept)
}

/// The shipped price table (`deploy/prices.yaml`): with what a stopped box still pays, so a
/// report nets by the hour from the whole history (`PriceTable::nets_by_the_hour`).
fn shipped_prices() -> PriceTable {
    ebb::cloud::prices::load(&common::root().join("deploy/prices.yaml")).unwrap()
}

/// The shipped price table changed by `change` (its YAML), loaded as `ebb serve` loads
/// `EBB_PRICES`.
fn prices_changed(change: impl FnOnce(&mut serde_yaml::Mapping)) -> PriceTable {
    let shipped = std::fs::read_to_string(common::root().join("deploy/prices.yaml")).unwrap();
    let mut table: serde_yaml::Value = serde_yaml::from_str(&shipped).unwrap();
    change(table.as_mapping_mut().unwrap());
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("prices.yaml");
    std::fs::write(&path, serde_yaml::to_string(&table).unwrap()).unwrap();
    ebb::cloud::prices::load(&path).unwrap()
}

/// The price tables the savings page is measured with, by name: on-demand prices and rates
/// only (no commitment held, no stopped box's cost), the shipped table (stopped boxes' disks
/// and IPs priced), and the shipped table with commitments held (reserved instances of the
/// demo fleet's types and a compute Savings Plan). Past days come from the rollups with each.
fn savings_price_tables() -> [(&'static str, PriceTable); 3] {
    let on_demand = prices_changed(|t| {
        t.remove("while_stopped");
    });
    let held = prices_changed(|t| {
        let held: serde_yaml::Value = serde_yaml::from_str(concat!(
            "reserved_instances:\n",
            "  - {instance_type: g5.xlarge, region: us-east-1, count: 500, term: 1y}\n",
            "  - {instance_type: g5.12xlarge, region: us-west-2, count: 100, term: 1y}\n",
            "savings_plans:\n",
            "  - {kind: compute, hourly_usd: 200.0, term: 3y}\n",
        ))
        .unwrap();
        t.insert("commitments".into(), held);
    });
    [
        ("on_demand", on_demand),
        ("shipped", shipped_prices()),
        ("commitments", held),
    ]
}

/// [`serve`] on `db`, with `history` written after the tick, serving at `now`: one server for
/// each price table of `tables`, in order; their base URLs.
fn serve_on(
    rt: &Runtime,
    n: usize,
    db: Database,
    now: chrono::DateTime<chrono::Utc>,
    history: impl FnOnce(&ebb::store::Store),
    tables: &[PriceTable],
) -> (Vec<String>, Kept) {
    let dir = tempfile::tempdir().unwrap();
    let url = database(rt, db);
    let fleet = snapshot(n, dir.path());
    let start = ebb::when::parse_time(START).unwrap();
    let clock = Clock::Fixed(now);
    let (reconciler, mut leader) = reconciler(rt, &url, &fleet, Clock::Fixed(start));
    let report = rt.block_on(reconciler.tick(start, &mut leader)).unwrap();
    assert_eq!(report.instances, n, "{report:?}");
    history(reconciler.store());
    // The readers' pool is made lazily, on the runtime.
    let _runtime = rt.enter();
    // As `ebb serve`: the API's and the console's reads have a pool of their own.
    let readers = reconciler.store().for_readers(4, Duration::from_secs(10));
    let bases = tables
        .iter()
        .map(|prices| {
            let state = ApiState {
                store: readers.clone(),
                policies: reconciler.policies().clone(),
                control: Arc::new(Control::default()),
                tokens: Arc::new(Tokens::default()),
                clock,
                checkpoints: None,
                limits: ApiLimits {
                    public_reads: true,
                    ..ApiLimits::default()
                },
                prices: Arc::new(prices.clone()),
                cloud: ebb::fleet::Cloud::Aws,
                change_budgets: Default::default(),
                attempts: Default::default(),
                audit_verified: Default::default(),
            };
            let routes = api::router(state.clone()).merge(ebb::console::router(state));
            rt.block_on(async {
                let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
                let base = format!("http://{}", listener.local_addr().unwrap());
                tokio::spawn(async move { axum::serve(listener, routes).await });
                base
            })
        })
        .collect();
    (bases, (reconciler, leader))
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

/// [`DAYS`] days from the day after [`START`]: each instance stopped by ebb at 19:00 (seen
/// stopped at 19:05) and started at 08:00 the next morning (seen running at 08:05), written
/// as the audit log and the syncs keep them, each instance with one gp3 volume of one of
/// eight sizes and no Elastic IP; then rolled up as the leader does.
fn evenings_off(rt: &Runtime, store: &ebb::store::Store, now: chrono::DateTime<chrono::Utc>) {
    let first = ebb::when::parse_time(START).unwrap().date_naive();
    let first = ebb::report::midnight(first);
    rt.block_on(async {
        let pool = store.pool();
        sqlx::query(
            "INSERT INTO audit_log (seq, at, actor, instance, region, action, outcome, policy,
                 code, reason, dry_run, prev_hash, hash)
             SELECT (SELECT coalesce(max(seq), 0) FROM audit_log)
                        + row_number() OVER (ORDER BY at, id),
                    at, 'scheduler', id, region, action, 'succeeded', 'office',
                    'outside_hours', 'outside work hours', false,
                    decode(repeat('00', 32), 'hex'), decode(repeat('00', 32), 'hex')
             FROM (
                 SELECT i.id, i.region, $1 + make_interval(days => d) + interval '19 hours' AS at,
                        'stop' AS action
                 FROM instances AS i, generate_series(1, $2) AS d
                 UNION ALL
                 SELECT i.id, i.region, $1 + make_interval(days => d + 1) + interval '8 hours',
                        'start'
                 FROM instances AS i, generate_series(1, $2) AS d
             ) AS happened",
        )
        .bind(first)
        .bind(DAYS)
        .execute(pool)
        .await
        .unwrap();
        sqlx::query(
            "UPDATE instances SET elastic_ips = 0, volumes = jsonb_build_array(jsonb_build_object(
                 'volume_type', 'gp3', 'size_gib', 100 * (1 + (hashtext(id) & 7))))",
        )
        .execute(pool)
        .await
        .unwrap();
        sqlx::query(
            "INSERT INTO instance_events (instance, at, from_state, to_state, cause)
             SELECT i.id, $1 + make_interval(days => d) + interval '19 hours 5 minutes',
                    'running', 'stopped', 'observed'
             FROM instances AS i, generate_series(1, $2) AS d
             UNION ALL
             SELECT i.id, $1 + make_interval(days => d + 1) + interval '8 hours 5 minutes',
                    'stopped', 'running', 'observed'
             FROM instances AS i, generate_series(1, $2) AS d",
        )
        .bind(first)
        .bind(DAYS)
        .execute(pool)
        .await
        .unwrap();
        sqlx::query("ANALYZE").execute(pool).await.unwrap();
        let rolled = store.roll_up_report_days(now, 400).await.unwrap().days;
        assert!(rolled >= DAYS as u32, "{rolled} days rolled up");
    });
}

fn savings_page(c: &mut Criterion) {
    let rt = Runtime::new().unwrap();
    let n = if measuring() { 10_000 } else { 1_000 };
    let start = ebb::when::parse_time(START).unwrap();
    let now = ebb::report::midnight(start.date_naive()) + chrono::Duration::days(DAYS as i64 + 2);
    let tables = savings_price_tables();
    let prices: Vec<PriceTable> = tables.iter().map(|(_, t)| t.clone()).collect();
    let (bases, _kept) = serve_on(
        &rt,
        n,
        SAVINGS_DATABASE,
        now,
        |store| evenings_off(&rt, store, now),
        &prices,
    );
    let http = reqwest::Client::new();
    let mut group = c.benchmark_group(format!("console_savings_page/{n}"));
    group.sample_size(10);
    for ((table, _), base) in tables.iter().zip(&bases) {
        for (name, path) in [("30d", "/savings"), ("30d_by_team", "/savings?by=team")] {
            group.bench_function(format!("{table}/{name}"), |b| {
                b.iter(|| rt.block_on(savings(&http, base, path)));
            });
        }
    }
    group.finish();
}

/// The savings page at `path`, which must show the stops' policy.
async fn savings(http: &reqwest::Client, base: &str, path: &str) -> usize {
    let r = http.get(format!("{base}{path}")).send().await.unwrap();
    assert_eq!(r.status(), 200, "{path}");
    let html = r.text().await.unwrap();
    assert!(html.contains("office"), "{path}: {html}");
    html.len()
}

criterion_group!(benches, fleet_page, savings_page);
criterion_main!(benches);
