//! The `ebb` command: parses the command line and calls into the library.

use anyhow::{bail, Context as _, Result};
use chrono::{DateTime, Local, Utc};
use clap::{Args, Parser, Subcommand, ValueEnum};
use ebb::api::Tokens;
use ebb::clock::Clock;
use ebb::cloud::aws::warnings::InterruptionQueue;
use ebb::cloud::aws::{self, AwsProvider};
use ebb::cloud::sim::SimProvider;
use ebb::cloud::{Cloud, OnDemandPrices, Provider as _};
use ebb::reconcile::{Control, Options, PolicySource, Reconciler};
use ebb::store::{AuditFilter, Outcome, Store, Verification};

use ebb::webhook::{Poster, Webhook};
use ebb::{engine, fleet, output, policy, serve, snapshot, when};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use tokio::signal::unix::{signal, SignalKind};

/// jemalloc, not glibc's allocator: `ebb serve` on a large fleet allocates most of a tick's
/// memory afresh at every tick from several threads, and glibc's per-thread arenas kept about
/// half as much again as the peak heap resident. jemalloc kept the least of the three tried
/// (see BENCHMARKS.md).
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// jemalloc's settings, read when it starts: freed pages go back to the system at once. By
/// default it keeps them for 10 s, and each tick's data then piled onto the last one's:
/// `ebb serve` on 100k instances peaked at 196 MB resident instead of 173 MB, with the same
/// tick times (BENCHMARKS.md). `_RJEM_MALLOC_CONF` in the environment still overrides it.
#[export_name = "_rjem_malloc_conf"]
static ALLOCATOR_SETTINGS: AllocatorSettings =
    AllocatorSettings(c"dirty_decay_ms:0,muzzy_decay_ms:0".as_ptr());

/// A C string for jemalloc (`const char *`).
#[repr(transparent)]
struct AllocatorSettings(*const std::ffi::c_char);

// SAFETY: it points to a string literal, which lives as long as the program and never changes.
unsafe impl Sync for AllocatorSettings {}

/// ebb makes a GPU cloud bill follow real demand.
#[derive(Parser)]
#[command(name = "ebb", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Check policy files; print every problem as path:line:col: message.
    Validate {
        /// Directories (every *.yaml and *.yml in them) or single files.
        #[arg(required = true, value_name = "DIR")]
        dirs: Vec<PathBuf>,
    },
    /// Decide offline what ebb would do to a fleet snapshot at a given time.
    Plan {
        #[command(flatten)]
        input: Input,
        /// Output format.
        #[arg(long, value_enum, default_value_t = Format::Table)]
        format: Format,
    },
    /// Show why ebb decides what it decides for one instance of a fleet snapshot.
    Explain {
        /// The instance id.
        instance: String,
        #[command(flatten)]
        input: Input,
    },
    /// Print the JSON Schema of policy files.
    Schema,
    /// Apply the database migrations (DATABASE_URL); other commands apply them too.
    Migrate,
    /// Show the audit log (DATABASE_URL), or verify its hash chain.
    #[command(args_conflicts_with_subcommands = true)]
    Audit {
        #[command(subcommand)]
        verify: Option<AuditCommand>,
        #[command(flatten)]
        filter: AuditArgs,
    },
    /// Keep an instance from being stopped until a time, or list and revoke overrides.
    Override(OverrideArgs),
    /// Show spot migrations (DATABASE_URL): state, current instance, savings, reclaims.
    Migrations {
        /// Output format.
        #[arg(long, value_enum, default_value_t = Format::Table)]
        format: Format,
    },
    /// One reconcile pass (AWS credential chain, DATABASE_URL): decide, act, record; then exit.
    Tick {
        /// The decision time, RFC 3339 (default: now); for tests and replays.
        #[arg(long, value_name = "TS", value_parser = when::parse_time)]
        at: Option<DateTime<Utc>>,
        #[command(flatten)]
        reconcile: ReconcileArgs,
    },
    /// The control plane: ticks every EBB_TICK, and on SIGHUP, as the leader among replicas.
    Serve {
        /// Time between ticks.
        #[arg(long, env = "EBB_TICK", default_value = "60s", value_parser = humantime::parse_duration)]
        tick: std::time::Duration,
        /// This replica's name, shown as the leader's (default: host name and process id).
        #[arg(long, env = "EBB_REPLICA")]
        replica: Option<String>,
        /// The HTTP API's address.
        #[arg(long, env = "EBB_LISTEN", default_value = "127.0.0.1:8080")]
        listen: std::net::SocketAddr,
        /// Tokens allowed to change things through the API: name:token,... (the name is the
        /// audit actor; tokens of 16 characters or more).
        #[arg(
            long,
            env = "EBB_API_TOKENS",
            hide_env_values = true,
            default_value = ""
        )]
        api_tokens: String,
        /// With EBB_CLOUD=sim:FILE: the simulated clock's start, RFC 3339 (default: now).
        #[arg(long, env = "EBB_CLOCK_START", value_name = "TS", value_parser = when::parse_time)]
        clock_start: Option<DateTime<Utc>>,
        /// With EBB_CLOUD=sim:FILE: how many times faster than real time the simulated clock
        /// runs (600: ten minutes a second). --tick counts in simulated time.
        #[arg(long, env = "EBB_CLOCK_SPEED", value_name = "N", value_parser = parse_speed)]
        clock_speed: Option<f64>,
        /// An SQS queue URL that EventBridge sends EC2 spot interruption warnings to: spot
        /// migrations then replace a reclaimed instance within seconds.
        #[arg(long, env = "EBB_INTERRUPTION_QUEUE", value_name = "URL")]
        interruption_queue: Option<String>,
        #[command(flatten)]
        reconcile: ReconcileArgs,
    },
    /// Exit 0 when the local `ebb serve` is ready (GET /readyz); for container health checks.
    Ready {
        /// The API's address, as `ebb serve` was given it.
        #[arg(long, env = "EBB_LISTEN", default_value = "127.0.0.1:8080")]
        listen: std::net::SocketAddr,
    },
    /// List the instances ebb manages as the cloud shows them now (AWS credential chain).
    Inventory {
        #[command(flatten)]
        cloud: CloudArgs,
        /// Output format; json is a fleet snapshot that `ebb plan --fleet` reads.
        #[arg(long, value_enum, default_value_t = Format::Table)]
        format: Format,
    },
}

