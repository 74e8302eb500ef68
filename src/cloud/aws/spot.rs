//! EC2 calls of spot migrations: launch settings, images, launches and terminations.

use super::ec2::{lifecycle_of, state_of};
use super::{cloud_error, AwsProvider, Scope};
use crate::cloud::pacing::Key;
use crate::cloud::{
    ActionReport, CloudError, ErrorKind, Image, ImageMade, ImageState, InstanceStatus, Launch,
    LaunchSpec, Market,
};
use aws_sdk_ec2::operation::RequestId;
use aws_sdk_ec2::types::{
    BlockDeviceMapping, Filter, IamInstanceProfileSpecification, ImageState as Ec2ImageState,
    InstanceAttributeName, InstanceInterruptionBehavior, InstanceMarketOptionsRequest,
    InstanceType, MarketType, ResourceType, SpotInstanceType, SpotMarketOptions, Tag,
    TagSpecification,
};
use std::collections::BTreeMap;

impl AwsProvider {
    /// The clients of the account that listed `id` (ebb's own when it was never listed).
    pub(super) fn scope_of<'a>(
        &'a self,
        region: &str,
        id: &str,
        operation: &'static str,
    ) -> Result<&'a Scope, CloudError> {
        let known = self
            .known
            .read()
            .expect("instance map poisoned")
            .get(id)
            .map(|k| k.scope);
        known
            .map(|i| &self.scopes[i])
            .or_else(|| self.scopes.iter().find(|s| s.region == region))
            .ok_or_else(|| {
                let message = format!("region {region} is not watched; add it to EBB_REGIONS");
                CloudError::other(operation, message)
            })
    }

    /// DescribeInstances of one instance, DescribeInstanceAttribute for its user data, and
    /// DescribeSubnets for a subnet of its VPC in every zone.
    pub(super) async fn read_launch_spec(
        &self,
        region: &str,
        id: &str,
    ) -> Result<LaunchSpec, CloudError> {
        let scope = self.scope_of(region, id, "DescribeInstances")?;
        self.count("DescribeInstances");
        let out = scope
            .ec2
            .describe_instances()
            .instance_ids(id)
            .send()
            .await
            .map_err(|e| cloud_error("DescribeInstances", e))?;
        let instance = out
            .reservations()
            .iter()
            .flat_map(|r| r.instances())
            .next()
            .ok_or_else(|| not_found("DescribeInstances", id))?;
        let missing = |what: &str| {
            let message =
                format!("{id} has no {what}; only instances in a VPC subnet can be moved to spot");
            CloudError::other("DescribeInstances", message)
        };
        let subnet = instance
            .subnet_id()
            .ok_or_else(|| missing("subnet"))?
            .to_string();
        let zone = instance
            .placement()
            .and_then(|p| p.availability_zone())
            .ok_or_else(|| missing("availability zone"))?
            .to_string();
        let vpc = instance.vpc_id().ok_or_else(|| missing("VPC"))?.to_string();
        let user_data = self.user_data(scope, id).await?;
        let subnets_by_zone = self.subnets_by_zone(scope, &vpc, &zone, &subnet).await?;
        Ok(LaunchSpec {
            instance_type: instance
                .instance_type()
                .map(|t| t.as_str().to_string())
                .ok_or_else(|| missing("instance type"))?,
            zone,
            subnet,
            subnets_by_zone,
            security_groups: instance
                .security_groups()
                .iter()
                .filter_map(|g| g.group_id().map(str::to_string))
                .collect(),
            instance_profile: instance
                .iam_instance_profile()
                .and_then(|p| p.arn())
                .map(str::to_string),
            key_name: instance.key_name().map(str::to_string),
            user_data,
            tags: instance
                .tags()
                .iter()
                .filter_map(|t| Some((t.key()?.to_string(), t.value().unwrap_or("").to_string())))
                .filter(|(k, _)| !k.starts_with("aws:"))
                .collect(),
            volumes: instance
                .block_device_mappings()
                .iter()
                .filter_map(|m| m.ebs()?.volume_id().map(str::to_string))
                .collect(),
        })
    }

    /// DescribeInstanceAttribute: the user data of `id`, base64, if it has any.
    async fn user_data(&self, scope: &Scope, id: &str) -> Result<Option<String>, CloudError> {
        self.count("DescribeInstanceAttribute");
        Ok(scope
            .ec2
            .describe_instance_attribute()
            .instance_id(id)
            .attribute(InstanceAttributeName::UserData)
            .send()
            .await
            .map_err(|e| cloud_error("DescribeInstanceAttribute", e))?
            .user_data()
            .and_then(|u| u.value())
            .filter(|v| !v.is_empty())
            .map(str::to_string))
    }

    /// DescribeSubnets: a subnet of `vpc` in each zone, where a replacement may go. In the
    /// original's `zone` its own `subnet`; elsewhere the subnet with the most free addresses.
    async fn subnets_by_zone(
        &self,
        scope: &Scope,
        vpc: &str,
        zone: &str,
        subnet: &str,
    ) -> Result<BTreeMap<String, String>, CloudError> {
        self.count("DescribeSubnets");
        let subnets = scope
            .ec2
            .describe_subnets()
            .filters(Filter::builder().name("vpc-id").values(vpc).build())
            .send()
            .await
            .map_err(|e| cloud_error("DescribeSubnets", e))?;
        let mut best: BTreeMap<String, (String, i32)> = BTreeMap::new();
        for s in subnets.subnets() {
            let (Some(sid), Some(z)) = (s.subnet_id(), s.availability_zone()) else {
                continue;
            };
            let free = if sid == subnet {
                i32::MAX
            } else {
                s.available_ip_address_count().unwrap_or(0)
            };
            if best.get(z).is_none_or(|(_, most)| free > *most) {
                best.insert(z.to_string(), (sid.to_string(), free));
            }
        }
        best.insert(zone.to_string(), (subnet.to_string(), i32::MAX));
        Ok(best.into_iter().map(|(z, (s, _))| (z, s)).collect())
    }

    /// DescribeInstances by id; ids EC2 does not know are left out.
    pub(super) async fn describe_status(
        &self,
        region: &str,
        ids: &[String],
    ) -> Result<Vec<InstanceStatus>, CloudError> {
        let Some(first) = ids.first() else {
            return Ok(Vec::new());
        };
        let scope = self.scope_of(region, first, "DescribeInstances")?;
        // Filtering by id (not InstanceIds) makes an unknown id absent rather than an error.
        let filter = Filter::builder()
            .name("instance-id")
            .set_values(Some(ids.to_vec()))
            .build();
        let found = self.instances_where(scope, filter).await?;
        Ok(found.iter().filter_map(status).collect())
    }

    /// DescribeInstances by tag: the newest instance tagged `key=value`.
    pub(super) async fn find_by_tag(
        &self,
        region: &str,
        key: &str,
        value: &str,
    ) -> Result<Option<InstanceStatus>, CloudError> {
        let scope = self.scope_of(region, "", "DescribeInstances")?;
        let filter = Filter::builder()
            .name(format!("tag:{key}"))
            .values(value)
            .build();
        let found = self.instances_where(scope, filter).await?;
        Ok(found
            .iter()
            .max_by_key(|i| i.launch_time().map(|t| (t.secs(), t.subsec_nanos())))
            .and_then(status))
    }

    /// DescribeInstances with one filter (a few instances: one page).
    async fn instances_where(
        &self,
        scope: &Scope,
        filter: Filter,
    ) -> Result<Vec<aws_sdk_ec2::types::Instance>, CloudError> {
        self.count("DescribeInstances");
        let out = scope
            .ec2
            .describe_instances()
            .filters(filter)
            .send()
            .await
            .map_err(|e| cloud_error("DescribeInstances", e))?;
        Ok(out
            .reservations()
            .iter()
            .flat_map(|r| r.instances())
            .cloned()
            .collect())
    }

    /// DescribeImages of one image by id; `None` when it does not exist.
    async fn image_by_id(
        &self,
        scope: &Scope,
        image: &str,
    ) -> Result<Option<aws_sdk_ec2::types::Image>, CloudError> {
        self.count("DescribeImages");
        let out = scope
            .ec2
            .describe_images()
            .filters(Filter::builder().name("image-id").values(image).build())
            .send()
            .await
            .map_err(|e| cloud_error("DescribeImages", e))?;
        Ok(out.images().first().cloned())
    }

    /// CreateImage, unless images of that name exist (DescribeImages first): then their ids.
    pub(super) async fn make_image(
        &self,
        region: &str,
        id: &str,
        name: &str,
        tags: &BTreeMap<String, String>,
    ) -> Result<ImageMade, CloudError> {
        let scope = self.scope_of(region, id, "CreateImage")?;
        let named = self.images_named(scope, name).await?;
        if !named.is_empty() {
            return Ok(ImageMade::Named(named));
        }
        // The same tags on the image and on the snapshots the call makes: the IAM policy lets
        // ebb tag a snapshot only in the CreateImage call that makes it.
        let tagged = |resource| {
            let spec = TagSpecification::builder().resource_type(resource);
            tags.iter()
                .fold(spec, |spec, (key, value)| {
                    spec.tags(Tag::builder().key(key).value(value).build())
                })
                .build()
        };
        self.count("CreateImage");
        let made = scope
            .ec2
            .create_image()
            .instance_id(id)
            .name(name)
            .description(format!("ebb: {id} moved to spot"))
            // The tags let the IAM policy allow deleting only what ebb made, and prove (with
            // the snapshots' volumes) that ebb made it when it is found after a crash.
            .tag_specifications(tagged(ResourceType::Image))
            .tag_specifications(tagged(ResourceType::Snapshot))
            .send()
            .await;
        match made {
            Ok(out) => out
                .image_id()
                .map(|i| ImageMade::Made(i.to_string()))
                .ok_or_else(|| not_found("CreateImage", name)),
            // Made since the look-up: by an attempt whose answer was lost, or by anyone.
            Err(e)
                if e.as_service_error()
                    .and_then(|s| aws_sdk_ec2::error::ProvideErrorMetadata::code(s))
                    == Some("InvalidAMIName.Duplicate") =>
            {
                Ok(ImageMade::Named(self.images_named(scope, name).await?))
            }
            Err(e) => Err(cloud_error("CreateImage", e)),
        }
    }

    /// DescribeImages by name, of this account's images.
    async fn images_named(&self, scope: &Scope, name: &str) -> Result<Vec<String>, CloudError> {
        self.count("DescribeImages");
        let out = scope
            .ec2
            .describe_images()
            .owners("self")
            .filters(Filter::builder().name("name").values(name).build())
            .send()
            .await
            .map_err(|e| cloud_error("DescribeImages", e))?;
        Ok(out
            .images()
            .iter()
            .filter_map(|i| i.image_id())
            .map(str::to_string)
            .collect())
    }

    /// DescribeSnapshots: the volume each of `snapshots` was taken from.
    async fn snapshot_volumes(
        &self,
        scope: &Scope,
        snapshots: &[String],
    ) -> Result<BTreeMap<String, String>, CloudError> {
        if snapshots.is_empty() {
            return Ok(BTreeMap::new());
        }
        self.count("DescribeSnapshots");
        let out = scope
            .ec2
            .describe_snapshots()
            .set_snapshot_ids(Some(snapshots.to_vec()))
            .send()
            .await
            .map_err(|e| cloud_error("DescribeSnapshots", e))?;
        Ok(out
            .snapshots()
            .iter()
            .filter_map(|s| Some((s.snapshot_id()?.to_string(), s.volume_id()?.to_string())))
            .collect())
    }

    /// DescribeImages of one image, with its state and tags, and DescribeSnapshots for the
    /// volumes its snapshots were taken from.
    pub(super) async fn image_state(
        &self,
        region: &str,
        image: &str,
    ) -> Result<Option<Image>, CloudError> {
        let scope = self.scope_of(region, "", "DescribeImages")?;
        let Some(found) = self.image_by_id(scope, image).await? else {
            return Ok(None);
        };
        let snapshots = snapshots(&found);
        Ok(Some(Image {
            state: match found.state() {
                Some(Ec2ImageState::Available) => ImageState::Available,
                Some(Ec2ImageState::Pending) | None => ImageState::Pending,
                Some(_) => ImageState::Failed,
            },
            snapshot_volumes: self.snapshot_volumes(scope, &snapshots).await?,
            snapshots,
            tags: found
                .tags()
                .iter()
                .filter_map(|t| Some((t.key()?.to_string(), t.value().unwrap_or("").to_string())))
                .collect(),
        }))
    }

    /// RunInstances of one instance, in the market asked, with the original's settings.
    pub(super) async fn run(
        &self,
        region: &str,
        launch: &Launch,
    ) -> Result<InstanceStatus, CloudError> {
        let scope = self.scope_of(region, "", "RunInstances")?;
        let mut tags = TagSpecification::builder().resource_type(ResourceType::Instance);
        for (key, value) in launch.spec.tags.iter().chain(&launch.tags) {
            tags = tags.tags(Tag::builder().key(key).value(value).build());
        }
        let mut request = scope
            .ec2
            .run_instances()
            .image_id(&launch.image)
            .instance_type(InstanceType::from(launch.instance_type.as_str()))
            .subnet_id(&launch.subnet)
            .set_security_group_ids(Some(launch.spec.security_groups.clone()))
            .set_key_name(launch.spec.key_name.clone())
            .set_user_data(launch.spec.user_data.clone())
            .min_count(1)
            .max_count(1)
            .client_token(&launch.client_token)
            .tag_specifications(tags.build());
        if let Some(arn) = &launch.spec.instance_profile {
            request = request
                .iam_instance_profile(IamInstanceProfileSpecification::builder().arn(arn).build());
        }
        if launch.market == Market::Spot {
            request = request.instance_market_options(
                InstanceMarketOptionsRequest::builder()
                    .market_type(MarketType::Spot)
                    .spot_options(
                        SpotMarketOptions::builder()
                            .spot_instance_type(SpotInstanceType::OneTime)
                            .instance_interruption_behavior(InstanceInterruptionBehavior::Terminate)
                            .build(),
                    )
                    .build(),
            );
        }
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
    pub(super) async fn terminate_instances(&self, region: &str, ids: &[String]) -> ActionReport {
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
                    .await
                    .map_err(|e| cloud_error("TerminateInstances", e))?;
                Ok(super::ec2::Accepted::of(out.request_id()))
            },
        )
        .await
    }

    /// DeregisterImage of `image`; one already gone (DescribeImages first) is not an error.
    pub(super) async fn deregister(&self, region: &str, image: &str) -> Result<(), CloudError> {
        let scope = self.scope_of(region, "", "DeregisterImage")?;
        if self.image_by_id(scope, image).await?.is_none() {
            return Ok(());
        }
        self.count("DeregisterImage");
        scope
            .ec2
            .deregister_image()
            .image_id(image)
            .send()
            .await
            .map_err(|e| cloud_error("DeregisterImage", e))?;
        Ok(())
    }

    /// DeleteSnapshot of `snapshot`; one EC2 no longer knows is not an error.
    pub(super) async fn remove_snapshot(
        &self,
        region: &str,
        snapshot: &str,
    ) -> Result<(), CloudError> {
        let scope = self.scope_of(region, "", "DeleteSnapshot")?;
        self.count("DeleteSnapshot");
        match scope
            .ec2
            .delete_snapshot()
            .snapshot_id(snapshot)
            .send()
            .await
        {
            Ok(_) => Ok(()),
            Err(e)
                if e.as_service_error()
                    .and_then(|s| aws_sdk_ec2::error::ProvideErrorMetadata::code(s))
                    == Some("InvalidSnapshot.NotFound") =>
            {
                Ok(())
            }
            Err(e) => Err(cloud_error("DeleteSnapshot", e)),
        }
    }
}

/// An instance's status; `None` for one without id, type or state, which EC2 never sends.
fn status(i: &aws_sdk_ec2::types::Instance) -> Option<InstanceStatus> {
    Some(InstanceStatus {
        id: i.instance_id()?.to_string(),
        state: state_of(i)?,
        lifecycle: lifecycle_of(i),
        instance_type: i.instance_type()?.as_str().to_string(),
        zone: i
            .placement()
            .and_then(|p| p.availability_zone())
            .unwrap_or("")
            .to_string(),
        state_reason: i.state_reason().and_then(|r| r.code()).map(str::to_string),
        image: i.image_id().map(str::to_string),
    })
}

/// The EBS snapshots of an image.
fn snapshots(image: &aws_sdk_ec2::types::Image) -> Vec<String> {
    image
        .block_device_mappings()
        .iter()
        .filter_map(BlockDeviceMapping::ebs)
        .filter_map(|e| e.snapshot_id())
        .map(str::to_string)
        .collect()
}

fn not_found(operation: &'static str, what: &str) -> CloudError {
    CloudError::new(ErrorKind::NotFound, operation, format!("{what} not found"))
}
