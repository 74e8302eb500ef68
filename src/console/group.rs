//! `/groups/{region}/{name}`: one Auto Scaling group ebb schedules through its capacity: its
//! capacity now and the one the opening restores, its policy's window (the next close or
//! opening), what `engine::decide_group` says of it now, its capacity over the last two days
//! as a chart, its members, and the audit rows of its changes.

use super::fleet::decision;
use super::instance::audit_cells;
use super::{instance_link, ok, scroll, time, zoned_time, Nav, PageError, PageResult};
use crate::api::ApiState;
use crate::engine::{decide_group, GroupAction, GroupDecision, Prior, RECENT};
use crate::fleet::{Fleet, GroupMember, Instance, InstanceState, Lifecycle, Sample, ScalingGroup};
use crate::policy::PolicySet;
use crate::store::{AuditEntry, GroupRecord, InstanceRecord};
use axum::extract::rejection::PathRejection;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use chrono::{DateTime, Duration, Utc};
use maud::{html, Markup};
use std::collections::HashMap;

/// The span of the capacity chart: a close and an opening of daily work hours.
const CHART_SPAN: Duration = Duration::hours(48);
/// The newest audit rows of the group's changes the page shows.
const CHANGES: i64 = 100;

pub(super) async fn page(
    State(state): State<ApiState>,
    path: Result<Path<(String, String)>, PathRejection>,
) -> PageResult {
    let Path((region, name)) = path?;
    let store = &state.store;
    let Some(group) = store.scaling_group(&region, &name).await? else {
        return Err(PageError::new(
            StatusCode::NOT_FOUND,
            format!(
                "ebb knows no Auto Scaling group {name} in {region}: it lists only the groups \
                 tagged for it, in regions it syncs completely."
            ),
        ));
    };
    let now = state.clock.now();
    let members = store.group_members(&region, &name).await?;
    let sizes = store
        .group_sizes(&region, &name, now - CHART_SPAN, now)
        .await?;
    let changes = store.group_changes(&region, &name, CHANGES).await?;
    // The recent GPU readings of the running members, in one read: what a busy deferral looks at.
    let running: Vec<String> = members
        .iter()
        .filter(|m| m.state == "running")
        .map(|m| m.id.clone())
        .collect();
    let mut kept = store.gpu_readings_of(&running, now - RECENT, now).await?;
    let readings: Vec<(String, Vec<Sample>)> = running
        .into_iter()
        .map(|id| {
            let samples = kept.remove(&id).unwrap_or_default();
            (id, samples)
        })
        .collect();
    let loaded = crate::policies::current(&state.policies).await.ok();
    let set = loaded.as_ref().map(|l| &*l.set);
    let overrides = Prior::new(HashMap::new(), store.overrides_at(now).await?);
    let decided = set.map(|set| decide_now(set, &group, &members, &readings, &overrides, now));
    let body = html! {
        (facts(&group))
        (window(&group, set, decided.as_ref(), now))
        section aria-labelledby="capacity" {
            h2 #capacity { "Capacity over the last two days" }
            (super::group_chart::capacity(&name, &sizes, &changes, now - CHART_SPAN, now))
        }
        section aria-labelledby="members" {
            h2 #members { "Members" }
            p.note {
                "The instances the group owns, as ebb last listed them. ebb never stops, starts \
                 or moves them one by one (the group would replace them): it changes the group's capacity."
            }
            @if members.is_empty() { p { "None listed." } } @else { (members_table(&members)) }
        }
        section aria-labelledby="changes" {
            h2 #changes { "Changes" }
            p.note { "Newest first: the audit rows of ebb's changes to the group's capacity." }
            @if changes.is_empty() { p { "None yet." } } @else { (changes_table(&changes)) }
        }
    };
    Ok(ok(&format!("Group {name}"), Nav::Other, body))
}

fn facts(g: &GroupRecord) -> Markup {
    let memory = &g.stored.memory;
    html! {
        dl.facts {
            dt { "Region" } dd { (g.region) }
            dt { "Capacity now" }
            dd {
                @match &g.last {
                    Some(last) => {
                        (last.capacity) ", " (last.members) " members (listed at " (time(last.at)) ")"
                    }
                    None => { "not listed yet" }
                }
            }
            dt { "Up capacity" }
            dd { (memory.up) @if !memory.types.is_empty() { " of " (memory.types.join(", ")) } }
            dt { "Held down by ebb" }
            dd {
                @match memory.down_since {
                    Some(since) => { "since " (time(since)) "; " (memory.up) " is restored at the opening" }
                    None => { "no" }
                }
            }
            @if let Some(p) = &g.stored.pending {
                dt { "Pending change" }
                dd {
                    "to " (p.to) " since " (time(p.at)) " (audit row " (p.seq) "): its answer is \
                     not in yet; resolved from the group's capacity"
                }
            }
            dt { "Tags" }
            dd {
                @match &g.last {
                    Some(last) if !last.tags.is_empty() => {
                        ul.tags { @for (k, v) in &last.tags { li { code { (k) "=" (v) } } } }
                    }
                    _ => { "none listed" }
                }
            }
        }
    }
}

