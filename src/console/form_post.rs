//! The checks of a console form's post before its fields are looked at: a login, and the
//! login's CSRF token in the form.

use super::login::forbidden_form;
use super::session::Session;
use super::PageError;
use crate::api::ApiState;
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Redirect, Response};

/// Why a form's post is not acted on before its fields are looked at.
pub(super) enum Refused {
    /// No login: it is sent to log in, then back to this path.
    NoLogin(String),
    /// The CSRF token is missing or not the login's.
    Forged,
    /// The login could not be looked up.
    Failed(PageError),
}

impl IntoResponse for Refused {
    fn into_response(self) -> Response {
        match self {
            Refused::NoLogin(back) => {
                let to = format!("/login{}", super::query_string(&[("next", Some(&back))]));
                Redirect::to(&to).into_response()
            }
            Refused::Forged => forbidden_form().into_response(),
            Refused::Failed(err) => err.into_response(),
        }
    }
}

/// The logged-in caller of a form post whose CSRF token is right.
pub(super) async fn checked(
    headers: &HeaderMap,
    state: &ApiState,
    csrf: &str,
    back: &str,
) -> Result<Session, Refused> {
    let found = Session::of(headers, state).await.map_err(Refused::Failed)?;
    let Some(session) = found else {
        return Err(Refused::NoLogin(back.to_string()));
    };
    if !session.accepts(csrf) {
        tracing::warn!(
            actor = session.caller.name,
            "console form with a wrong CSRF token refused"
        );
        return Err(Refused::Forged);
    }
    Ok(session)
}
