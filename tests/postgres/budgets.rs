//! Budgets on the simulated fleet, tick by tick with a real Postgres: three boxes of a team
//! run flat out at $2.50 an hour each, so a $30 daily budget is spent at 04:00. With
//! `at_limit: stop` each box gets its notice then and is stopped once it is served, the busy
//! one no later than `max_defer`; an overridden one is kept; each threshold's notice goes out
//! once; the audit log verifies. With `refuse_starts` the next opening that day starts none of
//! them, and the next day's opening starts them again.

use crate::common::{t, time::on_paused_time, world::SimWorld};
use ebb::clock::Clock;
use ebb::fleet::money::PriceTable;
use ebb::fleet::InstanceState;
use ebb::reconcile::{Options, TickReport};
use ebb::store::{AuditFilter, Store, Verification};
use sqlx::PgPool;
use std::sync::Arc;

/// g5.xlarge at $2.50 an hour in us-east-1.
fn prices() -> Arc<PriceTable> {
    let mut table = PriceTable::default();
    table
        .prices
        .entry("us-east-1".into())
        .or_default()
        .insert("g5.xlarge".into(), 2.5);
    Arc::new(table)
}

fn options() -> Options {
    Options {
        prices: prices(),
        ..Options::default()
    }
}

const STOP: &str = r#"
policies:
  - name: research
    match: {tags: {team: research}}
budgets:
  - name: research-daily
    match: {tags: {team: research}}
    amount: 30
    period: day
    timezone: UTC
    at_limit: stop
    notify_before: 30m
    max_defer: 1h
    notify: [research-leads@example.com]
  - name: research-forecast
    match: {tags: {team: research}}
    amount: 100
    period: day
    timezone: UTC
    forecast: true
"#;

/// Three boxes running flat out (one idle) since before the day began.
const FLEET: &str = r#"
instances:
  - {id: i-busy, region: us-east-1, type: g5.xlarge, state: running, launched_at: "2026-11-30T00:00:00Z", tags: {team: research}, sim: {usage: busy}}
  - {id: i-idle, region: us-east-1, type: g5.xlarge, state: running, launched_at: "2026-11-30T00:00:00Z", tags: {team: research}, sim: {usage: idle}}
  - {id: i-kept, region: us-east-1, type: g5.xlarge, state: running, launched_at: "2026-11-30T00:00:00Z", tags: {team: research}, sim: {usage: busy}}
"#;

/// Each acted-on instance with its action and code, in the report's order.
fn acted(report: &TickReport) -> Vec<(String, &'static str, &'static str)> {
    report
        .actions
        .iter()
        .map(|a| {
            let d = &a.decision;
            (d.instance.clone(), d.action.as_str(), d.code.as_str())
        })
        .collect()
}

fn row(id: &str, action: &'static str, code: &'static str) -> (String, &'static str, &'static str) {
    (id.to_string(), action, code)
}

/// The budget's spend as the tick worked it out.
fn spent(report: &TickReport) -> f64 {
    report.budgets[0].spent.clone().unwrap()
}

/// The notices of research-daily in the audit log: (code, reason).
async fn notices(store: &Store) -> Vec<(String, String)> {
    notices_of(store, "research-daily").await
}

/// The notices of budget `name` in the audit log: (code, reason).
async fn notices_of(store: &Store, name: &str) -> Vec<(String, String)> {
    let rows = store.audit(&AuditFilter::default()).await.unwrap();
    rows.into_iter()
        .filter(|r| r.entry.action == "budget_notice")
        .filter(|r| r.entry.reason.starts_with(&format!("{name}:")))
        .map(|r| (r.entry.code.unwrap_or_default(), r.entry.reason))
        .collect()
}

