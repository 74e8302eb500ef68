//! [`Provider`] on EC2 and CloudWatch: each method here is the calls it makes. What several
//! share is in the files by concern: `ec2.rs` (scopes, batches), `metrics.rs` (CloudWatch
//! pages), `spot.rs` and `artifacts.rs` (migrations' requests and answers).

use super::ec2::{add_offers, from_ec2, spot_price_request, Accepted, NOT_CONFIGURED};
use super::metrics::{calls, gpu_queries};
use super::spot::{launch_spec_of, not_found, run_request, snapshots, status, Placement};
use super::{cloud_error, once_sent, tag_map, AwsProvider, Known};
use crate::cloud::pacing::Key;
use crate::cloud::{
    ActionReport, Artifact, CloudError, ErrorKind, Failed, GpuReadings, Image, ImageMade,
    ImageState, InstanceStatus, Inventory, Launch, LaunchSpec, NodeGroupUpdate, PlacementScores,
    Provider, Reservation, ReservationRequest, ScopeFailure, StopKind, TypePrice,
};
use crate::fleet::{Capacity, Instance, NodeGroup, ScalingGroup, TypeFacts};
use aws_sdk_ec2::operation::RequestId;
use aws_sdk_ec2::types::{AttributeValue, Filter, ImageState as Ec2ImageState, Tag};
use chrono::{DateTime, Utc};
use futures_util::FutureExt as _;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

/// Instance ids per DescribeInstances filter (EC2 takes at most 200 values in one filter).
const IDS_PER_CALL: usize = 200;

impl Provider for AwsProvider {
    /// From the first region's scope: the types are the same in every region that offers them.
    async fn instance_types(&self) -> Result<BTreeMap<String, TypeFacts>, CloudError> {
        let Some(scope) = self.scopes.first() else {
            return Ok(BTreeMap::new());
        };
        self.count("DescribeInstanceTypes");
        super::catalogue::describe_families(&scope.ec2).await
    }

    /// Every scope listed at once; a scope that fails is reported and leaves its region
    /// incomplete.
    async fn instances(&self) -> Inventory {
        let listings =
            futures_util::future::join_all(self.scopes.iter().map(|s| self.list_with_attached(s)))
                .await;
        let mut inventory = Inventory::default();
        let mut known = HashMap::new();
        let mut incomplete = BTreeSet::new();
        let mut failed_scopes = BTreeSet::new();
        let mut listed_twice = 0usize;
        for (index, (scope, (listing, attached))) in self.scopes.iter().zip(listings).enumerate() {
            inventory.attached.extend(attached);
            match listing {
                Ok(instances) => {
                    for (instance, hibernation) in instances {
                        // One instance, one decision: a role into ebb's own account lists
                        // what ebb's own credentials list. The first scope (ebb's own account
                        // comes first in each region) keeps it.
                        if known.contains_key(&instance.id) {
                            listed_twice += 1;
                            continue;
                        }
                        known.insert(
                            instance.id.clone(),
                            Known {
                                scope: index,
                                hibernation,
                                gpus: instance.gpus.as_ref().map(|g| g.count),
                            },
                        );
                        inventory.instances.push(instance);
                    }
                }
                Err(error) => {
                    failed_scopes.insert(index);
                    incomplete.insert(scope.region.clone());
                    inventory.failures.push(ScopeFailure {
                        region: scope.region.clone(),
                        account: scope.account.clone(),
                        error,
                    });
                }
            }
        }
        if listed_twice > 0 {
            tracing::warn!(
                listed_twice,
                "instances listed by more than one account scope were kept once: is one of \
                 EBB_ROLE_ARNS a role into ebb's own account?"
            );
        }
        let mut regions: Vec<String> = self.scopes.iter().map(|s| s.region.clone()).collect();
        regions.dedup();
        inventory.complete_regions = regions
            .into_iter()
            .filter(|r| !incomplete.contains(r))
            .collect();
        let mut map = self.known.write().expect("instance map poisoned");
        // Keep what failed scopes listed before: their instances may still be acted on.
        map.retain(|_, k| failed_scopes.contains(&k.scope));
        map.extend(known);
        inventory
    }

