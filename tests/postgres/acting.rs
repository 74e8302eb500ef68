//! What ebb checks right before each cloud call, and what it writes after: in process, on the
//! simulated fleet, with a real Postgres. The test layer over the simulated provider runs a
//! step of the test inside the tick, right after its first stop call: a person's override or
//! tag arriving mid-tick, the cloud failing to answer the re-read before a stop, or the
//! leader's database session dying.

use crate::common;

use chrono::Duration;
use common::intercept::{Intercept, Method};
use common::t;
use common::world::SimWorld;
use ebb::clock::Clock;
use ebb::cloud::sim::SimProvider;
use ebb::cloud::{CloudError, Provider, StopKind};
use ebb::fleet::InstanceState;
use ebb::reconcile::{Options, Reconciler, TickReport, Timers};
use ebb::store::{ActionDone, AuditFilter, Leadership, NewAuditEntry, Outcome, Store};
use sqlx::PgPool;
use std::collections::BTreeMap;
use std::future::Future;

const POLICY: &str = r#"
policies:
  - name: office
    match: {tags: {team: research}}
    work_hours:
      timezone: UTC
      periods:
        - {days: mon-fri, start: "09:00", stop: "19:00"}
      outside_hours: stop
      start_at_open: stopped-by-ebb
"#;

/// Two idle research boxes in two regions: one stop call for each, us-east-1's first.
const FLEET: &str = r#"
instances:
  - id: i-east
    region: us-east-1
    type: g5.xlarge
    state: running
    tags: {team: research}
    sim: {usage: idle}
  - id: i-west
    region: us-west-2
    type: g5.xlarge
    state: running
    tags: {team: research}
    sim: {usage: idle}
"#;

const EVENING: &str = "2026-11-30T20:00:00Z";

struct Setup {
    store: Store,
    reconciler: Reconciler<Intercept<SimProvider>>,
    leader: tokio::sync::Mutex<Option<Leadership>>,
    _dir: tempfile::TempDir,
}

impl Setup {
    async fn new(pool: PgPool) -> Setup {
        Setup::with(pool, Options::default()).await
    }

    async fn with(pool: PgPool, options: Options) -> Setup {
        let world = SimWorld::plan(FLEET)
            .policy("office.yaml", POLICY)
            .clock(Clock::Fixed(t(EVENING)))
            .options(options)
            .leader("acting")
            .start(Store::from_pool(pool))
            .await;
        let SimWorld {
            store,
            reconciler,
            leader,
            dir,
        } = world;
        Setup {
            store,
            reconciler,
            leader: tokio::sync::Mutex::new(Some(leader)),
            _dir: dir,
        }
    }

    /// Runs `step` once, right after the first stop call of the tick.
    fn after_first_stop<F: Future<Output = ()> + Send + 'static>(
        &self,
        step: impl FnOnce() -> F + Send + 'static,
    ) {
        let mut step = Some(step);
        self.reconciler
            .provider()
            .after_async(Method::Stop, move |_, answer| {
                let step = step.take().map(|step| step());
                async move {
                    if let Some(step) = step {
                        step.await;
                    }
                    answer
                }
            });
    }

    /// Ticks at `at` as the leader, leading again if the session was lost.
    async fn tick(&self, at: &str) -> Result<TickReport, String> {
        let mut leader = self.leader.lock().await;
        if let Some(held) = leader.as_mut() {
            if !held.held().await {
                *leader = None;
            }
        }
        if leader.is_none() {
            // A terminated session lets go of the lock as its backend exits.
            let limit = std::time::Duration::from_secs(60);
            let every = std::time::Duration::ZERO;
            let led = common::eventually(limit, every, async || {
                self.store.try_lead("acting").await.unwrap()
            });
            *leader = Some(led.await.expect("the last leader's session never ended"));
        }
        let leader = leader.as_mut().unwrap();
        self.reconciler
            .tick(t(at), leader)
            .await
            .map_err(|e| e.to_string())
    }

    fn stop_calls(&self) -> Vec<String> {
        self.reconciler.provider().ids_of(Method::Stop)
    }

    async fn state(&self, id: &str) -> InstanceState {
        let listed = self.reconciler.provider().instances().await;
        listed.instances.iter().find(|i| i.id == id).unwrap().state
    }

    /// `(action, outcome)` of every audit row about `id`.
    async fn audit(&self, id: &str) -> Vec<(String, Outcome)> {
        let filter = AuditFilter {
            instance: Some(id.to_string()),
            ..AuditFilter::default()
        };
        let rows = self.store.audit(&filter).await.unwrap();
        rows.into_iter()
            .map(|r| (r.entry.action, r.entry.outcome))
            .collect()
    }
}

