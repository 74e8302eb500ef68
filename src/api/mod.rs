//! The HTTP API: health, readiness and metrics for the platform; instances, the plan and the
//! audit log for anyone; overrides and tick requests for holders of a token.
//!
//! Every replica serves it; reads come from Postgres, so a follower answers what the leader
//! did. Requests carry `Authorization: Bearer TOKEN` with a token of `EBB_API_TOKENS`; the
//! token's name becomes the audit actor and its scopes say what it may do: reads need `read`
//! (unless `EBB_API_PUBLIC_READS`), changes `override`, revoking another's override `admin`.
//! Health, readiness and metrics stay open for the platform. Bodies are capped, every request
//! has a time limit, and database errors are logged, not shown. Errors are JSON:
//! `{"error": "..."}`.

mod attempts;
mod auth;
mod budget_raises;
mod budgets;
mod heartbeat;
mod lists;
mod overrides;
mod restores;

pub use attempts::{trusted_proxy, Attempts, ATTEMPTS, REFILL};
pub use auth::{session_binding, Caller, Scope, Scopes, Tokens, TokensError};
pub use budgets::ChangeBudgets;
pub use heartbeat::HeartbeatKey;
pub use overrides::{make_override, make_override_as, revoke_override};
pub use restores::ask_restore;

use crate::checkpoint::Publisher;
use crate::clock::Clock;
use crate::cloud::PriceTable;
use crate::control::{Control, TaskStatus};
use crate::output;
use crate::policy::PolicySource;
use crate::store::{AuditFilter, Outcome, OverrideRecord, Store, StoreError, VerifiedHead};
use crate::when;
use axum::extract::rejection::{JsonRejection, PathRejection, QueryRejection};
use axum::extract::{Query, Request, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get, post};
use axum::{Json, Router};
use budgets::CHANGES_PER_MINUTE;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use std::sync::Arc;
use std::time::Duration;
use tower_http::limit::RequestBodyLimitLayer;
use tower_http::timeout::TimeoutLayer;

/// The largest request body accepted.
pub const BODY_LIMIT: usize = 16 * 1024;

/// The header of a full page of `GET /v1/audit` or of a list: the `after` of the next page.
pub const NEXT_AFTER: &str = "ebb-next-after";

/// What callers may do beyond their tokens, and how long they may take.
#[derive(Debug, Clone)]
pub struct ApiLimits {
    /// Reads (and the console) need no token.
    pub public_reads: bool,
    /// The longest an override may last.
    pub max_override: chrono::Duration,
    /// How long one request may take before it is answered 503.
    pub request_timeout: Duration,
    /// The console's login cookie is always `Secure`, not only when a proxy says the request
    /// came over HTTPS (`X-Forwarded-Proto: https`).
    pub secure_cookies: bool,
    /// The override changes one token may make at once, and again each minute after that.
    pub changes_per_minute: u32,
}

impl Default for ApiLimits {
    fn default() -> Self {
        ApiLimits {
            public_reads: false,
            max_override: chrono::Duration::days(7),
            request_timeout: Duration::from_secs(30),
            secure_cookies: false,
            changes_per_minute: CHANGES_PER_MINUTE,
        }
    }
}

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
    /// Public reads, the longest override, the time limit.
    pub limits: ApiLimits,
    /// The price table (`EBB_PRICES`) `GET /v1/report` counts stopped hours at, beneath the
    /// clouds' quotes kept in Postgres.
    pub prices: Arc<PriceTable>,
    /// The cloud the boxes are on: the currency of a budget that names none.
    pub cloud: crate::fleet::Cloud,
    /// What is left of each token's budget of override changes.
    pub change_budgets: Arc<ChangeBudgets>,
    /// What is left of each client address's budget of logins and snooze-link uses.
    pub attempts: Arc<Attempts>,
    /// How far the console's audit page found the chain intact, where its next check starts.
    pub audit_verified: Arc<VerifiedHead>,
}

/// The routes.
pub fn router(state: ApiState) -> Router {
    let reads = Router::new()
        .route("/v1/status", get(status))
        .route("/v1/instances", get(lists::instances))
        .route("/v1/plan", get(lists::plan))
        .route("/v1/audit", get(audit))
        .route("/v1/overrides", get(overrides))
        .route("/v1/migrations", get(lists::migrations))
        .route("/v1/report", get(report))
        .route("/v1/budgets", get(budget_raises::list))
        .route_layer(middleware::from_fn_with_state(state.clone(), require_read));
    let limits = state.limits.clone();
    let routes = Router::new()
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics))
        .route("/v1/overrides", post(overrides::create))
        .route("/v1/overrides/{id}", delete(overrides::revoke))
        .route("/v1/budgets/{name}/raises", post(budget_raises::create))
        .route("/v1/tick", post(tick))
        .route("/v1/instances/{id}/activity", post(heartbeat::post))
        .route("/v1/instances/{id}/restore", post(restores::create))
        .merge(reads)
        .fallback(|| async { ApiError::new(StatusCode::NOT_FOUND, "no such route") })
        .with_state(state);
    bounded(routes, &limits)
}

