//! Pins every semantic of `engine::decide` (docs/ARCHITECTURE.md, "Semantics the tests pin down").
//! 2026-11-30 is a Monday.

use crate::common;

use common::*;
use ebb::engine::{Action, Code, InstanceFacts, Override};
use ebb::fleet::{InstanceState, Lifecycle};

/// Office hours 09:00-18:00 UTC on weekdays, for dev boxes.
const OFFICE: &str = r#"
policies:
  - name: office
    match: {tags: {env: dev}}
    work_hours:
      timezone: UTC
      periods: [{days: mon-fri, start: "09:00", stop: "18:00"}]
"#;

fn dev(id: &str) -> ebb::fleet::Instance {
    instance(id, &[("env", "dev")])
}

fn stopped(id: &str) -> ebb::fleet::Instance {
    let mut i = dev(id);
    i.state = InstanceState::Stopped;
    i
}

#[test]
fn outside_hours_a_running_instance_is_stopped_and_in_hours_left_alone() {
    let set = policies(OFFICE);
    let w = World::with(vec![dev("i-1")]);
    let d = w.one("2026-11-30T18:05:00Z", &set);
    assert_eq!((d.action, d.code), (Action::Stop, Code::OutsideHours));
    assert_eq!(d.policy.as_deref(), Some("office"));
    assert_eq!(d.reason, "outside work hours (closed 18:00 UTC)");
    let d = w.one("2026-11-30T17:59:00Z", &set);
    assert_eq!((d.action, d.code), (Action::None, Code::InHours));
}

#[test]
fn reasons_name_the_local_time_of_the_policy_zone() {
    let set = policies(
        r#"
policies:
  - name: research-dev-hours
    match: {tags: {env: dev}}
    work_hours:
      timezone: Asia/Shanghai
      periods: [{days: mon-fri, start: "08:30", stop: "20:00"}]
"#,
    );
    let d = World::with(vec![dev("i-1")]).one("2026-11-30T12:04:00Z", &set);
    assert_eq!(d.action, Action::Stop);
    assert_eq!(d.reason, "outside work hours (closed 20:00 Asia/Shanghai)");
}

#[test]
fn hibernate_and_none_outside_hours() {
    let set = policies(&OFFICE.replace("periods:", "outside_hours: hibernate\n      periods:"));
    let w = World::with(vec![dev("i-1")]);
    assert_eq!(
        w.one("2026-11-30T20:00:00Z", &set).action,
        Action::Hibernate
    );
    let set = policies(&OFFICE.replace("periods:", "outside_hours: none\n      periods:"));
    let d = w.one("2026-11-30T20:00:00Z", &set);
    assert_eq!((d.action, d.code), (Action::None, Code::OutsideHoursKept));
}

#[test]
fn the_highest_priority_policy_governs_and_a_tie_is_a_conflict() {
    let set = policies(
        r#"
policies:
  - name: low
    priority: 1
    match: {tags: {env: dev}}
    work_hours: {timezone: UTC, periods: [{days: mon-sun, start: "00:00", stop: "01:00"}]}
  - name: high
    priority: 5
    match: {tags: {env: dev, team: "*"}}
    work_hours: {timezone: UTC, periods: [{days: mon-sun, start: "00:00", stop: "24:00"}]}
  - name: rival
    priority: 5
    match: {tags: {env: dev, team: ml}}
    work_hours: {timezone: UTC, periods: [{days: mon-sun, start: "00:00", stop: "24:00"}]}
"#,
    );
    let w = World::with(vec![
        instance("i-low", &[("env", "dev")]),
        instance("i-high", &[("env", "dev"), ("team", "web")]),
        instance("i-tie", &[("env", "dev"), ("team", "ml")]),
        instance("i-none", &[("env", "prod")]),
    ]);
    let d = w.decide("2026-11-30T12:00:00Z", &set);
    assert_eq!(
        (d[0].policy.as_deref(), d[0].action),
        (Some("low"), Action::Stop)
    );
    assert_eq!(
        (d[1].policy.as_deref(), d[1].action),
        (Some("high"), Action::None)
    );
    assert_eq!(
        (d[2].policy.as_deref(), d[2].code, d[2].action),
        (None, Code::Conflict, Action::None)
    );
    assert!(
        d[2].reason.contains("high") && d[2].reason.contains("rival"),
        "{}",
        d[2].reason
    );
    assert_eq!((d[3].policy.as_deref(), d[3].code), (None, Code::NoPolicy));
}

#[test]
fn match_by_region_and_instance_type_glob() {
    let set = policies(
        r#"
policies:
  - name: g5-east
    match: {regions: [us-east-1], instance_types: ["g5.*", "p4d.24xlarge"]}
    work_hours: {timezone: UTC, periods: [{days: mon-fri, start: "09:00", stop: "18:00"}]}
"#,
    );
    let mut west = instance("i-west", &[]);
    west.region = "us-west-2".into();
    let mut p4d = instance("i-p4d", &[]);
    p4d.instance_type = "p4d.24xlarge".into();
    let mut p5 = instance("i-p5", &[]);
    p5.instance_type = "p5.48xlarge".into();
    let w = World::with(vec![instance("i-g5", &[]), west, p4d, p5]);
    let policies: Vec<Option<String>> = w
        .decide("2026-11-30T20:00:00Z", &set)
        .into_iter()
        .map(|d| d.policy)
        .collect();
    assert_eq!(
        policies,
        [Some("g5-east".into()), None, Some("g5-east".into()), None]
    );
}

#[test]
fn skip_tag_excludes_the_instance_entirely() {
    let set = policies(OFFICE);
    let w = World::with(vec![instance(
        "i-1",
        &[("env", "dev"), ("ebb:skip", "true")],
    )]);
    let d = w.one("2026-11-30T20:00:00Z", &set);
    assert_eq!(
        (d.action, d.code, d.policy),
        (Action::None, Code::SkipTag, None)
    );
}

