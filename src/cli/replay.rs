//! `ebb replay`: the files it reads (policies, a fleet snapshot, the utilisation CSV), or the
//! fleet and readings in Postgres (`super::replay_store`), streamed a chunk of instances at a
//! time to one [`crate::replay::Replayer`] per core (each instance is replayed on its own, so
//! the workers share nothing), and the report it prints.

use super::args::{DbArgs, PolicyDirs, PricesArg};
use super::interruptions::read_pools;
use super::policy_files;
use super::replay_store;
use super::utilisation::{self, read_utilisation};
use crate::engine::Prior;
use crate::fleet::money::PriceTable;
use crate::fleet::{Fleet, Instance, GPU_BUSY_PERCENT};
use crate::policy::PolicySet;
use crate::replay::{
    BudgetSpend, InstanceOutcome, OnDemandUse, Options, Pools, Recording, Replayer, Reports, CHUNK,
};
use crate::report::money::HourlyUse;
use crate::store::Store;
use crate::{snapshot, when};
use anyhow::{bail, Context as _, Result};
use chrono::{DateTime, Utc};
use clap::ValueEnum;
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::sync::Mutex;

/// What a replay worker gives back: its instances' outcomes, and their hours on demand and
/// the budgets' spend summed per currency (each box's in the one its cloud bills in).
type Replayed = (
    Vec<InstanceOutcome>,
    BTreeMap<&'static str, (OnDemandUse, BudgetSpend)>,
);

/// The flags of `ebb replay`.
#[derive(clap::Args)]
pub(super) struct ReplayArgs {
    #[command(flatten)]
    policies: PolicyDirs,
    /// The fleet snapshot at --from (YAML, or JSON when the name ends in .json), with prices.
    /// Without it and --utilisation, both come from Postgres (DATABASE_URL).
    #[arg(long, value_name = "FILE", requires = "utilisation")]
    fleet: Option<PathBuf>,
    #[command(flatten)]
    prices: PricesArg,
    /// GPU utilisation as CSV: instance,time,gpu_util (RFC 3339, percent), optionally
    /// gpu_mem_mib and gpus_busy, each instance's rows together.
    #[arg(long, value_name = "FILE", requires = "fleet")]
    utilisation: Option<PathBuf>,
    /// The start of the replay, RFC 3339.
    #[arg(long, value_name = "TS", value_parser = when::parse_time)]
    from: DateTime<Utc>,
    /// The end of the replay, RFC 3339.
    #[arg(long, value_name = "TS", value_parser = when::parse_time)]
    to: DateTime<Utc>,
    /// The virtual time between two decisions.
    #[arg(long, default_value = "5m", value_parser = parse_tick)]
    tick: chrono::Duration,
    /// Policies to compare with (the pull request's base branch, say); repeatable.
    #[arg(long = "baseline-policies", value_name = "DIR", value_delimiter = ',')]
    baseline: Vec<PathBuf>,
    /// A sample at or above this percent is demand.
    #[arg(long, value_name = "PERCENT", default_value_t = GPU_BUSY_PERCENT, value_parser = parse_percent)]
    busy_threshold: f64,
    /// Spot interruptions as CSV (time,region,zone,instance_type): spot moves are placed in
    /// the pools by expected cost and reclaimed at these times, beside a cheapest_first
    /// scenario that places them by price alone.
    #[arg(long, value_name = "FILE")]
    interruptions: Option<PathBuf>,
    /// With --interruptions, how often the jobs checkpoint (the work a reclaim loses is the
    /// time since the last one); default: each policy's spot.checkpoint_max_age.
    #[arg(long, value_name = "DURATION", requires = "interruptions", value_parser = parse_tick)]
    checkpoint_every: Option<chrono::Duration>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = ReplayFormat::Table)]
    format: ReplayFormat,
    #[command(flatten)]
    db: DbArgs,
}

#[derive(Clone, Copy, ValueEnum)]
enum ReplayFormat {
    Table,
    Json,
    Markdown,
}

/// A tick: a duration from a second to a day.
pub(super) fn parse_tick(s: &str) -> Result<chrono::Duration, String> {
    let d = humantime::parse_duration(s)
        .map_err(|e| format!("\"{s}\" is not a duration ({e}): write it like 5m or 60s"))?;
    match chrono::Duration::from_std(d) {
        Ok(d) if d >= chrono::Duration::seconds(1) && d <= chrono::Duration::days(1) => Ok(d),
        _ => Err(format!(
            "a tick of \"{s}\" is out of range: give one from 1s to 1d, like 5m"
        )),
    }
}

