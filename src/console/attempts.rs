//! The budget of logins and snooze-link uses per client address ([`api::Attempts`]), in front
//! of `POST /login`, `GET /snooze/{link}` and `POST /snooze`: past it, 429 with when to try
//! again, before any database work or secret is checked.

use super::PageError;
use crate::api::{self, ApiState};
use axum::extract::{ConnectInfo, Request, State};
use axum::http::{header, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use std::net::SocketAddr;

/// Takes an attempt from the request's client's budget, or answers 429 when it is spent.
pub(super) async fn limit(State(state): State<ApiState>, request: Request, next: Next) -> Response {
    let peer = request
        .extensions()
        .get::<ConnectInfo<SocketAddr>>()
        .map(|c| c.0);
    match state.attempts.take(peer, request.headers()) {
        Ok(()) => next.run(request).await,
        Err(wait) => {
            let seconds = (wait.as_secs_f64().ceil() as u64).max(1);
            tracing::warn!(
                path = request.uri().path(),
                "a client has used its logins and snooze links for now; refused"
            );
            let message = format!(
                "Too many logins or snooze links from your address: {} within {} minutes. Try \
                 again in {seconds} s.",
                api::ATTEMPTS,
                api::REFILL.as_secs() / 60,
            );
            (
                [(header::RETRY_AFTER, seconds.to_string())],
                PageError::new(StatusCode::TOO_MANY_REQUESTS, message),
            )
                .into_response()
        }
    }
}
