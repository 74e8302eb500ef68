//! Answers a real Prometheus does not give on demand: a Thanos, Mimir or Cortex front end that
//! answers `success` with `warnings` when some of its stores did not answer (a partial
//! answer). A tiny local responder stands in for it; the reconciler on the simulated fleet
//! reads GPU utilisation from it, and a partial answer is a failed read: nothing is stopped for
//! idleness, though the readings it does carry look idle.

use crate::common;

use axum::extract::State;
use axum::routing::get;
use common::t;
use common::world::SimWorld;
use ebb::clock::Clock;
use ebb::cloud::prometheus::{Prometheus, PrometheusSettings};
use ebb::reconcile::{Options, TickReport};
use ebb::store::{Outcome, Store};
use sqlx::PgPool;

/// Stop a box whose GPUs stayed below 5 % for 45 minutes.
const POLICY: &str = r#"
policies:
  - name: idle-boxes
    match: {tags: {team: research}}
    idle: {gpu_below: 5, for: 45m}
"#;

const FLEET: &str = r#"
instances:
  - {id: i-idle, region: us-east-1, type: g5.xlarge, state: running, tags: {team: research}}
"#;

const NOW: &str = "2026-11-30T14:00:00Z";

/// The answer to every range query: i-idle at 2 % every five minutes of the hour before
/// [`NOW`], with `warnings` when there are any.
fn answer(warnings: &[&str]) -> String {
    let now = t(NOW).timestamp();
    let values: Vec<serde_json::Value> = (0..=12)
        .map(|k| serde_json::json!([now - 3600 + 300 * k, "2"]))
        .collect();
    let mut body = serde_json::json!({
        "status": "success",
        "data": {
            "resultType": "matrix",
            "result": [{"metric": {"instance_id": "i-idle"}, "values": values}],
        },
    });
    if !warnings.is_empty() {
        body["warnings"] = serde_json::json!(warnings);
    }
    body.to_string()
}

/// A server at a local address that answers `body` to `/api/v1/query_range`; its URL.
async fn responder(body: String) -> String {
    let app = axum::Router::new()
        .route(
            "/api/v1/query_range",
            get(|State(body): State<String>| async move {
                (
                    [(axum::http::header::CONTENT_TYPE, "application/json")],
                    body,
                )
            }),
        )
        .with_state(body);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    url
}

/// One tick of the simulated fleet at [`NOW`], reading from a server that answers `body`.
async fn tick(pool: PgPool, body: String) -> TickReport {
    let url = responder(body).await;
    let options = Options {
        prometheus: Some(Prometheus::new(PrometheusSettings::new(&url)).unwrap()),
        ..Options::default()
    };
    let mut world = SimWorld::plan(FLEET)
        .policy("idle.yaml", POLICY)
        .clock(Clock::Fixed(t(NOW)))
        .options(options)
        .start(Store::from_pool(pool))
        .await;
    world.tick(NOW).await
}

fn stopped(report: &TickReport) -> Vec<&str> {
    report
        .actions
        .iter()
        .filter(|a| a.outcome == Outcome::Succeeded)
        .map(|a| a.decision.instance.as_str())
        .collect()
}

#[sqlx::test(migrations = false)]
async fn a_complete_answer_of_an_idle_box_stops_it(pool: PgPool) {
    // The same readings as below, without warnings: the box is idle and stopped, so the
    // partial answer's readings would stop it too if the warnings were not heeded.
    let report = tick(pool, answer(&[])).await;
    assert!(report.gpu_read_failures.is_empty(), "{report:?}");
    assert_eq!(stopped(&report), ["i-idle"], "{}", report.headline());
}

#[sqlx::test(migrations = false)]
async fn an_answer_with_warnings_is_a_failed_read_not_idleness(pool: PgPool) {
    let warnings = ["partial response: store eu-1 is unavailable"];
    let report = tick(pool, answer(&warnings)).await;
    assert_eq!(
        stopped(&report),
        Vec::<&str>::new(),
        "{}",
        report.headline()
    );
    assert!(report.actions.is_empty(), "{}", report.headline());
    let unreadable: usize = report
        .decided
        .iter()
        .filter(|((_, code), _)| *code == "metrics_unreadable")
        .map(|(_, n)| n)
        .sum();
    assert_eq!(unreadable, 1, "{:?}", report.decided);
    assert_eq!(report.gpu_read_failures.len(), 1);
    let error = &report.gpu_read_failures[0].error;
    assert!(
        error.contains("partial") && error.contains("store eu-1 is unavailable"),
        "{error}"
    );
}

