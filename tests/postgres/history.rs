//! A long history costs a tick nothing: with a synthetic year of history in Postgres (a million
//! audit rows, half a million gone instances, their state changes, GPU readings and expired
//! overrides, generated in SQL), two ticks read a few rows per live instance from each table that grows
//! with history (Postgres's own counts of rows read), and no statement they run scans one of
//! those tables sequentially. The statements are the ticks' own, captured from sqlx's statement
//! log, and each is checked with `EXPLAIN` of its generic plan (the plan Postgres uses whatever
//! the parameters). A report of the last 30 days (`Store::report_history`) reads the month's
//! rows of the same history, not the year's.

use crate::common;

use common::t;
use common::world::SimWorld;
use ebb::clock::Clock;
use ebb::cloud::sim::SimProvider;
use ebb::store::Store;
use sqlx::{Connection as _, PgPool};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use tracing::field::{Field, Visit};
use tracing_subscriber::layer::{Context, SubscriberExt as _};
use tracing_subscriber::Layer;

const POLICIES: &str = r#"
policies:
  - name: office
    match: {tags: {team: research}}
    work_hours:
      timezone: UTC
      periods:
        - {days: mon-fri, start: "09:00", stop: "19:00"}
      outside_hours: stop
      start_at_open: stopped-by-ebb
    notify:
      before: 15m
  - name: notebooks
    match: {tags: {team: notebooks}}
    dry_run: true
    work_hours:
      timezone: UTC
      periods:
        - {days: mon-fri, start: "09:00", stop: "19:00"}
      outside_hours: stop
"#;

/// Live instances in the simulated fleet, half under each policy.
const LIVE: usize = 1000;

/// The history a year of a large fleet leaves: gone instances with their state changes, and
/// audit rows about live and gone instances alike (hashes are not a chain: nothing verifies it).
const HISTORY: &str = "
INSERT INTO instances (id, region, instance_type, state, lifecycle, tags, fingerprint,
                       first_seen_at, changed_at, gone_at, state_since)
SELECT 'i-gone' || g, 'us-east-1', 'g5.xlarge', 'stopped', 'on-demand', '{}', 0,
       t, t, t + interval '1 day', t
FROM generate_series(1, 500000) AS g, (SELECT timestamptz '2025-12-01' AS t) AS c;

INSERT INTO instance_events (instance, at, from_state, to_state, cause)
SELECT 'i-gone' || g, timestamptz '2025-12-01' + g * interval '1 minute', 'running', 'stopped',
       'observed'
FROM generate_series(1, 500000) AS g;

INSERT INTO audit_log (seq, at, actor, instance, region, action, outcome, policy, reason, dry_run,
                       prev_hash, hash)
SELECT last.seq + g, timestamptz '2025-12-01' + g * interval '20 seconds', 'scheduler',
       CASE WHEN g % 2 = 0 THEN 'i-live' || lpad((g % 1000)::text, 5, '0')
            ELSE 'i-gone' || (g % 500000 + 1) END,
       'us-east-1', CASE WHEN g % 4 < 2 THEN 'stop' ELSE 'start' END,
       CASE WHEN g % 10 = 0 THEN 'failed' ELSE 'succeeded' END, 'office', 'history', false,
       sha256(int8send(g - 1)), sha256(int8send(g))
FROM generate_series(1, 1000000) AS g, (SELECT coalesce(max(seq), 0) AS seq FROM audit_log) AS last;

INSERT INTO gpu_readings (instance, hour, percent)
SELECT 'i-gone' || (g % 500000 + 1), timestamptz '2025-12-01' + (g / 500000) * interval '1 hour',
       array_fill(50::real, ARRAY[12])
FROM generate_series(1, 300000) AS g;

INSERT INTO overrides (instance, until, reason, created_by, created_at)
SELECT 'i-gone' || g, timestamptz '2025-12-02' + g * interval '1 minute', 'old', 'alice',
       timestamptz '2025-12-01'
FROM generate_series(1, 100000) AS g;

ANALYZE;
";

/// Tables that grow with history: a tick must reach them by index only.
const GROWING: [&str; 5] = [
    "audit_log",
    "instances",
    "instance_events",
    "overrides",
    "gpu_readings",
];

