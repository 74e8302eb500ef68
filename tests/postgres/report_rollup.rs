//! The report's daily rollups (`report_days`): the hand-worked history of
//! tests/common/savings.rs rolled up day by day, then every report read from the rollups and
//! the rest of the window (`Store::report_parts`) equal to the one worked out day by day from
//! the whole window's history (`Store::report_history`), for whole days, days cut by the
//! window, and grouped by a tag or not. The pruner keeps the state changes of days not rolled
//! up yet, and a day whose changes an earlier ebb pruned first is refused, not rolled.

use crate::common;

use common::savings::{history, price_table, Fleet};
use common::t;
use ebb::cloud::PriceTable;
use ebb::report::{compute, compute_parts, Window};
use ebb::store::Store;
use serde_json::Value;
use sqlx::PgPool;

/// After the history: every day of it is over.
const NOW: &str = "2026-12-10T00:00:00Z";

/// The report over `[since, until)` by `by`, priced by `prices`, from the rollups and day by
/// day, as JSON.
async fn both(
    store: &Store,
    since: &str,
    until: &str,
    by: Option<&str>,
    prices: &PriceTable,
) -> (Value, Value, usize) {
    let window = Window {
        since: t(since),
        until: t(until),
    };
    let held = &prices.commitments;
    let parts = store.report_parts(window, by, held).await.unwrap();
    let rolled = compute_parts(&parts, window, by, prices);
    let whole = store
        .report_history(window.since, window.until, held)
        .await
        .unwrap();
    let by_day = compute(&whole, window, by, prices);
    (
        serde_json::to_value(rolled).unwrap(),
        serde_json::to_value(by_day).unwrap(),
        parts.rolled.len(),
    )
}

#[sqlx::test]
async fn reports_from_the_rollups_equal_the_day_by_day_calculation(pool: PgPool) {
    let store = Store::from_pool(pool.clone());
    history(&store).await;
    let rolled = store.roll_up_report_days(t(NOW), 400).await.unwrap().days;
    // From the first stop's day, 29 November, to 8 December: 9 December ended at NOW, less
    // than ROLL_UP_AFTER ago.
    assert_eq!(rolled, 10);
    assert_eq!(
        store.roll_up_report_days(t(NOW), 400).await.unwrap().days,
        0
    );
    let rows: i64 = sqlx::query_scalar("SELECT count(*) FROM report_days")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert!(rows > 0);

    // Whether the window's whole days hold stopped time: read from the rollups then.
    for (since, until, stopped) in [
        ("2026-11-30T00:00:00Z", "2026-12-02T00:00:00Z", true),
        ("2026-11-29T00:00:00Z", "2026-12-09T00:00:00Z", true),
        ("2026-11-29T15:30:00Z", "2026-12-01T09:15:00Z", true),
        ("2026-11-30T10:31:00Z", "2026-12-03T00:00:00Z", true),
        ("2026-12-01T07:00:00Z", "2026-12-10T00:00:00Z", false),
    ] {
        for by in [None, Some("team")] {
            let (rolled, by_day, rows) = both(&store, since, until, by, &price_table()).await;
            assert_eq!(rows > 0, stopped, "{since}..{until}: read from the rollups");
            assert_eq!(rolled, by_day, "{since}..{until} by {by:?}");
        }
    }
    // Within a day nothing is rolled up: the history alone.
    let (rolled, by_day, rows) = both(
        &store,
        "2026-11-30T08:00:00Z",
        "2026-11-30T20:30:00Z",
        None,
        &price_table(),
    )
    .await;
    assert_eq!(rows, 0);
    assert_eq!(rolled, by_day);
}

