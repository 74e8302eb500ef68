//! `/instances/{id}`: one instance: its facts, latest decision, protections and overrides, its
//! state over the last 24 hours as a chart with ebb's actions marked, what `ebb explain` says
//! of it now, and a timeline of its state changes and audit rows; and, for a login that may,
//! the forms that make and revoke its overrides ([`super::override_forms`]).

use super::fleet::{decision, protections};
use super::override_forms::{self, OverrideForm};
use super::session::Session;
use super::{explain, layout, maybe_time, ok, scroll, time, Nav, PageError, PageResult};
use crate::api::ApiState;
use crate::fleet::OwnerKind;
use crate::store::{
    AuditEntry, AuditFilter, InstanceEvent, InstanceRecord, Outcome, OverrideRecord,
};
use axum::extract::rejection::{PathRejection, QueryRejection};
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{Html, IntoResponse, Response};
use chrono::{DateTime, Duration, Utc};
use maud::{html, Markup};
use serde::Deserialize;
use std::collections::HashSet;

/// The newest audit rows and state changes the timeline shows, of each.
const TIMELINE: i64 = 500;

/// The span of the state chart.
const CHART_SPAN: Duration = Duration::hours(24);

/// The instance page's parameters: what a form just changed.
#[derive(Debug, Default, Deserialize)]
pub(super) struct InstanceQuery {
    /// The override just made.
    made: Option<i64>,
    /// The override just revoked.
    revoked: Option<i64>,
}

/// What the overrides section says above its table.
pub(super) enum Notice {
    /// After a change: the overrides made or revoked, by id.
    After {
        /// Made.
        made: Option<i64>,
        /// Revoked.
        revoked: Option<i64>,
    },
    /// Why a form's change was refused.
    Refused(String),
}

pub(super) async fn page(
    State(state): State<ApiState>,
    headers: HeaderMap,
    id: Result<Path<String>, PathRejection>,
    query: Result<Query<InstanceQuery>, QueryRejection>,
) -> PageResult {
    let Path(id) = id?;
    let Query(query) = query?;
    let session = Session::of(&headers, &state).await?;
    let notice = Notice::After {
        made: query.made,
        revoked: query.revoked,
    };
    let body = render(
        &state,
        &id,
        session.as_ref(),
        notice,
        &OverrideForm::default(),
    )
    .await?;
    Ok(ok(&format!("Instance {id}"), Nav::Other, body))
}

/// The page of instance `id` answered with `status`, the overrides section saying `notice`
/// and its form showing `form`: a form's post that was refused.
pub(super) async fn answer(
    state: &ApiState,
    id: &str,
    session: Option<&Session>,
    notice: Notice,
    form: OverrideForm,
    status: StatusCode,
) -> Response {
    match render(state, id, session, notice, &form).await {
        Ok(body) => {
            let page = layout(&format!("Instance {id}"), Nav::Other, body);
            (status, Html(page.into_string())).into_response()
        }
        Err(err) => err.into_response(),
    }
}