/// The SQL of every statement sqlx ran while it was installed.
#[derive(Clone, Default)]
struct Statements(Arc<Mutex<Vec<String>>>);

impl<S: tracing::Subscriber> Layer<S> for Statements {
    fn on_event(&self, event: &tracing::Event<'_>, _: Context<'_, S>) {
        if event.metadata().target() != "sqlx::query" {
            return;
        }
        let mut fields = SqlFields::default();
        event.record(&mut fields);
        // sqlx gives the whole statement, or only its summary when that is the whole of it.
        let sql = if fields.statement.trim().is_empty() {
            fields.summary
        } else {
            fields.statement
        };
        self.0.lock().unwrap().push(sql.trim().to_string());
    }
}

#[derive(Default)]
struct SqlFields {
    summary: String,
    statement: String,
}

impl Visit for SqlFields {
    fn record_str(&mut self, field: &Field, value: &str) {
        match field.name() {
            "summary" => self.summary = value.to_string(),
            "db.statement" => self.statement = value.to_string(),
            _ => {}
        }
    }
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.record_str(field, &format!("{value:?}"));
    }
}

/// The highest `$N` in `sql`.
fn parameters(sql: &str) -> usize {
    let mut most = 0;
    for (at, _) in sql.match_indices('$') {
        let digits: String = sql[at + 1..]
            .chars()
            .take_while(char::is_ascii_digit)
            .collect();
        most = most.max(digits.parse().unwrap_or(0));
    }
    most
}

/// The tables `sql`'s generic plan scans sequentially.
async fn sequential_scans(conn: &mut sqlx::PgConnection, sql: &str) -> Vec<String> {
    // The statements are ebb's own, as sqlx ran them.
    sqlx::raw_sql(sqlx::AssertSqlSafe(format!("PREPARE checked AS {sql}")))
        .execute(&mut *conn)
        .await
        .unwrap_or_else(|e| panic!("cannot prepare {sql}: {e}"));
    let nulls = vec!["NULL"; parameters(sql)].join(", ");
    let execute = if nulls.is_empty() {
        "EXECUTE checked".to_string()
    } else {
        format!("EXECUTE checked({nulls})")
    };
    let plan: serde_json::Value = sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
        "EXPLAIN (FORMAT JSON) {execute}"
    )))
    .fetch_one(&mut *conn)
    .await
    .unwrap_or_else(|e| panic!("cannot explain {sql}: {e}"));
    sqlx::raw_sql("DEALLOCATE checked")
        .execute(&mut *conn)
        .await
        .unwrap();
    let text = plan.to_string();
    let mut scanned = Vec::new();
    fn walk(node: &serde_json::Value, found: &mut Vec<String>) {
        if node["Node Type"] == "Seq Scan" {
            found.push(node["Relation Name"].as_str().unwrap_or("?").to_string());
        }
        for child in node["Plans"].as_array().into_iter().flatten() {
            walk(child, found);
        }
    }
    walk(&plan[0]["Plan"], &mut scanned);
    assert!(text.contains("Node Type"), "{text}");
    scanned
}

/// Rows read so far from each of [`GROWING`], by sequential and index scans, as Postgres
/// counts them once every other session of the database has ended (a session's counts reach
/// the statistics by the time it leaves `pg_stat_activity`).
async fn rows_read(url: &str) -> Vec<(String, i64)> {
    let mut conn = sqlx::PgConnection::connect(url).await.unwrap();
    loop {
        let others: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM pg_stat_activity
             WHERE datname = current_database() AND pid <> pg_backend_pid()",
        )
        .fetch_one(&mut conn)
        .await
        .unwrap();
        if others == 0 {
            break;
        }
        tokio::task::yield_now().await;
    }
    sqlx::query("SELECT pg_stat_clear_snapshot()")
        .execute(&mut conn)
        .await
        .unwrap();
    let read = sqlx::query_as(
        "SELECT relname::text, coalesce(seq_tup_read, 0) + coalesce(idx_tup_fetch, 0)
         FROM pg_stat_user_tables WHERE relname = ANY($1) ORDER BY relname",
    )
    .bind(GROWING)
    .fetch_all(&mut conn)
    .await
    .unwrap();
    conn.close().await.unwrap();
    read
}

