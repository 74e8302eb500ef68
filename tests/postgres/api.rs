//! The HTTP API over real HTTP and a real Postgres: every route, with and without tokens, and
//! with malformed requests.

use crate::common;

use chrono::Utc;
use common::{instance, t};
use ebb::api::{self, ApiLimits, ApiState, ChangeBudgets, Tokens, TokensError};
use ebb::checkpoint::{Publisher, Sink};
use ebb::control::Control;
use ebb::engine::{Action, Code, Decision};
use ebb::store::Store;
use reqwest::StatusCode;
use serde_json::{json, Value};
use sqlx::PgPool;
use std::path::Path;
use std::sync::Arc;

const POLICY: &str = r#"
policies:
  - name: office
    match: {tags: {team: research}}
    work_hours:
      timezone: Europe/London
      periods:
        - {days: mon-fri, start: "09:00", stop: "19:00"}
      outside_hours: stop
"#;

const TOKEN: &str = "alice-token-0123456789";
const ROOT: &str = "root-token-0123456789ab";

/// A running API on a free port, its base URL, and what it shares with the control loop.
struct Api {
    base: String,
    control: Arc<Control>,
    store: Store,
    http: reqwest::Client,
    _policies: tempfile::TempDir,
}

impl Api {
    async fn start(pool: &PgPool, policy: &str) -> Api {
        let store = Store::from_pool(pool.clone());
        store.migrate().await.unwrap();
        Api::start_with(store, policy).await
    }

    async fn start_with(store: Store, policy: &str) -> Api {
        let public = ApiLimits {
            public_reads: true,
            ..ApiLimits::default()
        };
        Api::start_configured(store, policy, &format!("alice:{TOKEN}"), public, None).await
    }

    /// The API with tokens `tokens` (as EBB_API_TOKENS) and `limits`, publishing checkpoints
    /// with `checkpoints` (a key and a place).
    async fn start_configured(
        store: Store,
        policy: &str,
        tokens: &str,
        limits: ApiLimits,
        checkpoints: Option<(ed25519_dalek::SigningKey, Sink)>,
    ) -> Api {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("p.yaml"), policy).unwrap();
        let control = Arc::new(Control::default());
        let policies = vec![dir.path().to_path_buf()];
        let state = ApiState {
            control: control.clone(),
            tokens: common::api::tokens(tokens),
            checkpoints: checkpoints.map(|(key, sink)| {
                Arc::new(Publisher::new(
                    key,
                    sink,
                    control.tasks.clone(),
                    control.metrics.audit_checkpoint_failures(),
                ))
            }),
            change_budgets: Arc::new(ChangeBudgets::new(limits.changes_per_minute)),
            limits,
            prices: Default::default(),
            ..common::api::state(&store, policies, ebb::clock::Clock::System)
        };
        let base = common::api::serve(api::router(state)).await;
        Api {
            base,
            control,
            store,
            http: reqwest::Client::new(),
            _policies: dir,
        }
    }

    fn policies(&self) -> &Path {
        self._policies.path()
    }

    async fn get(&self, path: &str) -> (StatusCode, Value) {
        let r = self
            .http
            .get(format!("{}{path}", self.base))
            .send()
            .await
            .unwrap();
        let status = r.status();
        let text = r.text().await.unwrap();
        (
            status,
            serde_json::from_str(&text).unwrap_or(Value::String(text)),
        )
    }

    async fn send(
        &self,
        method: reqwest::Method,
        path: &str,
        token: Option<&str>,
        body: Option<&str>,
    ) -> (StatusCode, Value) {
        let mut r = self.http.request(method, format!("{}{path}", self.base));
        if let Some(token) = token {
            r = r.bearer_auth(token);
        }
        if let Some(body) = body {
            r = r
                .header("content-type", "application/json")
                .body(body.to_string());
        }
        let r = r.send().await.unwrap();
        let status = r.status();
        let text = r.text().await.unwrap();
        (
            status,
            serde_json::from_str(&text).unwrap_or(Value::String(text)),
        )
    }

    /// Makes ebb know `ids` as live instances (overrides are refused for others).
    async fn know(&self, ids: &[&str]) {
        let fleet: Vec<_> = ids.iter().map(|id| instance(id, &[])).collect();
        self.store
            .sync_inventory(&["us-east-1".to_string()], &fleet, Utc::now())
            .await
            .unwrap();
    }

    async fn override_rows(&self) -> usize {
        self.store.all_overrides().await.unwrap().len()
    }
}

/// An error response: the status, and a JSON body with a non-empty `error`.
fn assert_error(got: &(StatusCode, Value), status: StatusCode, mentions: &str) {
    assert_eq!(got.0, status, "{got:?}");
    let message = got.1["error"]
        .as_str()
        .unwrap_or_else(|| panic!("no JSON error: {got:?}"));
    assert!(
        message.contains(mentions),
        "{message:?} should mention {mentions:?}"
    );
}

#[sqlx::test(migrations = false)]
async fn health_and_readiness_report_the_database_policies_and_role(pool: PgPool) {
    let api = Api::start(&pool, POLICY).await;
    let r = api
        .http
        .get(format!("{}/healthz", api.base))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);

    let (status, body) = api.get("/readyz").await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["ready"], true);
    assert_eq!(body["database"], "ok");
    assert_eq!(body["role"], "follower");
    let version = body["policies"]["version"].as_str().unwrap().to_string();
    assert!(body["policies"]["error"].is_null());

    // Broken files: the last valid set still stands, and the error is reported.
    std::fs::write(
        api.policies().join("p.yaml"),
        "policies: [{name: x, bogus: 1}]",
    )
    .unwrap();
    let (status, body) = api.get("/readyz").await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["policies"]["version"], version.as_str());
    assert!(
        body["policies"]["error"]
            .as_str()
            .unwrap()
            .contains("bogus"),
        "{body}"
    );
}

