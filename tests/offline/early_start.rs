//! Early start (issue 31, point 5): when the starts due at an opening cannot all be made by it
//! within the account's StartInstances (or ModifyInstanceAttribute) bucket, they begin early
//! enough that they all are, earlier openings first, and the reason says so. The engine with
//! hand-worked numbers, then `ebb plan` on a snapshot of many boxes (EC2's published buckets:
//! 1000 instance tokens, 2 a second). 2026-11-30 is a Monday.

use crate::common;

use common::*;
use ebb::engine::{decide, Action, Code, InstanceFacts, StartRates, TokenRate};
use std::collections::HashSet;

/// Office boxes opening at 09:00 UTC, started 5 minutes ahead; night boxes opening at 09:10.
const POLICIES: &str = r#"
policies:
  - name: office
    match: {tags: {team: office}}
    work_hours:
      timezone: UTC
      start_ahead: 5m
      periods: [{days: mon-fri, start: "09:00", stop: "19:00"}]
  - name: late
    match: {tags: {team: late}}
    start: {fallback_types: [g6.xlarge], restore_type: true}
    work_hours:
      timezone: UTC
      periods: [{days: mon-fri, start: "09:10", stop: "19:00"}]
"#;

/// A bucket of 5 that fills at 1 a second for StartInstances, and one of 2 filling at one
/// every 2 seconds for ModifyInstanceAttribute.
const RATES: StartRates = StartRates {
    start: TokenRate::of(5.0, 1.0),
    modify: TokenRate::of(2.0, 0.5),
};

/// `n` boxes of `team` that ebb stopped on Friday evening, ids `PREFIX-000...`.
fn stopped(world: World, prefix: &str, team: &str, n: usize) -> World {
    let mut world = world;
    for i in 0..n {
        let id = format!("{prefix}-{i:03}");
        let mut b = instance(&id, &[("team", team)]);
        b.state = ebb::fleet::InstanceState::Stopped;
        world.instances.push(b);
        world = world.facts(
            &id,
            InstanceFacts {
                stopped_by_ebb_at: Some(t("2026-11-27T19:00:00Z")),
                ..Default::default()
            },
        );
    }
    world
}

/// The actions and codes at `now` with the buckets known (and `moved` changed back first).
fn decisions(world: &World, now: &str, moved: &[&str]) -> Vec<ebb::engine::Decision> {
    let (fleet, prior) = world.fleet();
    let moved: HashSet<String> = moved.iter().map(|s| s.to_string()).collect();
    let prior = prior.with_start_rates(RATES, moved);
    decide(t(now), &policies(POLICIES), &fleet, &prior)
}

#[test]
fn starts_within_the_burst_begin_at_start_ahead_as_before() {
    let world = stopped(World::default(), "i-office", "office", 5);
    let at = |now: &str| decisions(&world, now, &[]);
    assert!(at("2026-11-30T08:54:59Z")
        .iter()
        .all(|d| d.action == Action::None));
    let d = at("2026-11-30T08:55:00Z");
    assert!(d.iter().all(|d| d.action == Action::Start));
    assert!(!d[0].reason.contains("early"), "{}", d[0].reason);
}

#[test]
fn starts_beyond_the_burst_begin_early_by_what_the_bucket_takes_to_refill() {
    // 125 due at 08:55: 5 at once, then 1 a second: the first 120 s earlier, 2 min early.
    let world = stopped(World::default(), "i-office", "office", 125);
    let at = |now: &str| decisions(&world, now, &[]);
    assert!(at("2026-11-30T08:52:59Z")
        .iter()
        .all(|d| d.action == Action::None));
    let d = at("2026-11-30T08:53:00Z");
    assert!(d
        .iter()
        .all(|d| (d.action, d.code) == (Action::Start, Code::StartAhead)));
    assert_eq!(
        d[0].reason,
        "starting 7m ahead of 09:00 UTC; started 2m early: 125 starts due by 09:00 UTC exceed \
         EC2's StartInstances rate (5 at once, then 1/s); ebb stopped it at 2026-11-27 19:00 UTC"
    );
    // One more second of starts than the bucket refills in two minutes: three minutes early.
    let world = stopped(World::default(), "i-office", "office", 126);
    let d = decisions(&world, "2026-11-30T08:52:00Z", &[]);
    assert!(
        d.iter().all(|d| d.action == Action::Start),
        "{}",
        d[0].reason
    );
}

#[test]
fn earlier_openings_go_first_and_the_later_ones_borrow_nothing_from_them() {
    // 65 office boxes due at 08:55 and 65 late boxes due at 09:10, in one bucket: the late ones
    // need 60 s before 09:10 (1 min early); the office ones, served first, need theirs before
    // 08:55 (60 s: 1 min early), the 15 minutes between refilling the bucket. At 09:09 the
    // office boxes are in hours: the late ones are the only starts due.
    let world = stopped(World::default(), "i-office", "office", 65);
    let world = stopped(world, "i-late", "late", 65);
    let d = decisions(&world, "2026-11-30T08:54:00Z", &[]);
    let office: Vec<_> = d
        .iter()
        .filter(|d| d.instance.starts_with("i-office"))
        .collect();
    let late: Vec<_> = d
        .iter()
        .filter(|d| d.instance.starts_with("i-late"))
        .collect();
    assert!(
        office.iter().all(|d| d.action == Action::Start),
        "{}",
        office[0].reason
    );
    assert!(
        late.iter().all(|d| d.action == Action::None),
        "{}",
        late[0].reason
    );
    let d = decisions(&world, "2026-11-30T09:09:00Z", &[]);
    let late: Vec<_> = d
        .iter()
        .filter(|d| d.instance.starts_with("i-late"))
        .collect();
    assert!(
        late.iter().all(|d| d.action == Action::Start),
        "{}",
        late[0].reason
    );
    assert!(
        late[0].reason.contains(
            "started 1m early: 65 starts due by 09:10 UTC exceed EC2's StartInstances rate"
        ),
        "{}",
        late[0].reason
    );
}