/// A percent from 0 to 100.
pub(super) fn parse_percent(s: &str) -> Result<f64, String> {
    match s.trim_end_matches('%').parse::<f64>() {
        Ok(p) if (0.0..=100.0).contains(&p) => Ok(p),
        _ => Err(format!("\"{s}\" is not a percent from 0 to 100")),
    }
}

/// Where the fleet and the recording come from.
pub(super) enum Source<'a> {
    /// The snapshot and the CSV.
    Files {
        fleet: &'a Path,
        utilisation: &'a Path,
    },
    /// Postgres, read on the command's runtime.
    Store(Store, tokio::runtime::Handle),
}

impl Source<'_> {
    /// What the replay read, for its errors.
    pub(super) fn name(&self) -> String {
        match self {
            Source::Files { fleet, .. } => fleet.display().to_string(),
            Source::Store(..) => "the fleet in Postgres".to_string(),
        }
    }
}

/// Warns of each policy whose activity signals the recording lacks (a file without their
/// `activity:NAME` columns, or Postgres without their uses): each counts as in use, so the
/// policy stops nothing for idleness in the replay.
fn warn_unrecorded_signals(set: &PolicySet, recorded: &[String]) {
    for p in &set.policies {
        let signals = p.idle.iter().flat_map(|i| &i.activity);
        let names: Vec<&str> = signals
            .map(|s| s.name.as_str())
            .filter(|n| !recorded.iter().any(|r| r == n))
            .collect();
        if !names.is_empty() {
            eprintln!(
                "warning: policy {}: the recording has no history of its activity signals {} (a utilisation file's activity:NAME columns): each counts as in use, so nothing is stopped for idleness under it here",
                p.name,
                names.join(", ")
            );
        }
    }
}

/// `ebb replay`: the measures of every scenario over the recording.
pub(super) async fn run(args: &ReplayArgs) -> Result<ExitCode> {
    if args.to <= args.from {
        bail!(
            "--to {} is not after --from {}: give a --to later than --from",
            args.to.to_rfc3339(),
            args.from.to_rfc3339()
        );
    }
    let set = policy_files::load(&args.policies.policies)
        .context("policies are not valid (run ebb validate)")?;
    let baseline = match args.baseline.is_empty() {
        true => None,
        false => Some(
            policy_files::load(&args.baseline)
                .context("--baseline-policies are not valid (run ebb validate on them)")?,
        ),
    };
    let mut zones = Default::default();
    let (source, (mut fleet, prior)) = match (&args.fleet, &args.utilisation) {
        (Some(fleet), Some(utilisation)) => (Source::Files { fleet, utilisation }, {
            let (read, prior, spot_zones) = snapshot::load_snapshot_zones(fleet)?;
            zones = spot_zones;
            (read, prior)
        }),
        _ => {
            let store = args
                .db
                .open()
                .await
                .context("without --fleet and --utilisation, ebb replay reads Postgres")?;
            let fleet = replay_store::fleet_at(&store, args.from).await?;
            (
                Source::Store(store, tokio::runtime::Handle::current()),
                fleet,
            )
        }
    };
    let recorded = match &source {
        Source::Files { utilisation, .. } => utilisation::recorded_signals(utilisation)?,
        Source::Store(store, _) => store
            .activity_signals()
            .await
            .context("cannot read the activity signals ebb kept from Postgres")?,
    };
    warn_unrecorded_signals(&set, &recorded);
    let table = prices_with_quotes(&args.prices, &source).await?;
    add_prices(table.as_ref(), &mut fleet);
    check_prices(&fleet, &args.prices)?;
    let pools = match &args.interruptions {
        Some(path) => Some(read_pools(
            path,
            &fleet.prices,
            &zones,
            args.checkpoint_every,
        )?),
        None => None,
    };
    let options = Options {
        levers: crate::cloud::levers(),
        from: args.from,
        to: args.to,
        tick: args.tick,
        busy_threshold: args.busy_threshold,
    };
    let sets: Vec<&PolicySet> = std::iter::once(&set).chain(baseline.as_ref()).collect();
    let span = crate::replay::readings_span(args.from, args.to, &sets);
    // The replay blocks this thread on its workers, and a Postgres source on its queries.
    let report = tokio::task::block_in_place(|| {
        let feed = |send: &SyncSender<Vec<Recording>>| match &source {
            Source::Files {
                fleet: path,
                utilisation,
            } => stream_chunks(utilisation, path, &fleet.instances, send),
            Source::Store(store, runtime) => {
                replay_store::stream_chunks(store, runtime, &fleet.instances, span, send)
            }
        };
        replay_all(
            &source.name(),
            options,
            &set,
            !recorded.is_empty(),
            baseline.as_ref(),
            &fleet,
            &prior,
            pools.as_ref(),
            feed,
        )
    })?;
    let uncheckpointed = match &pools {
        Some(pools) => crate::replay::without_checkpoints(pools, &set, &fleet.instances, args.from),
        None => Vec::new(),
    };
    if !uncheckpointed.is_empty() {
        eprintln!(
            "warning: the recording shows no checkpoint of {} (no ebb:checkpoint-at at or before --from, no --checkpoint-every): the replay assumes they do not checkpoint, so no spot move is made for them",
            uncheckpointed.join(", ")
        );
    }
    let mut report = report;
    if let Some(table) = &table {
        report.apply_prices(table, &fleet);
    }
    report.apply_budgets(&set);
    out!(
        "{}",
        match args.format {
            ReplayFormat::Table =>
                report.table() + &crate::replay::pools_table(&report.dollars, &uncheckpointed),
            ReplayFormat::Json => report.json(),
            ReplayFormat::Markdown => report.markdown(),
        }
    );
    Ok(ExitCode::SUCCESS)
}

