//! The idle rule's activity signals (`idle.activity`): a box whose GPU is idle but that a person
//! is using is not stopped; a signal that cannot be read, or whose readings leave the window
//! uncovered, counts as in use (`activity_unreadable`); the same holds for a stop outside
//! hours that waits while busy, for a late start, and for a group's scale-down. Through
//! `engine::decide` and the replay's decider, which must agree.

use crate::common;

use common::*;
use ebb::engine::{Action, Code, Decider, InstanceFacts};
use ebb::fleet::activity::SignalReading;
use ebb::policy::PolicySet;

const NOW: &str = "2026-11-30T12:00:00Z";

/// Idle below 5 % for 30 minutes, with a heartbeat of 10 minutes and a session count.
const POLICY: &str = r#"
policies:
  - name: notebooks
    match: {tags: {workload: notebook}}
    idle:
      gpu_below: 5
      for: 30m
      activity:
        - heartbeat: {max_age: 10m}
        - prometheus: {name: sessions, query: 'sum by (instance_id) (node_logind_sessions{remote="true"})', active_above: 0}
"#;

/// A notebook at 1 % from 11:25 to 12:00, its heartbeat tag `active_at` if any.
fn notebook(active_at: Option<&str>) -> World {
    let mut i = instance("i-nb", &[("workload", "notebook")]);
    if let Some(at) = active_at {
        i.tags.insert("ebb:active-at".into(), at.into());
    }
    i.gpu_util = steady("2026-11-30T11:25:00Z", NOW, 1.0);
    World::with(vec![i])
}

/// The session count every 5 minutes from 11:25 to 12:00, `busy_at` 1 at that minute.
fn sessions(busy_at: Option<&str>) -> SignalReading {
    let points = steady("2026-11-30T11:25:00Z", NOW, 0.0)
        .into_iter()
        .map(|s| {
            (
                s.at,
                if Some(s.at) == busy_at.map(t) {
                    1.0
                } else {
                    0.0
                },
            )
        })
        .collect();
    SignalReading::Points(points)
}

/// The verdict of `decide` at `now` and of the replay's decider, which must be the same.
fn verdict_at(w: &World, set: &PolicySet, now: &str) -> (Action, Code, String) {
    let d = w.one(now, set);
    let (fleet, prior) = w.fleet();
    let replayed = Decider::new(set).decide(t(now), &fleet, &prior);
    assert_eq!(
        (replayed[0].action, replayed[0].code),
        (d.action, d.code),
        "the replay's decider agrees"
    );
    (d.action, d.code, d.reason)
}

fn verdict(w: &World) -> (Action, Code, String) {
    verdict_at(w, &policies(POLICY), NOW)
}

#[test]
fn a_fresh_heartbeat_keeps_a_gpu_idle_box_and_a_stale_one_does_not() {
    let fresh = notebook(Some("2026-11-30T11:52:00Z")).reading("i-nb", "sessions", sessions(None));
    let (action, code, reason) = verdict(&fresh);
    assert_eq!((action, code), (Action::None, Code::InUse), "{reason}");
    assert!(
        reason.contains("heartbeat") && reason.contains("max_age 10m"),
        "{reason}"
    );
    // Heard at 11:52, fresh for 10 minutes: the countdown people see.
    assert!(
        reason.contains("stopped at 12:02 UTC at the earliest"),
        "{reason}"
    );

    // Twelve minutes old: stale, so the GPU decides; the reason names every signal.
    let stale = notebook(Some("2026-11-30T11:48:00Z")).reading("i-nb", "sessions", sessions(None));
    let (action, code, reason) = verdict(&stale);
    assert_eq!((action, code), (Action::Stop, Code::Idle), "{reason}");
    assert!(reason.contains("heartbeat: last use"), "{reason}");
    assert!(reason.contains("sessions: no use seen"), "{reason}");

    // No tag at all: the box never said it was in use.
    let none = notebook(None).reading("i-nb", "sessions", sessions(None));
    let (_, code, reason) = verdict(&none);
    assert_eq!(code, Code::Idle, "{reason}");
    assert!(reason.contains("heartbeat: no use seen"), "{reason}");
}

