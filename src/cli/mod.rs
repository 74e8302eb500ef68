//! The `ebb` command line: flags, commands, exit codes and how failures are printed. The
//! binary (`src/main.rs`) only calls [`main`].
//!
//! Exit codes: 0 when the command did its job; 1 when it ran and found a problem (invalid
//! policies, a broken audit chain, a failed action, a region that could not be listed, a
//! replica that is not ready); 2 when it could not run (bad flags, no database, unreadable
//! files), with one line `error: ...` on stderr saying what is wrong. A reader of stdout that
//! goes away (`ebb audit --format csv | head -1`) ends a command quietly with 0.

/// `print!` to stdout that ends the command quietly, with exit 0, when stdout's reader has
/// gone (`ebb audit --format csv | head`): no panic, no error line.
macro_rules! out {
    ($($arg:tt)*) => {
        $crate::cli::write_out(format_args!($($arg)*))?
    };
}

/// `println!` as [`out!`] writes.
macro_rules! outln {
    ($($arg:tt)*) => {
        $crate::cli::write_out(format_args!("{}\n", format_args!($($arg)*)))?
    };
}

mod advise;
mod alibaba_args;
mod args;
mod audit;
mod budgets;
mod cloud;
mod commands;
mod db;
mod gpu_source;
mod interruptions;
mod policy_files;
mod quotes;
mod reclaims;
mod replay;
mod replay_store;
mod report;
mod serve;
mod store_clock;
mod utilisation;

use crate::when;
use args::{AuditArgs, CloudArgs, DbArgs, Format, Input, ListenArg, OverrideArgs, ReconcileArgs};
use audit::{AuditCommand, CheckpointArgs};
use chrono::{DateTime, Utc};
use clap::{Parser, Subcommand};
use serve::ServeArgs;
use std::path::PathBuf;
use std::process::ExitCode;

/// ebb makes a GPU cloud bill follow real demand.
#[derive(Parser)]
#[command(name = "ebb", version, about)]
struct Cli {
    /// What to log: a tracing filter (debug, ebb=debug, ...); by default info for serve, warn
    /// for the other commands.
    #[arg(long, env = "EBB_LOG", value_name = "FILTER", global = true)]
    log: Option<String>,
    #[command(subcommand)]
    command: Command,
}

/// The command line's definition: every command, flag and setting (for checking the manual
/// against it).
pub fn command() -> clap::Command {
    <Cli as clap::CommandFactory>::command()
}