/// `routes` with the body cap and the time limit of every request, and the security headers
/// on every answer (a timeout's too).
pub fn bounded(routes: Router, limits: &ApiLimits) -> Router {
    routes
        .layer(RequestBodyLimitLayer::new(BODY_LIMIT))
        .layer(TimeoutLayer::with_status_code(
            StatusCode::SERVICE_UNAVAILABLE,
            limits.request_timeout,
        ))
        .layer(middleware::map_response(security_headers))
}

/// What a browser may do with an answer: the console loads its stylesheet and nothing else
/// (no script, no inline style, nothing from elsewhere), posts its forms only to itself, and is
/// never framed; no page tells another site its address; no answer's type is guessed.
pub const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; style-src 'self'; img-src 'self'; \
     form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

/// Adds the security headers to `response`.
async fn security_headers(mut response: Response) -> Response {
    let headers = response.headers_mut();
    for (name, value) in [
        (header::CONTENT_SECURITY_POLICY, CONTENT_SECURITY_POLICY),
        (header::X_FRAME_OPTIONS, "DENY"),
        (header::REFERRER_POLICY, "same-origin"),
        (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
    ] {
        headers.insert(name, HeaderValue::from_static(value));
    }
    response
}

/// Lets a read through when reads are public or its token has the `read` scope.
pub async fn require_read(
    State(state): State<ApiState>,
    request: Request,
    next: Next,
) -> Result<Response, ApiError> {
    if !state.limits.public_reads {
        Caller::of(request.headers(), &state.tokens)?.with(Scope::Read)?;
    }
    Ok(next.run(request).await)
}

/// Whether the request may see details of reads: reads are public or its token may read.
fn may_read(state: &ApiState, headers: &HeaderMap) -> bool {
    state.limits.public_reads
        || Caller::of(headers, &state.tokens).is_ok_and(|c| c.scopes.allow(Scope::Read))
}

/// An error response: a status and a JSON body saying what is wrong.
#[derive(Debug)]
pub struct ApiError {
    status: StatusCode,
    message: String,
    /// How long to wait before trying again, for a 429.
    retry_after: Option<Duration>,
}

impl ApiError {
    fn new(status: StatusCode, message: impl Into<String>) -> Self {
        ApiError {
            status,
            message: message.into(),
            retry_after: None,
        }
    }

    fn bad_request(message: impl Into<String>) -> Self {
        ApiError::new(StatusCode::BAD_REQUEST, message)
    }

    /// 429: the caller should wait `wait` before trying again (the `Retry-After` header).
    fn too_many(wait: Duration, message: impl Into<String>) -> Self {
        ApiError {
            retry_after: Some(wait),
            ..ApiError::new(StatusCode::TOO_MANY_REQUESTS, message)
        }
    }

    /// The response's status.
    pub fn status(&self) -> StatusCode {
        self.status
    }

    /// What is wrong, as the response says it.
    pub fn message(&self) -> &str {
        &self.message
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
        if let Some(wait) = self.retry_after {
            response.headers_mut().insert(
                header::RETRY_AFTER,
                HeaderValue::from(wait.as_secs().max(1)),
            );
        }
        response
    }
}

impl From<StoreError> for ApiError {
    fn from(err: StoreError) -> Self {
        match err {
            StoreError::NoSuchOverride(_) => ApiError::new(StatusCode::NOT_FOUND, err.to_string()),
            StoreError::NotYours { .. } => ApiError::new(StatusCode::FORBIDDEN, err.to_string()),
            // The database's text (names, constraints, hosts) is for the logs, not callers.
            err => {
                tracing::error!(error = %err, "API request failed");
                ApiError::new(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "the database did not answer as expected; the error is in ebb's log",
                )
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
            tracing::error!(why = %why, "the tick loop is stuck");
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

async fn readyz(
    State(state): State<ApiState>,
    headers: HeaderMap,
) -> (StatusCode, Json<Readiness>) {
    let database = match tokio::time::timeout(
        DATABASE_CHECK,
        sqlx::query("SELECT 1").execute(state.store.pool()),
    )
    .await
    {
        Ok(Ok(_)) => "ok".to_string(),
        Ok(Err(err)) => {
            tracing::error!(error = %err, "readiness: the database failed");
            "failed; the error is in ebb's log".to_string()
        }
        Err(_) => format!("no answer within {}s", DATABASE_CHECK.as_secs()),
    };
    let (version, error) = match crate::policies::current(&state.policies).await {
        Ok(loaded) => (Some(loaded.set.version.to_string()), loaded.error),
        Err(err) => (None, Some(err.to_string())),
    };
    // The files' problems name paths and contents: only for those who may read.
    let error = match error {
        Some(_) if !may_read(&state, &headers) => {
            Some("the policy files cannot be used; details need a read token".to_string())
        }
        error => error,
    };
    let policies = PolicyStatus { version, error };
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

/// What a failed activation says to a caller without the `admin` scope.
const FAILED_SUMMARY: &str = "failed; the error is in ebb's log, and here for an admin token";

/// `GET /v1/status`: this replica's role, its last tick, and each background task's last
/// activation. A failed activation's error (which may name database hosts, ARNs or policy
/// file contents) is shown whole only to an `admin` token; a URL's credentials to no one.
async fn status(State(state): State<ApiState>, headers: HeaderMap) -> Json<Status> {
    let admin = Caller::of(&headers, &state.tokens).is_ok_and(|c| c.scopes.allow(Scope::Admin));
    let mut tasks = state.control.tasks.statuses();
    for last in tasks.values_mut().filter_map(|t| t.last.as_mut()) {
        last.detail = if last.ok || admin {
            crate::cloud::redact_userinfo(&last.detail)
        } else {
            FAILED_SUMMARY.to_string()
        };
    }
    Json(Status {
        role: role(&state.control),
        last_tick: state.control.last_tick(),
        tasks,
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
    /// Rows after this `seq`, oldest first (the next page of a full one); without it, the
    /// newest rows.
    after: Option<i64>,
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
    let page = lists::page(q.after, q.limit)?;
    let filter = AuditFilter {
        since: instant("since", q.since)?,
        until: instant("until", q.until)?,
        instance: q.instance,
        policy: q.policy,
        action: q.action,
        outcome,
        limit: Some(page.limit),
        after: page.after,
    };
    let rows = state.store.audit(&filter).await?;
    let mut response = (
        [(header::CONTENT_TYPE, "application/json")],
        output::audit_json(&rows),
    )
        .into_response();
    if let (Some(last), true) = (rows.last(), rows.len() as i64 == page.limit) {
        response
            .headers_mut()
            .insert(NEXT_AFTER, HeaderValue::from(last.seq));
    }
    Ok(response)
}

async fn overrides(State(state): State<ApiState>) -> ApiResult<Json<Vec<OverrideRecord>>> {
    Ok(Json(state.store.active_overrides(state.clock.now()).await?))
}

/// `GET /v1/report` query.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReportQuery {
    /// The window's start: a duration back from now (30d, the default) or an RFC 3339 time.
    pub since: Option<String>,
    /// The window's end (default: now).
    pub until: Option<String>,
    /// A tag to group by as well.
    pub by: Option<String>,
}

impl ApiState {
    /// The price table with the clouds' quotes kept in Postgres laid over it: what every
    /// figure of money the API and the console show is priced at.
    pub(crate) async fn quoted_prices(&self) -> Result<PriceTable, StoreError> {
        self.store.quoted_table((*self.prices).clone()).await
    }

    /// What ebb saved over `window`, grouped by the tag `by` too when given, priced by the
    /// price table with the clouds' kept quotes over it: what `GET /v1/report` and the
    /// console's `/savings` show. The
    /// calculation runs on the blocking pool, not on the runtime's workers the leader's tick
    /// and the health checks need.
    pub async fn report(
        &self,
        window: crate::report::Window,
        by: Option<&str>,
    ) -> Result<crate::report::Report, StoreError> {
        let by = by
            .map(str::trim)
            .filter(|b| !b.is_empty())
            .map(str::to_string);
        // Whole past days come from their rollups, summed by the database.
        let held = &self.prices.commitments;
        let parts = self.store.report_parts(window, by.as_deref(), held).await?;
        let prices = self.quoted_prices().await?;
        let compute = move || crate::report::compute_parts(&parts, window, by.as_deref(), &prices);
        match tokio::task::spawn_blocking(compute).await {
            Ok(report) => Ok(report),
            // As if it had run here: a panic stays a panic.
            Err(err) => std::panic::resume_unwind(err.into_panic()),
        }
    }
}

/// `GET /v1/report`: what ebb saved over a window, as `ebb report --format json` prints it.
async fn report(
    State(state): State<ApiState>,
    query: Result<Query<ReportQuery>, QueryRejection>,
) -> ApiResult<Json<crate::report::Report>> {
    let Query(q) = query?;
    let since = q.since.as_deref().unwrap_or("30d");
    let window = crate::report::Window::parse(since, q.until.as_deref(), state.clock.now())
        .map_err(ApiError::bad_request)?;
    Ok(Json(state.report(window, q.by.as_deref()).await?))
}

/// Asks the leader, on whichever replica, for a tick now.
async fn tick(State(state): State<ApiState>, caller: Caller) -> ApiResult<StatusCode> {
    let actor = caller.with(Scope::Override)?;
    tracing::info!(actor, "tick requested through the API");
    state.store.wake_leader().await?;
    Ok(StatusCode::ACCEPTED)
}
