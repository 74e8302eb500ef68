//! The Auto Scaling groups of a replayed chunk, modelled as ebb schedules them: through the
//! group (`engine::decide_group`), never member by member. The members of a group (their owner
//! tag names it) are one modelled group, whose capacity is its members while up and the floor
//! once ebb scaled it down; a scale-down takes every member out of running (as the group's
//! scale-in would) but those it is made around (`group.protect_members`), the restore brings
//! them all back. A group's members spread over chunks
//! are modelled as one group per chunk: busy deferral then looks at the members of the chunk.

use crate::engine::{decide_group, GroupAction, GroupMemory, Prior, OFF_CAPACITY};
use crate::fleet::{Capacity, Fleet, GroupMember, Instance, InstanceState, Owner, ScalingGroup};
use crate::policy::PolicySet;
use chrono::{DateTime, Utc};
use std::collections::BTreeMap;

/// What a group's decision does to one of its members this tick.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Move {
    /// Scaled in: no longer running.
    Out,
    /// Scaled out again at the restore.
    In,
}

/// One modelled group.
struct Modelled {
    name: String,
    region: String,
    /// The positions of its members in the chunk.
    members: Vec<usize>,
    /// What ebb remembers of it, as the replay's decisions leave it.
    memory: Option<GroupMemory>,
}

/// The groups of a chunk.
pub(super) struct Groups {
    groups: Vec<Modelled>,
    /// Whether each instance of the chunk is a group's member.
    member: Vec<bool>,
}

impl Groups {
    /// The groups whose members are in `instances` (the chunk's, in order).
    pub(super) fn of(instances: &[Instance]) -> Groups {
        let mut by_name: BTreeMap<(String, String), Vec<usize>> = BTreeMap::new();
        for (i, inst) in instances.iter().enumerate() {
            if let Some(Owner::Asg { group }) = Owner::of(&inst.tags) {
                by_name
                    .entry((inst.region.clone(), group))
                    .or_default()
                    .push(i);
            }
        }
        let mut member = vec![false; instances.len()];
        let groups = by_name
            .into_iter()
            .map(|((region, name), members)| {
                for &i in &members {
                    member[i] = true;
                }
                Modelled {
                    name,
                    region,
                    members,
                    memory: None,
                }
            })
            .collect();
        Groups { groups, member }
    }

    /// Whether the chunk's instance `i` is a group's member: no person starts it one by one.
    pub(super) fn is_member(&self, i: usize) -> bool {
        self.member[i]
    }

    /// Decides every group at `t` on the modelled `fleet` (the chunk's instances, in order),
    /// with the overrides of `prior`; returns what each instance's group does to it. A
    /// policy's `dry_run` is ignored, as everywhere in the replay.
    pub(super) fn decide(
        &mut self,
        t: DateTime<Utc>,
        set: &PolicySet,
        fleet: &Fleet,
        prior: &Prior,
    ) -> Vec<Option<Move>> {
        let mut moves = vec![None; self.member.len()];
        for g in &mut self.groups {
            let group = g.as_listed(&fleet.instances);
            let d = decide_group(t, set, fleet, prior, &group, g.memory.as_ref());
            let mut memory = d.memory;
            let wanted = match d.action {
                GroupAction::ScaleDown => {
                    memory.down_since = Some(t);
                    Some(Move::Out)
                }
                GroupAction::Restore => {
                    memory.down_since = None;
                    Some(Move::In)
                }
                GroupAction::None => None,
            };
            g.memory = Some(memory);
            for &i in &g.members {
                // A member the scale-down is made around stays (group.protect_members).
                let kept = d.keep.contains(&fleet.instances[i].id);
                moves[i] = wanted.filter(|_| !kept);
            }
        }
        moves
    }
}

impl Modelled {
    /// The group as a listing would show it: its own tags (its members' without the owner
    /// tags AWS adds to members), its capacity, its running members.
    fn as_listed(&self, instances: &[Instance]) -> ScalingGroup {
        let first = &instances[self.members[0]];
        let tags = first.tags.iter().filter(|(k, _)| !k.starts_with("aws:"));
        let size = self.members.len() as i32;
        let down = self.memory.as_ref().is_some_and(|m| m.down_since.is_some());
        let floor = if down { OFF_CAPACITY } else { size };
        ScalingGroup {
            name: self.name.clone(),
            region: self.region.clone(),
            tags: tags.collect(),
            capacity: Capacity {
                min: floor,
                desired: floor,
                max: size,
            },
            members: self
                .members
                .iter()
                .map(|&i| &instances[i])
                .filter(|m| m.state == InstanceState::Running)
                .map(|m| GroupMember {
                    id: m.id.clone(),
                    instance_type: m.instance_type.clone(),
                    protected_from_scale_in: self
                        .memory
                        .as_ref()
                        .is_some_and(|memory| memory.protected.contains(&m.id)),
                })
                .collect(),
        }
    }
}
