//! Auto Scaling groups scheduled through the group (`engine::decide_group`): min and desired to
//! zero after the close, max kept, busy or unread members deferring it, and the capacity found
//! restored at the opening, also when the group has no member left to match a policy by type;
//! an EKS managed node group's group through EKS, with a maximum of at least 1.
//! 2026-11-30 is a Monday.

use crate::common;

use common::*;
use ebb::engine::{
    decide_group, Code, GroupAction, GroupMemory, Override, Prior, NODE_GROUP_LEAST_MAX,
};
use ebb::fleet::{Capacity, Fleet, GroupMember, NodeGroup, ScalingGroup};

/// Office hours 09:00-18:00 UTC on weekdays for g5 inference groups, busy GPUs deferring the
/// scale-down for at most an hour.
const OFFICE: &str = r#"
policies:
  - name: office
    match: {tags: {env: dev}, instance_types: ["g5.*"]}
    work_hours:
      timezone: UTC
      periods: [{days: mon-fri, start: "09:00", stop: "18:00"}]
      max_defer: 1h
"#;

const EVENING: &str = "2026-11-30T18:05:00Z";
const MORNING: &str = "2026-12-01T09:00:00Z";

const UP: Capacity = Capacity {
    min: 2,
    desired: 2,
    max: 4,
};

/// Group `inference` in us-east-1, tagged env=dev, at `capacity`, with members `ids`.
fn group(capacity: Capacity, ids: &[&str]) -> ScalingGroup {
    ScalingGroup {
        name: "inference".to_string(),
        region: "us-east-1".to_string(),
        tags: [("env", "dev"), ("ebb:managed", "true")]
            .into_iter()
            .collect(),
        capacity,
        members: ids
            .iter()
            .map(|id| GroupMember {
                id: id.to_string(),
                instance_type: "g5.xlarge".to_string(),
                protected_from_scale_in: false,
            })
            .collect(),
    }
}

/// The members listed, idle (1 %) over the last ten minutes before `at`.
fn idle_fleet(ids: &[&str], at: &str) -> Fleet {
    let mut fleet = Fleet::default();
    for id in ids {
        let mut member = instance(id, &[("env", "dev")]);
        member.gpu_util = samples(&[(at, 1.0)]);
        fleet.instances.push(member);
    }
    fleet
}

fn down(since: &str) -> GroupMemory {
    GroupMemory {
        up: UP,
        types: vec!["g5.xlarge".to_string()],
        down_since: Some(t(since)),
        protected: Vec::new(),
    }
}

#[test]
fn after_the_close_min_and_desired_go_to_zero_and_max_is_kept() {
    let set = policies(OFFICE);
    let g = group(UP, &["i-1", "i-2"]);
    let fleet = idle_fleet(&["i-1", "i-2"], "2026-11-30T18:04:00Z");
    let d = decide_group(t(EVENING), &set, &fleet, &Prior::default(), &g, None);
    assert_eq!(d.action, GroupAction::ScaleDown, "{}", d.reason);
    assert_eq!(d.code, Code::OutsideHours);
    let zero = Capacity {
        min: 0,
        desired: 0,
        max: 4,
    };
    assert_eq!(d.to, Some(zero));
    assert_eq!(
        d.memory.up, UP,
        "the capacity found is what the opening restores"
    );
    assert_eq!(d.policy.as_deref(), Some("office"));
}

#[test]
fn in_hours_a_group_is_left_as_it_is() {
    let set = policies(OFFICE);
    let g = group(UP, &["i-1", "i-2"]);
    let fleet = idle_fleet(&["i-1", "i-2"], "2026-11-30T11:59:00Z");
    let d = decide_group(
        t("2026-11-30T12:00:00Z"),
        &set,
        &fleet,
        &Prior::default(),
        &g,
        None,
    );
    assert_eq!((d.action, d.code), (GroupAction::None, Code::InHours));
}

