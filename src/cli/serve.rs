//! `ebb serve`: its flags, its clock, and the signals that ask for a tick or a shutdown.

use super::args::Connected;
use super::args::{
    parse_speed, price_table, CloudChoice, HeartbeatKeyArg, ListenArg, MaxOverrideArg,
    ReconcileArgs, WEBHOOK_DRAIN,
};
use super::cloud::OnCloud;
use crate::api::{ApiLimits, Tokens};
use crate::clock::Clock;
use crate::cloud::aws::warnings::InterruptionQueue;
use crate::cloud::{PriceTable, Provider};
use crate::control::Control;
use crate::store::Store;
use crate::{serve, when};
use anyhow::{bail, Result};
use chrono::{DateTime, Utc};
use clap::Args;
use std::process::ExitCode;
use std::sync::Arc;
use tokio::signal::unix::{signal, SignalKind};

/// The flags of `ebb serve`.
#[derive(Args)]
pub(super) struct ServeArgs {
    /// Time between ticks.
    #[arg(long, env = "EBB_TICK", default_value = "60s", value_parser = humantime::parse_duration,
          help_heading = "Serving")]
    pub(super) tick: std::time::Duration,
    /// How long instance state changes and spot interruption warnings are kept (the audit log
    /// is kept for ever).
    #[arg(long, env = "EBB_RETENTION", default_value = "90d", value_parser = parse_retention,
          help_heading = "Serving")]
    pub(super) retention: std::time::Duration,
    /// How long GPU utilisation readings are kept (for the console's chart, `ebb metrics
    /// export` and replays).
    #[arg(long, env = "EBB_METRICS_RETENTION", default_value = "35d", value_parser = parse_retention,
          help_heading = "Serving")]
    pub(super) metrics_retention: std::time::Duration,
    /// This replica's name, shown as the leader's (default: host name and process id).
    #[arg(long, env = "EBB_REPLICA", help_heading = "Serving")]
    pub(super) replica: Option<String>,
    #[command(flatten)]
    pub(super) listen: ListenArg,
    /// How long a client may take to send a request's headers, from opening its connection (or
    /// from the first byte of a later request on it); then the connection is closed.
    #[arg(long, env = "EBB_HTTP_HEADER_TIMEOUT", default_value = "10s", value_parser = parse_http_timeout,
          help_heading = "API and console")]
    pub(super) http_header_timeout: std::time::Duration,
    /// How long a kept-alive connection may wait for its next request before it is closed.
    #[arg(long, env = "EBB_HTTP_IDLE_TIMEOUT", default_value = "60s", value_parser = parse_http_timeout,
          help_heading = "API and console")]
    pub(super) http_idle_timeout: std::time::Duration,
    /// How many connections to the API and the console may be open at once; more wait until
    /// one closes.
    #[arg(long, env = "EBB_HTTP_MAX_CONNECTIONS", default_value_t = 512,
          value_parser = clap::value_parser!(u32).range(1..=65_536), help_heading = "API and console")]
    pub(super) http_max_connections: u32,
    /// Tokens allowed to change things through the API: name:token,... (the name is the
    /// audit actor; tokens of 16 characters or more).
    #[arg(
        long,
        env = "EBB_API_TOKENS",
        hide_env_values = true,
        default_value = "",
        help_heading = "API and console"
    )]
    pub(super) api_tokens: String,
    #[command(flatten)]
    pub(super) heartbeat_key: HeartbeatKeyArg,
    /// Let anyone read the API and the console without a token (a demo, or a network where
    /// everyone may see the fleet and the audit log); changes still need a token.
    #[arg(long, env = "EBB_API_PUBLIC_READS", default_value_t = false, action = clap::ArgAction::Set,
          help_heading = "API and console")]
    pub(super) api_public_reads: bool,
    #[command(flatten)]
    pub(super) max_override: MaxOverrideArg,
    /// Mark the console's login cookie `Secure` on every response: set it when a proxy in
    /// front of ebb terminates TLS (without it, the cookie is `Secure` only on requests the
    /// proxy marks `X-Forwarded-Proto: https`).
    #[arg(long, env = "EBB_CONSOLE_SECURE_COOKIES", default_value_t = false, action = clap::ArgAction::Set,
          help_heading = "API and console")]
    pub(super) console_secure_cookies: bool,
    /// The proxies in front of ebb (networks or addresses, comma-separated, e.g. the ingress
    /// controller's pod network) whose `X-Forwarded-For` names the client, for the budgets of
    /// console logins and snooze-link uses per client address (default: none; every client
    /// behind a proxy then shares its budget).
    #[arg(long, env = "EBB_TRUSTED_PROXIES", value_name = "NETS", value_delimiter = ',',
          value_parser = crate::api::trusted_proxy, help_heading = "API and console")]
    pub(super) trusted_proxies: Vec<ipnet::IpNet>,
    /// With EBB_CLOUD=sim:FILE: the simulated clock's start, RFC 3339 (default: now).
    #[arg(long, env = "EBB_CLOCK_START", value_name = "TS", value_parser = when::parse_time,
          help_heading = "Simulated fleet")]
    pub(super) clock_start: Option<DateTime<Utc>>,
    /// With EBB_CLOUD=sim:FILE: how many times faster than real time the simulated clock
    /// runs (600: ten minutes a second). --tick counts in simulated time.
    #[arg(long, env = "EBB_CLOCK_SPEED", value_name = "N", value_parser = parse_speed,
          help_heading = "Simulated fleet")]
    pub(super) clock_speed: Option<f64>,
    /// An SQS queue URL that EventBridge sends EC2 spot interruption warnings to: spot
    /// migrations then replace a reclaimed instance within seconds.
    #[arg(
        long,
        env = "EBB_INTERRUPTION_QUEUE",
        value_name = "URL",
        help_heading = "Cloud"
    )]
    pub(super) interruption_queue: Option<String>,
    /// Post every outcome of the audit log (stops, starts, notices, overrides, ...) to this
    /// URL as a CloudEvents 1.0 JSON event, at least once and in order (docs/events.md).
    #[arg(
        long,
        env = "EBB_EVENTS_URL",
        value_name = "URL",
        hide_env_values = true,
        help_heading = "Events"
    )]
    pub(super) events_url: Option<reqwest::Url>,
    /// The events' `source`: a URI naming this ebb deployment, like urn:ebb:prod or
    /// https://ebb.example.com.
    #[arg(long, env = "EBB_EVENTS_SOURCE", value_name = "URI", default_value = "urn:ebb", value_parser = parse_source,
          help_heading = "Events")]
    pub(super) events_source: String,
    #[command(flatten)]
    pub(super) reconcile: ReconcileArgs,
    #[command(flatten)]
    pub(super) checkpoints: super::audit::CheckpointArgs,
}

