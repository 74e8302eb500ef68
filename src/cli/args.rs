//! The command line's flags and arguments, and how they become the library's values.

pub(super) use super::db::DbArgs;
use super::policy_files;
use super::store_clock::{parse_future, parse_past, Future, Past};
use crate::cloud::aws;
use crate::cloud::pacing::{Pacer, RateLimits};
use crate::cloud::{PriceTable, Provider};
use crate::control::Tasks;
use crate::reconcile::{Options, Pacing, PolicySource, Reconciler};
use crate::store::{AuditFilter, Outcome, Store};
use crate::webhook::{Poster, Webhook};
use crate::{engine, fleet, policy, snapshot, webhook, when};
use anyhow::{Context as _, Result};
use chrono::{DateTime, Utc};
use clap::{Args, ValueEnum};
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;

/// Where the policies are.
#[derive(Args)]
pub(super) struct PolicyDirs {
    /// Policy directories or files (repeatable).
    #[arg(
        long = "policies",
        value_name = "DIR",
        required = true,
        env = "EBB_POLICIES",
        value_delimiter = ','
    )]
    pub(super) policies: Vec<PathBuf>,
}

/// What a reconcile pass acts on, and how.
#[derive(Args)]
pub(super) struct ReconcileArgs {
    #[command(flatten)]
    pub(super) policies: PolicyDirs,
    /// Decide and audit, but change nothing.
    #[arg(long, env = "EBB_DRY_RUN", help_heading = "Acting")]
    pub(super) dry_run: bool,
    /// At most this many actions a tick (starts, then notices, then stops); the rest wait.
    #[arg(
        long,
        env = "EBB_MAX_ACTIONS_PER_TICK",
        value_name = "N",
        help_heading = "Acting"
    )]
    pub(super) max_actions: Option<usize>,
    /// How long a tick may run before it is abandoned (real time, also under a simulated
    /// clock). Under `serve`, the leader is not ready after three tick intervals without a
    /// completed tick, and not alive (/healthz fails) after twice this and an interval.
    #[arg(long, env = "EBB_TICK_DEADLINE", default_value = "5m", value_parser = parse_deadline,
          help_heading = "Acting")]
    pub(super) tick_deadline: std::time::Duration,
    /// Post notices (Slack-compatible JSON) to this URL.
    #[arg(
        long,
        env = "EBB_WEBHOOK_URL",
        value_name = "URL",
        hide_env_values = true,
        help_heading = "Notices"
    )]
    pub(super) webhook_url: Option<reqwest::Url>,
    /// The shape of the webhook's posts: plain ({"text": ...}, which Slack's and Mattermost's
    /// hooks take), slack (Block Kit, the snooze links as buttons), feishu, dingtalk or wecom
    /// (their bots' text messages).
    #[arg(long, env = "EBB_WEBHOOK_FORMAT", value_enum, default_value_t = WebhookFormat::Plain,
          help_heading = "Notices")]
    pub(super) webhook_format: WebhookFormat,
    /// The address people reach this ebb's console at (https://ebb.example.com): each notice
    /// then carries signed links that keep the instance with one click.
    #[arg(
        long,
        env = "EBB_PUBLIC_URL",
        value_name = "URL",
        help_heading = "Notices"
    )]
    pub(super) public_url: Option<reqwest::Url>,
    #[command(flatten)]
    pub(super) cloud: CloudArgs,
    #[command(flatten)]
    pub(super) gpu_source: super::gpu_source::GpuSourceArgs,
    #[command(flatten)]
    pub(super) db: DbArgs,
}

/// How long notices still queued may take to post before the process exits.
pub(super) const WEBHOOK_DRAIN: std::time::Duration = std::time::Duration::from_secs(30);

