//! The runtime limits on the simulated fleet, tick by tick with a real Postgres: a box running
//! past `runtime.max` at 100 % GPU gets its notice `notify_before` ahead and is stopped at
//! the limit; one a person snoozed (an override, as a snooze link makes) is kept until the
//! snooze ends, then warned again and stopped; the audit log says why and verifies. A box busy
//! for `runtime.max_busy_without_checkpoint` past its last checkpoint is stopped after notice:
//! the tick reads its GPUs over that long.

use crate::common::{t, world::SimWorld};
use ebb::clock::Clock;
use ebb::fleet::InstanceState;
use ebb::reconcile::TickReport;
use ebb::store::{AuditFilter, Store, Verification};
use sqlx::PgPool;

const POLICY: &str = r#"
policies:
  - name: training
    match: {tags: {team: ml}}
    idle: {gpu_below: 5, for: 30m}
    runtime: {max: 72h, notify_before: 1h}
"#;

/// Two boxes busy since their start on Friday 10:00: the limit is Monday 10:00.
const FLEET: &str = r#"
instances:
  - {id: i-run, region: us-east-1, type: g5.xlarge, state: running, launched_at: "2026-11-27T10:00:00Z", tags: {team: ml}, sim: {usage: busy}}
  - {id: i-snoozed, region: us-east-1, type: g5.xlarge, state: running, launched_at: "2026-11-27T10:00:00Z", tags: {team: ml}, sim: {usage: busy}}
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

/// What the store last decided for `id`: code and reason.
async fn decided(store: &Store, id: &str) -> (String, String) {
    let r = store.instance(id).await.unwrap().unwrap();
    (
        r.decided_code.unwrap(),
        r.decided_reason.unwrap_or_default(),
    )
}

#[sqlx::test(migrations = false)]
async fn a_busy_box_past_its_runtime_is_stopped_after_notice_and_a_snoozed_one_when_the_snooze_ends(
    pool: PgPool,
) {
    let store = Store::from_pool(pool);
    // The simulator's clock stands after every tick, so its readings reach each tick's time
    // and a stop it accepted stays stopping.
    let mut w = SimWorld::plan(FLEET)
        .policy("training.yaml", POLICY)
        .clock(Clock::Fixed(t("2026-12-01T00:00:00Z")))
        .start(store.clone())
        .await;

    // Two hours before the limit: busy, so nothing.
    let report = w.tick("2026-11-30T08:00:00Z").await;
    assert_eq!(acted(&report), [], "{:?}", report.actions);
    assert_eq!(decided(&store, "i-run").await.0, "not_idle");

    // An hour before: the notice, for the limit.
    let report = w.tick("2026-11-30T09:00:00Z").await;
    assert_eq!(
        acted(&report),
        [
            row("i-run", "notify", "runtime_notice"),
            row("i-snoozed", "notify", "runtime_notice")
        ]
    );
    assert_eq!(
        report.actions[0].decision.stop_at,
        Some(t("2026-11-30T10:00:00Z"))
    );

    // The owner of one snoozes it for three hours.
    store
        .create_override(
            "i-snoozed",
            t("2026-11-30T12:00:00Z"),
            "finishing the epoch",
            "mei@example.com",
            t("2026-11-30T09:10:00Z"),
        )
        .await
        .unwrap();
    let report = w.tick("2026-11-30T09:30:00Z").await;
    assert_eq!(
        acted(&report),
        [row("i-snoozed", "withdraw_notice", "notice_withdrawn")],
        "the snoozed box's notice is taken back"
    );
    let (code, reason) = decided(&store, "i-run").await;
    assert_eq!(code, "notice_pending", "{reason}");
    assert!(
        reason.contains("notice sent 09:00 UTC, stop at 10:00 UTC"),
        "{reason}"
    );

    // At the limit: the busy box is stopped; the snoozed one is kept.
    let report = w.tick("2026-11-30T10:00:00Z").await;
    assert_eq!(acted(&report), [row("i-run", "stop", "runtime_exceeded")]);
    assert_eq!(w.state("us-east-1", "i-run").await, InstanceState::Stopping);
    let report = w.tick("2026-11-30T11:55:00Z").await;
    assert_eq!(acted(&report), [], "{:?}", report.actions);
    assert_eq!(decided(&store, "i-snoozed").await.0, "override");
    assert_eq!(
        w.state("us-east-1", "i-snoozed").await,
        InstanceState::Running
    );

    // The snooze ends: the notice it took back is given again, and the stop follows it.
    let report = w.tick("2026-11-30T12:00:00Z").await;
    assert_eq!(
        acted(&report),
        [row("i-snoozed", "notify", "runtime_notice")]
    );
    assert_eq!(
        report.actions[0].decision.stop_at,
        Some(t("2026-11-30T13:00:00Z"))
    );
    let report = w.tick("2026-11-30T12:59:00Z").await;
    assert_eq!(acted(&report), [], "{:?}", report.actions);
    let report = w.tick("2026-11-30T13:00:00Z").await;
    assert_eq!(
        acted(&report),
        [row("i-snoozed", "stop", "runtime_exceeded")]
    );

    let stops = store
        .audit(&AuditFilter {
            action: Some("stop".into()),
            ..AuditFilter::default()
        })
        .await
        .unwrap();
    let reasons: Vec<(&str, &str)> = stops
        .iter()
        .filter(|r| r.entry.code.as_deref() == Some("runtime_exceeded"))
        .map(|r| {
            (
                r.entry.instance.as_deref().unwrap(),
                r.entry.reason.as_str(),
            )
        })
        .collect();
    assert!(!reasons.is_empty(), "{stops:?}");
    for (id, reason) in &reasons {
        assert!(
            reason.contains("runtime.max 3d reached at") && reason.contains("busy or not"),
            "{id}: {reason}"
        );
    }
    assert!(matches!(
        store.verify_audit().await.unwrap(),
        Verification::Intact { .. }
    ));
}