#[test]
fn keep_until_blocks_stops_until_it_expires() {
    let set = policies(OFFICE);
    let kept = |until: &str| {
        World::with(vec![instance(
            "i-1",
            &[("env", "dev"), ("ebb:keep-until", until)],
        )])
    };
    let d = kept("2026-11-30T23:00:00Z").one("2026-11-30T20:00:00Z", &set);
    assert_eq!((d.action, d.code), (Action::None, Code::KeepUntil));
    let d = kept("2026-11-30T23:00:00Z").one("2026-11-30T23:00:00Z", &set);
    assert_eq!(
        (d.action, d.code),
        (Action::Stop, Code::OutsideHours),
        "expired at its instant"
    );
    let d = kept("tomorrow").one("2026-11-30T20:00:00Z", &set);
    assert_eq!(
        (d.action, d.code),
        (Action::None, Code::KeepUntilInvalid),
        "bad input never causes an action"
    );
}

#[test]
fn override_rows_block_stops_until_they_expire() {
    let set = policies(OFFICE);
    let mut w = World::with(vec![dev("i-1"), dev("i-2")]);
    w.overrides = vec![
        Override {
            instance: "i-1".into(),
            until: t("2026-11-30T22:00:00Z"),
            reason: "demo tonight".into(),
            by: "mei".into(),
        },
        Override {
            instance: "i-2".into(),
            until: t("2026-11-30T19:00:00Z"),
            reason: "expired".into(),
            by: "li".into(),
        },
    ];
    let d = w.decide("2026-11-30T20:00:00Z", &set);
    assert_eq!((d[0].action, d[0].code), (Action::None, Code::Override));
    assert!(d[0].reason.contains("mei") && d[0].reason.contains("demo tonight"));
    assert_eq!(d[1].action, Action::Stop);
    assert_eq!(w.one("2026-11-30T22:00:00Z", &set).action, Action::Stop);
}

#[test]
fn a_busy_instance_is_deferred_until_idle() {
    let set = policies(OFFICE);
    let mut i = dev("i-1");
    i.gpu_util = samples(&[
        ("2026-11-30T18:20:00Z", 40.0),
        ("2026-11-30T18:25:00Z", 3.0),
    ]);
    let w = World::with(vec![i]);
    let d = w.one("2026-11-30T18:29:00Z", &set);
    assert_eq!((d.action, d.code), (Action::None, Code::BusyDeferred));
    assert!(d.reason.contains("40% at 18:20 UTC"), "{}", d.reason);
    // The busy sample is now more than 10 minutes old: idle enough to stop.
    let d = w.one("2026-11-30T18:31:00Z", &set);
    assert_eq!((d.action, d.code), (Action::Stop, Code::OutsideHours));
}

#[test]
fn busy_uses_the_idle_threshold_or_five_percent() {
    let with_idle = policies(&format!(
        "{OFFICE}    idle: {{gpu_below: 20, for: 30m, when: outside_hours}}\n"
    ));
    let mut i = dev("i-1");
    i.gpu_util = samples(&[("2026-11-30T18:25:00Z", 10.0)]);
    let w = World::with(vec![i]);
    assert_eq!(
        w.one("2026-11-30T18:30:00Z", &with_idle).action,
        Action::Stop,
        "10% < 20%"
    );
    let d = w.one("2026-11-30T18:30:00Z", &policies(OFFICE));
    assert_eq!(d.code, Code::BusyDeferred, "10% >= 5% default");
}

#[test]
fn no_samples_are_not_busy_and_samples_after_now_are_ignored() {
    let set = policies(OFFICE);
    let mut later = dev("i-future");
    later.gpu_util = samples(&[("2026-11-30T18:40:00Z", 99.0)]);
    let w = World::with(vec![dev("i-none"), later]);
    let d = w.decide("2026-11-30T18:30:00Z", &set);
    assert_eq!(d[0].action, Action::Stop);
    assert_eq!(d[1].action, Action::Stop);
}

#[test]
fn busy_defers_stop_false_stops_a_busy_instance() {
    let set = policies(&OFFICE.replace("periods:", "busy_defers_stop: false\n      periods:"));
    let mut i = dev("i-1");
    i.gpu_util = samples(&[("2026-11-30T18:25:00Z", 90.0)]);
    assert_eq!(
        World::with(vec![i])
            .one("2026-11-30T18:30:00Z", &set)
            .action,
        Action::Stop
    );
}

#[test]
fn max_defer_stops_a_busy_instance_after_the_deadline() {
    let set = policies(&OFFICE.replace("periods:", "max_defer: 2h\n      periods:"));
    let mut i = dev("i-1");
    i.gpu_util = steady("2026-11-30T17:00:00Z", "2026-11-30T21:00:00Z", 95.0);
    let w = World::with(vec![i]);
    let d = w.one("2026-11-30T19:59:00Z", &set);
    assert_eq!(d.code, Code::BusyDeferred);
    assert!(d.reason.contains("until idle or 20:00 UTC"), "{}", d.reason);
    let d = w.one("2026-11-30T20:00:00Z", &set);
    assert_eq!((d.action, d.code), (Action::Stop, Code::MaxDeferReached));
}

#[test]
fn stopped_by_ebb_starts_at_opening_and_catches_up_later_in_the_window() {
    let set = policies(OFFICE);
    let w = World::with(vec![stopped("i-1")]).facts(
        "i-1",
        InstanceFacts {
            stopped_by_ebb_at: Some(t("2026-11-27T18:01:00Z")),
            ..Default::default()
        },
    );
    let d = w.one("2026-11-30T08:59:00Z", &set);
    assert_eq!(
        (d.action, d.code),
        (Action::None, Code::StoppedOutsideHours)
    );
    let d = w.one("2026-11-30T09:00:00Z", &set);
    assert_eq!((d.action, d.code), (Action::Start, Code::StartAtOpen));
    assert!(d.reason.contains("opened 09:00 UTC"), "{}", d.reason);
    let d = w.one("2026-11-30T14:00:00Z", &set);
    assert_eq!(d.action, Action::Start, "catch-up after downtime");
}