impl ReconcileArgs {
    /// The reconciler over `store` and `cloud` (connected from [`ReconcileArgs::cloud`]), and
    /// the webhook poster to drain before exit. Webhook notices are reported into `tasks`.
    /// `time_given`: the ticks' time is set by hand (`ebb tick --at`), not the system clock's.
    pub(super) fn reconciler<P: Provider>(
        self,
        store: Store,
        cloud: Connected<P>,
        tasks: Tasks,
        time_given: bool,
    ) -> Result<(Reconciler<P>, Option<Poster>)> {
        let (webhook, poster) = self
            .webhook_url
            .map(|url| Webhook::start_as(url, self.webhook_format.into(), tasks))
            .unzip();
        // A call of a tick ends by the tick's deadline and the call's own time limit. The
        // simulated fleet acts in memory, at once: nothing of it is ever in flight.
        let in_flight = cloud.call_limit.map_or(std::time::Duration::ZERO, |limit| {
            self.tick_deadline + limit
        });
        let in_flight_for =
            chrono::Duration::from_std(in_flight).context("the tick deadline is too long")?;
        let timers = self.cloud.timers(cloud.call_limit, time_given);
        // Half the deadline for waiting on EC2's token buckets leaves the rest for the tick.
        let pacing = cloud.pacer.map(|pacer| Pacing {
            pacer,
            within: self.tick_deadline / 2,
            batch: aws::Settings::default().batch_size,
        });
        let options = Options {
            dry_run: self.dry_run,
            max_actions: self.max_actions,
            webhook,
            public_url: self.public_url,
            in_flight_for,
            timers,
            pacing,
            prices: Arc::new(price_table(
                self.cloud.prices.prices.as_deref(),
                &self.cloud.choice.cloud,
            )?),
            jupyter: Some(self.gpu_source.jupyter()?),
            prometheus: self.gpu_source.prometheus()?,
        };
        let policies = Arc::new(PolicySource::new(self.policies.policies));
        Ok((
            Reconciler::new(cloud.provider, store, policies, options),
            poster,
        ))
    }
}

/// `EBB_WEBHOOK_FORMAT`.
#[derive(Clone, Copy, ValueEnum)]
pub(super) enum WebhookFormat {
    /// `{"text": ...}`.
    Plain,
    /// Slack's Block Kit.
    Slack,
    /// A Feishu (Lark) custom bot's text message.
    Feishu,
    /// A DingTalk custom robot's text message.
    Dingtalk,
    /// A WeCom (企业微信) group robot's text message.
    Wecom,
}

impl From<WebhookFormat> for webhook::Format {
    fn from(format: WebhookFormat) -> Self {
        match format {
            WebhookFormat::Plain => webhook::Format::Plain,
            WebhookFormat::Slack => webhook::Format::Slack,
            WebhookFormat::Feishu => webhook::Format::Feishu,
            WebhookFormat::Dingtalk => webhook::Format::Dingtalk,
            WebhookFormat::Wecom => webhook::Format::Wecom,
        }
    }
}

/// Reads a tick deadline: a duration above zero.
fn parse_deadline(s: &str) -> Result<std::time::Duration, String> {
    match humantime::parse_duration(s) {
        Ok(d) if !d.is_zero() => Ok(d),
        Ok(_) => Err("a tick needs some time: give a duration above zero, like 5m".to_string()),
        Err(e) => Err(format!(
            "\"{s}\" is not a duration ({e}): write it like 5m or 300s"
        )),
    }
}

/// A provider as connected, with what a reconciler needs to know of it.
pub(super) struct Connected<P> {
    /// The provider.
    pub(super) provider: P,
    /// How long one of its calls may take, by its own time limits; `None` when it acts at once
    /// (the simulated fleet, in memory), so that nothing of it is ever in flight.
    pub(super) call_limit: Option<std::time::Duration>,
    /// The token buckets its calls wait for, when it paces them.
    pub(super) pacer: Option<Arc<Pacer>>,
}

/// Which cloud: `EBB_CLOUD`.
#[derive(Args, Clone)]
pub(super) struct CloudChoiceArg {
    /// The cloud: aws, alibaba, tencent (Tencent Cloud CVM), or sim:FLEET_FILE (a simulated
    /// fleet seeded from a fleet snapshot, whose on-demand prices also fill in what --prices
    /// lacks).
    #[arg(long, env = "EBB_CLOUD", default_value = "aws", value_parser = parse_cloud)]
    pub(super) cloud: CloudChoice,
}

/// The price table: `EBB_PRICES`.
#[derive(Args, Clone)]
pub(super) struct PricesArg {
    /// The price table (see deploy/prices.yaml): the on-demand prices spot rules compare spot
    /// prices against (without one, spot rules move nothing), stopped hours are priced at and
    /// ebb replay costs the types its fleet file has no price for at; commitment rates, the
    /// commitments held and what a stopped box still pays.
    #[arg(long, env = "EBB_PRICES", value_name = "FILE")]
    pub(super) prices: Option<PathBuf>,
}

