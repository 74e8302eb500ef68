//! [`Provider`] on CVM, the Tag API and Cloud Monitor: each method here is the calls it makes.

use super::api::{
    CvmInstance, Dimension, Filter, InstancePage, MonitorData, TagPair, TypeConfigs,
    INSTANCES_PER_CALL, INSTANCES_PER_MONITOR_CALL,
};
use super::client::{Answer, CVM, MONITOR};
use super::{Accepted, TencentProvider};
use crate::cloud::capability::{has, lacks};
use crate::cloud::{
    ActionReport, CloudError, ErrorKind, Failed, GpuReadings, Inventory, Provider, ScopeFailure,
    StopKind, StopReadBack, TypePrice,
};
use crate::fleet::{Billing, Charge, Instance, Sample, StopSaving, StoppedMode};
use chrono::{DateTime, Utc};
use serde_json::{json, Value};
use std::collections::{BTreeMap, BTreeSet, HashMap};

/// What a stop of a subscription instance is refused with, before any call: it is paid for
/// the term whether it runs or not.
fn subscription_no_saving() -> CloudError {
    CloudError::coded(
        ErrorKind::Other,
        "StopInstances",
        "subscription_no_saving",
        "a subscription (PREPAID) instance is paid for its whole term: stopping it saves \
         nothing, so ebb never stops one",
    )
}

/// Listings of a region of several pages read before one is taken as whole.
const LISTINGS: usize = 3;

impl TencentProvider {
    /// Every instance with `filters`. CVM pages by offset, so an instance made or gone while
    /// the pages are read shifts the later pages, and one can be missed: a listing of more than
    /// one page is read again until two in a row hold the same instances, at most
    /// [`LISTINGS`] times; otherwise the region's read failed (unknown means no action).
    async fn describe_all(
        &self,
        region: &str,
        filters: &[Filter],
    ) -> Result<Vec<CvmInstance>, CloudError> {
        let ids = |listed: &[CvmInstance]| -> BTreeSet<String> {
            listed.iter().map(|i| i.instance_id.clone()).collect()
        };
        let mut last = self.describe_pages(region, filters).await?;
        if last.len() < INSTANCES_PER_CALL {
            // Less than a page: one page, one answer.
            return Ok(last);
        }
        for _ in 1..LISTINGS {
            let next = self.describe_pages(region, filters).await?;
            if ids(&next) == ids(&last) {
                return Ok(next);
            }
            last = next;
        }
        Err(CloudError::new(
            ErrorKind::Unanswered,
            "DescribeInstances",
            format!("the region's instances changed while they were listed, {LISTINGS} times in a row: no listing holds them all for sure"),
        ))
    }

    /// Every page of DescribeInstances with `filters`, 100 a page. A page that fails fails the
    /// whole listing: a partial answer is a failed read.
    async fn describe_pages(
        &self,
        region: &str,
        filters: &[Filter],
    ) -> Result<Vec<CvmInstance>, CloudError> {
        let mut listed = Vec::new();
        loop {
            let body = json!({
                "Offset": listed.len(),
                "Limit": INSTANCES_PER_CALL,
                "Filters": filters,
            });
            let page: Answer<InstancePage> = self
                .paced(region, "DescribeInstances", 0, || {
                    self.client
                        .call(CVM, "DescribeInstances", Some(region), &body)
                })
                .await?;
            let got = page.body.instance_set.len();
            listed.extend(page.body.instance_set);
            if listed.len() >= page.body.total_count {
                return Ok(listed);
            }
            if got == 0 {
                return Err(CloudError::new(
                    ErrorKind::Unanswered,
                    "DescribeInstances",
                    format!(
                        "the listing ended after {} of {} instances",
                        listed.len(),
                        page.body.total_count
                    ),
                ));
            }
        }
    }

    /// DescribeInstances of `ids` (100 a call), the ones gone absent.
    async fn describe_ids(
        &self,
        region: &str,
        ids: &[String],
    ) -> Result<Vec<CvmInstance>, CloudError> {
        let mut found = Vec::new();
        for batch in ids.chunks(INSTANCES_PER_CALL) {
            // CVM takes InstanceIds or Filters, never both: the managed tag is checked here.
            let body = json!({ "InstanceIds": batch, "Limit": INSTANCES_PER_CALL });
            let page: Answer<InstancePage> = self
                .paced(region, "DescribeInstances", 0, || {
                    self.client
                        .call(CVM, "DescribeInstances", Some(region), &body)
                })
                .await?;
            found.extend(page.body.instance_set);
        }
        Ok(found)
    }

