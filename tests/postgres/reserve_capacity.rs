//! Capacity held for a box that fails to start (`start.reserve_capacity`, issue 31 point 5):
//! a box whose morning start EC2 refused for lack of capacity twice in the week gets, at its
//! `start_ahead` before the next opening, a capacity reservation tagged with ebb's token, is
//! made to start into it, starts, and the reservation is cancelled once it runs; each call an
//! action with its intent and one outcome. Then the kill matrix: the tick is killed right
//! before and right after each of the four calls lands (its future dropped while the call
//! hangs, as a SIGKILL or an abandoned tick leaves it), and the ticks after it resolve every
//! step to one outcome from what the simulated EC2 holds, make one reservation, start the box
//! once and cancel the reservation. In process, on the simulated fleet, with a real Postgres.

use crate::common;

use common::intercept::{Answer, Call, Method};
use common::t;
use common::world::SimWorld;
use ebb::cloud::{CapacityReservations, Provider};
use ebb::store::{AuditEntry, AuditFilter, Outcome, Store};
use sqlx::PgPool;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use tokio::sync::oneshot;

/// Office hours from 09:00, started 15 minutes ahead; `RESERVE` is replaced by the setting.
const POLICY: &str = r#"
policies:
  - name: office
    match: {tags: {team: research}}
    work_hours:
      timezone: UTC
      start_ahead: 15m
      periods: [{days: mon-fri, start: "09:00", stop: "19:00"}]
    start: {reserve_capacity: RESERVE}
"#;

/// EC2 has no g5.2xlarge capacity but what a reservation holds.
const FLEET: &str = r#"
instances:
  - id: i-0a
    region: us-east-1
    type: g5.2xlarge
    state: stopped
    tags: {team: research}
    sim: {usage: idle, no_capacity_for: [g5.2xlarge]}
"#;

/// A world whose box ebb stopped on Friday, and whose start EC2 refused on Monday and Tuesday
/// mornings, without `reserve_capacity`; from Wednesday the policy reserves.
async fn refused_twice(pool: PgPool) -> SimWorld {
    let mut w = SimWorld::plan(FLEET)
        .policy("office.yaml", &POLICY.replace("RESERVE", "false"))
        .start(Store::from_pool(pool))
        .await;
    w.tick("2026-11-30T07:00:00Z").await;
    w.store
        .record_action(
            &["i-0a".to_string()],
            ebb::engine::Action::Stop,
            t("2026-11-27T19:00:00Z"),
        )
        .await
        .unwrap();
    for morning in ["2026-11-30T08:45:00Z", "2026-12-01T08:45:00Z"] {
        let report = w.tick(morning).await;
        let start = report
            .actions
            .iter()
            .find(|a| a.decision.action.as_str() == "start");
        assert_eq!(
            start.map(|a| a.outcome),
            Some(Outcome::Failed),
            "{report:?}"
        );
    }
    let policy = w.dir.path().join("policies/office.yaml");
    std::fs::write(policy, POLICY.replace("RESERVE", "true")).unwrap();
    w
}

/// The box's audit rows but the policy versions: action, outcome, code.
async fn rows(store: &Store) -> Vec<AuditEntry> {
    let filter = AuditFilter {
        instance: Some("i-0a".into()),
        since: Some(t("2026-12-02T00:00:00Z")),
        ..AuditFilter::default()
    };
    store.audit(&filter).await.unwrap()
}

fn steps(rows: &[AuditEntry]) -> Vec<(String, Outcome, String)> {
    rows.iter()
        .map(|r| {
            let e = &r.entry;
            (
                e.action.clone(),
                e.outcome,
                e.code.clone().unwrap_or_default(),
            )
        })
        .collect()
}