#[sqlx::test]
async fn a_report_reads_its_whole_past_days_from_the_rollups(pool: PgPool) {
    let store = Store::from_pool(pool.clone());
    history(&store).await;
    let (since, until) = ("2026-11-30T00:00:00Z", "2026-12-02T00:00:00Z");
    // Not rolled up yet: the report is the day-by-day one.
    let (before, by_day, rows) = both(&store, since, until, None, &price_table()).await;
    assert_eq!((before.clone(), rows), (by_day, 0));
    // Rolled up one day at a time, the oldest first.
    assert_eq!(store.roll_up_report_days(t(NOW), 1).await.unwrap().days, 1);
    let rolled_until: chrono::NaiveDate =
        sqlx::query_scalar("SELECT rolled_until FROM report_rollup")
            .fetch_one(&pool)
            .await
            .unwrap();
    assert_eq!(rolled_until.to_string(), "2026-11-30");
    assert_eq!(
        store.roll_up_report_days(t(NOW), 400).await.unwrap().days,
        9
    );
    // A day's rows stand for its stops: doubled, the report's stopped hours follow them.
    sqlx::query("UPDATE report_days SET stopped_hours = stopped_hours * 2")
        .execute(&pool)
        .await
        .unwrap();
    let (rolled, by_day, _) = both(&store, since, until, None, &price_table()).await;
    let hours = |v: &Value| v["total"]["stopped_hours"].as_f64().unwrap();
    assert_eq!(hours(&rolled), 2.0 * hours(&by_day), "{rolled:#}");
}

/// The savings history's prices, with one g.ten reservation ($6/h) and a $1/h compute Savings
/// Plan (g.two at $1.50/h under it) held, and gp3 at $0.08 per GB-month priced for stopped
/// boxes.
const NETTING: &str = "source: test
as_of: today
prices:
  us-east-1: {g.two: 2.0, g.ten: 10.0}
reserved:
  source: test
  as_of: today
  rates:
    us-east-1: {g.ten: {1y: 6.0}}
savings_plan:
  source: test
  as_of: today
  rates:
    us-east-1: {g.two: {1y: 1.5}}
commitments:
  reserved_instances:
    - {instance_type: g.ten, region: us-east-1, count: 1, term: 1y}
  savings_plans:
    - {hourly_usd: 1.0, term: 1y, kind: compute}
while_stopped:
  source: test
  as_of: today
  ebs_gb_month:
    us-east-1: {gp3: 0.08}
  elastic_ip_hour:
    us-east-1: 0.005
";

#[sqlx::test]
async fn commitments_and_stopped_boxes_costs_net_alike_from_the_rollups(pool: PgPool) {
    let store = Store::from_pool(pool.clone());
    history(&store).await;
    // Every box keeps 730 GiB of gp3 ($0.08/h) and no Elastic IP.
    sqlx::query(
        "UPDATE instances SET elastic_ips = 0,
             volumes = '[{\"volume_type\": \"gp3\", \"size_gib\": 730}]'",
    )
    .execute(&pool)
    .await
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("prices.yaml");
    std::fs::write(&path, NETTING).unwrap();
    let prices = ebb::cloud::prices::load(&path).unwrap();
    assert_eq!(
        store.roll_up_report_days(t(NOW), 400).await.unwrap().days,
        10
    );

    // Worked by hand over the whole history: i-cv (the only g.ten) stopped 11 h from 20:00,
    // but was seen stopped at 20:05 and so ran, as far as the state changes say, until then:
    // the reservation covers its own running 5 minutes, and the 10 h 55 min left of the stop
    // ($109.17 not saved, $65.50 of the reservation unused). The g.two boxes were never
    // stopped at once: the one running uses the whole plan ($1 of $1.50) each hour, which
    // leaves nothing to cover the stopped one. 39 stopped hours paid $0.08 each for disks.
    let (rolled, by_day, rows) = both(
        &store,
        "2026-11-29T00:00:00Z",
        "2026-12-09T00:00:00Z",
        None,
        &prices,
    )
    .await;
    assert!(rows > 0);
    close(&rolled, &by_day, "whole history");
    let total = &rolled["total"];
    // Dollars to the cent, as the report gives them.
    for (name, hand) in [
        ("commitment_covered_usd", 110.0 - 10.0 / 12.0),
        ("unused_commitment_usd", 66.0 - 0.5),
        ("stopped_box_cost_usd", 39.0 * 0.08),
        ("unknown_box_cost_hours", 0.0),
    ] {
        let figure = total[name].as_f64().unwrap();
        assert!(
            (figure - hand).abs() < 0.005,
            "{name}: {figure} against {hand}"
        );
    }

    for (since, until) in [
        ("2026-11-30T00:00:00Z", "2026-12-02T00:00:00Z"),
        ("2026-11-29T15:30:00Z", "2026-12-01T09:15:00Z"),
        ("2026-11-30T10:31:00Z", "2026-12-03T00:00:00Z"),
        ("2026-11-30T21:00:00Z", "2026-12-01T05:30:00Z"),
    ] {
        for by in [None, Some("team")] {
            let (rolled, by_day, _) = both(&store, since, until, by, &prices).await;
            close(&rolled, &by_day, &format!("{since}..{until} by {by:?}"));
        }
    }
}

