//! The provider `EBB_CLOUD` chose (`aws`, `alibaba` or `sim:FILE`), matched once. A command that needs the cloud is generic
//! over the provider ([`OnCloud`]); [`CloudArgs::run`] connects the chosen one and runs the
//! command on it. So the tick and serve stacks under a command are compiled for each provider,
//! and no call dispatches on the choice again.

use super::args::{CloudArgs, CloudChoice, Connected};
use crate::clock::Clock;
use crate::cloud::alibaba::{self, AlibabaProvider};
use crate::cloud::aws::{self, AwsProvider};
use crate::cloud::pacing::Pacer;
use crate::cloud::sim::SimProvider;
use crate::cloud::tencent::{self, TencentProvider};
use crate::cloud::{PriceTable, Provider};
use crate::reconcile::Timers;
use crate::snapshot;
use anyhow::Result;
use std::sync::Arc;

/// A command that runs on whichever provider `EBB_CLOUD` chose.
pub(super) trait OnCloud {
    /// What the command gives back.
    type Output;

    /// Runs the command on `cloud`.
    async fn on<P: Provider>(self, cloud: Connected<P>) -> Result<Self::Output>;
}

impl CloudArgs {
    /// Whether the chosen cloud is AWS at an endpoint off this machine: the real EC2 unless
    /// `AWS_ENDPOINT_URL_EC2` (or `AWS_ENDPOINT_URL`, as the SDK reads them) names a loopback
    /// address, as for an emulator such as moto.
    pub(super) fn is_remote_aws(&self) -> bool {
        let endpoint = ["AWS_ENDPOINT_URL_EC2", "AWS_ENDPOINT_URL"]
            .iter()
            .find_map(|name| std::env::var(name).ok().filter(|v| !v.is_empty()));
        let loopback = endpoint
            .and_then(|url| reqwest::Url::parse(&url).ok())
            .is_some_and(|url| match url.host_str() {
                Some("localhost") => true,
                Some(host) => host
                    .trim_matches(['[', ']'])
                    .parse::<std::net::IpAddr>()
                    .is_ok_and(|ip| ip.is_loopback()),
                None => false,
            });
        matches!(self.choice.cloud, CloudChoice::Aws) && !loopback
    }

    /// Whether the chosen cloud is Alibaba Cloud itself: unless `EBB_ALIBABA_ENDPOINT` names a
    /// loopback address (a test's fake).
    pub(super) fn is_remote_alibaba(&self) -> bool {
        let loopback = self
            .alibaba
            .alibaba_endpoint
            .as_ref()
            .is_some_and(|url| match url.host() {
                Some(url::Host::Domain("localhost")) => true,
                Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
                Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
                _ => false,
            });
        matches!(self.choice.cloud, CloudChoice::Alibaba) && !loopback
    }

    /// Whether the chosen cloud is Tencent Cloud at an endpoint off this machine: the real one
    /// unless `EBB_TENCENT_ENDPOINT` names a loopback address, as for a test double.
    pub(super) fn is_remote_tencent(&self) -> bool {
        let loopback = self
            .tencent_endpoint
            .as_ref()
            .is_some_and(|url| match url.host() {
                Some(url::Host::Domain("localhost")) => true,
                Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
                Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
                _ => false,
            });
        matches!(self.choice.cloud, CloudChoice::Tencent) && !loopback
    }

    /// Whether the chosen cloud is a real one off this machine: not the simulated fleet, nor an
    /// emulator or fake at a loopback address. Its timers then run on the database's clock,
    /// even for `ebb tick --dry-run --at`.
    pub(super) fn is_remote(&self) -> bool {
        self.is_remote_aws() || self.is_remote_alibaba() || self.is_remote_tencent()
    }

    /// The clock the timers of a provider whose calls take up to `call_limit` run on, with the
    /// ticks' time set by hand when `time_given`. A real cloud's run on the database's clock,
    /// which every replica shares (even for a dry run at another time, which still resolves
    /// intents). The simulated fleet's run on its simulated clock, in one process, and so do an
    /// emulator's or a fake's when the ticks' time is set by hand, as their tests do.
    pub(super) fn timers(
        &self,
        call_limit: Option<std::time::Duration>,
        time_given: bool,
    ) -> Timers {
        let emulated_time = time_given && !self.is_remote();
        match call_limit {
            Some(_) if !emulated_time => Timers::Database,
            _ => Timers::Tick,
        }
    }

