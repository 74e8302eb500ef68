//! The Tencent Cloud provider (`EBB_CLOUD=tencent`): CVM for instances and actions, the Tag
//! API for tags, Cloud Monitor for GPU utilisation, in each region of [`Settings::regions`]
//! (`ap-guangzhou`, `ap-shanghai`, ...).
//!
//! No official Rust SDK exists, so the calls go through a small typed client of Tencent Cloud
//! API 3.0 (`client.rs`) signing with TC3-HMAC-SHA256 (`sign.rs`), with credentials from the
//! environment or the instance's CAM role (`credentials.rs`). Every stop asks for
//! `StoppedMode=STOP_CHARGING` and reads the stopped mode back; a subscription (`PREPAID`)
//! instance is never stopped. Of the capability traits it implements price quotes
//! (`quotes.rs`); for the others (spot moves, scaling groups, reservations, resizes, a type
//! catalogue, instance metrics) it names [`super::Lacks`].
//!
//! `provider.rs` holds the [`super::Provider`] methods; `api.rs` the calls' fields.

mod api;
mod client;
mod credentials;
mod provider;
mod quotes;
mod sign;
mod tags;

pub use credentials::{Keys, WebIdentity};

use super::batches::split_on_failure;
use super::pacing::{Key, Limit, Pacer, Rate, RateLimits};
use super::{ActionReport, CloudError, Done, Failed, PriceTable};
use crate::clock::Clock;
use crate::fleet::{Billing, Gpus};
use client::Client;
use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

/// CVM's, the Tag API's and Cloud Monitor's published limits: 10 calls a second for
/// StartInstances and StopInstances, of at most 100 instances each (so 1000 instances a
/// second), 10 for DescribeInstances and DescribeInstanceTypeConfigs, 20 for the tag calls and
/// GetMonitorData (the other APIs ebb calls).
fn rate_limits() -> RateLimits {
    let calls = |per_second: f64| Limit {
        requests: Rate::of(per_second, per_second),
        instances: None,
    };
    let acting = Limit {
        instances: Some(Rate::of(1000.0, 1000.0)),
        ..calls(10.0)
    };
    RateLimits::new(
        [
            ("StartInstances", acting),
            ("StopInstances", acting),
            ("DescribeInstances", calls(10.0)),
            ("DescribeInstanceTypeConfigs", calls(10.0)),
        ],
        calls(20.0),
    )
}

/// How the Tencent Cloud provider is set up.
#[derive(Debug, Clone)]
pub struct Settings {
    /// Regions to watch (`ap-guangzhou`); at least one.
    pub regions: Vec<String>,
    /// Only instances carrying this tag (key, value) are listed and acted on; `None` lists all.
    pub managed_tag: Option<(String, String)>,
    /// Where every service is asked instead of `SERVICE.tencentcloudapi.com`
    /// (`EBB_TENCENT_ENDPOINT`, for a test double).
    pub endpoint: Option<reqwest::Url>,
    /// The keys to sign with; `None` for the service account's role (`web_identity`), or
    /// else the CAM role of the instance ebb runs on.
    pub keys: Option<Keys>,
    /// On TKE with pod identity: the service account's CAM role and its token.
    pub web_identity: Option<WebIdentity>,
    /// On-demand prices.
    pub on_demand: PriceTable,
    /// The Cloud Monitor metric of GPU utilisation (`GpuUtil` of `QCE/CVM`).
    pub gpu_metric: GpuMetric,
    /// The currency the account is billed in, which CVM's price answers do not name (`CNY` on
    /// the China site, `USD` on the international one).
    pub currency: String,
}

/// The Cloud Monitor metric that holds GPU utilisation.
#[derive(Debug, Clone)]
pub struct GpuMetric {
    /// Its namespace (`QCE/CVM`).
    pub namespace: String,
    /// Its name (`GpuUtil`, reported by the Cloud Monitor agent with the GPU driver).
    pub name: String,
    /// The period of one reading.
    pub period: Duration,
}

impl Default for GpuMetric {
    fn default() -> Self {
        GpuMetric {
            namespace: "QCE/CVM".to_string(),
            name: "GpuUtil".to_string(),
            period: Duration::from_secs(300),
        }
    }
}