/// A server answering each of the three queries a tick sends for i-idle over the hour before
/// [`NOW`]: utilisation at 2 %, GPU memory `memory` MiB (with `warnings` on that answer only),
/// no busy GPU.
fn by_query(memory: &'static str, warnings: &'static [&'static str]) -> axum::Router {
    let now = t(NOW).timestamp();
    let matrix = move |value: &str| -> serde_json::Value {
        let values: Vec<serde_json::Value> = (0..=12)
            .map(|k| serde_json::json!([now - 3600 + 300 * k, value]))
            .collect();
        serde_json::json!({
            "status": "success",
            "data": {
                "resultType": "matrix",
                "result": [{"metric": {"instance_id": "i-idle"}, "values": values}],
            },
        })
    };
    let answer = move |axum::extract::Query(q): axum::extract::Query<
        std::collections::HashMap<String, String>,
    >| async move {
        let query = q.get("query").cloned().unwrap_or_default();
        let body = if query.contains("DCGM_FI_DEV_FB_USED") {
            let mut body = matrix(memory);
            if !warnings.is_empty() {
                body["warnings"] = serde_json::json!(warnings);
            }
            body
        } else if query.starts_with("sum by") {
            matrix("0")
        } else {
            matrix("2")
        };
        axum::Json(body)
    };
    axum::Router::new().route("/api/v1/query_range", get(answer))
}

/// One tick at [`NOW`] under `policy`, reading from `router`; the report and the store.
async fn tick_on(pool: PgPool, router: axum::Router, policy: &str) -> (TickReport, Store) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, router).await });
    let options = Options {
        prometheus: Some(Prometheus::new(PrometheusSettings::new(&url)).unwrap()),
        ..Options::default()
    };
    let store = Store::from_pool(pool);
    let mut world = SimWorld::plan(FLEET)
        .policy("idle.yaml", policy)
        .clock(Clock::Fixed(t(NOW)))
        .options(options)
        .start(store.clone())
        .await;
    (world.tick(NOW).await, store)
}

#[sqlx::test(migrations = false)]
async fn dcgm_memory_and_busy_gpus_are_kept_and_a_held_model_is_not_idle(pool: PgPool) {
    // 12 GiB held on a GPU at 2 %: under gpu_memory_below 2048 MiB, not idle.
    let policy = POLICY.replace("for: 45m}", "for: 45m, gpu_memory_below: 2048}");
    let (report, store) = tick_on(pool, by_query("12288", &[]), &policy).await;
    assert!(report.gpu_read_failures.is_empty(), "{report:?}");
    assert_eq!(
        stopped(&report),
        Vec::<&str>::new(),
        "{}",
        report.headline()
    );
    let not_idle: usize = report
        .decided
        .iter()
        .filter(|((_, code), _)| *code == "not_idle")
        .map(|(_, n)| n)
        .sum();
    assert_eq!(not_idle, 1, "{:?}", report.decided);
    // Kept in Postgres with the utilisation: the last 15 minutes of the read.
    let kept = store
        .gpu_readings("i-idle", t(NOW) - chrono::Duration::minutes(15), t(NOW))
        .await
        .unwrap();
    assert!(!kept.is_empty());
    assert!(
        kept.iter()
            .all(|s| s.memory_mib == Some(12_288) && s.gpus_busy == Some(0)),
        "{kept:?}"
    );
}

#[sqlx::test(migrations = false)]
async fn a_partial_memory_answer_is_a_failed_read(pool: PgPool) {
    let warnings: &[&str] = &["partial response: store eu-1 is unavailable"];
    let (report, _) = tick_on(pool, by_query("0", warnings), POLICY).await;
    assert!(report.actions.is_empty(), "{}", report.headline());
    assert_eq!(report.gpu_read_failures.len(), 1);
    assert!(
        report.gpu_read_failures[0].error.contains("partial"),
        "{:?}",
        report.gpu_read_failures
    );
}
