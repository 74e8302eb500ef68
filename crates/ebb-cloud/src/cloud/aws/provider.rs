//! [`Provider`] on EC2 and CloudWatch: each method here is the calls it makes. What several
//! share is in the files by concern: `ec2.rs` (scopes, batches), `metrics.rs` (CloudWatch
//! pages), `spot.rs` and `artifacts.rs` (migrations' requests and answers).

use super::ec2::{add_offers, from_ec2, spot_price_request, Accepted, NOT_CONFIGURED};
use super::metrics::{calls, gpu_queries};
use super::{cloud_error, once_sent, AwsProvider, Known};
use crate::cloud::capability::{has, lacks};
use crate::cloud::Resize;
use crate::cloud::{
    ActionReport, CloudError, ErrorKind, Failed, GpuReadings, Inventory, Provider, ScopeFailure,
    StopKind, TypePrice,
};
use crate::fleet::Instance;
use aws_sdk_ec2::operation::RequestId;
use aws_sdk_ec2::types::{AttributeValue, Filter, Tag};
use chrono::{DateTime, Utc};
use futures_util::FutureExt as _;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

/// Instance ids per DescribeInstances filter (EC2 takes at most 200 values in one filter).
const IDS_PER_CALL: usize = 200;

impl Provider for AwsProvider {
    has!(Resize, resizer);
    has!(SpotMoves, spot_moves);
    has!(ScalingGroups, groups);
    has!(CapacityReservations, capacity_reservations);
    has!(TypeCatalogue, type_catalogue);
    has!(InstanceMetrics, instance_metrics);
    lacks!(PriceQuotes, price_quotes);

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
    /// filters: an instance gone, terminated or no longer managed is absent. The capacity
    /// reservations held outside ebb that they run in are read as the listing reads them.
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
                let mut batch: Vec<Instance> = listed
                    .filter_map(|i| from_ec2(region, via_role.as_ref(), i))
                    .map(|(i, _)| i)
                    .collect();
                // As the listing has them, so that an outcome says what the stop was.
                let mut refs: Vec<&mut Instance> = batch.iter_mut().collect();
                self.read_held_reservations(scope, &mut refs).await;
                found.extend(batch);
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
}

impl Resize for AwsProvider {
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
}
