//! `idle.min_gap`: an idle box outside work hours is kept when the opening is near and EC2
//! refused a start of its type for lack of capacity not long ago. 2026-12-01 is a Tuesday.

use crate::common;

use common::*;
use ebb::engine::{Action, Code};

/// Office hours 09:00-19:00 UTC on weekdays, nothing stopped at the close; idle boxes stopped
/// after 30 minutes, unless the opening is within an hour and capacity was short this week.
const POLICY: &str = r#"
policies:
  - name: office
    match: {tags: {team: research}}
    work_hours:
      timezone: UTC
      outside_hours: none
      periods: [{days: mon-fri, start: "09:00", stop: "19:00"}]
    idle: {gpu_below: 5, for: 30m, min_gap: 1h}
"#;

/// A g5.xlarge in us-east-1, idle since 06:00 on Tuesday.
fn idle_box() -> World {
    let mut i = instance("i-1", &[("team", "research")]);
    i.gpu_util = steady("2026-12-01T06:00:00Z", "2026-12-01T08:55:00Z", 0.0);
    World::with(vec![i])
}

#[test]
fn an_idle_box_is_kept_near_the_opening_after_a_start_refused_for_capacity() {
    let set = policies(POLICY);
    let w = idle_box().refused("us-east-1", "g5.xlarge", "2026-11-30T09:00:00Z");
    let d = w.one("2026-12-01T08:30:00Z", &set);
    assert_eq!((d.action, d.code), (Action::None, Code::CapacityRiskKept));
    assert_eq!(
        d.reason,
        "idle, but work hours open at 09:00 UTC (within idle.min_gap 1h) and EC2 refused a start \
         of g5.xlarge in us-east-1 for lack of capacity at 2026-11-30 09:00 UTC (within \
         idle.capacity_memory 7d): kept rather than risk not getting it back"
    );
}

#[test]
fn an_idle_box_is_stopped_far_from_the_opening_or_without_a_recent_refusal() {
    let set = policies(POLICY);
    let stopped = |w: &World, at: &str| {
        let d = w.one(at, &set);
        (d.action, d.code)
    };
    let idle = (Action::Stop, Code::Idle);
    // The opening is 1h30m away: more than min_gap.
    let refused = idle_box().refused("us-east-1", "g5.xlarge", "2026-11-30T09:00:00Z");
    assert_eq!(stopped(&refused, "2026-12-01T07:30:00Z"), idle);
    // No refused start, one of another type, one in another region, one 8 days old.
    for w in [
        idle_box(),
        idle_box().refused("us-east-1", "p5.48xlarge", "2026-11-30T09:00:00Z"),
        idle_box().refused("eu-west-1", "g5.xlarge", "2026-11-30T09:00:00Z"),
        idle_box().refused("us-east-1", "g5.xlarge", "2026-11-23T08:00:00Z"),
    ] {
        assert_eq!(stopped(&w, "2026-12-01T08:30:00Z"), idle);
    }
}

#[test]
fn without_min_gap_nothing_changes() {
    let set = policies(&POLICY.replace(", min_gap: 1h", ""));
    let w = idle_box().refused("us-east-1", "g5.xlarge", "2026-11-30T09:00:00Z");
    let d = w.one("2026-12-01T08:30:00Z", &set);
    assert_eq!((d.action, d.code), (Action::Stop, Code::Idle));
}

#[test]
fn capacity_memory_is_at_most_30_days() {
    let dir = tempfile::tempdir().unwrap();
    let text = POLICY.replace("min_gap: 1h", "min_gap: 1h, capacity_memory: 45d");
    std::fs::write(dir.path().join("p.yaml"), text).unwrap();
    let err = ebb::policy::load(&[dir.path().to_path_buf()])
        .unwrap_err()
        .to_string();
    assert!(err.contains("capacity_memory is at most 30d"), "{err}");
}