/// The address of `ebb serve`'s API: `EBB_LISTEN`.
#[derive(Args, Clone, Copy)]
pub(super) struct ListenArg {
    /// The HTTP API's and the web console's address (ebb ready asks it).
    #[arg(
        long,
        env = "EBB_LISTEN",
        default_value = "127.0.0.1:8080",
        help_heading = "API and console"
    )]
    pub(super) listen: std::net::SocketAddr,
}

/// The longest override: `EBB_MAX_OVERRIDE`.
#[derive(Args, Clone, Copy)]
pub(super) struct MaxOverrideArg {
    /// The longest an override may last.
    #[arg(long, env = "EBB_MAX_OVERRIDE", default_value = "7d", value_parser = humantime::parse_duration,
          help_heading = "Overrides")]
    pub(super) max_override: std::time::Duration,
}

/// The key instances' heartbeat tokens are made with: `EBB_HEARTBEAT_KEY_FILE`.
#[derive(Args, Clone)]
pub(super) struct HeartbeatKeyArg {
    /// A file holding the key instances' heartbeat tokens are made with (`ebb heartbeat-token`):
    /// with it, POST /v1/instances/{id}/activity keeps a heartbeat for the idle rule's heartbeat
    /// signal.
    #[arg(
        long,
        env = "EBB_HEARTBEAT_KEY_FILE",
        value_name = "FILE",
        help_heading = "API and console"
    )]
    pub(super) heartbeat_key_file: Option<std::path::PathBuf>,
}

impl HeartbeatKeyArg {
    /// The key, when a file is given.
    pub(super) fn key(&self) -> anyhow::Result<Option<crate::api::HeartbeatKey>> {
        let key = self.heartbeat_key_file.as_deref();
        let key = key.map(crate::api::HeartbeatKey::from_file).transpose();
        key.map_err(anyhow::Error::msg)
    }
}

/// Where ebb looks in the cloud.
#[derive(Args, Clone)]
#[command(next_help_heading = "Cloud")]
pub(super) struct CloudArgs {
    #[command(flatten)]
    pub(super) choice: CloudChoiceArg,
    /// Regions to watch, comma-separated (default: the AWS SDK's region).
    #[arg(
        long,
        env = "EBB_REGIONS",
        value_delimiter = ',',
        value_name = "REGION"
    )]
    pub(super) regions: Vec<String>,
    /// Roles to assume to reach other accounts, comma-separated ARNs.
    #[arg(long, env = "EBB_ROLE_ARNS", value_delimiter = ',', value_name = "ARN")]
    pub(super) role_arns: Vec<String>,
    /// Only instances with this tag (KEY=VALUE), or `none` for every instance.
    #[arg(long, env = "EBB_MANAGED_TAG", default_value = "ebb:managed=true", value_parser = parse_managed_tag)]
    pub(super) managed_tag: ManagedTag,
    #[command(flatten)]
    pub(super) prices: PricesArg,
    /// EC2's rate limits ebb paces its calls by, where the account's differ from EC2's
    /// defaults: API=BURST/RATE[:BURST/RATE] (requests, then instances), comma-separated.
    #[arg(long, env = "EBB_EC2_RATE_LIMITS", default_value = "", value_name = "LIMITS", value_parser = parse_rate_limits)]
    pub(super) ec2_rate_limits: RateLimits,
    /// With --cloud tencent: the address every Tencent Cloud API is asked at instead of
    /// SERVICE.tencentcloudapi.com (a test double on this machine).
    #[arg(long, env = "EBB_TENCENT_ENDPOINT", value_name = "URL")]
    pub(super) tencent_endpoint: Option<reqwest::Url>,
    /// With --cloud tencent: the currency the account is billed in, which CVM's price
    /// answers do not name: CNY on the China site, USD on the international one.
    #[arg(long, env = "EBB_TENCENT_CURRENCY", default_value = "CNY", value_name = "CODE", value_parser = parse_currency)]
    pub(super) tencent_currency: String,
    /// With --cloud tencent: the secret id (without it and the key, the CAM role of the
    /// instance ebb runs on).
    #[arg(long, env = "TENCENTCLOUD_SECRET_ID", hide_env_values = true)]
    pub(super) tencent_secret_id: Option<String>,
    /// With --cloud tencent: the secret key of the secret id.
    #[arg(long, env = "TENCENTCLOUD_SECRET_KEY", hide_env_values = true)]
    pub(super) tencent_secret_key: Option<String>,
    /// With --cloud tencent: the session token of temporary keys (STS).
    #[arg(long, env = "TENCENTCLOUD_SESSION_TOKEN", hide_env_values = true)]
    pub(super) tencent_session_token: Option<String>,
    /// With --cloud tencent on TKE with pod identity: the CAM role of ebb's service account,
    /// assumed with its OIDC token (set by TKE with the next three).
    #[arg(long, env = "TKE_ROLE_ARN", value_name = "ARN")]
    pub(super) tke_role_arn: Option<String>,
    /// With --cloud tencent on TKE with pod identity: the identity provider's name in CAM.
    #[arg(long, env = "TKE_PROVIDER_ID", value_name = "ID")]
    pub(super) tke_provider_id: Option<String>,
    /// With --cloud tencent on TKE with pod identity: the file the OIDC token is mounted at.
    #[arg(long, env = "TKE_WEB_IDENTITY_TOKEN_FILE", value_name = "FILE")]
    pub(super) tke_web_identity_token_file: Option<PathBuf>,
    /// With --cloud tencent on TKE with pod identity: the region the STS call names.
    #[arg(long, env = "TKE_REGION", value_name = "REGION")]
    pub(super) tke_region: Option<String>,
    #[command(flatten)]
    pub(super) alibaba: super::alibaba_args::AlibabaArgs,
}

