//! EKS managed node groups: the change of a node group's scaling config (its Auto Scaling
//! group's capacity, which EKS would undo if changed through the group), the update EKS
//! answers with, and the node group's scaling config now.

use super::errors::node_group_change_once_sent;
use super::{cloud_error, AwsProvider};
use crate::cloud::{CloudError, NodeGroupUpdate, UpdateStatus};
use crate::fleet::{Capacity, NodeGroup};
use aws_sdk_eks::types::{NodegroupScalingConfig, UpdateStatus as EksStatus};
use futures_util::FutureExt as _;

impl AwsProvider {
    /// UpdateNodegroupConfig of `node_group`'s min, desired and max, through the account that
    /// listed its Auto Scaling group `group`; EKS's update id.
    pub(super) async fn update_node_group(
        &self,
        region: &str,
        group: &str,
        node_group: &NodeGroup,
        capacity: Capacity,
    ) -> Result<Option<String>, CloudError> {
        const OPERATION: &str = "UpdateNodegroupConfig";
        let scope = self.scope_of_group(region, group, OPERATION)?;
        self.count(OPERATION);
        let scaling = NodegroupScalingConfig::builder()
            .min_size(capacity.min)
            .desired_size(capacity.desired)
            .max_size(capacity.max)
            .build();
        let out = scope
            .eks
            .update_nodegroup_config()
            .cluster_name(&node_group.cluster)
            .nodegroup_name(&node_group.name)
            .scaling_config(scaling)
            .customize()
            .config_override(node_group_change_once_sent())
            .send()
            .boxed()
            .await
            .map_err(|e| cloud_error(OPERATION, e))?;
        Ok(out.update().and_then(|u| u.id()).map(str::to_string))
    }

    /// DescribeUpdate of `update` of `node_group`. A status EKS adds later is an error: unknown.
    pub(super) async fn describe_node_group_update(
        &self,
        region: &str,
        group: &str,
        node_group: &NodeGroup,
        update: &str,
    ) -> Result<NodeGroupUpdate, CloudError> {
        const OPERATION: &str = "DescribeUpdate";
        let scope = self.scope_of_group(region, group, OPERATION)?;
        self.count(OPERATION);
        let out = scope
            .eks
            .describe_update()
            .name(&node_group.cluster)
            .nodegroup_name(&node_group.name)
            .update_id(update)
            .send()
            .boxed()
            .await
            .map_err(|e| cloud_error(OPERATION, e))?;
        let found = out.update().ok_or_else(|| {
            CloudError::other(OPERATION, format!("EKS answered without update {update}"))
        })?;
        let status = match found.status() {
            Some(EksStatus::InProgress) => UpdateStatus::InProgress,
            Some(EksStatus::Successful) => UpdateStatus::Successful,
            Some(EksStatus::Failed) => UpdateStatus::Failed,
            Some(EksStatus::Cancelled) => UpdateStatus::Cancelled,
            other => {
                let message = format!("update {update} has a status ebb does not know: {other:?}");
                return Err(CloudError::other(OPERATION, message));
            }
        };
        let errors = found
            .errors()
            .iter()
            .map(|e| {
                let code = e.error_code().map_or("", |c| c.as_str());
                format!("{code}: {}", e.error_message().unwrap_or_default())
            })
            .collect();
        Ok(NodeGroupUpdate { status, errors })
    }

    /// DescribeNodegroup's scaling config of `node_group`; one without its three sizes is an
    /// error (unknown).
    pub(super) async fn node_group_scaling(
        &self,
        region: &str,
        group: &str,
        node_group: &NodeGroup,
    ) -> Result<Capacity, CloudError> {
        const OPERATION: &str = "DescribeNodegroup";
        let scope = self.scope_of_group(region, group, OPERATION)?;
        self.count(OPERATION);
        let out = scope
            .eks
            .describe_nodegroup()
            .cluster_name(&node_group.cluster)
            .nodegroup_name(&node_group.name)
            .send()
            .boxed()
            .await
            .map_err(|e| cloud_error(OPERATION, e))?;
        let scaling = out.nodegroup().and_then(|n| n.scaling_config());
        let sizes = scaling.and_then(|s| Some((s.min_size()?, s.desired_size()?, s.max_size()?)));
        let (min, desired, max) = sizes.ok_or_else(|| {
            let message = format!("node group {node_group} has no complete scaling config");
            CloudError::other(OPERATION, message)
        })?;
        Ok(Capacity { min, desired, max })
    }
}
