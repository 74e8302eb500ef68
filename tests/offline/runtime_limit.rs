//! The runtime limits. `runtime.max`: a box running that long from its last start is stopped
//! after its notice whether busy or not, even outside hours while busy deferral would wait;
//! a late notice delays the stop by `notify_before`; a protection, `ebb:skip` or an owner keeps
//! it; a box whose last start is unknown is not stopped for its runtime.
//! `runtime.max_busy_without_checkpoint`: a box busy at every reading for that long whose
//! `ebb:checkpoint-at` is older is stopped after its notice; a dip, a gap, an unread GPU, a
//! fresh checkpoint or no tag at all keeps it. Through `engine::decide` and the replay's
//! decider, which must agree. And the checks of the section.

use crate::common;

use common::*;
use ebb::engine::{Action, Code, Decider, InstanceFacts};
use ebb::policy::PolicySet;

/// Busy-deferred stops outside 09:00–19:00 UTC on weekdays, and a 72 h limit.
const POLICY: &str = r#"
policies:
  - name: training
    match: {tags: {team: ml}}
    work_hours:
      timezone: UTC
      periods: [{days: mon-fri, start: "09:00", stop: "19:00"}]
      outside_hours: stop
      busy_defers_stop: true
    runtime: {max: 72h, notify_before: 1h}
"#;

/// Started Friday 2026-11-27 10:00: the limit is Monday 10:00, its notice from 09:00.
const STARTED: &str = "2026-11-27T10:00:00Z";

/// A box of team ml started at `started` (unknown with `None`), at 100 % GPU until Monday noon,
/// with `tags` besides.
fn busy_box(started: Option<&str>, tags: &[(&str, &str)]) -> World {
    let mut all = vec![("team", "ml")];
    all.extend_from_slice(tags);
    let mut i = instance("i-train", &all);
    i.launched_at = started.map(t);
    i.gpu_util = steady("2026-11-30T05:00:00Z", "2026-11-30T12:00:00Z", 100.0);
    World::with(vec![i])
}

fn noticed(w: World, at: &str) -> World {
    w.facts(
        "i-train",
        InstanceFacts {
            notified_at: Some(t(at)),
            ..InstanceFacts::default()
        },
    )
}

/// The verdict of `decide` at `now` and of the replay's decider, which must be the same.
fn verdict_at(w: &World, set: &PolicySet, now: &str) -> (Action, Code, String) {
    let d = w.one(now, set);
    let (fleet, prior) = w.fleet();
    let replayed = Decider::new(set).decide(t(now), &fleet, &prior);
    assert_eq!(
        (replayed[0].action, replayed[0].code, replayed[0].stop_at),
        (d.action, d.code, d.stop_at),
        "the replay's decider agrees"
    );
    (d.action, d.code, d.reason)
}

fn verdict(w: &World, now: &str) -> (Action, Code, String) {
    verdict_at(w, &policies(POLICY), now)
}

#[test]
fn a_busy_box_gets_its_notice_before_the_limit_and_is_stopped_at_it() {
    let w = busy_box(Some(STARTED), &[]);
    // In hours, before the notice is due: nothing.
    let (action, code, reason) = verdict(&w, "2026-11-30T08:59:00Z");
    assert_eq!(action, Action::None, "{code:?}: {reason}");
    assert_ne!(code, Code::RuntimeNotice);

    let d = w.one("2026-11-30T09:00:00Z", &policies(POLICY));
    assert_eq!(
        (d.action, d.code),
        (Action::Notify, Code::RuntimeNotice),
        "{}",
        d.reason
    );
    assert_eq!(d.stop_at, Some(t("2026-11-30T10:00:00Z")));
    assert!(
        d.reason.contains("running since 2026-11-27 10:00")
            && d.reason.contains("runtime.max 3d is reached at 10:00"),
        "{}",
        d.reason
    );

    let w = noticed(w, "2026-11-30T09:00:00Z");
    let (action, code, reason) = verdict(&w, "2026-11-30T09:59:00Z");
    assert_eq!(
        (action, code),
        (Action::None, Code::NoticePending),
        "{reason}"
    );
    let (action, code, reason) = verdict(&w, "2026-11-30T10:00:00Z");
    assert_eq!(
        (action, code),
        (Action::Stop, Code::RuntimeExceeded),
        "{reason}"
    );
    assert!(reason.contains("busy or not"), "{reason}");
}

