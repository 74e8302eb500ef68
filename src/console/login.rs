//! `/login` and `/logout`: a browser logs in with one of `EBB_API_TOKENS`, whose name then
//! becomes the audit actor of the overrides it makes from the console (see [`super::session`]
//! for the server-side session, its cookie and the CSRF checks).

use super::session::{self, Session, LOGIN_COOKIE, SESSION_COOKIE};
use super::{layout, Nav, PageError};
use crate::api::{ApiState, Caller, Scope};
use axum::extract::rejection::{FormRejection, QueryRejection};
use axum::extract::{Form, Query, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{AppendHeaders, Html, IntoResponse, Redirect, Response};
use maud::{html, Markup};
use serde::Deserialize;

/// The login page's parameters.
#[derive(Debug, Default, Deserialize)]
pub(super) struct LoginQuery {
    /// The console page to return to.
    next: Option<String>,
}

/// The login form's fields; all optional so that a missing CSRF value is refused as such.
#[derive(Debug, Default, Deserialize)]
pub(super) struct LoginForm {
    #[serde(default)]
    token: String,
    #[serde(default)]
    csrf: String,
    next: Option<String>,
}

/// The logout form's fields.
#[derive(Debug, Default, Deserialize)]
pub(super) struct LogoutForm {
    #[serde(default)]
    csrf: String,
}

/// What the scopes of a login allow, for people.
pub(super) fn rights(caller: &Caller) -> &'static str {
    let s = caller.scopes;
    if s.allow(Scope::Admin) {
        "may read, make overrides and revoke anyone's"
    } else if s.allow(Scope::Override) && s.allow(Scope::Read) {
        "may read, make overrides and revoke its own"
    } else if s.allow(Scope::Override) {
        "may make overrides and revoke its own, but not read"
    } else if s.allow(Scope::Read) {
        "may read only"
    } else {
        "may do nothing"
    }
}

/// `GET /login`: the form, with a fresh CSRF value in its own cookie.
pub(super) async fn page(
    State(state): State<ApiState>,
    headers: HeaderMap,
    query: Result<Query<LoginQuery>, QueryRejection>,
) -> Response {
    // A query it cannot read is one with no page to return to.
    let Query(query) = query.unwrap_or_default();
    let next = session::local_path(query.next.as_deref());
    let session = match Session::of(&headers, &state).await {
        Ok(session) => session,
        Err(err) => return err.into_response(),
    };
    login_page(
        &state,
        &headers,
        StatusCode::OK,
        &next,
        session.as_ref(),
        None,
    )
}

/// The login page with `problem` above the form, and a new login cookie.
fn login_page(
    state: &ApiState,
    headers: &HeaderMap,
    status: StatusCode,
    next: &str,
    session: Option<&Session>,
    problem: Option<&str>,
) -> Response {
    // The value of an earlier login page, so that two open ones both work.
    let nonce = session::cookie(headers, LOGIN_COOKIE)
        .filter(|v| session::is_random_value(v))
        .map_or_else(session::random_value, str::to_string);
    let body = html! {
        @if let Some(problem) = problem { p.problem role="alert" { (problem) } }
        @if let Some(s) = session {
            p role="status" {
                "You are logged in as " strong { (s.caller.name) } ", whose token "
                (rights(&s.caller)) "."
            }
            (logout_form(s))
            h2 { "Log in with another token" }
        }
        @if state.tokens.is_empty() {
            p.problem {
                "This ebb has no API tokens, so no one can log in: set EBB_API_TOKENS=name:token \
                 (see docs/settings.md) and restart it."
            }
        }
        (login_form(&nonce, next))
        p.note {
            "The token is one of EBB_API_TOKENS. It is not kept in your browser: a login lasts "
            (session::SESSION_HOURS) " hours, or until you log out, in a cookie that no script \
             and no other site can read; the name of the token is recorded as the author of \
             each override you make."
        }
    };
    let page = layout("Log in", Nav::Other, body).into_string();
    let cookie = session::set_cookie(LOGIN_COOKIE, &nonce, 3600, headers, state);
    (status, [(header::SET_COOKIE, cookie)], Html(page)).into_response()
}

