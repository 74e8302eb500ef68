//! Auto Scaling groups scheduled through the group: outside work hours the group's min and
//! desired go to the floor (its members are never stopped one by one, which the group would
//! take for unhealthy and replace), and at the opening the capacity ebb found is restored. The
//! group of an EKS managed node group is changed through EKS, whose node groups keep a maximum
//! of at least [`NODE_GROUP_LEAST_MAX`].

use super::rules::{activity_of, governing_position, owned_code, tags_protect, Activity};
use super::{Code, Prior, RECENT};
use crate::fleet::{
    Billing, Capacity, Fleet, Instance, InstanceState, Lifecycle, Owner, OwnerKind, ScalingGroup,
};
use crate::policy::{Policy, PolicySet};
use chrono::{DateTime, Utc};

/// The min and desired capacity a group is set to outside work hours (`group.off_capacity` of
/// the issue; not a policy key yet). Its max is kept.
pub const OFF_CAPACITY: i32 = 0;

/// The least maximum size EKS takes for a managed node group (it refuses `maxSize` 0): a node
/// group is scaled down to a maximum of at least this.
pub const NODE_GROUP_LEAST_MAX: i32 = 1;

/// What ebb remembers of a group between ticks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupMemory {
    /// The capacity to restore at the opening: the one ebb found before it scaled the group
    /// down, or a person's change made while the group was up.
    pub up: Capacity,
    /// The instance types of its members while up: a group scaled to zero has no members to
    /// match a policy's `instance_types` by.
    pub types: Vec<String>,
    /// When ebb scaled it down; `None` while it is up.
    pub down_since: Option<DateTime<Utc>>,
    /// The members ebb protected from the group's scale-in (`group.protect_members`), or may
    /// have: ebb takes the protection off again, and only from them.
    pub protected: Vec<String>,
}

/// What ebb does to a group.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GroupAction {
    /// Nothing.
    None,
    /// Min and desired to [`OFF_CAPACITY`], max kept (at least [`NODE_GROUP_LEAST_MAX`] for an
    /// EKS node group).
    ScaleDown,
    /// Back to the remembered up capacity.
    Restore,
}

/// The decision for one group.
#[derive(Debug, Clone, PartialEq)]
pub struct GroupDecision {
    /// The group's name.
    pub group: String,
    /// Its region.
    pub region: String,
    /// What to do.
    pub action: GroupAction,
    /// The capacity to set, for an action.
    pub to: Option<Capacity>,
    /// What ebb remembers of the group after this decision (its up capacity and types); the
    /// action, once it succeeds, changes only `down_since`.
    pub memory: GroupMemory,
    /// The governing policy, when one governs.
    pub policy: Option<String>,
    /// Whether the governing policy only decides and audits.
    pub dry_run: bool,
    /// Why, as a code.
    pub code: Code,
    /// Why, for people.
    pub reason: String,
    /// The members a scale-down keeps, something protecting each (`group.protect_members`):
    /// the group's size after it is how many they are.
    pub keep: Vec<String>,
    /// The members to protect from the group's scale-in before the change: those of `keep`
    /// not protected yet.
    pub protect: Vec<String>,
    /// The members whose protection ebb set and takes off before the change: no longer kept,
    /// or the group restored.
    pub unprotect: Vec<String>,
}

