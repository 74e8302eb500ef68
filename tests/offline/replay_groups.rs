//! `ebb replay` over the members of an Auto Scaling group, through the built binary: the group
//! is modelled as ebb schedules it, scaled to the floor outside work hours and back at the
//! opening, and a busy member holds the whole group's scale-down. Each answer is worked out by
//! hand beside it.

use crate::common::ebb;
use serde_json::Value;

const POLICY: &str = "
policies:
  - name: inference
    match: {tags: {team: inference}}
    work_hours:
      timezone: UTC
      periods: [{days: mon-fri, start: \"08:00\", stop: \"18:00\"}]
      busy_defers_stop: true
";

/// Two members of the group `inference`, running at the start, $1/h.
const FLEET: &str = "
instances:
  - id: i-member-a
    region: us-east-1
    type: g5.xlarge
    state: running
    tags: {team: inference, aws:autoscaling:groupName: inference}
  - id: i-member-b
    region: us-east-1
    type: g5.xlarge
    state: running
    tags: {team: inference, aws:autoscaling:groupName: inference}
prices:
  us-east-1: {g5.xlarge: {on_demand: 1.0}}
";

const FROM: &str = "2026-11-30T00:00:00Z";
const TO: &str = "2026-12-05T00:00:00Z";

/// Every 5 minutes over the week: member a busy (60 %) on Monday 17:00-20:00, idle (1 %)
/// otherwise; member b idle throughout.
fn utilisation() -> String {
    let at = |s: &str| ebb::when::parse_time(s).unwrap();
    let (busy_from, busy_to) = (at("2026-11-30T17:00:00Z"), at("2026-11-30T20:00:00Z"));
    let mut csv = String::from("instance,time,gpu_util\n");
    for id in ["i-member-a", "i-member-b"] {
        let mut t = at(FROM);
        while t < at(TO) {
            let busy = id == "i-member-a" && busy_from <= t && t < busy_to;
            let percent = if busy { 60.0 } else { 1.0 };
            let time = t.format("%Y-%m-%dT%H:%M:%SZ");
            csv.push_str(&format!("{id},{time},{percent}\n"));
            t += chrono::Duration::minutes(5);
        }
    }
    csv
}

/// By hand: the group is scaled down at the first tick (Monday 00:00, outside hours), back at
/// each 08:00 and down at each 18:00, except Monday, when member a's work holds the whole
/// group up until the first tick whose last 10 minutes hold no busy sample, 20:10 (the last
/// one is at 19:55): each member runs 4 × 10 h + 12 h 10 min = 52 h 10 min (within a tick),
/// $52.17, with 6 scale-ins (stops) and 5 restores (starts). Members are never stopped alone, so b, idle, runs as long as a. Left
/// alone as owned instances, each would run the whole 120 h.
#[test]
fn a_groups_members_are_scaled_with_the_group_and_a_busy_member_holds_them_all() {
    let d = tempfile::tempdir().unwrap();
    std::fs::create_dir(d.path().join("policies")).unwrap();
    std::fs::write(d.path().join("policies/p.yaml"), POLICY).unwrap();
    std::fs::write(d.path().join("fleet.yaml"), FLEET).unwrap();
    std::fs::write(d.path().join("util.csv"), utilisation()).unwrap();
    let p = |name: &str| d.path().join(name).to_str().unwrap().to_string();
    let (policies, fleet, util) = (p("policies"), p("fleet.yaml"), p("util.csv"));
    let o = ebb(&[
        "replay",
        "--policies",
        &policies,
        "--fleet",
        &fleet,
        "--utilisation",
        &util,
        "--from",
        FROM,
        "--to",
        TO,
        "--format",
        "json",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let r: Value = serde_json::from_slice(&o.stdout).unwrap();
    let (tick, expected) = (5.0 / 60.0, 52.0 + 10.0 / 60.0);
    for member in r["instances"].as_array().unwrap() {
        let m = &member["scenarios"]["policies"];
        let hours = m["running_hours"].as_f64().unwrap();
        assert!((hours - expected).abs() <= tick, "{member}");
        let cost = m["cost_usd"].as_f64().unwrap();
        assert!((cost - expected).abs() <= tick, "{member}");
        assert_eq!(
            (m["stops"].as_u64(), m["starts"].as_u64()),
            (Some(6), Some(5)),
            "{member}"
        );
        assert_eq!(m["wrongful_stops"], 0, "{member}");
        assert_eq!(m["unserved_busy_hours"], 0.0, "{member}");
        assert_eq!(member["policy"], "inference");
    }
    let always_on = r["scenarios"]["always_on"]["running_hours"]
        .as_f64()
        .unwrap();
    assert_eq!(always_on, 240.0);
}

/// The replay follows `group.protect_members`: with member b kept by its `ebb:keep-until`, the
/// group is held up all week without the key (both members run the whole 120 h); with it, the
/// group is scaled down around b, which runs the whole week, while a is scaled as above.
#[test]
fn a_protected_member_holds_the_group_or_is_kept_around_with_protect_members() {
    let run = |policy: &str| {
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir(d.path().join("policies")).unwrap();
        std::fs::write(d.path().join("policies/p.yaml"), policy).unwrap();
        let kept = FLEET.replacen(
            "tags: {team: inference, aws:autoscaling:groupName: inference}\nprices",
            "tags: {team: inference, aws:autoscaling:groupName: inference, ebb:keep-until: \"2026-12-31T00:00:00Z\"}\nprices",
            1,
        );
        assert_ne!(kept, FLEET);
        std::fs::write(d.path().join("fleet.yaml"), kept).unwrap();
        std::fs::write(d.path().join("util.csv"), utilisation()).unwrap();
        let p = |name: &str| d.path().join(name).to_str().unwrap().to_string();
        let o = ebb(&[
            "replay",
            "--policies",
            &p("policies"),
            "--fleet",
            &p("fleet.yaml"),
            "--utilisation",
            &p("util.csv"),
            "--from",
            FROM,
            "--to",
            TO,
            "--format",
            "json",
        ]);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let r: Value = serde_json::from_slice(&o.stdout).unwrap();
        let hours = |id: &str| {
            r["instances"]
                .as_array()
                .unwrap()
                .iter()
                .find(|m| m["instance"] == id)
                .unwrap_or_else(|| panic!("{r:#}"))["scenarios"]["policies"]["running_hours"]
                .as_f64()
                .unwrap()
        };
        (hours("i-member-a"), hours("i-member-b"))
    };
    let (a, b) = run(POLICY);
    assert_eq!((a, b), (120.0, 120.0), "held all week");
    let around = format!("{POLICY}    group: {{protect_members: true}}\n");
    let (a, b) = run(&around);
    let (tick, expected) = (5.0 / 60.0, 52.0 + 10.0 / 60.0);
    assert!((a - expected).abs() <= tick, "a scaled with the group: {a}");
    assert_eq!(b, 120.0, "b kept");
}
