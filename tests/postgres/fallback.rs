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
    // Its own type is remembered through both changes, for start.restore_type.
    let own = w.store.fallback_types(&["i-0a".to_string()]).await.unwrap();
    assert_eq!(
        (own["i-0a"].own.as_str(), own["i-0a"].fallback.as_str()),
        ("g5.2xlarge", "g6e.2xlarge")
    );
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

/// `start.restore_type`: what the policy above says, and changed back at a later start.
const RESTORING: &str = r#"
policies:
  - name: office
    match: {tags: {team: research}}
    work_hours:
      timezone: UTC
      periods: [{days: mon-fri, start: "09:00", stop: "19:00"}]
    start: {fallback_types: [g6.2xlarge], restore_type: true}
"#;

/// The actions of `report`, each with its code and outcome.
fn steps(report: &ebb::reconcile::TickReport) -> Vec<(String, String, Outcome)> {
    report
        .actions
        .iter()
        .map(|a| {
            let d = &a.decision;
            (
                d.action.as_str().to_string(),
                d.code.as_str().to_string(),
                a.outcome,
            )
        })
        .collect()
}

/// A world of `fleet`, where i-0a is a stopped g6.2xlarge that ebb stopped on Friday evening
/// and had moved from g5.2xlarge for lack of capacity.
async fn moved_last_week(pool: PgPool, fleet: &str) -> SimWorld {
    let w = SimWorld::plan(fleet)
        .policy("office.yaml", RESTORING)
        .start(Store::from_pool(pool))
        .await;
    let mut w = w;
    w.tick("2026-11-30T08:00:00Z").await;
    let ids = ["i-0a".to_string()];
    w.store
        .record_action(&ids, Action::Stop, t("2026-11-27T19:00:00Z"))
        .await
        .unwrap();
    w.store
        .remember_fallback_type("i-0a", "g5.2xlarge", "g6.2xlarge")
        .await
        .unwrap();
    w
}

#[sqlx::test(migrations = false)]
async fn an_instance_moved_to_a_fallback_type_is_changed_back_at_its_next_start(pool: PgPool) {
    const FLEET: &str = r#"
instances:
  - {id: i-0a, region: us-east-1, type: g6.2xlarge, state: stopped, tags: {team: research}, sim: {usage: idle}}
"#;
    let mut w = moved_last_week(pool, FLEET).await;

    // Its own type has capacity: changed back before the start, then started.
    let monday = w.tick("2026-11-30T09:00:00Z").await;
    let step = |a: &str, c: &str| (a.to_string(), c.to_string(), Outcome::Succeeded);
    assert_eq!(
        steps(&monday),
        [
            step("resize", "restore_type"),
            step("start", "start_at_open")
        ]
    );
    let listed = w.cloud().instances().await.instances;
    assert_eq!(listed[0].instance_type, "g5.2xlarge");
    assert_eq!(listed[0].state, InstanceState::Pending);
    assert!(monday.actions[0]
        .decision
        .reason
        .starts_with("changed back from g6.2xlarge to its own type g5.2xlarge"));
    let own = w.store.fallback_types(&["i-0a".to_string()]).await.unwrap();
    assert!(own.is_empty(), "back on its own type: {own:?}");
}

#[sqlx::test(migrations = false)]
async fn an_own_type_still_without_capacity_falls_back_again_and_is_tried_at_the_next_start(
    pool: PgPool,
) {
    // EC2 still has no g5.2xlarge capacity.
    const FLEET: &str = r#"
instances:
  - {id: i-0a, region: us-east-1, type: g6.2xlarge, state: stopped, tags: {team: research}, sim: {usage: idle, no_capacity_for: [g5.2xlarge]}}
"#;
    let mut w = moved_last_week(pool, FLEET).await;
    let monday = w.tick("2026-11-30T09:00:00Z").await;
    let step = |a: &str, c: &str, o: Outcome| (a.to_string(), c.to_string(), o);
    assert_eq!(
        steps(&monday),
        [
            step("resize", "restore_type", Outcome::Succeeded),
            step("start", "start_at_open", Outcome::Failed),
            step("resize", "fallback_type", Outcome::Succeeded),
            step("start", "start_at_open", Outcome::Succeeded),
        ]
    );
    let listed = w.cloud().instances().await.instances;
    assert_eq!(listed[0].instance_type, "g6.2xlarge");
    // Its own type is still the one to go back to at the next start.
    let own = w.store.fallback_types(&["i-0a".to_string()]).await.unwrap();
    assert_eq!(
        (own["i-0a"].own.as_str(), own["i-0a"].fallback.as_str()),
        ("g5.2xlarge", "g6.2xlarge")
    );
}

#[sqlx::test(migrations = false)]
async fn a_type_a_person_changed_after_the_fallback_is_not_changed_back(pool: PgPool) {
    // A person made it a g5.4xlarge since ebb's fallback.
    const FLEET: &str = r#"
instances:
  - {id: i-0a, region: us-east-1, type: g5.4xlarge, state: stopped, tags: {team: research}, sim: {usage: idle}}
"#;
    let mut w = moved_last_week(pool, FLEET).await;
    let monday = w.tick("2026-11-30T09:00:00Z").await;
    let codes: Vec<String> = steps(&monday).into_iter().map(|s| s.1).collect();
    assert_eq!(
        codes,
        ["start_at_open"],
        "no resize: the person's type stands"
    );
    let listed = w.cloud().instances().await.instances;
    assert_eq!(listed[0].instance_type, "g5.4xlarge");
    let own = w.store.fallback_types(&["i-0a".to_string()]).await.unwrap();
    assert!(own.is_empty(), "{own:?}");
}

#[sqlx::test(migrations = false)]
async fn starts_refused_for_capacity_are_remembered_by_own_type_for_idle_min_gap(pool: PgPool) {
    // As in the first test: g5.2xlarge and g6.2xlarge refused, g6e.2xlarge started.
    let mut w = SimWorld::plan(FLEET)
        .policy("office.yaml", POLICY)
        .start(Store::from_pool(pool))
        .await;
    w.tick("2026-11-30T08:00:00Z").await;
    let ids = ["i-0a".to_string()];
    w.store
        .record_action(&ids, Action::Stop, t("2026-11-27T19:00:00Z"))
        .await
        .unwrap();
    w.tick("2026-11-30T09:00:00Z").await;

    // Both refusals count for its own type, the one it had before the fallbacks.
    let prior = w.store.prior(t("2026-12-01T08:30:00Z")).await.unwrap();
    let at = prior.last_capacity_failure("us-east-1", "g5.2xlarge");
    assert_eq!(at, Some(t("2026-11-30T09:00:00Z")));
    assert_eq!(
        prior.last_capacity_failure("us-east-1", "g6e.2xlarge"),
        None
    );
    assert_eq!(prior.last_capacity_failure("eu-west-1", "g5.2xlarge"), None);
    // Not before they happened, and not past the longest capacity_memory.
    let before = w.store.prior(t("2026-11-30T08:59:00Z")).await.unwrap();
    assert_eq!(
        before.last_capacity_failure("us-east-1", "g5.2xlarge"),
        None
    );
    let month_later = w.store.prior(t("2026-12-30T09:00:01Z")).await.unwrap();
    assert_eq!(
        month_later.last_capacity_failure("us-east-1", "g5.2xlarge"),
        None
    );
}