/// The simulated `fleet` under [`POLICIES`] on a pool of its own, led as `history`.
async fn world(url: &str, fleet: &str) -> SimWorld<SimProvider> {
    let store = Store::connect(url).await.unwrap();
    SimWorld::plan(fleet)
        .policy("p.yaml", POLICIES)
        .clock(Clock::Fixed(t("2026-11-30T18:50:00Z")))
        .leader("history")
        .start_with(store, |sim| sim)
        .await
}

/// Ticks at each of `times` as the leader, each with some action, then ends every session the
/// world opened.
async fn ticks(mut world: SimWorld<SimProvider>, times: &[&str]) {
    for at in times {
        let report = world.tick(at).await;
        assert!(!report.actions.is_empty(), "{at}: {}", report.headline());
    }
    let SimWorld { store, leader, .. } = world;
    drop(leader);
    store.pool().close().await;
}

#[sqlx::test(migrations = false)]
async fn a_tick_reads_rows_by_the_live_fleet_not_by_history(pool: PgPool) {
    let url = common::database_url(&pool);
    let mut fleet = String::from("instances:\n");
    for n in 0..LIVE {
        let team = if n % 2 == 0 { "research" } else { "notebooks" };
        fleet.push_str(&format!(
            "  - {{id: i-live{n:05}, region: us-east-1, type: g5.xlarge, state: running, \
             tags: {{team: {team}}}, sim: {{usage: idle}}}}\n"
        ));
    }

    // A year of history, then the fleet as ebb first lists it.
    let first = world(&url, &fleet).await;
    // On the test's pool, without ebb's statement timeout: the year is written in one go,
    // however busy the machine is (the other tests of this binary share it).
    sqlx::raw_sql(HISTORY).execute(&pool).await.unwrap();
    first
        .store
        .create_override(
            "i-live00000",
            t("2026-12-01T12:00:00Z"),
            "eval",
            "bob",
            t("2026-11-30T18:00:00Z"),
        )
        .await
        .unwrap();
    ticks(first, &["2026-11-30T18:46:00Z"]).await;
    let before = rows_read(&url).await;

    // The first tick gave notice; now stops and dry runs, then a withdrawn notice for the box
    // under an override: every phase of a tick, and its writes, captured. The world is made
    // (and its store migrated) before the capture begins.
    let measured = world(&url, &fleet).await;
    let statements = Statements::default();
    let subscriber = tracing_subscriber::registry().with(statements.clone());
    // While one dispatcher is registered, tracing-core works out a callsite's interest, when it
    // is first hit, from the default of the thread that hits it: sqlx's statement events, first
    // hit by another test's thread of this binary, would then never reach this thread's
    // subscriber. With a second one registered, it asks every registered dispatcher.
    let _second = tracing::Dispatch::new(tracing_subscriber::registry());
    let guard = tracing::subscriber::set_default(subscriber);
    ticks(measured, &["2026-11-30T19:01:00Z", "2026-11-30T19:10:00Z"]).await;
    drop(guard);
    let after = rows_read(&url).await;

    let mut read = Vec::new();
    for ((table, was), (_, is)) in before.iter().zip(&after) {
        read.push((table.clone(), is - was));
    }
    eprintln!("rows read by two ticks of {LIVE} live instances: {read:?}");
    assert_eq!(read.len(), GROWING.len(), "{read:?}");
    for (table, rows) in &read {
        // A few reads of each live instance's row a tick, not of the history behind it.
        assert!(
            *rows <= 2 * 10 * LIVE as i64,
            "two ticks read {rows} rows of {table}: {read:?}"
        );
    }

    let ran: BTreeSet<String> = statements.0.lock().unwrap().iter().cloned().collect();
    let checked: Vec<&String> = ran
        .iter()
        .filter(|sql| {
            let first = sql.split_whitespace().next().unwrap_or("").to_uppercase();
            ["SELECT", "UPDATE", "DELETE", "INSERT", "WITH"].contains(&first.as_str())
                && !sql.contains("pg_advisory")
                && !sql.contains("pg_notify")
        })
        .collect();
    for table in [
        "FROM audit_log",
        "FROM instances",
        "UPDATE instances",
        "overrides",
    ] {
        assert!(
            checked.iter().any(|sql| sql.contains(table)),
            "no statement with {table} was captured: {ran:#?}"
        );
    }
    let mut conn = sqlx::PgConnection::connect(&url).await.unwrap();
    sqlx::query("SET plan_cache_mode = force_generic_plan")
        .execute(&mut conn)
        .await
        .unwrap();
    let mut scans = Vec::new();
    for sql in &checked {
        for table in sequential_scans(&mut conn, sql).await {
            if GROWING.contains(&table.as_str()) {
                scans.push(format!("{table} in: {sql}"));
            }
        }
    }
    eprintln!(
        "{} distinct statements of the two ticks explained: no sequential scan of {GROWING:?}",
        checked.len()
    );
    assert!(scans.is_empty(), "sequential scans: {scans:#?}");
}

