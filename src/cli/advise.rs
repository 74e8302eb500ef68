//! `ebb advise`: the files `ebb replay` reads (or the fleet and readings in Postgres), read
//! twice a chunk of instances at a time ([`crate::advise::run`]): once to survey when each
//! policy's instances are busy (the hours its candidate changes are drawn from), once to
//! replay the policies and every candidate on one [`crate::advise::Advisor`] per core.

use super::args::{DbArgs, PolicyDirs, PricesArg};
use super::policy_files;
use super::replay::{
    add_prices, check_prices, parse_percent, parse_tick, prices_with_quotes, stream_chunks, Source,
};
use super::replay_store;
use crate::advise::{self, Inputs};
use crate::fleet::money::PriceTable;
use crate::fleet::GPU_BUSY_PERCENT;
use crate::replay::{Options, Recording};
use crate::{snapshot, when};
use anyhow::{bail, Context as _, Result};
use chrono::{DateTime, Utc};
use clap::ValueEnum;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::mpsc::SyncSender;

/// The flags of `ebb advise`.
#[derive(clap::Args)]
pub(super) struct AdviseArgs {
    #[command(flatten)]
    policies: PolicyDirs,
    /// The fleet snapshot at --from, as ebb replay takes it. Without it and --utilisation,
    /// both come from Postgres (DATABASE_URL).
    #[arg(long, value_name = "FILE", requires = "utilisation")]
    fleet: Option<PathBuf>,
    /// GPU readings as CSV, as ebb replay takes them.
    #[arg(long, value_name = "FILE", requires = "fleet")]
    utilisation: Option<PathBuf>,
    #[command(flatten)]
    prices: PricesArg,
    /// The start of the period advised on, RFC 3339.
    #[arg(long, value_name = "TS", value_parser = when::parse_time)]
    from: DateTime<Utc>,
    /// The end of the period, RFC 3339.
    #[arg(long, value_name = "TS", value_parser = when::parse_time)]
    to: DateTime<Utc>,
    /// The virtual time between two decisions of the replays.
    #[arg(long, default_value = "5m", value_parser = parse_tick)]
    tick: chrono::Duration,
    /// A sample at or above this percent is demand.
    #[arg(long, value_name = "PERCENT", default_value_t = GPU_BUSY_PERCENT, value_parser = parse_percent)]
    busy_threshold: f64,
    /// Unserved busy time over the period a policy change may reach (default: no more than
    /// the current policy's), like 2h.
    #[arg(long, value_name = "DURATION", value_parser = parse_budget)]
    max_unserved: Option<chrono::Duration>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = AdviseFormat::Table)]
    format: AdviseFormat,
    #[command(flatten)]
    db: DbArgs,
}

#[derive(Clone, Copy, ValueEnum)]
enum AdviseFormat {
    Table,
    Json,
    Markdown,
}

/// An unserved-demand budget: a duration.
fn parse_budget(s: &str) -> Result<chrono::Duration, String> {
    let d = humantime::parse_duration(s)
        .map_err(|e| format!("\"{s}\" is not a duration ({e}): write it like 2h or 30m"))?;
    chrono::Duration::from_std(d).map_err(|_| format!("\"{s}\" is too long a duration"))
}

/// `ebb advise`: right-sizing, commitments and policy changes over the recording.
pub(super) async fn run(args: &AdviseArgs) -> Result<ExitCode> {
    if args.to <= args.from {
        bail!(
            "--to {} is not after --from {}: give a --to later than --from",
            args.to.to_rfc3339(),
            args.from.to_rfc3339()
        );
    }
    let window = args.to - args.from;
    if window < chrono::Duration::weeks(1) {
        eprintln!(
            "warning: advice from {:.1} days of recording: types, commitments, subscriptions and policy changes are all worked out as if every week were like these days; a week or more (a month for commitments) gives figures to act on",
            window.num_minutes() as f64 / (24.0 * 60.0)
        );
    }
    let set = policy_files::load(&args.policies.policies)
        .context("policies are not valid (run ebb validate)")?;
    let (source, (mut fleet, prior)) = match (&args.fleet, &args.utilisation) {
        (Some(fleet), Some(utilisation)) => (
            Source::Files { fleet, utilisation },
            snapshot::load_snapshot(fleet)?,
        ),
        _ => {
            let store = args
                .db
                .open()
                .await
                .context("without --fleet and --utilisation, ebb advise reads Postgres")?;
            let fleet = replay_store::fleet_at(&store, args.from).await?;
            (
                Source::Store(store, tokio::runtime::Handle::current()),
                fleet,
            )
        }
    };
    // Advise sizes commitments from the table's rates, not the ones held.
    // From Postgres, hours and subscriptions are priced by the clouds' quotes where serve or
    // tick kept them.
    let table = prices_with_quotes(&args.prices, &source).await?;
    add_prices(table.as_ref(), &mut fleet);
    check_prices(&fleet, &args.prices)?;
    let on_demand = advise::run::on_demand(&fleet.prices);
    let commitment_rates = table
        .as_ref()
        .map(advise::run::plan_rates)
        .unwrap_or_default();
    // The shipped catalogue, with what serve or tick last described where Postgres has it.
    let mut catalogue = advise::catalogue::shipped();
    if let Source::Store(store, _) = &source {
        let described = store
            .instance_types()
            .await
            .context("cannot read the instance catalogue from Postgres")?;
        catalogue.update(described);
    }
    let subscription_tables: Vec<(&str, &PriceTable)> = table
        .iter()
        .flat_map(advise::run::subscription_tables)
        .collect();
    let inputs = Inputs {
        options: Options {
            levers: crate::cloud::levers(),
            from: args.from,
            to: args.to,
            tick: args.tick,
            busy_threshold: args.busy_threshold,
        },
        policies: &set,
        prices: &fleet.prices,
        catalogue: &catalogue,
        on_demand: &on_demand,
        commitment_rates: &commitment_rates,
        max_unserved: args.max_unserved,
        subscription_tables: &subscription_tables,
    };
    let span = crate::replay::readings_span(args.from, args.to, &[&set]);
    let workers = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mut advice = tokio::task::block_in_place(|| {
        let feed = |send: &SyncSender<Vec<Recording>>| {
            match &source {
                Source::Files {
                    fleet: path,
                    utilisation,
                } => stream_chunks(utilisation, path, &fleet.instances, send),
                Source::Store(store, runtime) => {
                    replay_store::stream_chunks(store, runtime, &fleet.instances, span, send)
                }
            }
            .map_err(|e| advise::run::AdviseError::Read(format!("{e:#}")))
        };
        advise::run::advise_all(&source.name(), &inputs, &set, &prior, workers, feed)
    })?;
    // Only Postgres has reads of the reservations held outside ebb; files leave them unread.
    if let Source::Store(store, _) = &source {
        let reads = store
            .capacity_reads(args.from, args.to)
            .await
            .context("cannot read the capacity reservations' reads from Postgres")?;
        advice.reservations =
            advise::reservations::reservation_use(&reads, &advice.period(), &on_demand);
    }
    out!(
        "{}",
        match args.format {
            AdviseFormat::Table => advice.table(),
            AdviseFormat::Json => advice.json(),
            AdviseFormat::Markdown => advice.markdown(),
        }
    );
    Ok(ExitCode::SUCCESS)
}
