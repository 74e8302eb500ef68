//! Heartbeats through the API (`POST /v1/instances/{id}/activity`) over real HTTP and a real
//! Postgres: a box's own token (`ebb heartbeat-token`) keeps a heartbeat for it and nothing
//! else, reads nothing and cannot post another box's; the tick on the simulated fleet keeps
//! the GPU-idle box while its heartbeat is younger than `max_age`, then stops it.

use crate::common;

use chrono::Duration;
use common::world::SimWorld;
use ebb::api::{HeartbeatKey, Tokens};
use ebb::clock::Clock;
use ebb::reconcile::TickReport;
use ebb::store::{Outcome, Store};
use reqwest::StatusCode;
use sqlx::PgPool;
use std::sync::Arc;

const POLICY: &str = r#"
policies:
  - name: notebooks
    match: {tags: {team: research}}
    idle:
      gpu_below: 5
      for: 30m
      missing_metrics: idle
      activity: [{heartbeat: {max_age: 10m}}]
"#;

const FLEET: &str = r#"
instances:
  - {id: i-nb, region: us-east-1, type: g5.xlarge, state: running, tags: {team: research}, sim: {usage: idle}}
  - {id: i-quiet, region: us-east-1, type: g5.xlarge, state: running, tags: {team: research}, sim: {usage: idle}}
"#;

fn stopped(report: &TickReport) -> Vec<String> {
    let ok = report
        .actions
        .iter()
        .filter(|a| a.outcome == Outcome::Succeeded);
    ok.map(|a| a.decision.instance.clone()).collect()
}

#[sqlx::test(migrations = false)]
async fn a_box_s_own_token_keeps_its_heartbeat_and_nothing_else(pool: PgPool) {
    let dir = tempfile::tempdir().unwrap();
    let key_file = dir.path().join("heartbeat.key");
    std::fs::write(&key_file, "k3y-of-thirty-two-characters-or-more\n").unwrap();
    let key = HeartbeatKey::from_file(&key_file).unwrap();
    let mut world = SimWorld::plan(FLEET)
        .policy("notebooks.yaml", POLICY)
        .clock(Clock::System)
        .start(Store::from_pool(pool))
        .await;
    let tokens = Tokens::parse("alice:alice-token-0123456789")
        .unwrap()
        .with_heartbeat_key(Some(key.clone()));
    let state = ebb::api::ApiState {
        tokens: Arc::new(tokens),
        ..common::api::state(&world.store, vec![dir.path().to_path_buf()], Clock::System)
    };
    let base = common::api::serve(ebb::api::router(state)).await;
    let http = reqwest::Client::new();
    let post = |id: &str, token: Option<String>| {
        let request = http.post(format!("{base}/v1/instances/{id}/activity"));
        let request = match token {
            Some(token) => request.bearer_auth(token),
            None => request,
        };
        async move { request.send().await.unwrap().status() }
    };

    let own = key.token_of("i-nb");
    assert_eq!(
        post("i-nb", Some(own.clone())).await,
        StatusCode::NO_CONTENT
    );
    assert_eq!(
        post("i-quiet", Some(own.clone())).await,
        StatusCode::FORBIDDEN
    );
    assert_eq!(post("i-nb", None).await, StatusCode::UNAUTHORIZED);
    assert_eq!(
        post("i-nb", Some("alice-token-0123456789".into())).await,
        StatusCode::FORBIDDEN,
        "an API token is not a heartbeat token"
    );
    let read = http.get(format!("{base}/v1/instances")).bearer_auth(&own);
    assert_eq!(
        read.send().await.unwrap().status(),
        StatusCode::UNAUTHORIZED
    );
    let kept = world
        .store
        .heartbeats(&["i-nb".into(), "i-quiet".into()])
        .await
        .unwrap();
    assert_eq!(kept.len(), 1, "{kept:?}");
    let at = kept["i-nb"];

    // Three minutes after the heartbeat: kept; the box that posted none is stopped.
    let report = world.tick_at(at + Duration::minutes(3)).await;
    assert_eq!(stopped(&report), ["i-quiet"], "{}", report.headline());
    assert_eq!(
        report.decided.get(&("none", "in_use")),
        Some(&1),
        "{report:?}"
    );
    // The console's "Why, now" reads the posted heartbeat too.
    let policies = vec![world.dir.path().join("policies")];
    let console = ebb::api::ApiState {
        limits: common::api::public_reads(),
        ..common::api::state(&world.store, policies, Clock::System)
    };
    let console = common::api::serve_with_console(console).await;
    let page = http
        .get(format!("{console}/instances/i-nb"))
        .send()
        .await
        .unwrap();
    let html = page.text().await.unwrap();
    let why = &html[html.find("Why, now").expect("the explain section")..];
    assert!(why.contains("in use: heartbeat heard at"), "{why}");
    // Twenty minutes after it: stale, stopped.
    let report = world.tick_at(at + Duration::minutes(20)).await;
    assert_eq!(stopped(&report), ["i-nb"], "{}", report.headline());

    // Kept as long as GPU readings are, then pruned with them.
    let pruned = world.store.prune(at, at).await.unwrap();
    assert_eq!(pruned.heartbeats, 0);
    let later = at + Duration::seconds(1);
    assert_eq!(world.store.prune(at, later).await.unwrap().heartbeats, 1);
    assert!(world
        .store
        .heartbeats(&["i-nb".into()])
        .await
        .unwrap()
        .is_empty());
}

#[sqlx::test(migrations = false)]
async fn without_a_key_heartbeats_through_the_api_are_off(pool: PgPool) {
    let store = Store::from_pool(pool);
    store.migrate().await.unwrap();
    let state = common::api::state(&store, Vec::new(), Clock::System);
    let base = common::api::serve(ebb::api::router(state)).await;
    let answer = reqwest::Client::new()
        .post(format!("{base}/v1/instances/i-nb/activity"))
        .bearer_auth("0".repeat(64))
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), StatusCode::NOT_FOUND);
    let text = answer.text().await.unwrap();
    assert!(text.contains("EBB_HEARTBEAT_KEY_FILE"), "{text}");
}