    /// DescribeInstances of `ids`, by the account that listed each, with the listing's
    /// filters: an instance gone, terminated or no longer managed is absent.
    async fn reread(&self, region: &str, ids: &[String]) -> Result<Vec<Instance>, CloudError> {
        let (groups, unwatched) = self.group_by_scope(region, ids, "DescribeInstances");
        if let Some(failed) = unwatched.failed.into_iter().next() {
            return Err(failed.error);
        }
        let mut found = Vec::with_capacity(ids.len());
        for (index, ids) in groups {
            let scope = &self.scopes[index];
            let via_role: Option<Arc<str>> = scope.account.as_deref().map(Arc::from);
            for batch in ids.chunks(IDS_PER_CALL) {
                let mut filters = self.listing_filters();
                filters.push(
                    Filter::builder()
                        .name("instance-id")
                        .set_values(Some(batch.to_vec()))
                        .build(),
                );
                self.count("DescribeInstances");
                let out = scope
                    .ec2
                    .describe_instances()
                    .set_filters(Some(filters))
                    .send()
                    .boxed()
                    .await
                    .map_err(|e| cloud_error("DescribeInstances", e))?;
                let listed = out.reservations().iter().flat_map(|r| r.instances());
                found.extend(
                    listed
                        .filter_map(|i| from_ec2(region, via_role.as_ref(), i))
                        .map(|(i, _)| i),
                );
            }
        }
        Ok(found)
    }

    /// GetMetricData, up to 500 queries a call (two an instance, and one a GPU of an instance
    /// with several), with the clients of the account that listed each.
    async fn gpu_utilisation(
        &self,
        region: &str,
        instances: &[String],
        from: DateTime<Utc>,
        to: DateTime<Utc>,
    ) -> Result<GpuReadings, CloudError> {
        let (groups, unwatched) = self.group_by_scope(region, instances, "GetMetricData");
        if let Some(failed) = unwatched.failed.into_iter().next() {
            return Err(failed.error);
        }
        let metric = &self.settings.gpu_metric;
        let period = i32::try_from(metric.period.as_secs())
            .unwrap_or(300)
            .max(60);
        let mut readings = GpuReadings::default();
        for (index, ids) in groups {
            let cloudwatch = &self.scopes[index].cloudwatch;
            let targets = self.gpu_targets(ids);
            for chunk in calls(&targets) {
                let queries = gpu_queries(metric, period, chunk);
                self.read_metric_pages(cloudwatch, queries, chunk, (from, to), &mut readings)
                    .await?;
            }
        }
        Ok(readings)
    }

    /// Spot prices now in every zone (DescribeSpotPriceHistory from now to now returns the
    /// price in effect), with on-demand prices from the table.
    async fn prices(
        &self,
        region: &str,
        types: &[String],
        now: DateTime<Utc>,
    ) -> Result<Vec<TypePrice>, CloudError> {
        let mut prices = self.price_table(region, types);
        let Some((_, scope)) = self.scopes_in(region).next() else {
            return Ok(prices.into_values().collect());
        };
        let mut latest = HashMap::new();
        let mut token: Option<String> = None;
        loop {
            self.count("DescribeSpotPriceHistory");
            let page = spot_price_request(scope, types, now)
                .set_next_token(token.take())
                .send()
                .boxed()
                .await
                .map_err(|e| cloud_error("DescribeSpotPriceHistory", e))?;
            add_offers(page.spot_price_history(), &mut prices, &mut latest);
            match page.next_token() {
                Some(next) if !next.is_empty() => token = Some(next.to_string()),
                _ => break,
            }
        }
        Ok(prices.into_values().collect())
    }

    /// StopInstances in batches; a hibernation hibernates the instances launched with
    /// hibernation configured, and stops plainly the others and those EC2 still refuses to
    /// hibernate, saying so.
    async fn stop(&self, region: &str, ids: &[String], kind: StopKind) -> ActionReport {
        let (groups, mut report) = self.group_by_scope(region, ids, "StopInstances");
        for (index, ids) in groups {
            let scope = &self.scopes[index];
            let (hibernating, plain): (Vec<String>, Vec<String>) = match kind {
                StopKind::Hibernate => {
                    let known = self.known.read().expect("instance map poisoned");
                    ids.into_iter()
                        .partition(|id| known.get(id).is_some_and(|k| k.hibernation))
                }
                StopKind::Stop => (Vec::new(), ids),
            };
            let mut stopped = self
                .batched(scope, "StopInstances", plain, |batch| {
                    self.stop_call(scope, batch, false)
                })
                .await;
            if kind == StopKind::Hibernate {
                for done in &mut stopped.done {
                    done.fallback = Some(NOT_CONFIGURED.to_string());
                }
            }
            report.merge(stopped);
            let hibernated = self
                .batched(scope, "StopInstances", hibernating, |batch| {
                    self.stop_call(scope, batch, true)
                })
                .await;
            report.done.extend(hibernated.done);
            // EC2 can still refuse a hibernation (an instance that cannot hibernate yet):
            // stop those plainly, and say so.
            let (refused, failed): (Vec<Failed>, Vec<Failed>) = hibernated
                .failed
                .into_iter()
                .partition(|f| f.error.kind == ErrorKind::HibernationUnsupported);
            report.failed.extend(failed);
            let reasons: HashMap<String, String> = refused
                .iter()
                .map(|f| (f.instance.clone(), f.error.message.clone()))
                .collect();
            let mut retried = self
                .batched(
                    scope,
                    "StopInstances",
                    refused.into_iter().map(|f| f.instance).collect(),
                    |batch| self.stop_call(scope, batch, false),
                )
                .await;
            for done in &mut retried.done {
                done.fallback = Some(format!(
                    "EC2 refused to hibernate it ({}); stopped instead",
                    reasons[&done.instance]
                ));
            }
            report.merge(retried);
        }
        report
    }

