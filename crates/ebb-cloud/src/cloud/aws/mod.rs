//! The AWS provider: EC2 for instances, prices and actions, CloudWatch for GPU utilisation,
//! Auto Scaling for the groups ebb manages, EKS for those that are managed node groups'.
//!
//! It watches every region in [`Settings::regions`], in ebb's own account and in each account
//! reached by assuming a role in [`Settings::role_arns`]. Credentials come from the standard AWS
//! chain (environment, profile, SSO, web identity, container and instance roles). The SDK
//! retries throttling (`RequestLimitExceeded`) and 5xx answers with exponential backoff and
//! jitter; what still fails becomes a [`CloudError`] with its AWS code.
//!
//! `provider.rs` holds the [`super::Provider`] methods, each the calls it makes; the files by
//! API hold what they share.
//!
//! Every request is awaited boxed (`.send().boxed()`): an SDK request's future is tens of
//! kilobytes in a debug build, and held by value it would swell every future above it (a
//! provider call, a migration step, a tick) and the poll frames of each on the thread's stack,
//! which overflowed tokio's and the tests' 2 MiB stacks.

mod artifacts;
mod attached;
mod capabilities;
pub mod catalogue;
mod ec2;
mod errors;
mod groups;
mod held_reservations;
mod instance_metrics;
mod metrics;
mod node_groups;
mod placement;
mod provider;
mod reservations;
mod spot;
mod spot_moves;
pub mod warnings;

use super::pacing::{Pacer, RateLimits};
use super::{ActionReport, CloudError, PriceTable};
use crate::clock::Clock;
use crate::fleet::Gpus;
use aws_config::retry::RetryConfig;
use aws_config::sts::AssumeRoleProvider;
use aws_config::timeout::TimeoutConfig;
use aws_config::{BehaviorVersion, ConfigLoader, Region, SdkConfig};
use chrono::{DateTime, Utc};
use errors::{cloud_error, once_sent};
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

/// How the AWS provider is set up.
#[derive(Debug, Clone)]
pub struct Settings {
    /// Regions to watch; empty means the SDK's configured region.
    pub regions: Vec<String>,
    /// Roles to assume for other accounts, beside ebb's own.
    pub role_arns: Vec<String>,
    /// Only instances carrying this tag (key, value) are listed and acted on; `None` lists all.
    /// `deploy/iam-policy.json` allows changes only on instances carrying it.
    pub managed_tag: Option<(String, String)>,
    /// Instances per DescribeInstances page (5 to 1000).
    pub page_size: i32,
    /// Instances per StopInstances / StartInstances / CreateTags call.
    pub batch_size: usize,
    /// Where the GPU utilisation metric is.
    pub gpu_metric: GpuMetric,
    /// On-demand prices.
    pub on_demand: PriceTable,
    /// Attempts per call, the first included, for throttling and 5xx answers.
    pub max_attempts: u32,
    /// How long a call may take.
    pub timeouts: Timeouts,
    /// EC2's rate limits, which ebb paces its calls by (`EBB_EC2_RATE_LIMITS`).
    pub rate_limits: RateLimits,
}

/// How long an AWS call may take, set on every SDK client: without them, a call across a
/// network partition waits for the kernel's retransmission timeout, and the tick with it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timeouts {
    /// Opening the connection (10 s).
    pub connect: Duration,
    /// One attempt, from sending the request to the whole answer (30 s: above SQS's 20 s long
    /// poll and a DescribeInstances page of 1000 instances).
    pub attempt: Duration,
    /// The whole call, retries and their backoff included (2 minutes).
    pub operation: Duration,
}

impl Default for Timeouts {
    fn default() -> Self {
        Timeouts {
            connect: Duration::from_secs(10),
            attempt: Duration::from_secs(30),
            operation: Duration::from_secs(120),
        }
    }
}

impl Timeouts {
    /// The SDK's form of these limits.
    pub fn config(&self) -> TimeoutConfig {
        TimeoutConfig::builder()
            .connect_timeout(self.connect)
            .operation_attempt_timeout(self.attempt)
            .operation_timeout(self.operation)
            .build()
    }
}

/// The CloudWatch metric that holds GPU utilisation.
#[derive(Debug, Clone)]
pub struct GpuMetric {
    /// Its namespace (`CWAgent`).
    pub namespace: String,
    /// Its name (`nvidia_smi_utilization_gpu`).
    pub name: String,
    /// The period of one reading; its `Maximum` over an instance's GPUs is the reading.
    pub period: Duration,
}

impl Default for GpuMetric {
    fn default() -> Self {
        GpuMetric {
            namespace: "CWAgent".to_string(),
            name: "nvidia_smi_utilization_gpu".to_string(),
            period: Duration::from_secs(300),
        }
    }
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            regions: Vec::new(),
            role_arns: Vec::new(),
            managed_tag: Some(("ebb:managed".to_string(), "true".to_string())),
            page_size: 1000,
            batch_size: 100,
            gpu_metric: GpuMetric::default(),
            on_demand: PriceTable::default(),
            max_attempts: 5,
            timeouts: Timeouts::default(),
            rate_limits: RateLimits::default(),
        }
    }
}

