//! The HTTP API: health, readiness and metrics for the platform; instances, the plan and the
//! audit log for anyone; overrides and tick requests for holders of a token.
//!
//! Every replica serves it; reads come from Postgres, so a follower answers what the leader
//! did. Writes need `Authorization: Bearer TOKEN` with a token of `EBB_API_TOKENS`; the token's
//! name becomes the audit actor. Errors are JSON: `{"error": "..."}`.

mod auth;

pub use auth::{Tokens, TokensError};

use crate::checkpoint::Publisher;
use crate::clock::Clock;
use crate::control::{Control, TaskStatus};
use crate::output;
use crate::reconcile::PolicySource;
use crate::store::{
    AuditFilter, InstanceRecord, Outcome, OverrideRecord, OverrideRequest, PlannedAction, Store,
    StoreError,
};
use crate::when;
use auth::Caller;
use axum::extract::rejection::{JsonRejection, PathRejection, QueryRejection};
use axum::extract::{Path, Query, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get, post};
use axum::{Json, Router};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use std::sync::Arc;
use std::time::Duration;

/// How many audit rows `GET /v1/audit` returns when no `limit` is given, and at most.
const AUDIT_LIMIT: (i64, i64) = (1_000, 100_000);

/// How long readiness waits for the database.
const DATABASE_CHECK: Duration = Duration::from_secs(2);

/// What the handlers share.
#[derive(Clone)]
pub struct ApiState {
    /// ebb's database.
    pub store: Store,
    /// The policies, to report whether they load.
    pub policies: Arc<PolicySource>,
    /// The control loop's metrics and role, and its wake-up.
    pub control: Arc<Control>,
    /// Who may write.
    pub tokens: Arc<Tokens>,
    /// What time it is (simulated under the sim provider), for overrides and `since`.
    pub clock: Clock,
    /// Publishes an audit checkpoint after each change, when configured.
    pub checkpoints: Option<Arc<Publisher>>,
}

/// The routes.
pub fn router(state: ApiState) -> Router {
    Router::new()
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics))
        .route("/v1/status", get(status))
        .route("/v1/instances", get(instances))
        .route("/v1/plan", get(plan))
        .route("/v1/audit", get(audit))
        .route("/v1/overrides", get(overrides).post(create_override))
        .route("/v1/migrations", get(migrations))
        .route("/v1/overrides/{id}", delete(revoke_override))
        .route("/v1/tick", post(tick))
        .fallback(|| async { ApiError::new(StatusCode::NOT_FOUND, "no such route") })
        .with_state(state)
}

/// An error response: a status and a JSON body saying what is wrong.
#[derive(Debug)]
pub struct ApiError {
    status: StatusCode,
    message: String,
}

impl ApiError {
    fn new(status: StatusCode, message: impl Into<String>) -> Self {
        ApiError {
            status,
            message: message.into(),
        }
    }

    fn bad_request(message: impl Into<String>) -> Self {
        ApiError::new(StatusCode::BAD_REQUEST, message)
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        #[derive(Serialize)]
        struct Body {
            error: String,
        }
        let mut response = (
            self.status,
            Json(Body {
                error: self.message,
            }),
        )
            .into_response();
        if self.status == StatusCode::UNAUTHORIZED {
            response.headers_mut().insert(
                header::WWW_AUTHENTICATE,
                "Bearer".parse().expect("a valid header"),
            );
        }
        response
    }
}

impl From<StoreError> for ApiError {
    fn from(err: StoreError) -> Self {
        match err {
            StoreError::NoSuchOverride(_) => ApiError::new(StatusCode::NOT_FOUND, err.to_string()),
            err => {
                tracing::error!("API request failed: {err}");
                ApiError::new(StatusCode::SERVICE_UNAVAILABLE, err.to_string())
            }
        }
    }
}

impl From<JsonRejection> for ApiError {
    fn from(err: JsonRejection) -> Self {
        ApiError::bad_request(format!(
            "the body is not what was expected: {}",
            err.body_text()
        ))
    }
}

impl From<QueryRejection> for ApiError {
    fn from(err: QueryRejection) -> Self {
        ApiError::bad_request(err.body_text())
    }
}

