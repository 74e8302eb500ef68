//! [`SpotMoves`] on EC2: the calls of spot migration, each method the calls it makes.

use super::ec2::Accepted;
use super::spot::{
    image_volumes, launch_spec_of, not_found, run_request, snapshots, status, Placement,
};
use super::{cloud_error, tag_map, AwsProvider};
use crate::cloud::pacing::Key;
use crate::cloud::{
    ActionReport, Artifact, CloudError, Image, ImageMade, ImageState, InstanceStatus, Launch,
    LaunchSpec, PlacementScores, SpotMoves,
};
use aws_sdk_ec2::operation::RequestId;
use aws_sdk_ec2::types::{Filter, ImageState as Ec2ImageState};
use futures_util::FutureExt as _;
use std::collections::BTreeMap;

impl SpotMoves for AwsProvider {
    /// DescribeInstances of the instance and DescribeSubnets for a subnet of its VPC in every
    /// zone.
    async fn launch_spec(&self, region: &str, id: &str) -> Result<LaunchSpec, CloudError> {
        let scope = self.scope_of(region, id, "DescribeInstances")?;
        self.count("DescribeInstances");
        let out = scope
            .ec2
            .describe_instances()
            .instance_ids(id)
            .send()
            .boxed()
            .await
            .map_err(|e| cloud_error("DescribeInstances", e))?;
        let instance = out
            .reservations()
            .iter()
            .flat_map(|r| r.instances())
            .next()
            .ok_or_else(|| not_found("DescribeInstances", id))?;
        let placement = Placement::of(id, instance)?;
        let subnets_by_zone = self.subnets_by_zone(scope, &placement).await?;
        launch_spec_of(id, instance, placement, subnets_by_zone)
    }

    /// DescribeInstanceAttribute (userData) of the instance.
    async fn user_data(&self, region: &str, id: &str) -> Result<Option<String>, CloudError> {
        let scope = self.scope_of(region, id, "DescribeInstanceAttribute")?;
        self.user_data_of(scope, id).await
    }

    /// DescribeInstances filtered by id, so that an id EC2 does not know is absent rather
    /// than an error.
    async fn describe(
        &self,
        region: &str,
        ids: &[String],
    ) -> Result<Vec<InstanceStatus>, CloudError> {
        let Some(first) = ids.first() else {
            return Ok(Vec::new());
        };
        let scope = self.scope_of(region, first, "DescribeInstances")?;
        let filter = Filter::builder()
            .name("instance-id")
            .set_values(Some(ids.to_vec()))
            .build();
        let found = self.instances_where(scope, filter).await?;
        Ok(found.iter().filter_map(status).collect())
    }

    /// DescribeSpotInstanceRequests of the instance's request, in ebb's own account
    /// (`spot.rs`).
    async fn interruption_confirmed(&self, region: &str, id: &str) -> Result<bool, CloudError> {
        self.marked_for_interruption(region, id).await
    }

    /// DescribeInstances by tag, in ebb's own account (`spot.rs`).
    async fn find_tagged(
        &self,
        region: &str,
        key: &str,
        value: &str,
    ) -> Result<Option<InstanceStatus>, CloudError> {
        self.newest_tagged(region, key, value).await
    }

    /// DescribeImages by name first, then CreateImage (`spot.rs`).
    async fn create_image(
        &self,
        region: &str,
        id: &str,
        name: &str,
        tags: &BTreeMap<String, String>,
    ) -> Result<ImageMade, CloudError> {
        self.make_image(region, id, name, tags).await
    }

    /// DescribeImages of the image, with its state and tags, and DescribeSnapshots for the
    /// volumes its snapshots were taken from.
    async fn image(&self, region: &str, image: &str) -> Result<Option<Image>, CloudError> {
        let scope = self.scope_of(region, "", "DescribeImages")?;
        let Some(found) = self.image_by_id(scope, image).await? else {
            return Ok(None);
        };
        let snapshots = snapshots(&found);
        let facts = self.snapshot_facts(scope, &snapshots).await?;
        Ok(Some(Image {
            state: match found.state() {
                Some(Ec2ImageState::Available) => ImageState::Available,
                Some(Ec2ImageState::Pending) | None => ImageState::Pending,
                Some(_) => ImageState::Failed,
            },
            snapshot_volumes: facts.volumes,
            completed_snapshots: facts.completed,
            volumes: image_volumes(&found),
            snapshots,
            tags: tag_map(found.tags()),
        }))
    }

    /// RunInstances of one instance, in the market asked, with the original's settings, in
    /// ebb's own account.
    async fn launch(&self, region: &str, launch: &Launch) -> Result<InstanceStatus, CloudError> {
        let scope = self.scope_of(region, "", "RunInstances")?;
        let request = run_request(scope, launch);
        let key = Key {
            account: scope.account.clone(),
            region: scope.region.clone(),
            api: "RunInstances",
        };
        // The client token makes a launch made again after a throttle the same launch.
        let send = || {
            self.count("RunInstances");
            let request = request.clone();
            async move {
                request
                    .send()
                    .boxed()
                    .await
                    .map_err(|e| cloud_error("RunInstances", e))
            }
        };
        // Boxed: a RunInstances request is large, and a migration step's future holds it.
        let out = Box::pin(self.pacer.call(&key, 1, send)).await?;
        out.instances()
            .first()
            .and_then(status)
            .ok_or_else(|| not_found("RunInstances", &launch.client_token))
    }

    /// TerminateInstances in batches.
    async fn terminate(&self, region: &str, ids: &[String]) -> ActionReport {
        self.in_scopes(
            region,
            ids,
            "TerminateInstances",
            |scope, batch| async move {
                self.count("TerminateInstances");
                let out = scope
                    .ec2
                    .terminate_instances()
                    .set_instance_ids(Some(batch))
                    .send()
                    .boxed()
                    .await
                    .map_err(|e| cloud_error("TerminateInstances", e))?;
                Ok(Accepted::of(out.request_id()))
            },
        )
        .await
    }

    /// DescribeImages first, then DeregisterImage (`artifacts.rs`).
    async fn deregister_image(&self, region: &str, image: &str) -> Result<(), CloudError> {
        self.deregister(region, image).await
    }

    /// DeleteSnapshot; `InvalidSnapshot.NotFound` is success (`artifacts.rs`).
    async fn delete_snapshot(&self, region: &str, snapshot: &str) -> Result<(), CloudError> {
        self.remove_snapshot(region, snapshot).await
    }

    /// DescribeInstances (tag `ebb:launch`, not terminated), DescribeImages (own, tag
    /// `ebb:migration`) and DescribeSnapshots (own, tag `ebb:image-of`), every page of each,
    /// in ebb's own account.
    async fn migration_artifacts(&self, region: &str) -> Result<Vec<Artifact>, CloudError> {
        let scope = self.scope_of(region, "", "DescribeInstances")?;
        let mut found = self.tagged_launches(scope).await?;
        found.extend(self.tagged_images(scope).await?);
        found.extend(self.tagged_snapshots(scope).await?);
        Ok(found)
    }

    /// GetSpotPlacementScores, one call per type (`placement.rs`).
    async fn placement_scores(
        &self,
        region: &str,
        types: &[String],
    ) -> Result<PlacementScores, CloudError> {
        self.spot_placement_scores(region, types).await
    }
}