#[sqlx::test(migrations = false)]
async fn not_ready_without_valid_policies_or_a_database(pool: PgPool) {
    let api = Api::start(&pool, "policies: [{name: x, bogus: 1}]").await;
    let (status, body) = api.get("/readyz").await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body}");
    assert_eq!(body["ready"], false);
    assert!(body["policies"]["version"].is_null());

    // Nothing listens on port 1.
    let unreachable = sqlx::postgres::PgPoolOptions::new()
        .acquire_timeout(std::time::Duration::from_secs(1))
        .connect_lazy("postgres://ebb@127.0.0.1:1/ebb")
        .unwrap();
    let api = Api::start_with(Store::from_pool(unreachable), POLICY).await;
    let (status, body) = api.get("/readyz").await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body}");
    assert_ne!(body["database"], "ok");
    let (status, body) = api.get("/v1/plan").await;
    assert_error(&(status, body), StatusCode::SERVICE_UNAVAILABLE, "");
}

#[sqlx::test(migrations = false)]
async fn metrics_are_prometheus_text_with_the_tick_figures(pool: PgPool) {
    let api = Api::start(&pool, POLICY).await;
    let mut report = ebb::reconcile::TickReport::default();
    report.decided.insert(("stop", "outside_hours"), 3);
    report
        .instances_by_state
        .insert(("running", "office".to_string()), 3);
    report.actions.push(ebb::reconcile::ActionOutcome {
        decision: decision("i-1", Action::Stop),
        outcome: ebb::store::Outcome::Succeeded,
        detail: String::new(),
    });
    report.record(&api.control.metrics, std::time::Duration::from_millis(20));
    let r = api
        .http
        .get(format!("{}/metrics", api.base))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    assert!(r.headers()["content-type"]
        .to_str()
        .unwrap()
        .starts_with("application/openmetrics-text"));
    let text = r.text().await.unwrap();
    for line in [
        "ebb_ticks_total{result=\"ok\"} 1",
        "ebb_tick_duration_seconds_count 1",
        "ebb_decisions{action=\"stop\",code=\"outside_hours\"} 3",
        "ebb_actions_total{action=\"stop\",outcome=\"succeeded\"} 1",
        "ebb_instances{state=\"running\",policy=\"office\"} 3",
        "ebb_policy_load_errors_total 0",
        "ebb_leader 0",
    ] {
        assert!(text.lines().any(|l| l == line), "no {line:?} in\n{text}");
    }
    assert!(text.contains("ebb_last_tick_timestamp_seconds "), "{text}");
}

#[sqlx::test(migrations = false)]
async fn status_shows_each_background_task(pool: PgPool) {
    let store = Store::from_pool(pool.clone());
    store.migrate().await.unwrap();
    let public = ApiLimits {
        public_reads: true,
        ..ApiLimits::default()
    };
    let tokens = format!("alice:{TOKEN},root:{ROOT}:admin");
    let api = Api::start_configured(store, POLICY, &tokens, public, None).await;
    let (status, body) = api.get("/v1/status").await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["role"], "follower");
    assert_eq!(body["tasks"], serde_json::json!({}), "{body}");

    let tasks = &api.control.tasks;
    tasks.register("tick_loop", "ticks");
    tasks.started("tick_loop");
    let error = "tick failed: cannot connect to postgres://ebb:s3cr3t@db.internal:5432/ebb";
    tasks.finished::<String, _>("tick_loop", Err(&error));
    tasks.register("policy_watcher", "watches");
    tasks.started("policy_watcher");
    tasks.register("pruner", "prunes");
    tasks.started("pruner");
    let pruned = serde_json::json!({"pruned": "not_leader"});
    tasks.finished::<_, String>("pruner", Ok(&pruned));
    let (_, body) = api.get("/v1/status").await;
    let tick = &body["tasks"]["tick_loop"];
    assert_eq!(tick["description"], "ticks");
    assert_eq!(tick["activations"], 1);
    assert!(tick["running_since"].is_null(), "{body}");
    assert_eq!(tick["last"]["ok"], false);
    assert!(tick["last"].get("status").is_none(), "{body}");
    // A task's own status is shown as it serialises, beside its line.
    let prune = &body["tasks"]["pruner"]["last"];
    assert_eq!(prune["ok"], true, "{body}");
    assert_eq!(prune["status"], pruned, "{body}");
    assert_eq!(prune["detail"], pruned.to_string(), "{body}");
    // Readers learn that it failed, not the error: it may name hosts, ARNs, file contents.
    let summary = "failed; the error is in ebb's log, and here for an admin token";
    assert_eq!(tick["last"]["detail"], summary, "{body}");
    let (_, body) = api
        .send(reqwest::Method::GET, "/v1/status", Some(TOKEN), None)
        .await;
    assert_eq!(
        body["tasks"]["tick_loop"]["last"]["detail"], summary,
        "{body}"
    );
    // An admin reads the error, with a URL's credentials hidden all the same.
    let (_, body) = api
        .send(reqwest::Method::GET, "/v1/status", Some(ROOT), None)
        .await;
    assert_eq!(
        body["tasks"]["tick_loop"]["last"]["detail"],
        "tick failed: cannot connect to postgres://***@db.internal:5432/ebb",
        "{body}"
    );
    let watcher = &body["tasks"]["policy_watcher"];
    assert!(watcher["running_since"].is_string(), "{body}");
    assert!(watcher["last"].is_null(), "{body}");
}

fn decision(id: &str, action: Action) -> Decision {
    Decision {
        instance: id.to_string(),
        region: "us-east-1".to_string(),
        action,
        policy: Some("office".to_string()),
        code: Code::OutsideHours,
        reason: "outside work hours".to_string(),
        dry_run: false,
        stop_at: None,
    }
}

