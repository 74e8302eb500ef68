//! The spot pools' history in Postgres: the queue's interruption warnings and rebalance
//! recommendations kept with their instance's type and zone, the migrations' reclaims and
//! the capacity errors of starts and spot launches read beside them, pruned after the
//! retention; and `ebb pools` and the console's `/pools` that show them.

use crate::common;
use crate::console::Console;

use chrono::{DateTime, Duration, Utc};
use ebb::clock::Clock;
use ebb::fleet::pools::Counts;
use ebb::fleet::{PoolEventKind, PoolSummary};
use ebb::store::{NewAuditEntry, Outcome, QueuedPoolEvent, Store};
use sqlx::PgPool;

/// Now, in the tests.
fn now() -> DateTime<Utc> {
    "2026-12-04T12:00:00Z".parse().unwrap()
}

/// The history the tests read: an on-demand box whose starts EC2 refused for capacity, a spot
/// migration reclaimed once (in us-east-1a) whose current replacement runs in us-east-1b,
/// and a spot launch refused for capacity in us-east-1c.
async fn history(store: &Store) {
    let pool = store.pool();
    let t = |minutes: i64| now() - Duration::minutes(minutes);
    sqlx::query(
        "INSERT INTO instances (id, region, instance_type, state, lifecycle, fingerprint,
                                first_seen_at, changed_at, state_since)
         VALUES ('i-0box', 'us-east-1', 'g6.xlarge', 'stopped', 'on-demand', 0, $1, $1, $1)",
    )
    .bind(t(60 * 24 * 10))
    .execute(pool)
    .await
    .unwrap();
    let reclaims = serde_json::json!([{
        "at": t(60 * 26), "instance": "i-0spot1", "instance_type": "g5.xlarge",
        "zone": "us-east-1a",
    }]);
    sqlx::query(
        "INSERT INTO spot_migrations (original, region, policy, state, current, market,
                                      instance_type, zone, interruptions, created_at, state_since)
         VALUES ('i-0train', 'us-east-1', 'to-spot', 'done', 'i-0spot2', 'spot',
                 'g5.2xlarge', 'us-east-1b', $1, $2, $2)",
    )
    .bind(reclaims)
    .bind(t(60 * 48))
    .execute(pool)
    .await
    .unwrap();
    let mut rows = Vec::new();
    for minutes in [60 * 3, 60 * 24 * 3] {
        let mut start = NewAuditEntry::event(t(minutes), "ebb", "start", "no capacity".into());
        start.outcome = Outcome::Failed;
        start.instance = Some("i-0box".into());
        start.region = Some("us-east-1".into());
        start.code = Some("insufficient_capacity".into());
        rows.push(start);
    }
    store.append_audit(&rows).await.unwrap();
    let mut intent = NewAuditEntry::event(
        t(30),
        "ebb",
        "relaunch_spot",
        "migration 1: launch spot g5.xlarge in us-east-1c (subnet-c) at $0.300/h from ami-1".into(),
    );
    intent.outcome = Outcome::Intent;
    intent.instance = Some("i-0train".into());
    intent.region = Some("us-east-1".into());
    let seq = store.append_audit(&[intent]).await.unwrap()[0].seq;
    let mut failed = NewAuditEntry::event(t(30), "ebb", "relaunch_spot", "no capacity".into());
    failed.outcome = Outcome::Failed;
    failed.instance = Some("i-0train".into());
    failed.region = Some("us-east-1".into());
    failed.intent_seq = Some(seq);
    failed.error = Some("insufficient_capacity: RunInstances failed".into());
    store.append_audit(&[failed]).await.unwrap();

    let event = |kind, instance: &str, minutes| QueuedPoolEvent {
        kind,
        instance: instance.into(),
        region: "us-east-1".into(),
        account: String::new(),
        at: t(minutes),
    };
    let kept = store
        .record_pool_events(&[
            // The current replacement: its type and zone from the migration.
            event(PoolEventKind::Rebalance, "i-0spot2", 25),
            event(PoolEventKind::Interruption, "i-0spot2", 20),
            // The queue shows a message again: one event.
            event(PoolEventKind::Interruption, "i-0spot2", 20),
            // Known to the inventory only: its zone is unknown.
            event(PoolEventKind::Rebalance, "i-0box", 60 * 24 * 2),
            // Unknown to ebb: its pool is unknown, not kept.
            event(PoolEventKind::Interruption, "i-0stranger", 10),
        ])
        .await
        .unwrap();
    assert_eq!(kept, 3);
}

fn counts(day: u32, week: u32, month: u32) -> Counts {
    Counts { day, week, month }
}

fn of<'a>(pools: &'a [PoolSummary], zone: &str, ty: &str) -> &'a PoolSummary {
    pools
        .iter()
        .find(|p| p.pool.zone == zone && p.pool.instance_type == ty)
        .unwrap_or_else(|| panic!("no pool {ty} in {zone:?}: {pools:#?}"))
}

