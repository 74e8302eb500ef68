//! A failing action is tried again, not at every tick: after growing waits when the cloud
//! refuses it (access denied), and at every tick for a while when EC2 has no capacity for a
//! start, then every 5 minutes. In process, on the simulated fleet (where a start can fail for
//! lack of capacity), with a real Postgres; the test layer over the simulated provider denies
//! starts, as a changed IAM policy would. Every tick reads the policy file (the world keeps its
//! directory): none runs on the last good set.

use crate::common;

use common::intercept::Method;
use common::t;
use common::world::SimWorld;
use ebb::clock::Clock;
use ebb::cloud::CloudError;
use ebb::engine::Action;
use ebb::store::{AuditFilter, NewAuditEntry, Outcome, Store};
use sqlx::PgPool;

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

/// Never enough capacity for this box.
const FLEET: &str = r#"
instances:
  - id: i-0a
    region: us-east-1
    type: p5.48xlarge
    state: stopped
    tags: {team: research}
    sim: {usage: idle, start_failures: 1000}
"#;

/// The box ebb stopped last night, about to be started at 09:00 and refused every time.
async fn setup(pool: PgPool, deny_starts: bool) -> SimWorld {
    let mut w = SimWorld::plan(FLEET)
        .policy("office.yaml", POLICY)
        .clock(Clock::Fixed(t("2026-11-30T08:00:00Z")))
        .start(Store::from_pool(pool))
        .await;
    if deny_starts {
        w.cloud()
            .refuse(Method::Start, CloudError::denied("StartInstances"));
    }
    let before = w.tick("2026-11-30T08:00:00Z").await;
    assert!(before.actions.is_empty());
    // As if ebb had stopped it last night.
    w.store
        .record_action(
            &["i-0a".to_string()],
            Action::Stop,
            t("2026-11-29T19:00:00Z"),
        )
        .await
        .unwrap();
    w
}

/// Ticks at each `(time, tried)`, each on the policy file (no policy error): the start is
/// tried, and fails with `error`, or is held back. Returns the failed outcome rows.
async fn ticks(
    w: &mut SimWorld,
    ticks: &[(&str, bool)],
    error: &str,
) -> Vec<ebb::store::AuditEntry> {
    for (time, tried) in ticks {
        let report = w.tick(&format!("2026-11-30T{time}Z")).await;
        assert_eq!(report.policy_error, None, "{time}");
        if *tried {
            assert_eq!(report.actions.len(), 1, "{time}: {report:?}");
            assert_eq!(report.actions[0].outcome, Outcome::Failed);
            assert!(
                report.actions[0].detail.contains(error),
                "{time}: {report:?}"
            );
            assert_eq!(report.held_back, 0, "{time}");
        } else {
            assert!(report.actions.is_empty(), "{time}: {report:?}");
            assert_eq!(report.held_back, 1, "{time}");
        }
    }
    w.store
        .audit(&AuditFilter {
            instance: Some("i-0a".into()),
            outcome: Some(Outcome::Failed),
            ..AuditFilter::default()
        })
        .await
        .unwrap()
}

#[sqlx::test(migrations = false)]
async fn a_start_that_keeps_being_denied_is_retried_after_doubling_waits(pool: PgPool) {
    let mut w = setup(pool, true).await;
    // Waits of 1, 2, 4 and 8 minutes after the first four failures.
    let plan = [
        ("09:00:00", true),
        ("09:00:30", false),
        ("09:01:00", true),
        ("09:02:00", false),
        ("09:03:00", true),
        ("09:06:00", false),
        ("09:07:00", true),
        ("09:14:00", false),
        ("09:15:00", true),
    ];
    let failed = ticks(&mut w, &plan, "UnauthorizedOperation").await;
    assert_eq!(failed.len(), 5, "one row per attempt, none while waiting");
    assert!(failed
        .iter()
        .all(|row| row.entry.code.as_deref() == Some("start_at_open")));
}

#[sqlx::test(migrations = false)]
async fn a_start_refused_for_capacity_is_retried_at_every_tick_then_every_five_minutes(
    pool: PgPool,
) {
    let mut w = setup(pool, false).await;
    // Ten attempts a minute apart, then one every 5 minutes.
    let mut plan: Vec<(String, bool)> = (0..10).map(|m| (format!("09:{m:02}:00"), true)).collect();
    plan.extend([
        ("09:10:00".to_string(), false),
        ("09:13:59".to_string(), false),
        ("09:14:00".to_string(), true),
        ("09:18:00".to_string(), false),
        ("09:19:00".to_string(), true),
    ]);
    let plan: Vec<(&str, bool)> = plan.iter().map(|(s, b)| (s.as_str(), *b)).collect();
    let failed = ticks(&mut w, &plan, "InsufficientInstanceCapacity").await;
    assert_eq!(failed.len(), 12);
    for row in &failed {
        assert_eq!(
            row.entry.code.as_deref(),
            Some("insufficient_capacity"),
            "{row:?}"
        );
        assert!(
            row.entry
                .reason
                .contains("EC2 has no capacity for it now: tried again at every tick"),
            "{}",
            row.entry.reason
        );
    }
}

/// The failure streaks of one append are written for every instance at once: in one append, two
/// failures, a success and a failure of another action; in the next, a streak that goes on, one
/// that ends and one that starts again at another action.
#[sqlx::test]
async fn failure_streaks_of_many_instances_are_kept_across_appends(pool: PgPool) {
    let store = Store::from_pool(pool);
    let now = t("2026-11-30T20:00:00Z");
    let ids = ["i-1", "i-2", "i-3", "i-4"];
    let fleet: Vec<_> = ids
        .iter()
        .map(|id| common::instance(id, &[("team", "research")]))
        .collect();
    store
        .sync_inventory(&["us-east-1".to_string()], &fleet, now)
        .await
        .unwrap();
    let outcome = |id: &str, action: &str, outcome: Outcome| NewAuditEntry {
        instance: Some(id.into()),
        outcome,
        ..NewAuditEntry::event(now, ebb::names::ACTOR, action, "r".into())
    };
    store
        .append_audit(&[
            outcome("i-1", "stop", Outcome::Failed),
            outcome("i-2", "stop", Outcome::Failed),
            outcome("i-3", "stop", Outcome::Succeeded),
            outcome("i-4", "start", Outcome::Failed),
        ])
        .await
        .unwrap();
    store
        .append_audit(&[
            outcome("i-1", "stop", Outcome::Failed),
            outcome("i-2", "stop", Outcome::Succeeded),
            outcome("i-4", "stop", Outcome::Failed),
        ])
        .await
        .unwrap();
    let all: Vec<String> = ids.iter().map(|id| id.to_string()).collect();
    let streaks = store.failure_streaks(&all).await.unwrap();
    let seen: Vec<(&str, &str, u32)> = ids
        .iter()
        .filter_map(|id| {
            streaks
                .get(*id)
                .map(|s| (*id, s.action.as_str(), s.failures))
        })
        .collect();
    assert_eq!(seen, [("i-1", "stop", 2), ("i-4", "stop", 1)]);
}
