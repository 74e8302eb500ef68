//! The instance page's reclaim section: a box reclaimed after a long stop (`stopped.
//! reclaim_after`), its image, and the button that asks for it back. The button's post goes
//! through the API's code path ([`api::ask_restore`]): the same scope, budget of changes,
//! checks and audit row as `POST /v1/instances/{id}/restore`.

use super::form_post::checked;
use super::login::forbidden_form;
use super::session::Session;
use super::{instance_path, time, PageError};
use crate::api::{self, ApiState};
use crate::store::{ReclaimRecord, ReclaimState};
use axum::extract::rejection::{FormRejection, PathRejection};
use axum::extract::{Form, Path, State};
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Redirect, Response};
use maud::{html, Markup};
use serde::Deserialize;

/// The restore button's one field.
#[derive(Debug, Default, Deserialize)]
pub(super) struct RestoreForm {
    #[serde(default)]
    csrf: String,
}

/// The section, when ebb ever planned a reclaim of the box: its state, image and what came of
/// it, and, for a login with the `override` scope, the restore button while it waits for one.
pub(super) fn section(reclaim: Option<&ReclaimRecord>, session: Option<&Session>) -> Markup {
    let Some(r) = reclaim else {
        return html! {};
    };
    let waiting = r.state == ReclaimState::Reclaimed && r.restore_asked_at.is_none();
    html! {
        section aria-labelledby="reclaim" {
            h2 #reclaim { "Reclaim" }
            dl.facts {
                dt { "State" } dd { span.state { (r.state.as_str()) } " since " (time(r.state_since)) }
                dt { "Stopped since" } dd { (time(r.stopped_since)) }
                dt { "Due" } dd { (time(r.due_at)) }
                @if let Some(image) = &r.image {
                    dt { "Image" } dd {
                        code { (image) } ", kept by ebb"
                        @if let Some(volumes) = &r.image_volumes {
                            ", holding " (volumes.iter().map(|v| v.size_gib).sum::<u64>()) " GiB of its volumes"
                        }
                    }
                }
                @if let Some(by) = &r.restore_asked_by { dt { "Restore asked by" } dd { (by) } }
                @if let Some(id) = &r.restored_as { dt { "Restored as" } dd { a href=(instance_path(id)) { (id) } } }
                @if let Some(why) = &r.error { dt { "Why" } dd { (why) } }
            }
            @if let Some(s) = session.filter(|s| waiting && s.may_override()) {
                form.inline method="post" action=(format!("{}/restore", instance_path(&r.instance))) {
                    input type="hidden" name="csrf" value=(s.csrf);
                    button type="submit" { "Restore it from its image" }
                }
            }
        }
    }
}

/// `POST /instances/{id}/restore`: asks for the box back, then shows its page again.
pub(super) async fn restore(
    State(state): State<ApiState>,
    headers: HeaderMap,
    id: Result<Path<String>, PathRejection>,
    form: Result<Form<RestoreForm>, FormRejection>,
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
    match api::ask_restore(&state, session.caller.clone(), &id).await {
        Ok(_) => Redirect::to(&format!("{back}#reclaim")).into_response(),
        Err(err) => PageError::new(err.status(), err.message()).into_response(),
    }
}