/// The clients for one account in one region.
#[derive(Debug, Clone)]
pub struct Scope {
    /// The region.
    pub region: String,
    /// The role assumed to reach the account, or `None` for ebb's own credentials.
    pub account: Option<String>,
    /// EC2.
    pub ec2: aws_sdk_ec2::Client,
    /// CloudWatch.
    pub cloudwatch: aws_sdk_cloudwatch::Client,
    /// Auto Scaling.
    pub autoscaling: aws_sdk_autoscaling::Client,
    /// EKS, for the managed node groups.
    pub eks: aws_sdk_eks::Client,
}

/// What the provider remembers of an instance from the last listing.
#[derive(Debug, Clone, Copy)]
struct Known {
    /// Index into `scopes`.
    scope: usize,
    /// Whether it was launched with hibernation configured.
    hibernation: bool,
    /// How many GPUs its type has, when known: how many GPUs' readings make its count of
    /// busy GPUs.
    gpus: Option<u32>,
}

/// EC2 and CloudWatch, in several regions and accounts.
#[derive(Debug)]
pub struct AwsProvider {
    settings: Settings,
    scopes: Vec<Scope>,
    known: RwLock<HashMap<String, Known>>,
    /// The scope (index into `scopes`) that listed each Auto Scaling group, by region and name.
    groups: RwLock<HashMap<(String, String), usize>>,
    /// GPU facts by (region, instance type); `None` for types without GPUs.
    gpu_types: Mutex<HashMap<(String, String), Option<Gpus>>>,
    /// Each instance's volumes and Elastic IPs, when last read in full (`attached.rs`).
    attached: Mutex<HashMap<String, (tokio::time::Instant, crate::fleet::money::Attached)>>,
    calls: Mutex<BTreeMap<&'static str, u64>>,
    /// The token buckets its calls that change something wait for.
    pacer: Arc<Pacer>,
}

impl AwsProvider {
    /// The time limits of its calls.
    pub fn timeouts(&self) -> Timeouts {
        self.settings.timeouts
    }

    /// The token buckets its calls wait for.
    pub fn pacer(&self) -> &Arc<Pacer> {
        &self.pacer
    }
}

/// `names` trimmed, without blanks and repeats, in their first order: a region or role named
/// twice would list every instance twice, and each would get two decisions.
fn distinct(names: &[String]) -> Vec<String> {
    let mut seen = std::collections::HashSet::new();
    names
        .iter()
        .map(|n| n.trim().to_string())
        .filter(|n| !n.is_empty() && seen.insert(n.clone()))
        .collect()
}

impl AwsProvider {
    /// Sets up clients from the standard credential chain: one per region, and one per region
    /// for each role to assume.
    pub async fn connect(settings: Settings) -> Result<AwsProvider, CloudError> {
        AwsProvider::connect_from(settings, aws_config::defaults(BehaviorVersion::latest())).await
    }

    /// Sets up clients as [`AwsProvider::connect`] does, from `loader` (the standard chain, or
    /// one pointed at another endpoint), with the retries and timeouts of `settings` on top.
    pub async fn connect_from(
        settings: Settings,
        loader: ConfigLoader,
    ) -> Result<AwsProvider, CloudError> {
        let retry = RetryConfig::standard()
            .with_max_attempts(settings.max_attempts)
            .with_initial_backoff(Duration::from_millis(500))
            .with_max_backoff(Duration::from_secs(20));
        let base = loader
            .retry_config(retry)
            .timeout_config(settings.timeouts.config())
            .load()
            .await;
        let regions = distinct(&settings.regions);
        let regions = if regions.is_empty() {
            let region = base.region().ok_or_else(|| {
                let message = "no AWS region is configured: set EBB_REGIONS or AWS_REGION";
                CloudError::other("configuration", message)
            })?;
            vec![region.to_string()]
        } else {
            regions
        };
        let mut accounts: Vec<(Option<String>, SdkConfig)> = vec![(None, base.clone())];
        for arn in distinct(&settings.role_arns) {
            let role = AssumeRoleProvider::builder(arn.clone())
                .session_name("ebb")
                .region(Region::new(regions[0].clone()))
                .configure(&base)
                .build()
                .await;
            let config = base
                .to_builder()
                .credentials_provider(aws_sdk_ec2::config::SharedCredentialsProvider::new(role))
                .build();
            accounts.push((Some(arn), config));
        }
        let mut scopes = Vec::new();
        for region in &regions {
            for (account, config) in &accounts {
                let region_config = config
                    .to_builder()
                    .region(Region::new(region.clone()))
                    .build();
                scopes.push(Scope {
                    region: region.clone(),
                    account: account.clone(),
                    ec2: aws_sdk_ec2::Client::new(&region_config),
                    cloudwatch: aws_sdk_cloudwatch::Client::new(&region_config),
                    autoscaling: aws_sdk_autoscaling::Client::new(&region_config),
                    eks: aws_sdk_eks::Client::new(&region_config),
                });
            }
        }
        Ok(AwsProvider::from_scopes(settings, scopes))
    }

