//! `/instances/{id}`: one instance: its facts, latest decision, protections and overrides, its
//! state over the last 24 hours as a chart with ebb's actions marked, and a timeline of its
//! state changes and audit rows.

use super::fleet::{decision, protections};
use super::{maybe_time, ok, scroll, time, Nav, PageError, PageResult};
use crate::api::ApiState;
use crate::store::{AuditEntry, AuditFilter, InstanceEvent, InstanceRecord, OverrideRecord};
use axum::extract::rejection::PathRejection;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use chrono::{DateTime, Duration, Utc};
use maud::{html, Markup};

/// The newest audit rows and state changes the timeline shows, of each.
const TIMELINE: i64 = 500;

/// The span of the state chart.
const CHART_SPAN: Duration = Duration::hours(24);

pub(super) async fn page(
    State(state): State<ApiState>,
    id: Result<Path<String>, PathRejection>,
) -> PageResult {
    let Path(id) = id?;
    let store = &state.store;
    let Some(instance) = store.instance(&id).await? else {
        return Err(PageError::new(
            StatusCode::NOT_FOUND,
            format!("ebb knows no instance {id}: it has never been listed in a synced region."),
        ));
    };
    let now = state.clock.now();
    let events = store.instance_events(&id, TIMELINE).await?;
    let filter = AuditFilter {
        instance: Some(id.clone()),
        ..AuditFilter::default()
    };
    let audit = store.audit_page(&filter, None, TIMELINE).await?;
    let overrides: Vec<OverrideRecord> = store
        .all_overrides()
        .await?
        .into_iter()
        .filter(|o| o.instance == id)
        .rev()
        .collect();
    let active = overrides
        .iter()
        .find(|o| o.revoked_at.is_none() && o.until > now);
    let readings = store.gpu_readings(&id, now - CHART_SPAN, now).await?;
    // The idle threshold of the policy that governed it at the last decision, as loaded now.
    let threshold = state.policies.current().await.ok().and_then(|loaded| {
        let policy = loaded
            .set
            .policies
            .iter()
            .find(|p| instance.policy.as_ref() == Some(&p.name))?;
        policy.idle.as_ref().map(|rule| rule.gpu_below)
    });
    let body = html! {
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
        section aria-labelledby="chart" {
            h2 #chart { "The last 24 hours" }
            (super::chart::states(&instance, &events, &audit, now - CHART_SPAN, now))
            (super::gpu_chart::gpu(&id, &readings, threshold, &audit, now - CHART_SPAN, now))
        }
        section aria-labelledby="overrides" {
            h2 #overrides { "Overrides" }
            @if overrides.is_empty() { p { "None." } } @else { (overrides_table(&overrides, now)) }
        }
        section aria-labelledby="timeline" {
            h2 #timeline { "Timeline" }
            p.note { "Newest first: state changes ebb saw, and the audit rows about this instance." }
            (timeline(&instance, &events, &audit))
        }
    };
    Ok(ok(&format!("Instance {id}"), Nav::Other, body))
}

fn facts(i: &InstanceRecord) -> Markup {
    html! {
        dl.facts {
            @if let Some(name) = i.tags.0.get("Name") { dt { "Name" } dd { (name) } }
            dt { "Type" } dd { (i.instance_type) " (" (i.lifecycle) ")" }
            dt { "Region" } dd { (i.region) }
            dt { "State" } dd { span.state { (i.state) } " since " (time(i.state_since)) }
            dt { "Policy" } dd { (i.policy.as_deref().unwrap_or("none")) }
            dt { "Launched" } dd { (maybe_time(i.launched_at)) }
            dt { "First seen" } dd { (time(i.first_seen_at)) }
            dt { "Last seen" } dd { (time(i.last_seen_at)) }
            @if let Some(gone) = i.gone_at { dt { "Gone" } dd { (time(gone)) } }
            @if let Some(t) = i.stopped_by_ebb_at { dt { "Stopped by ebb" } dd { (time(t)) } }
            @if let Some(t) = i.started_by_ebb_at { dt { "Started by ebb" } dd { (time(t)) } }
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

fn overrides_table(list: &[OverrideRecord], now: DateTime<Utc>) -> Markup {
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
                                Line::Audit(a) => {
                                    td {
                                        (a.entry.action) " "
                                        span class=(format!("outcome outcome-{}", a.entry.outcome)) {
                                            (a.entry.outcome.as_str())
                                        }
                                        @if a.entry.dry_run { " " span.tag { "dry run" } }
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