#[sqlx::test(migrations = false)]
async fn instances_and_plan_come_from_the_store(pool: PgPool) {
    let api = Api::start(&pool, POLICY).await;
    let now = t("2026-11-30T20:00:00Z");
    let region = vec!["us-east-1".to_string()];
    let fleet = [
        instance("i-1", &[("team", "research")]),
        instance("i-2", &[]),
        instance("i-3", &[]),
    ];
    api.store
        .sync_inventory(&region, &fleet, now)
        .await
        .unwrap();
    api.store
        .sync_inventory(&region, &fleet[..2], now)
        .await
        .unwrap();
    api.store
        .record_decisions(
            &[
                decision("i-1", Action::Stop),
                Decision {
                    policy: None,
                    code: Code::NoPolicy,
                    reason: "no policy matches".into(),
                    ..decision("i-2", Action::None)
                },
            ],
            now,
        )
        .await
        .unwrap();

    let (status, body) = api.get("/v1/instances").await;
    assert_eq!(status, StatusCode::OK);
    let ids: Vec<&str> = body
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["i-1", "i-2"], "gone instances are left out");
    assert_eq!(body[0]["decided_action"], "stop");
    assert_eq!(body[0]["policy"], "office");
    let (_, body) = api.get("/v1/instances?gone=true").await;
    assert_eq!(body.as_array().unwrap().len(), 3);
    assert_error(
        &api.get("/v1/instances?gone=maybe").await,
        StatusCode::BAD_REQUEST,
        "gone",
    );

    let (status, body) = api.get("/v1/plan").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        body,
        json!([
            {"instance": "i-1", "action": "stop", "policy": "office",
             "code": "outside_hours", "reason": "outside work hours"},
            {"instance": "i-2", "action": "none", "policy": null,
             "code": "no_policy", "reason": "no policy matches"},
        ])
    );
}

#[sqlx::test(migrations = false)]
async fn audit_takes_the_filters_of_ebb_audit(pool: PgPool) {
    let api = Api::start(&pool, POLICY).await;
    let until = Utc::now() + chrono::Duration::hours(4);
    for id in ["i-1", "i-2", "i-1"] {
        api.store
            .create_override(id, until, "demo", "bob", Utc::now())
            .await
            .unwrap();
    }
    let (status, body) = api.get("/v1/audit?instance=i-1&action=override").await;
    assert_eq!(status, StatusCode::OK);
    let rows = body.as_array().unwrap();
    assert_eq!(rows.len(), 2);
    assert!(rows
        .iter()
        .all(|r| r["instance"] == "i-1" && r["actor"] == "bob"));
    let (_, body) = api.get("/v1/audit?since=1h&limit=1").await;
    assert_eq!(body.as_array().unwrap().len(), 1);
    assert_eq!(body[0]["instance"], "i-1", "the newest row");
    let (_, body) = api.get("/v1/audit?until=2000-01-01T00:00:00Z").await;
    assert_eq!(body, json!([]));

    assert_error(
        &api.get("/v1/audit?since=yesterday").await,
        StatusCode::BAD_REQUEST,
        "since",
    );
    assert_error(
        &api.get("/v1/audit?outcome=done").await,
        StatusCode::BAD_REQUEST,
        "outcome",
    );
    assert_error(
        &api.get("/v1/audit?limit=0").await,
        StatusCode::BAD_REQUEST,
        "limit",
    );
    assert_error(
        &api.get("/v1/audit?limit=ten").await,
        StatusCode::BAD_REQUEST,
        "limit",
    );
    assert_error(
        &api.get("/v1/audit?colour=red").await,
        StatusCode::BAD_REQUEST,
        "colour",
    );
}

