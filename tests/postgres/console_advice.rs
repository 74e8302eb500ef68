//! The console's `/advice` page over real HTTP and a real Postgres: a hand-made history (the
//! instances synced as ticks sync them, eight days of GPU readings kept) whose advice has a
//! right-sizing, commitments sized after and before the policies, a policy change with its
//! YAML diff, and the billing model of the boxes the price table prices a subscription for; fewer than 7 days of readings, said as such; a window ebb tracked nothing in;
//! the report windows' limits, and the page's own limit on instance-days.

use crate::common;

use chrono::{DateTime, Duration, Timelike, Utc};
use common::{instance, t};
use ebb::api::ApiState;
use ebb::fleet::{CapacityRead, HeldCapacity, ReservationKind, Sample};
use ebb::store::Store;
use reqwest::StatusCode;
use sqlx::PgPool;
use std::collections::BTreeMap;
use std::sync::Arc;

/// An idle rule for the notebook; nothing governs the other boxes.
const POLICY: &str = r#"
policies:
  - name: notebooks
    match: {tags: {team: research}}
    idle: {gpu_below: 5, for: 2h}
"#;

/// The shipped table's us-east-1 on-demand prices of the types involved, and a 1-year
/// Savings Plan rate of g5.xlarge ($0.60 against $1.006 on demand).
const PRICES: &str = r#"
source: deploy/prices.yaml's us-east-1
as_of: 2025-05-01
prices:
  us-east-1:
    p4d.24xlarge: 32.7726
    p3.2xlarge: 3.06
    g4dn.xlarge: 0.526
    g5.xlarge: 1.006
    g6.xlarge: 0.8048
    g6e.xlarge: 1.861
savings_plan:
  source: test
  as_of: 2025-05-01
  rates:
    us-east-1:
      g5.xlarge: {1y: 0.6}
subscription:
  us-east-1:
    g5.xlarge: {12: 500.0}
"#;

/// The console with the policy and prices above, its clock at `now`.
async fn console(pool: &PgPool, now: &str) -> (String, Store, tempfile::TempDir) {
    let store = Store::from_pool(pool.clone());
    store.migrate().await.unwrap();
    let policies = tempfile::tempdir().unwrap();
    std::fs::write(policies.path().join("p.yaml"), POLICY).unwrap();
    let elsewhere = tempfile::tempdir().unwrap();
    let prices = elsewhere.path().join("prices.yaml");
    std::fs::write(&prices, PRICES).unwrap();
    let table = ebb::cloud::prices::load(&prices).unwrap();
    let clock = ebb::clock::Clock::Fixed(t(now));
    let base = common::api::serve_with_console(ApiState {
        limits: common::api::public_reads(),
        prices: Arc::new(table),
        ..common::api::state(&store, vec![policies.path().to_path_buf()], clock)
    })
    .await;
    (base, store, policies)
}

async fn get(base: &str, path: &str) -> (StatusCode, String) {
    let r = reqwest::get(format!("{base}{path}")).await.unwrap();
    (r.status(), r.text().await.unwrap())
}

/// Readings every 5 minutes for `days` from 2026-11-30: `percent(time)`, `memory_mib` held
/// and one GPU busy.
fn readings(days: i64, memory_mib: u32, percent: impl Fn(DateTime<Utc>) -> f64) -> Vec<Sample> {
    let from = t("2026-11-30T00:00:00Z");
    let mut at = from;
    let mut out = Vec::new();
    while at < from + Duration::days(days) {
        out.push(Sample {
            memory_mib: Some(memory_mib),
            gpus_busy: Some(1),
            ..Sample::new(at, percent(at))
        });
        at += Duration::minutes(5);
    }
    out
}