#[sqlx::test(migrations = false)]
async fn an_override_made_during_a_tick_stops_its_later_calls(pool: PgPool) {
    let s = Setup::new(pool).await;
    let store = s.store.clone();
    // The API answers 201 for this override after the tick decided to stop both boxes.
    s.after_first_stop(move || async move {
        let until = t(EVENING) + Duration::hours(4);
        store
            .create_override("i-west", until, "eval run", "alice", t(EVENING))
            .await
            .unwrap();
    });

    let report = s.tick(EVENING).await.unwrap();

    assert_eq!(s.stop_calls(), ["i-east"]);
    assert_eq!(s.state("i-west").await, InstanceState::Running);
    assert_ne!(s.state("i-east").await, InstanceState::Running);
    let west = report
        .actions
        .iter()
        .find(|a| a.decision.instance == "i-west")
        .unwrap();
    assert_eq!(west.outcome, Outcome::Skipped);
    assert!(
        west.detail.contains("override by alice") && west.detail.contains("eval run"),
        "{}",
        west.detail
    );
    // No intent was written for a call that was never made.
    assert_eq!(
        s.audit("i-west").await,
        [("override".into(), Outcome::Succeeded)]
    );
    let intents = s.store.pending_intents().await.unwrap();
    assert!(intents.is_empty(), "{intents:?}");
}

#[sqlx::test(migrations = false)]
async fn a_leader_whose_session_dies_mid_tick_makes_no_further_call(pool: PgPool) {
    let s = Setup::new(pool.clone()).await;
    s.after_first_stop(move || async move {
        let ended: Vec<bool> = sqlx::query_scalar(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity
             WHERE application_name = 'ebb leader acting' AND datname = current_database()",
        )
        .fetch_all(&pool)
        .await
        .unwrap();
        assert_eq!(ended, [true]);
    });

    let failed = s.tick(EVENING).await.unwrap_err();

    assert_eq!(s.stop_calls(), ["i-east"], "{failed}");
    assert_eq!(s.state("i-west").await, InstanceState::Running);
    // The call in flight kept its outcome; the next one was never intended.
    assert_eq!(
        s.audit("i-east").await,
        [
            ("stop".into(), Outcome::Intent),
            ("stop".into(), Outcome::Succeeded)
        ]
    );
    assert!(s.audit("i-west").await.is_empty());

    // The next leader carries on.
    let report = s.tick("2026-11-30T20:05:00Z").await.unwrap();
    assert_eq!(report.actions.len(), 1);
    assert_ne!(s.state("i-west").await, InstanceState::Running);
}

#[sqlx::test(migrations = false)]
async fn an_interrupted_dry_run_is_never_taken_for_an_action(pool: PgPool) {
    let s = Setup::new(pool).await;
    s.tick("2026-11-30T18:00:00Z").await.unwrap();
    // A dry run's intent whose `skipped` outcome was lost, for a box that a person stopped.
    let intent = NewAuditEntry {
        instance: Some("i-east".into()),
        region: Some("us-east-1".into()),
        outcome: Outcome::Intent,
        dry_run: true,
        ..NewAuditEntry::event(t(EVENING), "scheduler", "stop", "dry".into())
    };
    s.store.append_audit(&[intent]).await.unwrap();
    s.reconciler
        .provider()
        .inner
        .stop("us-east-1", &["i-east".to_string()], StopKind::Stop)
        .await;

    let report = s.tick("2026-11-30T20:01:00Z").await.unwrap();
    assert_eq!(report.resolved.len(), 1);
    assert_eq!(report.resolved[0].entry.outcome, Outcome::Skipped);
    // The person's stop sticks in the morning: ebb never counted it as its own.
    s.tick("2026-12-01T09:05:00Z").await.unwrap();
    let state = s.state("i-east").await;
    assert!(
        matches!(state, InstanceState::Stopping | InstanceState::Stopped),
        "{state:?}"
    );
}