// Parsed once at startup and never moved about: the size of its largest variant costs nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Subcommand)]
enum Command {
    /// Check policy files; print every problem as path:line:col: message.
    Validate {
        /// Directories (every *.yaml and *.yml in them) or single files.
        #[arg(required = true, value_name = "DIR")]
        dirs: Vec<PathBuf>,
        /// The day calendars are checked against for running out, RFC 3339 (default: now).
        #[arg(long, value_name = "TS", value_parser = when::parse_time)]
        at: Option<DateTime<Utc>>,
    },
    /// Decide offline what ebb would do to a fleet snapshot at a given time.
    Plan {
        #[command(flatten)]
        input: Input,
        /// Output format.
        #[arg(long, value_enum, default_value_t = Format::Table)]
        format: Format,
    },
    /// Replay policies over recorded GPU utilisation: hours, dollars and unserved demand
    /// against always on, the oracle and a baseline policy set.
    Replay(replay::ReplayArgs),
    /// Advise on the fleet from its recording: cheaper types, commitments sized on what the
    /// policies leave running, and policy changes that cut cost without serving less.
    Advise(advise::AdviseArgs),
    /// Show why ebb decides what it decides for one instance of a fleet snapshot.
    Explain {
        /// The instance id (or an Auto Scaling group's name).
        instance: String,
        #[command(flatten)]
        input: Input,
        /// Output format.
        #[arg(long, value_enum, default_value_t = Format::Table)]
        format: Format,
    },
    /// Print the JSON Schema of policy files.
    Schema,
    /// Print the heartbeat token of an instance: what it posts to
    /// POST /v1/instances/{id}/activity with, good for its own heartbeats only.
    HeartbeatToken {
        /// The instance id.
        instance: String,
        #[command(flatten)]
        key: args::HeartbeatKeyArg,
    },
    /// Apply the database migrations (DATABASE_URL, as the owner of the tables); every other
    /// command refuses a schema that is not current. Run it again after each upgrade.
    Migrate {
        /// Grant this existing role what serve, tick and ebb override need, and no more: on the
        /// audit log SELECT and INSERT only (repeatable). Its earlier privileges are revoked.
        #[arg(long, value_name = "ROLE")]
        grant_runtime: Vec<String>,
        /// Grant this existing role SELECT only, for ebb audit, ebb audit verify and the other
        /// read commands (repeatable).
        #[arg(long, value_name = "ROLE")]
        grant_reader: Vec<String>,
        #[command(flatten)]
        db: DbArgs,
    },
    /// Show the audit log (DATABASE_URL), verify its hash chain, or make a checkpoint key.
    #[command(args_conflicts_with_subcommands = true)]
    Audit {
        #[command(subcommand)]
        command: Option<AuditCommand>,
        #[command(flatten)]
        filter: AuditArgs,
    },
    /// Keep an instance from being stopped until a time, or list and revoke overrides.
    Override(OverrideArgs),
    /// What ebb saved over a window (DATABASE_URL): hours kept stopped and their on-demand
    /// dollars, spot savings, people's overrides and starts, by policy and by a tag.
    Report(report::ReportArgs),
    /// Where each budget of the policy files stands in its period (DATABASE_URL): spent,
    /// amount, forecast and what happens at the limit; or raise one, on record.
    #[command(
        visible_alias = "budget",
        args_conflicts_with_subcommands = true,
        subcommand_negates_reqs = true
    )]
    Budgets {
        #[command(subcommand)]
        command: Option<BudgetsCommand>,
        #[command(flatten)]
        args: budgets::BudgetsArgs,
    },
    /// Show spot migrations (DATABASE_URL): state, current instance, savings, reclaims; or
    /// release an image a migration keeps. Named apart from `migrate`, the database's; the old
    /// name `migrations` still works.
    #[command(
        name = "spot-moves",
        alias = "migrations",
        args_conflicts_with_subcommands = true
    )]
    Migrations {
        #[command(subcommand)]
        command: Option<MigrationsCommand>,
        /// Output format.
        #[arg(long, value_enum, default_value_t = Format::Table)]
        format: Format,
        /// Instead, list what carries ebb's migration tags in EC2 (in EBB_REGIONS and every
        /// migration's region) that no migration tracks; exits 1 when there is any.
        #[arg(long)]
        orphans: bool,
        #[command(flatten)]
        cloud: CloudArgs,
        #[command(flatten)]
        db: DbArgs,
    },
    /// The prices the clouds quoted (Alibaba's DescribePrice, Tencent's
    /// DescribeZoneInstanceConfigInfos; DATABASE_URL), which reports, budgets and advice use
    /// over the price table: region, type, currency, the hour, a month of each term, when.
    Quotes {
        /// Output format.
        #[arg(long, value_enum, default_value_t = Format::Table)]
        format: Format,
        #[command(flatten)]
        db: DbArgs,
    },
    /// The boxes reclaimed after a long stop (`stopped.reclaim_after`; DATABASE_URL): state,
    /// image, and the box restored from it.
    Reclaims {
        /// Output format.
        #[arg(long, value_enum, default_value_t = Format::Table)]
        format: Format,
        #[command(flatten)]
        db: DbArgs,
    },
    /// Ask for a reclaimed box back (DATABASE_URL): the leader launches it from its image with
    /// its type, subnet, security groups, instance profile, key and tags at its next tick.
    Restore {
        /// The reclaimed instance's id.
        instance: String,
        #[command(flatten)]
        actor: args::ActorArg,
        #[command(flatten)]
        db: DbArgs,
    },
    /// The spot pools' history (DATABASE_URL): per account, region, zone and type, the
    /// interruptions, rebalance recommendations and capacity errors ebb saw in the last 24 h,
    /// 7 days and 30 days, and the last reclaim.
    Pools {
        /// Output format.
        #[arg(long, value_enum, default_value_t = Format::Table)]
        format: Format,
        /// The time to count back from, RFC 3339 (default: now).
        #[arg(long, value_name = "TS", value_parser = when::parse_time)]
        at: Option<DateTime<Utc>>,
        #[command(flatten)]
        db: DbArgs,
    },
    /// One reconcile pass (AWS credential chain, DATABASE_URL): decide, act, record; then exit.
    Tick {
        /// The decision time, RFC 3339 (default: now); for tests and replays.
        #[arg(long, value_name = "TS", value_parser = when::parse_time)]
        at: Option<DateTime<Utc>>,
        #[command(flatten)]
        reconcile: ReconcileArgs,
        #[command(flatten)]
        checkpoints: CheckpointArgs,
    },
    /// The control plane: ticks every EBB_TICK, and on SIGHUP, as the leader among replicas.
    Serve(ServeArgs),
    /// Exit 0 when the local `ebb serve` is ready (GET /readyz); for container health checks.
    Ready {
        #[command(flatten)]
        listen: ListenArg,
    },
    /// GPU utilisation history kept by the control plane (DATABASE_URL).
    Metrics {
        #[command(subcommand)]
        command: MetricsCommand,
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
/// `ebb spot-moves` commands.
#[derive(Subcommand)]
enum BudgetsCommand {
    /// Raise a budget's amount until a time, with a reason (DATABASE_URL): audited, and it
    /// ends by itself.
    Raise(budgets::RaiseArgs),
}

#[derive(Subcommand)]
enum MigrationsCommand {
    /// Let go of the image an ended migration keeps as the possible only copy of the workload's
    /// disks (its replacement ended for a cause ebb cannot know): the leader deletes it, with
    /// its snapshots, at its next tick.
    Release {
        /// The migration's id (`ebb spot-moves`).
        id: i64,
        #[command(flatten)]
        actor: args::ActorArg,
        #[command(flatten)]
        db: DbArgs,
    },
}

/// `ebb metrics` commands.
#[derive(Subcommand)]
enum MetricsCommand {
    /// Write the GPU readings kept since a time as CSV
    /// (`instance,time,gpu_util,gpu_mem_mib,gpus_busy`), the format `ebb replay --utilisation`
    /// reads.
    Export {
        /// Readings at or after: a duration back from now (30d) or an RFC 3339 time.
        #[arg(long, value_name = "30d|TS", value_parser = store_clock::parse_past, default_value = "30d")]
        since: store_clock::Past,
        #[command(flatten)]
        db: DbArgs,
    },
}

/// Parses the command line, runs the command, and turns its result into the exit code.
pub async fn main() -> ExitCode {
    let cli = Cli::parse();
    init_logs(cli.log.as_deref(), &cli.command);
    // Boxed: the commands' futures nest deeply (serve's above all), and on the heap the
    // compiler need not lay them all out inside main's.
    match Box::pin(run(cli.command)).await {
        Ok(code) => code,
        Err(err) if err.is::<StdoutClosed>() => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("error: {}", one_line(&err));
            ExitCode::from(2)
        }
    }
}