#[test]
fn a_heartbeat_that_is_not_a_time_or_is_in_the_future_keeps_the_box() {
    for (tag, says) in [
        ("yesterday", "not an RFC 3339 time"),
        ("2026-11-30T13:00:00Z", "in the future"),
    ] {
        let w = notebook(Some(tag)).reading("i-nb", "sessions", sessions(None));
        let (action, code, reason) = verdict(&w);
        assert_eq!(
            (action, code),
            (Action::None, Code::ActivityUnreadable),
            "{reason}"
        );
        assert!(reason.contains(says), "{reason}");
    }
}

#[test]
fn a_session_in_the_window_keeps_the_box_until_the_window_has_passed_it() {
    let w = notebook(None).reading("i-nb", "sessions", sessions(Some("2026-11-30T11:40:00Z")));
    let (action, code, reason) = verdict(&w);
    assert_eq!((action, code), (Action::None, Code::InUse), "{reason}");
    assert!(reason.contains("sessions above 0"), "{reason}");
    // Used at 11:40: idle for the 30-minute window from then.
    assert!(
        reason.contains("stopped at 12:10 UTC at the earliest"),
        "{reason}"
    );
    // At 12:15 the session is 35 minutes old, past the 30-minute window: stopped, naming it.
    let mut later = w;
    later.instances[0].gpu_util = steady("2026-11-30T11:25:00Z", "2026-11-30T12:15:00Z", 1.0);
    let points = steady("2026-11-30T11:25:00Z", "2026-11-30T12:15:00Z", 0.0)
        .into_iter()
        .map(|s| {
            (
                s.at,
                if s.at == t("2026-11-30T11:40:00Z") {
                    2.0
                } else {
                    0.0
                },
            )
        })
        .collect();
    let later = later.reading("i-nb", "sessions", SignalReading::Points(points));
    let (action, code, reason) = verdict_at(&later, &policies(POLICY), "2026-11-30T12:15:00Z");
    assert_eq!((action, code), (Action::Stop, Code::Idle), "{reason}");
    assert!(reason.contains("sessions: last use"), "{reason}");
}

#[test]
fn an_unread_partial_or_uncovered_signal_counts_as_in_use() {
    // Not read at all (no reading in the fleet).
    let (_, code, reason) = verdict(&notebook(None));
    assert_eq!(code, Code::ActivityUnreadable, "{reason}");
    assert!(
        reason.contains("sessions could not be read (not read)"),
        "{reason}"
    );
    // The query failed.
    let failed = notebook(None).reading(
        "i-nb",
        "sessions",
        SignalReading::Unread("timed out".into()),
    );
    let (action, code, reason) = verdict(&failed);
    assert_eq!(
        (action, code),
        (Action::None, Code::ActivityUnreadable),
        "{reason}"
    );
    assert!(reason.contains("timed out"), "{reason}");
    // Readings that stop 20 minutes before now: the window is not covered.
    let old = steady("2026-11-30T11:25:00Z", "2026-11-30T11:40:00Z", 0.0);
    let points = old.into_iter().map(|s| (s.at, 0.0)).collect();
    let gap = notebook(None).reading("i-nb", "sessions", SignalReading::Points(points));
    let (_, code, reason) = verdict(&gap);
    assert_eq!(code, Code::ActivityUnreadable, "{reason}");
    assert!(
        reason.contains("readings incomplete: newest reading 20m old"),
        "{reason}"
    );
}

#[test]
fn a_busy_gpu_decides_before_any_signal_is_looked_at() {
    let mut w = notebook(None);
    w.instances[0].gpu_util = steady("2026-11-30T11:25:00Z", NOW, 80.0);
    let (_, code, reason) = verdict(&w);
    assert_eq!(code, Code::NotIdle, "{reason}");
}

#[test]
fn a_policy_without_signals_decides_as_before() {
    let set = policies(POLICY.split("      activity:").next().unwrap());
    let (action, code, reason) = verdict_at(&notebook(Some("2026-11-30T11:59:00Z")), &set, NOW);
    assert_eq!((action, code), (Action::Stop, Code::Idle), "{reason}");
    assert!(!reason.contains("no use"), "{reason}");
}

