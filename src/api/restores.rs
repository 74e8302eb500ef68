//! `POST /v1/instances/{id}/restore`: asks for a reclaimed box back, as `ebb restore` does (the
//! leader launches it from its image at its next tick). It takes the `override` scope, the one
//! for what a person asks ebb to do about their own box, and one change of its token's budget
//! of changes; audited, and checkpointed when configured.

use super::overrides::{publish_checkpoint, spend_change};
use super::{ApiError, ApiResult, ApiState, Caller, Scope};
use crate::store::ReclaimRecord;
use axum::extract::rejection::PathRejection;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::Json;
use serde::Serialize;

/// The restore asked for.
#[derive(Debug, Serialize)]
pub(super) struct RestoreAsked {
    /// The reclaim whose box comes back.
    reclaim: i64,
    /// The reclaimed instance.
    instance: String,
    /// The image it is launched from.
    image: Option<String>,
    /// Who asked.
    asked_by: String,
}

/// 202 once asked (the launch is the leader's, at its next tick); 409 when no reclaim of the
/// instance waits for a restore.
pub(super) async fn create(
    State(state): State<ApiState>,
    caller: Caller,
    id: Result<Path<String>, PathRejection>,
) -> ApiResult<(StatusCode, Json<RestoreAsked>)> {
    // The scope first: a caller who may not ask learns nothing of the instance.
    caller.allowed(Scope::Override)?;
    let Path(instance) = id?;
    let r = ask_restore(&state, caller, &instance).await?;
    Ok((
        StatusCode::ACCEPTED,
        Json(RestoreAsked {
            reclaim: r.id,
            instance: r.instance,
            image: r.image,
            asked_by: r.restore_asked_by.unwrap_or_default(),
        }),
    ))
}

/// Asks for reclaimed box `instance` back for `caller`, who needs the `override` scope (its
/// name is the audit actor): what the API's route and the console's button do. 409 when no
/// reclaim of it waits for a restore.
pub async fn ask_restore(
    state: &ApiState,
    caller: Caller,
    instance: &str,
) -> ApiResult<ReclaimRecord> {
    let actor = caller.with(Scope::Override)?;
    spend_change(state, &format!("token {actor}"))?;
    let asked = state
        .store
        .ask_restore(instance, &actor, state.clock.now())
        .await?;
    let r = asked.map_err(|why| {
        ApiError::new(
            StatusCode::CONFLICT,
            format!("cannot restore {instance}: {why}"),
        )
    })?;
    publish_checkpoint(state);
    tracing::info!(instance, reclaim = r.id, actor, "restore asked for");
    Ok(r)
}