#[test]
fn a_busy_or_unread_member_defers_the_scale_down_until_max_defer() {
    let set = policies(OFFICE);
    let g = group(UP, &["i-1", "i-2"]);
    let mut busy = idle_fleet(&["i-1", "i-2"], "2026-11-30T18:04:00Z");
    busy.instances[1].gpu_util = samples(&[("2026-11-30T18:04:00Z", 90.0)]);
    let d = decide_group(t(EVENING), &set, &busy, &Prior::default(), &g, None);
    assert_eq!((d.action, d.code), (GroupAction::None, Code::BusyDeferred));
    assert!(d.reason.contains("i-2"), "{}", d.reason);

    let mut unread = idle_fleet(&["i-1", "i-2"], "2026-11-30T18:04:00Z");
    unread
        .gpu_unread
        .insert("i-1".to_string(), "throttled".into());
    let d = decide_group(t(EVENING), &set, &unread, &Prior::default(), &g, None);
    assert_eq!(
        (d.action, d.code),
        (GroupAction::None, Code::MetricsUnreadable)
    );

    // A member ebb did not list was not read: unknown, not idle.
    let unlisted = idle_fleet(&["i-1"], "2026-11-30T18:04:00Z");
    let d = decide_group(t(EVENING), &set, &unlisted, &Prior::default(), &g, None);
    assert_eq!(
        (d.action, d.code),
        (GroupAction::None, Code::MetricsUnreadable)
    );

    // An hour after the close, busy or not, the group goes down.
    let mut late = idle_fleet(&["i-1", "i-2"], "2026-11-30T19:04:00Z");
    late.instances[0].gpu_util = samples(&[("2026-11-30T19:04:00Z", 90.0)]);
    let d = decide_group(
        t("2026-11-30T19:05:00Z"),
        &set,
        &late,
        &Prior::default(),
        &g,
        None,
    );
    assert_eq!(d.action, GroupAction::ScaleDown, "{}", d.reason);
}

#[test]
fn at_the_opening_the_capacity_found_is_restored_with_no_member_left() {
    let set = policies(OFFICE);
    let zero = Capacity {
        min: 0,
        desired: 0,
        max: 4,
    };
    // No members: the policy matches by the types remembered.
    let g = group(zero, &[]);
    let memory = down(EVENING);
    let d = decide_group(
        t(MORNING),
        &set,
        &Fleet::default(),
        &Prior::default(),
        &g,
        Some(&memory),
    );
    assert_eq!(d.action, GroupAction::Restore, "{}", d.reason);
    assert_eq!(d.code, Code::StartAtOpen);
    assert_eq!(d.to, Some(UP));
}

#[test]
fn a_persons_change_while_down_sticks_until_the_opening() {
    let set = policies(OFFICE);
    let someone = Capacity {
        min: 0,
        desired: 1,
        max: 4,
    };
    let g = group(someone, &["i-9"]);
    let memory = down(EVENING);
    let night = decide_group(
        t("2026-11-30T23:00:00Z"),
        &set,
        &Fleet::default(),
        &Prior::default(),
        &g,
        Some(&memory),
    );
    assert_eq!(night.action, GroupAction::None, "{}", night.reason);
    assert_eq!(
        night.memory, memory,
        "the up size is still the one found at the close"
    );
    let d = decide_group(
        t(MORNING),
        &set,
        &Fleet::default(),
        &Prior::default(),
        &g,
        Some(&memory),
    );
    assert_eq!(d.to, Some(UP));
}

#[test]
fn a_persons_change_while_up_is_the_new_up_size() {
    let set = policies(OFFICE);
    let grown = Capacity {
        min: 3,
        desired: 3,
        max: 6,
    };
    let was = GroupMemory {
        up: UP,
        types: vec!["g5.xlarge".to_string()],
        down_since: None,
        protected: Vec::new(),
    };
    let g = group(grown, &["i-1", "i-2", "i-3"]);
    let fleet = idle_fleet(&["i-1", "i-2", "i-3"], "2026-11-30T18:04:00Z");
    let d = decide_group(t(EVENING), &set, &fleet, &Prior::default(), &g, Some(&was));
    assert_eq!(d.memory.up, grown);
    assert_eq!(d.to.map(|c| c.max), Some(6));
}

#[test]
fn a_group_held_down_by_a_policy_that_no_longer_governs_it_is_restored() {
    let set = policies(OFFICE);
    let mut g = group(
        Capacity {
            min: 0,
            desired: 0,
            max: 4,
        },
        &[],
    );
    g.tags = [("env", "prod"), ("ebb:managed", "true")]
        .into_iter()
        .collect();
    let memory = down(EVENING);
    let d = decide_group(
        t("2026-11-30T23:00:00Z"),
        &set,
        &Fleet::default(),
        &Prior::default(),
        &g,
        Some(&memory),
    );
    assert_eq!((d.action, d.code), (GroupAction::Restore, Code::NoPolicy));
    assert_eq!(d.to, Some(UP));
    // Never seen down, the same group is left alone.
    let d = decide_group(
        t("2026-11-30T23:00:00Z"),
        &set,
        &Fleet::default(),
        &Prior::default(),
        &g,
        None,
    );
    assert_eq!(d.action, GroupAction::None);
}

