//! Who is logged in to the console, and the checks every form's POST passes.
//!
//! Logging in keeps the API token itself in a cookie (`ebb_token`, base64url), `HttpOnly` (no
//! script reads it), `SameSite=Strict` (no other site's page sends it), `Path=/`, for
//! [`SESSION_HOURS`]; `Secure` when the request came through a proxy over HTTPS
//! (`X-Forwarded-Proto: https`, `Forwarded: proto=https`) or `EBB_CONSOLE_SECURE_COOKIES` says
//! so. Every replica knows the tokens, so a login holds whichever replica answers, and
//! removing a token from `EBB_API_TOKENS` ends its logins.
//!
//! Each form carries a CSRF token checked before anything else: for a logged-in form, a hash
//! of the cookie's token (a page of another site can neither read the cookie nor this page,
//! and the hash does not give the token away); for the login form, which has no login yet, a
//! random value also kept in a cookie of its own (`ebb_login`, the double-submit pattern). A
//! value derived from the token, rather than from a random key of the process, holds on every
//! replica and across restarts.

use crate::api::{ApiState, Caller, Scope};
use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Redirect, Response};
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use rand_core::RngCore as _;
use sha2::{Digest, Sha256};

/// The cookie that holds the logged-in token.
pub(super) const TOKEN_COOKIE: &str = "ebb_token";

/// The cookie that holds the login form's CSRF value.
pub(super) const LOGIN_COOKIE: &str = "ebb_login";

/// How long a login lasts.
pub(super) const SESSION_HOURS: i64 = 8;

/// A logged-in browser: whose token it holds, and the CSRF token of its forms.
#[derive(Debug, Clone)]
pub(super) struct Session {
    /// The token's name and scopes.
    pub caller: Caller,
    /// What each of its forms must carry.
    pub csrf: String,
}

impl Session {
    /// The session of the request with `headers`: its token cookie holds one of the tokens.
    pub fn of(headers: &HeaderMap, state: &ApiState) -> Option<Session> {
        let value = cookie(headers, TOKEN_COOKIE)?;
        let token = String::from_utf8(URL_SAFE_NO_PAD.decode(value).ok()?).ok()?;
        let caller = Caller::of_token(&token, &state.tokens)?;
        Some(Session {
            caller,
            csrf: csrf_of(&token),
        })
    }

    /// Whether a form carried this session's CSRF token.
    pub fn accepts(&self, given: &str) -> bool {
        same(&self.csrf, given)
    }

    /// Whether its token may make overrides.
    pub fn may_override(&self) -> bool {
        self.caller.scopes.allow(Scope::Override)
    }
}

/// The CSRF token of the forms of a login with `token`.
fn csrf_of(token: &str) -> String {
    let mut hash = Sha256::new();
    hash.update(b"ebb console csrf\0");
    hash.update(token.as_bytes());
    URL_SAFE_NO_PAD.encode(hash.finalize())
}

/// A fresh random value for the login form.
pub(super) fn login_nonce() -> String {
    let mut bytes = [0u8; 32];
    rand_core::OsRng.fill_bytes(&mut bytes);
    URL_SAFE_NO_PAD.encode(bytes)
}

/// Whether `a` and `b` are equal, in time independent of where they differ.
pub(super) fn same(a: &str, b: &str) -> bool {
    a.len() == b.len()
        && a.bytes()
            .zip(b.bytes())
            .fold(0u8, |acc, (x, y)| acc | (x ^ y))
            == 0
}

/// The value of cookie `name` in the request's `Cookie` headers.
pub(super) fn cookie<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(k, _)| *k == name)
        .map(|(_, v)| v.trim_matches('"'))
}

/// Whether the browser reached ebb over HTTPS, as far as ebb can know: ebb itself serves plain
/// HTTP, so only a proxy in front of it that terminates TLS says so, or the setting does.
fn over_https(headers: &HeaderMap, state: &ApiState) -> bool {
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    state.limits.secure_cookies
        || header("x-forwarded-proto").is_some_and(|p| p.trim().eq_ignore_ascii_case("https"))
        || header("forwarded").is_some_and(|f| {
            f.split([';', ','])
                .any(|part| part.trim().eq_ignore_ascii_case("proto=https"))
        })
}

