//! `/`: the fleet, one page of live instances at a time, filtered by policy and state.

use super::{given, instance_link, ok, query_string, scroll, time, Nav, PageError, PageResult};
use crate::api::ApiState;
use crate::names::{KEEP_UNTIL_TAG, SKIP_TAG};
use crate::store::{FleetFilter, InstanceRecord, OverrideRecord};
use axum::extract::rejection::QueryRejection;
use axum::extract::{Query, State};
use maud::{html, Markup};
use serde::Deserialize;
use std::collections::HashMap;

/// Instances per page: 200 rows render in a few milliseconds, whatever the fleet's size.
pub(super) const PAGE: i64 = 200;

/// The fleet page's parameters.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct FleetQuery {
    policy: Option<String>,
    state: Option<String>,
    /// From 1.
    page: Option<i64>,
}

pub(super) async fn page(
    State(state): State<ApiState>,
    query: Result<Query<FleetQuery>, QueryRejection>,
) -> PageResult {
    let Query(q) = query?;
    let page = q.page.unwrap_or(1);
    if page < 1 {
        return Err(PageError::bad_request(format!(
            "page: {page} is not a page number (they start at 1)"
        )));
    }
    let filter = FleetFilter {
        policy: given(q.policy),
        state: given(q.state),
    };
    let store = &state.store;
    let found = store.fleet_page(&filter, (page - 1) * PAGE, PAGE).await?;
    let (policies, states) = store.fleet_facets().await?;
    let overrides: HashMap<String, OverrideRecord> = store
        .active_overrides(state.clock.now())
        .await?
        .into_iter()
        .map(|o| (o.instance.clone(), o))
        .collect();
    let pages = ((found.total + PAGE - 1) / PAGE).max(1);
    let link = |page: i64| {
        let page = page.to_string();
        format!(
            "/{}",
            query_string(&[
                ("policy", filter.policy.as_deref()),
                ("state", filter.state.as_deref()),
                ("page", Some(&page)),
            ])
        )
    };
    let body = html! {
        form.filters method="get" action="/" {
            div.field {
                label for="policy" { "Policy" }
                select #policy name="policy" {
                    option value="" { "any" }
                    @for p in &policies {
                        option value=(p) selected[filter.policy.as_ref() == Some(p)] { (p) }
                    }
                }
            }
            div.field {
                label for="state" { "State" }
                select #state name="state" {
                    option value="" { "any" }
                    @for s in &states {
                        option value=(s) selected[filter.state.as_ref() == Some(s)] { (s) }
                    }
                }
            }
            button type="submit" { "Filter" }
        }
        p.count {
            (found.total) " live instances"
            @if found.total > 0 { ", page " (page) " of " (pages) }
        }
        @if found.instances.is_empty() {
            p { "No live instance matches." }
        } @else {
            (scroll("Instances", table(&found.instances, &overrides)))
        }
        nav.pager aria-label="Pages" {
            @if page > 1 { a href=(link(page - 1)) rel="prev" { "← Previous page" } }
            @if page < pages { a href=(link(page + 1)) rel="next" { "Next page →" } }
        }
    };
    Ok(ok("Fleet", Nav::Fleet, body))
}

fn table(instances: &[InstanceRecord], overrides: &HashMap<String, OverrideRecord>) -> Markup {
    html! {
        table {
            thead {
                tr {
                    th scope="col" { "Instance" }
                    th scope="col" { "Type" }
                    th scope="col" { "Region" }
                    th scope="col" { "State, since" }
                    th scope="col" { "Policy" }
                    th scope="col" { "Decision" }
                    th scope="col" { "Reason" }
                    th scope="col" { "Protections" }
                }
            }
            tbody {
                @for i in instances {
                    tr {
                        th scope="row" {
                            (instance_link(&i.id))
                            @if let Some(name) = i.tags.0.get("Name") {
                                span.name { (name) }
                            }
                        }
                        td.short { (i.instance_type) }
                        td.short { (i.region) }
                        td { span.state { (i.state) } " " (time(i.state_since)) }
                        td { (i.policy.as_deref().unwrap_or("–")) }
                        td { (decision(i)) }
                        td.reason { (i.decided_reason.as_deref().unwrap_or("")) }
                        td { (protections(i, overrides.get(&i.id))) }
                    }
                }
            }
        }
    }
}

/// The latest decision: its action and code.
pub(super) fn decision(i: &InstanceRecord) -> Markup {
    html! {
        @match (&i.decided_action, &i.decided_code) {
            (Some(action), Some(code)) => {
                span class=(format!("action action-{action}")) { (action) } " " code { (code) }
            }
            _ => { "not decided yet" }
        }
    }
}

/// What keeps ebb from stopping (or touching) `i`: an active override, a keep-until tag, the
/// skip tag.
pub(super) fn protections(i: &InstanceRecord, active: Option<&OverrideRecord>) -> Markup {
    let keep_until = i.tags.0.get(KEEP_UNTIL_TAG);
    let skip = i.tags.0.get(SKIP_TAG).is_some_and(|v| v == "true");
    html! {
        @if active.is_none() && keep_until.is_none() && !skip { "–" } @else {
        ul.protections {
            @if let Some(o) = active {
                li { "override until " (time(o.until)) " by " (o.created_by) }
            }
            @if let Some(until) = keep_until {
                li { (KEEP_UNTIL_TAG) " " (until) }
            }
            @if skip {
                li { (SKIP_TAG) ": never touched" }
            }
        }
        }
    }
}