fn parse_rate_limits(s: &str) -> Result<RateLimits, String> {
    s.parse()
}

/// A cloud provider to connect to.
#[derive(Clone)]
pub(super) enum CloudChoice {
    /// EC2 and CloudWatch, with the AWS credential chain.
    Aws,
    /// Alibaba Cloud ECS and CloudMonitor.
    Alibaba,
    /// Tencent Cloud CVM and Cloud Monitor, with TENCENTCLOUD_SECRET_ID and
    /// TENCENTCLOUD_SECRET_KEY or the instance's CAM role.
    Tencent,
    /// A simulated fleet seeded from this snapshot.
    Sim(PathBuf),
}

impl CloudChoice {
    /// The cloud whose billing the boxes follow: a budget without a currency is in its. A
    /// simulated fleet is billed as EC2.
    pub(super) fn billed_as(&self) -> crate::fleet::Cloud {
        match self {
            CloudChoice::Alibaba => crate::fleet::Cloud::Alibaba,
            CloudChoice::Tencent => crate::fleet::Cloud::Tencent,
            CloudChoice::Aws | CloudChoice::Sim(_) => crate::fleet::Cloud::Aws,
        }
    }
}

pub(super) fn parse_cloud(s: &str) -> Result<CloudChoice, String> {
    match s {
        "aws" => return Ok(CloudChoice::Aws),
        "alibaba" => return Ok(CloudChoice::Alibaba),
        "tencent" => return Ok(CloudChoice::Tencent),
        _ => {}
    }
    match s.strip_prefix("sim:") {
        Some(file) if !file.is_empty() => Ok(CloudChoice::Sim(file.into())),
        _ => Err(format!(
            "\"{s}\" is not a cloud: aws, alibaba, tencent, or sim:FLEET_FILE for a simulated fleet"
        )),
    }
}

/// The management tag, or none.
#[derive(Clone)]
pub(super) struct ManagedTag(pub(super) Option<(String, String)>);

pub(super) fn parse_managed_tag(s: &str) -> Result<ManagedTag, String> {
    if s == "none" {
        return Ok(ManagedTag(None));
    }
    match s.split_once('=') {
        Some((key, value)) if !key.is_empty() => {
            Ok(ManagedTag(Some((key.to_string(), value.to_string()))))
        }
        _ => Err(format!(
            "\"{s}\" is not KEY=VALUE (like ebb:managed=true), or none for every instance"
        )),
    }
}