#[sqlx::test(migrations = false)]
async fn a_spent_budget_stops_its_boxes_after_notice_busy_ones_by_max_defer_and_keeps_an_overridden_one(
    pool: PgPool,
) {
    let url = crate::common::database_url(&pool);
    on_paused_time(|| async move {
        let pool = sqlx::postgres::PgPoolOptions::new()
            .max_connections(4)
            .connect(&url)
            .await
            .unwrap();
        let store = Store::from_pool(pool.clone());
        // The simulator's clock runs on tokio's paused clock, moved to each tick's time: its
        // readings reach the tick, and a stop takes the time it takes.
        let clock = Clock::simulated(t("2026-12-01T00:00:00Z"), 1.0);
        let mut w = SimWorld::plan(FLEET)
            .policy("research.yaml", STOP)
            .clock(clock)
            .options(options())
            .start(store.clone())
            .await;

        // The day begins: nothing spent yet.
        let report = tick(&mut w, clock, "2026-12-01T00:00:00Z").await;
        assert_eq!(spent(&report), 0.0);
        assert_eq!(acted(&report), [], "{:?}", report.actions);
        // Two hours at $7.50 an hour: half the amount, and its notice.
        let report = tick(&mut w, clock, "2026-12-01T02:00:00Z").await;
        assert!((spent(&report) - 15.0).abs() < 1e-9, "{:?}", report.budgets);
        assert_eq!(acted(&report), []);
        tick(&mut w, clock, "2026-12-01T02:30:00Z").await;
        let report = tick(&mut w, clock, "2026-12-01T03:12:00Z").await;
        assert!((spent(&report) - 24.0).abs() < 1e-9);
        let sent = notices(&store).await;
        assert_eq!(sent.len(), 2, "each threshold's notice once: {sent:?}");
        assert_eq!(sent[0].0, "budget_threshold");
        assert!(
        sent[0].1.starts_with(
            "research-daily: $15.00 of $30.00 spent by 2026-12-01 02:00 UTC; 50% of the amount reached"
        ),
        "{}",
        sent[0].1
    );
        assert!(
            sent[1].1.contains("80% of the amount reached"),
            "{}",
            sent[1].1
        );

        // Its owner keeps one box for the day.
        store
            .create_override(
                "i-kept",
                t("2026-12-02T00:00:00Z"),
                "the paper deadline",
                "mei@example.com",
                t("2026-12-01T03:30:00Z"),
            )
            .await
            .unwrap();

        // 04:00: $30 spent. The two others get their notice; the kept one none.
        let report = tick(&mut w, clock, "2026-12-01T04:00:00Z").await;
        assert!((spent(&report) - 30.0).abs() < 1e-9);
        assert_eq!(
            acted(&report),
            [
                row("i-busy", "notify", "budget_notice"),
                row("i-idle", "notify", "budget_notice"),
            ]
        );
        assert_eq!(
            report.actions[0].decision.stop_at,
            Some(t("2026-12-01T04:30:00Z"))
        );
        let kept = store.instance("i-kept").await.unwrap().unwrap();
        assert_eq!(kept.decided_code.as_deref(), Some("override"));
        let sent = notices(&store).await;
        assert_eq!(sent.len(), 3, "{sent:?}");
        assert_eq!(sent[2].0, "budget_exhausted");
        assert!(
            sent[2].1.contains("100% of the amount reached")
                && sent[2].1.contains(
                    "running boxes stopped after their notice until 2026-12-02 00:00 UTC"
                ),
            "{}",
            sent[2].1
        );

        // 04:30: the notice is served. The idle box is stopped; the busy one waits.
        let report = tick(&mut w, clock, "2026-12-01T04:29:00Z").await;
        assert_eq!(acted(&report), []);
        let report = tick(&mut w, clock, "2026-12-01T04:30:00Z").await;
        assert_eq!(acted(&report), [row("i-idle", "stop", "budget_exhausted")]);
        let busy = store.instance("i-busy").await.unwrap().unwrap();
        assert_eq!(busy.decided_code.as_deref(), Some("busy_deferred"));
        assert!(busy
            .decided_reason
            .unwrap_or_default()
            .contains("stop deferred until idle or 05:30 UTC (max_defer 1h)"),);
        // 05:30: max_defer has passed, busy or not.
        let report = tick(&mut w, clock, "2026-12-01T05:29:00Z").await;
        assert_eq!(acted(&report), []);
        let report = tick(&mut w, clock, "2026-12-01T05:30:00Z").await;
        assert_eq!(acted(&report), [row("i-busy", "stop", "budget_exhausted")]);
        let reason = &report.actions[0].decision.reason;
        assert!(
        reason.starts_with("research-daily: $") && reason.contains("of $30.00 spent by 2026-12-01 05:30 UTC; at_limit: stop until 2026-12-02 00:00 UTC; notice sent 04:00 UTC; GPU busy"),
        "{reason}"
    );
        assert_eq!(
            w.state("us-east-1", "i-busy").await,
            InstanceState::Stopping
        );
        assert_eq!(w.state("us-east-1", "i-kept").await, InstanceState::Running);

        let audit = store.audit(&AuditFilter::default()).await.unwrap();
        let stops: Vec<_> = audit
            .iter()
            .filter(|r| r.entry.action == "stop" && r.entry.outcome.as_str() == "succeeded")
            .map(|r| {
                (
                    r.entry.instance.clone().unwrap(),
                    r.entry.code.clone().unwrap(),
                )
            })
            .collect();
        assert_eq!(
            stops,
            [
                ("i-idle".to_string(), "budget_exhausted".to_string()),
                ("i-busy".to_string(), "budget_exhausted".to_string())
            ]
        );
        assert_eq!(notices(&store).await.len(), 3, "no notice twice");
        // The forecast of $180 for the day passed every threshold of $100 at the first tick:
        // one notice, for the highest.
        let forecast = notices_of(&store, "research-forecast").await;
        assert_eq!(forecast.len(), 1, "{forecast:?}");
        assert_eq!(forecast[0].0, "budget_threshold");
        assert!(
            forecast[0].1.starts_with(
                "research-forecast: $0.00 of $100.00 spent by 2026-12-01 00:00 UTC; 100% of the amount forecast to be reached; forecast $180.00 by 2026-12-02 00:00 UTC"
            ),
            "{}",
            forecast[0].1
        );
        assert!(matches!(
            store.verify_audit().await.unwrap(),
            Verification::Intact { .. }
        ));

        // `ebb budgets` says the same from the store.
        let prices = w.dir.path().join("prices.yaml");
        std::fs::write(
            &prices,
            "source: test\nas_of: 2026-12-01\nprices: {us-east-1: {g5.xlarge: 2.5}}\n",
        )
        .unwrap();
        let policies = w.dir.path().join("policies");
        let args = |format: &'static str| {
            [
                "budgets",
                "--policies",
                policies.to_str().unwrap(),
                "--prices",
                prices.to_str().unwrap(),
                "--cloud",
                "aws",
                "--at",
                "2026-12-01T05:30:00Z",
                "--format",
                format,
            ]
        };
        let o = crate::common::ebb_on(&url, &args("json"));
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let rows: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        let row = &rows[0];
        assert_eq!(row["budget"], "research-daily");
        assert_eq!(row["at_limit"], "stop");
        assert_eq!(row["amount"], 30.0);
        // i-busy and i-kept ran 5.5 h at $2.50; i-idle until the listing saw it stopped (the
        // simulator does not say when a stop ended; EC2 does), 05:29 here.
        let spent = row["spent"].as_f64().unwrap();
        assert!((41.0..=41.25).contains(&spent), "{row}");
        assert_eq!(row["top_boxes"][0][1], 13.75, "{row}");
        // Running as last listed: i-kept, and i-busy, whose stop at 05:30 the next listing sees.
        assert_eq!(row["per_hour"], 5.0, "{row}");
        let o = crate::common::ebb_on(&url, &args("table"));
        let table = String::from_utf8_lossy(&o.stdout).into_owned();
        assert!(table.starts_with("budget "), "{table}");
        let line = table.lines().nth(1).unwrap();
        assert!(
            line.starts_with("research-daily     2026-12-02 00:00 UTC  $41.21  $30.00   137%"),
            "{table}"
        );
        assert!(
            line.contains("$30.00") && line.trim_end().ends_with("stop"),
            "{table}"
        );

        // `ebb report` with the policies: each budget's spend in each of its periods.
        let o = crate::common::ebb_on(
            &url,
            &[
                "report",
                "--since",
                "2026-11-30T12:00:00Z",
                "--until",
                "2026-12-01T05:30:00Z",
                "--at",
                "2026-12-01T05:30:00Z",
                "--policies",
                policies.to_str().unwrap(),
                "--prices",
                prices.to_str().unwrap(),
                "--format",
                "json",
            ],
        );
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let r: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        let daily: Vec<&serde_json::Value> = r["budgets"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|p| p["budget"] == "research-daily")
            .collect();
        // The window's two days: nothing seen on the first, $41.21 on the second.
        assert_eq!(daily.len(), 2, "{r}");
        assert_eq!(daily[0]["spent"], 0.0);
        assert_eq!(daily[1]["from"], "2026-12-01T00:00:00Z");
        let spent = daily[1]["spent"].as_f64().unwrap();
        assert!((41.2..41.25).contains(&spent), "{r}");
        pool.close().await;
    });
}