    /// Whether the listing's management tag is on `instance`.
    fn managed(&self, instance: &CvmInstance) -> bool {
        match &self.settings.managed_tag {
            Some((key, value)) => instance
                .tags
                .iter()
                .flatten()
                .any(|t| &t.key == key && &t.value == value),
            None => true,
        }
    }

    /// One region: every page, then GPU facts for the types not seen before.
    async fn list_region(&self, region: &str) -> Result<Vec<(Instance, Billing)>, CloudError> {
        let filters: Vec<Filter> = self
            .settings
            .managed_tag
            .iter()
            .map(|(key, value)| Filter {
                name: format!("tag:{key}"),
                values: vec![value.clone()],
            })
            .collect();
        let listed = self.describe_all(region, &filters).await?;
        let types: BTreeSet<String> = listed.iter().map(|i| i.instance_type.clone()).collect();
        let gpus = self.gpu_facts(region, types).await;
        Ok(listed
            .iter()
            .filter(|i| self.managed(i))
            .filter_map(|i| {
                let mut instance = i.to_instance(region)?;
                instance.gpus = gpus.get(&i.instance_type).cloned().flatten();
                Some((instance, i.billing()))
            })
            .collect())
    }

    /// GPU facts of `types` in `region`, from the cache or DescribeInstanceTypeConfigs. A
    /// failed lookup leaves them unknown until the next listing: it must not hide the region.
    async fn gpu_facts(
        &self,
        region: &str,
        types: BTreeSet<String>,
    ) -> HashMap<String, Option<crate::fleet::Gpus>> {
        let key = |t: &String| (region.to_string(), t.clone());
        let missing: Vec<String> = {
            let cache = self.gpu_types.lock().expect("type cache poisoned");
            types
                .iter()
                .filter(|t| !cache.contains_key(&key(t)))
                .cloned()
                .collect()
        };
        if !missing.is_empty() {
            let body = json!({ "Filters": [Filter { name: "instance-type".to_string(), values: missing.clone() }] });
            let answer: Result<Answer<TypeConfigs>, CloudError> = self
                .paced(region, "DescribeInstanceTypeConfigs", 0, || {
                    self.client
                        .call(CVM, "DescribeInstanceTypeConfigs", Some(region), &body)
                })
                .await;
            match answer {
                Ok(answer) => {
                    let mut cache = self.gpu_types.lock().expect("type cache poisoned");
                    for t in &missing {
                        cache.insert(key(t), None);
                    }
                    for config in &answer.body.instance_type_config_set {
                        cache.insert(key(&config.instance_type), config.gpus());
                    }
                }
                Err(error) => {
                    tracing::warn!(region, error = %error, "GPU facts unknown for now");
                }
            }
        }
        let cache = self.gpu_types.lock().expect("type cache poisoned");
        types
            .into_iter()
            .map(|t| {
                let gpus = cache.get(&key(&t)).cloned().flatten();
                (t, gpus)
            })
            .collect()
    }

    /// One StopInstances call in stopped mode `mode` (`STOP_CHARGING` or `KEEP_CHARGING`).
    async fn stop_call(
        &self,
        region: &str,
        batch: Vec<String>,
        mode: &'static str,
    ) -> Result<Accepted, CloudError> {
        let body = json!({
            "InstanceIds": batch,
            "StopType": "SOFT_FIRST",
            "StoppedMode": mode,
        });
        let answer: Answer<Value> = self
            .client
            .call(CVM, "StopInstances", Some(region), &body)
            .await?;
        Ok(Accepted {
            request_id: answer.request_id,
            ..Accepted::default()
        })
    }

