//! `ebb explain --format json`: one instance's decision with the steps that led to it, or one
//! Auto Scaling group's.

use super::groups::audit_action;
use crate::engine::{Explanation, GroupDecision};
use chrono::SecondsFormat;
use serde_json::json;

/// An instance's explanation as JSON: `{instance, at, action, policy, code, reason, dry_run,
/// stop_at, owner, steps}`.
pub fn explanation_json(e: &Explanation) -> String {
    let d = &e.decision;
    let value = json!({
        "instance": d.instance,
        "at": e.at.to_rfc3339_opts(SecondsFormat::Secs, true),
        "action": d.action.as_str(),
        "policy": d.policy,
        "code": d.code.as_str(),
        "reason": d.reason,
        "dry_run": d.dry_run,
        "stop_at": d.stop_at.map(|t| t.to_rfc3339_opts(SecondsFormat::Secs, true)),
        "owner": e.owner,
        "steps": e.steps,
    });
    pretty(&value)
}

/// A group's decision as JSON: `{group, region, action, to, policy, code, reason, dry_run}`,
/// `action` the audit action it becomes (or `none`), `to` the capacity it sets.
pub fn group_explanation_json(d: &GroupDecision) -> String {
    let value = json!({
        "group": d.group,
        "region": d.region,
        "action": audit_action(d.action),
        "to": d.to.map(|c| json!({"min": c.min, "desired": c.desired, "max": c.max})),
        "policy": d.policy,
        "code": d.code.as_str(),
        "reason": d.reason,
        "dry_run": d.dry_run,
    });
    pretty(&value)
}

fn pretty(value: &serde_json::Value) -> String {
    let mut text = serde_json::to_string_pretty(value).unwrap_or_else(|_| "{}".into());
    text.push('\n');
    text
}
