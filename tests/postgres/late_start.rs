//! What the inventory sync records of a person's start (`started_by_person_at`, which the
//! engine keeps running after the close until it has gone idle): a start seen after a stop with
//! no start of ebb's since, nor one in flight; cleared at the next stop. Then a tick on the
//! simulated fleet that keeps such a start until it is idle, and the console that says so.

use crate::common;

use chrono::{DateTime, Utc};
use common::{instance, t};
use ebb::engine::Action;
use ebb::fleet::{Instance, InstanceState};
use ebb::store::{NewAuditEntry, Outcome, Store};
use sqlx::PgPool;

fn regions() -> Vec<String> {
    vec!["us-east-1".to_string()]
}

/// `i-1` in `state`, last started at `launched`.
fn box_(state: InstanceState, launched: &str) -> Vec<Instance> {
    let mut i = instance("i-1", &[("team", "research")]);
    i.state = state;
    i.launched_at = Some(t(launched));
    vec![i]
}

async fn sync(store: &Store, state: InstanceState, launched: &str, at: &str) {
    store
        .sync_inventory(&regions(), &box_(state, launched), t(at))
        .await
        .unwrap();
}

/// The person's start the engine is given, and whether the read phase is told of it.
async fn person_start(store: &Store) -> Option<DateTime<Utc>> {
    let at = store
        .prior(t("2026-11-30T12:00:00Z"))
        .await
        .unwrap()
        .facts("i-1")
        .started_by_person_at;
    let listed = store.started_by_person().await.unwrap();
    assert_eq!(listed.contains("i-1"), at.is_some(), "{listed:?}");
    at
}

const MORNING: &str = "2026-11-30T01:00:00Z";

#[sqlx::test]
async fn a_start_seen_after_a_stop_is_a_persons_until_the_next_stop(pool: PgPool) {
    let store = Store::from_pool(pool);
    // Running when first seen: whose start that was is unknown, so no person's.
    sync(
        &store,
        InstanceState::Running,
        MORNING,
        "2026-11-30T12:00:00Z",
    )
    .await;
    assert_eq!(person_start(&store).await, None);
    sync(
        &store,
        InstanceState::Stopped,
        MORNING,
        "2026-11-30T12:01:00Z",
    )
    .await;
    assert_eq!(person_start(&store).await, None);
    // Started at 21:00 Shanghai, seen at the next sync: the launch time is the start.
    let nine = "2026-11-30T13:00:00Z";
    sync(&store, InstanceState::Pending, nine, "2026-11-30T13:00:30Z").await;
    assert_eq!(person_start(&store).await, Some(t(nine)));
    sync(&store, InstanceState::Running, nine, "2026-11-30T13:01:00Z").await;
    sync(&store, InstanceState::Running, nine, "2026-11-30T13:02:00Z").await;
    assert_eq!(person_start(&store).await, Some(t(nine)));
    // Stopped again: no longer.
    sync(
        &store,
        InstanceState::Stopping,
        nine,
        "2026-11-30T14:00:00Z",
    )
    .await;
    assert_eq!(person_start(&store).await, None);
    sync(&store, InstanceState::Stopped, nine, "2026-11-30T14:01:00Z").await;
    // A launch time from before the stop was seen (or after the sync) is not the start's: the
    // sync's time is.
    sync(
        &store,
        InstanceState::Running,
        MORNING,
        "2026-11-30T15:00:00Z",
    )
    .await;
    assert_eq!(person_start(&store).await, Some(t("2026-11-30T15:00:00Z")));
}

#[sqlx::test]
async fn ebbs_own_start_is_not_a_persons_and_a_later_one_is(pool: PgPool) {
    let store = Store::from_pool(pool);
    sync(
        &store,
        InstanceState::Running,
        MORNING,
        "2026-11-30T00:00:00Z",
    )
    .await;
    sync(
        &store,
        InstanceState::Stopped,
        MORNING,
        "2026-11-30T12:01:00Z",
    )
    .await;
    store
        .record_action(
            &["i-1".to_string()],
            Action::Start,
            t("2026-12-01T00:30:00Z"),
        )
        .await
        .unwrap();
    let start = "2026-12-01T00:30:10Z";
    sync(
        &store,
        InstanceState::Running,
        start,
        "2026-12-01T00:31:00Z",
    )
    .await;
    assert_eq!(person_start(&store).await, None);
    // Stopped by someone, then started by a person: ebb's start was before that stop.
    sync(
        &store,
        InstanceState::Stopped,
        start,
        "2026-12-01T12:01:00Z",
    )
    .await;
    let late = "2026-12-01T13:00:00Z";
    sync(&store, InstanceState::Running, late, "2026-12-01T13:01:00Z").await;
    assert_eq!(person_start(&store).await, Some(t(late)));
}