    /// What each stopped instance's stopped mode says, read back after the stop: whether it
    /// still charges. CVM says it only once the instance has stopped (`NOT_APPLICABLE` while
    /// stopping), so one still stopping, or not read, is read again at a later tick.
    async fn read_back_stops(&self, region: &str, report: &mut ActionReport) {
        let ids: Vec<String> = report.done.iter().map(|d| d.instance.clone()).collect();
        if ids.is_empty() {
            return;
        }
        let found = match self.describe_ids(region, &ids).await {
            Ok(found) => found,
            Err(error) => {
                tracing::warn!(region, error = %error, "cannot read back the stopped mode now");
                Vec::new()
            }
        };
        let modes: HashMap<&str, StoppedMode> = found
            .iter()
            .filter_map(|i| Some((i.instance_id.as_str(), i.billing().stopped_mode?)))
            .collect();
        for done in &mut report.done {
            done.read_back = Some(StopReadBack::of(modes.get(done.instance.as_str()).copied()));
        }
    }
}

impl Provider for TencentProvider {
    lacks!(Resize, resizer);
    lacks!(SpotMoves, spot_moves);
    lacks!(ScalingGroups, groups);
    lacks!(CapacityReservations, capacity_reservations);
    lacks!(TypeCatalogue, type_catalogue);
    lacks!(InstanceMetrics, instance_metrics);
    has!(PriceQuotes, price_quotes);

    /// Every region listed at once; a region that fails is reported and left incomplete.
    async fn instances(&self) -> Inventory {
        let regions = &self.settings.regions;
        let listings =
            futures_util::future::join_all(regions.iter().map(|r| self.list_region(r))).await;
        let mut inventory = Inventory::default();
        let mut known = HashMap::new();
        for (region, listing) in regions.iter().zip(listings) {
            match listing {
                Ok(instances) => {
                    inventory.complete_regions.push(region.clone());
                    for (instance, facts) in instances {
                        known.insert(instance.id.clone(), facts);
                        inventory.instances.push(instance);
                    }
                }
                Err(error) => inventory.failures.push(ScopeFailure {
                    region: region.clone(),
                    account: None,
                    error,
                }),
            }
        }
        // What a failed region listed before stays known: its instances may still be acted on.
        self.known
            .write()
            .expect("instance map poisoned")
            .extend(known);
        inventory
    }

    /// DescribeInstances of `ids`; one gone or no longer managed is absent.
    async fn reread(&self, region: &str, ids: &[String]) -> Result<Vec<Instance>, CloudError> {
        let found = self.describe_ids(region, ids).await?;
        let mut known = self.known.write().expect("instance map poisoned");
        Ok(found
            .iter()
            .filter(|i| self.managed(i))
            .filter_map(|i| {
                known.insert(i.instance_id.clone(), i.billing());
                i.to_instance(region)
            })
            .collect())
    }

    /// GetMonitorData of the GPU metric, ten instances a call.
    async fn gpu_utilisation(
        &self,
        region: &str,
        instances: &[String],
        from: DateTime<Utc>,
        to: DateTime<Utc>,
    ) -> Result<GpuReadings, CloudError> {
        let metric = &self.settings.gpu_metric;
        let at = |t: DateTime<Utc>| t.format("%Y-%m-%dT%H:%M:%S+00:00").to_string();
        let mut readings = GpuReadings::default();
        for chunk in instances.chunks(INSTANCES_PER_MONITOR_CALL) {
            let body = json!({
                "Namespace": metric.namespace,
                "MetricName": metric.name,
                "Period": metric.period.as_secs().max(60),
                "StartTime": at(from),
                "EndTime": at(to),
                "Instances": chunk.iter().map(|id| json!({
                    "Dimensions": [Dimension { name: "InstanceId".to_string(), value: id.clone() }]
                })).collect::<Vec<_>>(),
            });
            let answer: Answer<MonitorData> = self
                .paced(region, "GetMonitorData", 0, || {
                    self.client
                        .call(MONITOR, "GetMonitorData", Some(region), &body)
                })
                .await?;
            for point in answer.body.data_points {
                let Some(id) = point
                    .dimensions
                    .iter()
                    .find(|d| d.name == "InstanceId")
                    .map(|d| d.value.clone())
                else {
                    continue;
                };
                let mut samples: Vec<Sample> = point
                    .timestamps
                    .iter()
                    .zip(&point.values)
                    .filter_map(|(at, percent)| {
                        let at = DateTime::from_timestamp(*at as i64, 0)?;
                        Some(Sample::new(at, *percent))
                    })
                    .collect();
                samples.sort_by_key(|s| s.at);
                readings.samples.insert(id, samples);
            }
        }
        Ok(readings)
    }