#[test]
fn a_persons_stop_sticks_and_an_idle_stop_in_the_window_waits_for_the_next_opening() {
    let set = policies(OFFICE);
    let w = World::with(vec![stopped("i-person"), stopped("i-idle")]).facts(
        "i-idle",
        InstanceFacts {
            stopped_by_ebb_at: Some(t("2026-11-30T11:00:00Z")),
            ..Default::default()
        },
    );
    let d = w.decide("2026-11-30T12:00:00Z", &set);
    assert_eq!(
        (d[0].action, d[0].code),
        (Action::None, Code::StoppedByPerson)
    );
    assert_eq!(
        (d[1].action, d[1].code),
        (Action::None, Code::StoppedInWindow)
    );
    // The next morning the idle stop is before the new window: started.
    let d = w.decide("2026-12-01T09:00:00Z", &set);
    assert_eq!(d[1].action, Action::Start);
    assert_eq!(d[0].action, Action::None);
}

#[test]
fn start_at_open_all_starts_every_stopped_instance_once() {
    let set = policies(&OFFICE.replace("periods:", "start_at_open: all\n      periods:"));
    let mut before = stopped("i-before");
    before.state_since = Some(t("2026-11-29T10:00:00Z"));
    let mut after = stopped("i-after");
    after.state_since = Some(t("2026-11-30T10:30:00Z"));
    let mut started = stopped("i-started");
    started.state_since = Some(t("2026-11-30T10:30:00Z"));
    let unknown = stopped("i-unknown");
    let w = World::with(vec![before, after, started, unknown]).facts(
        "i-started",
        InstanceFacts {
            started_by_ebb_at: Some(t("2026-11-30T09:00:00Z")),
            ..Default::default()
        },
    );
    let d = w.decide("2026-11-30T11:00:00Z", &set);
    assert_eq!((d[0].action, d[0].code), (Action::Start, Code::StartAtOpen));
    assert_eq!(
        (d[1].action, d[1].code),
        (Action::None, Code::StoppedByPerson)
    );
    assert_eq!(
        (d[2].action, d[2].code),
        (Action::None, Code::StartedThisWindow)
    );
    assert_eq!(
        (d[3].action, d[3].code),
        (Action::None, Code::StopTimeUnknown)
    );
}

#[test]
fn start_at_open_never_starts_nothing() {
    let set = policies(&OFFICE.replace("periods:", "start_at_open: never\n      periods:"));
    let w = World::with(vec![stopped("i-1")]).facts(
        "i-1",
        InstanceFacts {
            stopped_by_ebb_at: Some(t("2026-11-27T18:01:00Z")),
            ..Default::default()
        },
    );
    assert_eq!(w.one("2026-11-30T09:00:00Z", &set).code, Code::StartNever);
}

#[test]
fn instances_between_states_or_terminated_are_left_alone() {
    let set = policies(OFFICE);
    let states = [
        InstanceState::Pending,
        InstanceState::Stopping,
        InstanceState::ShuttingDown,
        InstanceState::Terminated,
    ];
    let w = World::with(
        states
            .iter()
            .map(|s| {
                let mut i = dev("i");
                i.state = *s;
                i
            })
            .collect(),
    );
    let codes: Vec<(Action, Code)> = w
        .decide("2026-11-30T20:00:00Z", &set)
        .into_iter()
        .map(|d| (d.action, d.code))
        .collect();
    assert_eq!(
        codes,
        [
            (Action::None, Code::InTransition),
            (Action::None, Code::InTransition),
            (Action::None, Code::InTransition),
            (Action::None, Code::Terminated)
        ]
    );
}

const IDLE: &str = r#"
policies:
  - name: notebooks
    match: {tags: {workload: notebook}}
    idle: {gpu_below: 5, for: 30m, grace_after_start: 20m}
"#;

fn notebook(points: Vec<ebb::fleet::Sample>) -> World {
    let mut i = instance("i-nb", &[("workload", "notebook")]);
    i.gpu_util = points;
    World::with(vec![i])
}

#[test]
fn idle_when_every_sample_of_a_covered_window_is_below_the_threshold() {
    let set = policies(IDLE);
    let w = notebook(steady("2026-11-30T11:25:00Z", "2026-11-30T12:00:00Z", 2.0));
    let d = w.one("2026-11-30T12:00:00Z", &set);
    assert_eq!((d.action, d.code), (Action::Stop, Code::Idle));
    assert!(d.reason.contains("max 2%"), "{}", d.reason);
}

#[test]
fn one_sample_at_the_threshold_is_not_idle() {
    let set = policies(IDLE);
    let mut s = steady("2026-11-30T11:25:00Z", "2026-11-30T12:00:00Z", 2.0);
    s[3].percent = 5.0;
    let d = notebook(s).one("2026-11-30T12:00:00Z", &set);
    assert_eq!((d.action, d.code), (Action::None, Code::NotIdle));
}

#[test]
fn idle_coverage_each_way_the_data_can_fall_short() {
    let set = policies(IDLE);
    let now = "2026-11-30T12:00:00Z";
    // Window is 11:30-12:00.
    let cases = [
        ("no samples", vec![]),
        (
            "first sample too late",
            steady("2026-11-30T11:41:00Z", "2026-11-30T12:00:00Z", 0.0),
        ),
        (
            "a gap over 10 minutes",
            [
                steady("2026-11-30T11:30:00Z", "2026-11-30T11:35:00Z", 0.0),
                steady("2026-11-30T11:46:00Z", "2026-11-30T12:00:00Z", 0.0),
            ]
            .concat(),
        ),
        (
            "newest sample too old",
            steady("2026-11-30T11:30:00Z", "2026-11-30T11:49:00Z", 0.0),
        ),
        (
            "only samples after now",
            steady("2026-11-30T12:01:00Z", "2026-11-30T12:30:00Z", 0.0),
        ),
    ];
    for (what, points) in cases {
        let d = notebook(points).one(now, &set);
        assert_eq!(
            (d.action, d.code),
            (Action::None, Code::MetricsMissing),
            "{what}: {}",
            d.reason
        );
    }
    // Exactly at the limits is still covered.
    // First sample 10 minutes after the window starts, a 10-minute gap, newest 10 minutes old.
    let edge = samples(&[("2026-11-30T11:40:00Z", 0.0), ("2026-11-30T11:50:00Z", 1.0)]);
    let d = notebook(edge).one(now, &set);
    assert_eq!(
        (d.action, d.code),
        (Action::Stop, Code::Idle),
        "{}",
        d.reason
    );
}

