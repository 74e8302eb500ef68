//! The [`Provider`] methods of the Alibaba provider, each the ECS or CloudMonitor calls it
//! makes. It implements no capability trait (`cloud/capability.rs`): it names `Lacks` for
//! each.

use super::client::Product;
use super::ecs::{gpus_of, instance_of, items, outcomes};
use super::{numbered, AlibabaProvider, IDS_PER_CALL, RESOURCES_PER_TAG_CALL};
use crate::cloud::capability::{has, lacks};
use crate::cloud::{
    ActionReport, CloudError, Done, ErrorKind, Failed, GpuReadings, Inventory, Provider,
    ScopeFailure, StopKind, StopReadBack, TypePrice,
};
use crate::fleet::{Cloud, Instance, StopSaving, StoppedMode};
use chrono::{DateTime, Utc};
use serde_json::Value;
use std::collections::{BTreeMap, HashMap};

/// Instance types per DescribeInstanceTypes call: ECS's limit.
const TYPES_PER_CALL: usize = 10;

impl AlibabaProvider {
    /// DescribeInstances with the managed tag, and `extra` parameters, every page: a page that
    /// fails fails the listing.
    async fn describe_instances(
        &self,
        region: &str,
        extra: &[(&str, String)],
    ) -> Result<Vec<Instance>, CloudError> {
        let mut params = BTreeMap::from([
            ("RegionId".to_string(), region.to_string()),
            ("MaxResults".to_string(), IDS_PER_CALL.to_string()),
        ]);
        if let Some((key, value)) = &self.settings.managed_tag {
            params.insert("Tag.1.Key".to_string(), key.clone());
            params.insert("Tag.1.Value".to_string(), value.clone());
        }
        for (k, v) in extra {
            params.insert((*k).to_string(), v.clone());
        }
        let mut found = Vec::new();
        loop {
            let page = self
                .call(Product::Ecs, region, "DescribeInstances", &params)
                .await?;
            found.extend(
                items(&page, "Instances", "Instance")
                    .iter()
                    .filter_map(|v| instance_of(region, v)),
            );
            match page.get("NextToken").and_then(Value::as_str) {
                Some(next) if !next.is_empty() => {
                    params.insert("NextToken".to_string(), next.to_string());
                }
                _ => return Ok(found),
            }
        }
    }

    /// `ids` of `region` as DescribeInstances lists them now, with the listing's tag filter.
    async fn describe_ids(
        &self,
        region: &str,
        ids: &[String],
    ) -> Result<Vec<Instance>, CloudError> {
        let mut found = Vec::with_capacity(ids.len());
        for batch in ids.chunks(IDS_PER_CALL) {
            let list = Value::from(batch.to_vec()).to_string();
            found.extend(
                self.describe_instances(region, &[("InstanceIds", list)])
                    .await?,
            );
        }
        Ok(found)
    }

    /// Sets each instance's GPUs from DescribeInstanceTypes, each type read once and kept; a
    /// type that cannot be read is left without GPUs, and asked again next time.
    async fn fill_gpus(&self, region: &str, instances: &mut [Instance]) {
        let missing: Vec<String> = {
            let known = self.gpus.lock().expect("GPU cache poisoned");
            let mut types: Vec<String> = instances
                .iter()
                .map(|i| i.instance_type.clone())
                .filter(|t| !known.contains_key(t))
                .collect();
            types.sort_unstable();
            types.dedup();
            types
        };
        for batch in missing.chunks(TYPES_PER_CALL) {
            let params = numbered(None, "InstanceTypes", batch);
            match self
                .call(Product::Ecs, region, "DescribeInstanceTypes", &params)
                .await
            {
                Ok(answer) => {
                    let mut known = self.gpus.lock().expect("GPU cache poisoned");
                    for (ty, gpus) in items(&answer, "InstanceTypes", "InstanceType")
                        .iter()
                        .filter_map(gpus_of)
                    {
                        known.insert(ty, gpus);
                    }
                }
                Err(error) => {
                    tracing::warn!(region, error = %error, "cannot read the GPUs of instance types")
                }
            }
        }
        let known = self.gpus.lock().expect("GPU cache poisoned");
        for i in instances {
            i.gpus = known.get(&i.instance_type).cloned().flatten();
        }
    }