/// `g` as the Auto Scaling group of EKS node group `gpu` of cluster `prod`, opted in (the
/// cluster's tag left out when `cluster` is false).
fn node_group(mut g: ScalingGroup, cluster: bool) -> ScalingGroup {
    let mut tags = vec![
        ("env", "dev"),
        ("ebb:managed", "true"),
        ("eks:nodegroup-name", "gpu"),
    ];
    if cluster {
        tags.push(("eks:cluster-name", "prod"));
    }
    g.tags = tags.into_iter().collect();
    g
}

#[test]
fn an_eks_node_group_is_scaled_down_through_eks_to_a_max_of_at_least_one() {
    let set = policies(OFFICE);
    let one = Capacity {
        min: 1,
        desired: 1,
        max: 1,
    };
    let g = node_group(group(one, &["i-1"]), true);
    assert_eq!(
        g.node_group(),
        Some(NodeGroup {
            cluster: "prod".to_string(),
            name: "gpu".to_string()
        })
    );
    let fleet = idle_fleet(&["i-1"], "2026-11-30T18:04:00Z");
    let d = decide_group(t(EVENING), &set, &fleet, &Prior::default(), &g, None);
    assert_eq!(d.action, GroupAction::ScaleDown, "{}", d.reason);
    let floor = Capacity {
        min: 0,
        desired: 0,
        max: 1,
    };
    assert_eq!(d.to, Some(floor), "EKS refuses maxSize 0");
    assert!(floor.max >= NODE_GROUP_LEAST_MAX);

    // At the opening the remembered capacity comes back, through EKS as well.
    let mut down = down(EVENING);
    down.up = one;
    let g = node_group(group(floor, &[]), true);
    let d = decide_group(
        t(MORNING),
        &set,
        &Fleet::default(),
        &Prior::default(),
        &g,
        Some(&down),
    );
    assert_eq!((d.action, d.to), (GroupAction::Restore, Some(one)));
}

#[test]
fn a_remembered_max_of_zero_is_restored_as_one_for_a_node_group_and_as_zero_for_a_plain_group() {
    let set = policies(OFFICE);
    let zero = Capacity {
        min: 0,
        desired: 0,
        max: 0,
    };
    let mut memory = down(EVENING);
    memory.up = zero;
    let plain = group(zero, &[]);
    let d = decide_group(
        t(MORNING),
        &set,
        &Fleet::default(),
        &Prior::default(),
        &plain,
        Some(&memory),
    );
    assert_eq!(d.to, Some(zero));
    let eks = node_group(group(zero, &[]), true);
    let d = decide_group(
        t(MORNING),
        &set,
        &Fleet::default(),
        &Prior::default(),
        &eks,
        Some(&memory),
    );
    assert_eq!(d.to, Some(Capacity { max: 1, ..zero }));
}

#[test]
fn a_node_groups_group_without_its_cluster_is_left_to_eks() {
    let set = policies(OFFICE);
    let g = node_group(group(UP, &["i-1", "i-2"]), false);
    assert_eq!(g.node_group(), None, "no cluster to call EKS on");
    let fleet = idle_fleet(&["i-1", "i-2"], "2026-11-30T18:04:00Z");
    let d = decide_group(t(EVENING), &set, &fleet, &Prior::default(), &g, None);
    assert_eq!(
        (d.action, d.code),
        (GroupAction::None, Code::OwnedByEksNodegroup)
    );
}

#[test]
fn a_group_another_owner_tags_is_left_to_it() {
    let set = policies(OFFICE);
    let mut g = node_group(group(UP, &["i-1", "i-2"]), true);
    g.tags = [
        ("env", "dev"),
        ("ebb:managed", "true"),
        ("karpenter.sh/nodepool", "gpu"),
    ]
    .into_iter()
    .collect();
    let fleet = idle_fleet(&["i-1", "i-2"], "2026-11-30T18:04:00Z");
    let d = decide_group(t(EVENING), &set, &fleet, &Prior::default(), &g, None);
    assert_eq!(
        (d.action, d.code),
        (GroupAction::None, Code::OwnedByKarpenter)
    );
    assert!(d.reason.contains("gpu"), "{}", d.reason);
}