#[test]
fn a_busy_sample_after_now_does_not_count() {
    let set = policies(IDLE);
    let mut s = steady("2026-11-30T11:25:00Z", "2026-11-30T12:00:00Z", 1.0);
    s.push(ebb::fleet::Sample::new(t("2026-11-30T12:03:00Z"), 90.0));
    let d = notebook(s).one("2026-11-30T12:00:00Z", &set);
    assert_eq!(d.code, Code::Idle);
}

#[test]
fn missing_metrics_idle_stops_without_data_but_not_with_a_busy_sample() {
    let set = policies(&IDLE.replace("grace_after_start: 20m", "missing_metrics: idle"));
    let d = notebook(vec![]).one("2026-11-30T12:00:00Z", &set);
    assert_eq!((d.action, d.code), (Action::Stop, Code::IdleMetricsMissing));
    let d = notebook(samples(&[("2026-11-30T11:45:00Z", 50.0)])).one("2026-11-30T12:00:00Z", &set);
    assert_eq!(d.code, Code::NotIdle);
}

/// What a provider says when GetMetricData fails (moto's answer to the current protocol).
const UNREAD: &str = "GetMetricData: service error: 404 Not Found";

#[test]
fn a_failed_read_is_no_idle_stop_whatever_missing_metrics_says() {
    let set = policies(&IDLE.replace("grace_after_start: 20m", "missing_metrics: idle"));
    // A successful read that found nothing still follows missing_metrics.
    let d = notebook(vec![]).one("2026-11-30T12:00:00Z", &set);
    assert_eq!((d.action, d.code), (Action::Stop, Code::IdleMetricsMissing));
    // A read that failed says nothing: no stop, and why.
    let w = notebook(vec![]).unread("i-nb", UNREAD);
    let d = w.one("2026-11-30T12:00:00Z", &set);
    assert_eq!((d.action, d.code), (Action::None, Code::MetricsUnreadable));
    assert!(
        d.reason.contains("could not be read") && d.reason.contains(UNREAD),
        "{}",
        d.reason
    );
    // Nor with missing_metrics: busy, nor with notice first (no notice of an idle stop).
    let d = w.one("2026-11-30T12:00:00Z", &policies(IDLE));
    assert_eq!((d.action, d.code), (Action::None, Code::MetricsUnreadable));
    let noticed = format!(
        "{}    notify: {{before: 15m}}\n",
        IDLE.replace("grace_after_start: 20m", "missing_metrics: idle")
    );
    let d = w.one("2026-11-30T12:00:00Z", &policies(&noticed));
    assert_eq!((d.action, d.code), (Action::None, Code::MetricsUnreadable));
}

#[test]
fn a_failed_read_defers_a_stop_that_busy_would_defer() {
    let set = policies(OFFICE);
    let w = World::with(vec![dev("i-1")]).unread("i-1", UNREAD);
    let d = w.one("2026-11-30T18:30:00Z", &set);
    assert_eq!((d.action, d.code), (Action::None, Code::MetricsUnreadable));
    assert!(
        d.reason.contains("(closed 18:00 UTC)") && d.reason.contains("stop deferred until idle"),
        "{}",
        d.reason
    );
    // Without busy deferral the stop never depended on the reading.
    let not_deferred =
        policies(&OFFICE.replace("periods:", "busy_defers_stop: false\n      periods:"));
    let d = w.one("2026-11-30T18:30:00Z", &not_deferred);
    assert_eq!((d.action, d.code), (Action::Stop, Code::OutsideHours));
    // Past max_defer a busy instance stops too: the unknown changes nothing.
    let capped = policies(&OFFICE.replace("periods:", "max_defer: 2h\n      periods:"));
    let d = w.one("2026-11-30T19:59:00Z", &capped);
    assert_eq!((d.action, d.code), (Action::None, Code::MetricsUnreadable));
    assert!(d.reason.contains("until idle or 20:00 UTC"), "{}", d.reason);
    let d = w.one("2026-11-30T20:00:00Z", &capped);
    assert_eq!((d.action, d.code), (Action::Stop, Code::MaxDeferReached));
    // An idle rule outside hours, on an instance whose read failed: not stopped either.
    let idle_outside = policies(&format!(
        "{}    idle: {{gpu_below: 5, for: 30m, missing_metrics: idle, when: outside_hours}}\n",
        OFFICE.replace("periods:", "outside_hours: none\n      periods:")
    ));
    let d = w.one("2026-11-30T18:30:00Z", &idle_outside);
    assert_eq!((d.action, d.code), (Action::None, Code::MetricsUnreadable));
    // In work hours nothing would stop it anyway.
    let d = w.one("2026-11-30T12:00:00Z", &set);
    assert_eq!((d.action, d.code), (Action::None, Code::InHours));
}

#[test]
fn explain_says_the_read_failed_and_nothing_is_stopped_for_idleness() {
    let set = policies(&IDLE.replace("grace_after_start: 20m", "missing_metrics: idle"));
    let w = notebook(vec![]).unread("i-nb", UNREAD);
    let (fleet, prior) = w.fleet();
    let text = ebb::engine::explain(t("2026-11-30T12:00:00Z"), &set, &fleet, &prior, "i-nb")
        .unwrap()
        .to_string();
    assert!(
        text.contains(&format!(
            "idle rule (5% for 30m): GPU utilisation could not be read ({UNREAD}): idle or not is unknown, so no idle stop, whatever missing_metrics says"
        )),
        "{text}"
    );
    assert!(text.contains("busy: unknown"), "{text}");
    assert!(
        text.contains("decision: none [metrics_unreadable]"),
        "{text}"
    );
}

#[test]
fn grace_after_start_protects_a_fresh_instance() {
    let set = policies(IDLE);
    let mut w = notebook(steady("2026-11-30T11:25:00Z", "2026-11-30T12:00:00Z", 0.0));
    w.instances[0].launched_at = Some(t("2026-11-30T11:45:00Z"));
    assert_eq!(w.one("2026-11-30T12:00:00Z", &set).code, Code::IdleGrace);
    assert_eq!(w.one("2026-11-30T12:05:00Z", &set).code, Code::Idle);
}