#[test]
fn a_notice_given_late_delays_the_stop_by_notify_before() {
    // ebb was not running at 09:00: the notice goes out at 10:30, the stop an hour later.
    let w = busy_box(Some(STARTED), &[]);
    let d = w.one("2026-11-30T10:30:00Z", &policies(POLICY));
    assert_eq!((d.action, d.code), (Action::Notify, Code::RuntimeNotice));
    assert_eq!(d.stop_at, Some(t("2026-11-30T11:30:00Z")));
    let w = noticed(w, "2026-11-30T10:30:00Z");
    let (action, code, _) = verdict(&w, "2026-11-30T11:29:00Z");
    assert_eq!((action, code), (Action::None, Code::NoticePending));
    let (action, code, _) = verdict(&w, "2026-11-30T11:30:00Z");
    assert_eq!((action, code), (Action::Stop, Code::RuntimeExceeded));
    // A notice from before the notice window (an earlier run's) does not count.
    let w = noticed(busy_box(Some(STARTED), &[]), "2026-11-30T08:00:00Z");
    let (action, code, _) = verdict(&w, "2026-11-30T10:30:00Z");
    assert_eq!((action, code), (Action::Notify, Code::RuntimeNotice));
}

#[test]
fn outside_hours_the_limit_stops_a_box_busy_deferral_keeps() {
    // Started Saturday 2026-11-28 03:00: the limit is Tuesday 03:00, outside hours, where a
    // busy GPU defers the scheduled stop without end (no max_defer).
    let mut w = busy_box(Some("2026-11-28T03:00:00Z"), &[]);
    w.instances[0].gpu_util = steady("2026-12-01T01:00:00Z", "2026-12-01T04:00:00Z", 100.0);
    let (action, code, _) = verdict(&w, "2026-12-01T01:00:00Z");
    assert_eq!((action, code), (Action::None, Code::BusyDeferred));
    let (action, code, _) = verdict(&w, "2026-12-01T02:00:00Z");
    assert_eq!((action, code), (Action::Notify, Code::RuntimeNotice));
    let w = noticed(w, "2026-12-01T02:00:00Z");
    let (action, code, reason) = verdict(&w, "2026-12-01T02:30:00Z");
    assert_eq!(
        (action, code),
        (Action::None, Code::NoticePending),
        "{reason}"
    );
    let (action, code, _) = verdict(&w, "2026-12-01T03:00:00Z");
    assert_eq!((action, code), (Action::Stop, Code::RuntimeExceeded));
}

#[test]
fn a_protection_skip_or_owner_keeps_the_box_and_an_unknown_start_stops_nothing() {
    let now = "2026-11-30T10:30:00Z";
    let served = |w| noticed(w, "2026-11-30T09:00:00Z");
    let (action, code, _) = verdict(
        &served(busy_box(
            Some(STARTED),
            &[("ebb:keep-until", "2026-11-30T12:00:00Z")],
        )),
        now,
    );
    assert_eq!((action, code), (Action::None, Code::KeepUntil));
    let (action, code, _) = verdict(
        &served(busy_box(Some(STARTED), &[("ebb:skip", "true")])),
        now,
    );
    assert_eq!((action, code), (Action::None, Code::SkipTag));
    let owned = busy_box(Some(STARTED), &[("aws:autoscaling:groupName", "trainers")]);
    let (action, code, _) = verdict(&served(owned), now);
    assert_eq!((action, code), (Action::None, Code::OwnedByAsg));
    // A cloud that does not say when the box last started (Tencent's CVM): not stopped.
    let (action, code, reason) = verdict(&served(busy_box(None, &[])), now);
    assert_eq!(action, Action::None, "{code:?}: {reason}");
    assert_ne!(code, Code::RuntimeExceeded);
}

#[test]
fn the_runtime_section_is_checked_when_the_policy_is_read() {
    for (runtime, says) in [
        ("{notify_before: 1h}", "runtime needs \"max\""),
        (
            "{max: 2h, notify_before: 2h}",
            "must be shorter than runtime.max",
        ),
        ("{max: 0s}", "runtime.max must be longer than zero"),
        ("{max: lots}", "is not a duration"),
        ("{max: 72h, notice: 1h}", "unknown key \"notice\""),
        ("{notify_before: 10m}", "or \"max_busy_without_checkpoint\""),
        (
            "{max: 72h, max_busy_without_checkpoint: 30m, notify_before: 30m}",
            "must be shorter than runtime.max and max_busy_without_checkpoint",
        ),
    ] {
        let text = format!(
            "policies:\n  - name: p\n    match: {{tags: {{a: b}}}}\n    runtime: {runtime}\n"
        );
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("p.yaml"), text).unwrap();
        let err = ebb::policy::load(&[dir.path().to_path_buf()])
            .map(|_| ())
            .unwrap_err()
            .to_string();
        assert!(err.contains(says), "{runtime}: {err}");
        assert!(err.contains("p.yaml:4"), "path:line: {err}");
    }
    // Without notify_before: an hour, or half of a shorter max.
    for (max, notice_from) in [
        ("72h", "2026-11-30T09:00:00Z"),
        ("1h", "2026-11-27T10:30:00Z"),
    ] {
        let set = policies(&format!(
            "policies:\n  - name: p\n    match: {{tags: {{team: ml}}}}\n    runtime: {{max: {max}}}\n"
        ));
        let w = busy_box(Some(STARTED), &[]);
        let d = w.one(notice_from, &set);
        assert_eq!(
            (d.action, d.code),
            (Action::Notify, Code::RuntimeNotice),
            "{max}"
        );
        let before = t(notice_from) - chrono::Duration::seconds(1);
        let d = w.one(&before.to_rfc3339(), &set);
        assert_eq!(d.action, Action::None, "{max}: {}", d.reason);
    }
}