    /// StartInstances in batches.
    async fn start(&self, region: &str, ids: &[String]) -> ActionReport {
        self.in_scopes(region, ids, "StartInstances", |scope, batch| async move {
            self.count("StartInstances");
            let out = scope
                .ec2
                .start_instances()
                .set_instance_ids(Some(batch))
                .customize()
                .config_override(once_sent())
                .send()
                .boxed()
                .await
                .map_err(|e| cloud_error("StartInstances", e))?;
            Ok(Accepted::of(out.request_id()))
        })
        .await
    }

    /// ModifyInstanceAttribute of the instance type, with the clients of the account that
    /// listed it.
    async fn set_type(&self, region: &str, id: &str, instance_type: &str) -> ActionReport {
        let ids = [id.to_string()];
        self.in_scopes(
            region,
            &ids,
            "ModifyInstanceAttribute",
            |scope, batch| async move {
                self.count("ModifyInstanceAttribute");
                let out = scope
                    .ec2
                    .modify_instance_attribute()
                    .set_instance_id(batch.into_iter().next())
                    .instance_type(AttributeValue::builder().value(instance_type).build())
                    .customize()
                    .config_override(once_sent())
                    .send()
                    .boxed()
                    .await
                    .map_err(|e| cloud_error("ModifyInstanceAttribute", e))?;
                Ok(Accepted::of(out.request_id()))
            },
        )
        .await
    }

    /// CreateTags in batches.
    async fn tag(
        &self,
        region: &str,
        ids: &[String],
        tags: &BTreeMap<String, String>,
    ) -> ActionReport {
        let tags: Vec<Tag> = tags
            .iter()
            .map(|(k, v)| Tag::builder().key(k).value(v).build())
            .collect();
        self.in_scopes(region, ids, "CreateTags", |scope, batch| {
            let tags = tags.clone();
            async move {
                self.count("CreateTags");
                let out = scope
                    .ec2
                    .create_tags()
                    .set_resources(Some(batch))
                    .set_tags(Some(tags))
                    .customize()
                    .config_override(once_sent())
                    .send()
                    .boxed()
                    .await
                    .map_err(|e| cloud_error("CreateTags", e))?;
                Ok(Accepted::of(out.request_id()))
            }
        })
        .await
    }

    /// DeleteTags in batches, never without keys.
    async fn untag(&self, region: &str, ids: &[String], keys: &[String]) -> ActionReport {
        // DeleteTags naming no keys deletes every tag, ebb:managed and people's own with them
        // (deploy/iam-policy.json refuses it too).
        if keys.is_empty() {
            let error = CloudError::other(
                "DeleteTags",
                "no tag keys to remove: DeleteTags without keys removes every tag",
            );
            return ActionReport::all_failed(ids, &error);
        }
        let tags: Vec<Tag> = keys.iter().map(|k| Tag::builder().key(k).build()).collect();
        self.in_scopes(region, ids, "DeleteTags", |scope, batch| {
            let tags = tags.clone();
            async move {
                self.count("DeleteTags");
                let out = scope
                    .ec2
                    .delete_tags()
                    .set_resources(Some(batch))
                    .set_tags(Some(tags))
                    .customize()
                    .config_override(once_sent())
                    .send()
                    .boxed()
                    .await
                    .map_err(|e| cloud_error("DeleteTags", e))?;
                Ok(Accepted::of(out.request_id()))
            }
        })
        .await
    }

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

    /// CancelCapacityReservation (`reservations.rs`).
    async fn cancel_reservation(
        &self,
        region: &str,
        instance: &str,
        reservation: &str,
    ) -> Result<(), CloudError> {
        self.cancel(region, instance, reservation).await
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
