//! What ebb's scale-downs of Auto Scaling groups saved: a scale-down keeps the members it
//! removed from running until the group's next restore (or the window's end). Those hours,
//! times the members removed, are the group's instance-hours saved, and times the members'
//! on-demand price its dollars.

use super::tally::Tally;
use super::{GroupChange, History, InstanceInfo, Measures, Window};
use chrono::{DateTime, Utc};
use serde::Serialize;
use std::collections::BTreeMap;

/// One group's measures.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GroupMeasures {
    /// The group's region.
    pub region: String,
    /// The group's name.
    pub group: String,
    /// Its measures: the scale-downs, instance-hours and dollars of the groups' columns.
    #[serde(flatten)]
    pub measures: Measures,
}

/// Adds every group's scaled-down stretches to `tally`, and returns each group's measures, by
/// region and name.
pub(super) fn groups(
    history: &History,
    window: Window,
    price: &dyn Fn(&str, &str) -> Option<f64>,
    tally: &mut Tally,
) -> Vec<GroupMeasures> {
    let mut by_group: BTreeMap<(&str, &str), Vec<&GroupChange>> = BTreeMap::new();
    for c in &history.groups {
        by_group.entry((&c.region, &c.group)).or_default().push(c);
    }
    let mut out = Vec::new();
    for ((region, group), mut changes) in by_group {
        changes.sort_by_key(|c| c.at);
        let mut own = Measures::default();
        let mut open: Option<&GroupChange> = None;
        for c in changes {
            if c.scale_down {
                // A second scale-down while down (never made by ebb) keeps the first stretch.
                open.get_or_insert(c);
            } else if let Some(down) = open.take() {
                own.add(&stretch(down, c.at, window, price, tally));
            }
        }
        if let Some(down) = open {
            let end = window.until.max(down.at);
            own.add(&stretch(down, end, window, price, tally));
        }
        own.round();
        out.push(GroupMeasures {
            region: region.to_string(),
            group: group.to_string(),
            measures: own,
        });
    }
    out
}

/// Adds the stretch a scale-down `down` kept the group down until `to`; returns what it added.
fn stretch(
    down: &GroupChange,
    to: DateTime<Utc>,
    window: Window,
    price: &dyn Fn(&str, &str) -> Option<f64>,
    tally: &mut Tally,
) -> Measures {
    let info = InstanceInfo {
        region: down.region.clone(),
        instance_type: down.instance_type.clone().unwrap_or_default(),
        ..InstanceInfo::default()
    };
    let policy = down.policy.as_deref();
    let members = f64::from(down.members_removed());
    let rate = down
        .instance_type
        .as_deref()
        .and_then(|t| price(&down.region, t));
    let mut added = Measures::default();
    if window.contains(down.at) {
        let m = Measures {
            group_scale_downs: 1,
            ..Measures::default()
        };
        added.add(&m);
        tally.add(down.at.date_naive(), policy, Some(&info), m);
    }
    if let Some(span) = window.clip(down.at, to) {
        let per_hour = |h: f64| {
            let saved = rate.map_or(0.0, |r| r * members * h);
            Measures {
                saved_usd: saved,
                group_saved_usd: saved,
                group_hours: members * h,
                ..Measures::default()
            }
        };
        added.add(&per_hour(super::hours(span.1 - span.0)));
        tally.add_span(span, policy, Some(&info), per_hour);
    }
    added
}