/// Where the policies are.
#[derive(Args)]
struct PolicyDirs {
    /// Policy directories or files (repeatable).
    #[arg(
        long = "policies",
        value_name = "DIR",
        required = true,
        env = "EBB_POLICIES",
        value_delimiter = ','
    )]
    policies: Vec<PathBuf>,
}

/// What a reconcile pass acts on, and how.
#[derive(Args)]
struct ReconcileArgs {
    #[command(flatten)]
    policies: PolicyDirs,
    /// Decide and audit, but change nothing.
    #[arg(long, env = "EBB_DRY_RUN")]
    dry_run: bool,
    /// At most this many actions a tick (starts, then notices, then stops); the rest wait.
    #[arg(long, env = "EBB_MAX_ACTIONS_PER_TICK", value_name = "N")]
    max_actions: Option<usize>,
    /// Post notices (Slack-compatible JSON) to this URL.
    #[arg(long, env = "EBB_WEBHOOK_URL", value_name = "URL")]
    webhook_url: Option<reqwest::Url>,
    #[command(flatten)]
    cloud: CloudArgs,
}

/// How long notices still queued may take to post before the process exits.
const WEBHOOK_DRAIN: std::time::Duration = std::time::Duration::from_secs(30);

impl ReconcileArgs {
    /// The reconciler (a simulated fleet runs on `clock`), and the webhook poster to drain
    /// before exit.
    async fn reconciler(self, clock: Clock) -> Result<(Reconciler<Cloud>, Option<Poster>)> {
        let store = Store::open_from_env().await?;
        let provider = self.cloud.provider(clock).await?;
        let (webhook, poster) = self.webhook_url.map(Webhook::start).unzip();
        let options = Options {
            dry_run: self.dry_run,
            max_actions: self.max_actions,
            webhook,
        };
        let policies = Arc::new(PolicySource::new(self.policies.policies));
        Ok((Reconciler::new(provider, store, policies, options), poster))
    }
}

