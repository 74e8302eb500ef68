//! EC2 for spot migrations: the look-ups their calls make (user data, subnets, images,
//! snapshots), the CreateImage and RunInstances requests, and what EC2's answers say.

use super::ec2::{lifecycle_of, state_of};
use super::{cloud_error, tag_map, AwsProvider, Scope};
use crate::cloud::{CloudError, ErrorKind, ImageMade, InstanceStatus, Launch, LaunchSpec, Market};
use crate::names::RECLAIM_TAG;
use aws_sdk_ec2::error::ProvideErrorMetadata;
use aws_sdk_ec2::operation::create_image::builders::CreateImageFluentBuilder;
use aws_sdk_ec2::operation::run_instances::builders::RunInstancesFluentBuilder;
use aws_sdk_ec2::types::{
    BlockDeviceMapping, Filter, IamInstanceProfileSpecification, InstanceAttributeName,
    InstanceInterruptionBehavior, InstanceMarketOptionsRequest, InstanceType, MarketType,
    ResourceType, SpotInstanceType, SpotMarketOptions, Tag, TagSpecification,
};
use futures_util::FutureExt as _;
use std::collections::{BTreeMap, BTreeSet};

/// Where an instance is, which its replacement's subnets follow.
pub(super) struct Placement {
    /// Its subnet.
    subnet: String,
    /// Its availability zone.
    zone: String,
    /// Its VPC.
    vpc: String,
}

impl Placement {
    /// Where `instance` (`id`) is; an error when it is not in a VPC subnet.
    pub(super) fn of(
        id: &str,
        instance: &aws_sdk_ec2::types::Instance,
    ) -> Result<Placement, CloudError> {
        let missing = |what| missing(id, what);
        Ok(Placement {
            subnet: instance
                .subnet_id()
                .ok_or_else(|| missing("subnet"))?
                .to_string(),
            zone: instance
                .placement()
                .and_then(|p| p.availability_zone())
                .ok_or_else(|| missing("availability zone"))?
                .to_string(),
            vpc: instance.vpc_id().ok_or_else(|| missing("VPC"))?.to_string(),
        })
    }
}

/// The error of an instance `id` without `what`, which a move to spot needs.
fn missing(id: &str, what: &str) -> CloudError {
    let message =
        format!("{id} has no {what}; only instances in a VPC subnet can be moved to spot");
    CloudError::other("DescribeInstances", message)
}

/// How `instance` (`id`, at `placement`) was launched, with a subnet in each zone; its user
/// data is read at each launch instead.
pub(super) fn launch_spec_of(
    id: &str,
    instance: &aws_sdk_ec2::types::Instance,
    placement: Placement,
    subnets_by_zone: BTreeMap<String, String>,
) -> Result<LaunchSpec, CloudError> {
    let mut tags = tag_map(instance.tags());
    tags.retain(|k, _| !k.starts_with("aws:"));
    Ok(LaunchSpec {
        instance_type: instance
            .instance_type()
            .map(|t| t.as_str().to_string())
            .ok_or_else(|| missing(id, "instance type"))?,
        zone: placement.zone,
        subnet: placement.subnet,
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
        user_data: None,
        tags,
        volumes: instance
            .block_device_mappings()
            .iter()
            .filter_map(|m| m.ebs()?.volume_id().map(str::to_string))
            .collect(),
        kept_at_termination: instance
            .block_device_mappings()
            .iter()
            .filter_map(|m| m.ebs())
            .filter(|ebs| ebs.delete_on_termination() == Some(false))
            .filter_map(|ebs| ebs.volume_id().map(str::to_string))
            .collect(),
        private_ip: instance.private_ip_address().map(str::to_string),
        hibernation: instance
            .hibernation_options()
            .and_then(|h| h.configured())
            .unwrap_or(false),
    })
}