/// Rows of each of [`GROWING`] read since `before`.
fn read_since(before: &[(String, i64)], after: &[(String, i64)]) -> BTreeMap<String, i64> {
    before
        .iter()
        .zip(after)
        .map(|((table, was), (_, is))| (table.clone(), is - was))
        .collect()
}

/// A last month of the history above for a report to read: ebb's stops and starts of 20,000
/// instances and their starts seen (made after HISTORY, so its `seq`s follow).
const LAST_MONTH: &str = "
INSERT INTO audit_log (seq, at, actor, instance, region, action, outcome, policy, reason, dry_run,
                       prev_hash, hash)
SELECT last.seq + g, timestamptz '2026-10-20' + g * interval '30 seconds', 'scheduler',
       'i-gone' || (g % 20000 + 1), 'us-east-1',
       CASE WHEN g <= 20000 THEN 'stop' ELSE 'start' END, 'succeeded', 'office', 'history',
       false, sha256(int8send(g - 1)), sha256(int8send(g))
FROM generate_series(1, 40000) AS g, (SELECT max(seq) AS seq FROM audit_log) AS last;

INSERT INTO instance_events (instance, at, from_state, to_state, cause)
SELECT 'i-gone' || (g % 20000 + 1), timestamptz '2026-11-04' + g * interval '30 seconds',
       'stopped', 'running', 'observed'
FROM generate_series(1, 20000) AS g;

ANALYZE;
";

#[sqlx::test(migrations = false)]
async fn a_report_reads_its_window_not_the_whole_history(pool: PgPool) {
    // The year of history above (a million audit rows, half a million state changes, a
    // minute apart until mid-November) and a last month of stops and starts: a report of the
    // last 30 days reads that month, not the year.
    let url = common::database_url(&pool);
    let store = Store::connect(&url).await.unwrap();
    store.migrate().await.unwrap();
    // On the test's pool, without ebb's statement timeout (as above).
    sqlx::raw_sql(HISTORY).execute(&pool).await.unwrap();
    sqlx::raw_sql(LAST_MONTH).execute(&pool).await.unwrap();
    store.pool().close().await;
    let before = rows_read(&url).await;

    let store = Store::connect(&url).await.unwrap();
    let history = store
        .report_history(
            t("2026-10-15T00:00:00Z"),
            t("2026-11-14T00:00:00Z"),
            &Default::default(),
        )
        .await
        .unwrap();
    store.pool().close().await;
    let read = read_since(&before, &rows_read(&url).await);
    eprintln!(
        "a 30-day report read {read:?}, for {} actions and {} state changes",
        history.actions.len(),
        history.changes.len()
    );
    // The month's 40,000, and the last action before it of the instances seen starting in it
    // when that was a stop: the history's last action on i-goneN is a stop for N = 2 mod 4.
    assert_eq!(history.actions.len(), 45_000);
    assert!(history.changes.len() >= 20_000, "{}", history.changes.len());
    // The month's rows, and a row or two for each instance seen starting in it, not the
    // year's: the audit log holds 1,040,000 rows, the state changes 520,000, the instances
    // 500,000.
    assert!(read["audit_log"] <= 60_000, "{read:?}");
    assert!(read["instance_events"] <= 100_000, "{read:?}");
    assert!(read["instances"] <= 25_000, "{read:?}");
    assert!(read["overrides"] < 1_000, "{read:?}");
}