#[test]
fn idle_when_outside_hours_applies_only_outside() {
    let set = policies(
        r#"
policies:
  - name: training
    match: {tags: {workload: notebook}}
    work_hours:
      timezone: UTC
      periods: [{days: mon-fri, start: "09:00", stop: "18:00"}]
      outside_hours: none
    idle: {gpu_below: 5, for: 30m, when: outside_hours}
"#,
    );
    let w = notebook(steady("2026-11-30T10:00:00Z", "2026-11-30T20:00:00Z", 0.0));
    let d = w.one("2026-11-30T12:00:00Z", &set);
    assert_eq!((d.action, d.code), (Action::None, Code::InHours));
    let d = w.one("2026-11-30T19:00:00Z", &set);
    assert_eq!((d.action, d.code), (Action::Stop, Code::Idle));
}

#[test]
fn protections_block_idle_stops() {
    let set = policies(IDLE);
    let mut w = notebook(steady("2026-11-30T11:25:00Z", "2026-11-30T12:00:00Z", 0.0));
    w.instances[0]
        .tags
        .insert("ebb:keep-until".into(), "2026-11-30T13:00:00Z".into());
    assert_eq!(w.one("2026-11-30T12:00:00Z", &set).code, Code::KeepUntil);
}

const NOTICE: &str = r#"
policies:
  - name: office
    match: {tags: {env: dev}}
    work_hours:
      timezone: UTC
      periods: [{days: mon-fri, start: "09:00", stop: "18:00"}]
    notify: {before: 15m}
"#;

fn notified(at: Option<&str>) -> World {
    World::with(vec![dev("i-1")]).facts(
        "i-1",
        InstanceFacts {
            notified_at: at.map(t),
            ..Default::default()
        },
    )
}

#[test]
fn notice_goes_out_before_the_close_and_the_stop_waits_for_it() {
    let set = policies(NOTICE);
    let d = notified(None).one("2026-11-30T17:44:00Z", &set);
    assert_eq!((d.action, d.code), (Action::None, Code::InHours));
    let d = notified(None).one("2026-11-30T17:45:00Z", &set);
    assert_eq!((d.action, d.code), (Action::Notify, Code::Notice));
    assert_eq!(d.stop_at, Some(t("2026-11-30T18:00:00Z")));
    let d = notified(Some("2026-11-30T17:45:00Z")).one("2026-11-30T17:50:00Z", &set);
    assert_eq!((d.action, d.code), (Action::None, Code::NoticePending));
    let d = notified(Some("2026-11-30T17:45:00Z")).one("2026-11-30T18:00:00Z", &set);
    assert_eq!((d.action, d.code), (Action::Stop, Code::OutsideHours));
}

#[test]
fn a_missed_notice_is_sent_late_and_delays_the_stop() {
    let set = policies(NOTICE);
    // ebb was down at 17:45; at 18:10 it gives notice instead of stopping at once.
    let d = notified(None).one("2026-11-30T18:10:00Z", &set);
    assert_eq!((d.action, d.code), (Action::Notify, Code::NoticeLate));
    assert_eq!(d.stop_at, Some(t("2026-11-30T18:25:00Z")));
    let d = notified(Some("2026-11-30T18:10:00Z")).one("2026-11-30T18:24:00Z", &set);
    assert_eq!(d.code, Code::NoticePending);
    let d = notified(Some("2026-11-30T18:10:00Z")).one("2026-11-30T18:25:00Z", &set);
    assert_eq!(d.action, Action::Stop);
    // A notice from yesterday's close does not count for today's.
    let d = notified(Some("2026-11-27T17:45:00Z")).one("2026-11-30T18:10:00Z", &set);
    assert_eq!(d.code, Code::NoticeLate);
}

#[test]
fn an_idle_stop_gets_notice_first_and_a_stale_notice_is_renewed() {
    let set = policies(&format!("{IDLE}    notify: {{before: 10m}}\n"));
    let points = steady("2026-11-30T11:00:00Z", "2026-11-30T13:00:00Z", 0.0);
    let facts = |at: Option<&str>| {
        notebook(points.clone()).facts(
            "i-nb",
            InstanceFacts {
                notified_at: at.map(t),
                ..Default::default()
            },
        )
    };
    let d = facts(None).one("2026-11-30T12:00:00Z", &set);
    assert_eq!((d.action, d.code), (Action::Notify, Code::IdleNotice));
    assert_eq!(d.stop_at, Some(t("2026-11-30T12:10:00Z")));
    assert_eq!(
        facts(Some("2026-11-30T12:00:00Z"))
            .one("2026-11-30T12:05:00Z", &set)
            .code,
        Code::NoticePending
    );
    assert_eq!(
        facts(Some("2026-11-30T12:00:00Z"))
            .one("2026-11-30T12:10:00Z", &set)
            .action,
        Action::Stop
    );
    assert_eq!(
        facts(Some("2026-11-30T11:00:00Z"))
            .one("2026-11-30T12:10:00Z", &set)
            .code,
        Code::IdleNotice
    );
}

#[test]
fn no_notice_for_a_protected_instance() {
    let set = policies(NOTICE);
    let mut w = notified(None);
    w.instances[0]
        .tags
        .insert("ebb:keep-until".into(), "2026-12-01T00:00:00Z".into());
    assert_eq!(w.one("2026-11-30T17:50:00Z", &set).action, Action::None);
}