impl From<PathRejection> for ApiError {
    fn from(err: PathRejection) -> Self {
        ApiError::bad_request(err.body_text())
    }
}

type ApiResult<T> = Result<T, ApiError>;

/// Liveness: `ok` while the process answers and its tick loop is not stuck (see
/// [`Control::stuck`]); 503 with why when it is, so that the platform restarts it. A follower
/// does not tick and is never stuck.
async fn healthz(State(state): State<ApiState>) -> (StatusCode, String) {
    match state.control.stuck() {
        None => (StatusCode::OK, "ok\n".to_string()),
        Some(why) => {
            tracing::error!("the tick loop is stuck: {why}");
            (
                StatusCode::SERVICE_UNAVAILABLE,
                format!("the tick loop is stuck: {why}\n"),
            )
        }
    }
}

/// Whether this replica can do its job: the database answers, a valid policy set is loaded,
/// and, when it leads, its ticks keep up; and its role.
#[derive(Debug, Serialize)]
struct Readiness {
    ready: bool,
    database: String,
    /// `ok`, or why the leader's ticks do not keep up.
    ticks: String,
    policies: PolicyStatus,
    role: &'static str,
    last_tick: Option<DateTime<Utc>>,
}

#[derive(Debug, Serialize)]
struct PolicyStatus {
    /// The version acted on: the files', or the last valid set's when they are invalid.
    version: Option<String>,
    /// Why the files as they are cannot be used.
    error: Option<String>,
}

async fn readyz(State(state): State<ApiState>) -> (StatusCode, Json<Readiness>) {
    let database = match tokio::time::timeout(
        DATABASE_CHECK,
        sqlx::query("SELECT 1").execute(state.store.pool()),
    )
    .await
    {
        Ok(Ok(_)) => "ok".to_string(),
        Ok(Err(err)) => err.to_string(),
        Err(_) => format!("no answer within {}s", DATABASE_CHECK.as_secs()),
    };
    let policies = match state.policies.current().await {
        Ok(loaded) => PolicyStatus {
            version: Some(loaded.set.version.to_string()),
            error: loaded.error,
        },
        Err(err) => PolicyStatus {
            version: None,
            error: Some(err.to_string()),
        },
    };
    let ticks = state
        .control
        .ticks_behind()
        .unwrap_or_else(|| "ok".to_string());
    let ready = database == "ok" && policies.version.is_some() && ticks == "ok";
    let readiness = Readiness {
        ready,
        database,
        ticks,
        policies,
        role: role(&state.control),
        last_tick: state.control.last_tick(),
    };
    let status = if ready {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    (status, Json(readiness))
}

/// What this replica's background tasks are doing.
#[derive(Debug, Serialize)]
struct Status {
    role: &'static str,
    last_tick: Option<DateTime<Utc>>,
    tasks: std::collections::BTreeMap<&'static str, TaskStatus>,
}

/// `GET /v1/status`: this replica's role, its last tick, and each background task's last
/// activation.
async fn status(State(state): State<ApiState>) -> Json<Status> {
    Json(Status {
        role: role(&state.control),
        last_tick: state.control.last_tick(),
        tasks: state.control.tasks.statuses(),
    })
}

fn role(control: &Control) -> &'static str {
    if control.is_leader() {
        "leader"
    } else {
        "follower"
    }
}

async fn metrics(State(state): State<ApiState>) -> impl IntoResponse {
    (
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        state.control.metrics.encode(),
    )
}

/// `GET /v1/instances` parameters.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct InstancesQuery {
    /// Also instances the cloud no longer lists.
    #[serde(default)]
    gone: bool,
}

async fn instances(
    State(state): State<ApiState>,
    query: Result<Query<InstancesQuery>, QueryRejection>,
) -> ApiResult<Json<Vec<InstanceRecord>>> {
    let Query(query) = query?;
    Ok(Json(state.store.instances(query.gone).await?))
}

async fn plan(State(state): State<ApiState>) -> ApiResult<Json<Vec<PlannedAction>>> {
    Ok(Json(state.store.plan().await?))
}

/// `GET /v1/audit` parameters: the filters of `ebb audit`, and a limit.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct AuditQuery {
    since: Option<String>,
    until: Option<String>,
    instance: Option<String>,
    policy: Option<String>,
    action: Option<String>,
    outcome: Option<String>,
    limit: Option<i64>,
}

