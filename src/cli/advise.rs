//! `ebb advise`: the files `ebb replay` reads (or the fleet and readings in Postgres), read
//! twice a chunk of instances at a time: once to survey when each policy's instances are busy
//! (the hours its candidate changes are drawn from), once to replay the policies and every
//! candidate on one [`crate::advise::Advisor`] per core.

use super::args::{DbArgs, PolicyDirs, PricesArg};
use super::replay::{add_prices, parse_percent, parse_tick, stream_chunks, Source};
use super::replay_store;
use crate::advise::{self, Advisor, Inputs, PlanRates, Term};
use crate::engine::Prior;
use crate::fleet::GPU_BUSY_PERCENT;
use crate::policy::PolicySet;
use crate::replay::{Options, Recording};
use crate::{policy, snapshot, when};
use anyhow::{bail, Context as _, Result};
use chrono::{DateTime, Utc};
use clap::ValueEnum;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::sync::Mutex;

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
    let set = policy::load(&args.policies.policies)
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
    let _held = add_prices(&args.prices, &mut fleet)?;
    let on_demand: BTreeMap<String, BTreeMap<String, f64>> = fleet
        .prices
        .iter()
        .map(|(region, types)| {
            let types = types
                .iter()
                .filter_map(|(t, p)| Some((t.clone(), p.on_demand?)))
                .collect();
            (region.clone(), types)
        })
        .collect();
    let commitment_rates = plan_rates(&args.prices)?;
    // The shipped catalogue, with what serve or tick last described where Postgres has it.
    let mut catalogue = advise::catalogue::shipped();
    if let Source::Store(store, _) = &source {
        let described = store
            .instance_types()
            .await
            .context("cannot read the instance catalogue from Postgres")?;
        catalogue.update(described);
    }
    let inputs = Inputs {
        options: Options {
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
    };
    let span = replay_store::readings_span(args.from, args.to, &[&set]);
    let advice = tokio::task::block_in_place(|| {
        let feed = |send: &SyncSender<Vec<Recording>>| match &source {
            Source::Files {
                fleet: path,
                utilisation,
            } => stream_chunks(utilisation, path, &fleet.instances, send),
            Source::Store(store, runtime) => {
                replay_store::stream_chunks(store, runtime, &fleet.instances, span, send)
            }
        };
        advise_all(&source.name(), &inputs, &set, &prior, feed)
    })?;
    print!(
        "{}",
        match args.format {
            AdviseFormat::Table => advice.table(),
            AdviseFormat::Json => advice.json(),
            AdviseFormat::Markdown => advice.markdown(),
        }
    );
    Ok(ExitCode::SUCCESS)
}

/// The Compute Savings Plan rates of the `--prices` table (none without one): region → type
/// → term → $/hour.
fn plan_rates(prices: &PricesArg) -> Result<BTreeMap<String, BTreeMap<String, PlanRates>>> {
    let Some(path) = &prices.prices else {
        return Ok(BTreeMap::new());
    };
    let Some(plans) = crate::cloud::prices::load(path)?.savings_plan else {
        return Ok(BTreeMap::new());
    };
    Ok(plans
        .rates
        .into_iter()
        .map(|(region, types)| {
            let types = types
                .into_iter()
                .map(|(t, rates)| {
                    let by_term = [Term::OneYear, Term::ThreeYears]
                        .into_iter()
                        .filter_map(|term| Some((term, rates.get(term)?)))
                        .collect();
                    (t, by_term)
                })
                .collect();
            (region, types)
        })
        .collect())
}

/// The two passes over the recording: the survey, then the replays.
fn advise_all(
    source: &str,
    inputs: &Inputs,
    set: &PolicySet,
    prior: &Prior,
    feed: impl Fn(&SyncSender<Vec<Recording>>) -> Result<()>,
) -> Result<advise::Advice> {
    let surveys = on_workers(
        &feed,
        advise::BusyHours::default,
        |busy: &mut advise::BusyHours, chunk: &[Recording]| {
            busy.merge(advise::survey(inputs, chunk));
            Ok(())
        },
    )?;
    let mut busy = advise::BusyHours::default();
    for s in surveys {
        busy.merge(s);
    }
    let candidates = advise::tuning::candidates(set, &busy);
    let advisors = on_workers(
        &feed,
        || Advisor::new(inputs, &candidates, prior),
        |advisor: &mut Advisor, chunk: &[Recording]| {
            advisor
                .advise(chunk)
                .with_context(|| format!("cannot cost the replay of {source}"))
        },
    )?;
    let mut advice = advise::empty(inputs, candidates.len());
    for a in advisors {
        advice.merge(a.finish());
    }
    advice.finish(&candidates, inputs.max_unserved);
    Ok(advice)
}

/// Runs `each` on every chunk `feed` sends, on one worker per core, each worker with the
/// state `start` makes; the workers' states when the feed ends.
fn on_workers<S: Send>(
    feed: impl FnOnce(&SyncSender<Vec<Recording>>) -> Result<()>,
    start: impl Fn() -> S + Sync,
    each: impl Fn(&mut S, &[Recording]) -> Result<()> + Sync,
) -> Result<Vec<S>> {
    let workers = std::thread::available_parallelism().map_or(1, |n| n.get());
    let work = |chunks: &Mutex<Receiver<Vec<Recording>>>| -> Result<S> {
        let mut state = start();
        loop {
            // The lock is held only while waiting for the next chunk, not while working on it.
            let next = chunks
                .lock()
                .map_err(|_| anyhow::anyhow!("an advise worker failed"))?
                .recv();
            let Ok(chunk) = next else {
                return Ok(state);
            };
            if let Err(err) = each(&mut state, &chunk) {
                // Drained, so that the reader never waits on a queue no one empties.
                while chunks.lock().is_ok_and(|c| c.recv().is_ok()) {}
                return Err(err);
            }
        }
    };
    let (send, receive) = sync_channel::<Vec<Recording>>(workers);
    let receive = Mutex::new(receive);
    std::thread::scope(|scope| -> Result<Vec<S>> {
        let handles: Vec<_> = (0..workers)
            .map(|_| scope.spawn(|| work(&receive)))
            .collect();
        let read = feed(&send);
        drop(send);
        let mut states = Vec::with_capacity(workers);
        for handle in handles {
            states.push(
                handle
                    .join()
                    .unwrap_or_else(|panic| std::panic::resume_unwind(panic))?,
            );
        }
        read?;
        Ok(states)
    })
}
