//! EC2 for the calls that list and act: one scope's listing with its GPU facts, spot price
//! pages, the calls that change instances in batches (split when one id fails), and EC2's
//! instances as ebb sees them.

use super::{cloud_error, once_sent, to_chrono, to_smithy, AwsProvider, Scope};
use crate::cloud::batches::split_on_failure;
use crate::cloud::pacing::Key;
use crate::cloud::{ActionReport, CloudError, Done, StopReadBack, TypePrice};
use crate::fleet::{
    Billing, Gpus, HeldReservation, Instance, InstanceState, Lifecycle, StoppedMode,
};
use aws_sdk_ec2::operation::describe_spot_price_history::builders::DescribeSpotPriceHistoryFluentBuilder;
use aws_sdk_ec2::operation::RequestId;
use aws_sdk_ec2::types::{
    Filter, InstanceLifecycleType, InstanceStateName, InstanceType, SpotPrice,
};
use chrono::{DateTime, NaiveDateTime, Utc};
use futures_util::FutureExt as _;
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::future::Future;
use std::sync::Arc;

/// Instance types per DescribeInstanceTypes call (the API's limit).
const TYPES_PER_CALL: usize = 100;

/// What a hibernation that could not be done says in its place.
pub(super) const NOT_CONFIGURED: &str =
    "hibernation is not configured on this instance (it is set at launch); stopped instead";

impl AwsProvider {
    /// What the listing asks DescribeInstances for: instances not terminated, with the
    /// management tag when one is set.
    pub(super) fn listing_filters(&self) -> Vec<Filter> {
        let mut filters = vec![Filter::builder()
            .name("instance-state-name")
            .set_values(Some(
                ["pending", "running", "stopping", "stopped", "shutting-down"]
                    .map(String::from)
                    .to_vec(),
            ))
            .build()];
        if let Some((key, value)) = &self.settings.managed_tag {
            filters.push(
                Filter::builder()
                    .name(format!("tag:{key}"))
                    .values(value)
                    .build(),
            );
        }
        filters
    }

    /// One account in one region: every page of DescribeInstances, then GPU facts for the
    /// instance types not seen before in the region, then what the capacity reservations held
    /// outside ebb that instances run in are.
    pub(super) async fn list_scope(
        &self,
        scope: &Scope,
    ) -> Result<Vec<(Instance, bool)>, CloudError> {
        let filters = self.listing_filters();
        let mut listed = Vec::new();
        let via_role: Option<Arc<str>> = scope.account.as_deref().map(Arc::from);
        let mut pages = scope
            .ec2
            .describe_instances()
            .set_filters(Some(filters))
            .into_paginator()
            .page_size(self.settings.page_size)
            .send();
        self.count("DescribeInstances");
        while let Some(page) = pages.next().await {
            let page = page.map_err(|e| cloud_error("DescribeInstances", e))?;
            for reservation in page.reservations() {
                for instance in reservation.instances() {
                    if let Some(listed_instance) =
                        from_ec2(&scope.region, via_role.as_ref(), instance)
                    {
                        listed.push(listed_instance);
                    }
                }
            }
            if page.next_token().is_some_and(|t| !t.is_empty()) {
                self.count("DescribeInstances");
            }
        }
        let types: BTreeSet<String> = listed
            .iter()
            .map(|(i, _)| i.instance_type.clone())
            .collect();
        let gpus = self.gpu_facts(scope, types).await;
        for (instance, _) in &mut listed {
            instance.gpus = gpus.get(&instance.instance_type).cloned().flatten();
        }
        let mut instances: Vec<&mut Instance> = listed.iter_mut().map(|(i, _)| i).collect();
        self.read_held_reservations(scope, &mut instances).await;
        Ok(listed)
    }