/// The price table of `--prices` (`EBB_PRICES` from Postgres), with the clouds' quotes that
/// `serve` and `tick` kept laid over it when the replay reads from Postgres.
pub(super) async fn prices_with_quotes(
    prices: &PricesArg,
    source: &Source<'_>,
) -> Result<Option<PriceTable>> {
    let table = match &prices.prices {
        Some(path) => Some(crate::cloud::prices::load(path)?),
        None => None,
    };
    match source {
        Source::Store(store, _) => Ok(Some(
            store
                .quoted_table(table.unwrap_or_default())
                .await
                .context("cannot read the clouds' price quotes from Postgres")?,
        )),
        Source::Files { .. } => Ok(table),
    }
}

/// `table` filling in the on-demand prices the fleet leaves out: every type of every region,
/// each region from the table of its currency, none for a region whose boxes are billed in
/// another (an Alibaba Cloud box is priced in yuan, never from the dollars' `prices`).
pub(super) fn add_prices(table: Option<&PriceTable>, fleet: &mut Fleet) {
    let Some(table) = table else {
        return;
    };
    let billed_in: HashMap<&str, &'static str> = fleet
        .instances
        .iter()
        .map(|i| (i.region.as_str(), i.billing.cloud.currency()))
        .collect();
    let tables = std::iter::once(("USD", table)).chain(
        table
            .other_currencies
            .iter()
            .map(|(code, t)| (code.as_str(), t)),
    );
    for (currency, theirs) in tables {
        for (region, types) in &theirs.prices {
            if billed_in
                .get(region.as_str())
                .is_some_and(|c| *c != currency)
            {
                continue;
            }
            let prices = fleet.prices.entry(region.clone()).or_default();
            for (instance_type, price) in types {
                let known = prices.entry(instance_type.clone()).or_default();
                known.on_demand.get_or_insert(*price);
            }
        }
    }
}

/// Refuses a fleet some of whose instances the replay cannot price, naming every type it lacks
/// at once, with where to add them: one missing price at a time would take a run for each.
pub(super) fn check_prices(fleet: &Fleet, prices: &PricesArg) -> Result<()> {
    let types = crate::replay::unpriced(&fleet.prices, &fleet.instances);
    if types.is_empty() {
        return Ok(());
    }
    let add = match &prices.prices {
        Some(table) => format!(
            "add them to {} under prices: REGION: TYPE (an Alibaba Cloud or Tencent Cloud box's under other_currencies: CNY: prices: REGION: TYPE, in yuan)",
            table.display()
        ),
        None => "add them to the fleet file's prices, or give --prices a table that has them (like deploy/prices.yaml)".to_string(),
    };
    bail!(
        "no on-demand price for {} instance type(s) the replay costs: {}; {add}",
        types.len(),
        types.join(", ")
    )
}