    /// On-demand prices from the table; CVM's spot prices are not read (spot rules are AWS's).
    async fn prices(
        &self,
        region: &str,
        types: &[String],
        _now: DateTime<Utc>,
    ) -> Result<Vec<TypePrice>, CloudError> {
        Ok(types
            .iter()
            .map(|t| TypePrice {
                instance_type: t.clone(),
                on_demand: self.settings.on_demand.get(region, t),
                spot_by_zone: BTreeMap::new(),
            })
            .collect())
    }

    /// StopInstances with `StoppedMode=STOP_CHARGING`, 100 a call, then the stopped mode read
    /// back into [`crate::cloud::Done::stopped_mode`]. An instance of a family that cannot stop
    /// without charge is stopped with `KEEP_CHARGING` (the engine decides such a stop only under
    /// `stop.allow_charging_stop`). A subscription instance is refused before any call, as the
    /// engine refuses it; CVM has no hibernation, so one asked for is a plain stop, said so.
    async fn stop(&self, region: &str, ids: &[String], kind: StopKind) -> ActionReport {
        let mut subscriptions = Vec::new();
        let (mut no_charge, mut charging) = (Vec::new(), Vec::new());
        {
            let known = self.known.read().expect("instance map poisoned");
            for id in ids {
                match known.get(id).map(|k| (k.charge, k.stop_saving)) {
                    Some((Charge::Subscription, _)) => subscriptions.push(id.clone()),
                    Some((_, StopSaving::KeepsCharging { .. })) => charging.push(id.clone()),
                    _ => no_charge.push(id.clone()),
                }
            }
        }
        let mut report = ActionReport::default();
        for (ids, mode) in [(no_charge, "STOP_CHARGING"), (charging, "KEEP_CHARGING")] {
            let stopped = self
                .batched(region, "StopInstances", ids, INSTANCES_PER_CALL, |batch| {
                    self.stop_call(region, batch, mode)
                })
                .await;
            report.done.extend(stopped.done);
            report.failed.extend(stopped.failed);
        }
        self.read_back_stops(region, &mut report).await;
        if kind == StopKind::Hibernate {
            for done in &mut report.done {
                let said = done.fallback.take().unwrap_or_default();
                done.fallback = Some(format!("CVM has no hibernation: {said}"));
            }
        }
        let refused = subscription_no_saving();
        report
            .failed
            .extend(subscriptions.into_iter().map(|instance| Failed {
                instance,
                error: refused.clone(),
            }));
        report
    }

    /// StartInstances, 100 a call.
    async fn start(&self, region: &str, ids: &[String]) -> ActionReport {
        self.batched(
            region,
            "StartInstances",
            ids.to_vec(),
            INSTANCES_PER_CALL,
            |batch| async move {
                let body = json!({ "InstanceIds": batch });
                let answer: Answer<Value> = self
                    .client
                    .call(CVM, "StartInstances", Some(region), &body)
                    .await?;
                Ok(Accepted {
                    request_id: answer.request_id,
                    ..Accepted::default()
                })
            },
        )
        .await
    }

    /// TagResources with each instance's six-segment name.
    async fn tag(
        &self,
        region: &str,
        ids: &[String],
        tags: &BTreeMap<String, String>,
    ) -> ActionReport {
        let tags: Vec<TagPair> = tags
            .iter()
            .map(|(k, v)| TagPair {
                tag_key: k.clone(),
                tag_value: v.clone(),
            })
            .collect();
        self.tag_call(region, ids, "TagResources", json!({ "Tags": tags }))
            .await
    }

    /// UnTagResources with each instance's six-segment name, never without keys.
    async fn untag(&self, region: &str, ids: &[String], keys: &[String]) -> ActionReport {
        if keys.is_empty() {
            let error = CloudError::other("UnTagResources", "no tag keys to remove");
            return ActionReport::all_failed(ids, &error);
        }
        self.tag_call(region, ids, "UnTagResources", json!({ "TagKeys": keys }))
            .await
    }
}
