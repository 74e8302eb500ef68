//! Every outcome in the audit log as a CloudEvents 1.0 event, for `EBB_EVENTS_URL`: what other
//! tools (paging, chargeback, a cache to warm after a start) react to. `serve`'s event sender
//! (`serve/events.rs`) posts them; docs/events.md lists the types.
//!
//! The envelope is a serde struct, not the `cloudevents-sdk` crate: for the eight attributes of
//! the structured JSON mode it would bring two proc-macro crates (snafu, delegate-attr) and
//! uuid, turn on chrono's and url's default features (which the rest of the build would then
//! share), and its HTTP binding is for reqwest 0.12 while ebb uses 0.13.
//! `deploy/events.schema.json` is the envelope's and `data`'s schema; the tests validate events
//! against it.

use crate::output::audit_row_json;
use crate::store::{hex, AuditEntry, Outcome};
use chrono::SecondsFormat;
use serde::{Deserialize, Serialize};

/// The CloudEvents version of the envelope.
pub const SPEC_VERSION: &str = "1.0";
/// The `Content-Type` of a post: one event in the structured JSON mode.
pub const CONTENT_TYPE: &str = "application/cloudevents+json; charset=utf-8";
/// The `datacontenttype` of every event: `data` is JSON.
pub const DATA_CONTENT_TYPE: &str = "application/json";

/// The audit actions whose success has a name of its own: the action, what the event is
/// about, and the name (`dev.ebb.instance.stopped`). Any other outcome is named
/// `ACTION_OUTCOME` (`dev.ebb.instance.start_failed`).
pub const NAMED: &[(&str, &str, &str)] = &[
    ("start", "instance", "started"),
    ("stop", "instance", "stopped"),
    ("hibernate", "instance", "hibernated"),
    ("notify", "instance", "notified"),
    ("withdraw_notice", "instance", "notice_withdrawn"),
    ("resize", "instance", "resized"),
    ("reserve_capacity", "instance", "capacity_reserved"),
    ("target_reservation", "instance", "reservation_targeted"),
    ("cancel_reservation", "instance", "reservation_cancelled"),
    ("migrate_to_spot", "instance", "spot_step"),
    ("relaunch_spot", "instance", "spot_relaunched"),
    ("fallback_on_demand", "instance", "on_demand_launched"),
    ("reclaim", "instance", "reclaim_step"),
    ("restore_asked", "instance", "restore_asked"),
    ("restore", "instance", "restored"),
    ("override", "instance", "override_made"),
    ("override_revoked", "instance", "override_revoked"),
    ("scale_down_group", "group", "scaled_down"),
    ("restore_group", "group", "restored"),
    ("policy_version", "policy", "changed"),
    ("budget_notice", "budget", "threshold_crossed"),
    ("budget_raise", "budget", "raised"),
    ("calendar_notice", "calendar", "running_out"),
];

/// One event, as posted (structured content mode, JSON format).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CloudEvent {
    /// `1.0`.
    pub specversion: String,
    /// The audit row's hash (hex): the same for every delivery of the row, so a receiver
    /// drops a redelivery by it.
    pub id: String,
    /// The ebb deployment (`EBB_EVENTS_SOURCE`).
    pub source: String,
    /// `dev.ebb.KIND.NAME`, like `dev.ebb.instance.stopped`.
    #[serde(rename = "type")]
    pub event_type: String,
    /// The instance, the Auto Scaling group, the policy-set version or the budget the row is
    /// about.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subject: Option<String>,
    /// When it happened: the row's `at`.
    pub time: String,
    /// `application/json`.
    pub datacontenttype: String,
    /// The audit row, as `ebb audit --format json` writes it, with its `seq` and `hash`.
    pub data: serde_json::Value,
}

/// The event of audit row `row` from deployment `source`; `None` for a row that is not an
/// outcome of something done: an intent (its outcome follows) or a dry run.
pub fn event_of(source: &str, row: &AuditEntry) -> Option<CloudEvent> {
    let e = &row.entry;
    if e.outcome == Outcome::Intent || e.dry_run {
        return None;
    }
    let (kind, subject) = about(row);
    Some(CloudEvent {
        specversion: SPEC_VERSION.to_string(),
        id: hex(&row.hash),
        source: source.to_string(),
        event_type: format!("dev.ebb.{kind}.{}", name(&e.action, e.outcome)),
        subject,
        time: e.at.to_rfc3339_opts(SecondsFormat::Micros, true),
        datacontenttype: DATA_CONTENT_TYPE.to_string(),
        data: audit_row_json(row),
    })
}