/// What ticks would have kept: the fleet first listed the day before 2026-11-30, running,
/// and `days` of readings:
/// - `i-a100x8`, a p4d.24xlarge with one GPU at 30 % holding 12 GiB (the hand-worked box of
///   `tests/offline/advise.rs`: g6.xlarge carries it, (32.7726 - 0.8048) × 730 = $23,336.49 a
///   month less);
/// - `i-serving1` and `i-serving2`, g5.xlarge busy around the clock holding 20,000 MiB (only
///   the dearer g6e.xlarge carries that: no suggestion);
/// - `i-notebook`, a g5.xlarge under the idle rule, busy 09:00-12:00 every day.
async fn history(store: &Store, days: i64) {
    let mut big = instance("i-a100x8", &[("team", "ml")]);
    big.instance_type = "p4d.24xlarge".into();
    let fleet = [
        big,
        instance("i-serving1", &[("team", "serving")]),
        instance("i-serving2", &[("team", "serving")]),
        instance("i-notebook", &[("team", "research")]),
    ];
    store
        .sync_inventory(
            &["us-east-1".to_string()],
            &fleet,
            t("2026-11-29T00:00:00Z"),
        )
        .await
        .unwrap();
    let big = readings(days, 12_288, |_| 30.0);
    let serving = readings(days, 20_000, |_| 60.0);
    let notebook = readings(days, 20_000, |at| match (9..12).contains(&at.hour()) {
        true => 70.0,
        false => 1.0,
    });
    store
        .record_gpu_readings(&[
            ("i-a100x8", &big),
            ("i-serving1", &serving),
            ("i-serving2", &serving),
            ("i-notebook", &notebook),
        ])
        .await
        .unwrap();
}