#[sqlx::test(migrations = false)]
async fn a_box_refused_twice_starts_into_a_reservation_that_is_then_cancelled(pool: PgPool) {
    let mut w = refused_twice(pool).await;
    // Wednesday at start_ahead: reserved, made to start into it, started.
    let report = w.tick("2026-12-02T08:45:00Z").await;
    let done: Vec<(&str, Outcome)> = report
        .actions
        .iter()
        .map(|a| (a.decision.action.as_str(), a.outcome))
        .collect();
    assert_eq!(
        done,
        [
            ("reserve_capacity", Outcome::Succeeded),
            ("target_reservation", Outcome::Succeeded),
            ("start", Outcome::Succeeded),
        ],
        "{report:?}"
    );
    let reserved = &report.actions[0].decision.reason;
    assert!(
        reserved.starts_with(
            "EC2 refused its start for lack of capacity twice within 7d (last at 2026-12-01 \
             08:45 UTC): a capacity reservation is made for it to start into, until \
             2026-12-02 09:45 UTC at the latest (start.reserve_capacity)"
        ),
        "{reserved}"
    );
    let held = w
        .cloud()
        .inner
        .reservations("us-east-1", "i-0a", "ebb-i-0a-1796201100")
        .await;
    let held = held.unwrap();
    assert_eq!(held.len(), 1, "one reservation, tagged with ebb's token");
    assert_eq!(held[0].instance_type, "g5.2xlarge");
    assert!(!held[0].state.ended());
    assert_eq!(
        w.cloud()
            .inner
            .reservation_target("us-east-1", "i-0a")
            .await
            .unwrap(),
        Some(held[0].id.clone())
    );
    // The next tick finds it running: the reservation is cancelled.
    let report = w.tick("2026-12-02T08:46:00Z").await;
    let cancel = report
        .actions
        .iter()
        .find(|a| a.decision.action.as_str() == "cancel_reservation");
    assert_eq!(
        cancel.map(|a| a.outcome),
        Some(Outcome::Succeeded),
        "{report:?}"
    );
    let held = w
        .cloud()
        .inner
        .reservations("us-east-1", "i-0a", "ebb-i-0a-1796201100")
        .await;
    assert!(held.unwrap()[0].state.ended());
    let row = |a: &str, o: Outcome, c: &str| (a.to_string(), o, c.to_string());
    assert_eq!(
        steps(&rows(&w.store).await),
        [
            row("reserve_capacity", Outcome::Intent, "capacity_reserved"),
            row("reserve_capacity", Outcome::Succeeded, "capacity_reserved"),
            row("target_reservation", Outcome::Intent, "capacity_reserved"),
            row(
                "target_reservation",
                Outcome::Succeeded,
                "capacity_reserved"
            ),
            row("start", Outcome::Intent, "start_ahead"),
            row("start", Outcome::Succeeded, "start_ahead"),
            row(
                "cancel_reservation",
                Outcome::Intent,
                "reservation_cancelled"
            ),
            row(
                "cancel_reservation",
                Outcome::Succeeded,
                "reservation_cancelled"
            ),
        ]
    );
    // Nothing more to do for it.
    let report = w.tick("2026-12-02T08:47:00Z").await;
    assert!(report.actions.is_empty(), "{report:?}");
    // The report counts the minute it was held (at $72.72/h: $1.212), off the net.
    let window = ebb::report::Window {
        since: t("2026-12-02T00:00:00Z"),
        until: t("2026-12-03T00:00:00Z"),
    };
    let history = w
        .store
        .report_history(window.since, window.until, &Default::default())
        .await
        .unwrap();
    let prices = ebb::fleet::money::PriceTable {
        prices: [(
            "us-east-1".to_string(),
            [("g5.2xlarge".to_string(), 1.212 * 60.0)].into(),
        )]
        .into(),
        ..Default::default()
    };
    let report = ebb::report::compute(&history, window, None, &prices);
    assert_eq!(report.total.reservation_hours, 0.02, "{:?}", report.total);
    assert_eq!(
        report.total.reservation_cost_usd, 1.21,
        "{:?}",
        report.total
    );
    assert_eq!(report.total.net_saved_usd, -1.21, "{:?}", report.total);
}

#[sqlx::test(migrations = false)]
async fn a_refused_target_call_does_not_hold_the_start_back(pool: PgPool) {
    let mut w = refused_twice(pool).await;
    // ModifyInstanceCapacityReservationAttributes denied (an IAM policy not updated, say): the
    // start is made all the same, rather than wait at every tick for a call never allowed.
    w.cloud().refuse(
        Method::TargetReservation,
        ebb::cloud::CloudError::denied("ModifyInstanceCapacityReservationAttributes"),
    );
    let starts = |w: &SimWorld| w.cloud().ids_of(Method::Start).len();
    let before = starts(&w);
    let report = w.tick("2026-12-02T08:45:00Z").await;
    assert_eq!(starts(&w), before + 1, "{report:?}");
    let target = report
        .actions
        .iter()
        .find(|a| a.decision.action.as_str() == "target_reservation");
    assert_eq!(
        target.map(|a| a.outcome),
        Some(Outcome::Failed),
        "{report:?}"
    );
}

#[sqlx::test(migrations = false)]
async fn without_refused_starts_nothing_is_reserved(pool: PgPool) {
    let mut w = SimWorld::plan(&FLEET.replace(", no_capacity_for: [g5.2xlarge]", ""))
        .policy("office.yaml", &POLICY.replace("RESERVE", "true"))
        .start(Store::from_pool(pool))
        .await;
    w.tick("2026-12-02T07:00:00Z").await;
    w.store
        .record_action(
            &["i-0a".to_string()],
            ebb::engine::Action::Stop,
            t("2026-12-01T19:00:00Z"),
        )
        .await
        .unwrap();
    let report = w.tick("2026-12-02T08:45:00Z").await;
    let done: Vec<&str> = report
        .actions
        .iter()
        .map(|a| a.decision.action.as_str())
        .collect();
    assert_eq!(done, ["start"], "{report:?}");
    assert!(w
        .cloud()
        .calls()
        .iter()
        .all(|c| c.method != Method::ReserveCapacity));
}