async fn render(
    state: &ApiState,
    id: &str,
    session: Option<&Session>,
    notice: Notice,
    form: &OverrideForm,
) -> Result<Markup, PageError> {
    let store = &state.store;
    let Some(instance) = store.instance(id).await? else {
        return Err(PageError::new(
            StatusCode::NOT_FOUND,
            format!("ebb knows no instance {id}: it has never been listed in a synced region."),
        ));
    };
    let now = state.clock.now();
    let events = store.instance_events(id, TIMELINE).await?;
    let filter = AuditFilter {
        instance: Some(id.to_string()),
        ..AuditFilter::default()
    };
    let audit = store.audit_page(&filter, None, TIMELINE).await?;
    let overrides: Vec<OverrideRecord> = store.overrides_of(id).await?;
    let reclaim = store.reclaim_of(id).await?;
    let active = overrides
        .iter()
        .find(|o| o.revoked_at.is_none() && o.until > now);
    let readings = store.gpu_readings(id, now - CHART_SPAN, now).await?;
    let posted = store.heartbeats(&[id.to_string()]).await?.remove(id);
    let activity = store.activity_of(id).await?;
    let kept = explain::Kept {
        readings: &readings,
        posted,
        activity: &activity,
    };
    let loaded = crate::policies::current(&state.policies).await.ok();
    let set = loaded.as_ref().map(|l| &*l.set);
    // Where the budgets over it stand, so that "why, now" says when one changes the decision.
    let budgets = match set {
        Some(set) => store
            .budget_standings(set, now, state.cloud, &state.quoted_prices().await?)
            .await?
            .map(|(standings, _)| standings.iter().map(|s| s.for_decisions()).collect())
            .unwrap_or_default(),
        None => Vec::new(),
    };
    // The idle threshold of the policy that governed it at the last decision, as loaded now.
    let threshold = set.and_then(|set| {
        let policy = set
            .policies
            .iter()
            .find(|p| instance.policy.as_ref() == Some(&p.name))?;
        policy.idle.as_ref().map(|rule| rule.gpu_below)
    });
    let notice = match notice {
        Notice::After { made, revoked } => override_forms::done(&overrides, made, revoked),
        Notice::Refused(why) => Some(html! { p.problem role="alert" { (why) } }),
    };
    Ok(html! {
        (facts(&instance))
        section aria-labelledby="decision" {
            h2 #decision { "Latest decision" }
            p {
                (decision(&instance))
                @if let Some(since) = instance.decided_since { ", since " (time(since)) }
            }
            @if let Some(reason) = &instance.decided_reason { p.reason { (reason) } }
            h3 { "Protections" }
            (protections(&instance, active))
        }
        (explain::section(&instance, &kept, set, &overrides, &budgets, now))
        section aria-labelledby="chart" {
            h2 #chart { "The last 24 hours" }
            (super::chart::states(&instance, &events, &audit, now - CHART_SPAN, now))
            (super::gpu_chart::gpu(id, &readings, threshold, &audit, now - CHART_SPAN, now))
        }
        section aria-labelledby="overrides" {
            h2 #overrides { "Overrides" }
            @if let Some(notice) = notice { (notice) }
            @if overrides.is_empty() { p { "None." } } @else { (overrides_table(&overrides, session, now)) }
            (super::quick_keep::buttons(&instance, session, set, now))
            (override_forms::controls(&instance, session, form, state.limits.max_override))
        }
        (super::reclaim::section(reclaim.as_ref(), session))
        section aria-labelledby="timeline" {
            h2 #timeline { "Timeline" }
            p.note { "Newest first: state changes ebb saw, and the audit rows about this instance." }
            (timeline(&instance, &events, &audit))
        }
    })
}

fn facts(i: &InstanceRecord) -> Markup {
    html! {
        dl.facts {
            @if let Some(name) = i.tags.0.get("Name") { dt { "Name" } dd { (name) } }
            dt { "Type" } dd { (i.instance_type) " (" (i.lifecycle) ")" }
            dt { "Region" } dd { (i.region) }
            dt { "State" } dd { span.state { (i.state) } " since " (time(i.state_since)) }
            dt { "Policy" } dd { (i.policy.as_deref().unwrap_or("none")) }
            @if let Some(owner) = &i.owner {
                dt { "Owner" }
                dd {
                    (owner.0)
                    @if matches!(owner.0.kind(), OwnerKind::Asg | OwnerKind::EksNodegroup) {
                        ": ebb scales the group, never this member alone; an override on this member, or its ebb:keep-until or ebb:skip, holds the whole group's scale-down, or, where the group's policy has group.protect_members, keeps this member running while the group is scaled down around it"
                    }
                }
            }
            dt { "Launched" } dd { (maybe_time(i.launched_at)) }
            dt { "First seen" } dd { (time(i.first_seen_at)) }
            dt { "Last seen" } dd { (time(i.last_seen_at)) }
            @if let Some(gone) = i.gone_at { dt { "Gone" } dd { (time(gone)) } }
            @if let Some(t) = i.stopped_by_ebb_at { dt { "Stopped by ebb" } dd { (time(t)) } }
            @if let Some(t) = i.started_by_ebb_at { dt { "Started by ebb" } dd { (time(t)) } }
            @if let Some(t) = i.started_by_person_at { dt { "Started by a person" } dd { (time(t)) } }
            dt { "Tags" }
            dd {
                @if i.tags.0.is_empty() { "none" } @else {
                    ul.tags {
                        @for (k, v) in &i.tags.0 { li { code { (k) "=" (v) } } }
                    }
                }
            }
        }
    }
}

