//! The Alibaba Cloud provider: ECS for instances and actions, CloudMonitor for GPU utilisation.
//!
//! No official Rust SDK exists, so ebb makes the RPC calls itself: signed with
//! ACS3-HMAC-SHA256 (`sign.rs`), sent over reqwest (`client.rs`), with credentials from an
//! AccessKey or the instance's RAM role (`credentials.rs`), read into ebb's instances
//! (`ecs.rs`) and GPU readings (`metrics.rs`). `provider.rs` holds the [`super::Provider`]
//! methods. Every stop asks for the no-charge mode (`StoppedMode=StopCharging`) and reads back
//! the mode the instance took. Of the capability traits it implements price quotes
//! (`quotes.rs`, DescribePrice); for the others (spot moves, scaling groups, reservations,
//! resizes, a type catalogue, instance metrics) it names [`super::Lacks`], so the engine plans
//! none of those here.
//!
//! It is tested against a fake written from Alibaba's documentation (`tests/common/alibaba_fake.rs`),
//! not against Alibaba Cloud.

mod client;
mod credentials;
mod ecs;
mod metrics;
mod provider;
mod quotes;
pub mod sign;

pub use credentials::{CredentialSource, Credentials, OidcRole};

use super::pacing::{Key, Limit, Pacer, Rate, RateLimits};
use super::CloudError;
use crate::clock::Clock;
use crate::fleet::Gpus;
use chrono::Utc;
use client::{Client, Product};
use credentials::Keyring;
use serde_json::Value;
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Instances per StartInstances, StopInstances or DescribeInstances call: ECS's limit.
pub const IDS_PER_CALL: usize = 100;

/// Resources per TagResources or UntagResources call: ECS's limit.
const RESOURCES_PER_TAG_CALL: usize = 50;

/// How the Alibaba provider is set up.
#[derive(Debug, Clone)]
pub struct Settings {
    /// Regions to watch (`cn-hangzhou`, ...).
    pub regions: Vec<String>,
    /// Only instances carrying this tag (key, value) are listed and acted on; `None` lists all.
    pub managed_tag: Option<(String, String)>,
    /// Where the credentials come from.
    pub credentials: CredentialSource,
    /// Every API at this base URL instead of Alibaba's endpoints (`EBB_ALIBABA_ENDPOINT`: a
    /// test's fake).
    pub endpoint: Option<reqwest::Url>,
    /// How long a call may take.
    pub timeout: Duration,
    /// The rate limits ebb paces its calls by.
    pub rate_limits: RateLimits,
}

impl Settings {
    /// Settings for `regions`, listing what carries `managed_tag`, with `credentials`, and the
    /// defaults.
    pub fn new(
        regions: Vec<String>,
        managed_tag: Option<(String, String)>,
        credentials: CredentialSource,
    ) -> Settings {
        Settings {
            regions,
            managed_tag,
            credentials,
            endpoint: None,
            timeout: Duration::from_secs(30),
            rate_limits: rate_limits(),
        }
    }
}

/// The limits ebb paces Alibaba calls by, per account, region and API. ECS throttles each API
/// in each region of an account on its own and shows the thresholds only in Quota Center
/// ("API Rate Limits"), so ebb stays well under what accounts are given: 5 calls a second
/// (bursts of 10) for each action, 10 (bursts of 20) for DescribeInstances; CloudMonitor
/// publishes 50 a second for DescribeMetricList, of which ebb takes 20. A throttled call
/// (`Throttling.*`) halves its bucket's rate, as on EC2.
pub fn rate_limits() -> RateLimits {
    let limit = |burst, per_second| Limit {
        requests: Rate::of(burst, per_second),
        instances: None,
    };
    RateLimits::new(
        [
            ("DescribeInstances", limit(20.0, 10.0)),
            ("DescribeInstanceTypes", limit(20.0, 10.0)),
            ("DescribeMetricList", limit(20.0, 20.0)),
        ],
        limit(10.0, 5.0),
    )
}

/// The Alibaba Cloud provider.
pub struct AlibabaProvider {
    settings: Settings,
    client: Client,
    pacer: Arc<Pacer>,
    /// GPUs by instance type and region (DescribeInstanceTypes), read once per type.
    gpus: Mutex<HashMap<String, Option<Gpus>>>,
}

impl std::fmt::Debug for AlibabaProvider {
    fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.debug_struct("AlibabaProvider")
            .field("settings", &self.settings)
            .finish_non_exhaustive()
    }
}

impl AlibabaProvider {
    /// A provider with `settings`, its calls paced on `clock`'s time.
    pub fn connect(settings: Settings, clock: Clock) -> Result<AlibabaProvider, CloudError> {
        let http = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(10))
            .timeout(settings.timeout)
            .build()
            .map_err(|e| CloudError::other("connect", e.to_string()))?;
        let keyring = Keyring::new(settings.credentials.clone(), http.clone());
        let client = Client::new(http, keyring, settings.endpoint.clone());
        let pacer = Arc::new(Pacer::new(settings.rate_limits.clone(), &clock));
        Ok(AlibabaProvider {
            settings,
            client,
            pacer,
            gpus: Mutex::new(HashMap::new()),
        })
    }

    /// The pacer its calls wait in.
    pub fn pacer(&self) -> &Arc<Pacer> {
        &self.pacer
    }

    /// How long a call may take.
    pub fn timeout(&self) -> Duration {
        self.settings.timeout
    }

    /// Calls `action` of `product` in `region` within its bucket, for `instances` instances.
    async fn call(
        &self,
        product: Product,
        region: &str,
        action: &'static str,
        params: &BTreeMap<String, String>,
    ) -> Result<Value, CloudError> {
        let key = Key {
            account: None,
            region: region.to_string(),
            api: action,
        };
        self.pacer
            .call(&key, 1, || {
                // Signed at the real time, whatever time ebb decides for (`tick --at`): the
                // service refuses a request dated more than 15 minutes off.
                self.client
                    .call(product, region, action, params, Utc::now())
            })
            .await
    }
}

/// `RegionId`, when the action takes one (`region`; DescribeInstanceTypes does not), and the
/// numbered list `name.1`, `name.2`, ... of `values`.
fn numbered(region: Option<&str>, name: &str, values: &[String]) -> BTreeMap<String, String> {
    let mut params = BTreeMap::new();
    if let Some(region) = region {
        params.insert("RegionId".to_string(), region.to_string());
    }
    for (i, v) in values.iter().enumerate() {
        params.insert(format!("{name}.{}", i + 1), v.clone());
    }
    params
}