#[sqlx::test(migrations = false)]
async fn overrides_need_a_token_and_a_well_formed_body(pool: PgPool) {
    use reqwest::Method;
    let api = Api::start(&pool, POLICY).await;
    api.know(&["i-1"]).await;
    let body = r#"{"instance": "i-1", "until": "4h", "reason": "demo tomorrow"}"#;

    for token in [None, Some("wrong-token-0123456789"), Some("")] {
        let got = api
            .send(Method::POST, "/v1/overrides", token, Some(body))
            .await;
        assert_error(&got, StatusCode::UNAUTHORIZED, "");
    }
    assert_eq!(
        api.override_rows().await,
        0,
        "a refused request changes nothing"
    );

    for (bad, mentions) in [
        ("{", "body"),
        (r#"{"instance": "i-1", "until": "4h"}"#, "reason"),
        (
            r#"{"instance": "i-1", "until": "4h", "reason": "x", "extra": 1}"#,
            "extra",
        ),
        (
            r#"{"instance": "i-1", "until": "soon", "reason": "x"}"#,
            "until",
        ),
        (
            r#"{"instance": "i-1", "until": "2000-01-01T00:00:00Z", "reason": "x"}"#,
            "past",
        ),
        (
            r#"{"instance": "i-1", "until": "4h", "reason": "  "}"#,
            "reason",
        ),
        (
            r#"{"instance": "", "until": "4h", "reason": "x"}"#,
            "instance",
        ),
    ] {
        let got = api
            .send(Method::POST, "/v1/overrides", Some(TOKEN), Some(bad))
            .await;
        assert_error(&got, StatusCode::BAD_REQUEST, mentions);
    }
    let no_type = api
        .http
        .post(format!("{}/v1/overrides", api.base))
        .bearer_auth(TOKEN)
        .body(body)
        .send()
        .await
        .unwrap();
    assert_eq!(no_type.status(), StatusCode::BAD_REQUEST);
    assert_eq!(api.override_rows().await, 0);

    let (status, created) = api
        .send(Method::POST, "/v1/overrides", Some(TOKEN), Some(body))
        .await;
    assert_eq!(status, StatusCode::CREATED, "{created}");
    assert_eq!(created["instance"], "i-1");
    assert_eq!(
        created["created_by"], "alice",
        "the token's name is the actor"
    );
    let id = created["id"].as_i64().unwrap();
    let (_, listed) = api.get("/v1/overrides").await;
    assert_eq!(listed.as_array().unwrap().len(), 1);
    let (_, audit) = api.get("/v1/audit?action=override").await;
    assert_eq!(audit[0]["actor"], "alice");

    let path = format!("/v1/overrides/{id}");
    assert_error(
        &api.send(Method::DELETE, &path, None, None).await,
        StatusCode::UNAUTHORIZED,
        "",
    );
    assert_error(
        &api.send(Method::DELETE, &path, Some("nope-nope-nope-nope"), None)
            .await,
        StatusCode::UNAUTHORIZED,
        "",
    );
    assert_error(
        &api.send(Method::DELETE, "/v1/overrides/abc", Some(TOKEN), None)
            .await,
        StatusCode::BAD_REQUEST,
        "",
    );
    assert_error(
        &api.send(Method::DELETE, "/v1/overrides/999", Some(TOKEN), None)
            .await,
        StatusCode::NOT_FOUND,
        "999",
    );
    let (_, listed) = api.get("/v1/overrides").await;
    assert_eq!(
        listed.as_array().unwrap().len(),
        1,
        "refused revokes change nothing"
    );
    let (status, revoked) = api.send(Method::DELETE, &path, Some(TOKEN), None).await;
    assert_eq!(status, StatusCode::OK, "{revoked}");
    assert_eq!(revoked["revoked_by"], "alice");
    let (_, listed) = api.get("/v1/overrides").await;
    assert_eq!(listed, json!([]));
}

#[sqlx::test(migrations = false)]
async fn a_tick_request_reaches_the_leader_through_postgres(pool: PgPool) {
    use reqwest::Method;
    let api = Api::start(&pool, POLICY).await;
    let mut listener = sqlx::postgres::PgListener::connect_with(&pool)
        .await
        .unwrap();
    listener.listen(ebb::store::WAKE_CHANNEL).await.unwrap();

    assert_error(
        &api.send(Method::POST, "/v1/tick", None, None).await,
        StatusCode::UNAUTHORIZED,
        "",
    );
    let (status, _) = api.send(Method::POST, "/v1/tick", Some(TOKEN), None).await;
    assert_eq!(status, StatusCode::ACCEPTED);
    let note = tokio::time::timeout(std::time::Duration::from_secs(60), listener.recv())
        .await
        .expect("a notification within 60 s")
        .unwrap();
    assert_eq!(note.channel(), ebb::store::WAKE_CHANNEL);
    assert!(
        tokio::time::timeout(std::time::Duration::from_millis(300), listener.recv())
            .await
            .is_err(),
        "the refused request sent nothing"
    );
}

#[sqlx::test(migrations = false)]
async fn migrations_are_listed_as_the_cli_prints_them(pool: PgPool) {
    let api = Api::start(&pool, POLICY).await;
    assert_eq!(api.get("/v1/migrations").await, (StatusCode::OK, json!([])));
    let planned = ebb::store::NewAuditEntry::event(
        t("2026-11-30T10:00:00Z"),
        "scheduler",
        "migrate_to_spot",
        "planned".into(),
    );
    api.store
        .plan_migration(
            "i-0train",
            "us-east-1",
            "training",
            None,
            t("2026-11-30T04:00:00Z"),
            planned,
        )
        .await
        .unwrap()
        .unwrap();
    let (status, body) = api.get("/v1/migrations").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body[0]["original"], "i-0train");
    assert_eq!(body[0]["state"], "planned");
    assert_eq!(body[0]["current"], Value::Null);
}

#[sqlx::test(migrations = false)]
async fn unknown_routes_are_json_404s(pool: PgPool) {
    let api = Api::start(&pool, POLICY).await;
    assert_error(
        &api.get("/v2/everything").await,
        StatusCode::NOT_FOUND,
        "route",
    );
}

#[test]
fn api_tokens_are_name_colon_token_and_long_enough() {
    assert!(Tokens::parse("").unwrap().is_empty());
    assert_eq!(
        Tokens::parse("ci:0123456789abcdef, alice:fedcba9876543210")
            .unwrap()
            .len(),
        2
    );
    assert!(matches!(
        Tokens::parse("ci"),
        Err(TokensError::Malformed(1))
    ));
    assert!(matches!(
        Tokens::parse("ci:0123456789abcdef,:fedcba9876543210"),
        Err(TokensError::Malformed(2))
    ));
    assert!(matches!(
        Tokens::parse("ci:short"),
        Err(TokensError::TooShort { position: 1, .. })
    ));
    assert!(matches!(
        Tokens::parse("ci:0123456789abcdef,ci:fedcba9876543210"),
        Err(TokensError::Repeated(2))
    ));
}

const READER: &str = "reader-token-0123456789";
const WRITER: &str = "writer-token-0123456789";
const BOSS: &str = "boss-token-0123456789";
const PLAIN: &str = "plain-token-0123456789";

/// An API whose reads need a token, with one token of each scope and one without scopes.
async fn scoped(pool: &PgPool, limits: ApiLimits) -> Api {
    let store = Store::from_pool(pool.clone());
    store.migrate().await.unwrap();
    let tokens =
        format!("reader:{READER}:read,writer:{WRITER}:override,boss:{BOSS}:admin,plain:{PLAIN}");
    let api = Api::start_configured(store, POLICY, &tokens, limits, None).await;
    api.know(&["i-1"]).await;
    api
}