/// An audit row's two cells in a timeline: the action and its outcome (an intent that
/// `closed` holds no outcome for is unknown, resolving), then the code, reason, actor, row and
/// error.
pub(super) fn audit_cells(a: &AuditEntry, closed: &HashSet<i64>) -> Markup {
    html! {
        td {
            (a.entry.action) " "
            span class=(format!("outcome outcome-{}", a.entry.outcome)) {
                (a.entry.outcome.as_str())
            }
            @if a.entry.dry_run { " " span.tag { "dry run" } }
            @if a.entry.outcome == Outcome::Intent && !closed.contains(&a.seq) {
                " " span.tag { "unknown, resolving" }
            }
        }
        td.reason {
            @if let Some(c) = &a.entry.code { code { (c) } ": " }
            (a.entry.reason)
            " — " (a.entry.actor) ", row " (a.seq)
            @if let Some(err) = &a.entry.error {
                br; span.error { "error: " (err) }
            }
        }
    }
}

fn overrides_table(
    list: &[OverrideRecord],
    session: Option<&Session>,
    now: DateTime<Utc>,
) -> Markup {
    scroll(
        "Overrides",
        html! {
            table {
                thead {
                    tr {
                        th scope="col" { "Id" }
                        th scope="col" { "Until" }
                        th scope="col" { "Reason" }
                        th scope="col" { "Made by" }
                        th scope="col" { "Made" }
                        th scope="col" { "Status" }
                        @if session.is_some_and(Session::may_override) {
                            th scope="col" { span.visually-hidden { "Revoke" } }
                        }
                    }
                }
                tbody {
                    @for o in list {
                        tr {
                            td.num { (o.id) }
                            td { (time(o.until)) }
                            td.reason { (o.reason) }
                            td { (o.created_by) }
                            td { (time(o.created_at)) }
                            td {
                                @if let Some(at) = o.revoked_at {
                                    "revoked " (time(at))
                                    @if let Some(by) = &o.revoked_by { " by " (by) }
                                } @else if o.until <= now { "expired" } @else { "active" }
                            }
                            @if session.is_some_and(Session::may_override) {
                                td { (override_forms::revoke_button(o, session, now)) }
                            }
                        }
                    }
                }
            }
        },
    )
}

/// One line of the timeline.
enum Line<'a> {
    State(&'a InstanceEvent),
    Audit(&'a AuditEntry),
    FirstSeen(&'a InstanceRecord),
}

impl Line<'_> {
    fn at(&self) -> DateTime<Utc> {
        match self {
            Line::State(e) => e.at,
            Line::Audit(a) => a.entry.at,
            Line::FirstSeen(i) => i.first_seen_at,
        }
    }
}

fn timeline(i: &InstanceRecord, events: &[InstanceEvent], audit: &[AuditEntry]) -> Markup {
    // An outcome is newer than its intent: an intent shown without one among these rows has
    // none yet (its call in flight, or its answer lost and resolved at a later tick).
    let closed: std::collections::HashSet<i64> =
        audit.iter().filter_map(|a| a.entry.intent_seq).collect();
    let mut lines: Vec<Line> = events.iter().map(Line::State).collect();
    lines.extend(audit.iter().map(Line::Audit));
    lines.push(Line::FirstSeen(i));
    // Newest first; at the same instant, audit rows (written after the sync) above states.
    lines.sort_by_key(|l| std::cmp::Reverse((l.at(), matches!(l, Line::Audit(_)))));
    scroll(
        "Timeline",
        html! {
            table {
                thead {
                    tr {
                        th scope="col" { "Time" }
                        th scope="col" { "What" }
                        th scope="col" { "Detail" }
                    }
                }
                tbody {
                    @for line in &lines {
                        tr {
                            td { (time(line.at())) }
                            @match line {
                                Line::State(e) => {
                                    td { "state " span.state { (e.to_state) } }
                                    td { "from " (e.from_state) " (" (e.cause) ")" }
                                }
                                Line::Audit(a) => { (audit_cells(a, &closed)) }
                                Line::FirstSeen(_) => {
                                    td { "first seen" }
                                    td { "listed by the cloud" }
                                }
                            }
                        }
                    }
                }
            }
        },
    )
}