/// Decides for `group` at `now` under `policies`, with the GPU readings and tags of its members
/// in `fleet`, the overrides of `prior` and what ebb remembers of it. Pure.
pub fn decide_group(
    now: DateTime<Utc>,
    policies: &PolicySet,
    fleet: &Fleet,
    prior: &Prior,
    group: &ScalingGroup,
    memory: Option<&GroupMemory>,
) -> GroupDecision {
    let down_since = memory.and_then(|m| m.down_since);
    let memory = remembered(group, memory);
    // The protections ebb set on members still in the group: what it takes off again.
    let unprotect = memory.protected.clone();
    let decision = |action, to, policy: Option<&Policy>, code, reason: String| GroupDecision {
        group: group.name.clone(),
        region: group.region.clone(),
        action,
        to,
        memory: GroupMemory {
            down_since,
            ..memory.clone()
        },
        policy: policy.map(|p| p.name.clone()),
        dry_run: policy.is_some_and(|p| p.dry_run),
        code,
        reason,
        keep: Vec::new(),
        protect: Vec::new(),
        unprotect: match action {
            GroupAction::None => Vec::new(),
            _ => unprotect.clone(),
        },
    };
    let node_group = group.node_group();
    let up = within_eks(node_group.is_some(), memory.up);
    let restore = |policy, code, why: &str| {
        decision(
            GroupAction::Restore,
            Some(up),
            policy,
            code,
            format!("{why}: capacity back to {up}"),
        )
    };
    // A group something else owns is changed through its owner, which would undo a change made
    // through the group: EKS for a node group's group (through its cluster and node group),
    // nothing ebb can reach for any other owner.
    let owner = Owner::of(&group.tags)
        .filter(|o| !(o.kind() == OwnerKind::EksNodegroup && node_group.is_some()));
    if let Some(owner) = owner {
        let reason = format!(
            "the group is owned by {} {}: {}",
            owner.kind(),
            owner.name(),
            owner.kind().instead()
        );
        return decision(
            GroupAction::None,
            None,
            None,
            owned_code(owner.kind()),
            reason,
        );
    }
    let policy = match governing(policies, group, &memory.types) {
        Ok(position) => &policies.policies[position],
        // A group ebb holds down is never left there by a policy that no longer governs it.
        Err(code) if down_since.is_some() => {
            return restore(None, code, "no policy governs the group any more")
        }
        Err(code) => return decision(GroupAction::None, None, None, code, why_none(code)),
    };
    let Some(wh) = &policy.work_hours else {
        if down_since.is_some() {
            return restore(
                Some(policy),
                Code::NoRuleApplies,
                "the policy has no work hours",
            );
        }
        let reason = "the policy has no work hours; a group follows work hours only".to_string();
        return decision(
            GroupAction::None,
            None,
            Some(policy),
            Code::NoRuleApplies,
            reason,
        );
    };
    let st = wh.schedule.status(now);
    let ahead = st
        .next
        .filter(|_| !st.in_hours && wh.start_ahead > chrono::Duration::zero())
        .is_some_and(|open| now >= open - wh.start_ahead);
    if st.in_hours || ahead {
        let code = if ahead {
            Code::StartAhead
        } else {
            Code::StartAtOpen
        };
        if down_since.is_some() {
            return restore(Some(policy), code, "work hours");
        }
        let reason = format!("in work hours; up capacity {}", memory.up);
        return decision(GroupAction::None, None, Some(policy), Code::InHours, reason);
    }
    if down_since.is_some() {
        // A person's change while the group is down sticks until the opening.
        let reason = format!(
            "outside work hours, scaled down by ebb; {} is restored at the opening",
            memory.up
        );
        return decision(
            GroupAction::None,
            None,
            Some(policy),
            Code::StoppedOutsideHours,
            reason,
        );
    }
    let c = group.capacity;
    if c.min <= OFF_CAPACITY && c.desired <= OFF_CAPACITY {
        let reason = format!("outside work hours, already at {c}");
        return decision(
            GroupAction::None,
            None,
            Some(policy),
            Code::StoppedOutsideHours,
            reason,
        );
    }
    if wh.busy_defers_stop {
        let past_deadline = match (wh.max_defer, st.since) {
            (Some(max), Some(close)) => now >= close + max,
            _ => false,
        };
        if !past_deadline {
            if let Some((code, why)) = busy_member(now, policy, fleet, group) {
                let reason = format!("outside work hours, but {why}; scale-down deferred");
                return decision(GroupAction::None, None, Some(policy), code, reason);
            }
        }
    }
    // A scale-down ends members: a protection of one of them holds the whole group, unless
    // the policy has it scaled down around them.
    let held = |why: &str| {
        let reason = format!("outside work hours, but {why}; the group is not scaled down");
        decision(
            GroupAction::None,
            None,
            Some(policy),
            Code::GroupMemberProtected,
            reason,
        )
    };
    match protections(now, prior, fleet, group) {
        Protections::None => {}
        Protections::Whole(why) => return held(&why),
        Protections::Members(members) => {
            let around = policy.group.is_some_and(|g| g.protect_members);
            let why = &members[0].1;
            return match (around, node_group.is_some()) {
                (true, false) => {
                    let d = decision(
                        GroupAction::ScaleDown,
                        None,
                        Some(policy),
                        Code::OutsideHours,
                        String::new(),
                    );
                    scale_down_around(d, group, &members)
                        .unwrap_or_else(|| held(&format!("every member is protected ({why})")))
                }
                (true, true) => held(&format!(
                    "{why} (group.protect_members does not apply to an EKS node group, whose \
                     members EKS replaces)"
                )),
                (false, _) => held(&format!(
                    "{why} (with group.protect_members: true the group would be scaled down \
                     around it)"
                )),
            };
        }
    }
    let to = within_eks(
        node_group.is_some(),
        Capacity {
            min: OFF_CAPACITY,
            desired: OFF_CAPACITY,
            max: c.max,
        },
    );
    let reason = format!("outside work hours: {c} to {to}");
    decision(
        GroupAction::ScaleDown,
        Some(to),
        Some(policy),
        Code::OutsideHours,
        reason,
    )
}

