//! A person's start between two listings after ebb's stop (issue 48 point 2): ebb's stop does
//! not change the stored state, so a box that went running → stopped by ebb → started again
//! before the next listing saw it stopped was never recorded as started. The sync records it
//! from the launch time (EC2 resets it at every start) or, for a cloud that gives none, from
//! the listing that shows it up after ebb's stop: the event, `started_by_person_at`, and the
//! report's stopped stretch ended there. Then the same on the simulated fleet, tick by tick.

use crate::common;

use common::{instance, t};
use ebb::engine::Action;
use ebb::fleet::{Instance, InstanceState};
use ebb::report::{compute, Window};
use ebb::store::{ActionDone, NewAuditEntry, Outcome, Store};
use sqlx::PgPool;

fn regions() -> Vec<String> {
    vec!["us-east-1".to_string()]
}

/// `i-1` running, last started at `launched` (`None`: the cloud gives no start time).
fn running(launched: Option<&str>) -> Vec<Instance> {
    let mut i = instance("i-1", &[("team", "research")]);
    i.state = InstanceState::Running;
    i.launched_at = launched.map(t);
    vec![i]
}

async fn sync(store: &Store, launched: Option<&str>, at: &str) {
    store
        .sync_inventory(&regions(), &running(launched), t(at))
        .await
        .unwrap();
}

/// `started_by_person_at` as the engine is given it.
async fn person_start(store: &Store) -> Option<chrono::DateTime<chrono::Utc>> {
    store
        .prior(t("2026-11-30T23:00:00Z"))
        .await
        .unwrap()
        .facts("i-1")
        .started_by_person_at
}

/// The instance's events: (at, from, to).
async fn events(pool: &PgPool) -> Vec<(chrono::DateTime<chrono::Utc>, String, String)> {
    sqlx::query_as(
        "SELECT at, from_state, to_state FROM instance_events WHERE instance = 'i-1' ORDER BY id",
    )
    .fetch_all(pool)
    .await
    .unwrap()
}

/// ebb's stop of `i-1` at `at`, as a tick writes it: its intent, then its outcome with what
/// ebb remembers of it.
async fn ebb_stopped(store: &Store, at: &str) {
    let intent = NewAuditEntry {
        instance: Some("i-1".into()),
        region: Some("us-east-1".into()),
        policy: Some("office".into()),
        outcome: Outcome::Intent,
        ..NewAuditEntry::event(t(at), "scheduler", "stop", "outside work hours".into())
    };
    let written = store
        .append_audit(std::slice::from_ref(&intent))
        .await
        .unwrap();
    let outcome = NewAuditEntry {
        outcome: Outcome::Succeeded,
        intent_seq: Some(written[0].seq),
        ..intent
    };
    let done = ActionDone {
        instance: "i-1".into(),
        action: Action::Stop,
        at: t(at),
    };
    store.append_outcomes(&[outcome], &[done]).await.unwrap();
}

const MORNING: &str = "2026-11-30T08:00:00Z";
const CLOSE: &str = "2026-11-30T19:00:00Z";

#[sqlx::test]
async fn a_restart_between_two_listings_after_ebbs_stop_is_a_persons_start(pool: PgPool) {
    let store = Store::from_pool(pool.clone());
    sync(&store, Some(MORNING), "2026-11-30T09:00:00Z").await;
    ebb_stopped(&store, CLOSE).await;
    // Listed right after the stop with the morning's launch time: EC2 has not shown the stop
    // yet, and nothing started it since. Not a start.
    sync(&store, Some(MORNING), "2026-11-30T19:00:30Z").await;
    assert_eq!(person_start(&store).await, None);
    assert!(events(&pool).await.is_empty());
    // Started at 20:30 by its person, listed running at 20:31: a start, at its launch time.
    let restart = "2026-11-30T20:30:00Z";
    sync(&store, Some(restart), "2026-11-30T20:31:00Z").await;
    assert_eq!(person_start(&store).await, Some(t(restart)));
    assert_eq!(
        events(&pool).await,
        [(t(restart), "stopped".to_string(), "running".to_string())]
    );
    let facts = store.prior(t("2026-11-30T21:00:00Z")).await.unwrap();
    assert_eq!(
        facts.facts("i-1").stopped_by_ebb_at,
        None,
        "no longer ebb's stop"
    );
    // Listed again: nothing new.
    sync(&store, Some(restart), "2026-11-30T20:36:00Z").await;
    assert_eq!(events(&pool).await.len(), 1);

    // The report's stretch ends at the restart: 19:00 to 20:30, 1.5 h, not the whole evening.
    let window = Window {
        since: t("2026-11-30T00:00:00Z"),
        until: t("2026-12-01T00:00:00Z"),
    };
    let history = store
        .report_history(window.since, window.until, &Default::default())
        .await
        .unwrap();
    let report = compute(&history, window, None, &Default::default());
    assert_eq!(report.total.stopped_hours, 1.5, "{:?}", report.total);
    assert_eq!(report.total.people_starts, 1);
}