    /// GPU facts of `types` in the scope's region, from the cache or DescribeInstanceTypes.
    /// A failed lookup leaves the facts unknown until the next listing tries again: it must not
    /// hide the region's instances.
    async fn gpu_facts(
        &self,
        scope: &Scope,
        types: BTreeSet<String>,
    ) -> HashMap<String, Option<Gpus>> {
        let missing: Vec<String> = {
            let cache = self.gpu_types.lock().expect("type cache poisoned");
            types
                .iter()
                .filter(|t| !cache.contains_key(&(scope.region.clone(), (*t).clone())))
                .cloned()
                .collect()
        };
        for chunk in missing.chunks(TYPES_PER_CALL) {
            self.count("DescribeInstanceTypes");
            let answer = match scope
                .ec2
                .describe_instance_types()
                .set_instance_types(Some(
                    chunk
                        .iter()
                        .map(|t| InstanceType::from(t.as_str()))
                        .collect(),
                ))
                .send()
                .boxed()
                .await
            {
                Ok(answer) => answer,
                Err(e) => {
                    let error = cloud_error("DescribeInstanceTypes", e);
                    tracing::warn!(region = %scope.region, error = %error, "GPU facts unknown for now");
                    continue;
                }
            };
            let mut cache = self.gpu_types.lock().expect("type cache poisoned");
            for t in chunk {
                cache.insert((scope.region.clone(), t.clone()), None);
            }
            for info in answer.instance_types() {
                let Some(name) = info.instance_type() else {
                    continue;
                };
                let gpus = info.gpu_info().and_then(|g| {
                    let devices = g.gpus();
                    let count: i32 = devices.iter().filter_map(|d| d.count()).sum();
                    let first = devices.first()?;
                    Some(Gpus {
                        count: u32::try_from(count).unwrap_or(0),
                        model: [first.manufacturer(), first.name()]
                            .into_iter()
                            .flatten()
                            .collect::<Vec<_>>()
                            .join(" "),
                        memory_mib: first
                            .memory_info()
                            .and_then(|m| m.size_in_mib())
                            .and_then(|m| u32::try_from(m).ok())
                            .unwrap_or(0),
                    })
                });
                cache.insert((scope.region.clone(), name.as_str().to_string()), gpus);
            }
        }
        let cache = self.gpu_types.lock().expect("type cache poisoned");
        types
            .into_iter()
            .map(|t| {
                let gpus = cache
                    .get(&(scope.region.clone(), t.clone()))
                    .cloned()
                    .flatten();
                (t, gpus)
            })
            .collect()
    }

    /// One StopInstances call, plain or hibernating, and which of `ids` were stopped already.
    pub(super) async fn stop_call(
        &self,
        scope: &Scope,
        ids: Vec<String>,
        hibernate: bool,
    ) -> Result<Accepted, CloudError> {
        self.count("StopInstances");
        let out = scope
            .ec2
            .stop_instances()
            .set_instance_ids(Some(ids))
            .hibernate(hibernate)
            .customize()
            .config_override(once_sent())
            .send()
            .boxed()
            .await
            .map_err(|e| cloud_error("StopInstances", e))?;
        let mut accepted = Accepted::of(out.request_id());
        // EC2 accepts a stop of a stopped instance, and says so only in its previous state.
        accepted.already = out
            .stopping_instances()
            .iter()
            .filter(|change| {
                change
                    .previous_state()
                    .and_then(|s| s.name())
                    .is_some_and(|s| {
                        matches!(s, InstanceStateName::Stopped | InstanceStateName::Stopping)
                    })
            })
            .filter_map(|change| change.instance_id().map(str::to_string))
            .collect();
        Ok(accepted)
    }

    /// The price of each of `types` in `region` as the on-demand table gives it, without
    /// spot prices yet.
    pub(super) fn price_table(
        &self,
        region: &str,
        types: &[String],
    ) -> BTreeMap<String, TypePrice> {
        types
            .iter()
            .map(|t| {
                (
                    t.clone(),
                    TypePrice {
                        instance_type: t.clone(),
                        on_demand: self.settings.on_demand.get(region, t),
                        spot_by_zone: BTreeMap::new(),
                    },
                )
            })
            .collect()
    }

    /// Runs `call` in batches on `ids` of `region`, each with the clients of the account that
    /// listed it.
    pub(super) async fn in_scopes<'a, F, Fut>(
        &'a self,
        region: &str,
        ids: &[String],
        operation: &'static str,
        call: F,
    ) -> ActionReport
    where
        F: Fn(&'a Scope, Vec<String>) -> Fut,
        Fut: Future<Output = Result<Accepted, CloudError>>,
    {
        let (groups, mut report) = self.group_by_scope(region, ids, operation);
        for (index, ids) in groups {
            let scope = &self.scopes[index];
            report.merge(
                self.batched(scope, operation, ids, |batch| call(scope, batch))
                    .await,
            );
        }
        report
    }

    /// Runs `call` on batches of `ids`, split on failure (`cloud::batches`). Each call waits for
    /// its tokens in the scope's buckets of `operation`.
    pub(super) async fn batched<F, Fut>(
        &self,
        scope: &Scope,
        operation: &'static str,
        ids: Vec<String>,
        call: F,
    ) -> ActionReport
    where
        F: Fn(Vec<String>) -> Fut,
        Fut: Future<Output = Result<Accepted, CloudError>>,
    {
        let key = Key {
            account: scope.account.clone(),
            region: scope.region.clone(),
            api: operation,
        };
        let (key, call) = (&key, &call);
        let paced = |batch: Vec<String>| async move {
            self.pacer
                .call(key, batch.len(), || call(batch.clone()))
                .await
        };
        let accept = |batch: Vec<String>, accepted: Accepted, report: &mut ActionReport| {
            report.done.extend(batch.into_iter().map(|instance| {
                Done {
                    already: accepted.already.contains(&instance),
                    instance,
                    request_id: accepted.request_id.clone(),
                    fallback: None,
                    // EC2 never bills a stopped instance's compute.
                    read_back: (operation == "StopInstances")
                        .then_some(StopReadBack::Stopped(StoppedMode::NoCharge)),
                }
            }))
        };
        split_on_failure(&ids, self.settings.batch_size, paced, accept).await
    }
}