/// What `row` is about: the kind (`instance`, `group`, `policy`, `budget`, `calendar`,
/// `deployment`) and
/// the subject.
fn about(row: &AuditEntry) -> (&'static str, Option<String>) {
    let e = &row.entry;
    if let Some(instance) = &e.instance {
        return ("instance", Some(instance.clone()));
    }
    // A group's rows name it only in their reason, `group NAME: ...` (reconcile/groups.rs).
    if let Some(group) = e
        .reason
        .strip_prefix("group ")
        .and_then(|rest| rest.split_once(": "))
        .map(|(name, _)| name)
    {
        return ("group", Some(group.to_string()));
    }
    match NAMED.iter().find(|(action, _, _)| *action == e.action) {
        Some((_, "policy", _)) => ("policy", e.policy_version.clone()),
        // A calendar's rows open with its name: `calendar NAME names no date in ...`.
        Some((_, "calendar", _)) => (
            "calendar",
            e.reason
                .strip_prefix("calendar ")
                .and_then(|rest| rest.split_whitespace().next())
                .map(str::to_string),
        ),
        // A budget's rows open with its name (and `per` value): `NAME: $X of $Y spent ...`.
        Some((_, "budget", _)) => {
            let label = e
                .reason
                .split_once(": ")
                .map(|(label, _)| label.to_string());
            ("budget", label)
        }
        _ => ("deployment", None),
    }
}

/// The last part of the type: the success's own name, or `ACTION_OUTCOME`.
fn name(action: &str, outcome: Outcome) -> String {
    match NAMED.iter().find(|(a, _, _)| *a == action) {
        Some((_, _, named)) if outcome == Outcome::Succeeded => named.to_string(),
        _ => format!("{action}_{outcome}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::NewAuditEntry;
    use chrono::{TimeZone, Utc};

    fn row(action: &str, outcome: Outcome, instance: Option<&str>, reason: &str) -> AuditEntry {
        let mut entry = NewAuditEntry::event(
            Utc.with_ymd_and_hms(2026, 11, 30, 20, 0, 0).unwrap(),
            "scheduler",
            action,
            reason.to_string(),
        );
        entry.outcome = outcome;
        entry.instance = instance.map(str::to_string);
        AuditEntry {
            seq: 7,
            entry,
            prev_hash: vec![0; 32],
            hash: vec![0xab; 32],
        }
    }

    #[test]
    fn types_subjects_and_ids_follow_the_row() {
        let stop = event_of(
            "urn:ebb:test",
            &row("stop", Outcome::Succeeded, Some("i-1"), "r"),
        )
        .unwrap();
        assert_eq!(stop.event_type, "dev.ebb.instance.stopped");
        assert_eq!(stop.subject.as_deref(), Some("i-1"));
        assert_eq!(stop.id, "ab".repeat(32));
        assert_eq!(stop.data["seq"], 7);
        assert_eq!(stop.data["hash"], "ab".repeat(32));
        assert_eq!(stop.time, "2026-11-30T20:00:00.000000Z");
        let failed = event_of("s", &row("start", Outcome::Failed, Some("i-1"), "r")).unwrap();
        assert_eq!(failed.event_type, "dev.ebb.instance.start_failed");
        let group = event_of(
            "s",
            &row(
                "scale_down_group",
                Outcome::Succeeded,
                None,
                "group gpu-pool: after hours",
            ),
        )
        .unwrap();
        assert_eq!(group.event_type, "dev.ebb.group.scaled_down");
        assert_eq!(group.subject.as_deref(), Some("gpu-pool"));
        let budget = event_of(
            "s",
            &row(
                "budget_notice",
                Outcome::Succeeded,
                None,
                "per-person (mei): $240.00 of $300.00 spent by 2026-12-03 10:00 Europe/Berlin; 80% of the amount reached",
            ),
        )
        .unwrap();
        assert_eq!(budget.event_type, "dev.ebb.budget.threshold_crossed");
        assert_eq!(budget.subject.as_deref(), Some("per-person (mei)"));
        let unknown = event_of("s", &row("reboot", Outcome::Skipped, None, "r")).unwrap();
        assert_eq!(unknown.event_type, "dev.ebb.deployment.reboot_skipped");
        assert_eq!(unknown.subject, None);
    }

    #[test]
    fn intents_and_dry_runs_are_not_events() {
        assert!(event_of("s", &row("stop", Outcome::Intent, Some("i-1"), "r")).is_none());
        let mut dry = row("stop", Outcome::Skipped, Some("i-1"), "r");
        dry.entry.dry_run = true;
        assert!(event_of("s", &dry).is_none());
    }
}