const REFUSE: &str = r#"
policies:
  - name: research
    match: {tags: {team: research}}
    work_hours:
      timezone: UTC
      periods:
        - {days: mon-sun, start: "00:00", stop: "04:00"}
        - {days: mon-sun, start: "06:00", stop: "12:00"}
      start_at_open: all
      busy_defers_stop: false
budgets:
  - name: research-daily
    match: {tags: {team: research}}
    amount: 25
    period: day
    timezone: UTC
    at_limit: refuse_starts
"#;

/// The same boxes, stopped before the day's first opening.
const STOPPED: &str = r#"
instances:
  - {id: i-a, region: us-east-1, type: g5.xlarge, state: stopped, state_since: "2026-11-30T12:05:00Z", tags: {team: research}, sim: {usage: busy}}
  - {id: i-b, region: us-east-1, type: g5.xlarge, state: stopped, state_since: "2026-11-30T12:05:00Z", tags: {team: research}, sim: {usage: busy}}
  - {id: i-c, region: us-east-1, type: g5.xlarge, state: stopped, state_since: "2026-11-30T12:05:00Z", tags: {team: research}, sim: {usage: busy}}
"#;

#[sqlx::test(migrations = false)]
async fn a_spent_budget_refuses_the_next_opening_and_the_next_period_starts_the_boxes_again(
    pool: PgPool,
) {
    use std::time::Duration;
    let url = crate::common::database_url(&pool);
    on_paused_time(|| async move {
        let pool = sqlx::postgres::PgPoolOptions::new()
            .max_connections(4)
            .connect(&url)
            .await
            .unwrap();
        let store = Store::from_pool(pool.clone());
        let clock = Clock::simulated(t("2026-11-30T23:50:00Z"), 1.0);
        let mut w = SimWorld::plan(STOPPED)
            .policy("research.yaml", REFUSE)
            .clock(clock)
            .options(options())
            .start(store.clone())
            .await;
        // Every ten minutes from 23:50 to 06:10: started at 00:00, $25 spent by 03:20 (three
        // boxes at $7.50 an hour), stopped at the 04:00 close, refused at the 06:00 opening.
        let mut last = None;
        while clock.now() < t("2026-12-01T06:10:00Z") {
            last = Some(w.tick_at(clock.now()).await);
            tokio::time::advance(Duration::from_secs(600)).await;
        }
        let report = last.unwrap();
        let standing = &report.budgets[0];
        assert!(standing.spent.clone().unwrap() >= 25.0, "{standing:?}");
        assert_eq!(states(&w).await, [InstanceState::Stopped; 3]);
        let a = store.instance("i-a").await.unwrap().unwrap();
        assert_eq!(a.decided_code.as_deref(), Some("budget_exhausted"));
        let reason = a.decided_reason.unwrap_or_default();
        assert!(
            reason.contains("of $25.00 spent by 2026-12-01")
                && reason.contains("starts refused until 2026-12-02 00:00 UTC (at_limit: refuse_starts); without it: start"),
            "{reason}"
        );
        // Still refused at 06:10. Then the team's lead raises the budget by half until 07:00,
        // on record: the next tick starts them.
        w.tick_at(clock.now()).await;
        assert_eq!(states(&w).await, [InstanceState::Stopped; 3]);
        let set = ebb::policy::load(&[w.dir.path().join("policies")]).unwrap();
        let raise = ebb::budget::raise(
            &set,
            "research-daily",
            None,
            ebb::budget::RaiseBy::Percent(50.0),
            t("2026-12-01T07:00:00Z"),
            "the demo at 07:00",
            "lead@example.com",
            clock.now(),
        )
        .unwrap();
        store.raise_budget(&raise).await.unwrap();
        tokio::time::advance(Duration::from_secs(60)).await;
        let report = w.tick_at(clock.now()).await;
        assert_eq!(report.budgets[0].amount, 37.5);
        assert_eq!(
            acted(&report)
                .iter()
                .map(|a| (a.1, a.2))
                .collect::<Vec<_>>(),
            [("start", "start_at_open"); 3],
            "{:?}",
            report.actions
        );
        // The next day is the next period: its first opening starts them again.
        while clock.now() < t("2026-12-02T00:20:00Z") {
            w.tick_at(clock.now()).await;
            tokio::time::advance(Duration::from_secs(600)).await;
        }
        assert_eq!(states(&w).await, [InstanceState::Running; 3]);
        let audit = store.audit(&AuditFilter::default()).await.unwrap();
        let starts = audit
            .iter()
            .filter(|r| r.entry.action == "start" && r.entry.outcome.as_str() == "succeeded")
            .count();
        assert_eq!(
            starts, 9,
            "started at the first day's 00:00, after the raise at 06:11 and at the second day's 00:00; not at 06:00"
        );
        let raised: Vec<_> = audit
            .iter()
            .filter(|r| r.entry.action == "budget_raise")
            .map(|r| (r.entry.actor.as_str(), r.entry.reason.as_str()))
            .collect();
        assert_eq!(raised.len(), 1);
        assert_eq!(raised[0].0, "lead@example.com");
        assert!(
            raised[0]
                .1
                .starts_with("research-daily: raised by 50% until 2026-12-01T07:00:00Z"),
            "{}",
            raised[0].1
        );
        pool.close().await;
    });
}