impl ServeArgs {
    /// The clock: the system's, or a simulated one under a simulated fleet.
    fn clock(&self) -> Result<Clock> {
        Ok(
            match (&self.reconcile.cloud.choice.cloud, self.clock_start, self.clock_speed) {
                (CloudChoice::Sim(_), start, speed) => {
                    Clock::simulated(start.unwrap_or_else(Utc::now), speed.unwrap_or(1.0))
                }
                (CloudChoice::Aws | CloudChoice::Alibaba | CloudChoice::Tencent, None, None) => Clock::System,
                (CloudChoice::Aws | CloudChoice::Alibaba | CloudChoice::Tencent, _, _) => bail!(
                    "--clock-start and --clock-speed need EBB_CLOUD=sim:FLEET_FILE: a real cloud runs on real time"
                ),
            },
        )
    }
}

/// Serves until SIGTERM or Ctrl-C; SIGHUP asks for a tick now.
pub(super) async fn run(args: ServeArgs) -> Result<ExitCode> {
    if let (CloudChoice::Sim(_) | CloudChoice::Alibaba | CloudChoice::Tencent, Some(_)) =
        (&args.reconcile.cloud.choice.cloud, &args.interruption_queue)
    {
        bail!("--interruption-queue needs EBB_CLOUD=aws: it reads EC2's spot warnings from SQS");
    }
    let tokens = Tokens::parse(&args.api_tokens)?.with_heartbeat_key(args.heartbeat_key.key()?);
    let prices = price_table(
        args.reconcile.cloud.prices.prices.as_deref(),
        &args.reconcile.cloud.choice.cloud,
    )?;
    let clock = args.clock()?;
    let store = args.reconcile.db.open().await?;
    let cloud = args.reconcile.cloud.clone();
    let command = Serving {
        args,
        tokens,
        prices,
        clock,
        store,
    };
    cloud.run(clock, command).await
}

/// `ebb serve` once its flags are checked and the store is open.
struct Serving {
    args: ServeArgs,
    tokens: Tokens,
    prices: PriceTable,
    clock: Clock,
    store: Store,
}