/// Where ebb looks in AWS.
#[derive(Args)]
struct CloudArgs {
    /// The cloud: aws, or sim:FLEET_FILE (a simulated fleet seeded from a fleet snapshot).
    #[arg(long, env = "EBB_CLOUD", default_value = "aws", value_parser = parse_cloud)]
    cloud: CloudChoice,
    /// Regions to watch, comma-separated (default: the AWS SDK's region).
    #[arg(
        long,
        env = "EBB_REGIONS",
        value_delimiter = ',',
        value_name = "REGION"
    )]
    regions: Vec<String>,
    /// Roles to assume to reach other accounts, comma-separated ARNs.
    #[arg(long, env = "EBB_ROLE_ARNS", value_delimiter = ',', value_name = "ARN")]
    role_arns: Vec<String>,
    /// Only instances with this tag (KEY=VALUE), or `none` for every instance.
    #[arg(long, env = "EBB_MANAGED_TAG", default_value = "ebb:managed=true", value_parser = parse_managed_tag)]
    managed_tag: ManagedTag,
    /// The on-demand price table spot rules compare against (see deploy/prices.yaml); without
    /// one, spot rules move nothing.
    #[arg(long, env = "EBB_PRICES", value_name = "FILE")]
    prices: Option<PathBuf>,
}

/// A cloud provider to connect to.
#[derive(Clone)]
enum CloudChoice {
    /// EC2 and CloudWatch, with the AWS credential chain.
    Aws,
    /// A simulated fleet seeded from this snapshot.
    Sim(PathBuf),
}

fn parse_cloud(s: &str) -> Result<CloudChoice, String> {
    if s == "aws" {
        return Ok(CloudChoice::Aws);
    }
    match s.strip_prefix("sim:") {
        Some(file) if !file.is_empty() => Ok(CloudChoice::Sim(file.into())),
        _ => Err(format!(
            "\"{s}\" is not a cloud: aws, or sim:FLEET_FILE for a simulated fleet"
        )),
    }
}

/// The management tag, or none.
#[derive(Clone)]
struct ManagedTag(Option<(String, String)>);

fn parse_managed_tag(s: &str) -> Result<ManagedTag, String> {
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

impl CloudArgs {
    /// The provider; a simulated fleet runs on `clock`.
    async fn provider(self, clock: Clock) -> Result<Cloud> {
        match self.cloud {
            CloudChoice::Aws => {
                let on_demand = match &self.prices {
                    Some(file) => OnDemandPrices::load(file)?,
                    None => OnDemandPrices::default(),
                };
                let settings = aws::Settings {
                    regions: self.regions,
                    role_arns: self.role_arns,
                    managed_tag: self.managed_tag.0,
                    on_demand,
                    ..aws::Settings::default()
                };
                Ok(Cloud::Aws(Box::new(AwsProvider::connect(settings).await?)))
            }
            CloudChoice::Sim(file) => {
                let (fleet, behaviours) = snapshot::load_simulation(&file)?;
                Ok(Cloud::Sim(SimProvider::new(fleet, behaviours, clock)))
            }
        }
    }
}

#[derive(Subcommand)]
enum AuditCommand {
    /// Recompute the hash chain; exit non-zero naming the first row that does not match.
    Verify,
}

/// Filters and format of `ebb audit`.
#[derive(Args)]
struct AuditArgs {
    /// Rows at or after: a duration back from now (24h, 7d) or an RFC 3339 time.
    #[arg(long, value_name = "24h|TS", value_parser = parse_past)]
    since: Option<DateTime<Utc>>,
    /// Rows before: a duration back from now or an RFC 3339 time.
    #[arg(long, value_name = "TS", value_parser = parse_past)]
    until: Option<DateTime<Utc>>,
    /// Only this instance.
    #[arg(long, value_name = "ID")]
    instance: Option<String>,
    /// Only this policy.
    #[arg(long, value_name = "NAME")]
    policy: Option<String>,
    /// Only this action (stop, start, hibernate, notify, override, policy_version, ...).
    #[arg(long, value_name = "A")]
    action: Option<String>,
    /// Only this outcome.
    #[arg(long, value_name = "O", value_parser = ["intent", "succeeded", "failed", "skipped"])]
    outcome: Option<String>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = AuditFormat::Table)]
    format: AuditFormat,
}

#[derive(Clone, Copy, ValueEnum)]
enum AuditFormat {
    Table,
    Json,
    Csv,
}

