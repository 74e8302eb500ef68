//! A failing action is tried again after growing waits, not at every tick: in process, on the
//! simulated fleet (where a start can fail for lack of capacity), with a real Postgres.

mod common;

use common::t;
use ebb::clock::Clock;
use ebb::cloud::sim::SimProvider;
use ebb::engine::Action;
use ebb::reconcile::{Options, PolicySource, Reconciler};
use ebb::store::{AuditFilter, Outcome, Store};
use sqlx::PgPool;
use std::sync::Arc;

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

#[sqlx::test(migrations = false)]
async fn a_start_that_keeps_failing_is_retried_after_doubling_waits(pool: PgPool) {
    let store = Store::from_pool(pool);
    store.migrate().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("policies")).unwrap();
    std::fs::write(dir.path().join("policies/office.yaml"), POLICY).unwrap();
    std::fs::write(dir.path().join("fleet.yaml"), FLEET).unwrap();
    let (fleet, behaviours) =
        ebb::snapshot::load_simulation(&dir.path().join("fleet.yaml")).unwrap();
    let provider = SimProvider::new(fleet, behaviours, Clock::Fixed(t("2026-11-30T08:00:00Z")));
    let policies = Arc::new(PolicySource::new(vec![dir.path().join("policies")]));
    let reconciler = Reconciler::new(provider, store.clone(), policies, Options::default());
    let mut leader = store.try_lead("test").await.unwrap().unwrap();

    let before = reconciler
        .tick(t("2026-11-30T08:00:00Z"), &mut leader)
        .await
        .unwrap();
    assert!(before.actions.is_empty());
    // As if ebb had stopped it last night.
    store
        .record_action(
            &["i-0a".to_string()],
            Action::Stop,
            t("2026-11-29T19:00:00Z"),
        )
        .await
        .unwrap();

    // (time, tried, held back): waits of 1, 2, 4 and 8 minutes after the first four failures.
    let ticks = [
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
    for (time, tried) in ticks {
        let report = reconciler
            .tick(t(&format!("2026-11-30T{time}Z")), &mut leader)
            .await
            .unwrap();
        if tried {
            assert_eq!(report.actions.len(), 1, "{time}: {report:?}");
            assert_eq!(report.actions[0].outcome, Outcome::Failed);
            assert!(report.actions[0]
                .detail
                .contains("InsufficientInstanceCapacity"));
            assert_eq!(report.held_back, 0, "{time}");
        } else {
            assert!(report.actions.is_empty(), "{time}: {report:?}");
            assert_eq!(report.held_back, 1, "{time}");
        }
    }
    let failed = store
        .audit(&AuditFilter {
            instance: Some("i-0a".into()),
            outcome: Some(Outcome::Failed),
            ..AuditFilter::default()
        })
        .await
        .unwrap();
    assert_eq!(failed.len(), 5, "one row per attempt, none while waiting");
}