    /// One StartInstances or StopInstances call on `batch` (`BatchOptimization=SuccessFirst`:
    /// each instance answered apart) into `report`. An error of the whole call fails the
    /// batch with it (unanswered stays unanswered: the outcome is resolved later).
    async fn batch_call(
        &self,
        region: &str,
        action: &'static str,
        batch: &[String],
        extra: &[(&str, &str)],
        report: &mut ActionReport,
    ) {
        let mut params = numbered(Some(region), "InstanceId", batch);
        params.insert("BatchOptimization".to_string(), "SuccessFirst".to_string());
        for (k, v) in extra {
            params.insert((*k).to_string(), (*v).to_string());
        }
        let answer = match self.call(Product::Ecs, region, action, &params).await {
            Ok(answer) => answer,
            Err(error) => {
                report
                    .failed
                    .extend(ActionReport::all_failed(batch, &error).failed);
                return;
            }
        };
        let request_id = answer
            .get("RequestId")
            .and_then(Value::as_str)
            .map(str::to_string);
        let answered: HashMap<String, Option<(String, String)>> =
            outcomes(&answer).into_iter().collect();
        for id in batch {
            match answered.get(id) {
                Some(None) => report.done.push(Done {
                    instance: id.clone(),
                    request_id: request_id.clone(),
                    fallback: None,
                    already: false,
                    read_back: None,
                }),
                Some(Some((code, message))) => report.failed.push(Failed {
                    instance: id.clone(),
                    error: CloudError {
                        request_id: request_id.clone(),
                        ..CloudError::coded(super::client::kind_of(code), action, code, message)
                    }
                    .from_cloud(Cloud::Alibaba),
                }),
                // Accepted as a whole, but silent on this one: what became of it is unknown.
                None => report.failed.push(Failed {
                    instance: id.clone(),
                    error: CloudError {
                        request_id: request_id.clone(),
                        ..CloudError::new(
                            ErrorKind::Unanswered,
                            action,
                            "the answer does not mention this instance",
                        )
                    }
                    .from_cloud(Cloud::Alibaba),
                }),
            }
        }
    }
}

impl Provider for AlibabaProvider {
    lacks!(Resize, resizer);
    lacks!(SpotMoves, spot_moves);
    lacks!(ScalingGroups, groups);
    lacks!(CapacityReservations, capacity_reservations);
    lacks!(TypeCatalogue, type_catalogue);
    lacks!(InstanceMetrics, instance_metrics);
    has!(PriceQuotes, price_quotes);

    /// DescribeInstances with the managed tag in every region, every page; a region whose
    /// listing fails is left out of the complete regions.
    async fn instances(&self) -> Inventory {
        let mut inventory = Inventory::default();
        for region in &self.settings.regions {
            match self.describe_instances(region, &[]).await {
                Ok(mut found) => {
                    self.fill_gpus(region, &mut found).await;
                    inventory.instances.extend(found);
                    inventory.complete_regions.push(region.clone());
                }
                Err(error) => inventory.failures.push(ScopeFailure {
                    region: region.clone(),
                    account: None,
                    error,
                }),
            }
        }
        inventory
    }

    async fn reread(&self, region: &str, ids: &[String]) -> Result<Vec<Instance>, CloudError> {
        self.describe_ids(region, ids).await
    }

    async fn gpu_utilisation(
        &self,
        region: &str,
        instances: &[String],
        from: DateTime<Utc>,
        to: DateTime<Utc>,
    ) -> Result<GpuReadings, CloudError> {
        self.read_gpus(region, instances, from, to).await
    }

    /// No prices: they serve the spot rule, and ebb has no spot moves on this cloud.
    async fn prices(
        &self,
        _region: &str,
        _types: &[String],
        _now: DateTime<Utc>,
    ) -> Result<Vec<TypePrice>, CloudError> {
        Ok(Vec::new())
    }