/// Eight days of readings, 2026-11-30 to 2026-12-08 (192 hours).
///
/// By hand, commitments (1 year, g5.xlarge at $0.60 under the plan): after the policies the two
/// serving boxes run every hour and the notebook a few hours a day, so the best commitment is
/// the serving boxes' 2 × $0.60 = $1.20/h, saving 2 × (1.006 - 0.60) × 730 = $592.76 a month;
/// committing the notebook's $0.60 too would pay 24 hours for a few. Before the policies the
/// notebook runs every hour too, and the same method commits 3 × $0.60 = $1.80/h. The p4d box
/// has no plan rate and is left out of the spend.
#[sqlx::test(migrations = false)]
async fn the_advice_page_shows_a_right_sizing_the_commitments_and_a_policy_change(pool: PgPool) {
    let (base, store, _dir) = console(&pool, "2026-12-08T00:00:00Z").await;
    history(&store, 8).await;
    let (status, html) = get(
        &base,
        "/advice?since=2026-11-30T00:00:00Z&until=2026-12-08T00:00:00Z",
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{html}");
    for shown in [
        "<a href=\"/advice\" aria-current=\"page\">Advice</a>",
        // Right-sizing.
        "<h2 id=\"rightsize\">Right-sizing</h2>",
        "<a href=\"/instances/i-a100x8\">i-a100x8</a>",
        "<td>p4d.24xlarge</td><td>g6.xlarge</td><td class=\"num\">$23,336.49</td>",
        "busiest GPU p95 30 %, p95 1 of 8 GPUs busy, peak 12.0 GiB: g6.xlarge would carry it",
        // Commitments, after the policies and before them.
        "<th scope=\"row\">us-east-1</th><td>1y</td><td>after_policies</td><td class=\"num\">$1.2000</td><td class=\"num\">100.0 %</td>",
        "<td>before_policies</td><td class=\"num\">$1.8000</td>",
        "$592.76",
        "<dt>Schedule</dt><dd><a href=\"/instances/i-notebook\">i-notebook</a>",
        // A policy change with its YAML diff.
        "<h2 id=\"policy-changes\">Policy changes</h2>",
        "notebooks: <code>idle.for</code> 2h → 1h",
        "<pre class=\"diff\"><code>",
        "   - name: notebooks\n     idle:\n-      for: 2h\n+      for: 1h\n</code></pre>",
        // The billing model: a box running every hour (730 h, $734.38 a month by the hour)
        // against a $500 a month subscription; the notebook, stopped when idle, stays.
        "<h2 id=\"subscriptions\">Subscriptions</h2>",
        "<td class=\"num\">730</td><td class=\"num\">734.38 USD</td><td>12-month subscription</td>",
        "<td>stay by the hour</td>",
    ] {
        assert!(html.contains(shown), "/advice lacks {shown:?}:\n{html}");
    }
    // The busy single-GPU boxes are not resized.
    let rightsize = html.split("id=\"commitments\"").next().unwrap();
    assert!(
        !rightsize.contains("<a href=\"/instances/i-serving1\">i-serving1</a></th>"),
        "{html}"
    );
    assert!(!html.contains("Fewer than 7 days"), "{html}");
}

#[sqlx::test(migrations = false)]
async fn the_advice_page_says_when_it_has_less_than_a_week_and_refuses_unbounded_windows(
    pool: PgPool,
) {
    let (base, store, _dir) = console(&pool, "2026-12-08T00:00:00Z").await;
    // Before the first listing: nothing tracked.
    let (status, html) = get(&base, "/advice?since=7d").await;
    assert_eq!(status, StatusCode::OK, "{html}");
    assert!(html.contains("ebb tracked no instance at"), "{html}");
    // Three days of readings, in a window of eight: less than a week, said so, no sections.
    history(&store, 3).await;
    let (status, html) = get(
        &base,
        "/advice?since=2026-11-30T00:00:00Z&until=2026-12-08T00:00:00Z",
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{html}");
    assert!(
        html.contains("Fewer than 7 days of GPU readings in this window (the longest of any instance covers 3.0 days)"),
        "{html}"
    );
    assert!(!html.contains("id=\"rightsize\""), "{html}");
    // The capacity reservations come from their reads, not the GPU readings: shown all the
    // same, unread until a read is kept.
    assert!(
        html.contains("Held outside ebb and paid whether used or not; not read in this period"),
        "{html}"
    );
    let held = HeldCapacity {
        id: "cr-0idle".to_string(),
        instance_type: "p4d.24xlarge".to_string(),
        zone: "us-east-1a".to_string(),
        platform: "Linux/UNIX".to_string(),
        kind: ReservationKind::CapacityReservation,
        total: 2,
        available: 2,
        targeted: true,
        end: None,
    };
    let read = CapacityRead {
        region: "us-east-1".to_string(),
        at: t("2026-12-07T23:00:00Z"),
        reservations: vec![held],
        ran_outside: BTreeMap::from([("p4d.24xlarge".to_string(), vec!["i-a100x8".to_string()])]),
    };
    store.keep_capacity_read(&read).await.unwrap();
    let (_, html) = get(
        &base,
        "/advice?since=2026-11-30T00:00:00Z&until=2026-12-08T00:00:00Z",
    )
    .await;
    for shown in [
        "read for us-east-1 1 of 192 h; unread hours count neither way",
        "<th scope=\"row\"><code>cr-0idle</code></th><td>p4d.24xlarge us-east-1a</td><td class=\"num\">2</td><td class=\"num\">2.0 of 2.0</td><td class=\"num\">$65.55</td><td><a href=\"/instances/i-a100x8\">i-a100x8</a></td>",
        "it is targeted: a box runs in it only once made to start into it",
    ] {
        assert!(html.contains(shown), "/advice lacks {shown:?}:\n{html}");
    }
    // The default window is the last 30 days, offered as such.
    let (status, html) = get(&base, "/advice").await;
    assert_eq!(status, StatusCode::OK, "{html}");
    assert!(
        html.contains("<option value=\"30d\" selected>the last 30 days</option>"),
        "{html}"
    );
    // The report windows' limits, as 400 pages naming the field.
    let (status, body) = get(&base, "/advice?since=0001-01-01T00:00:00Z").await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(body.contains("at most 400 days"), "{body}");
    let (status, body) = get(&base, "/advice?since=1d&until=9999-12-31T00:00:00Z").await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(body.contains("is after now"), "{body}");
    // 101 instances over 400 days is more than the page works out (40,000 instance-days):
    // refused before any reading is read, pointing at ebb advise.
    let many: Vec<_> = (0..101)
        .map(|n| instance(&format!("i-many{n:03}"), &[("team", "ml")]))
        .collect();
    store
        .sync_inventory(&["us-east-1".to_string()], &many, t("2025-11-01T00:00:00Z"))
        .await
        .unwrap();
    let (status, body) = get(&base, "/advice?since=400d").await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert!(
        body.contains("101 instances over 400 days is more than the console works out (at most 40000 instance-days)"),
        "{body}"
    );
}

/// Boxes of types the price table lacks: the page names every one at once, with how many
/// boxes and where to add them, before any work (the replay would stop at the first), and
/// shows what needs no replay.
#[sqlx::test(migrations = false)]
async fn the_advice_page_names_every_type_the_price_table_lacks(pool: PgPool) {
    let (base, store, _dir) = console(&pool, "2026-12-08T00:00:00Z").await;
    history(&store, 8).await;
    let mut extra = Vec::new();
    for (id, ty) in [
        ("i-h100a", "p5.48xlarge"),
        ("i-h100b", "p5.48xlarge"),
        ("i-l4", "g6.4xlarge"),
    ] {
        let mut box_ = instance(id, &[("team", "ml")]);
        box_.instance_type = ty.into();
        extra.push(box_);
    }
    store
        .sync_inventory(
            &["us-east-1".to_string()],
            &extra,
            t("2026-11-29T00:00:00Z"),
        )
        .await
        .unwrap();
    let (status, body) = get(
        &base,
        "/advice?since=2026-11-30T00:00:00Z&until=2026-12-08T00:00:00Z",
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert!(
        body.contains("No on-demand price for 2 instance type(s) the advice costs: g6.4xlarge in us-east-1 (1 instance), p5.48xlarge in us-east-1 (2 instances). Add them to the price table (EBB_PRICES)"),
        "{body}"
    );
    // What needs no replay is still shown: the reservations, from their reads.
    assert!(!body.contains("id=\"rightsize\""), "{body}");
    assert!(
        body.contains("<h2 id=\"reservations\">Capacity reservations</h2>"),
        "{body}"
    );
}

#[sqlx::test(migrations = false)]
async fn the_subscription_is_advised_at_the_clouds_kept_quote_over_the_tables(pool: PgPool) {
    let (base, store, _dir) = console(&pool, "2026-12-08T00:00:00Z").await;
    history(&store, 8).await;
    // The cloud quotes the year at $800 a month, above the table's $500 and above the $734.38
    // the box costs by the hour: the quote wins, and the advice is to stay by the hour.
    store
        .keep_quotes(&[ebb::fleet::PriceQuote {
            region: "us-east-1".to_string(),
            instance_type: "g5.xlarge".to_string(),
            currency: "USD".to_string(),
            hourly: Some(1.006),
            monthly: std::collections::BTreeMap::from([(12, 800.0)]),
            source: "DescribePrice".to_string(),
            quoted_at: t("2026-12-07T00:00:00Z"),
        }])
        .await
        .unwrap();
    let (status, html) = get(
        &base,
        "/advice?since=2026-11-30T00:00:00Z&until=2026-12-08T00:00:00Z",
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{html}");
    let subscriptions = html.split("id=\"subscriptions\"").nth(1).unwrap();
    assert!(
        !subscriptions.contains("12-month subscription</td>"),
        "{subscriptions}"
    );
    assert!(
        subscriptions.contains(
            "<td class=\"num\">730</td><td class=\"num\">734.38 USD</td><td>stay by the hour</td>"
        ),
        "{subscriptions}"
    );
}
