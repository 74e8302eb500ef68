//! Reclaiming boxes stopped for long (`stopped.reclaim_after`): when one is due, and what keeps
//! it from being reclaimed, re-checked before each of its calls.

use crate::common;

use chrono::Duration;
use common::*;
use ebb::engine::{reclaim_due, reclaim_hold, Override, ReclaimHold};
use ebb::fleet::{Instance, InstanceState};
use ebb::policy::PolicySet;

/// Box i-1 of team research, stopped since `since`, with `tags` besides.
fn stopped_box(since: &str, tags: &[(&str, &str)]) -> Instance {
    let mut all = vec![("team", "research")];
    all.extend_from_slice(tags);
    let mut b = instance("i-1", &all);
    b.state = InstanceState::Stopped;
    b.state_since = Some(t(since));
    b
}

const RECLAIMING: &str = "policies:\n  - name: research\n    match: {tags: {team: research}}\n    stopped: {reclaim_after: 30d, reclaim: image}\n";

#[test]
fn a_box_is_due_reclaim_after_its_stop_and_never_when_that_is_unknown() {
    let set = policies(RECLAIMING);
    let p = &set.policies[0];
    let b = stopped_box("2026-11-01T10:00:00Z", &[]);
    assert_eq!(reclaim_due(p, &b), Some(t("2026-12-01T10:00:00Z")));
    let unknown = Instance {
        state_since: None,
        ..b.clone()
    };
    assert_eq!(reclaim_due(p, &unknown), None);
    let running = Instance {
        state: InstanceState::Running,
        ..b.clone()
    };
    assert_eq!(reclaim_due(p, &running), None);
    let without = policies("policies:\n  - name: research\n    match: {}\n");
    assert_eq!(reclaim_due(&without.policies[0], &b), None);
}

#[test]
fn every_protection_a_start_and_a_changed_policy_hold_a_reclaim() {
    let set = policies(RECLAIMING);
    let since = t("2026-11-01T10:00:00Z");
    let now = t("2026-12-02T00:00:00Z");
    let hold = |b: Option<&Instance>, set: &PolicySet, o: Option<&Override>, now| {
        reclaim_hold(b, set, "research", since, o, now)
    };
    let b = stopped_box("2026-11-01T10:00:00Z", &[]);
    assert_eq!(hold(Some(&b), &set, None, now), ReclaimHold::Free);
    assert_eq!(hold(None, &set, None, now), ReclaimHold::Unknown);
    let why = |h: ReclaimHold| match h {
        ReclaimHold::Held(why) => why,
        other => panic!("not held: {other:?}"),
    };
    // Not due yet.
    assert!(why(hold(Some(&b), &set, None, since + Duration::days(29))).contains("due"));
    let skip = stopped_box("2026-11-01T10:00:00Z", &[("ebb:skip", "true")]);
    assert!(why(hold(Some(&skip), &set, None, now)).contains("ebb:skip"));
    let kept = stopped_box(
        "2026-11-01T10:00:00Z",
        &[("ebb:keep-until", "2026-12-09T00:00:00Z")],
    );
    assert!(why(hold(Some(&kept), &set, None, now)).contains("keep-until"));
    let owned = stopped_box(
        "2026-11-01T10:00:00Z",
        &[("aws:autoscaling:groupName", "trainers")],
    );
    assert!(why(hold(Some(&owned), &set, None, now)).contains("owned by"));
    let mut elsewhere = b.clone();
    elsewhere.via_role = Some("arn:aws:iam::222222222222:role/ebb".into());
    assert!(why(hold(Some(&elsewhere), &set, None, now)).contains("another account"));
    let moving = stopped_box("2026-11-01T10:00:00Z", &[("ebb:migrating", "7")]);
    assert!(why(hold(Some(&moving), &set, None, now)).contains("migration 7"));
    let o = Override {
        instance: "i-1".into(),
        until: t("2026-12-03T00:00:00Z"),
        reason: "thesis data".into(),
        by: "mei".into(),
    };
    assert!(why(hold(Some(&b), &set, Some(&o), now)).contains("thesis data"));
    let past = Override {
        until: t("2026-12-01T00:00:00Z"),
        ..o.clone()
    };
    assert_eq!(hold(Some(&b), &set, Some(&past), now), ReclaimHold::Free);
    let restarted = stopped_box("2026-11-20T10:00:00Z", &[]);
    assert!(why(hold(Some(&restarted), &set, None, now)).contains("started and stopped"));
    let running = Instance {
        state: InstanceState::Running,
        ..b.clone()
    };
    assert!(why(hold(Some(&running), &set, None, now)).contains("running"));
    let gone = policies("policies:\n  - name: research\n    match: {tags: {team: research}}\n");
    assert!(why(hold(Some(&b), &gone, None, now)).contains("no stopped rule"));
    let dry = policies(&format!("{RECLAIMING}    dry_run: true\n"));
    assert!(why(hold(Some(&b), &dry, None, now)).contains("dry run"));
    let other = policies(&RECLAIMING.replace("name: research", "name: lab"));
    assert!(why(hold(Some(&b), &other, None, now)).contains("policy lab governs"));
}
