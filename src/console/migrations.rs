//! `/migrations`: every spot migration, with where the workload runs now, what it saved, its
//! reclaims and each of its steps.

use super::{instance_link, maybe_time, ok, scroll, time, Nav, PageResult};
use crate::api::ApiState;
use crate::output::MigrationView;
use axum::extract::State;
use maud::html;

pub(super) async fn page(State(state): State<ApiState>) -> PageResult {
    let now = state.clock.now();
    let list = state.store.migrations().await?;
    let views: Vec<MigrationView> = list
        .iter()
        .rev()
        .map(|m| MigrationView::new(m, now))
        .collect();
    let body = html! {
        @if views.is_empty() {
            p { "No spot migrations yet: a policy's spot rule plans one for an interruptible on-demand instance." }
        } @else {
            (scroll("Spot migrations", html! {
                table {
                    thead {
                        tr {
                            th scope="col" { "Id" }
                            th scope="col" { "Original" }
                            th scope="col" { "Policy" }
                            th scope="col" { "State" }
                            th scope="col" { "Runs on" }
                            th scope="col" { "Market" }
                            th scope="col" { "Type, zone" }
                            th scope="col" { "Saved" }
                            th scope="col" { "Reclaims" }
                            th scope="col" { "Planned" }
                        }
                    }
                    tbody {
                        @for m in &views {
                            tr {
                                td.num { a href=(format!("#migration-{}", m.id)) { (m.id) } }
                                th scope="row" { (instance_link(m.original)) }
                                td { (m.policy) }
                                td {
                                    (m.state)
                                    @if m.ended_at.is_some() { " (ended)" }
                                }
                                td { @if let Some(c) = m.current { (instance_link(c)) } @else { "–" } }
                                td { (m.market) }
                                td {
                                    (m.instance_type.unwrap_or("–")) " "
                                    (m.zone.unwrap_or(""))
                                }
                                td.num { (format!("${:.2}", m.savings_so_far)) }
                                td.num { (m.interruptions.len()) }
                                td { (time(m.created_at)) }
                            }
                        }
                    }
                }
            }))
            @for m in &views {
                section.migration aria-labelledby=(format!("migration-{}", m.id)) {
                    h2 #(format!("migration-{}", m.id)) {
                        "Migration " (m.id) ": " (m.original) " (" (m.region) ")"
                    }
                    @if let Some(error) = m.error { p.problem { (error) } }
                    dl.facts {
                        dt { "Original terminated" } dd { (maybe_time(m.original_terminated_at)) }
                        @if let Some(t) = m.original_returned_at {
                            dt { "Original started by a person" } dd { (time(t)) }
                        }
                        dt { "Ended" } dd { (maybe_time(m.ended_at)) }
                    }
                    @if !m.interruptions.is_empty() {
                        h3 { "Reclaims" }
                        ul {
                            @for r in m.interruptions {
                                li { (time(r.at)) ": " (r.instance) " (" (r.instance_type) ", " (r.zone) ")" }
                            }
                        }
                    }
                    h3 { "Steps" }
                    ol.steps {
                        @for s in m.steps {
                            li { (time(s.at)) " " span.state { (s.state.as_str()) } " " (s.detail) }
                        }
                    }
                }
            }
        }
    };
    Ok(ok("Spot moves", Nav::Migrations, body))
}