    /// StopInstances, at most 100 a call, in the no-charge mode (`StoppedMode=StopCharging`);
    /// an instance of a family that cannot stop without charge (which the engine lets through
    /// only under `stop.allow_charging_stop`) is stopped in `KeepCharging`, and a subscription
    /// is refused before the call. ECS has no hibernation: a hibernation is a stop, said as a
    /// fallback. Each stopped instance's mode is read back after the call.
    async fn stop(&self, region: &str, ids: &[String], kind: StopKind) -> ActionReport {
        let listed = match self.describe_ids(region, ids).await {
            Ok(listed) => listed,
            Err(error) => return ActionReport::all_failed(ids, &error),
        };
        let by_id: HashMap<&str, &Instance> = listed.iter().map(|i| (i.id.as_str(), i)).collect();
        let mut report = ActionReport::default();
        let (mut no_charge, mut charging) = (Vec::new(), Vec::new());
        for id in ids {
            let refusal = |message: &str| Failed {
                instance: id.clone(),
                error: CloudError::new(ErrorKind::Other, "StopInstances", message),
            };
            match by_id.get(id.as_str()) {
                None => report.failed.push(Failed {
                    instance: id.clone(),
                    error: CloudError::not_found(
                        "StopInstances",
                        "InvalidInstanceId.NotFound",
                        format!("instance {id} is gone or no longer managed"),
                    ),
                }),
                Some(i) if i.billing.charge == crate::fleet::Charge::Subscription => {
                    report.failed.push(refusal(
                        "a subscription instance: a stop saves nothing, so ebb does not stop it",
                    ))
                }
                Some(i) if matches!(i.billing.stop_saving, StopSaving::KeepsCharging { .. }) => {
                    charging.push(id.clone())
                }
                Some(_) => no_charge.push(id.clone()),
            }
        }
        for (group, mode) in [(no_charge, "StopCharging"), (charging, "KeepCharging")] {
            for batch in group.chunks(IDS_PER_CALL) {
                let extra = [("StoppedMode", mode), ("ForceStop", "false")];
                self.batch_call(region, "StopInstances", batch, &extra, &mut report)
                    .await;
            }
        }
        // The mode each stop took, as ECS reports it once the instance has stopped; one still
        // stopping, or not read, is read again at a later tick.
        let stopped: Vec<String> = report.done.iter().map(|d| d.instance.clone()).collect();
        let modes: HashMap<String, StoppedMode> = match self.describe_ids(region, &stopped).await {
            Ok(found) => found
                .into_iter()
                .filter_map(|i| Some((i.id, i.billing.stopped_mode?)))
                .collect(),
            Err(error) => {
                tracing::warn!(region, error = %error, "cannot read back the stopped mode now");
                HashMap::new()
            }
        };
        for d in &mut report.done {
            d.read_back = Some(StopReadBack::of(modes.get(&d.instance).copied()));
            if kind == StopKind::Hibernate {
                d.fallback = Some("Alibaba Cloud ECS does not hibernate: stopped".to_string());
            }
        }
        report
    }

    /// StartInstances, at most 100 a call.
    async fn start(&self, region: &str, ids: &[String]) -> ActionReport {
        let mut report = ActionReport::default();
        for batch in ids.chunks(IDS_PER_CALL) {
            self.batch_call(region, "StartInstances", batch, &[], &mut report)
                .await;
        }
        report
    }

    /// TagResources, 50 instances a call; a call succeeds or fails for all of them.
    async fn tag(
        &self,
        region: &str,
        ids: &[String],
        tags: &BTreeMap<String, String>,
    ) -> ActionReport {
        let mut report = ActionReport::default();
        for batch in ids.chunks(RESOURCES_PER_TAG_CALL) {
            let mut params = numbered(Some(region), "ResourceId", batch);
            params.insert("ResourceType".to_string(), "instance".to_string());
            for (n, (k, v)) in tags.iter().enumerate() {
                params.insert(format!("Tag.{}.Key", n + 1), k.clone());
                params.insert(format!("Tag.{}.Value", n + 1), v.clone());
            }
            self.whole_call(region, "TagResources", batch, &params, &mut report)
                .await;
        }
        report
    }

    /// UntagResources, 50 instances a call.
    async fn untag(&self, region: &str, ids: &[String], keys: &[String]) -> ActionReport {
        let mut report = ActionReport::default();
        for batch in ids.chunks(RESOURCES_PER_TAG_CALL) {
            let mut params = numbered(Some(region), "ResourceId", batch);
            params.insert("ResourceType".to_string(), "instance".to_string());
            for (n, k) in keys.iter().enumerate() {
                params.insert(format!("TagKey.{}", n + 1), k.clone());
            }
            self.whole_call(region, "UntagResources", batch, &params, &mut report)
                .await;
        }
        report
    }
}

impl AlibabaProvider {
    /// A call that succeeds or fails for all of `batch` at once (the tag calls).
    async fn whole_call(
        &self,
        region: &str,
        action: &'static str,
        batch: &[String],
        params: &BTreeMap<String, String>,
        report: &mut ActionReport,
    ) {
        match self.call(Product::Ecs, region, action, params).await {
            Ok(answer) => {
                let request_id = answer
                    .get("RequestId")
                    .and_then(Value::as_str)
                    .map(str::to_string);
                report.done.extend(batch.iter().map(|id| Done {
                    instance: id.clone(),
                    request_id: request_id.clone(),
                    fallback: None,
                    already: false,
                    read_back: None,
                }));
            }
            Err(error) => report
                .failed
                .extend(ActionReport::all_failed(batch, &error).failed),
        }
    }
}