#[sqlx::test(migrations = false)]
async fn reads_need_a_read_token_unless_public(pool: PgPool) {
    use reqwest::Method;
    let api = scoped(&pool, ApiLimits::default()).await;
    for path in [
        "/v1/status",
        "/v1/instances",
        "/v1/plan",
        "/v1/audit",
        "/v1/overrides",
        "/v1/migrations",
    ] {
        assert_error(&api.get(path).await, StatusCode::UNAUTHORIZED, "Bearer");
        let wrong = api.send(Method::GET, path, Some(WRITER), None).await;
        assert_error(&wrong, StatusCode::FORBIDDEN, "no read scope");
        for token in [READER, BOSS, PLAIN] {
            let (status, body) = api.send(Method::GET, path, Some(token), None).await;
            assert_eq!(status, StatusCode::OK, "{path} {token}: {body}");
        }
    }
    // The platform's probes stay open.
    for path in ["/healthz", "/readyz", "/metrics"] {
        assert_eq!(api.get(path).await.0, StatusCode::OK, "{path}");
    }
    // Broken files: their problems (paths, contents) only for readers.
    std::fs::write(api.policies().join("p.yaml"), "policies: [").unwrap();
    let (_, open) = api.get("/readyz").await;
    assert_eq!(
        open["policies"]["error"],
        "the policy files cannot be used; details need a read token"
    );
    let (_, read) = api.send(Method::GET, "/readyz", Some(READER), None).await;
    assert!(
        read["policies"]["error"]
            .as_str()
            .unwrap()
            .contains("p.yaml"),
        "{read}"
    );
}

#[sqlx::test(migrations = false)]
async fn changes_need_the_override_scope_and_anothers_override_admin(pool: PgPool) {
    use reqwest::Method;
    let api = scoped(&pool, ApiLimits::default()).await;
    let body = r#"{"instance": "i-1", "until": "4h", "reason": "demo"}"#;
    let post = |token| api.send(Method::POST, "/v1/overrides", Some(token), Some(body));
    assert_error(
        &post(READER).await,
        StatusCode::FORBIDDEN,
        "no override scope",
    );
    assert_error(
        &api.send(Method::POST, "/v1/tick", Some(READER), None).await,
        StatusCode::FORBIDDEN,
        "no override scope",
    );
    assert_eq!(api.override_rows().await, 0);
    let (status, mine) = post(WRITER).await;
    assert_eq!(status, StatusCode::CREATED, "{mine}");
    let (status, plain) = post(PLAIN).await;
    assert_eq!(
        status,
        StatusCode::CREATED,
        "an unscoped token makes overrides: {plain}"
    );

    let writers = format!("/v1/overrides/{}", mine["id"]);
    for token in [PLAIN, READER] {
        let got = api.send(Method::DELETE, &writers, Some(token), None).await;
        assert_eq!(got.0, StatusCode::FORBIDDEN, "{got:?}");
    }
    let active = api.store.active_overrides(Utc::now()).await.unwrap();
    assert_eq!(active.len(), 2, "a refused revocation is rolled back");
    let (status, revoked) = api.send(Method::DELETE, &writers, Some(WRITER), None).await;
    assert_eq!(
        (status, revoked["revoked_by"].clone()),
        (StatusCode::OK, json!("writer"))
    );
    let plains = format!("/v1/overrides/{}", plain["id"]);
    let (status, revoked) = api.send(Method::DELETE, &plains, Some(BOSS), None).await;
    assert_eq!(
        (status, revoked["revoked_by"].clone()),
        (StatusCode::OK, json!("boss"))
    );
    assert_eq!(
        api.send(Method::POST, "/v1/tick", Some(WRITER), None)
            .await
            .0,
        StatusCode::ACCEPTED
    );
}

#[sqlx::test(migrations = false)]
async fn a_restore_needs_the_override_scope_and_a_reclaim_waiting_for_it(pool: PgPool) {
    use ebb::store::{AuditFilter, NewAuditEntry, ReclaimState};
    use reqwest::Method;
    let api = scoped(&pool, ApiLimits::default()).await;
    let path = "/v1/instances/i-1/restore";
    let post = |token| api.send(Method::POST, path, Some(token), None);
    assert_error(
        &post(READER).await,
        StatusCode::FORBIDDEN,
        "no override scope",
    );
    assert_error(
        &post(WRITER).await,
        StatusCode::CONFLICT,
        "ebb has not reclaimed it",
    );
    // A box ebb reclaimed.
    let at = Utc::now();
    let planned = NewAuditEntry::event(at, "scheduler", "reclaim", "planned".into());
    let mut r = api
        .store
        .plan_reclaim("i-1", "us-east-1", "research", at, at, at, planned)
        .await
        .unwrap()
        .unwrap();
    assert_error(&post(WRITER).await, StatusCode::CONFLICT, "is noticed");
    r.state = ReclaimState::Reclaimed;
    r.image = Some("ami-1".into());
    api.store.save_reclaim(&r, &[]).await.unwrap();
    let (status, body) = post(WRITER).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    assert_eq!(body["image"], json!("ami-1"));
    assert_eq!(body["asked_by"], json!("writer"));
    assert_error(
        &post(WRITER).await,
        StatusCode::CONFLICT,
        "asked for already by writer",
    );
    let filter = AuditFilter {
        instance: Some("i-1".into()),
        ..AuditFilter::default()
    };
    let rows = api.store.audit(&filter).await.unwrap();
    assert!(rows
        .iter()
        .any(|r| r.entry.action == "restore_asked" && r.entry.actor == "writer"));
}

#[test]
fn tokens_carry_scopes_and_none_is_named_after_the_scheduler() {
    assert!(Tokens::parse("ci:0123456789abcdef:read+override,ops:fedcba9876543210:admin").is_ok());
    assert!(matches!(
        Tokens::parse("scheduler:0123456789abcdef"),
        Err(TokensError::SchedulerName(1))
    ));
    assert!(matches!(
        Tokens::parse("ci:0123456789abcdef:read+write"),
        Err(TokensError::UnknownScope { position: 1, ref scope }) if scope == "write"
    ));
}