#[test]
fn a_notice_that_no_longer_holds_is_withdrawn_and_one_whose_stop_waits_is_kept() {
    let set = policies(NOTICE);
    let tagged = |w: World, state: InstanceState| {
        let mut w = w;
        w.instances[0]
            .tags
            .insert("ebb:stop-at".into(), "2026-11-27T18:00:00Z".into());
        w.instances[0].state = state;
        w
    };
    // Last Friday's notice, on a box running again on Monday: taken back.
    let d = tagged(notified(None), InstanceState::Running).one("2026-11-30T10:00:00Z", &set);
    assert_eq!(
        (d.action, d.code),
        (Action::WithdrawNotice, Code::NoticeWithdrawn)
    );
    assert!(d.reason.starts_with("in work hours"), "{}", d.reason);
    assert!(d.reason.contains("2026-11-27T18:00:00Z"), "{}", d.reason);
    // A notice whose stop waits for it stays.
    let d = tagged(
        notified(Some("2026-11-30T17:45:00Z")),
        InstanceState::Running,
    )
    .one("2026-11-30T17:50:00Z", &set);
    assert_eq!((d.action, d.code), (Action::None, Code::NoticePending));
    // An override calls the stop off: the notice goes.
    let mut w = tagged(
        notified(Some("2026-11-30T17:45:00Z")),
        InstanceState::Running,
    );
    w.overrides.push(Override {
        instance: "i-1".into(),
        until: t("2026-11-30T22:00:00Z"),
        reason: "demo".into(),
        by: "alice".into(),
    });
    let d = w.one("2026-11-30T17:50:00Z", &set);
    assert_eq!(d.action, Action::WithdrawNotice);
    // A stopped box keeps its tag until it runs again.
    let d = tagged(notified(None), InstanceState::Stopped).one("2026-11-30T20:00:00Z", &set);
    assert_ne!(d.action, Action::WithdrawNotice);
}

const SPOT: &str = r#"
policies:
  - name: training
    match: {tags: {workload: training}}
    spot:
      min_savings: 40%
      checkpoint_max_age: 30m
      instance_types: [p4d.24xlarge, p4de.24xlarge]
"#;

fn trainer(extra: &[(&str, &str)]) -> World {
    let mut tags = vec![
        ("workload", "training"),
        ("ebb:interruptible", "true"),
        ("ebb:checkpoint-at", "2026-11-30T11:50:00Z"),
    ];
    for (k, v) in extra {
        tags.retain(|(key, _)| key != k);
        tags.push((k, v));
    }
    let mut i = instance("i-train", &tags);
    i.instance_type = "p4d.24xlarge".into();
    i.gpu_util = steady("2026-11-30T11:00:00Z", "2026-11-30T12:00:00Z", 98.0);
    World::with(vec![i])
        .price("us-east-1", "p4d.24xlarge", 32.77, 12.41)
        .price("us-east-1", "p4de.24xlarge", 40.96, 11.00)
}

#[test]
fn an_eligible_instance_moves_to_the_cheapest_acceptable_spot_type() {
    let d = trainer(&[]).one("2026-11-30T12:00:00Z", &policies(SPOT));
    assert_eq!(
        (d.action, d.code),
        (Action::MigrateToSpot, Code::SpotSavings)
    );
    assert!(d.reason.contains("p4de.24xlarge $11.000/h"), "{}", d.reason);
    assert!(d.reason.contains("saves 66%"), "{}", d.reason);
}

#[test]
fn another_accounts_instance_is_refused_before_anything_is_stopped() {
    let set = policies(SPOT);
    let mut theirs = trainer(&[]);
    theirs.instances[0].via_role = Some("arn:aws:iam::111111111111:role/ebb".into());
    let d = theirs.one("2026-11-30T12:00:00Z", &set);
    assert_eq!((d.action, d.code), (Action::None, Code::SpotOtherAccount));
    assert!(d.reason.contains("role/ebb"), "{}", d.reason);
    assert!(d.reason.contains("another account"), "{}", d.reason);
    // The same instance in ebb's own account moves.
    let d = trainer(&[]).one("2026-11-30T12:00:00Z", &set);
    assert_eq!(d.action, Action::MigrateToSpot, "{}", d.reason);
}

#[test]
fn spot_needs_the_interruptible_tag_on_demand_savings_and_a_fresh_checkpoint() {
    let set = policies(SPOT);
    let now = "2026-11-30T12:00:00Z";
    let none = |w: World, what: &str| {
        let d = w.one(now, &set);
        assert_eq!(d.action, Action::None, "{what}: {}", d.reason);
    };
    none(
        trainer(&[("ebb:interruptible", "false")]),
        "not interruptible",
    );
    let mut spot = trainer(&[]);
    spot.instances[0].lifecycle = Lifecycle::Spot;
    none(spot, "already spot");
    let mut missing = trainer(&[]);
    missing.instances[0].tags.remove("ebb:checkpoint-at");
    none(missing, "no checkpoint tag");
    none(
        trainer(&[("ebb:checkpoint-at", "2026-11-30T11:29:00Z")]),
        "stale checkpoint",
    );
    none(
        trainer(&[("ebb:checkpoint-at", "yesterday")]),
        "unparseable checkpoint",
    );
    none(
        trainer(&[("ebb:checkpoint-at", "2026-11-30T13:00:00Z")]),
        "checkpoint in the future",
    );
    let mut dear = trainer(&[]);
    dear.prices.clear();
    let dear = dear.price("us-east-1", "p4d.24xlarge", 32.77, 21.00).price(
        "us-east-1",
        "p4de.24xlarge",
        40.96,
        30.00,
    );
    none(dear, "savings 36% < 40%");
    let mut unpriced = trainer(&[]);
    unpriced.prices.clear();
    none(unpriced, "no prices");
    let mut overridden = trainer(&[]);
    overridden.overrides.push(Override {
        instance: "i-train".into(),
        until: t("2026-11-30T20:00:00Z"),
        reason: "final epoch".into(),
        by: "li".into(),
    });
    let d = overridden.one(now, &set);
    assert_eq!((d.action, d.code), (Action::None, Code::Override));
    // A checkpoint exactly at the limit still counts.
    let d = trainer(&[("ebb:checkpoint-at", "2026-11-30T11:30:00Z")]).one(now, &set);
    assert_eq!(d.action, Action::MigrateToSpot);
}

