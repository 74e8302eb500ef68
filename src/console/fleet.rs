//! `/`: the fleet, one page of live instances at a time, filtered by policy, state and a tag
//! (for a login, its own instances: [`super::mine`]), sorted by a column, each with the next
//! change its work hours bring; and the Auto Scaling groups ebb lists, each linked to its page.

use super::session::Session;
use super::{
    given, group_path, instance_link, instance_path, maybe_time, mine, ok, query_string, scroll,
    time, zoned_time, Nav, PageError, PageResult,
};
use crate::api::ApiState;
use crate::engine::{next_change, NextChange};
use crate::fleet::Owner;
use crate::names::{KEEP_UNTIL_TAG, SKIP_TAG};
use crate::policy::PolicySet;
use crate::store::{FleetFilter, FleetSort, GroupRecord, InstanceRecord, OverrideRecord};
use axum::extract::rejection::QueryRejection;
use axum::extract::{Query, State};
use axum::http::HeaderMap;
use chrono::{DateTime, Utc};
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
    /// `KEY=VALUE`.
    tag: Option<String>,
    /// A column: see [`FleetSort::ALL`].
    sort: Option<String>,
    /// From 1.
    page: Option<i64>,
}

/// The order a query asks for.
fn sort_of(sort: Option<String>) -> Result<FleetSort, PageError> {
    let Some(name) = given(sort) else {
        return Ok(FleetSort::Id);
    };
    FleetSort::parse(&name).ok_or_else(|| {
        let names: Vec<&str> = FleetSort::ALL.iter().map(|(_, n)| *n).collect();
        PageError::bad_request(format!(
            "sort: \"{name}\" is not a column; sort by one of {}",
            names.join(", ")
        ))
    })
}

/// The filter form, showing `filter` (with the tag as `tag`), keeping the order.
fn filters(
    filter: &FleetFilter,
    policies: &[String],
    states: &[String],
    tag: Option<&str>,
) -> Markup {
    html! {
        form.filters method="get" action="/" {
            div.field {
                label for="policy" { "Policy" }
                select #policy name="policy" {
                    option value="" { "any" }
                    @for p in policies {
                        option value=(p) selected[filter.policy.as_ref() == Some(p)] { (p) }
                    }
                }
            }
            div.field {
                label for="state" { "State" }
                select #state name="state" {
                    option value="" { "any but terminated" }
                    @for s in states {
                        option value=(s) selected[filter.state.as_ref() == Some(s)] { (s) }
                    }
                }
            }
            div.field {
                label for="tag" { "Tag" }
                input #tag name="tag" type="text" placeholder="team=research"
                    value=(tag.unwrap_or(""));
            }
            @if filter.sort != FleetSort::Id {
                input type="hidden" name="sort" value=(filter.sort.as_str());
            }
            button type="submit" { "Filter" }
        }
    }
}

/// The tag filter `KEY=VALUE` of a query.
fn tag_filter(tag: Option<String>) -> Result<Option<(String, String)>, PageError> {
    let Some(tag) = given(tag) else {
        return Ok(None);
    };
    match tag.split_once('=') {
        Some((key, value)) if !key.trim().is_empty() => {
            Ok(Some((key.trim().to_string(), value.trim().to_string())))
        }
        _ => Err(PageError::bad_request(format!(
            "tag: \"{tag}\" is not KEY=VALUE (for example team=research)"
        ))),
    }
}