#[sqlx::test(migrations = false)]
async fn overrides_are_bounded_in_length_reason_instance_and_body(pool: PgPool) {
    use reqwest::Method;
    let limits = ApiLimits {
        max_override: chrono::Duration::hours(12),
        ..ApiLimits::default()
    };
    let api = scoped(&pool, limits).await;
    let long = "x".repeat(501);
    for (body, mentions) in [
        (
            r#"{"instance": "i-1", "until": "13h", "reason": "x"}"#.to_string(),
            "the longest override is 12h",
        ),
        (
            format!(r#"{{"instance": "i-1", "until": "4h", "reason": "{long}"}}"#),
            "501 characters is too long",
        ),
        (
            r#"{"instance": "i-404", "until": "4h", "reason": "x"}"#.to_string(),
            "ebb knows no live instance i-404",
        ),
    ] {
        let got = api
            .send(Method::POST, "/v1/overrides", Some(WRITER), Some(&body))
            .await;
        assert_error(&got, StatusCode::BAD_REQUEST, mentions);
    }
    let huge = format!(
        r#"{{"instance": "i-1", "until": "4h", "reason": "{}"}}"#,
        "x".repeat(api::BODY_LIMIT)
    );
    let got = api
        .send(Method::POST, "/v1/overrides", Some(WRITER), Some(&huge))
        .await;
    assert_eq!(got.0, StatusCode::PAYLOAD_TOO_LARGE);
    assert_eq!(api.override_rows().await, 0);
    let ok = r#"{"instance": "i-1", "until": "12h", "reason": "x"}"#;
    let got = api
        .send(Method::POST, "/v1/overrides", Some(WRITER), Some(ok))
        .await;
    assert_eq!(got.0, StatusCode::CREATED, "{got:?}");
}

#[sqlx::test(migrations = false)]
async fn the_audit_log_pages_by_seq_up_to_ten_thousand_rows(pool: PgPool) {
    use ebb::store::NewAuditEntry;
    let api = scoped(&pool, ApiLimits::default()).await;
    let rows: Vec<NewAuditEntry> = (0..5)
        .map(|i| NewAuditEntry::event(Utc::now(), "ops", "note", format!("row {i}")))
        .collect();
    api.store.append_audit(&rows).await.unwrap();
    let api = &api;
    let page = |query: String| async move {
        let r = api
            .http
            .get(format!("{}/v1/audit?{query}", api.base))
            .bearer_auth(READER)
            .send()
            .await
            .unwrap();
        let next = r
            .headers()
            .get(api::NEXT_AFTER)
            .map(|v| v.to_str().unwrap().to_string());
        let body: Value = r.json().await.unwrap();
        let seqs: Vec<i64> = body
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["seq"].as_i64().unwrap())
            .collect();
        (seqs, next)
    };
    assert_eq!(
        page("after=0&limit=2".into()).await,
        (vec![1, 2], Some("2".into()))
    );
    assert_eq!(
        page("after=2&limit=2".into()).await,
        (vec![3, 4], Some("4".into()))
    );
    assert_eq!(page("after=4&limit=2".into()).await, (vec![5], None));
    assert_eq!(
        page("limit=2".into()).await.0,
        vec![4, 5],
        "without a cursor, the newest"
    );
    let got = api
        .send(
            reqwest::Method::GET,
            "/v1/audit?limit=10001",
            Some(READER),
            None,
        )
        .await;
    assert_error(&got, StatusCode::BAD_REQUEST, "between 1 and 10000");
}

#[sqlx::test(migrations = false)]
async fn instances_plan_and_migrations_page_by_key(pool: PgPool) {
    let api = Api::start(&pool, POLICY).await;
    let now = t("2026-11-30T20:00:00Z");
    let ids = ["i-1", "i-2", "i-3", "i-4", "i-5"];
    let fleet: Vec<_> = ids.iter().map(|id| instance(id, &[])).collect();
    let region = vec!["us-east-1".to_string()];
    api.store
        .sync_inventory(&region, &fleet, now)
        .await
        .unwrap();
    // i-3 is gone: listed only with gone=true, in its place by id.
    let live: Vec<_> = fleet.iter().filter(|i| i.id != "i-3").cloned().collect();
    api.store.sync_inventory(&region, &live, now).await.unwrap();
    let decisions: Vec<_> = ["i-1", "i-2", "i-4", "i-5"]
        .iter()
        .map(|id| decision(id, Action::Stop))
        .collect();
    api.store.record_decisions(&decisions, now).await.unwrap();
    for original in ["i-1", "i-2", "i-4"] {
        let planned =
            ebb::store::NewAuditEntry::event(now, "scheduler", "migrate_to_spot", "planned".into());
        api.store
            .plan_migration(original, "us-east-1", "training", None, now, planned)
            .await
            .unwrap()
            .unwrap();
    }
    let api = &api;
    // The keys of one page, and the `after` of the next when the page is full.
    let page = |path: String, key: &'static str| async move {
        let r = api
            .http
            .get(format!("{}{path}", api.base))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), StatusCode::OK, "{path}");
        let next = r
            .headers()
            .get(api::NEXT_AFTER)
            .map(|v| v.to_str().unwrap().to_string());
        let body: Value = r.json().await.unwrap();
        let keys: Vec<String> = body
            .as_array()
            .unwrap()
            .iter()
            .map(|row| match &row[key] {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            })
            .collect();
        (keys, next)
    };
    let owned = |keys: &[&str]| keys.iter().map(|k| k.to_string()).collect::<Vec<_>>();

    assert_eq!(
        page("/v1/instances?limit=2".into(), "id").await,
        (owned(&["i-1", "i-2"]), Some("i-2".into()))
    );
    assert_eq!(
        page("/v1/instances?limit=2&after=i-2".into(), "id").await,
        (owned(&["i-4", "i-5"]), Some("i-5".into()))
    );
    assert_eq!(
        page("/v1/instances?limit=2&after=i-5".into(), "id").await,
        (vec![], None)
    );
    assert_eq!(
        page("/v1/instances?gone=true&limit=2&after=i-2".into(), "id").await,
        (owned(&["i-3", "i-4"]), Some("i-4".into()))
    );
    assert_eq!(
        page("/v1/instances".into(), "id").await,
        (owned(&["i-1", "i-2", "i-4", "i-5"]), None),
        "a page of 1000 by default"
    );

    assert_eq!(
        page("/v1/plan?limit=3".into(), "instance").await,
        (owned(&["i-1", "i-2", "i-4"]), Some("i-4".into()))
    );
    assert_eq!(
        page("/v1/plan?limit=3&after=i-4".into(), "instance").await,
        (owned(&["i-5"]), None)
    );

    let (first, next) = page("/v1/migrations?limit=2".into(), "original").await;
    assert_eq!(first, owned(&["i-1", "i-2"]));
    let next = next.expect("a full page names the next");
    assert_eq!(
        page(format!("/v1/migrations?limit=2&after={next}"), "original").await,
        (owned(&["i-4"]), None)
    );

    for bad in [
        "/v1/instances?limit=0",
        "/v1/plan?limit=10001",
        "/v1/migrations?limit=-1",
    ] {
        assert_error(
            &api.get(bad).await,
            StatusCode::BAD_REQUEST,
            "between 1 and 10000",
        );
    }
    assert_error(
        &api.get("/v1/migrations?after=i-1").await,
        StatusCode::BAD_REQUEST,
        "after",
    );
}

