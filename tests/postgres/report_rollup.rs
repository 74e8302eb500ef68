//! The report's daily rollups (`report_days`): the hand-worked history of
//! tests/common/savings.rs rolled up day by day, then every report read from the rollups and
//! the rest of the window (`Store::report_parts`) equal to the one worked out day by day from
//! the whole window's history (`Store::report_history`), for whole days, days cut by the
//! window, and grouped by a tag or not.

use crate::common;

use common::savings::{history, price_table};
use common::t;
use ebb::report::{compute, compute_parts, Window};
use ebb::store::Store;
use sqlx::PgPool;

/// After the history: every day of it is over.
const NOW: &str = "2026-12-10T00:00:00Z";

/// The report over `[since, until)` by `by`, from the rollups and day by day, as JSON.
async fn both(
    store: &Store,
    since: &str,
    until: &str,
    by: Option<&str>,
) -> (serde_json::Value, serde_json::Value, usize) {
    let window = Window {
        since: t(since),
        until: t(until),
    };
    let prices = price_table();
    let parts = store.report_parts(window, by).await.unwrap();
    let rolled = compute_parts(&parts, window, by, &prices);
    let whole = store
        .report_history(window.since, window.until, &Default::default())
        .await
        .unwrap();
    let by_day = compute(&whole, window, by, &prices);
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
    let rolled = store.roll_up_report_days(t(NOW), 400).await.unwrap();
    // From the first stop's day, 29 November, to 8 December: 9 December ended at NOW, less
    // than ROLL_UP_AFTER ago.
    assert_eq!(rolled, 10);
    assert_eq!(store.roll_up_report_days(t(NOW), 400).await.unwrap(), 0);
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
            let (rolled, by_day, rows) = both(&store, since, until, by).await;
            assert_eq!(rows > 0, stopped, "{since}..{until}: read from the rollups");
            assert_eq!(rolled, by_day, "{since}..{until} by {by:?}");
        }
    }
    // Within a day nothing is rolled up: the history alone.
    let (rolled, by_day, rows) =
        both(&store, "2026-11-30T08:00:00Z", "2026-11-30T20:30:00Z", None).await;
    assert_eq!(rows, 0);
    assert_eq!(rolled, by_day);
}

#[sqlx::test]
async fn a_report_reads_its_whole_past_days_from_the_rollups(pool: PgPool) {
    let store = Store::from_pool(pool.clone());
    history(&store).await;
    let (since, until) = ("2026-11-30T00:00:00Z", "2026-12-02T00:00:00Z");
    // Not rolled up yet: the report is the day-by-day one.
    let (before, by_day, rows) = both(&store, since, until, None).await;
    assert_eq!((before.clone(), rows), (by_day, 0));
    // Rolled up one day at a time, the oldest first.
    assert_eq!(store.roll_up_report_days(t(NOW), 1).await.unwrap(), 1);
    let rolled_until: chrono::NaiveDate =
        sqlx::query_scalar("SELECT rolled_until FROM report_rollup")
            .fetch_one(&pool)
            .await
            .unwrap();
    assert_eq!(rolled_until.to_string(), "2026-11-30");
    assert_eq!(store.roll_up_report_days(t(NOW), 400).await.unwrap(), 9);
    // A day's rows stand for its stops: doubled, the report's stopped hours follow them.
    sqlx::query("UPDATE report_days SET stopped_hours = stopped_hours * 2")
        .execute(&pool)
        .await
        .unwrap();
    let (rolled, by_day, _) = both(&store, since, until, None).await;
    let hours = |v: &serde_json::Value| v["total"]["stopped_hours"].as_f64().unwrap();
    assert_eq!(hours(&rolled), 2.0 * hours(&by_day), "{rolled:#}");
}