#[sqlx::test]
async fn without_a_start_time_a_listing_up_after_ebbs_stop_is_a_start(pool: PgPool) {
    let store = Store::from_pool(pool.clone());
    sync(&store, None, "2026-11-30T09:00:00Z").await;
    ebb_stopped(&store, CLOSE).await;
    let seen = "2026-11-30T20:31:00Z";
    sync(&store, None, seen).await;
    assert_eq!(person_start(&store).await, Some(t(seen)));
    assert_eq!(
        events(&pool).await,
        [(t(seen), "stopped".to_string(), "running".to_string())]
    );
}

/// Office hours 09:00-19:00 UTC for research boxes; a person's late start is kept until idle.
const OFFICE: &str = r#"
policies:
  - name: office
    match: {tags: {team: research}}
    work_hours:
      timezone: UTC
      periods: [{days: mon-fri, start: "09:00", stop: "19:00"}]
"#;

/// A research box, idle at the close, then busy in a run from 19:02 (after its person's
/// restart).
const FLEET: &str = r#"
instances:
  - id: i-back
    region: us-east-1
    type: g5.xlarge
    state: running
    launched_at: 2026-11-30T08:00:00Z
    tags: {team: research}
    sim: {usage: training, runs: [{start: 2026-11-30T19:02:00Z, hours: 4}]}
"#;

/// Tick by tick on the simulated fleet, on virtual time: ebb stops the box at the close, its
/// person starts it again before the next tick lists it, and it runs busy. The next ticks see
/// a person's start and keep it (late_start: keep), rather than stopping it again.
#[sqlx::test(migrations = false)]
async fn a_box_restarted_before_the_next_listing_is_kept_as_a_persons_late_start(pool: PgPool) {
    use common::time::on_paused_time;
    use common::world::SimWorld;
    use ebb::clock::Clock;
    use ebb::cloud::Provider;
    use ebb::store::{AuditFilter, Outcome};
    use std::time::Duration;

    let url = common::database_url(&pool);
    on_paused_time(|| async move {
        let pool = sqlx::postgres::PgPoolOptions::new()
            .max_connections(4)
            .connect(&url)
            .await
            .unwrap();
        let clock = Clock::simulated(t("2026-11-30T19:00:30Z"), 1.0);
        let mut w = SimWorld::plan(FLEET)
            .policy("office.yaml", OFFICE)
            .clock(clock)
            .start(Store::from_pool(pool.clone()))
            .await;
        let minutes = |n: u64| tokio::time::advance(Duration::from_secs(60 * n));
        w.tick_at(clock.now()).await;
        // The stop takes its time; then, before any tick, its person starts it again.
        minutes(1).await;
        assert_eq!(
            w.state("us-east-1", "i-back").await,
            InstanceState::Stopped,
            "stopped at the close"
        );
        w.cloud().inner.start("us-east-1", &["i-back".into()]).await;
        minutes(1).await;
        assert_eq!(w.state("us-east-1", "i-back").await, InstanceState::Running);
        for _ in 0..12 {
            minutes(5).await;
            w.tick_at(clock.now()).await;
            assert_eq!(
                w.state("us-east-1", "i-back").await,
                InstanceState::Running,
                "at {}",
                clock.now()
            );
        }
        let audit = w
            .store
            .audit(&AuditFilter {
                instance: Some("i-back".into()),
                ..Default::default()
            })
            .await
            .unwrap();
        let stops: Vec<_> = audit
            .iter()
            .filter(|e| e.entry.action == "stop" && e.entry.outcome == Outcome::Succeeded)
            .map(|e| e.entry.code.clone().unwrap_or_default())
            .collect();
        assert_eq!(stops, ["outside_hours"], "{audit:#?}");
        let kept = w
            .store
            .prior(clock.now())
            .await
            .unwrap()
            .facts("i-back")
            .started_by_person_at;
        assert!(kept.is_some(), "the start is a person's");
        pool.close().await;
    });
}
