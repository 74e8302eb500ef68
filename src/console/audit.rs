//! `/audit`: the audit log, newest first, with the filters of `GET /v1/audit`, a page at a
//! time, a CSV download of what the filters select, and whether the hash chain holds.

use super::{given, instance_link, ok, query_string, scroll, time, Nav, PageError, PageResult};
use crate::api::ApiState;
use crate::output;
use crate::store::{AuditEntry, AuditFilter, Outcome, Verification};
use crate::when;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Query, State};
use axum::http::header;
use axum::response::IntoResponse;
use chrono::{DateTime, Utc};
use maud::{html, Markup};
use serde::Deserialize;

/// Rows per page.
pub(super) const PAGE: i64 = 100;

/// The rows one statement of a CSV download reads: a download holds every row the filters
/// select, read and sent a part at a time.
const CSV_PART: i64 = 1_000;

/// The audit page's parameters: `GET /v1/audit`'s filters, and the paging cursor.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct AuditQuery {
    instance: Option<String>,
    policy: Option<String>,
    action: Option<String>,
    outcome: Option<String>,
    since: Option<String>,
    until: Option<String>,
    /// Only rows older than this `seq`: the next page's cursor.
    before: Option<i64>,
}

impl AuditQuery {
    /// The query with blank fields dropped.
    fn given(self) -> AuditQuery {
        AuditQuery {
            instance: given(self.instance),
            policy: given(self.policy),
            action: given(self.action),
            outcome: given(self.outcome),
            since: given(self.since),
            until: given(self.until),
            before: self.before,
        }
    }

    /// The store's filter, or what is wrong with a field (as `GET /v1/audit` says it).
    fn filter(&self, now: DateTime<Utc>) -> Result<AuditFilter, PageError> {
        let instant = |name: &str, v: &Option<String>| {
            v.as_deref()
                .map(|v| {
                    when::parse_past(v, now)
                        .map_err(|e| PageError::bad_request(format!("{name}: {e}")))
                })
                .transpose()
        };
        let outcome = self
            .outcome
            .as_deref()
            .map(|o| {
                Outcome::parse(o).ok_or_else(|| {
                    PageError::bad_request(format!(
                        "outcome: \"{o}\" is not one of intent, succeeded, failed, skipped"
                    ))
                })
            })
            .transpose()?;
        Ok(AuditFilter {
            since: instant("since", &self.since)?,
            until: instant("until", &self.until)?,
            instance: self.instance.clone(),
            policy: self.policy.clone(),
            action: self.action.clone(),
            outcome,
            limit: None,
            after: None,
        })
    }

    /// The filters as a query string, with `before` when given.
    fn link(&self, path: &str, before: Option<i64>) -> String {
        let before = before.map(|b| b.to_string());
        format!(
            "{path}{}",
            query_string(&[
                ("instance", self.instance.as_deref()),
                ("policy", self.policy.as_deref()),
                ("action", self.action.as_deref()),
                ("outcome", self.outcome.as_deref()),
                ("since", self.since.as_deref()),
                ("until", self.until.as_deref()),
                ("before", before.as_deref()),
            ])
        )
    }
}

pub(super) async fn page(
    State(state): State<ApiState>,
    query: Result<Query<AuditQuery>, QueryRejection>,
) -> PageResult {
    let Query(q) = query?;
    let q = q.given();
    let filter = q.filter(state.clock.now())?;
    let rows = state.store.audit_page(&filter, q.before, PAGE).await?;
    // The rows appended since this replica last found the chain intact, and that head's hash:
    // a view costs the rows it has not seen, not the whole log.
    let chain = state
        .store
        .verify_audit_since(&state.audit_verified)
        .await?;
    let older = rows
        .last()
        .filter(|_| rows.len() as i64 == PAGE)
        .map(|r| r.seq);
    let body = html! {
        (chain_status(&chain))
        (form(&q))
        p.downloads {
            a href=(q.link("/audit.csv", None)) download="ebb-audit.csv" {
                "Download these rows as CSV"
            }
            " (oldest first, every row the filters select)"
        }
        @if rows.is_empty() {
            p { "No audit row matches." }
        } @else {
            (scroll("Audit rows", table(&rows, true)))
        }
        nav.pager aria-label="Pages" {
            @if q.before.is_some() { a href=(q.link("/audit", None)) { "↑ Newest rows" } }
            @if let Some(seq) = older {
                a href=(q.link("/audit", Some(seq))) rel="next" { "Older rows →" }
            }
        }
    };
    Ok(ok("Audit log", Nav::Audit, body))
}

