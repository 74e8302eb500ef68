//! Pacing within EC2's rate limits: the simulated EC2 meters calls with EC2's default token
//! buckets and refuses a call over them with `RequestLimitExceeded`; ebb paces its calls by the
//! same buckets, and a tick takes on only what they serve, the rest waiting for the next tick.
//! In process, on paused time (the simulated clock counts on tokio's), with a real Postgres.

use crate::common;

use common::t;
use common::time::on_paused_time;
use common::world::SimWorld;
use ebb::clock::Clock;
use ebb::cloud::pacing::{Pacer, RateLimits};
use ebb::cloud::sim::SimProvider;
use ebb::cloud::Provider;
use ebb::engine::Action;
use ebb::fleet::InstanceState;
use ebb::reconcile::{Options, Pacing};
use ebb::store::{AuditFilter, Outcome, Store};
use sqlx::PgPool;
use std::sync::Arc;
use std::time::Duration;

const POLICY: &str = r#"
policies:
  - name: office
    match: {tags: {team: research}}
    work_hours:
      timezone: UTC
      periods: [{days: mon-fri, start: "09:00", stop: "19:00"}]
"#;

/// How often the control loop ticks in these tests.
const TICK: Duration = Duration::from_secs(300);

/// A simulated fleet of `n` stopped research boxes, their policy, and a reconciler over it that
/// paces its calls when `paced`, on a simulated clock at Monday 08:00 UTC. ebb stopped every box
/// on Friday evening, so each is started at the opening.
async fn office(url: &str, n: usize, paced: bool) -> (SimWorld<SimProvider>, Clock) {
    let mut fleet = String::from("instances:\n");
    for i in 0..n {
        fleet.push_str(&format!(
            "  - {{id: i-{i:05}, region: us-east-1, type: g5.xlarge, state: stopped, tags: {{team: research}}}}\n"
        ));
    }
    let clock = Clock::simulated(t("2026-11-30T08:00:00Z"), 1.0);
    let mut options = Options::default();
    let pacer = paced.then(|| Arc::new(Pacer::new(RateLimits::default(), &clock)));
    if let Some(pacer) = &pacer {
        // No waiting within a tick: tokio's clock moves only between ticks here.
        options.pacing = Some(Pacing {
            pacer: pacer.clone(),
            within: Duration::ZERO,
            batch: 100,
        });
    }
    let mut w = SimWorld::plan(&fleet)
        .policy("office.yaml", POLICY)
        .clock(clock)
        .options(options)
        .start_with(Store::connect(url).await.unwrap(), |sim| {
            let sim = sim.metered(RateLimits::default());
            match pacer {
                Some(pacer) => sim.paced_by(pacer),
                None => sim,
            }
        })
        .await;
    w.tick_at(clock.now()).await;
    let ids: Vec<String> = (0..n).map(|i| format!("i-{i:05}")).collect();
    w.store
        .record_action(&ids, Action::Stop, t("2026-11-27T19:00:00Z"))
        .await
        .unwrap();
    (w, clock)
}

/// Audit rows (outcomes, not intents) whose error names a throttle.
async fn throttled_rows(store: &Store) -> usize {
    let rows = store.audit(&AuditFilter::default()).await.unwrap();
    rows.iter()
        .filter(|r| r.entry.outcome != Outcome::Intent)
        .filter(|r| {
            r.entry
                .error
                .as_deref()
                .is_some_and(|e| e.contains("RequestLimitExceeded"))
        })
        .count()
}

#[sqlx::test(migrations = false)]
async fn ten_thousand_boxes_open_within_ec2s_buckets_without_a_throttle(pool: PgPool) {
    let url = common::database_url(&pool);
    on_paused_time(|| open_ten_thousand(&url));
}