pub(super) async fn page(
    State(state): State<ApiState>,
    headers: HeaderMap,
    query: Result<Query<FleetQuery>, QueryRejection>,
) -> PageResult {
    let Query(q) = query?;
    let login = Session::of(&headers, &state).await?.map(|s| s.caller.name);
    let page = q.page.unwrap_or(1);
    if page < 1 {
        return Err(PageError::bad_request(format!(
            "page: {page} is not a page number (they start at 1)"
        )));
    }
    let filter = FleetFilter {
        policy: given(q.policy),
        state: given(q.state),
        tag: tag_filter(q.tag)?,
        sort: sort_of(q.sort)?,
    };
    let sort = filter.sort;
    let tag_text = filter.tag.as_ref().map(|(k, v)| format!("{k}={v}"));
    let store = &state.store;
    let found = store.fleet_page(&filter, (page - 1) * PAGE, PAGE).await?;
    let (policies, states) = store.fleet_facets().await?;
    let groups = store.scaling_groups().await?;
    let overrides: HashMap<String, OverrideRecord> = store
        .active_overrides(state.clock.now())
        .await?
        .into_iter()
        .map(|o| (o.instance.clone(), o))
        .collect();
    // The policies as loaded now, for each row's next scheduled change; none if they cannot
    // be read (the page still shows the fleet).
    let set = crate::policies::current(&state.policies)
        .await
        .ok()
        .map(|loaded| loaded.set);
    let now = state.clock.now();
    let pages = ((found.total + PAGE - 1) / PAGE).max(1);
    let link = |page: i64, sort: FleetSort| {
        let page = page.to_string();
        format!(
            "/{}",
            query_string(&[
                ("policy", filter.policy.as_deref()),
                ("state", filter.state.as_deref()),
                ("tag", tag_text.as_deref()),
                ("sort", (sort != FleetSort::Id).then_some(sort.as_str())),
                ("page", (page != "1").then_some(page.as_str())),
            ])
        )
    };
    let sorted_by = |column: FleetSort| link(1, column);
    let terminated_link = format!(
        "/{}",
        query_string(&[
            ("policy", filter.policy.as_deref()),
            ("state", Some("terminated")),
            ("tag", tag_text.as_deref()),
        ])
    );
    let columns = Columns {
        sort,
        sorted_by: &sorted_by,
        set: set.as_deref(),
        now,
    };
    let body = html! {
        (mine::switch(login.as_deref(), tag_text.as_deref()))
        (filters(&filter, &policies, &states, tag_text.as_deref()))
        p.count {
            (found.total) " live instances"
            @if found.total > 0 { ", page " (page) " of " (pages) }
            @if found.terminated_hidden > 0 {
                "; " (found.terminated_hidden) " terminated not shown ("
                a href=(terminated_link) { "show them" } ")"
            }
        }
        @if found.instances.is_empty() {
            p { "No live instance matches." }
        } @else {
            (scroll("Instances", table(&found.instances, &overrides, &columns)))
        }
        @if !groups.is_empty() { (groups_table(&groups)) }
        nav.pager aria-label="Pages" {
            @if page > 1 { a href=(link(page - 1, sort)) rel="prev" { "← Previous page" } }
            @if page < pages { a href=(link(page + 1, sort)) rel="next" { "Next page →" } }
        }
    };
    Ok(ok("Fleet", Nav::Fleet, body))
}

/// What the table's headers and its next-change column need beside the rows.
struct Columns<'a> {
    /// The order of the rows.
    sort: FleetSort,
    /// The link that sorts the page by a column.
    sorted_by: &'a dyn Fn(FleetSort) -> String,
    /// The policies in force, if they could be read.
    set: Option<&'a PolicySet>,
    /// Now, by the serve clock.
    now: DateTime<Utc>,
}

impl Columns<'_> {
    /// A column header that sorts by `column`, marked when the rows are sorted by it.
    fn sortable(&self, title: &str, column: FleetSort) -> Markup {
        let sorted = self.sort == column;
        html! {
            th scope="col" aria-sort=[sorted.then_some("ascending")] {
                (self.sort_link(title, column))
            }
        }
    }

    /// The link that sorts by `column`, marked when the rows are sorted by it.
    fn sort_link(&self, title: &str, column: FleetSort) -> Markup {
        html! {
            a href=((self.sorted_by)(column)) { (title) @if self.sort == column { " ▲" } }
        }
    }

    /// The next change `i`'s governing policy's work hours bring; none for an instance
    /// something else owns, which ebb does not act on.
    fn next(&self, i: &InstanceRecord) -> Option<NextChange> {
        if i.owner.is_some() {
            return None;
        }
        let policy = self
            .set?
            .policies
            .iter()
            .find(|p| i.policy.as_ref() == Some(&p.name))?;
        next_change(policy, i.state == "running", self.now)
    }
}