/// Shanghai hours to 20:00 (12:00 UTC), a stop that waits while busy for at most 2 h, and a
/// heartbeat signal.
const HOURS: &str = r#"
policies:
  - name: notebooks
    match: {tags: {workload: notebook}}
    work_hours:
      timezone: Asia/Shanghai
      periods: [{days: mon-fri, start: "08:30", stop: "20:00"}]
      busy_defers_stop: true
      max_defer: 2h
    idle:
      gpu_below: 5
      for: 30m
      activity: [{heartbeat: {max_age: 10m}}]
"#;

#[test]
fn a_heartbeat_defers_a_stop_outside_hours_as_a_busy_gpu_does_until_max_defer() {
    let set = policies(HOURS);
    let mut w = notebook(Some("2026-11-30T12:28:00Z"));
    w.instances[0].gpu_util = steady("2026-11-30T11:25:00Z", "2026-11-30T14:30:00Z", 1.0);
    let (action, code, reason) = verdict_at(&w, &set, "2026-11-30T12:30:00Z");
    assert_eq!((action, code), (Action::None, Code::InUse), "{reason}");
    assert!(reason.contains("stop deferred until idle or"), "{reason}");
    // Stale, it defers nothing.
    let (action, code, _) = verdict_at(&w, &set, "2026-11-30T12:45:00Z");
    assert_eq!((action, code), (Action::Stop, Code::OutsideHours));
    // Unreadable, it defers; past max_defer it does not.
    let mut bad = notebook(Some("soon"));
    bad.instances[0].gpu_util = steady("2026-11-30T11:25:00Z", "2026-11-30T14:30:00Z", 1.0);
    let (_, code, _) = verdict_at(&bad, &set, "2026-11-30T12:30:00Z");
    assert_eq!(code, Code::ActivityUnreadable);
    let (action, code, reason) = verdict_at(&bad, &set, "2026-11-30T14:05:00Z");
    assert_eq!(
        (action, code),
        (Action::Stop, Code::MaxDeferReached),
        "{reason}"
    );
}

#[test]
fn a_heartbeat_keeps_a_late_start_while_fresh() {
    let set = policies(&HOURS.replace("      busy_defers_stop: true\n      max_defer: 2h\n", ""));
    // Started by a person at 21:00 Shanghai, GPU idle since, heartbeat 5 minutes ago.
    let mut w = notebook(Some("2026-11-30T14:25:00Z"));
    w.instances[0].launched_at = Some(t("2026-11-30T13:00:00Z"));
    w.instances[0].gpu_util = steady("2026-11-30T13:00:00Z", "2026-11-30T15:00:00Z", 1.0);
    let w = w.facts(
        "i-nb",
        InstanceFacts {
            started_by_person_at: Some(t("2026-11-30T13:00:00Z")),
            ..Default::default()
        },
    );
    let (action, code, reason) = verdict_at(&w, &set, "2026-11-30T14:30:00Z");
    assert_eq!(
        (action, code),
        (Action::None, Code::LateStartKept),
        "{reason}"
    );
    assert!(reason.contains("heartbeat"), "{reason}");
    // Stale by 14:45: the late start has been idle for its 30 minutes, and is stopped.
    let (action, code, reason) = verdict_at(&w, &set, "2026-11-30T14:45:00Z");
    assert_eq!(
        (action, code),
        (Action::Stop, Code::LateStartIdle),
        "{reason}"
    );
}