#[sqlx::test(migrations = false)]
async fn a_stop_that_began_before_an_interrupted_intent_is_a_persons(pool: PgPool) {
    let s = Setup::new(pool).await;
    s.tick("2026-11-30T18:00:00Z").await.unwrap();
    // A person stops the box at 20:00 (the simulated clock); ebb's listing lagged, so at 20:00:30
    // it wrote a stop intent and died before the call.
    s.reconciler
        .provider()
        .inner
        .stop("us-east-1", &["i-east".to_string()], StopKind::Stop)
        .await;
    let intent = NewAuditEntry {
        instance: Some("i-east".into()),
        region: Some("us-east-1".into()),
        policy: Some("office".into()),
        code: Some("outside_hours".into()),
        outcome: Outcome::Intent,
        ..NewAuditEntry::event(
            t("2026-11-30T20:00:30Z"),
            "scheduler",
            "stop",
            "closed".into(),
        )
    };
    s.store.append_audit(&[intent]).await.unwrap();

    let report = s.tick("2026-11-30T20:01:00Z").await.unwrap();
    let resolved = &report.resolved[0].entry;
    assert_eq!(resolved.outcome, Outcome::Skipped);
    assert!(
        resolved.reason.contains("not ebb's stop"),
        "{}",
        resolved.reason
    );
    s.tick("2026-12-01T09:05:00Z").await.unwrap();
    let state = s.state("i-east").await;
    assert!(
        matches!(state, InstanceState::Stopping | InstanceState::Stopped),
        "the person's stop sticks: {state:?}"
    );
}

#[sqlx::test(migrations = false)]
async fn an_interrupted_notice_counts_only_with_its_own_stop_time_on_the_tag(pool: PgPool) {
    let s = Setup::new(pool).await;
    s.tick("2026-11-30T18:00:00Z").await.unwrap();
    // i-east carries the tag of a notice given last week; i-west's was written before the crash.
    for (id, region, stop_at) in [
        ("i-east", "us-east-1", "2026-11-23T19:00:00Z"),
        ("i-west", "us-west-2", "2026-11-30T19:00:00Z"),
    ] {
        let tags = BTreeMap::from([("ebb:stop-at".to_string(), stop_at.to_string())]);
        s.reconciler
            .provider()
            .inner
            .tag(region, &[id.to_string()], &tags)
            .await;
    }
    let intent = |id: &str, region: &str| NewAuditEntry {
        instance: Some(id.into()),
        region: Some(region.into()),
        outcome: Outcome::Intent,
        ..NewAuditEntry::event(
            t("2026-11-30T18:30:00Z"),
            "scheduler",
            "notify",
            "closing".into(),
        )
    };
    s.store
        .append_audit(&[intent("i-east", "us-east-1"), intent("i-west", "us-west-2")])
        .await
        .unwrap();

    let report = s.tick("2026-11-30T18:31:00Z").await.unwrap();
    let outcome = |id: &str| {
        let row = report
            .resolved
            .iter()
            .find(|r| r.entry.instance.as_deref() == Some(id))
            .unwrap();
        row.entry.outcome
    };
    assert_eq!(
        outcome("i-east"),
        Outcome::Failed,
        "a stale tag is not this notice"
    );
    assert_eq!(outcome("i-west"), Outcome::Succeeded);
}

#[sqlx::test(migrations = false)]
async fn a_notice_left_from_before_a_stop_is_taken_back_once_the_box_runs_again(pool: PgPool) {
    let s = Setup::new(pool).await;
    let tags = BTreeMap::from([(
        "ebb:stop-at".to_string(),
        "2026-11-27T19:00:00Z".to_string(),
    )]);
    let provider = s.reconciler.provider();
    provider
        .inner
        .tag("us-east-1", &["i-east".to_string()], &tags)
        .await;

    let report = s.tick("2026-11-30T10:00:00Z").await.unwrap();
    let east = report
        .actions
        .iter()
        .find(|a| a.decision.instance == "i-east")
        .unwrap();
    assert_eq!(east.outcome, Outcome::Succeeded, "{}", east.detail);
    let listed = provider.instances().await;
    let east = listed.instances.iter().find(|i| i.id == "i-east").unwrap();
    assert_eq!(east.tag("ebb:stop-at"), None);
    assert_eq!(
        s.audit("i-east").await,
        [
            ("withdraw_notice".into(), Outcome::Intent),
            ("withdraw_notice".into(), Outcome::Succeeded)
        ]
    );
    // Once taken back, it stays so.
    let report = s.tick("2026-11-30T10:05:00Z").await.unwrap();
    assert!(report.actions.is_empty(), "{:?}", report.actions);
}