/// Asserts `a` and `b` are the same report, their figures equal but for rounding: the
/// rollups sum the same hours in another order.
fn close(a: &Value, b: &Value, what: &str) {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => {
            let (x, y) = (x.as_f64().unwrap(), y.as_f64().unwrap());
            assert!(
                (x - y).abs() <= 1e-9 * x.abs().max(y.abs()).max(1.0),
                "{what}: {x} against {y}"
            );
        }
        (Value::Array(x), Value::Array(y)) => {
            assert_eq!(x.len(), y.len(), "{what}: {a} against {b}");
            for (x, y) in x.iter().zip(y) {
                close(x, y, what);
            }
        }
        (Value::Object(x), Value::Object(y)) => {
            let keys = |o: &serde_json::Map<String, Value>| o.keys().cloned().collect::<Vec<_>>();
            assert_eq!(keys(x), keys(y), "{what}");
            for (k, x) in x {
                close(x, &y[k], &format!("{what}: {k}"));
            }
        }
        _ => assert_eq!(a, b, "{what}"),
    }
}

#[sqlx::test]
async fn the_pruner_keeps_the_state_changes_of_days_not_rolled_up(pool: PgPool) {
    let store = Store::from_pool(pool.clone());
    history(&store).await;
    let changes = || async {
        let n: i64 = sqlx::query_scalar("SELECT count(*) FROM instance_events")
            .fetch_one(&pool)
            .await
            .unwrap();
        n
    };
    let all = changes().await;
    // Nothing rolled up yet: kept from the day of ebb's first stop, 29 November.
    let pruned = store.prune(t(NOW), t(NOW)).await.unwrap();
    assert_eq!(pruned.events_before, t("2026-11-29T00:00:00Z"));
    assert_eq!((pruned.events, changes().await), (0, all));
    // Two days rolled up: what they needed may go, but not the changes since a box's last
    // stop by ebb: i-early's (stopped Sunday 18:00) and i-ml's (Monday 18:00).
    assert_eq!(store.roll_up_report_days(t(NOW), 2).await.unwrap().days, 2);
    let pruned = store.prune(t(NOW), t(NOW)).await.unwrap();
    assert_eq!(pruned.events_before, t("2026-12-01T00:00:00Z"));
    assert!(pruned.events > 0, "the two rolled days' changes go");
    let older: Vec<String> = sqlx::query_scalar(
        "SELECT DISTINCT instance FROM instance_events WHERE at < '2026-12-01T00:00:00Z'
         ORDER BY instance",
    )
    .fetch_all(&pool)
    .await
    .unwrap();
    assert_eq!(older, ["i-early", "i-ml"]);
    assert_eq!(pruned.events as i64 + changes().await, all);
    // Every other day still rolls up, none refused.
    let rolled = store.roll_up_report_days(t(NOW), 400).await.unwrap();
    assert_eq!((rolled.days, rolled.refused), (8, 0));
}