#[sqlx::test(migrations = false)]
async fn each_token_has_a_budget_of_override_changes(pool: PgPool) {
    use reqwest::Method;
    // One change a minute: a second within the minute is refused.
    let limits = ApiLimits {
        changes_per_minute: 1,
        ..ApiLimits::default()
    };
    let api = scoped(&pool, limits).await;
    let body = r#"{"instance": "i-1", "until": "4h", "reason": "demo"}"#;
    let made = api
        .send(Method::POST, "/v1/overrides", Some(WRITER), Some(body))
        .await;
    assert_eq!(made.0, StatusCode::CREATED, "{made:?}");
    let r = api
        .http
        .post(format!("{}/v1/overrides", api.base))
        .bearer_auth(WRITER)
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::TOO_MANY_REQUESTS);
    let wait: u64 = r.headers()["retry-after"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!((1..=60).contains(&wait), "Retry-After {wait}");
    let error: Value = r.json().await.unwrap();
    assert!(
        error["error"].as_str().unwrap().contains("token writer"),
        "{error}"
    );
    // Revoking is a change too; another token's budget is its own.
    let id = made.1["id"].as_i64().unwrap();
    let revoke = format!("/v1/overrides/{id}");
    assert_error(
        &api.send(Method::DELETE, &revoke, Some(WRITER), None).await,
        StatusCode::TOO_MANY_REQUESTS,
        "try again",
    );
    assert_eq!(
        api.send(Method::DELETE, &revoke, Some(BOSS), None).await.0,
        StatusCode::OK
    );
    assert_eq!(
        api.override_rows().await,
        1,
        "the refused change made nothing"
    );
}

#[sqlx::test(migrations = false)]
async fn a_slow_read_times_out_and_database_errors_stay_in_the_log(pool: PgPool) {
    let limits = ApiLimits {
        public_reads: true,
        request_timeout: std::time::Duration::from_millis(300),
        ..ApiLimits::default()
    };
    let api = scoped(&pool, limits).await;
    // The log locked by another session until the test ends: the read can only time out.
    let mut lock = pool.begin().await.unwrap();
    sqlx::query("LOCK TABLE audit_log IN ACCESS EXCLUSIVE MODE")
        .execute(&mut *lock)
        .await
        .unwrap();
    let timed_out = api.get("/v1/audit").await;
    assert_eq!(
        timed_out,
        (
            StatusCode::SERVICE_UNAVAILABLE,
            Value::String(String::new())
        ),
        "the route's time limit, not the database's lock timeout"
    );
    lock.rollback().await.unwrap();

    sqlx::query("DROP TABLE overrides CASCADE")
        .execute(&pool)
        .await
        .unwrap();
    let got = api.get("/v1/overrides").await;
    assert_error(
        &got,
        StatusCode::SERVICE_UNAVAILABLE,
        "the error is in ebb's log",
    );
    assert!(
        !got.1.to_string().contains("overrides\" does not exist"),
        "{got:?}"
    );
}

#[sqlx::test(migrations = false)]
async fn each_change_through_the_api_publishes_a_signed_checkpoint(pool: PgPool) {
    use reqwest::Method;
    // The checkpoints are written by a task of their own: how long to wait for one, how often.
    const PATIENCE: std::time::Duration = std::time::Duration::from_secs(60);
    const EVERY: std::time::Duration = std::time::Duration::from_millis(50);
    let store = Store::from_pool(pool.clone());
    store.migrate().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let key = ed25519_dalek::SigningKey::from_bytes(&[9; 32]);
    let sink = Sink::Dir(dir.path().to_path_buf());
    let checkpoints = Some((key.clone(), sink.clone()));
    let tokens = format!("alice:{TOKEN}");
    let api =
        Api::start_configured(store, POLICY, &tokens, ApiLimits::default(), checkpoints).await;
    api.know(&["i-1"]).await;
    // The checkpoint is stored apart from the request: wait for it, at most a while.
    let stored = async |seq: i64| {
        let all = common::eventually(PATIENCE, EVERY, async || {
            let all = sink.read_all().await.unwrap();
            all.iter().any(|(_, c)| c.seq == seq).then_some(all)
        });
        all.await
            .unwrap_or_else(|| panic!("no checkpoint of row {seq}"))
    };
    let body = r#"{"instance": "i-1", "until": "4h", "reason": "demo"}"#;
    let (status, made) = api
        .send(Method::POST, "/v1/overrides", Some(TOKEN), Some(body))
        .await;
    assert_eq!(status, StatusCode::CREATED);
    let first = stored(1).await;
    let path = format!("/v1/overrides/{}", made["id"]);
    let (status, _) = api.send(Method::DELETE, &path, Some(TOKEN), None).await;
    assert_eq!(status, StatusCode::OK);
    let both = stored(2).await;
    assert_eq!(both[0], first[0], "the first checkpoint is kept as it was");
    let head = api.store.audit_head().await.unwrap().unwrap();
    assert_eq!((both[1].1.seq, both[1].1.hash.clone()), head);
    assert!(both[1].1.signed_by(&key.verifying_key()));
    // The task's status is written right after the file: wait for it too.
    let status = common::eventually(PATIENCE, EVERY, async || {
        let (_, status) = api.send(Method::GET, "/v1/status", Some(TOKEN), None).await;
        let last = &status["tasks"]["audit_checkpoints"]["last"];
        (last["detail"] == "checkpoint of row 2 stored").then_some(status)
    })
    .await
    .expect("/v1/status never showed the checkpoint of row 2");
    let last = &status["tasks"]["audit_checkpoints"]["last"];
    assert_eq!(last["ok"], true, "{status}");
}

