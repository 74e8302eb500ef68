//! `ebb plan` and `ebb explain` on a snapshot with Auto Scaling groups (`groups:`): each
//! group's decision (scale down at the close, held by a busy member, restored at the opening
//! from the `up` capacity ebb remembers), beside the instances' own. 2026-11-30 is a Monday.

use crate::common;

use common::ebb;
use std::process::Output;

const POLICY: &str = r#"
policies:
  - name: inference
    match: {tags: {team: inference}}
    work_hours:
      timezone: UTC
      periods: [{days: mon-fri, start: "08:00", stop: "18:00"}]
      busy_defers_stop: true
"#;

/// `idle` has two idle members; `busy` has one member busy at the close; `down` is held down
/// by ebb since the evening, with nothing left of its members.
const FLEET: &str = r#"
instances:
  - {id: i-idle1, region: eu-central-1, type: g5.2xlarge, state: running,
     tags: {team: inference, "aws:autoscaling:groupName": idle},
     gpu_util: [["2026-11-30T18:00:00Z", 1], ["2026-11-30T18:05:00Z", 2]]}
  - {id: i-idle2, region: eu-central-1, type: g5.2xlarge, state: running,
     tags: {team: inference, "aws:autoscaling:groupName": idle},
     gpu_util: [["2026-11-30T18:00:00Z", 0], ["2026-11-30T18:05:00Z", 1]]}
  - {id: i-busy1, region: eu-central-1, type: g5.2xlarge, state: running,
     tags: {team: inference, "aws:autoscaling:groupName": busy},
     gpu_util: [["2026-11-30T18:00:00Z", 80], ["2026-11-30T18:05:00Z", 91]]}
groups:
  - {name: idle, region: eu-central-1, tags: {team: inference}, min: 2, desired: 2, max: 4}
  - {name: busy, region: eu-central-1, tags: {team: inference}, min: 1, desired: 1, max: 2}
  - {name: down, region: eu-central-1, tags: {team: inference}, min: 0, desired: 0, max: 3,
     up: {min: 1, desired: 3, max: 3}, down_since: 2026-11-30T18:05:00Z}
"#;

fn run(command: &str, name: Option<&str>, at: &str, dir: &tempfile::TempDir) -> Output {
    let policies = dir.path().join("policies");
    std::fs::create_dir_all(&policies).unwrap();
    std::fs::write(policies.join("inference.yaml"), POLICY).unwrap();
    let fleet = dir.path().join("fleet.yaml");
    std::fs::write(&fleet, FLEET).unwrap();
    let mut args = vec![command];
    args.extend(name);
    args.extend([
        "--policies",
        policies.to_str().unwrap(),
        "--fleet",
        fleet.to_str().unwrap(),
        "--at",
        at,
    ]);
    ebb(&args)
}

/// The table's row of `group`, its cells split on runs of two spaces.
fn row(out: &str, group: &str) -> Vec<String> {
    let (_, groups) = out
        .split_once("Auto Scaling groups: scheduled through their capacity")
        .unwrap_or_else(|| panic!("no groups in the plan: {out}"));
    let line = groups
        .lines()
        .find(|l| l.starts_with(&format!("{group} ")))
        .unwrap_or_else(|| panic!("no row of {group}: {groups}"));
    line.split("  ")
        .map(str::trim)
        .filter(|c| !c.is_empty())
        .map(String::from)
        .collect()
}

#[test]
fn the_plan_shows_each_groups_decision_after_the_instances() {
    let dir = tempfile::tempdir().unwrap();
    let o = run("plan", None, "2026-11-30T18:05:00Z", &dir);
    assert!(o.status.success(), "{o:?}");
    let out = String::from_utf8(o.stdout).unwrap();
    // The members themselves: never acted on alone.
    assert!(out.starts_with("INSTANCE"), "{out}");
    assert!(out.contains("owned_by_asg"), "{out}");
    assert_eq!(
        row(&out, "idle")[..5],
        [
            "idle",
            "eu-central-1",
            "scale_down_group",
            "inference",
            "outside_hours"
        ]
    );
    assert!(
        row(&out, "idle")[5].contains("min 2 desired 2 max 4 to min 0 desired 0 max 4"),
        "{out}"
    );
    let busy = row(&out, "busy");
    assert_eq!(busy[2..5], ["none", "inference", "busy_deferred"], "{out}");
    assert!(busy[5].contains("i-busy1 is busy"), "{out}");
    assert_eq!(
        row(&out, "down")[2..5],
        ["none", "inference", "stopped_outside_hours"],
        "{out}"
    );

    // At the opening, the group ebb holds down gets back the capacity it remembers.
    let o = run("plan", None, "2026-12-01T08:00:00Z", &dir);
    let out = String::from_utf8(o.stdout).unwrap();
    let down = row(&out, "down");
    assert_eq!(
        down[2..5],
        ["restore_group", "inference", "start_at_open"],
        "{out}"
    );
    assert!(
        down[5].ends_with("capacity back to min 1 desired 3 max 3"),
        "{out}"
    );
}

#[test]
fn explain_of_a_group_says_its_capacity_members_and_decision() {
    let dir = tempfile::tempdir().unwrap();
    let o = run("explain", Some("busy"), "2026-11-30T18:05:00Z", &dir);
    assert!(o.status.success(), "{o:?}");
    let out = String::from_utf8(o.stdout).unwrap();
    for line in [
        "Auto Scaling group busy (eu-central-1) at 2026-11-30T18:05:00+00:00",
        "  - capacity now: min 1 desired 1 max 2",
        "  - members: i-busy1",
        "decision: none [busy_deferred] by inference: outside work hours, but i-busy1 is busy",
    ] {
        assert!(out.contains(line), "{line} missing from:\n{out}");
    }
    // As JSON: the decision's fields.
    let policies = dir.path().join("policies");
    let fleet = dir.path().join("fleet.yaml");
    let o = ebb(&[
        "explain",
        "busy",
        "--policies",
        policies.to_str().unwrap(),
        "--fleet",
        fleet.to_str().unwrap(),
        "--at",
        "2026-11-30T18:05:00Z",
        "--format",
        "json",
    ]);
    assert!(o.status.success(), "{o:?}");
    let json: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(json["group"], "busy", "{json:#}");
    assert_eq!(json["region"], "eu-central-1");
    assert_eq!(json["action"], "none");
    assert_eq!(json["code"], "busy_deferred");
    assert_eq!(json["to"], serde_json::Value::Null);
    let o = run("explain", Some("nothing"), "2026-11-30T18:05:00Z", &dir);
    assert_eq!(o.status.code(), Some(2), "{o:?}");
    let err = String::from_utf8(o.stderr).unwrap();
    assert!(
        err.contains("no instance nothing in") && err.contains("nor an Auto Scaling group"),
        "{err}"
    );
}