#[test]
fn type_changes_back_count_against_modify_instance_attributes_bucket() {
    // 70 late boxes due at 09:10: StartInstances' bucket needs 65 s (2 min early); changed
    // back to their own types first, ModifyInstanceAttribute's (2, then one every 2 s) needs
    // 136 s: 3 min early.
    let world = stopped(World::default(), "i-late", "late", 70);
    let ids: Vec<String> = (0..70).map(|i| format!("i-late-{i:03}")).collect();
    let moved: Vec<&str> = ids.iter().map(String::as_str).collect();
    let d = decisions(&world, "2026-11-30T09:07:00Z", &moved);
    assert!(
        d.iter().all(|d| d.action == Action::Start),
        "{}",
        d[0].reason
    );
    assert!(
        d[0].reason.contains(
            "started 3m early: 70 starts due by 09:10 UTC exceed EC2's \
             ModifyInstanceAttribute rate (2 at once, then 0.5/s)"
        ),
        "{}",
        d[0].reason
    );
    // Without the type changes, StartInstances' bucket alone: 2 min early.
    let d = decisions(&world, "2026-11-30T09:07:00Z", &[]);
    assert!(
        d.iter().all(|d| d.action == Action::None),
        "{}",
        d[0].reason
    );
    let d = decisions(&world, "2026-11-30T09:08:00Z", &[]);
    assert!(
        d.iter().all(|d| d.action == Action::Start),
        "{}",
        d[0].reason
    );
    assert!(
        d[0].reason.contains("StartInstances rate"),
        "{}",
        d[0].reason
    );
}

#[test]
fn a_box_started_early_is_kept_running_and_still_counts() {
    // Half the 125 office boxes were started at 08:53; at 08:54 the others still start early,
    // and the started ones are not stopped for being outside hours.
    let mut world = stopped(World::default(), "i-office", "office", 125);
    for (n, b) in world.instances.iter_mut().enumerate().take(60) {
        b.state = ebb::fleet::InstanceState::Running;
        b.gpu_util = steady("2026-11-30T08:53:00Z", "2026-11-30T08:54:00Z", 0.0);
        let facts = InstanceFacts {
            started_by_ebb_at: Some(t("2026-11-30T08:53:00Z")),
            ..Default::default()
        };
        world.facts.insert(format!("i-office-{n:03}"), facts);
    }
    let d = decisions(&world, "2026-11-30T08:54:00Z", &[]);
    assert!(
        d[..60].iter().all(|d| d.action == Action::None),
        "{}",
        d[0].reason
    );
    assert!(
        d[..60].iter().all(|d| d.code == Code::StartAheadKept),
        "{}",
        d[0].reason
    );
    assert!(
        d[60..].iter().all(|d| d.action == Action::Start),
        "{}",
        d[60].reason
    );
}

/// A snapshot of `n` office boxes ebb stopped on Friday, with the policies in `policies/`.
fn snapshot(dir: &std::path::Path, n: usize) {
    std::fs::create_dir_all(dir.join("policies")).unwrap();
    std::fs::write(dir.join("policies/office.yaml"), POLICIES).unwrap();
    let mut fleet = String::from("instances:\n");
    for i in 0..n {
        fleet.push_str(&format!(
            "  - {{id: i-{i:05}, region: us-east-1, type: g5.xlarge, state: stopped, \
             stopped_by_ebb_at: 2026-11-27T19:00:00Z, tags: {{team: office}}}}\n"
        ));
    }
    std::fs::write(dir.join("fleet.yaml"), fleet).unwrap();
}

/// `ebb plan --format json` at `at`: each instance's action and reason.
fn plan(dir: &std::path::Path, at: &str) -> Vec<(String, String)> {
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
            (s("action"), s("reason"))
        })
        .collect()
}

#[test]
fn plan_starts_2000_boxes_9_minutes_early_within_ec2s_published_buckets() {
    // 2000 starts due at 08:55: 1000 at once, the other 1000 at 2 a second, 500 s: 9 min.
    let dir = tempfile::tempdir().unwrap();
    snapshot(dir.path(), 2000);
    let before = plan(dir.path(), "2026-11-30T08:45:59Z");
    assert!(before.iter().all(|(a, _)| a == "none"), "{:?}", before[0]);
    let at = plan(dir.path(), "2026-11-30T08:46:00Z");
    assert!(at.iter().all(|(a, _)| a == "start"), "{:?}", at[0]);
    assert!(
        at[0].1.starts_with(
            "starting 14m ahead of 09:00 UTC; started 9m early: 2000 starts due by 09:00 UTC \
             exceed EC2's StartInstances rate (1000 at once, then 2/s)"
        ),
        "{}",
        at[0].1
    );
    // 1000 boxes fit the burst: they start at start_ahead, not early.
    snapshot(dir.path(), 1000);
    let few = plan(dir.path(), "2026-11-30T08:46:00Z");
    assert!(few.iter().all(|(a, _)| a == "none"), "{:?}", few[0]);
}