/// A budget raise takes the admin scope and a well-formed body naming a budget of the policy
/// files; it is audited, in force at once, and ends by itself.
#[sqlx::test(migrations = false)]
async fn a_budget_raise_needs_admin_and_is_audited(pool: PgPool) {
    use reqwest::Method;
    let policy = format!(
        "{POLICY}budgets:\n  - {{name: research-monthly, match: {{tags: {{team: research}}}}, per: ebb:owner, amount: 2000, period: month, timezone: Europe/London}}\n"
    );
    let store = Store::from_pool(pool.clone());
    store.migrate().await.unwrap();
    let tokens = format!("alice:{TOKEN},root:{ROOT}:admin");
    let api =
        Api::start_configured(store.clone(), &policy, &tokens, ApiLimits::default(), None).await;
    let path = "/v1/budgets/research-monthly/raises";
    let body = r#"{"per": "mei", "by": "20%", "until": "3d", "reason": "the paper deadline"}"#;

    let got = api.send(Method::POST, path, None, Some(body)).await;
    assert_error(&got, StatusCode::UNAUTHORIZED, "");
    let got = api.send(Method::POST, path, Some(TOKEN), Some(body)).await;
    assert_error(&got, StatusCode::FORBIDDEN, "admin");
    for (path, bad, mentions) in [
        (path, r#"{"by": "20%", "until": "3d"}"#, "reason"),
        (
            path,
            r#"{"by": "0%", "until": "3d", "reason": "x"}"#,
            "is not a raise",
        ),
        (
            path,
            r#"{"by": "20%", "until": "200d", "reason": "x"}"#,
            "within 90 days",
        ),
        (
            path,
            r#"{"by": "20%", "until": "3d", "reason": "  "}"#,
            "say why",
        ),
        (
            "/v1/budgets/research-monthy/raises",
            body,
            "no budget \"research-monthy\" in the policy files (they have: research-monthly)",
        ),
    ] {
        let got = api.send(Method::POST, path, Some(ROOT), Some(bad)).await;
        assert_error(&got, StatusCode::BAD_REQUEST, mentions);
    }
    assert!(
        store.budget_raises(Utc::now()).await.unwrap().is_empty(),
        "refused ones change nothing"
    );

    let (status, made) = api.send(Method::POST, path, Some(ROOT), Some(body)).await;
    assert_eq!(status, StatusCode::CREATED, "{made}");
    assert_eq!(made["budget"], "research-monthly");
    assert_eq!(made["per"], "mei");
    assert_eq!(made["by"], "20%");
    assert_eq!(made["made_by"], "root");
    let now = Utc::now();
    let raises = store.budget_raises(now).await.unwrap();
    assert_eq!(raises.len(), 1);
    assert_eq!(raises[0].key.as_deref(), Some("mei"));
    assert!(raises[0].until > now + chrono::Duration::days(2));
    assert!(
        store
            .budget_raises(now + chrono::Duration::days(4))
            .await
            .unwrap()
            .is_empty(),
        "it ends by itself"
    );
    let audit = store
        .audit(&ebb::store::AuditFilter {
            action: Some("budget_raise".into()),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(audit.len(), 1);
    assert_eq!(audit[0].entry.actor, "root");
    assert!(
        audit[0]
            .entry
            .reason
            .starts_with("research-monthly (mei): raised by 20% until "),
        "{}",
        audit[0].entry.reason
    );
    assert!(audit[0]
        .entry
        .reason
        .ends_with("(raise 1): the paper deadline"));

    // Where the budget stands: Mei's box runs; the API's price table has no price for it.
    let fleet = vec![instance(
        "i-mei",
        &[("team", "research"), ("ebb:owner", "mei")],
    )];
    store
        .sync_inventory(&["us-east-1".to_string()], &fleet, Utc::now())
        .await
        .unwrap();
    let got = api.send(Method::GET, "/v1/budgets", None, None).await;
    assert_error(&got, StatusCode::UNAUTHORIZED, "");
    let (status, rows) = api
        .send(Method::GET, "/v1/budgets", Some(TOKEN), None)
        .await;
    assert_eq!(status, StatusCode::OK, "{rows}");
    let row = &rows[0];
    assert_eq!(row["budget"], "research-monthly");
    assert_eq!(row["key"], "mei");
    assert_eq!(row["amount"], 2400.0, "2000 and the raise of 20 %: {row}");
    assert_eq!(row["spent"], Value::Null);
    assert!(
        row["unknown"]
            .as_str()
            .unwrap()
            .contains("no USD price of g5.xlarge in us-east-1"),
        "{row}"
    );
    assert!(
        row["raises"][0]
            .as_str()
            .unwrap()
            .starts_with("20% by root until "),
        "{row}"
    );
}
