//! `GET /v1/budgets`: where each budget stands, as `ebb budgets --format json` says; and
//! `POST /v1/budgets/{name}/raises`: a raise of a budget's amount until a time, on record. It
//! takes the `admin` scope (a raise lets every box the budget matches spend more) and one
//! change of its token's budget of changes, is checked as `ebb budgets raise` checks it
//! (`budget::raise`), audited, and checkpointed when configured.

use super::overrides::{publish_checkpoint, spend_change};
use super::{ApiError, ApiResult, ApiState, Caller, Scope};
use crate::budget::{self, RaiseBy, StandingRow};
use crate::policy::LoadedPolicies;
use crate::when;
use axum::extract::rejection::{JsonRejection, PathRejection};
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::Json;
use chrono::{DateTime, SecondsFormat, Utc};
use serde::{Deserialize, Serialize};

/// `GET /v1/budgets`: each budget's standing in its period, from what the store recorded.
pub(super) async fn list(State(state): State<ApiState>) -> ApiResult<Json<Vec<StandingRow>>> {
    let loaded = policies(&state).await?;
    let now = state.clock.now();
    let prices = state.quoted_prices().await?;
    let stood = state
        .store
        .budget_standings(&loaded.set, now, state.cloud, &prices)
        .await?;
    let rows = stood.map_or_else(Vec::new, |(standings, _)| {
        let row = |s: &budget::Standing| s.row(budget::at_limit_of(&loaded.set, s));
        standings.iter().map(row).collect()
    });
    Ok(Json(rows))
}

/// The body.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct NewRaise {
    /// The value of the budget's `per` tag to raise; every value's without it.
    #[serde(default)]
    per: Option<String>,
    /// `20%` (of the amount the policy files give) or `500` (in the budget's currency).
    by: String,
    /// An RFC 3339 time, or a duration from now (`3d`).
    until: String,
    /// Why; recorded in the audit log.
    reason: String,
}

/// The raise made.
#[derive(Debug, Serialize)]
pub(super) struct RaiseMade {
    id: i64,
    budget: String,
    per: Option<String>,
    by: String,
    until: DateTime<Utc>,
    made_by: String,
    reason: String,
}

pub(super) async fn create(
    State(state): State<ApiState>,
    caller: Caller,
    name: Result<Path<String>, PathRejection>,
    body: Result<Json<NewRaise>, JsonRejection>,
) -> ApiResult<(StatusCode, Json<RaiseMade>)> {
    // The scope first: a caller who may not raise learns nothing from the body.
    let actor = caller.with(Scope::Admin)?;
    let Path(name) = name?;
    let Json(body) = body?;
    let now = state.clock.now();
    let by = RaiseBy::parse(&body.by).map_err(|e| ApiError::bad_request(format!("by: {e}")))?;
    let until = when::parse_future(&body.until, now)
        .map_err(|e| ApiError::bad_request(format!("until: {e}")))?;
    let loaded = policies(&state).await?;
    let raise = budget::raise(
        &loaded.set,
        &name,
        body.per,
        by,
        until,
        &body.reason,
        &actor,
        now,
    )
    .map_err(ApiError::bad_request)?;
    spend_change(&state, &format!("token {actor}"))?;
    let id = state.store.raise_budget(&raise).await?;
    publish_checkpoint(&state);
    let by = match raise.by {
        RaiseBy::Percent(p) => format!("{p}%"),
        RaiseBy::Amount(a) => a.to_string(),
    };
    tracing::info!(
        budget = %raise.budget,
        by,
        until = %raise.until.to_rfc3339_opts(SecondsFormat::Secs, true),
        actor,
        "budget raised"
    );
    Ok((
        StatusCode::CREATED,
        Json(RaiseMade {
            id,
            budget: raise.budget,
            per: raise.key,
            by,
            until: raise.until,
            made_by: raise.by_whom,
            reason: raise.reason,
        }),
    ))
}

/// The policy set in force: 503 when none is valid.
async fn policies(state: &ApiState) -> ApiResult<LoadedPolicies> {
    crate::policies::current(&state.policies)
        .await
        .map_err(|e| {
            ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                format!("no valid policy set is loaded: {e}"),
            )
        })
}
