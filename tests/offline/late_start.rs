//! A late start is a person's choice (`work_hours.late_start`): an instance a person started
//! after the close is not stopped for being outside hours until it has gone idle, counted from
//! the start; `late_start: enforce` stops it at once. The engine's semantics, then `ebb plan` and
//! `ebb explain` on a snapshot through the binary. Shanghai closes at 20:00 (12:00 UTC);
//! 2026-11-30 is a Monday.

use crate::common;

use common::*;
use ebb::engine::{Action, Code, Decision, InstanceFacts, Override};
use ebb::policy::PolicySet;

/// Research boxes in Shanghai, 08:30-20:00 on weekdays; no idle rule, so a late start must be
/// idle for `late_start.idle_for`, by default 1 h.
const SHANGHAI: &str = r#"
policies:
  - name: research-dev-hours
    match: {tags: {team: research}}
    work_hours:
      timezone: Asia/Shanghai
      periods: [{days: mon-fri, start: "08:30", stop: "20:00"}]
"#;

/// 21:00 in Shanghai on Monday: an hour after the close.
const NINE_PM: &str = "2026-11-30T13:00:00Z";

/// `SHANGHAI` with `line` added to its work hours.
fn shanghai_with(line: &str) -> PolicySet {
    policies(&SHANGHAI.replace("periods:", &format!("{line}\n      periods:")))
}

/// A research box a person started at `started` (UTC), its GPU reporting `percent` every five
/// minutes from then until `until`.
fn started_by_person(started: &str, until: &str, percent: f64) -> World {
    let mut box_ = instance("i-late", &[("team", "research")]);
    box_.launched_at = Some(t(started));
    box_.gpu_util = steady(started, until, percent);
    World::with(vec![box_]).facts(
        "i-late",
        InstanceFacts {
            started_by_person_at: Some(t(started)),
            ..Default::default()
        },
    )
}

fn kept(d: &Decision) {
    assert_eq!(
        (d.action, d.code),
        (Action::None, Code::LateStartKept),
        "{}",
        d.reason
    );
}

#[test]
fn a_late_start_is_kept_until_idle_for_an_hour_counted_from_the_start() {
    let set = policies(SHANGHAI);
    let w = started_by_person(NINE_PM, "2026-11-30T15:00:00Z", 0.5);
    let d = w.one("2026-11-30T13:10:00Z", &set);
    kept(&d);
    assert_eq!(d.policy.as_deref(), Some("research-dev-hours"));
    assert_eq!(
        d.reason,
        "started by a person at 21:00 Asia/Shanghai outside work hours; kept until idle for 1h; \
         if it stays idle, stopped at 22:00 Asia/Shanghai at the earliest"
    );
    // Idle since the start, but not yet for an hour.
    kept(&w.one("2026-11-30T13:59:00Z", &set));
    let d = w.one("2026-11-30T14:00:00Z", &set);
    assert_eq!(
        (d.action, d.code),
        (Action::Stop, Code::LateStartIdle),
        "{}",
        d.reason
    );
    assert_eq!(
        d.reason,
        "started by a person at 21:00 Asia/Shanghai outside work hours; GPU idle for 1h: 13 samples, max 0.5% < 5%"
    );
}

#[test]
fn the_idle_rules_for_decides_when_the_policy_has_one_and_idle_for_otherwise() {
    let with_rule = policies(&format!(
        "{SHANGHAI}    idle: {{gpu_below: 10, for: 30m, when: outside_hours}}\n"
    ));
    let w = started_by_person(NINE_PM, "2026-11-30T15:00:00Z", 7.0);
    let d = w.one("2026-11-30T13:20:00Z", &with_rule);
    kept(&d);
    assert!(
        d.reason.ends_with("kept until idle for 30m; if it stays idle, stopped at 21:30 Asia/Shanghai at the earliest"),
        "{}",
        d.reason
    );
    let d = w.one("2026-11-30T13:30:00Z", &with_rule);
    assert_eq!(
        (d.action, d.code),
        (Action::Stop, Code::LateStartIdle),
        "{}",
        d.reason
    );
    // Without the rule the threshold is 5 %: 7 % is busy, so the box is kept.
    let d = w.one("2026-11-30T14:30:00Z", &policies(SHANGHAI));
    kept(&d);
    assert!(
        d.reason.ends_with(
            ": GPU at 7% at 22:30 Asia/Shanghai; if it stays idle, stopped at 23:30 \
             Asia/Shanghai at the earliest"
        ),
        "{}",
        d.reason
    );

    let two_hours = shanghai_with("late_start: {idle_for: 2h}");
    let w = started_by_person(NINE_PM, "2026-11-30T16:00:00Z", 0.0);
    kept(&w.one("2026-11-30T14:30:00Z", &two_hours));
    let d = w.one("2026-11-30T15:00:00Z", &two_hours);
    assert_eq!(
        (d.action, d.code),
        (Action::Stop, Code::LateStartIdle),
        "{}",
        d.reason
    );
}

