//! The capabilities of EC2 other than spot moves ([`ScalingGroups`] through Auto Scaling and
//! EKS, [`CapacityReservations`], the [`TypeCatalogue`]): each method the calls it makes.

use super::AwsProvider;
use crate::cloud::{ActionReport, CloudError, NodeGroupUpdate, Reservation, ReservationRequest};
use crate::cloud::{CapacityReservations, ScalingGroups, TypeCatalogue};
use crate::fleet::{Capacity, HeldCapacity, NodeGroup, ScalingGroup, TypeFacts};
use std::collections::BTreeMap;

impl ScalingGroups for AwsProvider {
    /// DescribeAutoScalingGroups in every account watched in `region` (`groups.rs`).
    async fn scaling_groups(&self, region: &str) -> Result<Vec<ScalingGroup>, CloudError> {
        self.list_groups(region).await
    }

    /// UpdateAutoScalingGroup (`groups.rs`).
    async fn set_group_capacity(
        &self,
        region: &str,
        name: &str,
        capacity: Capacity,
    ) -> Result<Option<String>, CloudError> {
        self.update_group(region, name, capacity).await
    }

    /// SetInstanceProtection (`groups.rs`).
    async fn set_scale_in_protection(
        &self,
        region: &str,
        name: &str,
        instances: &[String],
        protected: bool,
    ) -> Result<Option<String>, CloudError> {
        self.protect_members(region, name, instances, protected)
            .await
    }

    /// UpdateNodegroupConfig (`node_groups.rs`).
    async fn set_node_group_capacity(
        &self,
        region: &str,
        group: &str,
        node_group: &NodeGroup,
        capacity: Capacity,
    ) -> Result<Option<String>, CloudError> {
        self.update_node_group(region, group, node_group, capacity)
            .await
    }

    /// DescribeUpdate (`node_groups.rs`).
    async fn node_group_update(
        &self,
        region: &str,
        group: &str,
        node_group: &NodeGroup,
        update: &str,
    ) -> Result<NodeGroupUpdate, CloudError> {
        self.describe_node_group_update(region, group, node_group, update)
            .await
    }

    /// DescribeNodegroup (`node_groups.rs`).
    async fn node_group_capacity(
        &self,
        region: &str,
        group: &str,
        node_group: &NodeGroup,
    ) -> Result<Capacity, CloudError> {
        self.node_group_scaling(region, group, node_group).await
    }
}

impl CapacityReservations for AwsProvider {
    /// DescribeInstances, then CreateCapacityReservation (`reservations.rs`).
    async fn reserve_capacity(
        &self,
        region: &str,
        request: &ReservationRequest,
    ) -> Result<Reservation, CloudError> {
        self.create_reservation(region, request).await
    }

    /// DescribeCapacityReservations, every page (`reservations.rs`).
    async fn reservations(
        &self,
        region: &str,
        instance: &str,
        token: &str,
    ) -> Result<Vec<Reservation>, CloudError> {
        self.tagged_reservations(region, instance, token).await
    }

    /// ModifyInstanceCapacityReservationAttributes (`reservations.rs`).
    async fn target_reservation(
        &self,
        region: &str,
        instance: &str,
        reservation: Option<&str>,
    ) -> ActionReport {
        self.retarget(region, instance, reservation).await
    }

    /// DescribeInstances (`reservations.rs`).
    async fn reservation_target(
        &self,
        region: &str,
        instance: &str,
    ) -> Result<Option<String>, CloudError> {
        self.target_of(region, instance).await
    }

    /// DescribeCapacityReservations, every page of every account (`held_reservations.rs`).
    async fn held_capacity(&self, region: &str) -> Result<Vec<HeldCapacity>, CloudError> {
        self.held_capacity_in(region).await
    }

    /// CancelCapacityReservation (`reservations.rs`).
    async fn cancel_reservation(
        &self,
        region: &str,
        instance: &str,
        reservation: &str,
    ) -> Result<(), CloudError> {
        self.cancel(region, instance, reservation).await
    }
}

impl TypeCatalogue for AwsProvider {
    /// From the first region's scope: the types are the same in every region that offers them.
    async fn instance_types(&self) -> Result<BTreeMap<String, TypeFacts>, CloudError> {
        let Some(scope) = self.scopes.first() else {
            return Ok(BTreeMap::new());
        };
        self.count("DescribeInstanceTypes");
        super::catalogue::describe_families(&scope.ec2).await
    }
}