/// `/audit.csv`: every row the filters select, oldest first, as `ebb audit --format csv`
/// writes them; sent as it is read, [`CSV_PART`] rows at a time, so that no download is held
/// in memory whole. A read that fails after the first part ends the response without its last
/// chunk: the browser reports a failed download, never a short file that looks whole.
pub(super) async fn csv(
    State(state): State<ApiState>,
    query: Result<Query<AuditQuery>, QueryRejection>,
) -> Result<axum::response::Response, PageError> {
    let Query(q) = query?;
    let q = q.given();
    let mut filter = q.filter(state.clock.now())?;
    filter.limit = Some(CSV_PART);
    filter.after = Some(0);
    // The first part before the answer's status, so that a database that does not answer
    // gives an error page.
    let first = state.store.audit(&filter).await?;
    let store = state.store.clone();
    let parts = futures_util::stream::unfold(Some((filter, Some(first), true)), move |next| {
        let store = store.clone();
        async move {
            let (mut filter, rows, header) = next?;
            let rows = match rows {
                Some(rows) => rows,
                None => match store.audit(&filter).await {
                    Ok(rows) => rows,
                    Err(err) => {
                        tracing::error!(error = %err, "the audit CSV download was cut");
                        return Some((Err(std::io::Error::other("the database failed")), None));
                    }
                },
            };
            let text = output::audit_csv_rows(&rows, header).map_err(std::io::Error::other);
            let more = rows.len() as i64 == CSV_PART && text.is_ok();
            filter.after = rows.last().map(|r| r.seq);
            Some((text, more.then_some((filter, None, false))))
        }
    });
    Ok((
        [
            (header::CONTENT_TYPE, "text/csv; charset=utf-8"),
            (
                header::CONTENT_DISPOSITION,
                "attachment; filename=\"ebb-audit.csv\"",
            ),
        ],
        axum::body::Body::from_stream(parts),
    )
        .into_response())
}

/// Whether the hash chain holds: up to which row, and its head hash; or where it breaks.
fn chain_status(chain: &Verification) -> Markup {
    html! {
        section.chain aria-labelledby="chain" {
            h2 #chain { "Hash chain" }
            @match chain {
                Verification::Intact { rows: 0, .. } => p { "The log is empty." },
                Verification::Intact { rows, head } => p.intact {
                    "Intact: verified rows 1 to " (rows) ". Head hash "
                    code.hash { (head) }
                },
                Verification::Broken { seq, problem } => p.problem role="alert" {
                    "Broken at row " (seq) ": " (problem)
                    ". Rows before it verify; nothing from this row on can be trusted."
                },
            }
        }
    }
}

fn form(q: &AuditQuery) -> Markup {
    let text = |id: &str, label: &str, value: &Option<String>, hint: &str| {
        html! {
            div.field {
                label for=(id) { (label) }
                input #(id) name=(id) type="text" value=[value.as_deref()] placeholder=(hint);
            }
        }
    };
    html! {
        form.filters method="get" action="/audit" {
            (text("instance", "Instance", &q.instance, "i-0123456789abcdef0"))
            (text("policy", "Policy", &q.policy, "any"))
            (text("action", "Action", &q.action, "stop, start, override…"))
            div.field {
                label for="outcome" { "Outcome" }
                select #outcome name="outcome" {
                    option value="" { "any" }
                    @for o in ["intent", "succeeded", "failed", "skipped"] {
                        option value=(o) selected[q.outcome.as_deref() == Some(o)] { (o) }
                    }
                }
            }
            (text("since", "Since", &q.since, "24h or 2026-11-30T12:00:00Z"))
            (text("until", "Until", &q.until, "2026-12-01 or 1h"))
            button type="submit" { "Filter" }
        }
    }
}

/// Audit rows as a table, in the order given; `with_instance` adds the instance column.
pub(super) fn table(rows: &[AuditEntry], with_instance: bool) -> Markup {
    html! {
        table.cards {
            thead {
                tr {
                    th scope="col" { "Row" }
                    th scope="col" { "Time" }
                    @if with_instance { th scope="col" { "Instance" } }
                    th scope="col" { "Action, code" }
                    th scope="col" { "Outcome" }
                    th scope="col" { "Policy, actor" }
                    th scope="col" { "Reason" }
                }
            }
            tbody {
                @for r in rows {
                    @let e = &r.entry;
                    tr {
                        td.num data-label="Row" { (r.seq) }
                        td data-label="Time" { (time(e.at)) }
                        @if with_instance {
                            td data-label="Instance" {
                                @if let Some(i) = &e.instance { (instance_link(i)) }
                            }
                        }
                        td data-label="Action" {
                            (e.action) @if e.dry_run { " " span.tag { "dry run" } }
                            @if let Some(c) = &e.code { br; code { (c) } }
                        }
                        td data-label="Outcome" {
                            span class=(format!("outcome outcome-{}", e.outcome)) { (e.outcome.as_str()) }
                        }
                        td data-label="Policy" {
                            @if let Some(p) = &e.policy { (p) }
                            span.name { "by " (e.actor) }
                        }
                        td.reason data-label="Reason" {
                            (e.reason)
                            @if let Some(err) = &e.error { br; span.error { "error: " (err) } }
                        }
                    }
                }
            }
        }
    }
}