/// Replays the recording on one worker per core while it is read; against the policies
/// without their activity signals too when `activity_recorded` (the file has some signal's
/// column).
#[allow(clippy::too_many_arguments)]
fn replay_all(
    source: &str,
    options: Options,
    set: &PolicySet,
    activity_recorded: bool,
    baseline: Option<&PolicySet>,
    fleet: &Fleet,
    prior: &Prior,
    pools: Option<&Pools>,
    feed: impl FnOnce(&SyncSender<Vec<Recording>>) -> Result<()>,
) -> Result<Reports> {
    let workers = std::thread::available_parallelism().map_or(1, |n| n.get());
    let replay = |chunks: &Mutex<Receiver<Vec<Recording>>>| -> Result<Replayed> {
        let mut replayer = Replayer::new(options, set, baseline, &fleet.prices, prior);
        if let Some(pools) = pools {
            replayer = replayer.with_pools(pools);
        }
        if activity_recorded {
            replayer = replayer.comparing_activity();
        }
        let mut outcomes = Vec::new();
        // Summed as the chunks go (an instance's hours by hour are not kept), per currency.
        let mut summed: BTreeMap<&'static str, (OnDemandUse, BudgetSpend)> = BTreeMap::new();
        let first_hour = HourlyUse::starting(options.from).first_hour;
        loop {
            // The lock is held only while waiting for the next chunk, not while replaying it.
            let next = chunks
                .lock()
                .map_err(|_| anyhow::anyhow!("a replay worker failed"))?
                .recv();
            let Ok(chunk) = next else {
                return Ok((outcomes, summed));
            };
            match replayer.replay(&chunk) {
                Ok(mut more) => {
                    for o in more.iter_mut() {
                        let Some(used) = o.on_demand.take() else {
                            continue;
                        };
                        let (on_demand, budgets) = summed.entry(o.currency).or_insert_with(|| {
                            let hours = OnDemandUse {
                                policies: HourlyUse::starting(options.from),
                                always_on: HourlyUse::starting(options.from),
                            };
                            (hours, BudgetSpend::default())
                        });
                        if let Some(counted) = o.budgets.take() {
                            budgets.add(&counted, &used.policies, first_hour);
                        }
                        on_demand.policies.merge(&used.policies);
                        on_demand.always_on.merge(&used.always_on);
                    }
                    outcomes.extend(more);
                }
                Err(err) => {
                    // Drained, so that the reader never waits on a queue no one empties.
                    while chunks.lock().is_ok_and(|c| c.recv().is_ok()) {}
                    return Err(err).with_context(|| format!("cannot cost the replay of {source}"));
                }
            }
        }
    };
    let mut report = Reports::new(options.from, options.to);
    // A few chunks queued at most: the recording is read while the workers replay.
    let (send, receive) = sync_channel::<Vec<Recording>>(workers);
    let receive = Mutex::new(receive);
    std::thread::scope(|scope| -> Result<()> {
        let handles: Vec<_> = (0..workers)
            .map(|_| scope.spawn(|| replay(&receive)))
            .collect();
        let read = feed(&send);
        drop(send);
        for handle in handles {
            let (outcomes, summed) = handle
                .join()
                .unwrap_or_else(|panic| std::panic::resume_unwind(panic))?;
            report.add(outcomes);
            for (currency, (on_demand, budgets)) in &summed {
                report.add_summed(currency, on_demand, budgets);
            }
        }
        read
    })?;
    Ok(report)
}

/// Reads the recording and sends it to the workers a chunk at a time, then the instances of
/// the fleet without rows (no demand recorded).
pub(super) fn stream_chunks(
    utilisation: &Path,
    fleet: &Path,
    instances: &[Instance],
    send: &SyncSender<Vec<Recording>>,
) -> Result<()> {
    let stopped = || anyhow::anyhow!("the replay stopped early");
    let mut chunk = Vec::with_capacity(CHUNK);
    let mut unseen: HashMap<&str, &Instance> =
        instances.iter().map(|i| (i.id.as_str(), i)).collect();
    read_utilisation(utilisation, fleet, &mut unseen, |recording| {
        chunk.push(recording);
        if chunk.len() == CHUNK {
            send.send(std::mem::take(&mut chunk))
                .map_err(|_| stopped())?;
        }
        Ok(())
    })?;
    for inst in instances {
        if unseen.contains_key(inst.id.as_str()) {
            chunk.push(Recording::new(inst, Vec::new()));
            if chunk.len() == CHUNK {
                send.send(std::mem::take(&mut chunk))
                    .map_err(|_| stopped())?;
            }
        }
    }
    send.send(chunk).map_err(|_| stopped())
}