#[test]
fn a_busy_sample_restarts_the_wait() {
    let set = policies(SHANGHAI);
    let mut w = started_by_person(NINE_PM, "2026-11-30T15:00:00Z", 0.5);
    // Busy at 21:40 in Shanghai: idle for an hour only once that sample is an hour old.
    let busy = w.instances[0]
        .gpu_util
        .iter_mut()
        .find(|s| s.at == t("2026-11-30T13:40:00Z"))
        .unwrap();
    busy.percent = 80.0;
    kept(&w.one("2026-11-30T14:00:00Z", &set));
    kept(&w.one("2026-11-30T14:40:00Z", &set));
    let d = w.one("2026-11-30T14:41:00Z", &set);
    assert_eq!(
        (d.action, d.code),
        (Action::Stop, Code::LateStartIdle),
        "{}",
        d.reason
    );
}

#[test]
fn missing_metrics_during_the_late_start_window_keep_the_box() {
    // No samples at all (no agent): counted as busy without an idle rule.
    let mut w = started_by_person(NINE_PM, NINE_PM, 0.0);
    w.instances[0].gpu_util.clear();
    let d = w.one("2026-11-30T14:30:00Z", &policies(SHANGHAI));
    kept(&d);
    assert!(
        d.reason
            .contains("GPU metrics incomplete (no samples in the last 1h)"),
        "{}",
        d.reason
    );
    // A gap of 30 minutes in an hour of idle samples keeps it too.
    let mut w = started_by_person(NINE_PM, "2026-11-30T15:00:00Z", 0.5);
    w.instances[0]
        .gpu_util
        .retain(|s| s.at < t("2026-11-30T13:20:00Z") || s.at > t("2026-11-30T13:50:00Z"));
    kept(&w.one("2026-11-30T14:05:00Z", &policies(SHANGHAI)));
    // With an idle rule's `missing_metrics: idle`, no data is idle.
    let idle_when_missing = policies(&format!(
        "{SHANGHAI}    idle: {{gpu_below: 5, for: 1h, missing_metrics: idle, when: outside_hours}}\n"
    ));
    let d = w.one("2026-11-30T14:05:00Z", &idle_when_missing);
    assert_eq!(
        (d.action, d.code),
        (Action::Stop, Code::LateStartIdle),
        "{}",
        d.reason
    );
    // A failed read is not an empty one: unknown, so kept.
    let w = started_by_person(NINE_PM, "2026-11-30T15:00:00Z", 0.5).unread("i-late", "throttled");
    let d = w.one("2026-11-30T14:30:00Z", &policies(SHANGHAI));
    assert_eq!(
        (d.action, d.code),
        (Action::None, Code::MetricsUnreadable),
        "{}",
        d.reason
    );
}