#[test]
fn signals_are_checked_when_the_policy_is_read() {
    for (activity, says) in [
        ("[{heartbeat: {}}]", "needs \"max_age\""),
        (
            "[{heartbeat: {max_age: 10m}}, {heartbeat: {max_age: 1h}}]",
            "two activity signals are named \"heartbeat\"",
        ),
        (
            "[{jupyter: {url: \"http://10.0.0.1:8888\"}}]",
            "then {private_ip} as its host",
        ),
        (
            "[{jupyter: {url: \"http://{private_ip}.example.com:8888\"}}]",
            "then {private_ip} as its host",
        ),
        (
            "[{jupyter: {url: \"ftp://{private_ip}/\"}}]",
            "must be http:// or https://",
        ),
        ("[{jupyter: {token: \"t0ken\"}}]", "unknown key \"token\""),
        ("[{notebook: {}}]", "unknown key \"notebook\""),
        (
            "[{heartbeat: {max_age: 10m}, prometheus: {query: up}}]",
            "a mapping of one kind",
        ),
        ("[{prometheus: {query: \" \"}}]", "the query is empty"),
        (
            "[{prometheus: {query: up, active_above: lots}}]",
            "expected a number",
        ),
        (
            "[{prometheus: {query: up, name: \"my sessions\"}}]",
            "is not a signal name",
        ),
        (
            "{heartbeat: {max_age: 10m}}",
            "expected a list of activity signals",
        ),
        ("[{cloudwatch: {namespace: CWAgent}}]", "needs \"metric\""),
        (
            "[{cloudwatch: {metric: procstat_lookup_pid_count}}]",
            "needs \"namespace\"",
        ),
        (
            "[{cloudwatch: {namespace: CWAgent, metric: m, dimensions: {InstanceId: i-1}}}]",
            "leave out InstanceId",
        ),
        (
            "[{cloudwatch: {namespace: CWAgent, metric: m, dimensions: [pattern]}}]",
            "expected a mapping of dimension names",
        ),
        (
            "[{cloudwatch: {namespace: \" \", metric: m}}]",
            "the namespace is empty",
        ),
        (
            "[{cloudwatch: {namespace: CWAgent, metric: m, statistic: Sum}}]",
            "unknown key \"statistic\"",
        ),
    ] {
        let text = format!(
            "policies:\n  - name: p\n    match: {{tags: {{a: b}}}}\n    idle: {{gpu_below: 5, for: 30m, activity: {activity}}}\n"
        );
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("p.yaml"), text).unwrap();
        let err = ebb::policy::load(&[dir.path().to_path_buf()])
            .map(|_| ())
            .unwrap_err();
        let err = err.to_string();
        assert!(err.contains(says), "{activity}: {err}");
    }
}

#[test]
fn a_member_in_use_defers_its_groups_scale_down() {
    use ebb::engine::{decide_group, GroupAction, Prior};
    use ebb::fleet::{Capacity, Fleet, GroupMember, ScalingGroup};
    let set = policies(
        r#"
policies:
  - name: office
    match: {tags: {env: dev}}
    work_hours:
      timezone: UTC
      periods: [{days: mon-fri, start: "09:00", stop: "18:00"}]
    idle: {gpu_below: 5, for: 30m, activity: [{heartbeat: {max_age: 10m}}]}
"#,
    );
    let group = ScalingGroup {
        name: "inference".to_string(),
        region: "us-east-1".to_string(),
        tags: [("env", "dev")].into_iter().collect(),
        capacity: Capacity {
            min: 2,
            desired: 2,
            max: 4,
        },
        members: ["i-1", "i-2"]
            .iter()
            .map(|id| GroupMember {
                id: id.to_string(),
                instance_type: "g5.xlarge".to_string(),
                protected_from_scale_in: false,
            })
            .collect(),
    };
    let fleet = |heartbeat: &str| {
        let mut fleet = Fleet::default();
        for id in ["i-1", "i-2"] {
            let mut member = instance(id, &[("env", "dev")]);
            member.gpu_util = samples(&[("2026-11-30T18:04:00Z", 1.0)]);
            if id == "i-2" {
                member.tags.insert("ebb:active-at".into(), heartbeat.into());
            }
            fleet.instances.push(member);
        }
        fleet
    };
    let evening = t("2026-11-30T18:05:00Z");
    let d = decide_group(
        evening,
        &set,
        &fleet("2026-11-30T18:01:00Z"),
        &Prior::default(),
        &group,
        None,
    );
    assert_eq!(
        (d.action, d.code),
        (GroupAction::None, Code::InUse),
        "{}",
        d.reason
    );
    assert!(
        d.reason.contains("i-2") && d.reason.contains("heartbeat"),
        "{}",
        d.reason
    );
    let d = decide_group(
        evening,
        &set,
        &fleet("garbled"),
        &Prior::default(),
        &group,
        None,
    );
    assert_eq!(
        (d.action, d.code),
        (GroupAction::None, Code::ActivityUnreadable),
        "{}",
        d.reason
    );
    let d = decide_group(
        evening,
        &set,
        &fleet("2026-11-30T17:30:00Z"),
        &Prior::default(),
        &group,
        None,
    );
    assert_eq!(d.action, GroupAction::ScaleDown, "{}", d.reason);
}

