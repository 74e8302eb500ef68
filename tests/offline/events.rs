//! The events ebb posts to `EBB_EVENTS_URL` (`ebb::events`) against the schema it ships,
//! `deploy/events.schema.json`, and the manual's list of their types (docs/events.md).

use crate::common;

use common::events::schema_problems;
use ebb::events::{event_of, NAMED};
use ebb::store::{AuditEntry, NewAuditEntry, Outcome};
use serde_json::json;

/// A stored row of `action` with `outcome`, as the audit log holds it: instance rows carry the
/// instance, a group's rows name the group in their reason.
fn row(action: &str, outcome: Outcome, kind: &str) -> AuditEntry {
    let reason = match kind {
        "group" => "group gpu-pool: outside work hours".to_string(),
        "budget" => "research-daily: $30.00 of $30.00 spent by 2026-11-30 20:00 UTC; 100% of the amount reached".to_string(),
        _ => format!("{action} for a reason"),
    };
    let mut entry = NewAuditEntry::event(
        common::t("2026-11-30T20:00:00Z"),
        "scheduler",
        action,
        reason,
    );
    entry.outcome = outcome;
    if kind == "instance" {
        entry.instance = Some("i-0research1".to_string());
        entry.region = Some("ap-east-1".to_string());
        entry.policy = Some("research".to_string());
        entry.code = Some("outside_hours".to_string());
    }
    if kind == "policy" {
        entry.policy_version = Some("sha256:abc".to_string());
    }
    if outcome == Outcome::Failed {
        entry.error = Some("InsufficientInstanceCapacity: none left".to_string());
        entry.intent_seq = Some(41);
    }
    AuditEntry {
        seq: 42,
        entry,
        prev_hash: vec![1; 32],
        hash: vec![2; 32],
    }
}

#[test]
fn every_kind_of_event_fits_the_shipped_schema() {
    let mut checked = 0;
    for (action, kind, name) in NAMED {
        for outcome in [Outcome::Succeeded, Outcome::Failed, Outcome::Skipped] {
            let event = event_of("urn:ebb:prod", &row(action, outcome, kind)).unwrap();
            let value = serde_json::to_value(&event).unwrap();
            assert_eq!(schema_problems(&value), None, "{value:#}");
            let expected = match outcome {
                Outcome::Succeeded => format!("dev.ebb.{kind}.{name}"),
                _ => format!("dev.ebb.{kind}.{action}_{outcome}"),
            };
            assert_eq!(event.event_type, expected);
            assert_eq!(value["specversion"], "1.0");
            assert_eq!(value["datacontenttype"], "application/json");
            assert_eq!(value["data"]["seq"], 42);
            assert_eq!(value["data"]["hash"], "02".repeat(32));
            assert_eq!(value["id"], "02".repeat(32));
            checked += 1;
        }
    }
    assert_eq!(checked, NAMED.len() * 3);
}

#[test]
fn the_schema_refuses_what_is_not_an_event() {
    let good = serde_json::to_value(
        event_of("urn:ebb:prod", &row("stop", Outcome::Succeeded, "instance")).unwrap(),
    )
    .unwrap();
    assert_eq!(schema_problems(&good), None);
    let broken = [
        ("specversion", json!("0.3")),
        ("type", json!("com.example.stopped")),
        ("id", json!("")),
        ("source", json!("")),
        ("time", json!("yesterday")),
    ];
    for (field, value) in broken {
        let mut event = good.clone();
        event[field] = value;
        assert!(schema_problems(&event).is_some(), "{field}: {event:#}");
    }
    let mut intent = good.clone();
    intent["data"]["outcome"] = json!("intent");
    assert!(schema_problems(&intent).is_some());
    let mut unhashed = good.clone();
    unhashed["data"].as_object_mut().unwrap().remove("hash");
    assert!(schema_problems(&unhashed).is_some());
}

#[test]
fn the_manual_lists_every_event_type() {
    let doc = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/events.md"),
    )
    .unwrap();
    for (action, kind, name) in NAMED {
        let named = format!("`dev.ebb.{kind}.{name}`");
        assert!(doc.contains(&named), "docs/events.md does not list {named}");
        assert!(
            doc.contains(&format!("`{action}`")),
            "docs/events.md does not name the action `{action}`"
        );
    }
}