/// CreateImage of instance `id` named `name`, with all its volumes.
pub(super) fn image_request(
    scope: &Scope,
    id: &str,
    name: &str,
    tags: &BTreeMap<String, String>,
) -> CreateImageFluentBuilder {
    // The same tags on the image and on the snapshots the call makes: the IAM policy lets ebb
    // tag a snapshot only in the CreateImage call that makes it.
    let tagged = |resource| {
        let spec = TagSpecification::builder().resource_type(resource);
        tags.iter()
            .fold(spec, |spec, (key, value)| {
                spec.tags(Tag::builder().key(key).value(value).build())
            })
            .build()
    };
    scope
        .ec2
        .create_image()
        .instance_id(id)
        .name(name)
        .description(match tags.contains_key(RECLAIM_TAG) {
            true => format!("ebb: {id}, reclaimed after a long stop"),
            false => format!("ebb: {id} moved to spot"),
        })
        // The tags let the IAM policy allow deleting only what ebb made, and prove (with the
        // snapshots' volumes) that ebb made it when it is found after a crash.
        .tag_specifications(tagged(ResourceType::Image))
        .tag_specifications(tagged(ResourceType::Snapshot))
}

/// RunInstances of one instance as `launch` says, in its market.
pub(super) fn run_request(scope: &Scope, launch: &Launch) -> RunInstancesFluentBuilder {
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
        .set_private_ip_address(launch.private_ip.clone())
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
    request
}

impl AwsProvider {
    /// DescribeSpotInstanceRequests of the instance's request, in ebb's own account: whether
    /// EC2 marked it for an interruption.
    pub(super) async fn marked_for_interruption(
        &self,
        region: &str,
        id: &str,
    ) -> Result<bool, CloudError> {
        let scope = self.scope_of(region, "", "DescribeSpotInstanceRequests")?;
        self.count("DescribeSpotInstanceRequests");
        let out = scope
            .ec2
            .describe_spot_instance_requests()
            .filters(Filter::builder().name("instance-id").values(id).build())
            .send()
            .boxed()
            .await
            .map_err(|e| cloud_error("DescribeSpotInstanceRequests", e))?;
        Ok(out.spot_instance_requests().iter().any(|r| {
            r.status()
                .and_then(|s| s.code())
                .is_some_and(|c| c.starts_with("marked-for-"))
        }))
    }

    /// DescribeInstances by tag, in ebb's own account: the newest launch.
    pub(super) async fn newest_tagged(
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

    /// DescribeImages by name first, then CreateImage.
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
        self.count("CreateImage");
        match image_request(scope, id, name, tags).send().boxed().await {
            Ok(out) => out
                .image_id()
                .map(|i| ImageMade::Made(i.to_string()))
                .ok_or_else(|| not_found("CreateImage", name)),
            // Made since the look-up: by an attempt whose answer was lost, or by anyone.
            Err(e)
                if e.as_service_error().and_then(ProvideErrorMetadata::code)
                    == Some("InvalidAMIName.Duplicate") =>
            {
                Ok(ImageMade::Named(self.images_named(scope, name).await?))
            }
            Err(e) => Err(cloud_error("CreateImage", e)),
        }
    }

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

    /// DescribeInstanceAttribute: the user data of `id`, base64, if it has any.
    pub(super) async fn user_data_of(
        &self,
        scope: &Scope,
        id: &str,
    ) -> Result<Option<String>, CloudError> {
        self.count("DescribeInstanceAttribute");
        Ok(scope
            .ec2
            .describe_instance_attribute()
            .instance_id(id)
            .attribute(InstanceAttributeName::UserData)
            .send()
            .boxed()
            .await
            .map_err(|e| cloud_error("DescribeInstanceAttribute", e))?
            .user_data()
            .and_then(|u| u.value())
            .filter(|v| !v.is_empty())
            .map(str::to_string))
    }

    /// DescribeSubnets: a subnet of the original's VPC in each zone, where a replacement may
    /// go. In the original's zone its own subnet; elsewhere the subnet with the most free
    /// addresses.
    pub(super) async fn subnets_by_zone(
        &self,
        scope: &Scope,
        placement: &Placement,
    ) -> Result<BTreeMap<String, String>, CloudError> {
        let Placement { subnet, zone, vpc } = placement;
        self.count("DescribeSubnets");
        let subnets = scope
            .ec2
            .describe_subnets()
            .filters(Filter::builder().name("vpc-id").values(vpc).build())
            .send()
            .boxed()
            .await
            .map_err(|e| cloud_error("DescribeSubnets", e))?;
        let mut best: BTreeMap<String, (String, i32)> = BTreeMap::new();
        for s in subnets.subnets() {
            let (Some(sid), Some(z)) = (s.subnet_id(), s.availability_zone()) else {
                continue;
            };
            let free = if sid == subnet.as_str() {
                i32::MAX
            } else {
                s.available_ip_address_count().unwrap_or(0)
            };
            if best.get(z).is_none_or(|(_, most)| free > *most) {
                best.insert(z.to_string(), (sid.to_string(), free));
            }
        }
        best.insert(zone.clone(), (subnet.clone(), i32::MAX));
        Ok(best.into_iter().map(|(z, (s, _))| (z, s)).collect())
    }