/// Where the tick is killed: right before `method`'s call is made (its intent committed), or
/// right after it landed (before its outcome).
#[derive(Debug, Clone, Copy)]
enum Kill {
    Before(Method),
    After(Method),
}

/// The first call of the kill's method (of `i-0a`) hangs, before or after it reaches the
/// simulated EC2, and says so on `killed`: the test then drops the tick.
fn arm(w: &SimWorld, kill: Kill, killed: oneshot::Sender<()>) {
    let killed = Arc::new(Mutex::new(Some(killed)));
    let fire = move || killed.lock().unwrap().take().map(|tx| tx.send(()));
    let ours = |call: &Call| call.ids().iter().any(|id| id == "i-0a");
    match kill {
        Kill::Before(method) => w.cloud().before_async(method, move |call: Call| {
            let hang = ours(&call) && fire().is_some();
            async move {
                if hang {
                    std::future::pending::<()>().await;
                }
                None::<Answer>
            }
        }),
        Kill::After(method) => w
            .cloud()
            .after_async(method, move |call: Call, answer: Answer| {
                let hang = ours(&call) && fire().is_some();
                async move {
                    if hang {
                        std::future::pending::<()>().await;
                    }
                    answer
                }
            }),
    }
}

/// The scenario of [`a_box_refused_twice_starts_into_a_reservation_that_is_then_cancelled`]
/// with the tick killed at `kill`, then ticks a minute apart until it settles.
async fn killed_at(pool: PgPool, kill: Kill) {
    let mut w = refused_twice(pool).await;
    let (tx, mut rx) = oneshot::channel();
    arm(&w, kill, tx);
    let at = t("2026-12-02T08:45:00Z");
    let mut minute = 0;
    loop {
        let now = at + chrono::Duration::minutes(minute);
        let (reconciler, leader) = (&w.reconciler, &mut w.leader);
        tokio::select! {
            report = reconciler.tick(now, leader) => {
                report.unwrap();
            }
            _ = &mut rx => break,
        }
        minute += 1;
        assert!(minute < 3, "{kill:?}: never reached");
    }
    // The killed tick's work is gone; later ticks (the in-flight window is 0 here) settle it.
    for later in 1..=6 {
        w.tick_at(at + chrono::Duration::minutes(minute + later))
            .await;
    }
    let all = rows(&w.store).await;
    // Every intent has exactly one outcome.
    let mut outcomes: HashMap<i64, usize> = HashMap::new();
    for r in &all {
        if let Some(seq) = r.entry.intent_seq {
            *outcomes.entry(seq).or_default() += 1;
        }
    }
    for r in all.iter().filter(|r| r.entry.outcome == Outcome::Intent) {
        assert_eq!(
            outcomes.get(&r.seq),
            Some(&1),
            "{kill:?}: intent {} ({}) has {:?} outcomes: {:#?}",
            r.seq,
            r.entry.action,
            outcomes.get(&r.seq),
            steps(&all)
        );
    }
    assert!(
        w.store.pending_intents().await.unwrap().is_empty(),
        "{kill:?}"
    );
    // One reservation made, cancelled; the box started once and runs.
    let made = w
        .cloud()
        .inner
        .reservations("us-east-1", "i-0a", "ebb-i-0a-1796201100")
        .await;
    let made = made.unwrap();
    assert_eq!(made.len(), 1, "{kill:?}: {made:?}");
    assert!(
        made[0].state.ended(),
        "{kill:?}: {made:?}; {:#?}",
        steps(&all)
    );
    let started = all
        .iter()
        .filter(|r| r.entry.action == "start" && r.entry.outcome == Outcome::Succeeded)
        .count();
    assert_eq!(started, 1, "{kill:?}: {:#?}", steps(&all));
    let listed = w.cloud().inner.instances().await.instances;
    assert_ne!(
        listed[0].state,
        ebb::fleet::InstanceState::Stopped,
        "{kill:?}"
    );
}

macro_rules! kill_matrix {
    ($($name:ident: $kill:expr,)*) => {$(
        #[sqlx::test(migrations = false)]
        async fn $name(pool: PgPool) {
            killed_at(pool, $kill).await;
        }
    )*};
}

kill_matrix! {
    killed_before_the_reservation_is_made: Kill::Before(Method::ReserveCapacity),
    killed_after_the_reservation_is_made: Kill::After(Method::ReserveCapacity),
    killed_before_the_box_is_made_to_start_into_it: Kill::Before(Method::TargetReservation),
    killed_after_the_box_is_made_to_start_into_it: Kill::After(Method::TargetReservation),
    killed_before_the_start: Kill::Before(Method::Start),
    killed_after_the_start: Kill::After(Method::Start),
    killed_before_the_cancellation: Kill::Before(Method::CancelReservation),
    killed_after_the_cancellation: Kill::After(Method::CancelReservation),
}