const CHECKPOINTS: &str = r#"
policies:
  - name: training
    match: {tags: {team: ml}}
    idle: {gpu_below: 5, for: 30m}
    runtime: {max_busy_without_checkpoint: 6h, notify_before: 1h}
"#;

/// Busy since its start at midnight; its job last saved itself at 02:00.
const STUCK: &str = r#"
instances:
  - {id: i-stuck, region: us-east-1, type: g5.xlarge, state: running, launched_at: "2026-11-30T00:00:00Z", tags: {team: ml, "ebb:checkpoint-at": "2026-11-30T02:00:00Z"}, sim: {usage: busy}}
"#;

#[sqlx::test(migrations = false)]
async fn a_box_busy_for_hours_past_its_last_checkpoint_is_stopped_after_notice(pool: PgPool) {
    let store = Store::from_pool(pool);
    let mut w = SimWorld::plan(STUCK)
        .policy("training.yaml", CHECKPOINTS)
        .clock(Clock::Fixed(t("2026-12-01T00:00:00Z")))
        .start(store.clone())
        .await;
    let report = w.tick("2026-11-30T07:55:00Z").await;
    assert_eq!(acted(&report), [], "{:?}", report.actions);
    // Six hours busy past the checkpoint: the tick read the GPUs over those six hours, not
    // only the idle rule's half hour.
    let report = w.tick("2026-11-30T08:00:00Z").await;
    assert_eq!(acted(&report), [row("i-stuck", "notify", "runtime_notice")]);
    assert_eq!(
        report.actions[0].decision.stop_at,
        Some(t("2026-11-30T09:00:00Z"))
    );
    let report = w.tick("2026-11-30T09:00:00Z").await;
    assert_eq!(
        acted(&report),
        [row("i-stuck", "stop", "checkpoint_overdue")]
    );
    let (code, reason) = decided(&store, "i-stuck").await;
    assert_eq!(code, "checkpoint_overdue");
    assert!(
        reason.contains("work that is not saving itself"),
        "{reason}"
    );
}