fn login_form(nonce: &str, next: &str) -> Markup {
    html! {
        form.filters.login method="post" action="/login" {
            input type="hidden" name="csrf" value=(nonce);
            input type="hidden" name="next" value=(next);
            div.field {
                label for="token" { "API token" }
                input #token name="token" type="password" required autocomplete="current-password"
                    aria-describedby="token-hint";
                span.note #token-hint { "At least 16 characters, as given in EBB_API_TOKENS." }
            }
            button type="submit" { "Log in" }
        }
    }
}

/// The logout button of `session`.
pub(super) fn logout_form(session: &Session) -> Markup {
    html! {
        form.inline method="post" action="/logout" {
            input type="hidden" name="csrf" value=(session.csrf);
            button.secondary type="submit" { "Log out " (session.caller.name) }
        }
    }
}

/// `POST /login`: with the form's CSRF value matching its cookie and a known token, starts a
/// session and returns to the page the browser came from.
pub(super) async fn login(
    State(state): State<ApiState>,
    headers: HeaderMap,
    form: Result<Form<LoginForm>, FormRejection>,
) -> Response {
    // A body that is not the form's carries no CSRF value either.
    let csrf = form.as_ref().map_or("", |Form(f)| f.csrf.as_str());
    let expected = session::cookie(&headers, LOGIN_COOKIE).unwrap_or_default();
    if expected.is_empty() || !session::same(expected, csrf) {
        return PageError::new(
            StatusCode::FORBIDDEN,
            "This login form did not come from this console, or your browser did not keep its \
             cookie. Open the login page again and log in from there.",
        )
        .into_response();
    }
    let Ok(Form(form)) = form else {
        return forbidden_form().into_response();
    };
    let next = session::local_path(form.next.as_deref());
    let token = form.token.trim();
    if Caller::of_token(token, &state.tokens).is_none() {
        tracing::warn!("console login with an unknown token refused");
        let problem = "That token is not one of this ebb's API tokens (EBB_API_TOKENS). Check it \
                       and try again.";
        let session = match Session::of(&headers, &state).await {
            Ok(session) => session,
            Err(err) => return err.into_response(),
        };
        return login_page(
            &state,
            &headers,
            StatusCode::UNAUTHORIZED,
            &next,
            session.as_ref(),
            Some(problem),
        );
    }
    let started = match Session::start(token, &headers, &state).await {
        Ok(cookie) => cookie,
        Err(err) => return PageError::from(err).into_response(),
    };
    let cookies = [
        (header::SET_COOKIE, started),
        (
            header::SET_COOKIE,
            session::set_cookie(LOGIN_COOKIE, "", 0, &headers, &state),
        ),
    ];
    // Appended: an array of headers would keep only the last cookie.
    (AppendHeaders(cookies), Redirect::to(&next)).into_response()
}

/// `POST /logout`: ends the session on the server (with the login's CSRF token), forgets its
/// cookie and shows the login page.
pub(super) async fn logout(
    State(state): State<ApiState>,
    headers: HeaderMap,
    form: Result<Form<LogoutForm>, FormRejection>,
) -> Response {
    let csrf = form.map(|Form(f)| f.csrf).unwrap_or_default();
    let session = match Session::of(&headers, &state).await {
        Ok(session) => session,
        Err(err) => return err.into_response(),
    };
    if let Some(session) = session {
        if !session.accepts(&csrf) {
            return forbidden_form().into_response();
        }
        if let Err(err) = session.end(&state).await {
            return PageError::from(err).into_response();
        }
    }
    let gone = session::set_cookie(SESSION_COOKIE, "", 0, &headers, &state);
    ([(header::SET_COOKIE, gone)], Redirect::to("/login")).into_response()
}

/// The refusal of a form whose CSRF token is missing or wrong.
pub(super) fn forbidden_form() -> PageError {
    PageError::new(
        StatusCode::FORBIDDEN,
        "This form did not come from this console's page for your login, so nothing was \
         changed. Reload the page and try again.",
    )
}
