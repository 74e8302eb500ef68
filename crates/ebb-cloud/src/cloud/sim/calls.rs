//! How the simulated fleet answers a call that changes instances: metered by EC2's token
//! buckets when it is ([`SimProvider::metered`]: a call over them is refused as a whole with
//! `RequestLimitExceeded`, as EC2 refuses it), then instance by instance. ebb's own pacing
//! ([`SimProvider::paced_by`]) sits on the client side of the same calls, as it does in front of
//! EC2.

use super::{SimProvider, Simulated};
use crate::cloud::pacing::{Bucket, Key, Pacer, RateLimits};
use crate::cloud::{ActionReport, CloudError, Done, ErrorKind, Failed, StopReadBack};
use chrono::{DateTime, Utc};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// Instances per call, as the AWS provider batches them by default.
pub(super) const BATCH: usize = 100;

/// Why EC2 refused an instance: its error code and message.
pub(super) type Refusal = (&'static str, String);

/// The refusal of a change `sim`'s state does not allow.
pub(super) fn wrong_state(sim: &Simulated) -> Refusal {
    (
        "IncorrectInstanceState",
        format!(
            "The instance '{}' is not in a state from which it can be changed ({})",
            sim.instance.id,
            sim.instance.state.as_str()
        ),
    )
}

/// EC2's metering and ebb's pacing of the simulated fleet's calls, each when on.
#[derive(Debug, Default)]
pub(super) struct RateLimited {
    /// EC2's side: calls over the buckets are refused.
    pub(super) metering: Option<Metering>,
    /// ebb's side: calls wait for their tokens.
    pub(super) pacer: Option<Arc<Pacer>>,
}

/// The request bucket and the instance bucket (if the API has one) of one region and API.
type Buckets = (Bucket, Option<Bucket>);

/// EC2's side of the rate limits: a request bucket and, for the APIs metered by instance, an
/// instance bucket, per region and API.
#[derive(Debug)]
pub(super) struct Metering {
    limits: RateLimits,
    buckets: Mutex<HashMap<(String, &'static str), Buckets>>,
}

impl Metering {
    /// EC2 metering calls by `limits`.
    pub(super) fn new(limits: RateLimits) -> Metering {
        Metering {
            limits,
            buckets: Mutex::new(HashMap::new()),
        }
    }

    /// Takes the tokens of a call of `api` on `instances` instances at `at`, or refuses it as
    /// EC2 does when either bucket is short.
    fn admit(
        &self,
        region: &str,
        api: &'static str,
        instances: usize,
        at: DateTime<Utc>,
    ) -> Result<(), CloudError> {
        let now = at.timestamp_micros() as f64 / 1e6;
        let mut buckets = self.buckets.lock().unwrap_or_else(|e| e.into_inner());
        let (requests, per_instance) =
            buckets.entry((region.to_string(), api)).or_insert_with(|| {
                let limit = self.limits.of(api);
                (
                    Bucket::full(limit.requests, now),
                    limit.instances.map(|r| Bucket::full(r, now)),
                )
            });
        let (mut r, mut i) = (requests.clone(), per_instance.clone());
        if r.admit(1.0, now) && i.as_mut().is_none_or(|b| b.admit(instances as f64, now)) {
            (*requests, *per_instance) = (r, i);
            return Ok(());
        }
        Err(CloudError::throttled(api))
    }
}

impl SimProvider {
    /// Applies `change` to each of `ids` in `region`, in calls of [`BATCH`] instances when
    /// metered; unknown ids fail as EC2 fails them, and a call EC2 throttles fails all its ids.
    pub(super) async fn act(
        &self,
        operation: &'static str,
        region: &str,
        ids: &[String],
        mut change: impl FnMut(&mut Simulated, DateTime<Utc>) -> Result<(), Refusal>,
    ) -> ActionReport {
        if self.limited.metering.is_none() {
            return self.answer(operation, region, ids, &mut change);
        }
        let mut report = ActionReport::default();
        for batch in ids.chunks(BATCH) {
            let key = Key {
                account: None,
                region: region.to_string(),
                api: operation,
            };
            let mut metered = || {
                std::future::ready(
                    self.admit(region, operation, batch.len())
                        .map(|()| self.answer(operation, region, batch, &mut change)),
                )
            };
            let answer = match &self.limited.pacer {
                Some(pacer) => pacer.call(&key, batch.len(), metered).await,
                None => metered().await,
            };
            match answer {
                Ok(answer) => {
                    report.done.extend(answer.done);
                    report.failed.extend(answer.failed);
                }
                Err(error) => report.failed.extend(batch.iter().map(|id| Failed {
                    instance: id.clone(),
                    error: error.clone(),
                })),
            }
        }
        report
    }

    /// The tokens of one call, when the fleet is metered.
    pub(super) fn admit(
        &self,
        region: &str,
        api: &'static str,
        instances: usize,
    ) -> Result<(), CloudError> {
        match &self.limited.metering {
            Some(m) => m.admit(region, api, instances, self.clock.now()),
            None => Ok(()),
        }
    }

    /// One call's answer, instance by instance.
    fn answer(
        &self,
        operation: &'static str,
        region: &str,
        ids: &[String],
        change: &mut impl FnMut(&mut Simulated, DateTime<Utc>) -> Result<(), Refusal>,
    ) -> ActionReport {
        let now = self.clock.now();
        let mut fleet = self.fleet();
        fleet.requests += 1;
        let request_id = format!("sim-{:08}", fleet.requests);
        let mut report = ActionReport::default();
        for id in ids {
            let found = fleet
                .by_id
                .get(id)
                .copied()
                .filter(|&i| fleet.instances[i].instance.region == region);
            let result = match found {
                Some(i) => {
                    let sim = &mut fleet.instances[i];
                    sim.advance(now);
                    // What the cloud reports once the stop is through, read back at once.
                    change(sim, now).map(|()| {
                        (operation == "StopInstances")
                            .then(|| StopReadBack::Stopped(sim.stopped_mode()))
                    })
                }
                None => Err((
                    "InvalidInstanceID.NotFound",
                    format!("The instance ID '{id}' does not exist"),
                )),
            };
            match result {
                Ok(read_back) => report.done.push(Done {
                    instance: id.clone(),
                    request_id: Some(request_id.clone()),
                    fallback: None,
                    already: false,
                    read_back,
                }),
                Err((code, message)) => report.failed.push(Failed {
                    instance: id.clone(),
                    error: CloudError::coded(ErrorKind::from_code(code), operation, code, message)
                        .with_request_id(request_id.clone()),
                }),
            }
        }
        report
    }
}