/// What EC2 said when it accepted a call for a batch of instances.
#[derive(Debug, Default)]
pub(super) struct Accepted {
    /// The call's request id.
    request_id: Option<String>,
    /// The instances that were already in the state asked for.
    already: HashSet<String>,
}

impl Accepted {
    /// Accepted with `request_id`, every instance changed.
    pub(super) fn of(request_id: Option<&str>) -> Accepted {
        Accepted {
            request_id: request_id.map(str::to_string),
            already: HashSet::new(),
        }
    }
}

/// An EC2 instance as ebb sees it, listed through `via_role` (`None`: ebb's own credentials),
/// and whether it can hibernate. `None` for an instance without an id, type or state, which
/// EC2 never sends.
pub(super) fn from_ec2(
    region: &str,
    via_role: Option<&Arc<str>>,
    instance: &aws_sdk_ec2::types::Instance,
) -> Option<(Instance, bool)> {
    let state = state_of(instance)?;
    let lifecycle = lifecycle_of(instance);
    let launched_at = instance.launch_time().and_then(to_chrono);
    let state_since = match state {
        // EC2 resets the launch time on every start.
        InstanceState::Pending | InstanceState::Running => launched_at,
        _ => instance.state_transition_reason().and_then(transition_time),
    };
    let hibernation = instance
        .hibernation_options()
        .and_then(|h| h.configured())
        .unwrap_or(false);
    // The reservation a running instance runs in; whose it is and its terms are read after.
    let reservation = matches!(state, InstanceState::Pending | InstanceState::Running)
        .then(|| instance.capacity_reservation_id())
        .flatten()
        .filter(|id| !id.is_empty())
        .map(|id| {
            Box::new(HeldReservation {
                id: id.to_string(),
                terms: None,
            })
        });
    Some((
        Instance {
            id: instance.instance_id()?.to_string(),
            region: region.to_string(),
            instance_type: instance.instance_type()?.as_str().to_string(),
            state,
            state_since,
            lifecycle,
            launched_at,
            tags: instance
                .tags()
                .iter()
                .filter_map(|t| Some((t.key()?.to_string(), t.value().unwrap_or("").to_string())))
                .collect(),
            gpus: None,
            gpu_util: Vec::new(),
            via_role: via_role.cloned(),
            billing: Billing {
                reservation,
                public_ip_from_pool: public_ip_from_pool(instance),
                ..Billing::ec2(state == InstanceState::Stopped)
            },
            private_ip: instance.private_ip_address().and_then(crate::cloud::ip_of),
        },
        hibernation,
    ))
}

/// Whether `instance`'s public IPv4 address is from Amazon's pool (its network interface's
/// association owned by `amazon`), which EC2 gives up at every stop; an Elastic IP is owned by
/// the account, and stays.
fn public_ip_from_pool(instance: &aws_sdk_ec2::types::Instance) -> bool {
    let Some(public) = instance.public_ip_address() else {
        return false;
    };
    instance.network_interfaces().iter().any(|n| {
        n.association()
            .is_some_and(|a| a.public_ip() == Some(public) && a.ip_owner_id() == Some("amazon"))
    })
}

/// An instance's state; `None` for one EC2 never sends.
pub(super) fn state_of(instance: &aws_sdk_ec2::types::Instance) -> Option<InstanceState> {
    Some(match instance.state()?.name()? {
        InstanceStateName::Pending => InstanceState::Pending,
        InstanceStateName::Running => InstanceState::Running,
        InstanceStateName::Stopping => InstanceState::Stopping,
        InstanceStateName::Stopped => InstanceState::Stopped,
        InstanceStateName::ShuttingDown => InstanceState::ShuttingDown,
        InstanceStateName::Terminated => InstanceState::Terminated,
        _ => return None,
    })
}

/// On-demand or spot.
pub(super) fn lifecycle_of(instance: &aws_sdk_ec2::types::Instance) -> Lifecycle {
    match instance.instance_lifecycle() {
        Some(InstanceLifecycleType::Spot) => Lifecycle::Spot,
        _ => Lifecycle::OnDemand,
    }
}