/// `capacity` as EKS takes it for a node group (`eks` true): a maximum of at least
/// [`NODE_GROUP_LEAST_MAX`]; unchanged for a plain Auto Scaling group.
fn within_eks(eks: bool, capacity: Capacity) -> Capacity {
    if eks {
        Capacity {
            max: capacity.max.max(NODE_GROUP_LEAST_MAX),
            ..capacity
        }
    } else {
        capacity
    }
}

/// What ebb remembers of `group` before deciding: while it is up, its capacity now is its up
/// size (a person's change included) and its members' types are its types; while it is down,
/// what was remembered when ebb scaled it down. The protections ebb set are kept for the
/// members still in the group: a member gone needs none taken off.
fn remembered(group: &ScalingGroup, memory: Option<&GroupMemory>) -> GroupMemory {
    let mut remembered = match memory {
        Some(m) if m.down_since.is_some() => m.clone(),
        _ => {
            let mut types: Vec<String> = group
                .members
                .iter()
                .map(|m| m.instance_type.clone())
                .collect();
            types.sort();
            types.dedup();
            if types.is_empty() {
                types = memory.map(|m| m.types.clone()).unwrap_or_default();
            }
            GroupMemory {
                up: group.capacity,
                types,
                down_since: None,
                protected: memory.map(|m| m.protected.clone()).unwrap_or_default(),
            }
        }
    };
    remembered
        .protected
        .retain(|id| group.members.iter().any(|m| &m.id == id));
    remembered
}

/// The position of the policy that governs the group: the one that governs an instance with
/// the group's tags and region, of each of its types, the same for every type. Without known
/// types, a policy that names `instance_types` does not match.
fn governing(policies: &PolicySet, group: &ScalingGroup, types: &[String]) -> Result<usize, Code> {
    let no_type = [String::new()];
    let types = if types.is_empty() {
        &no_type[..]
    } else {
        types
    };
    let mut found = None;
    for ty in types {
        let position = governing_position(policies, &as_instance(group, ty))?;
        if found.is_some_and(|f| f != position) {
            return Err(Code::Conflict);
        }
        found = Some(position);
    }
    found.ok_or(Code::NoPolicy)
}

/// An instance of type `ty` with the group's tags and region, for policy matching.
fn as_instance(group: &ScalingGroup, ty: &str) -> Instance {
    Instance {
        id: group.name.clone(),
        region: group.region.clone(),
        instance_type: ty.to_string(),
        state: InstanceState::Running,
        state_since: None,
        lifecycle: Lifecycle::OnDemand,
        launched_at: None,
        tags: group.tags.clone(),
        gpus: None,
        gpu_util: Vec::new(),
        via_role: None,
        billing: Billing::EC2,
        private_ip: None,
    }
}

/// The first member that defers the scale-down, with the code and why: GPU utilisation
/// unread (or the member not listed, so not read), or a reading at or above the policy's
/// threshold in the last [`RECENT`].
fn busy_member(
    now: DateTime<Utc>,
    policy: &Policy,
    fleet: &Fleet,
    group: &ScalingGroup,
) -> Option<(Code, String)> {
    let threshold = policy.busy_threshold();
    for member in &group.members {
        if let Some(why) = fleet.gpu_unread.get(&member.id) {
            let why = format!("GPU utilisation of {} could not be read ({why})", member.id);
            return Some((Code::MetricsUnreadable, why));
        }
        let Some(inst) = fleet.instances.iter().find(|i| i.id == member.id) else {
            let why = format!(
                "{} was not listed: its GPU utilisation is unknown",
                member.id
            );
            return Some((Code::MetricsUnreadable, why));
        };
        let busy = inst
            .gpu_util
            .iter()
            .filter(|s| s.at <= now && s.at >= now - RECENT)
            .find(|s| s.percent >= threshold);
        if let Some(s) = busy {
            let why = format!("{} is busy ({}% ≥ {threshold}%)", member.id, s.percent);
            return Some((Code::BusyDeferred, why));
        }
        let text = |a: &Activity| a.text(|t| t.format("%Y-%m-%d %H:%M UTC").to_string());
        match activity_of(policy, &fleet.activity, inst, now, RECENT) {
            Activity::Unused(_) => {}
            used @ Activity::Used(..) => {
                return Some((Code::InUse, format!("{}: {}", member.id, text(&used))))
            }
            unread => {
                return Some((
                    Code::ActivityUnreadable,
                    format!("{}: {}", member.id, text(&unread)),
                ))
            }
        }
    }
    None
}