#[sqlx::test(migrations = false)]
async fn a_keep_until_tag_set_during_a_tick_stops_its_later_calls(pool: PgPool) {
    let s = Setup::new(pool).await;
    // A person tags i-west after the tick listed it, while its first stop call was made.
    let until = (t(EVENING) + Duration::hours(4)).to_rfc3339();
    let tags = BTreeMap::from([("ebb:keep-until".to_string(), until)]);
    let sim = s.reconciler.provider().inner.clone();
    s.after_first_stop(move || async move {
        sim.tag("us-west-2", &["i-west".to_string()], &tags).await;
    });

    let report = s.tick(EVENING).await.unwrap();

    assert_eq!(s.stop_calls(), ["i-east"]);
    assert_eq!(s.state("i-west").await, InstanceState::Running);
    let west = report
        .actions
        .iter()
        .find(|a| a.decision.instance == "i-west")
        .unwrap();
    assert_eq!(west.outcome, Outcome::Skipped);
    assert!(
        west.detail
            .contains("since the listing, kept by tag ebb:keep-until"),
        "{}",
        west.detail
    );
    assert!(s.audit("i-west").await.is_empty(), "no intent, no call");
}

#[sqlx::test(migrations = false)]
async fn an_owner_found_right_before_a_stop_refuses_it(pool: PgPool) {
    let s = Setup::new(pool).await;
    // An Auto Scaling group adopts i-west (AttachInstances) after the tick listed it, while its
    // first stop call was made: stopping it now would have the group replace it.
    let tags = BTreeMap::from([(
        "aws:autoscaling:groupName".to_string(),
        "inference".to_string(),
    )]);
    let sim = s.reconciler.provider().inner.clone();
    s.after_first_stop(move || async move {
        sim.tag("us-west-2", &["i-west".to_string()], &tags).await;
    });

    let report = s.tick(EVENING).await.unwrap();

    assert_eq!(s.stop_calls(), ["i-east"]);
    assert_eq!(s.state("i-west").await, InstanceState::Running);
    let west = report
        .actions
        .iter()
        .find(|a| a.decision.instance == "i-west")
        .unwrap();
    assert_eq!(west.outcome, Outcome::Skipped);
    assert!(
        west.detail
            .contains("since the listing, owned by Auto Scaling group inference"),
        "{}",
        west.detail
    );
    assert!(s.audit("i-west").await.is_empty(), "no intent, no call");
    // The next tick sees the owner in the listing: the engine asks for nothing.
    let report = s.tick("2026-11-30T20:05:00Z").await.unwrap();
    assert!(
        report
            .actions
            .iter()
            .all(|a| a.decision.instance != "i-west"),
        "{:?}",
        report.actions
    );
    assert_eq!(s.stop_calls(), ["i-east"]);
    assert_eq!(s.state("i-west").await, InstanceState::Running);
}

#[sqlx::test(migrations = false)]
async fn a_failed_read_right_before_a_stop_stops_nothing(pool: PgPool) {
    let s = Setup::new(pool).await;
    let cloud = s.reconciler.provider().clone();
    s.after_first_stop(move || async move {
        cloud.refuse(Method::Reread, CloudError::throttled("DescribeInstances"));
    });

    let report = s.tick(EVENING).await.unwrap();

    assert_eq!(s.stop_calls(), ["i-east"]);
    assert_eq!(s.state("i-west").await, InstanceState::Running);
    let west = report
        .actions
        .iter()
        .find(|a| a.decision.instance == "i-west")
        .unwrap();
    assert_eq!(west.outcome, Outcome::Skipped);
    assert!(
        west.detail.contains("could not read it again") && west.detail.contains("no stop"),
        "{}",
        west.detail
    );
    assert!(s.audit("i-west").await.is_empty());
}

/// How long the next leader leaves a call alone that may still be in flight, as `ebb serve`
/// sets it against AWS: the tick deadline and the AWS operation timeout.
const IN_FLIGHT: Duration = Duration::minutes(7);

/// The stop intent of a leader that lost its session with the call on the wire.
async fn intent_in_flight(s: &Setup) -> i64 {
    let intent = NewAuditEntry {
        instance: Some("i-east".into()),
        region: Some("us-east-1".into()),
        policy: Some("office".into()),
        code: Some("outside_hours".into()),
        outcome: Outcome::Intent,
        ..NewAuditEntry::event(t(EVENING), "scheduler", "stop", "outside work hours".into())
    };
    s.store.append_audit(&[intent]).await.unwrap()[0].seq
}

