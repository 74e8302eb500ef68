//! The simulated fleet's Auto Scaling groups: records of capacity whose members are the
//! simulated instances tagged with the group's name ([`super::scaling`]). A change of capacity
//! is recorded as asked, and members are ended or launched to the desired capacity. A group
//! tagged as an EKS node group's is changed through "EKS" too: the change is done at once, and
//! its update is `Successful`.

use super::SimProvider;
use crate::cloud::ScalingGroups;
use crate::cloud::{CloudError, NodeGroupUpdate, UpdateStatus};
use crate::fleet::{Capacity, NodeGroup, ScalingGroup};

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

    /// Sets or clears the scale-in protection of group `name`'s members `instances`; like AWS,
    /// refuses an instance that is not a live member of the group.
    pub(super) fn sim_protect_members(
        &self,
        region: &str,
        name: &str,
        instances: &[String],
        protected: bool,
    ) -> Result<Option<String>, CloudError> {
        let members = self.sim_members(region, name);
        if let Some(stranger) = instances
            .iter()
            .find(|i| !members.iter().any(|m| &m.id == *i))
        {
            return Err(CloudError::not_found(
                "SetInstanceProtection",
                "ValidationError",
                format!("The instance {stranger} is not part of Auto Scaling group {name}."),
            ));
        }
        let mut set = self
            .protected
            .lock()
            .expect("simulated protection poisoned");
        for id in instances {
            match protected {
                true => set.insert(id.clone()),
                false => set.remove(id),
            };
        }
        Ok(None)
    }

    /// Sets the capacity of the group that is `node_group`'s, as EKS does through it; returns
    /// the update's id, remembered as done. A node group the fleet does not have is not found.
    pub(super) fn sim_set_node_group(
        &self,
        region: &str,
        node_group: &NodeGroup,
        capacity: Capacity,
    ) -> Result<Option<String>, CloudError> {
        let mut groups = self.groups.lock().expect("simulated groups poisoned");
        let group = groups
            .iter_mut()
            .find(|g| g.region == region && g.node_group().as_ref() == Some(node_group))
            .ok_or_else(|| node_group_not_found("UpdateNodegroupConfig", node_group))?;
        group.capacity = capacity;
        let name = group.name.clone();
        drop(groups);
        self.scale_members(region, &name, capacity.desired);
        let mut updates = self.updates.lock().expect("simulated updates poisoned");
        let id = format!("sim-update-{}", updates.len() + 1);
        updates.push(id.clone());
        Ok(Some(id))
    }

    /// An update this fleet made is `Successful`; any other is not found, as EKS says.
    pub(super) fn sim_node_group_update(
        &self,
        update: &str,
    ) -> Result<NodeGroupUpdate, CloudError> {
        let updates = self.updates.lock().expect("simulated updates poisoned");
        if updates.iter().any(|u| u == update) {
            return Ok(NodeGroupUpdate {
                status: UpdateStatus::Successful,
                errors: Vec::new(),
            });
        }
        Err(CloudError::not_found(
            "DescribeUpdate",
            "ResourceNotFoundException",
            format!("No update found for ID: {update}."),
        ))
    }

    /// The capacity of the group that is `node_group`'s.
    pub(super) fn sim_node_group_capacity(
        &self,
        region: &str,
        node_group: &NodeGroup,
    ) -> Result<Capacity, CloudError> {
        let groups = self.groups.lock().expect("simulated groups poisoned");
        groups
            .iter()
            .find(|g| g.region == region && g.node_group().as_ref() == Some(node_group))
            .map(|g| g.capacity)
            .ok_or_else(|| node_group_not_found("DescribeNodegroup", node_group))
    }
}

/// EKS's answer for a node group it does not have.
fn node_group_not_found(operation: &'static str, node_group: &NodeGroup) -> CloudError {
    CloudError::not_found(
        operation,
        "ResourceNotFoundException",
        format!("No node group found for name: {}.", node_group.name),
    )
}

impl ScalingGroups for SimProvider {
    async fn scaling_groups(&self, region: &str) -> Result<Vec<ScalingGroup>, CloudError> {
        Ok(self.sim_groups(region))
    }

    async fn set_group_capacity(
        &self,
        region: &str,
        name: &str,
        capacity: Capacity,
    ) -> Result<Option<String>, CloudError> {
        self.sim_set_group(region, name, capacity)
    }

    async fn set_scale_in_protection(
        &self,
        region: &str,
        name: &str,
        instances: &[String],
        protected: bool,
    ) -> Result<Option<String>, CloudError> {
        self.sim_protect_members(region, name, instances, protected)
    }

    async fn set_node_group_capacity(
        &self,
        region: &str,
        _group: &str,
        node_group: &NodeGroup,
        capacity: Capacity,
    ) -> Result<Option<String>, CloudError> {
        self.sim_set_node_group(region, node_group, capacity)
    }

    async fn node_group_update(
        &self,
        _region: &str,
        _group: &str,
        _node_group: &NodeGroup,
        update: &str,
    ) -> Result<NodeGroupUpdate, CloudError> {
        self.sim_node_group_update(update)
    }

    async fn node_group_capacity(
        &self,
        region: &str,
        _group: &str,
        node_group: &NodeGroup,
    ) -> Result<Capacity, CloudError> {
        self.sim_node_group_capacity(region, node_group)
    }
}