/// The group as the engine sees it from what the store keeps: its tags and capacity as last
/// listed, its live members with the GPU readings kept of the last [`RECENT`] (a running member
/// without any is unread: unknown, so it holds a scale-down, as in a tick), and the overrides
/// on them.
fn decide_now(
    set: &PolicySet,
    group: &GroupRecord,
    members: &[InstanceRecord],
    readings: &[(String, Vec<Sample>)],
    overrides: &Prior,
    now: DateTime<Utc>,
) -> GroupDecision {
    let live: Vec<&InstanceRecord> = members
        .iter()
        .filter(|m| !matches!(m.state.as_str(), "shutting-down" | "terminated"))
        .collect();
    let mut fleet = Fleet {
        levers: crate::cloud::levers(),
        ..Fleet::default()
    };
    for m in &live {
        let state: InstanceState =
            serde_json::from_value(m.state.clone().into()).unwrap_or(InstanceState::Pending);
        let samples = readings
            .iter()
            .find(|(id, _)| id == &m.id)
            .map(|(_, samples)| samples.clone());
        if samples.as_ref().is_some_and(Vec::is_empty) {
            fleet.gpu_unread.insert(
                m.id.clone(),
                "ebb kept no GPU readings of it for the console".into(),
            );
        }
        fleet.instances.push(Instance {
            id: m.id.clone(),
            region: m.region.clone(),
            instance_type: m.instance_type.clone(),
            state,
            state_since: Some(m.state_since),
            lifecycle: Lifecycle::OnDemand,
            launched_at: m.launched_at,
            tags: m
                .tags
                .0
                .iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
            gpus: None,
            gpu_util: samples.unwrap_or_default(),
            via_role: None,
            billing: m.billing_in(state),
            private_ip: None,
        });
    }
    let listed = ScalingGroup {
        name: group.name.clone(),
        region: group.region.clone(),
        tags: group
            .last
            .iter()
            .flat_map(|l| l.tags.iter())
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect(),
        capacity: group
            .last
            .as_ref()
            .map_or(group.stored.memory.up, |l| l.capacity),
        members: live
            .iter()
            .map(|m| GroupMember {
                id: m.id.clone(),
                instance_type: m.instance_type.clone(),
                protected_from_scale_in: false,
            })
            .collect(),
    };
    decide_group(
        now,
        set,
        &fleet,
        overrides,
        &listed,
        Some(&group.stored.memory),
    )
}

/// The governing policy's work hours (when it closes or opens next) and the decision now.
fn window(
    group: &GroupRecord,
    set: Option<&PolicySet>,
    decided: Option<&GroupDecision>,
    now: DateTime<Utc>,
) -> Markup {
    let policy = decided
        .and_then(|d| d.policy.as_ref())
        .and_then(|name| set?.policies.iter().find(|p| &p.name == name));
    let hours = policy.and_then(|p| Some((p, p.work_hours.as_ref()?)));
    html! {
        section aria-labelledby="window" {
            h2 #window { "Work hours and why, now" }
            @match (set, decided) {
                (None, _) | (_, None) => {
                    p.problem { "No valid policy set is loaded, so nothing governs the group here: see Policies." }
                }
                (Some(_), Some(d)) => {
                    @if let Some((p, wh)) = hours {
                        @let st = wh.schedule.status(now);
                        p {
                            "Policy " strong { (p.name) } ": "
                            @if st.in_hours { "in work hours" } @else { "outside work hours" }
                            @if let Some(since) = st.since {
                                @if st.in_hours { ", open since " } @else { ", closed since " }
                                (zoned_time(since, wh.schedule.timezone))
                            }
                            "."
                        }
                        @if let Some(next) = st.next {
                            p {
                                @if st.in_hours {
                                    "Closes " (zoned_time(next, wh.schedule.timezone))
                                    ": min and desired go to 0, max kept."
                                } @else {
                                    "Opens " (zoned_time(next, wh.schedule.timezone))
                                    ": the up capacity " (group.stored.memory.up) " comes back"
                                    @if wh.start_ahead > Duration::zero() {
                                        ", " (wh.start_ahead.num_minutes()) " minutes ahead"
                                    }
                                    "."
                                }
                            }
                        }
                    } @else if let Some(name) = &d.policy {
                        p { "Policy " strong { (name) } ": no work hours." }
                    }
                    p {
                        strong { "Decision: " }
                        (action_name(d.action)) " "
                        code { (d.code.as_str()) } ": " (d.reason)
                        @if d.dry_run { " (dry run)" }
                    }
                    p.note {
                        "What ebb decides at " (time(now)) " with the loaded policies, from the group \
                         as last listed and the GPU readings kept of its members."
                        @if group.stored.pending.is_some() {
                            " While a change is pending, a tick decides nothing for the group."
                        }
                    }
                }
            }
        }
    }
}

/// A group action for people.
fn action_name(action: GroupAction) -> &'static str {
    match action {
        GroupAction::None => "none",
        GroupAction::ScaleDown => "scale down",
        GroupAction::Restore => "restore",
    }
}

fn members_table(members: &[InstanceRecord]) -> Markup {
    scroll(
        "Members",
        html! {
            table {
                thead {
                    tr {
                        th scope="col" { "Instance" }
                        th scope="col" { "Type" }
                        th scope="col" { "State, since" }
                        th scope="col" { "Launched" }
                        th scope="col" { "Decision" }
                    }
                }
                tbody {
                    @for m in members {
                        tr {
                            th scope="row" { (instance_link(&m.id)) }
                            td.short { (m.instance_type) }
                            td { span.state { (m.state) } " " (time(m.state_since)) }
                            td { (super::maybe_time(m.launched_at)) }
                            td { (decision(m)) }
                        }
                    }
                }
            }
        },
    )
}

fn changes_table(changes: &[AuditEntry]) -> Markup {
    let closed: std::collections::HashSet<i64> =
        changes.iter().filter_map(|a| a.entry.intent_seq).collect();
    scroll(
        "Changes",
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
                    @for a in changes {
                        tr {
                            td { (time(a.entry.at)) }
                            (audit_cells(a, &closed))
                        }
                    }
                }
            }
        },
    )
}
