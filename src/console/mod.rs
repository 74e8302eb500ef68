//! The web console: server-rendered pages over the API's data, for people reviewing what ebb
//! did and why. `ebb serve` serves it on the API's listener; the one change it makes is overrides.
//!
//! Pages are HTML from `maud` templates compiled into the binary, styled by one stylesheet
//! served from the binary (`/console.css`): no JavaScript, nothing loaded from elsewhere, so it
//! works in an air-gapped cluster. Times are in UTC. Reads are as open as the API's; a
//! browser logs in with an API token ([`login`], [`session`]) to read private pages and, with
//! the `override` scope, to make and revoke overrides from an instance's page.

mod advice;
mod attempts;
mod audit;
mod budgets;
mod chart;
mod explain;
mod fleet;
mod form_post;
mod gpu_chart;
mod group;
mod group_chart;
mod instance;
mod login;
mod migrations;
mod mine;
mod override_forms;
mod overrides;
mod policies;
mod pools;
mod quick_keep;
mod reclaim;
mod savings;
mod scale;
mod session;
mod snooze;

use crate::api::{self, ApiState};
use crate::store::StoreError;
use axum::extract::rejection::{PathRejection, QueryRejection};
use axum::http::{header, StatusCode};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use chrono::{DateTime, SecondsFormat, Utc};
use maud::{html, Markup, DOCTYPE};

/// The stylesheet, compiled in.
const STYLESHEET: &str = include_str!("console.css");

/// The console's routes; [`crate::api::router`]'s fallback answers the rest. Its pages are
/// reads: they need a `read` token unless reads are public, and have the API's limits.
pub fn router(state: ApiState) -> Router {
    let limits = state.limits.clone();
    let pages = Router::new()
        .route("/", get(fleet::page))
        .route("/audit", get(audit::page))
        .route("/audit.csv", get(audit::csv))
        .route("/instances/{id}", get(instance::page))
        .route("/groups/{region}/{name}", get(group::page))
        .route("/migrations", get(migrations::page))
        .route("/pools", get(pools::page))
        .route("/savings", get(savings::page))
        .route("/budgets", get(budgets::page))
        .route("/policies", get(policies::page))
        .route("/advice", get(advice::page))
        .route_layer(axum::middleware::from_fn_with_state(
            state.clone(),
            session::require_read,
        ))
        .merge(forms(&state))
        .route("/console.css", get(stylesheet))
        .with_state(state);
    api::bounded(pages, &limits)
}

/// Logging in and out, the override forms (each checks its own login and CSRF token), and
/// the snooze links' page and button (the link is the credential). Logins and the snooze
/// links take from their client address's budget.
fn forms(state: &ApiState) -> Router<ApiState> {
    let attempts = Router::new()
        .route("/login", post(login::login))
        .route("/snooze/{link}", get(snooze::page))
        .route("/snooze", post(snooze::snooze))
        .route_layer(axum::middleware::from_fn_with_state(
            state.clone(),
            attempts::limit,
        ));
    Router::new()
        .route("/login", get(login::page))
        .route("/logout", post(login::logout))
        .route("/instances/{id}/overrides", post(overrides::create))
        .route("/overrides/{id}/revoke", post(overrides::revoke))
        .route("/instances/{id}/restore", post(reclaim::restore))
        .merge(attempts)
}

async fn stylesheet() -> impl IntoResponse {
    (
        [
            (header::CONTENT_TYPE, "text/css; charset=utf-8"),
            (header::CACHE_CONTROL, "max-age=300"),
        ],
        STYLESHEET,
    )
}

/// The console's pages, for the navigation bar.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Nav {
    Fleet,
    Audit,
    Migrations,
    Pools,
    Savings,
    Budgets,
    Policies,
    Advice,
    /// A page outside the bar (one instance, an error).
    Other,
}

impl Nav {
    const BAR: [(Nav, &'static str, &'static str); 8] = [
        (Nav::Fleet, "/", "Fleet"),
        (Nav::Audit, "/audit", "Audit log"),
        (Nav::Migrations, "/migrations", "Spot moves"),
        (Nav::Pools, "/pools", "Spot pools"),
        (Nav::Savings, "/savings", "Savings"),
        (Nav::Budgets, "/budgets", "Budgets"),
        (Nav::Policies, "/policies", "Policies"),
        (Nav::Advice, "/advice", "Advice"),
    ];
}

/// A whole page: the navigation bar, `title` as the heading, and `body`.
fn layout(title: &str, current: Nav, body: Markup) -> Markup {
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                title { (title) " · ebb" }
                link rel="stylesheet" href="/console.css";
            }
            body {
                a.skip href="#main" { "Skip to the content" }
                header {
                    span.brand { "ebb" }
                    nav aria-label="Console pages" {
                        ul {
                            @for (nav, href, label) in Nav::BAR {
                                li {
                                    a href=(href) aria-current=[(nav == current).then_some("page")] {
                                        (label)
                                    }
                                }
                            }
                        }
                    }
                }
                main #main {
                    h1 { (title) }
                    (body)
                }
                footer { "Times are in UTC." }
            }
        }
    }
}