/// The states the simulated cloud lists the three boxes in.
async fn states(w: &SimWorld) -> Vec<InstanceState> {
    let mut out = Vec::new();
    for id in ["i-a", "i-b", "i-c"] {
        out.push(w.state("us-east-1", id).await);
    }
    out
}

/// A tick at `at`, the simulator's clock moved there first.
async fn tick(w: &mut SimWorld, clock: Clock, at: &str) -> TickReport {
    let ahead = (t(at) - clock.now()).to_std().unwrap();
    tokio::time::advance(ahead).await;
    w.tick_at(t(at)).await
}

/// The console, on what the ticks stored: the Budgets page's burn-down and what the budget
/// did, and an instance's "why, now" naming the budget that decides it.
#[sqlx::test(migrations = false)]
async fn the_console_shows_the_burn_down_and_why_a_box_is_stopped(pool: PgPool) {
    let store = Store::from_pool(pool);
    let mut w = SimWorld::plan(FLEET)
        .policy("research.yaml", STOP)
        .clock(Clock::Fixed(t("2026-12-01T04:10:00Z")))
        .options(options())
        .start(store.clone())
        .await;
    w.tick("2026-12-01T00:00:00Z").await;
    let report = w.tick("2026-12-01T04:00:00Z").await;
    assert_eq!(acted(&report).len(), 3, "{:?}", report.actions);
    let base = crate::common::api::serve_with_console(ebb::api::ApiState {
        limits: crate::common::api::public_reads(),
        prices: prices(),
        ..crate::common::api::state(
            &store,
            vec![w.dir.path().join("policies")],
            Clock::Fixed(t("2026-12-01T04:10:00Z")),
        )
    })
    .await;
    let get = |path: &str| {
        let url = format!("{base}{path}");
        async move { reqwest::get(url).await.unwrap().text().await.unwrap() }
    };
    let page = get("/budgets").await;
    for text in [
        "<h2 id=\"budget-research-daily\">research-daily</h2>",
        "<strong>$31.25</strong> of $30.00 spent (104%) this day",
        "Burn-down of research-daily",
        "<polyline class=\"spend\"",
        "<th scope=\"row\"><a href=\"/instances/i-busy\">i-busy</a></th>",
        "budget_notice succeeded",
        "100% of the amount reached",
        "notify succeeded",
    ] {
        assert!(page.contains(text), "/budgets lacks {text:?}:\n{page}");
    }
    let page = get("/instances/i-busy").await;
    assert!(
        page.contains("research-daily: $31.25 of $30.00 spent by 2026-12-01 04:10 UTC; at_limit: stop: notice sent 04:00 UTC, stop at 04:30 UTC"),
        "{page}"
    );
}