#[sqlx::test]
async fn a_start_whose_answer_ebb_is_waiting_for_is_not_a_persons(pool: PgPool) {
    let store = Store::from_pool(pool);
    sync(
        &store,
        InstanceState::Running,
        MORNING,
        "2026-11-30T00:00:00Z",
    )
    .await;
    sync(
        &store,
        InstanceState::Stopped,
        MORNING,
        "2026-11-30T12:01:00Z",
    )
    .await;
    // ebb's start intent, its outcome not written yet (lost, or the process died): the sync
    // that sees the instance running comes before the tick resolves it from that state.
    let intent = NewAuditEntry {
        instance: Some("i-1".into()),
        region: Some("us-east-1".into()),
        outcome: Outcome::Intent,
        ..NewAuditEntry::event(
            t("2026-11-30T13:00:00Z"),
            "scheduler",
            "start",
            "late".into(),
        )
    };
    store.append_audit(&[intent]).await.unwrap();
    let start = "2026-11-30T13:00:05Z";
    sync(
        &store,
        InstanceState::Running,
        start,
        "2026-11-30T13:01:00Z",
    )
    .await;
    assert_eq!(person_start(&store).await, None);
}

/// Office hours 09:00-19:00 UTC for research boxes; no idle rule.
const OFFICE: &str = r#"
policies:
  - name: office
    match: {tags: {team: research}}
    work_hours:
      timezone: UTC
      periods: [{days: mon-fri, start: "09:00", stop: "19:00"}]
"#;

/// An idle research box (GPU below 3 %), running from the morning.
const FLEET: &str = r#"
instances:
  - id: i-late
    region: us-east-1
    type: g5.xlarge
    state: running
    launched_at: 2026-11-30T08:00:00Z
    tags: {team: research}
    sim: {usage: idle}
"#;

/// The tick loop in process on the simulated fleet, on virtual time: ebb stops the box at the
/// close; its person starts it at 21:00; the next ticks see a person's start, read its GPU over
/// the hour from the start and keep it (`late_start_kept`), and the first tick after an idle
/// hour stops it (`late_start_idle`).
#[sqlx::test(migrations = false)]
async fn a_tick_keeps_a_persons_late_start_until_it_has_been_idle_for_an_hour(pool: PgPool) {
    use common::time::on_paused_time;
    use common::world::SimWorld;
    use ebb::clock::Clock;
    use ebb::cloud::Provider;
    use ebb::store::AuditFilter;
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
        minutes(2).await;
        w.tick_at(clock.now()).await;
        assert_eq!(
            w.state("us-east-1", "i-late").await,
            InstanceState::Stopped,
            "stopped at the close"
        );
        // 21:00: its person starts it.
        minutes(118).await;
        w.cloud().inner.start("us-east-1", &["i-late".into()]).await;
        let mut stopped_at = None;
        for _ in 0..30 {
            minutes(5).await;
            w.tick_at(clock.now()).await;
            if w.state("us-east-1", "i-late").await != InstanceState::Running {
                stopped_at = Some(clock.now());
                break;
            }
        }
        // Kept for the hour from its start (21:00:45), then stopped at the next tick.
        let stopped_at = stopped_at.expect("stopped once idle for an hour");
        assert!(
            stopped_at >= t("2026-11-30T22:00:45Z") && stopped_at <= t("2026-11-30T22:06:00Z"),
            "{stopped_at}"
        );
        let audit = w
            .store
            .audit(&AuditFilter {
                instance: Some("i-late".into()),
                ..Default::default()
            })
            .await
            .unwrap();
        let stops: Vec<_> = audit
            .iter()
            .filter(|e| e.entry.action == "stop" && e.entry.outcome == Outcome::Succeeded)
            .map(|e| e.entry.code.clone().unwrap_or_default())
            .collect();
        assert_eq!(stops, ["outside_hours", "late_start_idle"], "{audit:#?}");
        pool.close().await;
    });
}

/// The console's instance page says who started the box and until when it is kept, as
/// `ebb explain` does: a person's start at 20:30 in London, after the 19:00 close.
#[sqlx::test(migrations = false)]
async fn the_console_says_a_person_started_it_and_it_is_kept_until_idle(pool: PgPool) {
    let store = Store::from_pool(pool.clone());
    store.migrate().await.unwrap();
    let policies = tempfile::tempdir().unwrap();
    std::fs::write(policies.path().join("p.yaml"), OFFICE).unwrap();
    let clock = ebb::clock::Clock::Fixed(t("2026-11-30T20:40:00Z"));
    let base = common::api::serve_with_console(ebb::api::ApiState {
        limits: common::api::public_reads(),
        ..common::api::state(&store, vec![policies.path().to_path_buf()], clock)
    })
    .await;

    sync(
        &store,
        InstanceState::Running,
        MORNING,
        "2026-11-30T09:00:00Z",
    )
    .await;
    sync(
        &store,
        InstanceState::Stopped,
        MORNING,
        "2026-11-30T19:05:00Z",
    )
    .await;
    let late = "2026-11-30T20:30:00Z";
    sync(&store, InstanceState::Running, late, "2026-11-30T20:31:00Z").await;
    let html = reqwest::get(format!("{base}/instances/i-1"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(html.contains("<dt>Started by a person</dt>"), "{html}");
    assert!(
        html.contains(
            "<strong>Decision: </strong>none <code>late_start_kept</code> by office: started by a person at 20:30 UTC outside work hours; kept until idle for 1h; \
             if it stays idle, stopped at 21:30 UTC at the earliest"
        ),
        "{html}"
    );
}