async fn audit(
    State(state): State<ApiState>,
    query: Result<Query<AuditQuery>, QueryRejection>,
) -> ApiResult<Response> {
    let Query(q) = query?;
    let now = state.clock.now();
    let instant = |name: &str, v: Option<String>| {
        v.map(|v| {
            when::parse_past(&v, now).map_err(|e| ApiError::bad_request(format!("{name}: {e}")))
        })
        .transpose()
    };
    let outcome = q
        .outcome
        .map(|o| {
            Outcome::parse(&o).ok_or_else(|| {
                ApiError::bad_request(format!(
                    "outcome: \"{o}\" is not one of intent, succeeded, failed, skipped"
                ))
            })
        })
        .transpose()?;
    let limit = q.limit.unwrap_or(AUDIT_LIMIT.0);
    if !(1..=AUDIT_LIMIT.1).contains(&limit) {
        return Err(ApiError::bad_request(format!(
            "limit: {limit} is not between 1 and {}",
            AUDIT_LIMIT.1
        )));
    }
    let filter = AuditFilter {
        since: instant("since", q.since)?,
        until: instant("until", q.until)?,
        instance: q.instance,
        policy: q.policy,
        action: q.action,
        outcome,
        limit: Some(limit),
    };
    let rows = state.store.audit(&filter).await?;
    Ok((
        [(header::CONTENT_TYPE, "application/json")],
        output::audit_json(&rows),
    )
        .into_response())
}

async fn overrides(State(state): State<ApiState>) -> ApiResult<Json<Vec<OverrideRecord>>> {
    Ok(Json(state.store.active_overrides(state.clock.now()).await?))
}

/// `GET /v1/migrations`: every spot migration, as `ebb migrations --format json` prints it.
async fn migrations(State(state): State<ApiState>) -> ApiResult<Response> {
    let list = state.store.migrations().await?;
    let body = output::migrations_json(&list, state.clock.now());
    Ok(([(header::CONTENT_TYPE, "application/json")], body).into_response())
}

/// `POST /v1/overrides` body.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct NewOverride {
    /// The instance to keep.
    instance: String,
    /// An RFC 3339 time, or a duration from now (`4h`).
    until: String,
    /// Why; recorded in the audit log.
    reason: String,
}

async fn create_override(
    State(state): State<ApiState>,
    Caller(actor): Caller,
    body: Result<Json<NewOverride>, JsonRejection>,
) -> ApiResult<(StatusCode, Json<OverrideRecord>)> {
    let Json(body) = body?;
    let now = state.clock.now();
    let until = when::parse_future(&body.until, now)
        .map_err(|e| ApiError::bad_request(format!("until: {e}")))?;
    let request = OverrideRequest::new(&body.instance, until, &body.reason, now)
        .map_err(|refused| ApiError::bad_request(refused.to_string()))?;
    let record = state
        .store
        .create_override(
            &request.instance,
            request.until,
            &request.reason,
            &actor,
            now,
        )
        .await?;
    publish_checkpoint(&state);
    Ok((StatusCode::CREATED, Json(record)))
}

/// Checkpoints the rows a change appended, apart from the request: the answer never waits on
/// the checkpoint store.
fn publish_checkpoint(state: &ApiState) {
    if let Some(publisher) = state.checkpoints.clone() {
        let (store, now) = (state.store.clone(), state.clock.now());
        tokio::spawn(async move { publisher.publish(&store, now).await });
    }
}

async fn revoke_override(
    State(state): State<ApiState>,
    Caller(actor): Caller,
    id: Result<Path<i64>, PathRejection>,
) -> ApiResult<Json<OverrideRecord>> {
    let Path(id) = id?;
    let record = state
        .store
        .revoke_override(id, &actor, state.clock.now())
        .await?;
    publish_checkpoint(&state);
    Ok(Json(record))
}

/// Asks the leader, on whichever replica, for a tick now.
async fn tick(State(state): State<ApiState>, Caller(actor): Caller) -> ApiResult<StatusCode> {
    tracing::info!(actor, "tick requested through the API");
    state.store.wake_leader().await?;
    Ok(StatusCode::ACCEPTED)
}
