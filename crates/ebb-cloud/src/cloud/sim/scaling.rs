//! The members of the simulated Auto Scaling groups: the simulated instances that carry a
//! group's name tag (`aws:autoscaling:groupName`), as EC2 Auto Scaling tags them. A change of
//! desired capacity ends or launches members, as the group would: scale-in terminates the
//! newest members not protected from scale-in, scale-out launches copies of the group's first member (its type, tags and
//! `sim:` behaviour), which come up after a start's time.

use super::behaviour::seed;
use super::spot::TERMINATE_TAKES;
use super::{SimFleet, SimProvider, Simulated, START_TAKES};
use crate::fleet::owner::ASG_TAG;
use crate::fleet::{Billing, GroupMember, Instance, InstanceState, Lifecycle};
use chrono::{DateTime, Utc};

impl SimFleet {
    /// Whether `sim` belongs to group `name` of `region`, in any state.
    fn of_group(sim: &Simulated, region: &str, name: &str) -> bool {
        sim.instance.region == region && sim.instance.tag(ASG_TAG) == Some(name)
    }

    /// The positions of group `name`'s members that are not ending or ended, oldest first.
    fn live_members(&self, region: &str, name: &str) -> Vec<usize> {
        let mut live: Vec<usize> = (0..self.instances.len())
            .filter(|&i| {
                let sim = &self.instances[i];
                Self::of_group(sim, region, name)
                    && !matches!(
                        sim.instance.state,
                        InstanceState::ShuttingDown | InstanceState::Terminated
                    )
            })
            .collect();
        live.sort_by_key(|&i| {
            let inst = &self.instances[i].instance;
            (inst.launched_at, inst.id.clone())
        });
        live
    }
}

impl SimProvider {
    /// The members of group `name` of `region` now.
    pub(super) fn sim_members(&self, region: &str, name: &str) -> Vec<GroupMember> {
        let now = self.clock.now();
        let protected = self
            .protected
            .lock()
            .expect("simulated protection poisoned")
            .clone();
        let mut fleet = self.fleet();
        let live = fleet.live_members(region, name);
        live.into_iter()
            .map(|i| {
                let sim = &mut fleet.instances[i];
                sim.advance(now);
                GroupMember {
                    id: sim.instance.id.clone(),
                    instance_type: sim.instance.instance_type.clone(),
                    protected_from_scale_in: protected.contains(&sim.instance.id),
                }
            })
            .collect()
    }

    /// Ends or launches members of group `name` until it has `desired` of them. A group none of
    /// whose instances the fleet has ever had launches nothing: it has nothing to copy.
    pub(super) fn scale_members(&self, region: &str, name: &str, desired: i32) {
        let now = self.clock.now();
        let protected = self
            .protected
            .lock()
            .expect("simulated protection poisoned")
            .clone();
        let mut fleet = self.fleet();
        let live = fleet.live_members(region, name);
        let desired = usize::try_from(desired).unwrap_or(0);
        // The newest go first; members protected from scale-in stay, though the group stays
        // above its desired capacity, as AWS leaves it.
        let unprotected: Vec<usize> = live
            .iter()
            .copied()
            .filter(|&i| !protected.contains(&fleet.instances[i].instance.id))
            .collect();
        let ending = live.len().saturating_sub(desired).min(unprotected.len());
        for &i in unprotected.iter().rev().take(ending) {
            let sim = &mut fleet.instances[i];
            sim.begin(
                InstanceState::ShuttingDown,
                InstanceState::Terminated,
                now,
                TERMINATE_TAKES,
            );
            sim.running_since = None;
        }
        let Some(template) = fleet
            .instances
            .iter()
            .position(|s| SimFleet::of_group(s, region, name))
        else {
            return;
        };
        let launched = fleet
            .instances
            .iter()
            .filter(|s| SimFleet::of_group(s, region, name))
            .count();
        for n in live.len()..desired {
            let member = launch_copy(&fleet.instances[template], name, launched + n, now);
            let at = fleet.instances.len();
            fleet.by_id.insert(member.instance.id.clone(), at);
            fleet.instances.push(member);
        }
    }
}

/// The `n`th instance group `name` launches, a copy of its member `template`, pending at `now`.
fn launch_copy(template: &Simulated, name: &str, n: usize, now: DateTime<Utc>) -> Simulated {
    let id = format!("i-{:017x}", seed(&format!("{name}/{n}")) >> 4);
    let mut sim = Simulated {
        seed: seed(&id),
        start_failures: 0,
        behaviour: template.behaviour.clone(),
        transition: None,
        running_since: None,
        recorded: Vec::new(),
        owner_came: None,
        reason: None,
        reservation: None,
        // On-demand, in its template's zone: never reclaimed.
        zone: template.zone.clone(),
        reclaim_every: None,
        instance: Instance {
            id,
            region: template.instance.region.clone(),
            instance_type: template.instance.instance_type.clone(),
            state: InstanceState::Pending,
            state_since: Some(now),
            lifecycle: Lifecycle::OnDemand,
            launched_at: Some(now),
            tags: template.instance.tags.clone(),
            gpus: template.instance.gpus.clone(),
            gpu_util: Vec::new(),
            via_role: None,
            billing: Billing::EC2,
            private_ip: None,
        },
    };
    sim.begin(
        InstanceState::Pending,
        InstanceState::Running,
        now,
        START_TAKES,
    );
    sim
}