#[sqlx::test]
async fn a_day_whose_state_changes_were_pruned_first_is_refused_and_not_counted(pool: PgPool) {
    let store = Store::from_pool(pool.clone());
    history(&store).await;
    // An earlier ebb pruned the changes before 1 December without waiting for the roll-up;
    // the migration then finds ebb's first stop older than the first change kept.
    sqlx::query("DELETE FROM instance_events WHERE at < '2026-12-01T00:00:00Z'")
        .execute(&pool)
        .await
        .unwrap();
    let migration = include_str!("../../migrations/0041_state_changes_pruned.sql");
    let insert = migration
        .split(';')
        .find(|statement| statement.trim_start().starts_with("INSERT"))
        .unwrap();
    sqlx::query(insert).execute(&pool).await.unwrap();
    let before: chrono::DateTime<chrono::Utc> =
        sqlx::query_scalar("SELECT before FROM state_changes_pruned")
            .fetch_one(&pool)
            .await
            .unwrap();
    // The first change kept, on the morning of 1 December.
    assert!(before > t("2026-12-01T00:00:00Z") && before < t("2026-12-02T00:00:00Z"));

    // 29 November to 1 December lost changes: refused, the rest rolled up.
    let rolled = store.roll_up_report_days(t(NOW), 400).await.unwrap();
    assert_eq!((rolled.days, rolled.refused), (7, 3));

    let window = Window {
        since: t("2026-11-30T00:00:00Z"),
        until: t("2026-12-02T00:00:00Z"),
    };
    let prices = price_table();
    let parts = store
        .report_parts(window, None, &prices.commitments)
        .await
        .unwrap();
    let report = compute_parts(&parts, window, None, &prices);
    assert_eq!(report.total.stopped_hours, 0.0, "nothing counted from them");
    let days: Vec<String> = report
        .uncounted_days
        .iter()
        .map(|d| d.to_string())
        .collect();
    assert_eq!(days, ["2026-11-30", "2026-12-01"]);
    let text = ebb::report::table(&report);
    assert!(
        text.contains(
            "not counted: 2 days from 2026-11-30 to 2026-12-01, whose state changes were pruned"
        ),
        "{text}"
    );
    // Worked out from what is left, those days would claim stopped hours: what a roll-up
    // over them would have frozen.
    let whole = store
        .report_history(window.since, window.until, &prices.commitments)
        .await
        .unwrap();
    assert!(compute(&whole, window, None, &prices).total.stopped_hours > 0.0);
}

/// A box ebb stopped long ago, started and stopped by a person since, and started again
/// inside a later window: the changes since ebb's stop are kept past the retention, so a report
/// of that window still sees the person's first start, and counts nothing stopped in it.
/// Without them the stretch would seem to run from ebb's stop to the last start.
#[sqlx::test]
async fn the_changes_since_an_old_stop_by_ebb_outlive_the_retention(pool: PgPool) {
    use ebb::engine::Action;
    use ebb::fleet::InstanceState;
    use ebb::store::Outcome;
    let store = Store::from_pool(pool.clone());
    let mut fleet = Fleet::new(store.clone());
    fleet.sync("2026-11-30T00:00:00Z").await;
    fleet
        .ebb_did(
            "2026-11-30T18:00:00Z",
            "i-ml",
            Action::Stop,
            Outcome::Succeeded,
            "office",
        )
        .await;
    fleet
        .seen("2026-11-30T18:05:00Z", "i-ml", InstanceState::Stopped)
        .await;
    fleet
        .seen("2026-12-01T08:00:00Z", "i-ml", InstanceState::Running)
        .await;
    fleet
        .seen("2026-12-01T20:00:00Z", "i-ml", InstanceState::Stopped)
        .await;
    // A box ebb never stopped, stopped by a person: its old change goes.
    fleet
        .seen("2026-12-02T08:00:00Z", "i-cv", InstanceState::Stopped)
        .await;
    fleet
        .seen("2026-12-05T08:00:00Z", "i-ml", InstanceState::Running)
        .await;
    let window = Window {
        since: t("2026-12-05T00:00:00Z"),
        until: t("2026-12-05T12:00:00Z"),
    };
    let prices = price_table();
    let stopped = || async {
        let whole = store
            .report_history(window.since, window.until, &prices.commitments)
            .await
            .unwrap();
        compute(&whole, window, None, &prices).total.stopped_hours
    };
    assert_eq!(stopped().await, 0.0, "up since Tuesday 08:00");
    // Every day rolled up, then a retention that ends on 5 December.
    store.roll_up_report_days(t(NOW), 400).await.unwrap();
    let pruned = store
        .prune(t("2026-12-05T00:00:00Z"), t(NOW))
        .await
        .unwrap();
    assert_eq!(pruned.events_before, t("2026-12-05T00:00:00Z"));
    assert_eq!(
        pruned.events, 1,
        "i-cv's change goes, i-ml's three since ebb's stop stay"
    );
    assert_eq!(
        stopped().await,
        0.0,
        "the person's start on Tuesday is still known"
    );
}