#[test]
fn ebb_heartbeat_token_prints_the_token_serve_checks() {
    let dir = tempfile::tempdir().unwrap();
    let key = dir.path().join("heartbeat.key");
    std::fs::write(&key, "k3y-of-thirty-two-characters-or-more\n").unwrap();
    let key_arg = key.to_str().unwrap();
    let out =
        common::Ebb::new().run(&["heartbeat-token", "i-0abc", "--heartbeat-key-file", key_arg]);
    assert!(out.status.success(), "{out:?}");
    let expected = ebb::api::HeartbeatKey::from_file(&key)
        .unwrap()
        .token_of("i-0abc");
    assert_eq!(
        String::from_utf8(out.stdout).unwrap(),
        format!("{expected}\n")
    );
    // Without a key, a one-line error that says what to give.
    let out = common::Ebb::new().run(&["heartbeat-token", "i-0abc"]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(
        err.contains("EBB_HEARTBEAT_KEY_FILE") && err.lines().count() == 1,
        "{err}"
    );
}

#[test]
fn a_jupyter_url_template_takes_the_box_s_private_ip_as_its_host() {
    let set = policies(
        "policies:\n  - name: p\n    match: {tags: {a: b}}\n    idle: {gpu_below: 5, for: 30m, activity: [{jupyter: {url: \"https://{private_ip}:8888/lab/\"}}]}\n",
    );
    let ebb::policy::SignalSource::Jupyter {
        url: Some(template),
    } = &set.policies[0].idle.as_ref().unwrap().activity[0].source
    else {
        panic!("{:?}", set.policies[0].idle);
    };
    let v4 = ebb::policy::jupyter_url(template, "10.0.3.17".parse().unwrap());
    assert_eq!(v4, "https://10.0.3.17:8888/lab/");
    let v6 = ebb::policy::jupyter_url(template, "fd00::17".parse().unwrap());
    assert_eq!(v6, "https://[fd00::17]:8888/lab/");
}

/// What ebb keeps for `ebb metrics export`: each signal's latest use as read, the later of a
/// heartbeat's tag and its posted beat, the latest reading above `active_above`, and nothing of
/// a signal that could not be read or never showed use.
#[test]
fn the_last_use_of_each_signal_is_what_was_read_of_it() {
    let set = policies(POLICY);
    let w = notebook(Some("2026-11-30T11:40:00Z"));
    let (mut fleet, _) = w.fleet();
    let uses = |fleet: &ebb::fleet::Fleet| {
        let inst = &fleet.instances[0];
        let policy = ebb::engine::governing_policy(&set, inst).unwrap();
        let found = ebb::engine::last_uses(policy, &fleet.activity, inst, t(NOW));
        found
            .into_iter()
            .map(|(name, at)| (name.to_string(), at))
            .collect::<Vec<_>>()
    };
    // Sessions unread: only the heartbeat's tag.
    assert_eq!(
        uses(&fleet),
        [("heartbeat".into(), t("2026-11-30T11:40:00Z"))]
    );
    let readings = fleet.activity.entry("i-nb".into()).or_default();
    readings.insert(
        "heartbeat".into(),
        SignalReading::LastUse(Some(t("2026-11-30T11:45:00Z"))),
    );
    readings.insert("sessions".into(), sessions(Some("2026-11-30T11:35:00Z")));
    assert_eq!(
        uses(&fleet),
        [
            ("heartbeat".into(), t("2026-11-30T11:45:00Z")),
            ("sessions".into(), t("2026-11-30T11:35:00Z"))
        ]
    );
    let readings = fleet.activity.get_mut("i-nb").unwrap();
    readings.insert("sessions".into(), sessions(None));
    readings.insert("heartbeat".into(), SignalReading::Unread("refused".into()));
    assert!(uses(&fleet).is_empty(), "{:?}", uses(&fleet));
}
