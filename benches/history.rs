//! What history costs a tick (DATABASE_URL, as scripts/test sets it up): the steady tick of the
//! demo fleet copied to 10k instances, in process, on an empty audit log and again behind 10
//! million rows of history generated in SQL (1k instances and 10 thousand rows in the test run,
//! `cargo test --benches`). Prints the database's size at each.

mod common;

use common::{database, measuring, reconciler, snapshot, Database};
use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use ebb::clock::Clock;
use sqlx::Connection as _;
use std::time::Instant;
use tokio::runtime::Runtime;

/// Monday 12:30 UTC, as in the tick benchmark.
const START: &str = "2026-11-30T12:30:00Z";

const HISTORY_DATABASE: Database = (
    "ebb_bench_history",
    [
        "DROP DATABASE IF EXISTS ebb_bench_history WITH (FORCE)",
        "CREATE DATABASE ebb_bench_history",
    ],
);

/// `rows` audit rows of history behind the fleet of `n` (half about its instances, half about
/// instances long gone, which are kept too, a tenth as many as the rows, each with a state
/// change), as a year of stops and starts leaves them; then ANALYZE, as autovacuum would.
fn history_sql(n: usize, rows: usize) -> String {
    let gone = (rows / 10).max(1);
    format!(
        "INSERT INTO instances (id, region, instance_type, state, lifecycle, tags, fingerprint,
                                first_seen_at, changed_at, gone_at, state_since)
         SELECT 'i-gone' || g, 'us-east-1', 'g5.xlarge', 'stopped', 'on-demand', '{{}}', 0,
                t, t, t + interval '1 day', t
         FROM generate_series(1, {gone}) AS g, (SELECT timestamptz '2025-11-30' AS t) AS c;
         INSERT INTO instance_events (instance, at, from_state, to_state, cause)
         SELECT 'i-gone' || g, timestamptz '2025-11-30' + g * interval '1 second', 'running',
                'stopped', 'observed'
         FROM generate_series(1, {gone}) AS g;
         INSERT INTO audit_log (seq, at, actor, instance, region, action, outcome, policy,
                                reason, dry_run, prev_hash, hash)
         SELECT last.seq + g, timestamptz '2025-11-30' + g * interval '1 second', 'scheduler',
                CASE WHEN g % 2 = 0 THEN 'i-' || lpad(to_hex(g % {n}), 17, '0')
                     ELSE 'i-gone' || (g % {gone} + 1) END,
                'us-east-1', CASE WHEN g % 4 < 2 THEN 'stop' ELSE 'start' END,
                CASE WHEN g % 10 = 0 THEN 'failed' ELSE 'succeeded' END, 'research', 'history',
                false, sha256(int8send(g - 1)), sha256(int8send(g))
         FROM generate_series(1, {rows}) AS g,
              (SELECT coalesce(max(seq), 0) AS seq FROM audit_log) AS last;
         ANALYZE;"
    )
}

/// The steady tick of the fleet of `n` on an empty log, then with a long history behind it:
/// what history costs a tick. Also prints the database's size at each.
fn history(c: &mut Criterion) {
    let rt = Runtime::new().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let (n, rows) = if measuring() {
        (10_000, 10_000_000)
    } else {
        (1_000, 10_000)
    };
    let url = database(&rt, HISTORY_DATABASE);
    let fleet = snapshot(n, dir.path());
    let clock = Clock::simulated(ebb::when::parse_time(START).unwrap(), 20.0);
    let (reconciler, mut leader) = reconciler(&rt, &url, &fleet, clock);
    rt.block_on(reconciler.tick(clock.now(), &mut leader))
        .unwrap();
    let mut group = c.benchmark_group("history");
    group.sample_size(10);
    group.throughput(Throughput::Elements(n as u64));
    for history in ["empty", "long"] {
        if history == "long" {
            let started = Instant::now();
            // On a connection of its own: the store's have a statement timeout.
            rt.block_on(async {
                let mut conn = sqlx::PgConnection::connect(&url).await.unwrap();
                sqlx::raw_sql(sqlx::AssertSqlSafe(history_sql(n, rows)))
                    .execute(&mut conn)
                    .await
                    .unwrap();
            });
            println!(
                "history: {rows} audit rows written in {:?}",
                started.elapsed()
            );
        }
        let (size, audit): (i64, i64) = rt
            .block_on(
                sqlx::query_as(
                    "SELECT pg_database_size(current_database()), (SELECT count(*) FROM audit_log)",
                )
                .fetch_one(reconciler.store().pool()),
            )
            .unwrap();
        println!(
            "history/{n}/{history}: {audit} audit rows, database {:.0} MB",
            size as f64 / 1e6
        );
        group.bench_function(format!("steady/{n}/{history}"), |b| {
            b.iter_custom(|iters| {
                let started = Instant::now();
                for _ in 0..iters {
                    rt.block_on(reconciler.tick(clock.now(), &mut leader))
                        .unwrap();
                }
                started.elapsed()
            })
        });
    }
    group.finish();
}

criterion_group!(benches, history);
criterion_main!(benches);