/// Under `--dry-run` a spent budget's notices are recorded as dry runs (no CloudEvent, no
/// post) and its stops are decided, audited as dry runs, and not made.
#[sqlx::test(migrations = false)]
async fn a_dry_run_records_the_budget_notices_as_dry_runs(pool: PgPool) {
    let store = Store::from_pool(pool);
    let mut w = SimWorld::plan(FLEET)
        .policy("research.yaml", STOP)
        .clock(Clock::Fixed(t("2026-12-01T06:00:00Z")))
        .options(Options {
            dry_run: true,
            ..options()
        })
        .start(store.clone())
        .await;
    for at in ["2026-12-01T00:00:00Z", "2026-12-01T04:00:00Z"] {
        w.tick(at).await;
    }
    let rows = store.audit(&AuditFilter::default()).await.unwrap();
    let notices: Vec<_> = rows
        .iter()
        .filter(|r| r.entry.action == "budget_notice")
        .collect();
    assert!(!notices.is_empty());
    assert!(notices.iter().all(|r| r.entry.dry_run), "{notices:#?}");
    assert!(notices
        .iter()
        .all(|r| ebb::events::event_of("urn:test", r).is_none()));
    assert_eq!(w.state("us-east-1", "i-idle").await, InstanceState::Running);
}

/// What ran says which boxes run on spot, as the inventory kept them: budgets leave their
/// hours out of the spend rather than price them at on-demand.
#[sqlx::test(migrations = false)]
async fn what_ran_says_which_boxes_run_on_spot(pool: PgPool) {
    let store = Store::from_pool(pool);
    store.migrate().await.unwrap();
    let mut spot = crate::common::instance("i-spot", &[]);
    spot.lifecycle = ebb::fleet::Lifecycle::Spot;
    let on_demand = crate::common::instance("i-od", &[]);
    store
        .sync_inventory(
            &["us-east-1".to_string()],
            &[spot, on_demand],
            t("2026-12-01T00:00:00Z"),
        )
        .await
        .unwrap();
    let ran = store
        .ran(t("2026-12-01T00:00:00Z"), t("2026-12-01T02:00:00Z"))
        .await
        .unwrap();
    let spot_of = |id: &str| ran.iter().find(|r| &*r.instance == id).unwrap().spot;
    assert!(spot_of("i-spot"));
    assert!(!spot_of("i-od"));
}