#[test]
fn a_box_left_running_from_the_day_or_started_before_the_close_is_stopped_at_the_close() {
    let set = policies(SHANGHAI);
    let mut day = instance("i-day", &[("team", "research")]);
    day.launched_at = Some(t("2026-11-30T01:00:00Z"));
    day.gpu_util = steady("2026-11-30T11:00:00Z", "2026-11-30T13:10:00Z", 0.5);
    let d = World::with(vec![day]).one("2026-11-30T13:10:00Z", &set);
    assert_eq!(
        (d.action, d.code),
        (Action::Stop, Code::OutsideHours),
        "{}",
        d.reason
    );
    // A person's start at 19:00 in Shanghai was in work hours.
    let w = started_by_person("2026-11-30T11:00:00Z", "2026-11-30T13:10:00Z", 0.5);
    let d = w.one("2026-11-30T12:05:00Z", &set);
    assert_eq!(
        (d.action, d.code),
        (Action::Stop, Code::OutsideHours),
        "{}",
        d.reason
    );
}

#[test]
fn a_start_by_ebb_is_not_a_late_start() {
    // What ebb remembers of its own start; the inventory sync records no person's start then
    // (tests/postgres/late_start.rs).
    let mut box_ = instance("i-late", &[("team", "research")]);
    box_.gpu_util = steady(NINE_PM, "2026-11-30T13:10:00Z", 0.5);
    let w = World::with(vec![box_]).facts(
        "i-late",
        InstanceFacts {
            started_by_ebb_at: Some(t(NINE_PM)),
            ..Default::default()
        },
    );
    let d = w.one("2026-11-30T13:10:00Z", &policies(SHANGHAI));
    assert_eq!(
        (d.action, d.code),
        (Action::Stop, Code::OutsideHours),
        "{}",
        d.reason
    );
}

#[test]
fn late_start_enforce_stops_a_late_start_at_once_as_before() {
    let w = started_by_person(NINE_PM, "2026-11-30T15:00:00Z", 0.5);
    let d = w.one(
        "2026-11-30T13:10:00Z",
        &shanghai_with("late_start: enforce"),
    );
    assert_eq!(
        (d.action, d.code),
        (Action::Stop, Code::OutsideHours),
        "{}",
        d.reason
    );
    let d = w.one("2026-11-30T13:10:00Z", &shanghai_with("late_start: keep"));
    kept(&d);
}

#[test]
fn the_notice_and_hibernation_follow_as_for_an_idle_stop() {
    let notify = policies(&format!("{SHANGHAI}    notify: {{before: 15m}}\n"));
    let w = started_by_person(NINE_PM, "2026-11-30T15:00:00Z", 0.5);
    let d = w.one("2026-11-30T14:00:00Z", &notify);
    assert_eq!(
        (d.action, d.code),
        (Action::Notify, Code::IdleNotice),
        "{}",
        d.reason
    );
    assert_eq!(d.stop_at, Some(t("2026-11-30T14:15:00Z")));
    let noticed = |w: World| {
        w.facts(
            "i-late",
            InstanceFacts {
                started_by_person_at: Some(t(NINE_PM)),
                notified_at: Some(t("2026-11-30T14:00:00Z")),
                ..Default::default()
            },
        )
    };
    let w = noticed(w);
    let d = w.one("2026-11-30T14:10:00Z", &notify);
    assert_eq!((d.action, d.code), (Action::None, Code::NoticePending));
    let d = w.one("2026-11-30T14:15:00Z", &notify);
    assert_eq!(
        (d.action, d.code),
        (Action::Stop, Code::LateStartIdle),
        "{}",
        d.reason
    );
    // Busy again during the notice: kept, and the notice taken back.
    let mut busy = started_by_person(NINE_PM, "2026-11-30T15:00:00Z", 0.5);
    busy.instances[0]
        .gpu_util
        .iter_mut()
        .filter(|s| s.at == t("2026-11-30T14:05:00Z"))
        .for_each(|s| s.percent = 60.0);
    busy.instances[0]
        .tags
        .insert("ebb:stop-at".into(), "2026-11-30T14:15:00Z".into());
    let d = noticed(busy).one("2026-11-30T14:10:00Z", &notify);
    assert_eq!(
        (d.action, d.code),
        (Action::WithdrawNotice, Code::NoticeWithdrawn),
        "{}",
        d.reason
    );

    let hibernate = shanghai_with("outside_hours: hibernate");
    let w = started_by_person(NINE_PM, "2026-11-30T15:00:00Z", 0.5);
    kept(&w.one("2026-11-30T13:10:00Z", &hibernate));
    let d = w.one("2026-11-30T14:00:00Z", &hibernate);
    assert_eq!((d.action, d.code), (Action::Hibernate, Code::LateStartIdle));
}

