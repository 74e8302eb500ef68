//! Making and revoking overrides from the instance page: forms that a login with the
//! `override` scope sees, posted to routes that check the form's CSRF token, then go through
//! the API's own code path ([`api::make_override`], [`api::revoke_override`]): the same
//! scopes, limits, checks and audit rows as `POST /v1/overrides`.

use super::instance::{self, Notice};
use super::login::{self, forbidden_form};
use super::session::Session;
use super::{time, PageError};
use crate::api::{self, ApiState, Scope};
use crate::store::{InstanceRecord, OverrideRecord, MAX_REASON};
use axum::extract::rejection::{FormRejection, PathRejection};
use axum::extract::{Form, Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Redirect, Response};
use chrono::{DateTime, Utc};
use maud::{html, Markup};
use serde::Deserialize;

/// The override form's fields; all optional so that a missing CSRF value is refused as such.
#[derive(Debug, Default, Clone, Deserialize)]
pub(super) struct OverrideForm {
    /// An RFC 3339 time or a duration from now.
    #[serde(default)]
    pub until: String,
    /// Why.
    #[serde(default)]
    pub reason: String,
    #[serde(default)]
    csrf: String,
}

/// A revoke button's fields.
#[derive(Debug, Default, Deserialize)]
pub(super) struct RevokeForm {
    #[serde(default)]
    csrf: String,
    /// The instance whose page the button is on, to show it again.
    #[serde(default)]
    instance: String,
}

/// Why a form's post is not acted on before its fields are looked at.
enum Refused {
    /// No login: it is sent to log in, then back to this path.
    NoLogin(String),
    /// The CSRF token is missing or not the login's.
    Forged,
}

impl IntoResponse for Refused {
    fn into_response(self) -> Response {
        match self {
            Refused::NoLogin(back) => {
                let to = format!("/login{}", super::query_string(&[("next", Some(&back))]));
                Redirect::to(&to).into_response()
            }
            Refused::Forged => forbidden_form().into_response(),
        }
    }
}

/// The logged-in caller of a form post whose CSRF token is right.
fn checked(
    headers: &HeaderMap,
    state: &ApiState,
    csrf: &str,
    back: &str,
) -> Result<Session, Refused> {
    let Some(session) = Session::of(headers, state) else {
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
    let back = instance::path(&id);
    let session = match checked(&headers, &state, &form.csrf, &back) {
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
    let back = instance::path(&form.instance);
    let session = match checked(&headers, &state, &form.csrf, &back) {
        Ok(session) => session,
        Err(refused) => return refused.into_response(),
    };
    match api::revoke_override(&state, session.caller.clone(), id).await {
        Ok(record) => {
            let page = instance::path(&record.instance);
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

/// `d` as people say it: "7 days", "12 hours", "90 minutes".
fn for_people(d: chrono::Duration) -> String {
    let minutes = d.num_minutes();
    let (n, unit) = match minutes {
        m if m % 1440 == 0 => (m / 1440, "day"),
        m if m % 60 == 0 => (m / 60, "hour"),
        m => (m, "minute"),
    };
    format!("{n} {unit}{}", if n == 1 { "" } else { "s" })
}

/// The form that makes an override of `instance`, showing what was typed in `form`.
pub(super) fn form(instance: &str, session: &Session, form: &OverrideForm, max: &str) -> Markup {
    html! {
        form.filters.override-form method="post" action=(format!("{}/overrides", instance::path(instance))) {
            input type="hidden" name="csrf" value=(session.csrf);
            div.field {
                label for="until" { "Keep it until" }
                input #until name="until" type="text" required placeholder="4h"
                    value=(form.until) aria-describedby="until-hint";
                span.note #until-hint {
                    "A duration from now (4h, 2d) or a time (2026-12-01T18:00:00Z); at most " (max) "."
                }
            }
            div.field.wide {
                label for="reason" { "Reason" }
                textarea #reason name="reason" required rows="2" maxlength=(MAX_REASON)
                    aria-describedby="reason-hint" { (form.reason) }
                span.note #reason-hint { "Recorded in the audit log; at most " (MAX_REASON) " characters." }
            }
            button type="submit" { "Keep it" }
        }
    }
}

/// The revoke button of override `o` for `session`, when its token may revoke it.
pub(super) fn revoke_button(
    o: &OverrideRecord,
    session: Option<&Session>,
    now: DateTime<Utc>,
) -> Markup {
    let in_force = o.revoked_at.is_none() && o.until > now;
    let Some(s) = session.filter(|s| in_force && s.may_override()) else {
        return html! {};
    };
    if o.created_by != s.caller.name && !s.caller.scopes.allow(Scope::Admin) {
        return html! { span.note { "only its maker or an admin token may revoke it" } };
    }
    html! {
        form.inline method="post" action=(format!("/overrides/{}/revoke", o.id)) {
            input type="hidden" name="csrf" value=(s.csrf);
            input type="hidden" name="instance" value=(o.instance);
            button.secondary type="submit" aria-label=(format!("Revoke override {}", o.id)) { "Revoke" }
        }
    }
}

/// What the page says after a change: the override made or revoked.
pub(super) fn done(
    list: &[OverrideRecord],
    made: Option<i64>,
    revoked: Option<i64>,
) -> Option<Markup> {
    let find = |id: i64| list.iter().find(|o| o.id == id);
    let said = if let Some(o) = made.and_then(find) {
        html! { "Override " (o.id) " made: ebb keeps the instance from being stopped until " (time(o.until)) "." }
    } else {
        let o = revoked.and_then(find)?;
        html! { "Override " (o.id) " revoked." }
    };
    Some(html! { p.done role="status" { (said) } })
}

/// Below the overrides: the form for a login that may make one, or how to get one.
pub(super) fn controls(
    instance: &InstanceRecord,
    session: Option<&Session>,
    typed: &OverrideForm,
    max: chrono::Duration,
) -> Markup {
    let back = instance::path(&instance.id);
    let max = for_people(max);
    html! {
        @match session {
            Some(s) if s.may_override() && instance.gone_at.is_none() => {
                h3 { "Keep it from being stopped" }
                (form(&instance.id, s, typed, &max))
            }
            Some(s) if s.may_override() => {
                p.note { "The cloud no longer lists it, so no override can be made." }
            }
            Some(s) => {
                p.note {
                    "The token " (s.caller.name) " " (login::rights(&s.caller))
                    ": making or revoking overrides needs a token with the override scope."
                }
            }
            None => {
                p.note {
                    a href=(format!("/login{}", super::query_string(&[("next", Some(&back))]))) { "Log in" }
                    " with a token that has the override scope to make or revoke overrides."
                }
            }
        }
        @if let Some(s) = session {
            div.session { "Logged in as " strong { (s.caller.name) } ". " (login::logout_form(s)) }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_longest_override_reads_as_people_say_it() {
        let said = |minutes| for_people(chrono::Duration::minutes(minutes));
        assert_eq!(said(7 * 1440), "7 days");
        assert_eq!(said(1440), "1 day");
        assert_eq!(said(12 * 60), "12 hours");
        assert_eq!(said(90), "90 minutes");
    }
}