/// A scale-down ends members, so whatever protects one member, or the group, holds it: an
/// override on a member, a member's `ebb:keep-until` in the future or `ebb:skip`, the group's
/// `ebb:keep-until`, or a member not listed (what protects it is unknown). The reason names the
/// member and the protection; once the protection is gone the group is scaled down.
#[test]
fn any_protection_of_a_member_or_the_group_holds_the_scale_down() {
    let set = policies(OFFICE);
    let g = group(UP, &["i-1", "i-2"]);
    let fleet = idle_fleet(&["i-1", "i-2"], "2026-11-30T18:04:00Z");
    let held = |fleet: &Fleet, prior: &Prior, g: &ScalingGroup| {
        let d = decide_group(t(EVENING), &set, fleet, prior, g, None);
        assert_eq!(
            (d.action, d.code),
            (GroupAction::None, Code::GroupMemberProtected),
            "{}",
            d.reason
        );
        assert_eq!(d.to, None);
        d.reason
    };
    let override_on = |until: &str| {
        Prior::new(
            Default::default(),
            vec![Override {
                instance: "i-2".into(),
                until: t(until),
                reason: "training run until Friday".into(),
                by: "alice".into(),
            }],
        )
    };
    let reason = held(&fleet, &override_on("2026-12-01T18:00:00Z"), &g);
    assert!(
        reason.contains(
            "member i-2 has an override by alice until 2026-12-01T18:00:00Z: training run until Friday"
        ),
        "{reason}"
    );
    // An override that has ended holds nothing.
    let d = decide_group(
        t(EVENING),
        &set,
        &fleet,
        &override_on("2026-11-30T18:00:00Z"),
        &g,
        None,
    );
    assert_eq!(d.action, GroupAction::ScaleDown, "{}", d.reason);

    for (key, value, says) in [
        (
            "ebb:skip",
            "true",
            "member i-1 is protected (tagged ebb:skip=true)",
        ),
        (
            "ebb:keep-until",
            "2026-12-02T00:00:00Z",
            "member i-1 is protected (kept by tag ebb:keep-until until 2026-12-02T00:00:00Z)",
        ),
        (
            "ebb:keep-until",
            "friday",
            "member i-1 is protected (tag ebb:keep-until=\"friday\" is not an RFC 3339 time)",
        ),
    ] {
        let mut tagged = fleet.clone();
        tagged.instances[0].tags.insert(key.into(), value.into());
        let reason = held(&tagged, &Prior::default(), &g);
        assert!(reason.contains(says), "{reason}");
    }
    let mut past = fleet.clone();
    past.instances[0]
        .tags
        .insert("ebb:keep-until".into(), "2026-11-30T12:00:00Z".into());
    let d = decide_group(t(EVENING), &set, &past, &Prior::default(), &g, None);
    assert_eq!(d.action, GroupAction::ScaleDown, "a keep-until in the past");

    let mut kept_group = g.clone();
    kept_group
        .tags
        .insert("ebb:keep-until".into(), "2026-12-01T09:00:00Z".into());
    let reason = held(&fleet, &Prior::default(), &kept_group);
    assert!(
        reason.contains(
            "the group is protected (kept by tag ebb:keep-until until 2026-12-01T09:00:00Z)"
        ),
        "{reason}"
    );

    let one_listed = idle_fleet(&["i-1"], "2026-11-30T18:04:00Z");
    let lenient =
        policies(&OFFICE.replace("      max_defer: 1h\n", "      busy_defers_stop: false\n"));
    let d = decide_group(
        t(EVENING),
        &lenient,
        &one_listed,
        &Prior::default(),
        &g,
        None,
    );
    assert_eq!(d.code, Code::GroupMemberProtected, "{}", d.reason);
    assert!(
        d.reason
            .contains("member i-2 was not listed: whether something protects it is unknown"),
        "{}",
        d.reason
    );
}