#[test]
fn a_protection_still_comes_first_and_outside_hours_none_keeps_as_before() {
    let mut w = started_by_person(NINE_PM, "2026-11-30T15:00:00Z", 0.5);
    w.overrides.push(Override {
        instance: "i-late".into(),
        until: t("2026-12-01T00:00:00Z"),
        reason: "demo".into(),
        by: "mei".into(),
    });
    let d = w.one("2026-11-30T14:30:00Z", &policies(SHANGHAI));
    assert_eq!((d.action, d.code), (Action::None, Code::Override));
    let w = started_by_person(NINE_PM, "2026-11-30T15:00:00Z", 0.5);
    let d = w.one(
        "2026-11-30T14:30:00Z",
        &shanghai_with("outside_hours: none"),
    );
    assert_eq!((d.action, d.code), (Action::None, Code::OutsideHoursKept));
}

#[test]
fn idle_for_beside_an_idle_rule_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let text = format!(
        "{}    idle: {{gpu_below: 5, for: 45m}}\n",
        SHANGHAI.replace("periods:", "late_start: {idle_for: 2h}\n      periods:")
    );
    std::fs::write(dir.path().join("p.yaml"), text).unwrap();
    let err = ebb::policy::load(&[dir.path().to_path_buf()])
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("late_start.idle_for is for a policy without an idle rule"),
        "{err}"
    );
    for (bad, says) in [
        (
            "late_start: sometimes",
            "late_start: \"sometimes\" is not one of: keep, enforce",
        ),
        ("late_start: {idle_for: soon}", "\"soon\" is not a duration"),
        (
            "late_start: {idel_for: 1h}",
            "unknown key \"idel_for\" (did you mean \"idle_for\"?)",
        ),
    ] {
        std::fs::write(
            dir.path().join("p.yaml"),
            SHANGHAI.replace("periods:", &format!("{bad}\n      periods:")),
        )
        .unwrap();
        let err = ebb::policy::load(&[dir.path().to_path_buf()])
            .unwrap_err()
            .to_string();
        assert!(err.contains(says), "{bad}: {err}");
    }
}

/// A snapshot at `fleet.yaml` of a box a person started at 21:00 in Shanghai (GPU near 0 % from
/// then until 22:30) and one left running from the day, with the policies of `policy` in
/// `policies/`.
fn snapshot(dir: &std::path::Path, policy: &str) {
    std::fs::create_dir_all(dir.join("policies")).unwrap();
    std::fs::write(dir.join("policies/research.yaml"), policy).unwrap();
    let samples = |from: &str| {
        steady(from, "2026-11-30T14:30:00Z", 0.4)
            .iter()
            .map(|s| format!("[\"{}\", {}]", s.at.format("%Y-%m-%dT%H:%M:%SZ"), s.percent))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let fleet = format!(
        "instances:
  - id: i-late
    region: ap-east-1
    type: g5.xlarge
    state: running
    launched_at: {NINE_PM}
    started_by_person_at: {NINE_PM}
    tags: {{team: research}}
    gpu_util: [{}]
  - id: i-day
    region: ap-east-1
    type: g5.xlarge
    state: running
    launched_at: 2026-11-30T01:00:00Z
    tags: {{team: research}}
    gpu_util: [{}]
",
        samples(NINE_PM),
        samples("2026-11-30T11:00:00Z")
    );
    std::fs::write(dir.join("fleet.yaml"), fleet).unwrap();
}

/// `ebb plan --format json` at `at` over the snapshot in `dir`: each instance's action and code.
fn plan(dir: &std::path::Path, at: &str) -> Vec<(String, String, String, String)> {
    let o = ebb(&[
        "plan",
        "--policies",
        dir.join("policies").to_str().unwrap(),
        "--fleet",
        dir.join("fleet.yaml").to_str().unwrap(),
        "--at",
        at,
        "--format",
        "json",
    ]);
    assert!(o.status.success(), "{o:?}");
    let items: Vec<serde_json::Value> = serde_json::from_slice(&o.stdout).unwrap();
    items
        .iter()
        .map(|i| {
            let s = |k: &str| i[k].as_str().unwrap_or_default().to_string();
            (s("instance"), s("action"), s("code"), s("reason"))
        })
        .collect()
}

fn of<'a>(plan: &'a [(String, String, String, String)], id: &str) -> (&'a str, &'a str) {
    let row = plan.iter().find(|r| r.0 == id).unwrap();
    (&row.1, &row.2)
}