/// `ebb override INSTANCE --until .. --reason ..`, `--list`, `--revoke ID`.
#[derive(Args)]
#[command(group(clap::ArgGroup::new("mode").args(["instance", "list", "revoke"]).required(true)))]
struct OverrideArgs {
    /// The instance to keep.
    #[arg(requires_all = ["until", "reason"])]
    instance: Option<String>,
    /// Until when: an RFC 3339 time, or a duration from now (4h, 2d).
    #[arg(long, value_name = "TS|DURATION", value_parser = parse_future)]
    until: Option<DateTime<Utc>>,
    /// Why (recorded in the audit log).
    #[arg(long, value_name = "TEXT")]
    reason: Option<String>,
    /// List the overrides in force.
    #[arg(long)]
    list: bool,
    /// With --list: also expired and revoked ones.
    #[arg(long, requires = "list")]
    all: bool,
    /// Revoke the override with this id.
    #[arg(long, value_name = "ID")]
    revoke: Option<i64>,
    /// Who is asking, for the audit log.
    #[arg(long, env = "EBB_ACTOR", default_value_t = default_actor())]
    actor: String,
}

fn default_actor() -> String {
    std::env::var("USER").unwrap_or_else(|_| "cli".into())
}

/// The inputs of an offline decision.
#[derive(clap::Args)]
struct Input {
    #[command(flatten)]
    policies: PolicyDirs,
    /// A fleet snapshot (YAML, or JSON when the name ends in .json).
    #[arg(long, value_name = "FILE")]
    fleet: PathBuf,
    /// The decision time, RFC 3339 (default: now).
    #[arg(long, value_name = "TS", value_parser = when::parse_time)]
    at: Option<DateTime<Utc>>,
}

#[derive(Clone, Copy, ValueEnum)]
enum Format {
    Table,
    Json,
}

fn parse_speed(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(n) if n.is_finite() && n > 0.0 && n <= 1e6 => Ok(n),
        _ => Err(format!(
            "\"{s}\" is not a speed: a number above 0 and up to 1000000 (600 is ten minutes a second)"
        )),
    }
}

fn parse_past(s: &str) -> Result<DateTime<Utc>, String> {
    when::parse_past(s, Utc::now())
}

fn parse_future(s: &str) -> Result<DateTime<Utc>, String> {
    when::parse_future(s, Utc::now())
}

/// The host name and process id: unique among replicas.
fn replica_name() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .unwrap_or_else(|_| "ebb".into());
    format!("{host}:{}", std::process::id())
}

/// Logs: JSON lines on stdout for `serve` (for log collectors), plain lines on stderr for the
/// other commands; `EBB_LOG` (a tracing filter) sets the level.
fn init_logs(command: &Command) {
    use tracing_subscriber::EnvFilter;
    let serving = matches!(command, Command::Serve { .. });
    let filter = EnvFilter::try_from_env("EBB_LOG")
        .unwrap_or_else(|_| EnvFilter::new(if serving { "info" } else { "warn" }));
    let logs = tracing_subscriber::fmt().with_env_filter(filter);
    if serving {
        logs.json()
            .with_ansi(false)
            .with_writer(std::io::stdout)
            .init();
    } else {
        use std::io::IsTerminal;
        logs.with_ansi(std::io::stderr().is_terminal())
            .with_writer(std::io::stderr)
            .init();
    }
}

#[tokio::main]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    init_logs(&cli.command);
    match run(cli.command).await {
        Ok(code) => code,
        Err(err) => {
            eprintln!("error: {err:#}");
            ExitCode::from(2)
        }
    }
}