#[sqlx::test(migrations = false)]
async fn the_pools_history_gathers_the_queue_the_reclaims_and_the_capacity_errors(pool: PgPool) {
    let store = Store::from_pool(pool);
    store.migrate().await.unwrap();
    history(&store).await;
    let pools = store.pool_history(now()).await.unwrap().summaries(now());
    assert_eq!(pools.len(), 4, "{pools:#?}");
    let b = of(&pools, "us-east-1b", "g5.2xlarge");
    assert_eq!(b.interruptions, counts(1, 1, 1));
    assert_eq!(b.rebalances, counts(1, 1, 1));
    assert_eq!(b.last_reclaim, Some(now() - Duration::minutes(20)));
    let a = of(&pools, "us-east-1a", "g5.xlarge");
    assert_eq!(a.interruptions, counts(0, 1, 1));
    let c = of(&pools, "us-east-1c", "g5.xlarge");
    assert_eq!(c.capacity_errors, counts(1, 1, 1));
    assert_eq!(c.last_reclaim, None);
    let starts = of(&pools, "", "g6.xlarge");
    assert_eq!(starts.capacity_errors, counts(1, 2, 2));
    assert_eq!(starts.rebalances, counts(0, 1, 1));

    // A reclaim the queue warned of and the migration also counted is one.
    store
        .record_pool_events(&[QueuedPoolEvent {
            kind: PoolEventKind::Interruption,
            instance: "i-0spot2".into(),
            region: "us-east-1".into(),
            account: String::new(),
            at: now() - Duration::minutes(20),
        }])
        .await
        .unwrap();
    sqlx::query(
        "UPDATE spot_migrations SET interruptions = interruptions || jsonb_build_array(
             jsonb_build_object('at', $1::timestamptz, 'instance', 'i-0spot2',
                                'instance_type', 'g5.2xlarge', 'zone', 'us-east-1b'))",
    )
    .bind(now() - Duration::minutes(19))
    .execute(store.pool())
    .await
    .unwrap();
    let pools = store.pool_history(now()).await.unwrap().summaries(now());
    assert_eq!(
        of(&pools, "us-east-1b", "g5.2xlarge").interruptions,
        counts(1, 1, 1)
    );
}

#[sqlx::test(migrations = false)]
async fn the_pools_events_are_pruned_after_the_retention(pool: PgPool) {
    let store = Store::from_pool(pool);
    store.migrate().await.unwrap();
    history(&store).await;
    // Keeping a day: the rebalance of two days ago goes, the last half hour's stay.
    let pruned = store
        .prune(now() - Duration::days(1), now() - Duration::days(1))
        .await
        .unwrap();
    assert_eq!(pruned.pool_events, 1);
    let pools = store.pool_history(now()).await.unwrap().summaries(now());
    assert_eq!(of(&pools, "", "g6.xlarge").rebalances, counts(0, 0, 0));
    assert_eq!(
        of(&pools, "us-east-1b", "g5.2xlarge").rebalances,
        counts(1, 1, 1)
    );
}

#[sqlx::test(migrations = false)]
async fn ebb_pools_prints_the_pools_as_a_table_and_as_json(pool: PgPool) {
    let store = Store::from_pool(pool.clone());
    store.migrate().await.unwrap();
    history(&store).await;
    let url = common::database_url(&pool);
    let at = "2026-12-04T12:00:00Z";
    let out = common::ebb_on(&url, &["pools", "--at", at]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let table = String::from_utf8(out.stdout).unwrap();
    assert!(table.contains("INTERRUPTIONS"), "{table}");
    let row = table
        .lines()
        .find(|l| l.contains("us-east-1b"))
        .unwrap_or_else(|| panic!("{table}"));
    for cell in [
        "own",
        "g5.2xlarge",
        "1/1/1",
        "2026-12-04T11:40:00Z (20 min ago)",
    ] {
        assert!(row.contains(cell), "{cell} in {row}");
    }

    let out = common::ebb_on(&url, &["pools", "--format", "json", "--at", at]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let pools = json.as_array().unwrap();
    assert_eq!(pools.len(), 4);
    let b = pools.iter().find(|p| p["zone"] == "us-east-1b").unwrap();
    assert_eq!(b["instance_type"], "g5.2xlarge");
    assert_eq!(b["account"], "");
    assert_eq!(b["interruptions"]["day"], 1);
    assert_eq!(b["last_reclaim"], "2026-12-04T11:40:00Z");
}

#[sqlx::test(migrations = false)]
async fn the_console_shows_each_pools_counts_and_last_reclaim(pool: PgPool) {
    let console = Console::start_on(&pool, Clock::Fixed(now())).await;
    let empty = console.page("/pools").await;
    assert!(empty.contains("No spot interruption"), "{empty}");
    history(&Store::from_pool(pool.clone())).await;
    let html = console.page("/pools").await;
    for shown in [
        "<a href=\"/pools\" aria-current=\"page\">Spot pools</a>",
        "<th scope=\"row\">g5.2xlarge in us-east-1b (us-east-1)</th>",
        "<th scope=\"row\">g6.xlarge in – (us-east-1)</th>",
        "2026-12-04 11:40",
    ] {
        assert!(
            html.contains(shown),
            "the pools page lacks {shown:?}:\n{html}"
        );
    }
    // The most recently reclaimed pool first.
    let b = html.find("g5.2xlarge in us-east-1b").unwrap();
    let a = html.find("g5.xlarge in us-east-1a").unwrap();
    assert!(b < a);
}
