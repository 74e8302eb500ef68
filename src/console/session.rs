//! Who is logged in to the console, and the checks every form's POST passes.
//!
//! Logging in makes a server-side session: a random id (256 bits) in a cookie (`ebb_session`),
//! `HttpOnly` (no script reads it), `SameSite=Strict` (no other site's page sends it), `Path=/`,
//! for [`SESSION_HOURS`]; `Secure` when the request came through a proxy over HTTPS
//! (`X-Forwarded-Proto: https`, `Forwarded: proto=https`) or `EBB_CONSOLE_SECURE_COOKIES` says
//! so. The database keeps the id's hash, the login's binding to its token
//! ([`crate::api::session_binding`]) and its expiry (`console_sessions`), so a login holds
//! whichever replica answers, ends at logout (a copied cookie is then worth nothing), at its
//! expiry, or when its token leaves `EBB_API_TOKENS`. The token itself never leaves the login
//! form.
//!
//! Each form carries a CSRF token checked before anything else: for a logged-in form, a hash
//! of the session id (a page of another site can neither read the cookie nor this page, and
//! the hash does not give the id away); for the login form, which has no login yet, a random
//! value also kept in a cookie of its own (`ebb_login`, the double-submit pattern).

use super::PageError;
use crate::api::{session_binding, ApiState, Caller, Scope};
use crate::store::StoreError;
use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Redirect, Response};
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use rand_core::RngCore as _;
use sha2::{Digest, Sha256};

/// The cookie that holds the login's session id.
pub(super) const SESSION_COOKIE: &str = "ebb_session";

/// The cookie that holds the login form's CSRF value.
pub(super) const LOGIN_COOKIE: &str = "ebb_login";

/// How long a login lasts.
pub(super) const SESSION_HOURS: i64 = 8;

/// A logged-in browser: whose token it logged in with, and the CSRF token of its forms.
#[derive(Debug, Clone)]
pub(super) struct Session {
    /// The session id, from the cookie.
    id: String,
    /// The token's name and scopes.
    pub caller: Caller,
    /// What each of its forms must carry.
    pub csrf: String,
}

impl Session {
    /// The session of the request with `headers`: its cookie holds the id of an unexpired
    /// login whose token is still one of the tokens.
    pub async fn of(headers: &HeaderMap, state: &ApiState) -> Result<Option<Session>, PageError> {
        let Some(id) = cookie(headers, SESSION_COOKIE).filter(|v| is_random_value(v)) else {
            return Ok(None);
        };
        let Some(binding) = state.store.console_session(&id_hash(id)).await? else {
            return Ok(None);
        };
        Ok(state.tokens.of_session(id, &binding).map(|caller| Session {
            id: id.to_string(),
            caller,
            csrf: csrf_of(id),
        }))
    }

    /// Logs in with `token` (one of the tokens): a new session, and the cookie that holds it.
    pub async fn start(
        token: &str,
        headers: &HeaderMap,
        state: &ApiState,
    ) -> Result<HeaderValue, StoreError> {
        let id = random_value();
        let lasts = chrono::Duration::hours(SESSION_HOURS);
        let binding = session_binding(&id, token);
        state
            .store
            .start_console_session(&id_hash(&id), &binding, lasts)
            .await?;
        Ok(set_cookie(
            SESSION_COOKIE,
            &id,
            SESSION_HOURS * 3600,
            headers,
            state,
        ))
    }

    /// Logs out: the session ends on the server, whoever holds its cookie.
    pub async fn end(&self, state: &ApiState) -> Result<(), StoreError> {
        state.store.end_console_session(&id_hash(&self.id)).await
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

/// The database's key of session `id`: its hash, so that the table gives no cookie away.
fn id_hash(id: &str) -> Vec<u8> {
    Sha256::digest(id.as_bytes()).to_vec()
}

/// The CSRF token of the forms of the login with session `id`.
fn csrf_of(id: &str) -> String {
    let mut hash = Sha256::new();
    hash.update(b"ebb console csrf\0");
    hash.update(id.as_bytes());
    URL_SAFE_NO_PAD.encode(hash.finalize())
}

/// A fresh random value: a session id, or the login form's CSRF value.
pub(super) fn random_value() -> String {
    let mut bytes = [0u8; 32];
    rand_core::OsRng.fill_bytes(&mut bytes);
    URL_SAFE_NO_PAD.encode(bytes)
}

/// Whether `v` looks like a [`random_value`]: anything else in a cookie is not one of ours.
pub(super) fn is_random_value(v: &str) -> bool {
    v.len() == 43
        && v.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_".contains(&b))
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

/// `next` when it is a page of this console, `/` otherwise: a login never sends the browser to
/// another site. `next` is resolved as a URL against a fixed base the way a browser would
/// resolve it, and must keep the base's origin; any control character (which browsers drop,
/// turning `/\t/evil.example` into `//evil.example`) refuses it.
pub(super) fn local_path(next: Option<&str>) -> String {
    const BASE: &str = "http://console.invalid/";
    let base = url::Url::parse(BASE).expect("the base is a URL");
    let resolved = next
        .filter(|n| n.starts_with('/') && !n.chars().any(char::is_control))
        .and_then(|n| base.join(n).ok())
        .filter(|url| url.origin() == base.origin() && url.username().is_empty());
    match resolved {
        Some(url) => url[url::Position::BeforePath..].to_string(),
        None => "/".to_string(),
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
    } else {
        match Session::of(headers, &state).await {
            Ok(Some(session)) => session.caller,
            Ok(None) => {
                let wanted = request
                    .uri()
                    .path_and_query()
                    .map_or("/", |p| p.as_str())
                    .to_string();
                let to = format!("/login{}", super::query_string(&[("next", Some(&wanted))]));
                return Redirect::to(&to).into_response();
            }
            Err(err) => return err.into_response(),
        }
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
        assert_eq!(local_path(Some("/audit?p=1#top")), "/audit?p=1#top");
        // Still a console path once a browser decodes it.
        assert_eq!(local_path(Some("/%09/evil.example")), "/%09/evil.example");
        for elsewhere in [
            None,
            Some(""),
            Some("audit"),
            Some("https://evil.example/"),
            Some("//evil.example/"),
            Some("/\\evil.example"),
            Some("/\t/evil.example"),
            Some("/\n/evil.example"),
            Some("\t//evil.example"),
            Some("/\u{7f}/evil.example"),
            Some("///evil.example"),
            Some("/\\/evil.example"),
            Some("//user@evil.example"),
        ] {
            assert_eq!(local_path(elsewhere), "/", "{elsewhere:?}");
        }
    }

    #[test]
    fn cookies_are_found_by_name_among_others() {
        let mut headers = HeaderMap::new();
        headers.append(header::COOKIE, "a=1; ebb_session=abc".parse().unwrap());
        headers.append(header::COOKIE, "ebb_login=\"xyz\"".parse().unwrap());
        assert_eq!(cookie(&headers, "ebb_session"), Some("abc"));
        assert_eq!(cookie(&headers, "ebb_login"), Some("xyz"));
        assert_eq!(cookie(&headers, "ebb"), None);
    }

    #[test]
    fn csrf_tokens_differ_by_session_and_compare_whole() {
        let (a, b) = (csrf_of(&random_value()), csrf_of(&random_value()));
        assert_ne!(a, b);
        assert!(same(&a, &a.clone()));
        assert!(!same(&a, &b) && !same(&a, &a[..10]) && !same(&a, ""));
    }
}
