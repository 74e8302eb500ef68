//! The Auto Scaling groups' decisions for people: the table `ebb plan` prints after the
//! instances', and `ebb explain` of a group.

use super::table;
use crate::engine::{GroupAction, GroupDecision};
use crate::fleet::ScalingGroup;
use chrono::{DateTime, Utc};

/// The audit action a group action becomes, or `none`.
pub(super) fn audit_action(action: GroupAction) -> &'static str {
    match action {
        GroupAction::None => "none",
        GroupAction::ScaleDown => "scale_down_group",
        GroupAction::Restore => "restore_group",
    }
}

/// A group action as `ebb plan` prints it: the audit action it becomes, or `none`.
fn action_name(d: &GroupDecision) -> String {
    let name = audit_action(d.action);
    if d.dry_run && d.action != GroupAction::None {
        format!("{name} (dry run)")
    } else {
        name.to_string()
    }
}

/// The groups' decisions as a table under a heading; empty without groups.
pub fn plan_groups_table(decisions: &[GroupDecision]) -> String {
    if decisions.is_empty() {
        return String::new();
    }
    let rows: Vec<[String; 6]> = decisions
        .iter()
        .map(|d| {
            [
                d.group.clone(),
                d.region.clone(),
                action_name(d),
                d.policy.clone().unwrap_or_else(|| "-".into()),
                d.code.to_string(),
                d.reason.clone(),
            ]
        })
        .collect();
    let mut text = String::from(
        "\nAuto Scaling groups: scheduled through their capacity, never member by member\n",
    );
    text.push_str(&table(
        &["GROUP", "REGION", "ACTION", "POLICY", "CODE", "REASON"],
        &rows,
    ));
    text
}

/// Why `group` gets decision `d` at `at`, for `ebb explain`.
pub fn group_explanation(group: &ScalingGroup, d: &GroupDecision, at: DateTime<Utc>) -> String {
    let members: Vec<&str> = group.members.iter().map(|m| m.id.as_str()).collect();
    let mut text = format!(
        "Auto Scaling group {} ({}) at {}\n  - capacity now: {}\n  - members: {}\n  - up capacity (restored at the opening): {}\n",
        group.name,
        group.region,
        at.to_rfc3339(),
        group.capacity,
        if members.is_empty() { "none".to_string() } else { members.join(", ") },
        d.memory.up,
    );
    if let Some(since) = d.memory.down_since {
        text.push_str(&format!(
            "  - held down by ebb since {}\n",
            since.to_rfc3339()
        ));
    }
    text.push_str(&format!(
        "decision: {} [{}] by {}: {}{}",
        action_name(d),
        d.code,
        d.policy.as_deref().unwrap_or("no policy"),
        d.reason,
        if d.dry_run { " (dry run)" } else { "" }
    ));
    text
}