/// A `Set-Cookie` value: cookie `name` holding `value` for `max_age` seconds (0 removes it).
pub(super) fn set_cookie(
    name: &str,
    value: &str,
    max_age: i64,
    headers: &HeaderMap,
    state: &ApiState,
) -> HeaderValue {
    let secure = if over_https(headers, state) {
        "; Secure"
    } else {
        ""
    };
    let text =
        format!("{name}={value}; HttpOnly; SameSite=Strict; Path=/; Max-Age={max_age}{secure}");
    HeaderValue::from_str(&text).expect("cookie values are base64url")
}

/// The cookie of a login with `token`.
pub(super) fn token_cookie(token: &str, headers: &HeaderMap, state: &ApiState) -> HeaderValue {
    let value = URL_SAFE_NO_PAD.encode(token.as_bytes());
    set_cookie(TOKEN_COOKIE, &value, SESSION_HOURS * 3600, headers, state)
}

/// `next` when it is a path of this console, `/` otherwise: a login never sends the browser
/// to another site.
pub(super) fn local_path(next: Option<&str>) -> &str {
    match next {
        Some(p) if p.starts_with('/') && !p.starts_with("//") && !p.contains('\\') => p,
        _ => "/",
    }
}

/// Lets a page through when reads are public, its bearer token may read (as the API's
/// reads), or its login may; a browser with no login is sent to `/login`, and back after it.
pub(super) async fn require_read(
    State(state): State<ApiState>,
    request: Request,
    next: Next,
) -> Response {
    if state.limits.public_reads {
        return next.run(request).await;
    }
    let headers = request.headers();
    let caller = if headers.contains_key(header::AUTHORIZATION) {
        match Caller::of(headers, &state.tokens) {
            Ok(caller) => caller,
            Err(err) => return err.into_response(),
        }
    } else if let Some(session) = Session::of(headers, &state) {
        session.caller
    } else {
        let wanted = request
            .uri()
            .path_and_query()
            .map_or("/", |p| p.as_str())
            .to_string();
        let to = format!("/login{}", super::query_string(&[("next", Some(&wanted))]));
        return Redirect::to(&to).into_response();
    };
    if let Err(err) = caller.allowed(Scope::Read) {
        let message = format!(
            "{}: its pages need a token with the read scope. Log in with another token.",
            err.message()
        );
        return super::PageError::new(StatusCode::FORBIDDEN, message).into_response();
    }
    next.run(request).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_login_only_returns_to_a_path_of_the_console() {
        assert_eq!(
            local_path(Some("/instances/i-1?made=2")),
            "/instances/i-1?made=2"
        );
        for elsewhere in [
            None,
            Some("https://evil.example/"),
            Some("//evil.example/"),
            Some("/\\evil.example"),
        ] {
            assert_eq!(local_path(elsewhere), "/", "{elsewhere:?}");
        }
    }

    #[test]
    fn cookies_are_found_by_name_among_others() {
        let mut headers = HeaderMap::new();
        headers.append(header::COOKIE, "a=1; ebb_token=abc".parse().unwrap());
        headers.append(header::COOKIE, "ebb_login=\"xyz\"".parse().unwrap());
        assert_eq!(cookie(&headers, "ebb_token"), Some("abc"));
        assert_eq!(cookie(&headers, "ebb_login"), Some("xyz"));
        assert_eq!(cookie(&headers, "ebb"), None);
    }

    #[test]
    fn csrf_tokens_differ_by_token_and_compare_whole() {
        let (a, b) = (csrf_of("token-a-0123456789"), csrf_of("token-b-0123456789"));
        assert_ne!(a, b);
        assert!(same(&a, &a.clone()));
        assert!(!same(&a, &b) && !same(&a, &a[..10]) && !same(&a, ""));
    }
}