/// No idle stop under 5 %, and a busy run may last 6 h past its last checkpoint.
const CHECKPOINTS: &str = r#"
policies:
  - name: training
    match: {tags: {team: ml}}
    idle: {gpu_below: 5, for: 30m}
    runtime: {max_busy_without_checkpoint: 6h, notify_before: 30m}
"#;

/// A box started Monday 00:00, at 100 % GPU every five minutes until noon, its last
/// checkpoint at `checkpoint` (none with `None`).
fn training(checkpoint: Option<&str>) -> World {
    let tags: Vec<(&str, &str)> = checkpoint
        .map(|at| ("ebb:checkpoint-at", at))
        .into_iter()
        .collect();
    let mut w = busy_box(Some("2026-11-30T00:00:00Z"), &tags);
    w.instances[0].gpu_util = steady("2026-11-30T00:00:00Z", "2026-11-30T12:00:00Z", 100.0);
    w
}

fn checkpoint_verdict(w: &World, now: &str) -> (Action, Code, String) {
    verdict_at(w, &policies(CHECKPOINTS), now)
}

#[test]
fn a_box_busy_past_its_last_checkpoint_for_the_limit_is_stopped_after_notice() {
    let w = training(Some("2026-11-30T05:00:00Z"));
    let (action, code, reason) = checkpoint_verdict(&w, "2026-11-30T10:59:00Z");
    assert_eq!(action, Action::None, "{code:?}: {reason}");
    let d = w.one("2026-11-30T11:00:00Z", &policies(CHECKPOINTS));
    assert_eq!(
        (d.action, d.code),
        (Action::Notify, Code::RuntimeNotice),
        "{}",
        d.reason
    );
    assert_eq!(d.stop_at, Some(t("2026-11-30T11:30:00Z")));
    let w = noticed(w, "2026-11-30T11:00:00Z");
    let (action, code, _) = checkpoint_verdict(&w, "2026-11-30T11:29:00Z");
    assert_eq!((action, code), (Action::None, Code::NoticePending));
    let (action, code, reason) = checkpoint_verdict(&w, "2026-11-30T11:30:00Z");
    assert_eq!(
        (action, code),
        (Action::Stop, Code::CheckpointOverdue),
        "{reason}"
    );
    assert!(
        reason.contains("last checkpoint (ebb:checkpoint-at) was 05:00 UTC, 6h30m ago"),
        "{reason}"
    );
    // A checkpoint since the notice: the work saves itself, nothing to stop.
    let fresh = noticed(
        training(Some("2026-11-30T11:10:00Z")),
        "2026-11-30T11:00:00Z",
    );
    let (action, code, reason) = checkpoint_verdict(&fresh, "2026-11-30T11:30:00Z");
    assert_eq!(action, Action::None, "{code:?}: {reason}");
    assert_ne!(code, Code::NoticePending);
}

#[test]
fn a_dip_a_gap_an_unread_gpu_or_no_checkpoint_tag_keeps_a_busy_box() {
    let now = "2026-11-30T11:30:00Z";
    let served = |w| noticed(w, "2026-11-30T11:00:00Z");
    let stale = "2026-11-30T05:00:00Z";
    let mut dip = training(Some(stale));
    let at = dip.instances[0]
        .gpu_util
        .iter()
        .position(|s| s.at == t("2026-11-30T08:00:00Z"));
    dip.instances[0].gpu_util[at.unwrap()].percent = 2.0;
    let mut gap = training(Some(stale));
    gap.instances[0]
        .gpu_util
        .retain(|s| s.at < t("2026-11-30T07:00:00Z") || s.at > t("2026-11-30T07:30:00Z"));
    let unread = training(Some(stale)).unread("i-train", "throttled");
    let cases = [
        ("a dip below 5 %", dip),
        ("a 35-minute gap", gap),
        ("an unread GPU", unread),
        ("no checkpoint tag", training(None)),
        (
            "a checkpoint tag that is not a time",
            training(Some("yesterday")),
        ),
    ];
    for (what, w) in cases {
        let (action, code, reason) = checkpoint_verdict(&served(w), now);
        assert_eq!(action, Action::None, "{what}: {code:?}: {reason}");
        assert_ne!(code, Code::NoticePending, "{what}");
    }
    let started_late = {
        let mut w = training(Some(stale));
        w.instances[0].launched_at = Some(t("2026-11-30T06:00:00Z"));
        w
    };
    let (action, _, reason) = checkpoint_verdict(&served(started_late), now);
    assert_eq!(action, Action::None, "started 5h30m ago: {reason}");
    let (action, code, _) = checkpoint_verdict(&served(training(Some(stale))), now);
    assert_eq!(
        (action, code),
        (Action::Stop, Code::CheckpointOverdue),
        "the same box, none of those"
    );
}