/// What protects members of a group from a scale-down.
enum Protections {
    /// Nothing.
    None,
    /// The whole group, why in words: `ebb:keep-until` on the group, or a member that was not
    /// listed (what protects it is unknown).
    Whole(String),
    /// These members (an override, their `ebb:skip` or `ebb:keep-until`), each with why.
    Members(Vec<(String, String)>),
}

/// What protects members of `group` at `now`.
fn protections(
    now: DateTime<Utc>,
    prior: &Prior,
    fleet: &Fleet,
    group: &ScalingGroup,
) -> Protections {
    if let Some(why) = tags_protect(&group.tags, now) {
        return Protections::Whole(format!("the group is protected ({why})"));
    }
    let mut members = Vec::new();
    for member in &group.members {
        let Some(inst) = fleet.instances.iter().find(|i| i.id == member.id) else {
            return Protections::Whole(format!(
                "member {} was not listed: whether something protects it is unknown",
                member.id
            ));
        };
        if let Some(o) = prior.active_override(&member.id, now) {
            let by = if o.by.is_empty() { "someone" } else { &o.by };
            let why = format!(
                "member {} has an override by {by} until {}: {}",
                member.id,
                o.until.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
                o.reason
            );
            members.push((member.id.clone(), why));
        } else if let Some(why) = tags_protect(&inst.tags, now) {
            members.push((
                member.id.clone(),
                format!("member {} is protected ({why})", member.id),
            ));
        }
    }
    match members.is_empty() {
        true => Protections::None,
        false => Protections::Members(members),
    }
}

/// `d`, a scale-down of `group` that keeps the protected `members` (id, why): they are
/// protected from the group's scale-in, and the group's min and desired become how many
/// members its scale-in cannot end (those, and any the group's owner protected). `None` when
/// that leaves nothing to scale in.
fn scale_down_around(
    mut d: GroupDecision,
    group: &ScalingGroup,
    members: &[(String, String)],
) -> Option<GroupDecision> {
    let kept = |id: &String| members.iter().any(|(m, _)| m == id);
    let owners = group
        .members
        .iter()
        .filter(|m| {
            m.protected_from_scale_in && !kept(&m.id) && !d.memory.protected.contains(&m.id)
        })
        .count();
    let c = group.capacity;
    let size = i32::try_from(members.len() + owners).unwrap_or(i32::MAX);
    if size >= c.desired {
        return None;
    }
    let to = Capacity {
        min: size,
        desired: size,
        max: c.max,
    };
    d.keep = members.iter().map(|(id, _)| id.clone()).collect();
    d.protect = group
        .members
        .iter()
        .filter(|m| kept(&m.id) && !m.protected_from_scale_in)
        .map(|m| m.id.clone())
        .collect();
    d.unprotect.retain(|id| !kept(id));
    d.memory.protected.extend(d.protect.iter().cloned());
    d.memory.protected.sort();
    d.memory.protected.dedup();
    let whys: Vec<&str> = members.iter().map(|(_, why)| why.as_str()).collect();
    d.to = Some(to);
    d.reason = format!(
        "outside work hours: {c} to {to}, around {} protected from its scale-in \
         (group.protect_members): {}",
        if members.len() == 1 {
            "a member"
        } else {
            "members"
        },
        whys.join("; ")
    );
    Some(d)
}

/// The reason for a code of why no policy governs.
fn why_none(code: Code) -> String {
    match code {
        Code::SkipTag => "tagged ebb:skip=true".to_string(),
        Code::Conflict => "several policies match at the top priority".to_string(),
        _ => "no policy matches the group".to_string(),
    }
}