async fn run(command: Command) -> Result<ExitCode> {
    match command {
        Command::Validate { dirs } => match policy::load(&dirs) {
            Ok(set) => {
                let rules: usize = set.policies.len();
                println!(
                    "ok: {rules} {} and {} {} valid, version {}",
                    if rules == 1 { "policy" } else { "policies" },
                    set.calendars.len(),
                    if set.calendars.len() == 1 {
                        "calendar"
                    } else {
                        "calendars"
                    },
                    set.version
                );
                Ok(ExitCode::SUCCESS)
            }
            Err(policy::LoadError::Invalid { problems }) => {
                for p in &problems {
                    println!("{p}");
                }
                eprintln!(
                    "{} problem{} found",
                    problems.len(),
                    if problems.len() == 1 { "" } else { "s" }
                );
                Ok(ExitCode::from(1))
            }
            Err(err) => Err(err.into()),
        },
        Command::Plan { input, format } => {
            let (at, set, fleet, prior) = input.load()?;
            let decisions = engine::decide(at, &set, &fleet, &prior);
            let text = match format {
                Format::Json => output::plan_json(&decisions),
                Format::Table => output::plan_table(&decisions),
            };
            print!("{text}");
            Ok(ExitCode::SUCCESS)
        }
        Command::Explain { instance, input } => {
            let (at, set, fleet, prior) = input.load()?;
            let explanation = engine::explain(at, &set, &fleet, &prior, &instance)
                .with_context(|| format!("no instance {instance} in {}", input.fleet.display()))?;
            println!("{explanation}");
            Ok(ExitCode::SUCCESS)
        }
        Command::Schema => {
            print!("{}", policy::schema::schema_text());
            Ok(ExitCode::SUCCESS)
        }
        Command::Migrate => {
            let url = std::env::var("DATABASE_URL").map_err(|_| ebb::store::StoreError::NoUrl)?;
            let store = Store::connect(&url).await?;
            let applied = store.migrate().await?;
            println!("ok: {applied} migration(s) applied; the schema is current");
            Ok(ExitCode::SUCCESS)
        }
        Command::Audit {
            verify: Some(AuditCommand::Verify),
            ..
        } => {
            let store = Store::open_from_env().await?;
            match store.verify_audit().await? {
                Verification::Intact { rows, head } => {
                    println!("ok: {rows} audit rows, hash chain intact, head {head}");
                    Ok(ExitCode::SUCCESS)
                }
                Verification::Broken { seq, problem } => {
                    println!("audit row {seq} does not match: {problem}");
                    Ok(ExitCode::from(1))
                }
            }
        }
        Command::Audit {
            verify: None,
            filter,
        } => {
            let store = Store::open_from_env().await?;
            let rows = store.audit(&filter.to_filter()).await?;
            let text = match filter.format {
                AuditFormat::Table => output::audit_table(&rows, &Local),
                AuditFormat::Json => output::audit_json(&rows),
                AuditFormat::Csv => output::audit_csv(&rows)?,
            };
            print!("{text}");
            Ok(ExitCode::SUCCESS)
        }
        Command::Override(args) => overrides(args).await,
        Command::Migrations { format } => {
            let store = Store::open_from_env().await?;
            let list = store.migrations().await?;
            // Under a simulated clock, ebb's time runs ahead of this one: savings count at least
            // up to the last step ebb recorded.
            let now = list
                .iter()
                .filter_map(|m| m.steps.0.last().map(|s| s.at))
                .fold(Utc::now(), DateTime::max);
            print!(
                "{}",
                match format {
                    Format::Table => output::migrations_table(&list, now),
                    Format::Json => output::migrations_json(&list, now),
                }
            );
            Ok(ExitCode::SUCCESS)
        }
        Command::Tick { at, reconcile } => {
            let at = at.unwrap_or_else(Utc::now);
            let (reconciler, poster) = reconcile.reconciler(Clock::Fixed(at)).await?;
            let Some(mut leader) = reconciler.store().try_lead(&replica_name()).await? else {
                bail!("another ebb is the leader and acting (ebb serve?); this tick did nothing");
            };
            let report = reconciler.tick(at, &mut leader).await;
            // The queue closes with the reconciler; what it holds is posted before exit.
            drop(reconciler);
            if let Some(poster) = poster {
                poster.finish(WEBHOOK_DRAIN).await;
            }
            let report = report?;
            print!("{}", output::tick_summary(&report));
            if let Some(err) = &report.policy_error {
                eprintln!("error: {err}");
            }
            for failure in &report.inventory_failures {
                eprintln!("error: cannot list instances in {failure}");
            }
            let failed = report.actions.iter().any(|a| a.outcome == Outcome::Failed);
            Ok(
                if failed || report.policy_error.is_some() || !report.inventory_failures.is_empty()
                {
                    ExitCode::from(1)
                } else {
                    ExitCode::SUCCESS
                },
            )
        }
        Command::Serve {
            tick,
            replica,
            listen,
            api_tokens,
            clock_start,
            clock_speed,
            interruption_queue,
            reconcile,
        } => {
            if let (CloudChoice::Sim(_), Some(_)) = (&reconcile.cloud.cloud, &interruption_queue) {
                bail!("--interruption-queue needs EBB_CLOUD=aws: the simulated fleet has no queue");
            }
            let tokens = Tokens::parse(&api_tokens)?;
            let clock = match (&reconcile.cloud.cloud, clock_start, clock_speed) {
                (CloudChoice::Sim(_), start, speed) => Clock::simulated(
                    start.unwrap_or_else(Utc::now),
                    speed.unwrap_or(1.0),
                ),
                (CloudChoice::Aws, None, None) => Clock::System,
                (CloudChoice::Aws, _, _) => bail!(
                    "--clock-start and --clock-speed need EBB_CLOUD=sim:FLEET_FILE: a real cloud runs on real time"
                ),
            };
            let (reconciler, poster) = reconcile.reconciler(clock).await?;
            let name = replica.unwrap_or_else(replica_name);
            let control = Arc::new(Control::default());
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
            tracing::info!(replica = %name, every = %humantime::format_duration(tick), "serving");
            let config = serve::Config {
                name,
                interval: tick,
                clock,
                listen,
                tokens,
                interruptions: match interruption_queue {
                    Some(url) => Some(InterruptionQueue::connect(url).await),
                    None => None,
                },
            };
            serve::run(reconciler, config, control, shutdown).await?;
            if let Some(poster) = poster {
                poster.finish(WEBHOOK_DRAIN).await;
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Ready { mut listen } => {
            if listen.ip().is_unspecified() {
                listen.set_ip(std::net::Ipv4Addr::LOCALHOST.into());
            }
            let url = format!("http://{listen}/readyz");
            let answer = reqwest::Client::builder()
                .timeout(std::time::Duration::from_secs(5))
                .build()?
                .get(&url)
                .send()
                .await
                .with_context(|| format!("cannot reach ebb serve at {url}"))?;
            let ready = answer.status().is_success();
            println!("{}", answer.text().await.unwrap_or_default());
            Ok(if ready {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(1)
            })
        }
        Command::Inventory { cloud, format } => {
            let inventory = cloud.provider(Clock::System).await?.instances().await;
            print!(
                "{}",
                match format {
                    Format::Json => output::snapshot_json(&inventory.instances),
                    Format::Table => output::instances_table(&inventory.instances, &Local),
                }
            );
            for failure in &inventory.failures {
                eprintln!(
                    "error: cannot list instances in {}{}: {}",
                    failure.region,
                    failure
                        .account
                        .as_deref()
                        .map(|a| format!(" as {a}"))
                        .unwrap_or_default(),
                    failure.error
                );
            }
            Ok(if inventory.failures.is_empty() {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(1)
            })
        }
    }
}

impl AuditArgs {
    fn to_filter(&self) -> AuditFilter {
        AuditFilter {
            since: self.since,
            until: self.until,
            instance: self.instance.clone(),
            policy: self.policy.clone(),
            action: self.action.clone(),
            outcome: self.outcome.as_deref().and_then(Outcome::parse),
            limit: None,
        }
    }
}

async fn overrides(args: OverrideArgs) -> Result<ExitCode> {
    let store = Store::open_from_env().await?;
    let now = Utc::now();
    if args.list {
        let list = if args.all {
            store.all_overrides().await?
        } else {
            store.active_overrides(now).await?
        };
        print!("{}", output::overrides_table(&list, &Local, now));
    } else if let Some(id) = args.revoke {
        let o = store.revoke_override(id, &args.actor, now).await?;
        println!("revoked override {} of {}", o.id, o.instance);
    } else if let (Some(instance), Some(until), Some(reason)) =
        (args.instance, args.until, args.reason)
    {
        if until <= now {
            bail!(
                "--until {} is in the past; give a later time or a duration like 4h",
                until.to_rfc3339()
            );
        }
        if reason.trim().is_empty() {
            bail!("--reason must say why (it is recorded in the audit log)");
        }
        let o = store
            .create_override(&instance, until, &reason, &args.actor, now)
            .await?;
        println!(
            "override {}: {} kept until {} ({})",
            o.id,
            o.instance,
            o.until.with_timezone(&Local).format("%Y-%m-%d %H:%M:%S%:z"),
            o.reason
        );
    }
    Ok(ExitCode::SUCCESS)
}

impl Input {
    fn load(
        &self,
    ) -> Result<(
        DateTime<Utc>,
        policy::PolicySet,
        fleet::Fleet,
        engine::Prior,
    )> {
        let set = policy::load(&self.policies.policies)
            .context("policies are not valid (run ebb validate)")?;
        let (fleet, prior) = snapshot::load_snapshot(&self.fleet)?;
        Ok((self.at.unwrap_or_else(Utc::now), set, fleet, prior))
    }
}