#[sqlx::test(migrations = false)]
async fn a_call_still_in_flight_is_neither_resolved_nor_repeated_by_the_next_leader(pool: PgPool) {
    let s = Setup::with(
        pool,
        Options {
            in_flight_for: IN_FLIGHT,
            ..Options::default()
        },
    )
    .await;
    let seq = intent_in_flight(&s).await;

    // A minute later the next leader ticks: i-east still runs, but its stop may yet land.
    let report = s.tick("2026-11-30T20:01:00Z").await.unwrap();
    assert_eq!(report.awaiting, 1);
    assert!(report.resolved.is_empty(), "{:?}", report.resolved);
    assert_eq!(
        s.stop_calls(),
        ["i-west"],
        "i-east's stop is not made twice"
    );
    assert_eq!(s.store.pending_intents().await.unwrap().len(), 1);

    // The deposed leader's call lands, and its outcome is written after all.
    s.reconciler
        .provider()
        .inner
        .stop("us-east-1", &["i-east".to_string()], StopKind::Stop)
        .await;
    let outcome = NewAuditEntry {
        outcome: Outcome::Succeeded,
        intent_seq: Some(seq),
        ..NewAuditEntry::event(t(EVENING), "scheduler", "stop", "outside work hours".into())
    };
    let done = ActionDone {
        instance: "i-east".into(),
        action: ebb::engine::Action::Stop,
        at: t(EVENING),
    };
    s.store.append_outcomes(&[outcome], &[done]).await.unwrap();

    let report = s.tick("2026-11-30T20:10:00Z").await.unwrap();
    assert_eq!(report.awaiting, 0);
    assert!(report.actions.is_empty(), "{:?}", report.actions);
    // ebb remembers the stop as its own, so the morning starts the box.
    let prior = s.store.prior(t("2026-11-30T20:10:00Z")).await.unwrap();
    assert_eq!(prior.facts("i-east").stopped_by_ebb_at, Some(t(EVENING)));
}

#[sqlx::test(migrations = false)]
async fn a_call_that_never_landed_is_resolved_once_it_cannot_be_in_flight(pool: PgPool) {
    let s = Setup::with(
        pool,
        Options {
            in_flight_for: IN_FLIGHT,
            ..Options::default()
        },
    )
    .await;
    intent_in_flight(&s).await;
    s.tick("2026-11-30T20:06:00Z").await.unwrap();
    assert_eq!(s.stop_calls(), ["i-west"]);

    let report = s.tick("2026-11-30T20:07:00Z").await.unwrap();
    assert_eq!(report.resolved.len(), 1);
    assert_eq!(report.resolved[0].entry.outcome, Outcome::Failed);
    assert_eq!(report.awaiting, 0);
    assert_eq!(
        s.stop_calls(),
        ["i-west", "i-east"],
        "decided again, stopped once"
    );
}

/// Against a real cloud, an intent's in-flight window runs on the database's clock
/// (`Timers::Database`): a replica whose host clock runs hours ahead (here the tick's `now`,
/// five hours past the intent) still leaves a call alone until the database has seen the
/// window pass since the intent was committed. On the tick's own clock it was resolved at once.
#[sqlx::test(migrations = false)]
async fn a_clock_running_hours_ahead_resolves_no_intent_before_the_databases_window(pool: PgPool) {
    let s = Setup::with(
        pool.clone(),
        Options {
            in_flight_for: IN_FLIGHT,
            timers: Timers::Database,
            ..Options::default()
        },
    )
    .await;
    intent_in_flight(&s).await;

    let report = s.tick("2026-12-01T01:00:00Z").await.unwrap();
    assert_eq!(report.awaiting, 1, "{:?}", report.resolved);
    assert!(report.resolved.is_empty(), "{:?}", report.resolved);
    assert_eq!(
        s.stop_calls(),
        ["i-west"],
        "i-east's stop is not made twice"
    );

    // The database's clock passes the window since the intent's commit.
    sqlx::query("UPDATE open_intents SET recorded_at = recorded_at - interval '8 minutes'")
        .execute(&pool)
        .await
        .unwrap();
    let report = s.tick("2026-12-01T01:05:00Z").await.unwrap();
    assert_eq!(report.resolved.len(), 1);
    assert_eq!(report.resolved[0].entry.outcome, Outcome::Failed);
    assert_eq!(s.stop_calls(), ["i-west", "i-east"]);
}