    /// Connects the provider (a simulated fleet runs on `clock`) and runs `command` on it.
    pub(super) async fn run<C: OnCloud>(self, clock: Clock, command: C) -> Result<C::Output> {
        match self.choice.cloud {
            CloudChoice::Aws => {
                let on_demand = match &self.prices.prices {
                    Some(file) => crate::cloud::prices::load(file)?,
                    None => PriceTable::default(),
                };
                let settings = aws::Settings {
                    regions: self.regions,
                    role_arns: self.role_arns,
                    managed_tag: self.managed_tag.0,
                    on_demand,
                    rate_limits: self.ec2_rate_limits,
                    ..aws::Settings::default()
                };
                let aws = AwsProvider::connect(settings).await?;
                let cloud = Connected {
                    call_limit: Some(aws.timeouts().operation),
                    pacer: Some(aws.pacer().clone()),
                    provider: aws,
                };
                command.on(cloud).await
            }
            CloudChoice::Alibaba => {
                if self.regions.is_empty() {
                    anyhow::bail!(
                        "EBB_CLOUD=alibaba needs EBB_REGIONS: the Alibaba Cloud regions to watch, like cn-hangzhou,cn-beijing"
                    );
                }
                let settings = alibaba::Settings {
                    endpoint: self.alibaba.alibaba_endpoint.clone(),
                    ..alibaba::Settings::new(
                        self.regions,
                        self.managed_tag.0,
                        self.alibaba.credentials()?,
                    )
                };
                let provider = AlibabaProvider::connect(settings, clock)?;
                let cloud = Connected {
                    call_limit: Some(provider.timeout()),
                    pacer: Some(provider.pacer().clone()),
                    provider,
                };
                command.on(cloud).await
            }
            CloudChoice::Tencent => {
                let on_demand = match &self.prices.prices {
                    Some(file) => crate::cloud::prices::load(file)?,
                    None => PriceTable::default(),
                };
                let settings = tencent::Settings {
                    regions: self.regions,
                    managed_tag: self.managed_tag.0,
                    endpoint: self.tencent_endpoint,
                    keys: match (self.tencent_secret_id, self.tencent_secret_key) {
                        (Some(id), Some(key)) => Some(
                            tencent::Keys::fixed(&id, &key).with_token(self.tencent_session_token),
                        ),
                        (None, None) => None,
                        _ => anyhow::bail!(
                            "set both TENCENTCLOUD_SECRET_ID and TENCENTCLOUD_SECRET_KEY, or \
                             neither to use the instance's CAM role"
                        ),
                    },
                    web_identity: match (
                        self.tke_role_arn,
                        self.tke_provider_id,
                        self.tke_web_identity_token_file,
                        self.tke_region,
                    ) {
                        (Some(role_arn), Some(provider_id), Some(token_file), Some(region)) => {
                            Some(tencent::WebIdentity {
                                role_arn,
                                provider_id,
                                token_file,
                                region,
                                session_name: "ebb".to_string(),
                            })
                        }
                        (None, None, None, None) => None,
                        _ => anyhow::bail!(
                            "set all of TKE_ROLE_ARN, TKE_PROVIDER_ID, TKE_WEB_IDENTITY_TOKEN_FILE and TKE_REGION (TKE sets them for a service account bound to a CAM role), or none of them"
                        ),
                    },
                    on_demand,
                    gpu_metric: tencent::GpuMetric::default(),
                    currency: self.tencent_currency,
                };
                let provider = TencentProvider::connect(settings)?;
                let cloud = Connected {
                    call_limit: Some(tencent::CALL_LIMIT),
                    pacer: Some(provider.pacer().clone()),
                    provider,
                };
                command.on(cloud).await
            }
            CloudChoice::Sim(file) => {
                let seed = snapshot::load_simulated(&file)?;
                // The simulated EC2 meters calls as EC2 does, and ebb paces them.
                let pacer = Arc::new(Pacer::new(self.ec2_rate_limits.clone(), &clock));
                let sim = SimProvider::new(seed.fleet, seed.behaviours, clock)
                    .with_groups(seed.groups)
                    .with_zones(seed.zones)
                    .with_held_reservations(seed.held)
                    .metered(self.ec2_rate_limits)
                    .paced_by(pacer);
                let cloud = Connected {
                    call_limit: None,
                    pacer: sim.pacer(),
                    provider: sim,
                };
                command.on(cloud).await
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Command {
        #[command(flatten)]
        cloud: CloudArgs,
    }

    fn remote(args: &[&str]) -> bool {
        let args = ["ebb"].iter().chain(args).copied();
        Command::try_parse_from(args).unwrap().cloud.is_remote()
    }

    #[test]
    fn alibaba_and_tencent_are_remote_unless_their_endpoint_is_on_this_machine() {
        assert!(remote(&["--cloud", "alibaba"]));
        assert!(remote(&["--cloud", "tencent"]));
        let fake = "http://127.0.0.1:9";
        assert!(!remote(&["--cloud", "alibaba", "--alibaba-endpoint", fake]));
        assert!(!remote(&["--cloud", "tencent", "--tencent-endpoint", fake]));
        let other = "https://ecs.cn-hangzhou.aliyuncs.com";
        assert!(remote(&["--cloud", "alibaba", "--alibaba-endpoint", other]));
    }

    /// `ebb tick --dry-run --at` against the real Alibaba Cloud or Tencent Cloud resolves
    /// intents on the database's clock, as against the real AWS; against a fake on this machine,
    /// on the tick's.
    #[test]
    fn a_dry_run_at_another_time_on_a_real_china_cloud_times_on_the_database() {
        let limit = Some(std::time::Duration::from_secs(60));
        for cloud in ["alibaba", "tencent"] {
            let args = Command::try_parse_from(["ebb", "--cloud", cloud]).unwrap();
            assert_eq!(args.cloud.timers(limit, true), Timers::Database, "{cloud}");
            assert_eq!(args.cloud.timers(limit, false), Timers::Database, "{cloud}");
            let endpoint = format!("--{cloud}-endpoint");
            let faked = ["ebb", "--cloud", cloud, &endpoint, "http://127.0.0.1:9"];
            let args = Command::try_parse_from(faked).unwrap();
            assert_eq!(args.cloud.timers(limit, true), Timers::Tick, "{cloud}");
        }
    }
}
