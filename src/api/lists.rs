//! `GET /v1/instances`, `/v1/plan` and `/v1/migrations`: lists read a page at a time, so that
//! one request's work is bounded however large the fleet or its history. A full page carries
//! the `after` of the next one in the [`NEXT_AFTER`] header.

use super::{ApiError, ApiResult, ApiState, NEXT_AFTER};
use crate::output;
use crate::store::{InstanceRecord, Page, PlannedAction};
use axum::extract::rejection::QueryRejection;
use axum::extract::{Query, State};
use axum::http::{header, HeaderValue};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Deserialize;

/// How many rows a list returns when no `limit` is given, and at most.
pub(super) const LIST_LIMIT: (i64, i64) = (1_000, 10_000);

/// `GET /v1/instances` parameters.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct InstancesQuery {
    /// Also instances the cloud no longer lists.
    #[serde(default)]
    gone: bool,
    /// The id the previous page ended with.
    after: Option<String>,
    limit: Option<i64>,
}

/// `GET /v1/plan` parameters.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct PlanQuery {
    /// The instance id the previous page ended with.
    after: Option<String>,
    limit: Option<i64>,
}

/// `GET /v1/migrations` parameters.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct MigrationsQuery {
    /// The migration id the previous page ended with.
    after: Option<i64>,
    limit: Option<i64>,
}

/// The page that `after` and `limit` ask for, or a 400 that says the bounds.
pub(super) fn page<K>(after: Option<K>, limit: Option<i64>) -> ApiResult<Page<K>> {
    let limit = limit.unwrap_or(LIST_LIMIT.0);
    if !(1..=LIST_LIMIT.1).contains(&limit) {
        return Err(ApiError::bad_request(format!(
            "limit: {limit} is not between 1 and {}",
            LIST_LIMIT.1
        )));
    }
    Ok(Page { after, limit })
}

/// `rows` as the response, with the next page's `after` when the page is full.
fn paged<T>(
    body: impl IntoResponse,
    rows: &[T],
    page_limit: i64,
    key: impl Fn(&T) -> String,
) -> Response {
    let mut response = body.into_response();
    if let (Some(last), true) = (rows.last(), rows.len() as i64 == page_limit) {
        if let Ok(value) = HeaderValue::from_str(&key(last)) {
            response.headers_mut().insert(NEXT_AFTER, value);
        }
    }
    response
}

/// A page of what the store knows of each instance.
pub(super) async fn instances(
    State(state): State<ApiState>,
    query: Result<Query<InstancesQuery>, QueryRejection>,
) -> ApiResult<Response> {
    let Query(q) = query?;
    let page = page(q.after, q.limit)?;
    let rows: Vec<InstanceRecord> = state.store.instances(q.gone, &page).await?;
    Ok(paged(Json(&rows), &rows, page.limit, |i| i.id.clone()))
}

/// A page of the leader's latest decisions.
pub(super) async fn plan(
    State(state): State<ApiState>,
    query: Result<Query<PlanQuery>, QueryRejection>,
) -> ApiResult<Response> {
    let Query(q) = query?;
    let page = page(q.after, q.limit)?;
    let rows: Vec<PlannedAction> = state.store.plan(&page).await?;
    Ok(paged(Json(&rows), &rows, page.limit, |p| {
        p.instance.clone()
    }))
}

/// A page of the spot migrations, as `ebb spot-moves --format json` prints them.
pub(super) async fn migrations(
    State(state): State<ApiState>,
    query: Result<Query<MigrationsQuery>, QueryRejection>,
) -> ApiResult<Response> {
    let Query(q) = query?;
    let page = page(q.after, q.limit)?;
    let list = state.store.migrations_page(&page).await?;
    let body = output::migrations_json(&list, state.clock.now());
    Ok(paged(
        ([(header::CONTENT_TYPE, "application/json")], body),
        &list,
        page.limit,
        |m| m.id.to_string(),
    ))
}