#[test]
fn plan_keeps_a_box_a_person_started_at_nine_until_it_has_been_idle_for_an_hour() {
    let dir = tempfile::tempdir().unwrap();
    snapshot(dir.path(), SHANGHAI);
    // Ten minutes after the start: kept; the box left running from the day is stopped.
    let at_ten_past = plan(dir.path(), "2026-11-30T13:10:00Z");
    assert_eq!(of(&at_ten_past, "i-late"), ("none", "late_start_kept"));
    let reason = &at_ten_past.iter().find(|r| r.0 == "i-late").unwrap().3;
    assert_eq!(
        reason,
        "started by a person at 21:00 Asia/Shanghai outside work hours; kept until idle for 1h; \
         if it stays idle, stopped at 22:00 Asia/Shanghai at the earliest"
    );
    assert_eq!(of(&at_ten_past, "i-day"), ("stop", "outside_hours"));
    assert_eq!(
        of(&plan(dir.path(), "2026-11-30T13:55:00Z"), "i-late"),
        ("none", "late_start_kept")
    );
    // An hour idle since the start: stopped.
    assert_eq!(
        of(&plan(dir.path(), "2026-11-30T14:00:00Z"), "i-late"),
        ("stop", "late_start_idle")
    );
    // With a notice, the notice goes out then instead.
    snapshot(
        dir.path(),
        &format!("{SHANGHAI}    notify: {{before: 15m}}\n"),
    );
    assert_eq!(
        of(&plan(dir.path(), "2026-11-30T14:00:00Z"), "i-late"),
        ("notify", "idle_notice")
    );
    // An idle rule's `for` decides when the policy has one.
    snapshot(
        dir.path(),
        &format!("{SHANGHAI}    idle: {{gpu_below: 5, for: 30m, when: outside_hours}}\n"),
    );
    assert_eq!(
        of(&plan(dir.path(), "2026-11-30T13:25:00Z"), "i-late"),
        ("none", "late_start_kept")
    );
    assert_eq!(
        of(&plan(dir.path(), "2026-11-30T13:30:00Z"), "i-late"),
        ("stop", "late_start_idle")
    );
}

#[test]
fn plan_with_late_start_enforce_stops_the_late_box_at_once() {
    let dir = tempfile::tempdir().unwrap();
    snapshot(
        dir.path(),
        &SHANGHAI.replace("periods:", "late_start: enforce\n      periods:"),
    );
    let p = plan(dir.path(), "2026-11-30T13:10:00Z");
    assert_eq!(of(&p, "i-late"), ("stop", "outside_hours"));
    assert_eq!(of(&p, "i-day"), ("stop", "outside_hours"));
}

#[test]
fn explain_says_who_started_it_and_until_when_it_is_kept() {
    let dir = tempfile::tempdir().unwrap();
    snapshot(dir.path(), SHANGHAI);
    let o = ebb(&[
        "explain",
        "i-late",
        "--policies",
        dir.path().join("policies").to_str().unwrap(),
        "--fleet",
        dir.path().join("fleet.yaml").to_str().unwrap(),
        "--at",
        "2026-11-30T13:10:00Z",
    ]);
    assert!(o.status.success(), "{o:?}");
    let out = String::from_utf8(o.stdout).unwrap();
    assert!(
        out.contains(
            "decision: none [late_start_kept] by research-dev-hours: started by a person at 21:00 Asia/Shanghai outside work hours; kept until idle for 1h; \
             if it stays idle, stopped at 22:00 Asia/Shanghai at the earliest"
        ),
        "{out}"
    );
    assert!(out.contains("  - late start: "), "{out}");
}
