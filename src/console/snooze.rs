//! The pages of a notice's snooze links (`crates/ebb-core/src/snooze.rs`): `GET /snooze/{link}` says what the
//! link will do and shows a button; only the button's `POST /snooze` makes the override, so
//! that the link unfurlers of chat apps and the scanners of mail, which fetch every URL they
//! see, change nothing.
//!
//! No login: the link's signature is the credential, and the form carries the link itself in
//! its body (a page of another site could post it only by knowing the link, which is all the
//! link's holder needs anyway). Each link is used once (`snooze_links_used`), and its
//! override goes through the API's code path ([`api::make_override_as`]): the same checks,
//! `EBB_MAX_OVERRIDE` as a cap, audit row and checkpoint, the notice's addressee its actor.

use super::{instance_link, time, Nav, PageError};
use crate::api::{self, ApiState};
use crate::snooze::{Key, Link, Refused};
use axum::extract::rejection::FormRejection;
use axum::extract::{Form, Path, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use chrono::{DateTime, SecondsFormat, Utc};
use maud::{html, Markup};
use serde::Deserialize;

/// The button's form: the link.
#[derive(Debug, Default, Deserialize)]
pub(super) struct SnoozeForm {
    #[serde(default)]
    link: String,
}

/// `GET /snooze/{link}`: what the link will do, and the button that does it. Changes nothing.
pub(super) async fn page(State(state): State<ApiState>, Path(token): Path<String>) -> Response {
    let now = state.clock.now();
    let link = match unused_link(&state, &token, now).await {
        Ok(link) => link,
        Err(err) => return not_cached(err.into_response()),
    };
    let until = until(&state, &link, now);
    let body = html! {
        p {
            "This link keeps " (instance_link(&link.instance)) " from being stopped "
            (link.keep.label()) ", until " (time(until)) ", as " strong { (link.addressee) } "."
        }
        p.note {
            "The override is recorded in the audit log with the reason “" (link.reason())
            "”; it can be revoked from the instance's page. This link works once, until "
            (time(link.expires_at)) "."
        }
        form method="post" action="/snooze" {
            input type="hidden" name="link" value=(token);
            button type="submit" { "Keep it running " (link.keep.label()) }
        }
    };
    not_cached(super::ok("Keep it running", Nav::Other, body))
}

/// `POST /snooze`: makes the link's override, once.
pub(super) async fn snooze(
    State(state): State<ApiState>,
    form: Result<Form<SnoozeForm>, FormRejection>,
) -> Response {
    let token = form.map(|Form(f)| f.link).unwrap_or_default();
    not_cached(match made(&state, &token).await {
        Ok(body) => super::ok("Kept running", Nav::Other, body),
        Err(err) => err.into_response(),
    })
}

/// Makes the override of link `token`: what the page then says.
async fn made(state: &ApiState, token: &str) -> Result<Markup, PageError> {
    let now = state.clock.now();
    let link = unused_link(state, token, now).await?;
    let id = link.id();
    if !state
        .store
        .claim_snooze_link(&id, &link.instance, link.expires_at, now)
        .await?
    {
        return Err(used());
    }
    let until = until(state, &link, now).to_rfc3339_opts(SecondsFormat::Secs, true);
    let budget = format!("the snooze links of {}", link.addressee);
    let reason = link.reason();
    let made = api::make_override_as(
        state,
        &link.addressee,
        &budget,
        &link.instance,
        &until,
        &reason,
    )
    .await;
    match made {
        Ok(record) => Ok(html! {
            p.done role="status" {
                "Override " (record.id) " made: ebb keeps " (instance_link(&record.instance))
                " from being stopped until " (time(record.until)) "."
            }
        }),
        Err(err) => {
            // Refused: the link was not spent, and may be tried again.
            state.store.release_snooze_link(&id).await?;
            let message = format!("The override was not made: {}", err.message());
            Err(PageError::new(err.status(), message))
        }
    }
}

/// The link of `token`, when ebb signed it, it has not expired at `now` and it was not used.
async fn unused_link(state: &ApiState, token: &str, now: DateTime<Utc>) -> Result<Link, PageError> {
    let seed = state.store.snooze_key_seed().await?;
    let key = Key::from_stored(&seed).ok_or_else(|| {
        PageError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "ebb's key for these links is not 32 bytes; the table snooze_key was changed by hand",
        )
    })?;
    let link = Link::verify(&key, token, now).map_err(|refused| {
        let status = match refused {
            Refused::NotSigned => StatusCode::BAD_REQUEST,
            Refused::Expired(_) => StatusCode::GONE,
        };
        PageError::new(status, format!("Nothing was changed: {refused}"))
    })?;
    if state.store.snooze_link_used(&link.id()).await?.is_some() {
        return Err(used());
    }
    Ok(link)
}

/// The refusal of a link used before.
fn used() -> PageError {
    PageError::new(
        StatusCode::GONE,
        "Nothing was changed: this link was used already; each works once. The instance's page shows the override it made.",
    )
}

/// When the link's override ends if made at `now`: what it asks, at most `EBB_MAX_OVERRIDE`.
fn until(state: &ApiState, link: &Link, now: DateTime<Utc>) -> DateTime<Utc> {
    link.keep.until(now).min(now + state.limits.max_override)
}

/// `response`, never kept by a cache: it answers for a link that works once.
fn not_cached(mut response: Response) -> Response {
    response.headers_mut().insert(
        header::CACHE_CONTROL,
        header::HeaderValue::from_static("no-store"),
    );
    response
}