/// With `group.protect_members: true`, a group whose members something protects is scaled down
/// around them: they are to be protected from the group's scale-in (those not yet), the group
/// keeps just them (and any member its owner protected), and the reason names each. What
/// protects the whole group still holds it, as does every member being protected, and an EKS
/// node group is held as before. The restore takes off the protection ebb set, and only that.
#[test]
fn with_protect_members_a_group_is_scaled_down_around_its_protected_members() {
    let set = policies(&format!("{OFFICE}    group: {{protect_members: true}}\n"));
    let three = Capacity {
        min: 3,
        desired: 3,
        max: 4,
    };
    let g = group(three, &["i-1", "i-2", "i-3"]);
    let fleet = idle_fleet(&["i-1", "i-2", "i-3"], "2026-11-30T18:04:00Z");
    let alice = Prior::new(
        Default::default(),
        vec![Override {
            instance: "i-2".into(),
            until: t("2026-12-01T18:00:00Z"),
            reason: "training run until Friday".into(),
            by: "alice".into(),
        }],
    );
    let d = decide_group(t(EVENING), &set, &fleet, &alice, &g, None);
    assert_eq!(
        (d.action, d.code),
        (GroupAction::ScaleDown, Code::OutsideHours),
        "{}",
        d.reason
    );
    let one = Capacity {
        min: 1,
        desired: 1,
        max: 4,
    };
    assert_eq!(d.to, Some(one));
    assert_eq!(
        (d.keep.clone(), d.protect.clone()),
        (vec!["i-2".to_string()], vec!["i-2".to_string()])
    );
    assert_eq!(d.memory.protected, ["i-2"], "remembered before the call");
    assert!(
        d.reason
            .contains("(group.protect_members): member i-2 has an override by alice"),
        "{}",
        d.reason
    );

    // A member the group's owner protected stays too, and counts; ebb does not protect it.
    let mut owned = g.clone();
    owned.members[0].protected_from_scale_in = true;
    let d = decide_group(t(EVENING), &set, &fleet, &alice, &owned, None);
    assert_eq!(
        d.to,
        Some(Capacity {
            min: 2,
            desired: 2,
            max: 4
        })
    );
    assert_eq!(d.protect, ["i-2"]);

    // Without the key, the same override holds the group, and the reason says what the key does.
    let d = decide_group(t(EVENING), &policies(OFFICE), &fleet, &alice, &g, None);
    assert_eq!(
        (d.action, d.code),
        (GroupAction::None, Code::GroupMemberProtected)
    );
    assert!(
        d.reason.contains("group.protect_members: true"),
        "{}",
        d.reason
    );

    // Every member protected: nothing to scale in.
    let mut all = fleet.clone();
    for inst in &mut all.instances {
        inst.tags.insert("ebb:skip".into(), "true".into());
    }
    let d = decide_group(t(EVENING), &set, &all, &Prior::default(), &g, None);
    assert_eq!(
        (d.action, d.code),
        (GroupAction::None, Code::GroupMemberProtected)
    );
    assert!(
        d.reason.contains("every member is protected"),
        "{}",
        d.reason
    );

    // The group's own keep-until holds it whole.
    let mut kept = g.clone();
    kept.tags
        .insert("ebb:keep-until".into(), "2026-12-01T09:00:00Z".into());
    let d = decide_group(t(EVENING), &set, &fleet, &alice, &kept, None);
    assert_eq!(
        (d.action, d.code),
        (GroupAction::None, Code::GroupMemberProtected)
    );

    // An EKS node group is held: EKS replaces members its own way.
    let mut eks = g.clone();
    eks.tags.insert("eks:cluster-name".into(), "ml".into());
    eks.tags.insert("eks:nodegroup-name".into(), "gpu".into());
    let d = decide_group(t(EVENING), &set, &fleet, &alice, &eks, None);
    assert_eq!(
        (d.action, d.code),
        (GroupAction::None, Code::GroupMemberProtected)
    );
    assert!(d.reason.contains("EKS node group"), "{}", d.reason);

    // Down around i-2 (which ebb protected); at the opening the size found is put back and
    // ebb's protection comes off i-2, not the owner's off i-1.
    let mut down_group = group(one, &["i-1", "i-2"]);
    down_group.members[0].protected_from_scale_in = true;
    down_group.members[1].protected_from_scale_in = true;
    let memory = GroupMemory {
        up: three,
        types: vec!["g5.xlarge".to_string()],
        down_since: Some(t(EVENING)),
        protected: vec!["i-2".to_string(), "i-gone".to_string()],
    };
    let d = decide_group(t(MORNING), &set, &fleet, &alice, &down_group, Some(&memory));
    assert_eq!((d.action, d.to), (GroupAction::Restore, Some(three)));
    assert_eq!(
        d.unprotect,
        ["i-2"],
        "a member gone needs nothing taken off"
    );
    // Next evening with the override over, the plain scale-down takes off what is left.
    let up_again = GroupMemory {
        down_since: None,
        ..memory
    };
    let d = decide_group(
        t("2026-12-01T18:05:00Z"),
        &set,
        &fleet,
        &Prior::default(),
        &g,
        Some(&up_again),
    );
    assert_eq!(d.action, GroupAction::ScaleDown, "{}", d.reason);
    assert_eq!(
        (d.keep.len(), d.unprotect.clone()),
        (0, vec!["i-2".to_string()])
    );
}
