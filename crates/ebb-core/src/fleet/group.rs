//! Auto Scaling groups as ebb sees them: their tags, capacity and members. A group's members
//! are never acted on one by one; the group's capacity is what ebb changes, through EKS for
//! the group of an EKS managed node group.

use super::owner::{EKS_CLUSTER_TAG, EKS_NODEGROUP_TAG};
use super::Tags;
use serde::{Deserialize, Serialize};

/// The capacity of an Auto Scaling group: its minimum, desired and maximum sizes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Capacity {
    /// The fewest instances the group keeps.
    pub min: i32,
    /// The instances the group aims for.
    pub desired: i32,
    /// The most instances the group may have.
    pub max: i32,
}

impl std::fmt::Display for Capacity {
    fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        write!(
            f,
            "min {} desired {} max {}",
            self.min, self.desired, self.max
        )
    }
}

/// One instance of an Auto Scaling group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupMember {
    /// The instance id.
    pub id: String,
    /// Its instance type.
    pub instance_type: String,
    /// Whether the group's scale-in leaves it alone (its instance protection): set by ebb for
    /// a protected member under `group.protect_members`, or by the group's owner.
    pub protected_from_scale_in: bool,
}

/// An Auto Scaling group that carries ebb's opt-in tag.
#[derive(Debug, Clone)]
pub struct ScalingGroup {
    /// The group's name, unique in its region and account.
    pub name: String,
    /// Its region.
    pub region: String,
    /// The group's own tags (those it propagates to its members included).
    pub tags: Tags,
    /// Its capacity now.
    pub capacity: Capacity,
    /// Its instances now.
    pub members: Vec<GroupMember>,
}

impl ScalingGroup {
    /// The EKS managed node group this is the Auto Scaling group of, from the tags EKS puts on
    /// it (`eks:cluster-name`, `eks:nodegroup-name`): its capacity is changed through EKS,
    /// which would undo a change made through the group.
    pub fn node_group(&self) -> Option<NodeGroup> {
        Some(NodeGroup {
            cluster: self.tags.get(EKS_CLUSTER_TAG)?.to_string(),
            name: self.tags.get(EKS_NODEGROUP_TAG)?.to_string(),
        })
    }
}

/// An EKS managed node group: its scaling config is the capacity of its Auto Scaling group.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct NodeGroup {
    /// The EKS cluster.
    pub cluster: String,
    /// The node group's name in the cluster.
    pub name: String,
}

impl std::fmt::Display for NodeGroup {
    fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        write!(f, "{}/{}", self.cluster, self.name)
    }
}
