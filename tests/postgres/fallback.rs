//! Fallback types: a start EC2 refuses for lack of capacity changes the stopped instance to the
//! next of the policy's `start.fallback_types` and starts it as that, each step audited. In
//! process, on the simulated fleet (which refuses starts of the types it has no capacity for),
//! with a real Postgres.

use crate::common;

use common::t;
use common::world::SimWorld;
use ebb::cloud::Provider;
use ebb::engine::Action;
use ebb::fleet::InstanceState;
use ebb::reconcile::Options;
use ebb::store::{AuditFilter, Outcome, Store};
use sqlx::PgPool;

const POLICY: &str = r#"
policies:
  - name: office
    match: {tags: {team: research}}
    work_hours:
      timezone: UTC
      periods: [{days: mon-fri, start: "09:00", stop: "19:00"}]
    start: {fallback_types: [g6.2xlarge, g6e.2xlarge]}
"#;

/// EC2 has no g5.2xlarge nor g6.2xlarge capacity this morning.
const FLEET: &str = r#"
instances:
  - id: i-0a
    region: us-east-1
    type: g5.2xlarge
    state: stopped
    tags: {team: research}
    sim: {usage: idle, no_capacity_for: [g5.2xlarge, g6.2xlarge]}
"#;

#[sqlx::test(migrations = false)]
async fn a_start_without_capacity_falls_back_to_the_next_type_that_has_it(pool: PgPool) {
    let mut w = SimWorld::plan(FLEET)
        .policy("office.yaml", POLICY)
        .start(Store::from_pool(pool))
        .await;
    w.tick("2026-11-30T08:00:00Z").await;
    w.store
        .record_action(
            &["i-0a".to_string()],
            Action::Stop,
            t("2026-11-27T19:00:00Z"),
        )
        .await
        .unwrap();

    let report = w.tick("2026-11-30T09:00:00Z").await;
    let steps: Vec<(&str, Outcome)> = report
        .actions
        .iter()
        .map(|a| (a.decision.action.as_str(), a.outcome))
        .collect();
    assert_eq!(
        steps,
        [
            ("start", Outcome::Failed),
            ("resize", Outcome::Succeeded),
            ("start", Outcome::Failed),
            ("resize", Outcome::Succeeded),
            ("start", Outcome::Succeeded),
        ],
        "{report:?}"
    );
    let listed = w.cloud().instances().await.instances;
    assert_eq!(listed[0].instance_type, "g6e.2xlarge");
    assert_eq!(listed[0].state, InstanceState::Pending);

    // Every step has its intent and one outcome, with a code saying what happened.
    let rows = w
        .store
        .audit(&AuditFilter {
            instance: Some("i-0a".into()),
            ..AuditFilter::default()
        })
        .await
        .unwrap();
    let rows: Vec<(String, Outcome, String)> = rows
        .iter()
        .filter(|r| r.entry.action != "policy_version")
        .map(|r| {
            (
                r.entry.action.clone(),
                r.entry.outcome,
                r.entry.code.clone().unwrap_or_default(),
            )
        })
        .collect();
    let row = |a: &str, o: Outcome, c: &str| (a.to_string(), o, c.to_string());
    assert_eq!(
        rows,
        [
            row("start", Outcome::Intent, "start_at_open"),
            row("start", Outcome::Failed, "insufficient_capacity"),
            row("resize", Outcome::Intent, "fallback_type"),
            row("resize", Outcome::Succeeded, "fallback_type"),
            row("start", Outcome::Intent, "start_at_open"),
            row("start", Outcome::Failed, "insufficient_capacity"),
            row("resize", Outcome::Intent, "fallback_type"),
            row("resize", Outcome::Succeeded, "fallback_type"),
            row("start", Outcome::Intent, "start_at_open"),
            row("start", Outcome::Succeeded, "start_at_open"),
        ]
    );
    let resizes = w
        .store
        .audit(&AuditFilter {
            instance: Some("i-0a".into()),
            action: Some("resize".into()),
            outcome: Some(Outcome::Succeeded),
            ..AuditFilter::default()
        })
        .await
        .unwrap();
    assert!(resizes[1]
        .entry
        .reason
        .starts_with("EC2 has no capacity for g6.2xlarge: changed to g6e.2xlarge"));
}

#[sqlx::test(migrations = false)]
async fn a_start_refused_for_capacity_is_told_to_the_webhook_once_until_it_starts(pool: PgPool) {
    const POLICY: &str = r#"
policies:
  - name: office
    match: {tags: {team: research}}
    work_hours:
      timezone: UTC
      periods: [{days: mon-fri, start: "09:00", stop: "19:00"}]
"#;
    // The next two starts fail for lack of capacity; the third succeeds.
    const FLEET: &str = r#"
instances:
  - {id: i-0b, region: us-east-1, type: p5.48xlarge, state: stopped, tags: {team: research}, sim: {start_failures: 2}}
"#;
    let (url, texts) = common::webhook::receiver().await;
    let (webhook, poster) =
        ebb::webhook::Webhook::start(url.parse().unwrap(), ebb::control::Tasks::default());
    let options = Options {
        webhook: Some(webhook),
        ..Options::default()
    };
    let mut w = SimWorld::plan(FLEET)
        .policy("office.yaml", POLICY)
        .options(options)
        .start(Store::from_pool(pool))
        .await;
    w.tick("2026-11-30T08:00:00Z").await;
    w.store
        .record_action(
            &["i-0b".to_string()],
            Action::Stop,
            t("2026-11-27T19:00:00Z"),
        )
        .await
        .unwrap();
    let mut outcomes = Vec::new();
    for at in ["09:00", "09:01", "09:02"] {
        let report = w.tick(&format!("2026-11-30T{at}:00Z")).await;
        outcomes.extend(report.actions.iter().map(|a| a.outcome));
    }
    assert_eq!(
        outcomes,
        [Outcome::Failed, Outcome::Failed, Outcome::Succeeded]
    );
    drop(w);
    poster.finish(std::time::Duration::from_secs(30)).await;
    let texts = texts.lock().unwrap().clone();
    assert_eq!(texts.len(), 1, "told once, not at every refusal: {texts:?}");
    assert!(texts[0].contains("could not start i-0b"), "{}", texts[0]);
    assert!(texts[0].contains("no capacity"), "{}", texts[0]);
}