async fn open_ten_thousand(url: &str) {
    const N: usize = 10_000;
    let (mut w, clock) = office(url, N, true).await;
    tokio::time::advance(Duration::from_secs(3600)).await;
    let opening = clock.now();
    assert_eq!(opening, t("2026-11-30T09:00:00Z"));
    let mut ticks = 0;
    let mut first_backlog = None;
    loop {
        let report = w.tick_at(clock.now()).await;
        ticks += 1;
        first_backlog.get_or_insert(report.backlog);
        let failed: Vec<_> = report
            .actions
            .iter()
            .filter(|a| a.outcome != Outcome::Succeeded)
            .collect();
        assert!(failed.is_empty(), "tick {ticks}: {failed:?}");
        let pacing = report
            .pacing
            .as_ref()
            .expect("a paced tick reports its buckets");
        assert_eq!(pacing.throttles, 0, "tick {ticks}");
        if report.actions.is_empty() && report.backlog == 0 {
            break;
        }
        assert!(ticks < 40, "still starting after {ticks} ticks");
        tokio::time::advance(TICK).await;
    }
    // The request bucket (5 calls of 100 instances) bounds the first tick; every 5 minutes
    // after it, 5 calls again (600 instance tokens refill, more than the 500 they take).
    assert_eq!(first_backlog, Some(N - 500));
    assert_eq!(ticks, N / 500 + 1, "the last tick finds nothing to start");
    let listed = w.cloud().instances().await.instances;
    assert!(listed.iter().all(|i| i.state == InstanceState::Running));
    assert_eq!(throttled_rows(&w.store).await, 0);
    let started = w
        .store
        .audit(&AuditFilter::default())
        .await
        .unwrap()
        .into_iter()
        .filter(|r| r.entry.action == "start" && r.entry.outcome == Outcome::Succeeded)
        .count();
    assert_eq!(started, N, "one start each, no retries");
}

#[sqlx::test(migrations = false)]
async fn unpaced_the_simulated_ec2_throttles_a_burst_over_its_buckets(pool: PgPool) {
    let url = common::database_url(&pool);
    on_paused_time(|| burst(&url));
}

/// The same opening without pacing: EC2's request bucket (5 calls) refuses the 6th and 7th
/// call of 100 instances, and the refusal reaches the audit log. What the paced test above
/// shows does not happen.
async fn burst(url: &str) {
    let (mut w, clock) = office(url, 700, false).await;
    tokio::time::advance(Duration::from_secs(3600)).await;
    let report = w.tick_at(clock.now()).await;
    let count = |o: Outcome| report.actions.iter().filter(|a| a.outcome == o).count();
    assert_eq!(count(Outcome::Succeeded), 500, "{}", report.headline());
    assert_eq!(count(Outcome::Failed), 200);
    assert_eq!(throttled_rows(&w.store).await, 200);
}

#[sqlx::test(migrations = false)]
async fn more_starts_than_the_buckets_serve_by_the_opening_begin_early_and_are_all_made_by_it(
    pool: PgPool,
) {
    let url = common::database_url(&pool);
    on_paused_time(|| early_start(&url));
}

/// 2000 boxes due at 09:00, ticks every minute: EC2's instance bucket (1000, then 2 a second)
/// makes them all by 09:00 only from 08:52 on (500 s), so the engine begins them at 08:51 (whole
/// minutes), and each tick takes what the buckets serve (the request bucket: 5 calls of 100).
async fn early_start(url: &str) {
    const N: usize = 2000;
    let (mut w, clock) = office(url, N, true).await;
    tokio::time::advance(Duration::from_secs(50 * 60)).await;
    assert_eq!(clock.now(), t("2026-11-30T08:50:00Z"));
    let report = w.tick_at(clock.now()).await;
    assert!(report.actions.is_empty(), "nothing yet at 08:50");
    let mut started = 0;
    let mut first = None;
    while clock.now() < t("2026-11-30T09:00:00Z") {
        tokio::time::advance(Duration::from_secs(60)).await;
        let report = w.tick_at(clock.now()).await;
        for a in &report.actions {
            assert_eq!(a.outcome, Outcome::Succeeded, "{a:?}");
            first.get_or_insert((clock.now(), a.decision.reason.clone()));
            started += 1;
        }
    }
    let (at, reason) = first.expect("starts before the opening");
    assert_eq!(at, t("2026-11-30T08:51:00Z"));
    assert!(
        reason.starts_with(
            "starting 9m ahead of 09:00 UTC; started 9m early: 2000 starts due by 09:00 UTC \
             exceed EC2's StartInstances rate (1000 at once, then 2/s)"
        ),
        "{reason}"
    );
    assert_eq!(started, N, "every start made by the opening");
    let listed = w.cloud().instances().await.instances;
    assert!(listed.iter().all(|i| i.state != InstanceState::Stopped));
    assert_eq!(throttled_rows(&w.store).await, 0);
}
