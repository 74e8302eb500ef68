//! Making and revoking overrides: the one code path of `POST /v1/overrides`,
//! `DELETE /v1/overrides/{id}` and the console's forms, so that both keep the same rules (the
//! scopes, a budget of changes per token, `EBB_MAX_OVERRIDE`, the reason's length, a known
//! instance, an audit row for each change, a checkpoint after it).

use super::{ApiError, ApiResult, ApiState, Caller, Scope};
use crate::store::OverrideRecord;
use crate::when;
use axum::extract::rejection::{JsonRejection, PathRejection};
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::Json;
use serde::Deserialize;

/// `POST /v1/overrides` body.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct NewOverride {
    /// The instance to keep.
    instance: String,
    /// An RFC 3339 time, or a duration from now (`4h`).
    until: String,
    /// Why; recorded in the audit log.
    reason: String,
}

pub(super) async fn create(
    State(state): State<ApiState>,
    caller: Caller,
    body: Result<Json<NewOverride>, JsonRejection>,
) -> ApiResult<(StatusCode, Json<OverrideRecord>)> {
    // The scope first: a caller who may not make overrides learns nothing from the body.
    caller.allowed(Scope::Override)?;
    let Json(body) = body?;
    let record = make_override(&state, caller, &body.instance, &body.until, &body.reason).await?;
    Ok((StatusCode::CREATED, Json(record)))
}

pub(super) async fn revoke(
    State(state): State<ApiState>,
    caller: Caller,
    id: Result<Path<i64>, PathRejection>,
) -> ApiResult<Json<OverrideRecord>> {
    caller.allowed(Scope::Override)?;
    let Path(id) = id?;
    Ok(Json(revoke_override(&state, caller, id).await?))
}

/// Keeps `instance` until `until` (an RFC 3339 time or a duration from now, `4h`) for
/// `reason`, made by `caller` (its name is the audit actor): refused unless its token has the
/// `override` scope, the instance is one ebb lists, the end is within `EBB_MAX_OVERRIDE` and
/// the reason is given in at most 500 characters. Audited, and checkpointed when configured.
pub async fn make_override(
    state: &ApiState,
    caller: Caller,
    instance: &str,
    until: &str,
    reason: &str,
) -> ApiResult<OverrideRecord> {
    let actor = caller.with(Scope::Override)?;
    let budget = format!("token {actor}");
    make_override_as(state, &actor, &budget, instance, until, reason).await
}

/// Keeps `instance` until `until` for `reason`, made by `actor` (the audit actor), taking one
/// change from the budget named `budget` ("token NAME" for a token's): [`make_override`] without a token, for a caller whose right
/// to make it was proven otherwise (a snooze link's signature). The same checks, audit row and
/// checkpoint.
pub async fn make_override_as(
    state: &ApiState,
    actor: &str,
    budget: &str,
    instance: &str,
    until: &str,
    reason: &str,
) -> ApiResult<OverrideRecord> {
    spend_change(state, budget)?;
    let now = state.clock.now();
    let until =
        when::parse_future(until, now).map_err(|e| ApiError::bad_request(format!("until: {e}")))?;
    let request = state
        .store
        .override_request(instance, until, reason, now, state.limits.max_override)
        .await?
        .map_err(|refused| ApiError::bad_request(refused.to_string()))?;
    let record = state
        .store
        .create_override(
            &request.instance,
            request.until,
            &request.reason,
            actor,
            now,
        )
        .await?;
    publish_checkpoint(state);
    Ok(record)
}

/// Ends override `id` now for `caller`: refused unless its token has the `override` scope,
/// and, for an override another token made, `admin`. Audited, and checkpointed when
/// configured.
pub async fn revoke_override(
    state: &ApiState,
    caller: Caller,
    id: i64,
) -> ApiResult<OverrideRecord> {
    let anyones = caller.scopes.allow(Scope::Admin);
    let actor = caller.with(Scope::Override)?;
    spend_change(state, &format!("token {actor}"))?;
    let record = state
        .store
        .revoke_override(id, &actor, state.clock.now(), anyones)
        .await?;
    publish_checkpoint(state);
    Ok(record)
}

/// Takes one change from the budget named `budget`: 429 with when to try again once it is
/// spent.
pub(super) fn spend_change(state: &ApiState, budget: &str) -> ApiResult<()> {
    state
        .change_budgets
        .take(&budget.to_string())
        .map_err(|wait| {
            ApiError::too_many(
                wait,
                format!(
                    "{budget} has made {} override changes within a minute; try again in {} s",
                    state.limits.changes_per_minute,
                    wait.as_secs().max(1)
                ),
            )
        })
}

/// Checkpoints the rows a change appended, apart from the request: the answer never waits on
/// the checkpoint store.
pub(super) fn publish_checkpoint(state: &ApiState) {
    if let Some(publisher) = state.checkpoints.clone() {
        let (store, now) = (state.store.clone(), state.clock.now());
        tokio::spawn(async move { publisher.publish(&store, now).await });
    }
}