#[test]
fn an_instance_being_migrated_is_left_to_its_migration_and_a_replacement_is_not_moved_again() {
    let set = policies(SPOT);
    let now = "2026-11-30T12:00:00Z";
    // Stopped by its migration: no rule starts or stops it.
    let mut moving = trainer(&[("ebb:migrating", "7")]);
    moving.instances[0].state = ebb::fleet::InstanceState::Stopped;
    let d = moving.one(now, &set);
    assert_eq!(
        (d.action, d.code),
        (Action::None, Code::Migrating),
        "{}",
        d.reason
    );
    assert!(d.reason.contains("spot migration 7"), "{}", d.reason);
    // An on-demand fallback launched by migration 7: eligible in every other way, not moved.
    let d = trainer(&[("ebb:migration", "7")]).one(now, &set);
    assert_eq!(d.action, Action::None, "{}", d.reason);
    assert!(
        d.reason
            .contains("not moved to spot: it replaces an instance moved by spot migration 7"),
        "{}",
        d.reason
    );
}

#[test]
fn a_rule_never_stops_a_one_time_spot_instance_of_a_migration() {
    let set = policies(&format!(
        "{SPOT}    idle: {{gpu_below: 5, for: 30m, action: stop}}\n"
    ));
    let mut replacement = trainer(&[("ebb:migration", "7")]);
    replacement.instances[0].lifecycle = Lifecycle::Spot;
    replacement.instances[0].gpu_util = steady("2026-11-30T11:00:00Z", "2026-11-30T12:00:00Z", 1.0);
    let d = replacement.one("2026-11-30T12:00:00Z", &set);
    assert_eq!(
        (d.action, d.code),
        (Action::None, Code::SpotCannotStop),
        "{}",
        d.reason
    );
    // The same idle box on demand is stopped.
    let mut on_demand = trainer(&[("ebb:migration", "7")]);
    on_demand.instances[0].gpu_util = steady("2026-11-30T11:00:00Z", "2026-11-30T12:00:00Z", 1.0);
    assert_eq!(
        on_demand.one("2026-11-30T12:00:00Z", &set).action,
        Action::Stop
    );
}

#[test]
fn dry_run_policies_mark_their_decisions() {
    let set = policies(&OFFICE.replace("    work_hours:", "    dry_run: true\n    work_hours:"));
    let d = World::with(vec![dev("i-1")]).one("2026-11-30T20:00:00Z", &set);
    assert_eq!(d.action, Action::Stop);
    assert!(d.dry_run);
}

#[test]
fn decide_is_deterministic_and_keeps_fleet_order() {
    let set = policies(OFFICE);
    let w = World::with((0..50).map(|i| dev(&format!("i-{i:03}"))).collect());
    let a = w.decide("2026-11-30T20:00:00Z", &set);
    let b = w.decide("2026-11-30T20:00:00Z", &set);
    assert_eq!(a, b);
    let ids: Vec<&str> = a.iter().map(|d| d.instance.as_str()).collect();
    let want: Vec<String> = (0..50).map(|i| format!("i-{i:03}")).collect();
    assert_eq!(ids, want);
}

#[test]
fn a_large_fleet_decided_on_several_threads_matches_one_by_one() {
    let set = policies(NOTICE);
    let mut w = World::with(
        (0..5000)
            .map(|i| {
                let mut inst = dev(&format!("i-{i:05}"));
                if i % 3 == 0 {
                    inst.state = InstanceState::Stopped;
                }
                inst
            })
            .collect(),
    );
    w = w.facts(
        "i-00003",
        InstanceFacts {
            stopped_by_ebb_at: Some(t("2026-11-27T18:00:00Z")),
            ..Default::default()
        },
    );
    let now = "2026-11-30T09:05:00Z";
    let all = w.decide(now, &set);
    let fleet = ebb::fleet::Fleet {
        instances: w.instances.clone(),
        ..Default::default()
    };
    let prior = ebb::engine::Prior::new(w.facts.clone(), vec![]);
    assert_eq!(all.len(), 5000);
    for (d, inst) in all.iter().zip(&fleet.instances) {
        let one = ebb::engine::explain(t(now), &set, &fleet, &prior, &inst.id).unwrap();
        assert_eq!(*d, one.decision);
    }
    assert_eq!(all[3].action, Action::Start);
}