fn table(
    instances: &[InstanceRecord],
    overrides: &HashMap<String, OverrideRecord>,
    columns: &Columns<'_>,
) -> Markup {
    html! {
        table.cards {
            thead {
                tr {
                    (columns.sortable("Instance", FleetSort::Id))
                    th scope="col" aria-sort=[
                        matches!(columns.sort, FleetSort::Type | FleetSort::Region)
                            .then_some("ascending")
                    ] {
                        (columns.sort_link("Type", FleetSort::Type)) ", "
                        (columns.sort_link("region", FleetSort::Region))
                    }
                    (columns.sortable("State, since", FleetSort::State))
                    (columns.sortable("Policy", FleetSort::Policy))
                    (columns.sortable("Decision and reason", FleetSort::Decision))
                    th scope="col" { "Next by work hours" }
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
                        td data-label="Type" { (i.instance_type) span.name { (i.region) } }
                        td data-label="State" { span.state { (i.state) } " " (time(i.state_since)) }
                        td data-label="Policy" { (i.policy.as_deref().unwrap_or("–")) }
                        td.reason data-label="Decision" {
                            (decision(i))
                            @if let Some(reason) = &i.decided_reason {
                                br; (short_reason(&i.id, reason))
                            }
                        }
                        td data-label="Next" { (next_cell(columns.next(i))) }
                        td data-label="Protections" { (protections(i, overrides.get(&i.id))) }
                    }
                }
            }
        }
    }
}

/// Reasons longer than this many characters are cut in the table.
const REASON_SHOWN: usize = 120;

/// `reason` as the table shows it: whole when short, else cut at a word with a link to the
/// instance's page, which shows it whole (reasons of owned instances run to paragraphs).
fn short_reason(id: &str, reason: &str) -> Markup {
    if reason.chars().count() <= REASON_SHOWN {
        return html! { (reason) };
    }
    let cut: String = reason.chars().take(REASON_SHOWN).collect();
    let cut = cut
        .rsplit_once(' ')
        .map_or(cut.as_str(), |(words, _)| words);
    html! {
        span title=(reason) { (cut.trim_end_matches([',', ';', ':', ' '])) "… " }
        a href=(format!("{}#decision", instance_path(id))) aria-label=(format!("The whole reason for {id}")) {
            "whole reason"
        }
    }
}

/// The next change by work hours: what ebb does, and when in the policy's zone and in UTC.
fn next_cell(next: Option<NextChange>) -> Markup {
    html! {
        @match next {
            None => { "–" }
            Some(n) => {
                (n.what) br;
                (zoned_time(n.at, n.zone))
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

/// The Auto Scaling groups ebb lists, scheduled through their capacity, with their pages.
fn groups_table(groups: &[GroupRecord]) -> Markup {
    html! {
        section aria-labelledby="groups" {
            h2 #groups { "Auto Scaling groups" }
            (scroll("Auto Scaling groups", html! {
                table.cards {
                    thead {
                        tr {
                            th scope="col" { "Group" }
                            th scope="col" { "Region" }
                            th scope="col" { "Capacity now" }
                            th scope="col" { "Members" }
                            th scope="col" { "Up capacity" }
                            th scope="col" { "Held down by ebb" }
                        }
                    }
                    tbody {
                        @for g in groups {
                            tr {
                                th scope="row" { a href=(group_path(&g.region, &g.name)) { (g.name) } }
                                td.short data-label="Region" { (g.region) }
                                td data-label="Capacity now" {
                                    @if let Some(l) = &g.last { (l.capacity) } @else { "–" }
                                }
                                td.num data-label="Members" {
                                    @if let Some(l) = &g.last { (l.members) } @else { "–" }
                                }
                                td data-label="Up capacity" { (g.stored.memory.up) }
                                td data-label="Held down by ebb" {
                                    (maybe_time(g.stored.memory.down_since))
                                }
                            }
                        }
                    }
                }
            }))
        }
    }
}

/// The Auto Scaling group `owner` schedules its instances through, if any.
fn group_of(owner: &Owner) -> Option<&str> {
    match owner {
        Owner::Asg { group } => Some(group),
        Owner::EksNodegroup { group, .. } => group.as_deref(),
        _ => None,
    }
}

/// What keeps ebb from stopping (or touching) `i`: its owner, an active override, a keep-until
/// tag, the skip tag.
pub(super) fn protections(i: &InstanceRecord, active: Option<&OverrideRecord>) -> Markup {
    let keep_until = i.tags.0.get(KEEP_UNTIL_TAG);
    let skip = i.tags.0.get(SKIP_TAG).is_some_and(|v| v == "true");
    let owner = i.owner.as_ref().map(|o| &o.0);
    html! {
        @if owner.is_none() && active.is_none() && keep_until.is_none() && !skip { "–" } @else {
        ul.protections {
            @if let Some(owner) = owner {
                li.owner {
                    "owned by " (owner) ": never acted on alone"
                    @if let Some(group) = group_of(owner) {
                        " (" a href=(group_path(&i.region, group)) { "the group's page" } ")"
                    }
                }
            }
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
