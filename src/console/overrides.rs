//! Making and revoking overrides from the instance page: the forms that a login with the
//! `override` scope sees ([`super::override_forms`]) are posted to routes that check the
//! form's CSRF token, then go through the API's own code path ([`api::make_override`],
//! [`api::revoke_override`]): the same scopes, limits, checks and audit rows as
//! `POST /v1/overrides`.

use super::form_post::checked;
use super::instance::{self, Notice};
use super::login::forbidden_form;
use super::override_forms::OverrideForm;
use super::{instance_path, PageError};
use crate::api::{self, ApiState};
use axum::extract::rejection::{FormRejection, PathRejection};
use axum::extract::{Form, Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Redirect, Response};
use serde::Deserialize;

/// A revoke button's fields.
#[derive(Debug, Default, Deserialize)]
pub(super) struct RevokeForm {
    #[serde(default)]
    csrf: String,
    /// The instance whose page the button is on, to show it again.
    #[serde(default)]
    instance: String,
}

/// `POST /instances/{id}/overrides`: makes the override, then shows the page again.
pub(super) async fn create(
    State(state): State<ApiState>,
    headers: HeaderMap,
    id: Result<Path<String>, PathRejection>,
    form: Result<Form<OverrideForm>, FormRejection>,
) -> Response {
    let (Path(id), Form(form)) = match (id, form) {
        (Ok(id), Ok(form)) => (id, form),
        (Err(err), _) => return PageError::from(err).into_response(),
        // A body that is not the form's carries no CSRF token either.
        (_, Err(_)) => return forbidden_form().into_response(),
    };
    let back = instance_path(&id);
    let session = match checked(&headers, &state, &form.csrf, &back).await {
        Ok(session) => session,
        Err(refused) => return refused.into_response(),
    };
    let made = api::make_override(
        &state,
        session.caller.clone(),
        &id,
        &form.until,
        &form.reason,
    )
    .await;
    match made {
        Ok(record) => Redirect::to(&format!("{back}?made={}#overrides", record.id)).into_response(),
        Err(err) => {
            let notice = Notice::Refused(format!("The override was not made: {}", in_words(&err)));
            instance::answer(&state, &id, Some(&session), notice, form, err.status()).await
        }
    }
}

/// `POST /overrides/{id}/revoke`: revokes the override, then shows its instance's page again.
pub(super) async fn revoke(
    State(state): State<ApiState>,
    headers: HeaderMap,
    id: Result<Path<i64>, PathRejection>,
    form: Result<Form<RevokeForm>, FormRejection>,
) -> Response {
    let (Path(id), Form(form)) = match (id, form) {
        (Ok(id), Ok(form)) => (id, form),
        (Err(err), _) => return PageError::from(err).into_response(),
        // A body that is not the form's carries no CSRF token either.
        (_, Err(_)) => return forbidden_form().into_response(),
    };
    let back = instance_path(&form.instance);
    let session = match checked(&headers, &state, &form.csrf, &back).await {
        Ok(session) => session,
        Err(refused) => return refused.into_response(),
    };
    match api::revoke_override(&state, session.caller.clone(), id).await {
        Ok(record) => {
            let page = instance_path(&record.instance);
            Redirect::to(&format!("{page}?revoked={id}#overrides")).into_response()
        }
        Err(err) => {
            let why = format!("Override {id} was not revoked: {}", in_words(&err));
            let status = err.status();
            if form.instance.is_empty() {
                return PageError::new(status, why).into_response();
            }
            let (notice, blank) = (Notice::Refused(why), OverrideForm::default());
            instance::answer(
                &state,
                &form.instance,
                Some(&session),
                notice,
                blank,
                status,
            )
            .await
        }
    }
}

/// The API's refusal, with what to do when it is about the token's rights.
fn in_words(err: &api::ApiError) -> String {
    let message = err.message();
    if err.status() == StatusCode::FORBIDDEN
        && message.contains("scope")
        && !message.contains("admin")
    {
        format!("{message}. Log in with a token that has the override scope.")
    } else {
        message.to_string()
    }
}