/// The price table of `file` (EBB_PRICES), with a simulated fleet's on-demand prices filling
/// in the types it lacks, each region's in the table of the currency its boxes' cloud bills in
/// (the Hangzhou boxes' in `CNY`): what stopped hours are priced by.
pub(super) fn price_table(
    file: Option<&std::path::Path>,
    cloud: &CloudChoice,
) -> Result<PriceTable> {
    let mut table = match file {
        Some(file) => crate::cloud::prices::load(file)?,
        None => PriceTable::default(),
    };
    if let CloudChoice::Sim(fleet) = cloud {
        let (sim, _) = snapshot::load_simulation(fleet)?;
        let source = format!("the simulated fleet {}", fleet.display());
        let currencies: HashMap<&str, &'static str> = sim
            .instances
            .iter()
            .map(|i| (i.region.as_str(), i.billing.cloud.currency()))
            .collect();
        for (region, types) in &sim.prices {
            let currency = currencies.get(region.as_str()).copied().unwrap_or("USD");
            let theirs = match currency {
                "USD" => &mut table,
                other => table
                    .other_currencies
                    .entry(other.to_string())
                    .or_insert_with(|| PriceTable {
                        source: source.clone(),
                        ..PriceTable::default()
                    }),
            };
            for (ty, price) in types {
                if let Some(p) = price.on_demand {
                    theirs
                        .prices
                        .entry(region.clone())
                        .or_default()
                        .entry(ty.clone())
                        .or_insert(p);
                }
            }
        }
        if table.source.is_empty() {
            table.source = source;
        }
    }
    Ok(table)
}

/// Filters and format of `ebb audit`.
#[derive(Args)]
pub(super) struct AuditArgs {
    /// Rows at or after: a duration back from now (24h, 7d) or an RFC 3339 time.
    #[arg(long, value_name = "24h|TS", value_parser = parse_past)]
    pub(super) since: Option<Past>,
    /// Rows before: a duration back from now or an RFC 3339 time.
    #[arg(long, value_name = "TS", value_parser = parse_past)]
    pub(super) until: Option<Past>,
    /// Only this instance.
    #[arg(long, value_name = "ID")]
    pub(super) instance: Option<String>,
    /// Only this policy.
    #[arg(long, value_name = "NAME")]
    pub(super) policy: Option<String>,
    /// Only this action (stop, start, hibernate, notify, override, policy_version, ...).
    #[arg(long, value_name = "A")]
    pub(super) action: Option<String>,
    /// Only this outcome.
    #[arg(long, value_name = "O", value_parser = ["intent", "succeeded", "failed", "skipped"])]
    pub(super) outcome: Option<String>,
    /// Only the newest N rows the filters select (still oldest first).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(i64).range(1..))]
    pub(super) limit: Option<i64>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = AuditFormat::Table)]
    pub(super) format: AuditFormat,
    #[command(flatten)]
    pub(super) db: DbArgs,
}

#[derive(Clone, Copy, ValueEnum)]
pub(super) enum AuditFormat {
    Table,
    Json,
    Csv,
}

/// `ebb override INSTANCE --until .. --reason ..`, `--list`, `--revoke ID`.
#[derive(Args)]
#[command(group(clap::ArgGroup::new("mode").args(["instance", "list", "revoke"]).required(true)))]
pub(super) struct OverrideArgs {
    /// The instance to keep.
    #[arg(requires_all = ["until", "reason"])]
    pub(super) instance: Option<String>,
    /// Until when: an RFC 3339 time, or a duration from now (4h, 2d).
    #[arg(long, value_name = "TS|DURATION", value_parser = parse_future)]
    pub(super) until: Option<Future>,
    /// Why (recorded in the audit log).
    #[arg(long, value_name = "TEXT")]
    pub(super) reason: Option<String>,
    /// List the overrides in force.
    #[arg(long)]
    pub(super) list: bool,
    /// With --list: also expired and revoked ones.
    #[arg(long, requires = "list")]
    pub(super) all: bool,
    /// Revoke the override with this id.
    #[arg(long, value_name = "ID")]
    pub(super) revoke: Option<i64>,
    #[command(flatten)]
    pub(super) actor: ActorArg,
    #[command(flatten)]
    pub(super) max_override: MaxOverrideArg,
    #[command(flatten)]
    pub(super) checkpoints: super::audit::CheckpointArgs,
    #[command(flatten)]
    pub(super) db: DbArgs,
}

impl OverrideArgs {
    /// Who is asking: `--actor`, else the user.
    pub(super) fn actor(&self) -> String {
        self.actor.name()
    }
}