impl OnCloud for Serving {
    type Output = ExitCode;

    async fn on<P: Provider>(self, cloud: Connected<P>) -> Result<ExitCode> {
        let Serving {
            args,
            tokens,
            prices,
            clock,
            store,
        } = self;
        let control = Arc::new(Control::default());
        let deadline = args.reconcile.tick_deadline;
        let watched = (
            args.reconcile.cloud.regions.clone(),
            args.reconcile.cloud.role_arns.clone(),
        );
        let time_given = !matches!(clock, Clock::System);
        let billed_as = args.reconcile.cloud.choice.cloud.billed_as();
        let (reconciler, poster) =
            args.reconcile
                .reconciler(store, cloud, control.tasks.clone(), time_given)?;
        let checkpoints = args
            .checkpoints
            .publisher(
                control.tasks.clone(),
                control.metrics.audit_checkpoint_failures(),
            )
            .await?;
        let name = args.replica.unwrap_or_else(replica_name);
        let mut hangup = signal(SignalKind::hangup())?;
        let on_hangup = control.clone();
        tokio::spawn(async move {
            while hangup.recv().await.is_some() {
                on_hangup.wake.notify_one();
            }
        });
        let mut terminate = signal(SignalKind::terminate())?;
        let shutdown = async move {
            tokio::select! {
                _ = terminate.recv() => {}
                _ = tokio::signal::ctrl_c() => {}
            }
            tracing::info!("shutting down after the tick in flight");
        };
        tracing::info!(replica = %name, every = %humantime::format_duration(args.tick), "serving");
        let config = serve::Config {
            name,
            interval: args.tick,
            deadline,
            clock,
            listen: args.listen.listen,
            http: serve::HttpLimits {
                header_timeout: args.http_header_timeout,
                idle_timeout: args.http_idle_timeout,
                max_connections: args.http_max_connections,
            },
            tokens,
            checkpoints,
            trusted_proxies: args.trusted_proxies,
            limits: ApiLimits {
                public_reads: args.api_public_reads,
                max_override: chrono::Duration::from_std(args.max_override.max_override)?,
                secure_cookies: args.console_secure_cookies,
                ..ApiLimits::default()
            },
            retention: serve::Retention {
                history: chrono::Duration::from_std(args.retention)?,
                readings: chrono::Duration::from_std(args.metrics_retention)?,
            },
            cloud: billed_as,
            prices,
            events: args.events_url.map(|url| serve::EventsConfig {
                url,
                source: args.events_source,
            }),
            interruptions: match args.interruption_queue {
                Some(url) => Some(InterruptionQueue::connect(url, watched.0, &watched.1).await),
                None => None,
            },
        };
        serve::run(reconciler, config, control, shutdown).await?;
        if let Some(poster) = poster {
            poster.finish(WEBHOOK_DRAIN).await;
        }
        Ok(ExitCode::SUCCESS)
    }
}

/// Reads a connection timeout: a duration above zero (a connection with no time at all could
/// never be served).
fn parse_http_timeout(s: &str) -> Result<std::time::Duration, String> {
    match humantime::parse_duration(s) {
        Ok(d) if !d.is_zero() => Ok(d),
        Ok(_) => Err("a connection needs some time: give a duration like 10s".to_string()),
        Err(e) => Err(format!(
            "\"{s}\" is not a duration ({e}): write it like 10s"
        )),
    }
}

/// Reads an event source: a non-empty URI reference without spaces, as CloudEvents asks.
fn parse_source(s: &str) -> Result<String, String> {
    if s.is_empty() || s.chars().any(char::is_whitespace) {
        return Err(
            "the events' source names this deployment as a URI without spaces, like urn:ebb:prod"
                .to_string(),
        );
    }
    Ok(s.to_string())
}

/// Reads a retention: a duration of at least a day, so that a typo cannot empty the history.
fn parse_retention(s: &str) -> Result<std::time::Duration, String> {
    match humantime::parse_duration(s) {
        Ok(d) if d >= std::time::Duration::from_secs(86_400) => Ok(d),
        Ok(_) => Err("keep at least a day of history: give a duration like 90d".to_string()),
        Err(e) => Err(format!(
            "\"{s}\" is not a duration ({e}): write it like 90d"
        )),
    }
}

/// The host name and process id: unique among replicas.
pub(super) fn replica_name() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .unwrap_or_else(|_| "ebb".into());
    format!("{host}:{}", std::process::id())
}
