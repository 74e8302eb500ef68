//! Working the advice out over a whole recording: the two passes (the survey, then the
//! replays), each on worker threads fed a chunk of instances at a time by whoever reads the
//! recording (`ebb advise` from files or Postgres, the console's `/advice` from Postgres).
//! The reading is the caller's; here is only the arithmetic and the threads.

use super::{Advice, Advisor, BusyHours, Inputs, PlanRates};
use crate::engine::Prior;
use crate::fleet::money::{PriceTable, Term};
use crate::fleet::Prices;
use crate::policy::PolicySet;
use crate::replay::{Recording, ReplayError};
use std::collections::BTreeMap;
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::sync::Mutex;

/// Why the advice could not be worked out.
#[derive(Debug, thiserror::Error)]
pub enum AdviseError {
    /// The recording could not be read (the reader's message, with its causes).
    #[error("{0}")]
    Read(String),
    /// An instance could not be costed.
    #[error("cannot cost the replay of {source_name}: {error}")]
    Replay {
        /// What was read: a file, or the fleet in Postgres.
        source_name: String,
        /// Why.
        error: ReplayError,
    },
    /// A worker thread stopped without an answer.
    #[error("an advise worker failed")]
    Worker,
}

/// The on-demand $/hour of `prices`: region → type → price (right-sizing's choices).
pub fn on_demand(prices: &Prices) -> BTreeMap<String, BTreeMap<String, f64>> {
    prices
        .iter()
        .map(|(region, types)| {
            let types = types
                .iter()
                .filter_map(|(t, p)| Some((t.clone(), p.on_demand?)))
                .collect();
            (region.clone(), types)
        })
        .collect()
}

/// The on-demand prices of `table` as the replay prices instances, for a fleet that has none
/// of its own (one read from Postgres).
pub fn replay_prices(table: &PriceTable) -> Prices {
    table
        .prices
        .iter()
        .map(|(region, types)| {
            let types = types
                .iter()
                .map(|(t, p)| {
                    let price = crate::fleet::Price {
                        on_demand: Some(*p),
                        spot: None,
                    };
                    (t.clone(), price)
                })
                .collect();
            (region.clone(), types)
        })
        .collect()
}

/// The Compute Savings Plan rates of `table`: region → type → term → $/hour (none without
/// them).
pub fn plan_rates(table: &PriceTable) -> BTreeMap<String, BTreeMap<String, PlanRates>> {
    let Some(plans) = &table.savings_plan else {
        return BTreeMap::new();
    };
    plans
        .rates
        .iter()
        .map(|(region, types)| {
            let types = types
                .iter()
                .map(|(t, rates)| {
                    let by_term = [Term::OneYear, Term::ThreeYears]
                        .into_iter()
                        .filter_map(|term| Some((term, rates.get(term)?)))
                        .collect();
                    (t.clone(), by_term)
                })
                .collect();
            (region.clone(), types)
        })
        .collect()
}

/// `table` and each of its other currencies' tables, with their currencies: where the billing
/// model's prices are looked up (`Inputs::subscription_tables`).
pub fn subscription_tables(table: &PriceTable) -> Vec<(&str, &PriceTable)> {
    std::iter::once(("USD", table))
        .chain(
            table
                .other_currencies
                .iter()
                .map(|(code, other)| (code.as_str(), other)),
        )
        .collect()
}

/// The two passes over the recording `feed` sends (it is called twice), on `workers`
/// threads: the survey of when each policy's instances are busy, then the replays of the
/// policies and of every candidate change drawn from it. `source_name` names the recording in
/// errors.
pub fn advise_all(
    source_name: &str,
    inputs: &Inputs,
    set: &PolicySet,
    prior: &Prior,
    workers: usize,
    feed: impl Fn(&SyncSender<Vec<Recording>>) -> Result<(), AdviseError>,
) -> Result<Advice, AdviseError> {
    let surveys = on_workers(
        workers,
        &feed,
        BusyHours::default,
        |busy: &mut BusyHours, chunk: &[Recording]| {
            busy.merge(super::survey(inputs, chunk));
            Ok(())
        },
    )?;
    let mut busy = BusyHours::default();
    for s in surveys {
        busy.merge(s);
    }
    let candidates = super::tuning::candidates(set, &busy);
    let advisors = on_workers(
        workers,
        &feed,
        || Advisor::new(inputs, &candidates, prior),
        |advisor: &mut Advisor, chunk: &[Recording]| {
            advisor.advise(chunk).map_err(|error| AdviseError::Replay {
                source_name: source_name.to_string(),
                error,
            })
        },
    )?;
    let mut advice = super::empty(inputs, candidates.len());
    for a in advisors {
        advice.merge(a.finish());
    }
    advice.finish(&candidates, inputs.max_unserved);
    Ok(advice)
}

/// Runs `each` on every chunk `feed` sends, on `workers` threads (at least one), each with
/// the state `start` makes; the workers' states when the feed ends.
fn on_workers<S: Send>(
    workers: usize,
    feed: impl FnOnce(&SyncSender<Vec<Recording>>) -> Result<(), AdviseError>,
    start: impl Fn() -> S + Sync,
    each: impl Fn(&mut S, &[Recording]) -> Result<(), AdviseError> + Sync,
) -> Result<Vec<S>, AdviseError> {
    let workers = workers.max(1);
    let work = |chunks: &Mutex<Receiver<Vec<Recording>>>| -> Result<S, AdviseError> {
        let mut state = start();
        loop {
            // The lock is held only while waiting for the next chunk, not while working on it.
            let next = chunks.lock().map_err(|_| AdviseError::Worker)?.recv();
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
    std::thread::scope(|scope| -> Result<Vec<S>, AdviseError> {
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