/// Who asks for a change from the command line (`ebb override`, `ebb spot-moves release`).
#[derive(Args)]
pub(super) struct ActorArg {
    /// Who is asking, for the audit log (default: the user, $USER, else cli).
    #[arg(long = "actor", env = "EBB_ACTOR", value_name = "NAME")]
    actor: Option<String>,
}

impl ActorArg {
    /// Who is asking: `--actor`, else the user.
    pub(super) fn name(&self) -> String {
        self.actor
            .clone()
            .unwrap_or_else(|| std::env::var("USER").unwrap_or_else(|_| "cli".into()))
    }
}

/// The inputs of an offline decision.
#[derive(clap::Args)]
pub(super) struct Input {
    #[command(flatten)]
    pub(super) policies: PolicyDirs,
    /// A fleet snapshot (YAML, or JSON when the name ends in .json).
    #[arg(long, value_name = "FILE")]
    pub(super) fleet: PathBuf,
    /// The decision time, RFC 3339 (default: now).
    #[arg(long, value_name = "TS", value_parser = when::parse_time)]
    pub(super) at: Option<DateTime<Utc>>,
}

#[derive(Clone, Copy, ValueEnum)]
pub(super) enum Format {
    Table,
    Json,
}

pub(super) fn parse_speed(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(n) if n.is_finite() && n > 0.0 && n <= 1e6 => Ok(n),
        _ => Err(format!(
            "\"{s}\" is not a speed: a number above 0 and up to 1000000 (600 is ten minutes a second)"
        )),
    }
}

impl AuditArgs {
    /// The filter, with `--since` and `--until` counted from `now`.
    pub(super) fn to_filter(&self, now: DateTime<Utc>) -> Result<AuditFilter> {
        Ok(AuditFilter {
            since: self.since.as_ref().map(|s| s.at(now)).transpose()?,
            until: self.until.as_ref().map(|u| u.at(now)).transpose()?,
            instance: self.instance.clone(),
            policy: self.policy.clone(),
            action: self.action.clone(),
            outcome: self.outcome.as_deref().and_then(Outcome::parse),
            limit: self.limit,
            after: None,
        })
    }

    /// Whether a flag counts from now.
    pub(super) fn counts_from_now(&self) -> bool {
        self.since.is_some() || self.until.is_some()
    }
}

/// What `ebb plan` and `ebb explain` decide on: the time, the policies, the snapshot's fleet,
/// prior facts and Auto Scaling groups.
pub(super) type Loaded = (
    DateTime<Utc>,
    policy::PolicySet,
    fleet::Fleet,
    engine::Prior,
    Vec<snapshot::GroupSnapshot>,
);

impl Input {
    pub(super) fn load(&self) -> Result<Loaded> {
        let set = policy_files::load(&self.policies.policies)
            .context("policies are not valid (run ebb validate)")?;
        let (fleet, prior, groups) = snapshot::load_snapshot_groups(&self.fleet)?;
        // EC2's published buckets: starts they cannot all make by an opening begin early.
        let rates = crate::reconcile::start_rates(&RateLimits::default());
        let prior = prior.with_start_rates(rates, Default::default());
        Ok((self.at.unwrap_or_else(Utc::now), set, fleet, prior, groups))
    }
}

/// A currency's ISO 4217 code, upper case (`CNY`).
fn parse_currency(s: &str) -> Result<String, String> {
    let code = s.trim().to_ascii_uppercase();
    if code.len() == 3 && code.bytes().all(|b| b.is_ascii_uppercase()) {
        Ok(code)
    } else {
        Err(format!(
            "\"{s}\" is not a currency's ISO 4217 code: write CNY or USD"
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_simulated_fleet_prices_its_hangzhou_boxes_in_yuan_apart_from_the_dollars() {
        let demo = std::path::PathBuf::from("deploy/demo-fleet.yaml");
        let table = price_table(None, &CloudChoice::Sim(demo)).unwrap();
        let gn7i = ("cn-hangzhou", "ecs.gn7i-c8g1.2xlarge");
        assert_eq!(table.get(gn7i.0, gn7i.1), None);
        let cny = &table.other_currencies["CNY"];
        assert_eq!(cny.get(gn7i.0, gn7i.1), Some(1.6));
        assert!(cny.source.contains("demo-fleet.yaml"), "{}", cny.source);
        assert_eq!(table.get("eu-central-1", "g5.2xlarge"), Some(1.459));
    }
}