/// `err` and its causes in one line, each cause once: many errors already say their cause
/// ("cannot read x: No such file"), and the chain would say it again.
fn one_line(err: &anyhow::Error) -> String {
    let mut text = err.to_string();
    for cause in err.chain().skip(1) {
        let cause = cause.to_string();
        if !text.contains(&cause) {
            text.push_str(": ");
            text.push_str(&cause);
        }
    }
    text
}

/// Stdout's reader has gone (a closed pipe): the command ends quietly.
#[derive(Debug, thiserror::Error)]
#[error("stdout was closed")]
struct StdoutClosed;

/// Writes `args` to stdout; a closed pipe is [`StdoutClosed`], which [`main`] ends quietly.
pub(crate) fn write_out(args: std::fmt::Arguments<'_>) -> anyhow::Result<()> {
    use std::io::Write;
    let mut stdout = std::io::stdout().lock();
    match stdout.write_fmt(args).and_then(|()| stdout.flush()) {
        Err(err) if err.kind() == std::io::ErrorKind::BrokenPipe => Err(StdoutClosed.into()),
        other => Ok(other?),
    }
}

/// Runs one command.
async fn run(command: Command) -> anyhow::Result<ExitCode> {
    match command {
        Command::Validate { dirs, at } => commands::validate(&dirs, at.unwrap_or_else(Utc::now)),
        Command::Plan { input, format } => commands::plan(&input, format),
        Command::Replay(args) => replay::run(&args).await,
        Command::Advise(args) => advise::run(&args).await,
        Command::Explain {
            instance,
            input,
            format,
        } => commands::explain(&instance, &input, format),
        Command::Schema => {
            out!("{}", crate::policy::schema::schema_text());
            Ok(ExitCode::SUCCESS)
        }
        Command::HeartbeatToken { instance, key } => {
            let Some(key) = key.key()? else {
                anyhow::bail!(
                    "no key to make the token with: give the file ebb serve reads as --heartbeat-key-file or EBB_HEARTBEAT_KEY_FILE"
                );
            };
            outln!("{}", key.token_of(&instance));
            Ok(ExitCode::SUCCESS)
        }
        Command::Migrate {
            grant_runtime,
            grant_reader,
            db,
        } => commands::migrate(&grant_runtime, &grant_reader, &db).await,
        Command::Audit {
            command: Some(command),
            ..
        } => audit::run(command).await,
        Command::Audit {
            command: None,
            filter,
        } => commands::audit(&filter).await,
        Command::Override(args) => commands::overrides(args).await,
        Command::Report(args) => report::run(args).await,
        Command::Budgets {
            command: Some(BudgetsCommand::Raise(args)),
            ..
        } => budgets::raise(args).await,
        Command::Budgets { args, .. } => budgets::run(args).await,
        Command::Migrations {
            command: Some(MigrationsCommand::Release { id, actor, db }),
            ..
        } => commands::release(id, &actor, &db).await,
        Command::Migrations {
            format,
            orphans: false,
            db,
            ..
        } => commands::migrations(format, &db).await,
        Command::Migrations {
            format,
            orphans: true,
            cloud,
            db,
            ..
        } => commands::orphans(cloud, format, &db).await,
        Command::Reclaims { format, db } => reclaims::list(format, &db).await,
        Command::Quotes { format, db } => quotes::list(format, &db).await,
        Command::Restore {
            instance,
            actor,
            db,
        } => reclaims::restore(&instance, &actor, &db).await,
        Command::Pools { format, at, db } => commands::pools(format, at, &db).await,
        Command::Tick {
            at,
            reconcile,
            checkpoints,
        } => commands::tick(at, reconcile, checkpoints).await,
        Command::Serve(args) => serve::run(args).await,
        Command::Ready { listen } => commands::ready(listen.listen).await,
        Command::Inventory { cloud, format } => commands::inventory(cloud, format).await,
        Command::Metrics {
            command: MetricsCommand::Export { since, db },
        } => commands::export_readings(&since, &db).await,
    }
}

/// Logs: JSON lines on stdout for `serve` (for log collectors), plain lines on stderr for the
/// other commands; `filter` (`EBB_LOG`, a tracing filter) sets the level.
fn init_logs(filter: Option<&str>, command: &Command) {
    use tracing_subscriber::EnvFilter;
    let serving = matches!(command, Command::Serve(_));
    let filter = filter
        .and_then(|f| EnvFilter::try_new(f).ok())
        .unwrap_or_else(|| EnvFilter::new(if serving { "info" } else { "warn" }));
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