/// A rendered page with status 200.
fn ok(title: &str, current: Nav, body: Markup) -> Response {
    Html(layout(title, current, body).into_string()).into_response()
}

/// A page that could not be shown: its status and what is wrong, as an HTML page.
#[derive(Debug)]
struct PageError {
    status: StatusCode,
    message: String,
}

impl PageError {
    fn new(status: StatusCode, message: impl Into<String>) -> Self {
        PageError {
            status,
            message: message.into(),
        }
    }

    fn bad_request(message: impl Into<String>) -> Self {
        PageError::new(StatusCode::BAD_REQUEST, message)
    }
}

impl IntoResponse for PageError {
    fn into_response(self) -> Response {
        let title = match self.status {
            StatusCode::NOT_FOUND => "Not found",
            StatusCode::BAD_REQUEST => "Bad request",
            _ => "Not available",
        };
        let body = html! { p.problem role="alert" { (self.message) } };
        (
            self.status,
            Html(layout(title, Nav::Other, body).into_string()),
        )
            .into_response()
    }
}

impl From<StoreError> for PageError {
    fn from(err: StoreError) -> Self {
        tracing::error!(error = %err, "console page failed");
        // The database's text is for the logs, not the page.
        PageError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "the database did not answer as expected; the error is in ebb's log",
        )
    }
}

impl From<QueryRejection> for PageError {
    fn from(err: QueryRejection) -> Self {
        PageError::bad_request(err.body_text())
    }
}

impl From<PathRejection> for PageError {
    fn from(err: PathRejection) -> Self {
        PageError::bad_request(err.body_text())
    }
}

type PageResult = Result<Response, PageError>;

/// `t` for people, in UTC, in a `<time>` element that carries the exact instant.
fn time(t: DateTime<Utc>) -> Markup {
    html! {
        time datetime=(t.to_rfc3339_opts(SecondsFormat::Secs, true)) {
            (t.format("%Y-%m-%d %H:%M:%S").to_string())
        }
    }
}

/// An instant in `zone` (the policy's, as its people read it), with UTC beside it.
fn zoned_time(t: DateTime<Utc>, zone: chrono_tz::Tz) -> Markup {
    let local = t.with_timezone(&zone);
    html! {
        time datetime=(t.to_rfc3339_opts(SecondsFormat::Secs, true)) {
            (local.format("%a %Y-%m-%d %H:%M").to_string())
        }
        " " (zone.name()) " (" (t.format("%H:%M").to_string()) " UTC)"
    }
}

/// An optional instant, or a dash.
fn maybe_time(t: Option<DateTime<Utc>>) -> Markup {
    match t {
        Some(t) => time(t),
        None => html! { "–" },
    }
}

/// A form field's value: `None` when absent or blank (an "any" choice of a filter form).
fn given(v: Option<String>) -> Option<String> {
    v.map(|v| v.trim().to_string()).filter(|v| !v.is_empty())
}

/// A query string from the given `pairs` (absent ones left out), with a leading `?` when
/// there is any.
fn query_string(pairs: &[(&str, Option<&str>)]) -> String {
    let parts: Vec<String> = pairs
        .iter()
        .filter_map(|(k, v)| v.map(|v| format!("{k}={}", percent_encode(v))))
        .collect();
    if parts.is_empty() {
        String::new()
    } else {
        format!("?{}", parts.join("&"))
    }
}

/// `text` with every byte but the unreserved characters of RFC 3986 percent-encoded.
fn percent_encode(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for b in text.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// The path of instance `id`'s page.
fn instance_path(id: &str) -> String {
    format!("/instances/{}", percent_encode(id))
}

/// The path of Auto Scaling group `name`'s page in `region`.
fn group_path(region: &str, name: &str) -> String {
    format!(
        "/groups/{}/{}",
        percent_encode(region),
        percent_encode(name)
    )
}

/// The link to instance `id`'s page.
fn instance_link(id: &str) -> Markup {
    html! { a href=(instance_path(id)) { (id) } }
}

/// A report window's field: `windows` (value, label) as "the last …", and `since` as given
/// when it is none of them.
fn window_select(windows: &[(&str, &str)], since: &str) -> Markup {
    let known_window = windows.iter().any(|(v, _)| *v == since);
    html! {
        div {
            label for="since" { "Window" }
            select #since name="since" {
                @for (value, label) in windows {
                    option value=(value) selected[*value == since] { "the last " (label) }
                }
                @if !known_window {
                    option value=(since) selected { "since " (since) }
                }
            }
        }
    }
}

/// A wide table in a region that scrolls sideways on a narrow screen (and by keyboard).
fn scroll(label: &str, table: Markup) -> Markup {
    html! {
        div.scroll role="region" aria-label=(label) tabindex="0" { (table) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query_strings_encode_what_a_url_cannot_carry() {
        assert_eq!(query_string(&[("a", None)]), "");
        assert_eq!(
            query_string(&[
                ("policy", Some("gpu & co")),
                ("state", None),
                ("p", Some("2"))
            ]),
            "?policy=gpu%20%26%20co&p=2"
        );
        assert_eq!(percent_encode("i-0é<"), "i-0%C3%A9%3C");
    }
}