    /// DescribeInstances with one filter (a few instances: one page).
    pub(super) async fn instances_where(
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
            .boxed()
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
    pub(super) async fn image_by_id(
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
            .boxed()
            .await
            .map_err(|e| cloud_error("DescribeImages", e))?;
        Ok(out.images().first().cloned())
    }

    /// DescribeImages by name, of this account's images.
    pub(super) async fn images_named(
        &self,
        scope: &Scope,
        name: &str,
    ) -> Result<Vec<String>, CloudError> {
        self.count("DescribeImages");
        let out = scope
            .ec2
            .describe_images()
            .owners("self")
            .filters(Filter::builder().name("name").values(name).build())
            .send()
            .boxed()
            .await
            .map_err(|e| cloud_error("DescribeImages", e))?;
        Ok(out
            .images()
            .iter()
            .filter_map(|i| i.image_id())
            .map(str::to_string)
            .collect())
    }

    /// What EC2 records of `snapshots` (DescribeSnapshots): the volume each was taken from,
    /// and which are `completed`.
    pub(super) async fn snapshot_facts(
        &self,
        scope: &Scope,
        snapshots: &[String],
    ) -> Result<SnapshotFacts, CloudError> {
        let mut facts = SnapshotFacts::default();
        if snapshots.is_empty() {
            return Ok(facts);
        }
        self.count("DescribeSnapshots");
        let out = scope
            .ec2
            .describe_snapshots()
            .set_snapshot_ids(Some(snapshots.to_vec()))
            .send()
            .boxed()
            .await
            .map_err(|e| cloud_error("DescribeSnapshots", e))?;
        for s in out.snapshots() {
            let Some(id) = s.snapshot_id() else { continue };
            if let Some(volume) = s.volume_id() {
                facts.volumes.insert(id.to_string(), volume.to_string());
            }
            if s.state() == Some(&aws_sdk_ec2::types::SnapshotState::Completed) {
                facts.completed.insert(id.to_string());
            }
        }
        Ok(facts)
    }
}

/// What EC2 records of an image's snapshots.
#[derive(Debug, Default)]
pub(super) struct SnapshotFacts {
    /// Snapshot id → the volume it was taken from.
    pub(super) volumes: BTreeMap<String, String>,
    /// The snapshots whose state is `completed`.
    pub(super) completed: BTreeSet<String>,
}

/// An instance's status; `None` for one without id, type or state, which EC2 never sends.
pub(super) fn status(i: &aws_sdk_ec2::types::Instance) -> Option<InstanceStatus> {
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
pub(super) fn snapshots(image: &aws_sdk_ec2::types::Image) -> Vec<String> {
    image
        .block_device_mappings()
        .iter()
        .filter_map(BlockDeviceMapping::ebs)
        .filter_map(|e| e.snapshot_id())
        .map(str::to_string)
        .collect()
}

/// The volumes `image`'s EBS mappings restore to: size and type each (a mapping that does
/// not say its type is gp2's, EC2's default for images).
pub(super) fn image_volumes(image: &aws_sdk_ec2::types::Image) -> Vec<crate::fleet::money::Volume> {
    image
        .block_device_mappings()
        .iter()
        .filter_map(BlockDeviceMapping::ebs)
        .filter_map(|e| {
            Some(crate::fleet::money::Volume {
                volume_type: e.volume_type().map_or("gp2", |t| t.as_str()).to_string(),
                size_gib: u64::try_from(e.volume_size()?).ok()?,
            })
        })
        .collect()
}

/// The error of `what` EC2 did not find or did not name in its answer.
pub(super) fn not_found(operation: &'static str, what: &str) -> CloudError {
    CloudError::new(ErrorKind::NotFound, operation, format!("{what} not found"))
}