    /// A provider over clients built elsewhere (tests build them against an emulator or mocks).
    pub fn from_scopes(settings: Settings, scopes: Vec<Scope>) -> AwsProvider {
        AwsProvider {
            pacer: Arc::new(Pacer::new(settings.rate_limits.clone(), &Clock::System)),
            settings,
            scopes,
            known: RwLock::default(),
            groups: RwLock::default(),
            gpu_types: Mutex::default(),
            attached: Mutex::default(),
            calls: Mutex::default(),
        }
    }

    /// How many calls of each API operation the provider has made (retries not counted).
    pub fn calls(&self) -> BTreeMap<&'static str, u64> {
        self.calls.lock().expect("call counter poisoned").clone()
    }

    fn count(&self, operation: &'static str) {
        *self
            .calls
            .lock()
            .expect("call counter poisoned")
            .entry(operation)
            .or_default() += 1;
    }

    /// The scopes of `region`, ebb's own account first.
    fn scopes_in<'a>(&'a self, region: &'a str) -> impl Iterator<Item = (usize, &'a Scope)> {
        self.scopes
            .iter()
            .enumerate()
            .filter(move |(_, s)| s.region == region)
    }

    /// Groups `ids` by the scope that listed them; ids never listed go to ebb's own account in
    /// `region`. Ids in no watched scope come back as the error.
    fn group_by_scope(
        &self,
        region: &str,
        ids: &[String],
        operation: &'static str,
    ) -> (BTreeMap<usize, Vec<String>>, ActionReport) {
        let known = self.known.read().expect("instance map poisoned");
        let home = self.scopes_in(region).map(|(i, _)| i).next();
        let mut groups: BTreeMap<usize, Vec<String>> = BTreeMap::new();
        let mut report = ActionReport::default();
        for id in ids {
            match known.get(id).map(|k| k.scope).or(home) {
                Some(scope) => groups.entry(scope).or_default().push(id.clone()),
                None => report.failed.push(super::Failed {
                    instance: id.clone(),
                    error: CloudError::other(
                        operation,
                        format!("region {region} is not watched; add it to EBB_REGIONS"),
                    ),
                }),
            }
        }
        (groups, report)
    }
}

/// EC2's tags as a map.
fn tag_map(tags: &[aws_sdk_ec2::types::Tag]) -> BTreeMap<String, String> {
    tags.iter()
        .filter_map(|t| Some((t.key()?.to_string(), t.value().unwrap_or("").to_string())))
        .collect()
}

/// An SDK time as a chrono one.
fn to_chrono(t: &aws_sdk_ec2::primitives::DateTime) -> Option<DateTime<Utc>> {
    DateTime::from_timestamp(t.secs(), t.subsec_nanos())
}

/// A chrono time as an SDK one.
fn to_smithy(t: DateTime<Utc>) -> aws_sdk_ec2::primitives::DateTime {
    aws_sdk_ec2::primitives::DateTime::from_secs_and_nanos(
        t.timestamp(),
        t.timestamp_subsec_nanos(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

    fn deploy(file: &str) -> Value {
        // The repository's deploy/, two levels above this crate.
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../deploy")
            .join(file);
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
    }

    #[test]
    fn the_agent_configuration_publishes_what_ebb_reads() {
        let agent = deploy("cloudwatch-agent.json");
        let metric = GpuMetric::default();
        let metrics = &agent["metrics"];
        assert_eq!(metrics["namespace"], Value::String(metric.namespace));
        assert_eq!(
            metrics["append_dimensions"]["InstanceId"],
            "${aws:InstanceId}"
        );
        // The busiest GPU and the memory by instance; each GPU by instance and index.
        for dimensions in [
            serde_json::json!(["InstanceId"]),
            serde_json::json!(["InstanceId", "index"]),
        ] {
            assert!(metrics["aggregation_dimensions"]
                .as_array()
                .unwrap()
                .contains(&dimensions));
        }
        let measured = metrics["metrics_collected"]["nvidia_gpu"]["measurement"]
            .as_array()
            .unwrap();
        // The agent names nvidia_gpu measurements `nvidia_smi_<measurement>`.
        for read in [metric.name.as_str(), "nvidia_smi_memory_used"] {
            assert!(
                measured
                    .iter()
                    .any(|m| format!("nvidia_smi_{}", m.as_str().unwrap()) == read),
                "{read}"
            );
        }
    }
}