/// The time in a state transition reason, `User initiated (2026-11-30 19:00:05 GMT)`: the
/// only place EC2 says when an instance stopped.
fn transition_time(reason: &str) -> Option<DateTime<Utc>> {
    let inside = reason.rsplit_once('(')?.1.strip_suffix(')')?;
    // EC2 writes GMT; moto, UTC.
    let utc = inside
        .strip_suffix(" GMT")
        .or_else(|| inside.strip_suffix(" UTC"))?;
    let naive = NaiveDateTime::parse_from_str(utc, "%Y-%m-%d %H:%M:%S").ok()?;
    Some(naive.and_utc())
}

/// DescribeSpotPriceHistory of `types` from `now` to `now`: the prices in effect.
pub(super) fn spot_price_request(
    scope: &Scope,
    types: &[String],
    now: DateTime<Utc>,
) -> DescribeSpotPriceHistoryFluentBuilder {
    scope
        .ec2
        .describe_spot_price_history()
        .set_instance_types(Some(
            types
                .iter()
                .map(|t| InstanceType::from(t.as_str()))
                .collect(),
        ))
        .product_descriptions("Linux/UNIX")
        .start_time(to_smithy(now))
        .end_time(to_smithy(now))
}

/// Adds the spot `offers` of one page to `prices`, the newest of each type and zone (`latest`
/// keeps when each was set) winning.
pub(super) fn add_offers(
    offers: &[SpotPrice],
    prices: &mut BTreeMap<String, TypePrice>,
    latest: &mut HashMap<(String, String), DateTime<Utc>>,
) {
    for offer in offers {
        let (Some(ty), Some(zone), Some(price), Some(at)) = (
            offer.instance_type(),
            offer.availability_zone(),
            offer.spot_price().and_then(|p| p.parse::<f64>().ok()),
            offer.timestamp().and_then(to_chrono),
        ) else {
            continue;
        };
        let Some(entry) = prices.get_mut(ty.as_str()) else {
            continue;
        };
        let key = (ty.as_str().to_string(), zone.to_string());
        if latest.get(&key).is_none_or(|seen| at >= *seen) {
            latest.insert(key, at);
            entry.spot_by_zone.insert(zone.to_string(), price);
        }
    }
}

impl ActionReport {
    /// Adds `other`'s instances to these.
    pub(super) fn merge(&mut self, other: ActionReport) {
        self.done.extend(other.done);
        self.failed.extend(other.failed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_stop_time_is_read_from_the_transition_reason() {
        assert_eq!(
            transition_time("User initiated (2026-11-30 19:00:05 GMT)"),
            Some("2026-11-30T19:00:05Z".parse().unwrap())
        );
        assert_eq!(
            transition_time("User initiated (2026-11-30 19:00:05 UTC)"),
            Some("2026-11-30T19:00:05Z".parse().unwrap())
        );
        assert_eq!(transition_time("Server.SpotInstanceTermination"), None);
        assert_eq!(transition_time(""), None);
    }
    /// A running g5.xlarge as DescribeInstances lists it, to add to.
    fn running() -> aws_sdk_ec2::types::builders::InstanceBuilder {
        aws_sdk_ec2::types::Instance::builder()
            .instance_id("i-1")
            .instance_type(aws_sdk_ec2::types::InstanceType::G5Xlarge)
            .state(
                aws_sdk_ec2::types::InstanceState::builder()
                    .name(aws_sdk_ec2::types::InstanceStateName::Running)
                    .build(),
            )
    }

    #[test]
    fn a_private_address_is_kept_only_when_it_is_one() {
        let listed = |ip: &str| {
            let instance = running().private_ip_address(ip).build();
            from_ec2("us-east-1", None, &instance).unwrap().0.private_ip
        };
        assert_eq!(listed(" 10.0.3.17"), "10.0.3.17".parse().ok());
        assert_eq!(listed("fd00::17"), "fd00::17".parse().ok());
        // Never substituted into a Jupyter URL.
        assert_eq!(listed("10.0.3.17:8888/evil"), None);
    }

    #[test]
    fn a_public_address_from_amazons_pool_is_told_apart_from_an_elastic_ip() {
        use aws_sdk_ec2::types::{InstanceNetworkInterface, InstanceNetworkInterfaceAssociation};
        let listed = |owner: &str| {
            let association = InstanceNetworkInterfaceAssociation::builder()
                .public_ip("203.0.113.7")
                .ip_owner_id(owner)
                .build();
            let nic = InstanceNetworkInterface::builder()
                .association(association)
                .build();
            let instance = running()
                .public_ip_address("203.0.113.7")
                .network_interfaces(nic)
                .build();
            let billing = from_ec2("us-east-1", None, &instance).unwrap().0.billing;
            billing.stop_releases_public_ip()
        };
        assert!(listed("amazon"));
        // An Elastic IP: owned by the account, kept at a stop.
        assert!(!listed("123456789012"));
    }
}