#[test]
fn codes_are_unique_snake_case_names() {
    let mut names: Vec<&str> = Code::ALL.iter().map(|c| c.as_str()).collect();
    // Digits only inside a word (`owned_by_ec2_fleet`).
    assert!(names
        .iter()
        .all(|n| n.starts_with(|c: char| c.is_ascii_lowercase())
            && n.chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')));
    names.sort();
    names.dedup();
    assert_eq!(names.len(), Code::ALL.len());
}

#[test]
fn the_policies_page_documents_every_code() {
    let page =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/policies.md")).unwrap();
    for code in Code::ALL {
        let row = format!("| `{}` |", code.as_str());
        assert!(
            page.contains(&row),
            "docs/policies.md's \"Decision codes\" lacks a row for {code}"
        );
    }
}

/// Office hours 09:00-18:00 Europe/Berlin (08:00-17:00 UTC in winter), started 15 minutes ahead.
const BERLIN_AHEAD: &str = r#"
policies:
  - name: berlin
    match: {tags: {env: dev}}
    work_hours:
      timezone: Europe/Berlin
      start_ahead: 15m
      periods: [{days: mon-fri, start: "09:00", stop: "18:00"}]
"#;

#[test]
fn start_ahead_starts_from_the_lead_time_and_not_earlier() {
    let set = policies(BERLIN_AHEAD);
    let w = World::with(vec![stopped("i-1")]).facts(
        "i-1",
        InstanceFacts {
            stopped_by_ebb_at: Some(t("2026-11-27T17:01:00Z")),
            ..Default::default()
        },
    );
    let d = w.one("2026-11-30T07:44:59Z", &set);
    assert_eq!(
        (d.action, d.code),
        (Action::None, Code::StoppedOutsideHours)
    );
    let d = w.one("2026-11-30T07:45:00Z", &set);
    assert_eq!((d.action, d.code), (Action::Start, Code::StartAhead));
    assert!(
        d.reason
            .starts_with("starting 15m ahead of 09:00 Europe/Berlin; ebb stopped it at"),
        "{}",
        d.reason
    );
    // At and after the opening it is the ordinary start.
    let d = w.one("2026-11-30T08:00:00Z", &set);
    assert_eq!((d.action, d.code), (Action::Start, Code::StartAtOpen));
}

#[test]
fn in_the_lead_time_a_running_box_is_left_alone_and_the_close_is_unchanged() {
    let set = policies(BERLIN_AHEAD);
    let w = World::with(vec![dev("i-1")]);
    let d = w.one("2026-11-30T07:44:00Z", &set);
    assert_eq!((d.action, d.code), (Action::Stop, Code::OutsideHours));
    let d = w.one("2026-11-30T07:50:00Z", &set);
    assert_eq!((d.action, d.code), (Action::None, Code::StartAheadKept));
    assert!(
        d.reason
            .contains("they open 09:00 Europe/Berlin and start_ahead is 15m"),
        "{}",
        d.reason
    );
    let d = w.one("2026-11-30T16:59:00Z", &set);
    assert_eq!((d.action, d.code), (Action::None, Code::InHours));
    let d = w.one("2026-11-30T17:00:00Z", &set);
    assert_eq!((d.action, d.code), (Action::Stop, Code::OutsideHours));
    // No lead time is added after the close: the next one is Tuesday 07:45 UTC.
    let d = w.one("2026-12-01T07:44:00Z", &set);
    assert_eq!(d.action, Action::Stop);
}

#[test]
fn start_ahead_counts_back_from_the_instant_the_opening_happens_across_dst() {
    // 02:30 on New York's spring-forward day is in the gap: the hours open at 03:00 EDT
    // (07:00 UTC), and the lead time is 15 minutes before that instant.
    let set = policies(
        r#"
policies:
  - name: ny
    match: {tags: {env: dev}}
    work_hours:
      timezone: America/New_York
      start_ahead: 15m
      periods: [{days: sun, start: "02:30", stop: "12:00"}]
"#,
    );
    let w = World::with(vec![stopped("i-1")]).facts(
        "i-1",
        InstanceFacts {
            stopped_by_ebb_at: Some(t("2026-03-01T17:00:00Z")),
            ..Default::default()
        },
    );
    assert_eq!(w.one("2026-03-08T06:44:00Z", &set).action, Action::None);
    let d = w.one("2026-03-08T06:45:00Z", &set);
    assert_eq!((d.action, d.code), (Action::Start, Code::StartAhead));
    assert!(
        d.reason.contains("ahead of 03:00 America/New_York"),
        "{}",
        d.reason
    );
}

#[test]
fn with_start_at_open_all_a_start_ahead_belongs_to_the_window_it_prepares() {
    let set =
        policies(&BERLIN_AHEAD.replace("start_ahead:", "start_at_open: all\n      start_ahead:"));
    // Started ahead at 07:45 UTC, then stopped by a person at 07:55: that stop sticks.
    let mut person = stopped("i-person");
    person.state_since = Some(t("2026-11-30T07:55:00Z"));
    let mut weekend = stopped("i-weekend");
    weekend.state_since = Some(t("2026-11-28T10:00:00Z"));
    let w = World::with(vec![person, weekend]).facts(
        "i-person",
        InstanceFacts {
            started_by_ebb_at: Some(t("2026-11-30T07:45:00Z")),
            ..Default::default()
        },
    );
    let d = w.decide("2026-11-30T08:30:00Z", &set);
    assert_eq!(
        (d[0].action, d[0].code),
        (Action::None, Code::StartedThisWindow)
    );
    assert_eq!((d[1].action, d[1].code), (Action::Start, Code::StartAtOpen));
    let d = w.decide("2026-11-30T07:46:00Z", &set);
    assert_eq!((d[1].action, d[1].code), (Action::Start, Code::StartAhead));
}

#[test]
fn the_next_opening_is_after_the_close_within_hours_and_over_the_weekend_on_friday() {
    let set = policies(
        r#"
policies:
  - name: office
    match: {tags: {team: research}}
    work_hours:
      timezone: Europe/Berlin
      periods:
        - {days: mon-fri, start: "09:00", stop: "18:00"}
"#,
    );
    let office = &set.policies[0];
    let opening = |at: &str| ebb::engine::next_opening(office, t(at));
    // Monday 12:00 in Berlin, within hours: Tuesday's opening, not the close.
    assert_eq!(
        opening("2026-11-30T11:00:00Z"),
        Some(t("2026-12-01T08:00:00Z"))
    );
    // At Monday's close: Tuesday's opening.
    assert_eq!(
        opening("2026-11-30T17:00:00Z"),
        Some(t("2026-12-01T08:00:00Z"))
    );
    // Friday's close: Monday's.
    assert_eq!(
        opening("2026-12-04T17:00:00Z"),
        Some(t("2026-12-07T08:00:00Z"))
    );
}

#[test]
fn the_next_change_is_the_close_for_a_running_box_and_the_start_ahead_for_a_stopped_one() {
    let set = policies(
        r#"
policies:
  - name: office
    match: {tags: {team: research}}
    work_hours:
      timezone: Europe/Berlin
      periods:
        - {days: mon-fri, start: "09:00", stop: "18:00"}
      outside_hours: hibernate
      start_ahead: 15m
"#,
    );
    let office = &set.policies[0];
    // Monday 12:00 in Berlin (11:00 UTC): open.
    let open = ebb::engine::next_change(office, true, t("2026-11-30T11:00:00Z")).unwrap();
    assert_eq!(open.at, t("2026-11-30T17:00:00Z"));
    assert_eq!(open.what, "hibernates at the close");
    assert_eq!(open.zone, chrono_tz::Europe::Berlin);
    // Monday 20:00 in Berlin: the stopped box starts at 08:45 on Tuesday.
    let closed = ebb::engine::next_change(office, false, t("2026-11-30T19:00:00Z")).unwrap();
    assert_eq!(closed.at, t("2026-12-01T07:45:00Z"));
    assert_eq!(closed.what, "starts at the opening if ebb stopped it");
    // Within the lead time the start is due now.
    let ahead = ebb::engine::next_change(office, false, t("2026-12-01T07:50:00Z")).unwrap();
    assert_eq!(ahead.at, t("2026-12-01T07:50:00Z"));
}
