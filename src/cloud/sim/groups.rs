//! The simulated fleet's Auto Scaling groups: records of capacity whose members are the
//! simulated instances tagged with the group's name ([`super::scaling`]). A change of capacity
//! is recorded as asked, and members are ended or launched to the desired capacity.

use super::SimProvider;
use crate::cloud::CloudError;
use crate::fleet::{Capacity, ScalingGroup};

impl SimProvider {
    /// The fleet, with these Auto Scaling groups (their members are the instances tagged with
    /// their names, whatever `members` says).
    pub fn with_groups(self, groups: Vec<ScalingGroup>) -> Self {
        *self.groups.lock().expect("simulated groups poisoned") = groups;
        self
    }

    /// The groups of `region`.
    pub(super) fn sim_groups(&self, region: &str) -> Vec<ScalingGroup> {
        let mut groups: Vec<ScalingGroup> = {
            let groups = self.groups.lock().expect("simulated groups poisoned");
            groups
                .iter()
                .filter(|g| g.region == region)
                .cloned()
                .collect()
        };
        for group in &mut groups {
            group.members = self.sim_members(region, &group.name);
        }
        groups
    }

    /// Sets group `name`'s capacity; a group the fleet does not have is not found, as AWS says.
    pub(super) fn sim_set_group(
        &self,
        region: &str,
        name: &str,
        capacity: Capacity,
    ) -> Result<Option<String>, CloudError> {
        let mut groups = self.groups.lock().expect("simulated groups poisoned");
        let group = groups
            .iter_mut()
            .find(|g| g.region == region && g.name == name)
            .ok_or_else(|| {
                CloudError::not_found(
                    "UpdateAutoScalingGroup",
                    "ValidationError",
                    format!("AutoScalingGroup name not found - {name}"),
                )
            })?;
        group.capacity = capacity;
        drop(groups);
        self.scale_members(region, name, capacity.desired);
        Ok(None)
    }
}