/// The time a call may take, queued for its tokens and sent: what an intent waits before its
/// call can no longer be in flight.
pub const CALL_LIMIT: Duration = Duration::from_secs(120);

/// CVM, the Tag API and Cloud Monitor, in several regions of one account.
#[derive(Debug)]
pub struct TencentProvider {
    settings: Settings,
    client: Client,
    pacer: Arc<Pacer>,
    /// How each instance of the last listing is billed, for what a stop of it may do.
    known: RwLock<HashMap<String, Billing>>,
    /// GPU facts by (region, instance type); `None` for types without GPUs.
    gpu_types: Mutex<HashMap<(String, String), Option<Gpus>>>,
    /// The account's UIN, for the six-segment resource names, once asked.
    account: tokio::sync::OnceCell<String>,
}

impl TencentProvider {
    /// Sets up the client with the credentials of the environment or the CAM role.
    pub fn connect(settings: Settings) -> Result<TencentProvider, CloudError> {
        // A region named twice would list every instance twice.
        let mut regions: Vec<String> = Vec::new();
        for region in settings.regions.iter().map(|r| r.trim()) {
            if !region.is_empty() && !regions.iter().any(|r| r == region) {
                regions.push(region.to_string());
            }
        }
        if regions.is_empty() {
            return Err(CloudError::other(
                "configuration",
                "no Tencent Cloud region is configured: set EBB_REGIONS (like ap-guangzhou)",
            ));
        }
        let client = Client::new(
            settings.endpoint.clone(),
            credentials::Source::new(
                settings.keys.clone(),
                settings.web_identity.clone(),
                settings.endpoint.as_ref(),
            ),
        )?;
        Ok(TencentProvider {
            settings: Settings {
                regions,
                ..settings
            },
            client,
            pacer: Arc::new(Pacer::new(rate_limits(), &Clock::System)),
            known: RwLock::default(),
            gpu_types: Mutex::default(),
            account: tokio::sync::OnceCell::new(),
        })
    }

    /// The token buckets its calls wait for.
    pub fn pacer(&self) -> &Arc<Pacer> {
        &self.pacer
    }

    /// `call` for `instances` instances of `region` within `api`'s buckets.
    async fn paced<T, F, Fut>(
        &self,
        region: &str,
        api: &'static str,
        instances: usize,
        call: F,
    ) -> Result<T, CloudError>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T, CloudError>>,
    {
        let key = Key {
            account: None,
            region: region.to_string(),
            api,
        };
        self.pacer.call(&key, instances, call).await
    }

    /// Runs `call` on batches of `ids` of `region`, `size` at a time, each paced and split on
    /// failure (`cloud::batches`).
    async fn batched<F, Fut>(
        &self,
        region: &str,
        api: &'static str,
        ids: Vec<String>,
        size: usize,
        call: F,
    ) -> ActionReport
    where
        F: Fn(Vec<String>) -> Fut,
        Fut: Future<Output = Result<Accepted, CloudError>>,
    {
        let call = &call;
        let paced = |batch: Vec<String>| async move {
            self.paced(region, api, batch.len(), || call(batch.clone()))
                .await
        };
        let accept = |batch: Vec<String>, accepted: Accepted, report: &mut ActionReport| {
            for instance in batch {
                match accepted.refused.get(&instance) {
                    Some(error) => report.failed.push(Failed {
                        instance,
                        error: error.clone(),
                    }),
                    None => report.done.push(Done {
                        instance,
                        request_id: accepted.request_id.clone(),
                        fallback: None,
                        already: false,
                        read_back: None,
                    }),
                }
            }
        };
        split_on_failure(&ids, size, paced, accept).await
    }
}

/// What the service said when it accepted a call for a batch of instances.
#[derive(Debug, Default)]
struct Accepted {
    /// The call's request id.
    request_id: Option<String>,
    /// The instances it still refused, one by one (the Tag API's `FailedResources`).
    refused: HashMap<String, CloudError>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_published_limits() {
        let limits = rate_limits();
        let stop = limits.of("StopInstances");
        assert_eq!(stop.requests.per_second, 10.0);
        assert_eq!(stop.instances.unwrap().per_second, 1000.0);
        assert_eq!(limits.of("TagResources").requests.per_second, 20.0);
    }
}
