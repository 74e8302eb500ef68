//! Right-sizing: the cheapest type of the catalogue that would have carried an instance's
//! recorded load with headroom, priced on the hours the policies leave it running.

use super::{monthly, Period};
use crate::engine::RECENT;
use crate::fleet::{Catalogue, Instance, Lifecycle, Sample, TypeFacts};
use crate::names::MIGRATION_TAG;
use chrono::Duration;
use std::collections::BTreeMap;

/// No type is suggested from less than this much recording: a week holds every weekday once.
pub const MIN_RECORDED: Duration = Duration::days(7);

/// A type carries a box's GPU memory when its peak is within this share of a GPU's memory.
pub const MEMORY_HEADROOM: f64 = 0.8;

/// What an instance's GPUs did over the period.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Load {
    /// The 95th percentile of the busiest GPU's utilisation, percent.
    pub busiest_p95_pct: f64,
    /// The 95th percentile of how many GPUs were busy, when the readings say.
    pub busy_gpus_p95: Option<u32>,
    /// The most GPU memory any of its GPUs held, MiB, when the readings say.
    pub peak_memory_mib: Option<f64>,
    /// From the first reading to the last one's end (a reading stands at most [`RECENT`]).
    pub recorded: Duration,
}

/// The memory used and busy GPUs of a reading, when it has them.
fn signals(s: &Sample) -> (Option<f64>, Option<u32>) {
    (s.memory_mib.map(f64::from), s.gpus_busy.map(u32::from))
}

/// The value at the `pct` percentile (nearest rank) of `values`, reordering them.
fn percentile<T: Copy + PartialOrd>(values: &mut [T], pct: f64) -> Option<T> {
    if values.is_empty() {
        return None;
    }
    let rank = ((pct / 100.0) * values.len() as f64).ceil() as usize;
    let index = rank.clamp(1, values.len()) - 1;
    let (_, nth, _) = values.select_nth_unstable_by(index, |a, b| {
        a.partial_cmp(b).unwrap_or(std::cmp::Ordering::Equal)
    });
    Some(*nth)
}

impl Load {
    /// The load `samples` (oldest first) record. A reading without memory or busy GPUs leaves
    /// those unknown for the whole period: a peak read from part of it could be too low.
    pub fn of(samples: &[Sample]) -> Option<Load> {
        let (first, last) = (samples.first()?, samples.last()?);
        let mut utilisation: Vec<f64> = samples.iter().map(|s| s.percent).collect();
        let mut busy = Vec::with_capacity(samples.len());
        let mut peak: Option<f64> = Some(0.0);
        let mut every_busy = true;
        for s in samples {
            let (memory, busy_gpus) = signals(s);
            peak = match (peak, memory) {
                (Some(p), Some(m)) => Some(p.max(m)),
                _ => None,
            };
            match busy_gpus {
                Some(b) => busy.push(b),
                None => every_busy = false,
            }
        }
        Some(Load {
            busiest_p95_pct: percentile(&mut utilisation, 95.0)?,
            busy_gpus_p95: every_busy.then(|| percentile(&mut busy, 95.0)).flatten(),
            peak_memory_mib: peak,
            recorded: last.at + RECENT - first.at,
        })
    }
}

/// A cheaper type for one instance.
#[derive(Debug, Clone, PartialEq)]
pub struct Suggestion {
    /// The instance.
    pub instance: String,
    /// Its type.
    pub instance_type: String,
    /// The type suggested.
    pub suggested_type: String,
    /// Why, in one line.
    pub why: String,
    /// What it would save in a month (730 hours), on the hours the policies leave it running,
    /// in `currency`.
    pub monthly_savings: f64,
    /// The currency its cloud bills it in (its region's prices are in it).
    pub currency: &'static str,
}

/// What right-sizing needs of the whole fleet: the catalogue and on-demand prices.
#[derive(Debug, Clone, Copy)]
pub struct Sizing<'a> {
    /// The types to choose from.
    pub catalogue: &'a Catalogue,
    /// On-demand $/hour: region → type → price.
    pub on_demand: &'a BTreeMap<String, BTreeMap<String, f64>>,
}

/// Whether `inst` may be given another type: never a spot instance or a spot move's
/// replacement (ebb launched it for a migration), never one something else owns.
fn resizable(inst: &Instance) -> bool {
    inst.lifecycle == Lifecycle::OnDemand
        && inst.tag(MIGRATION_TAG).is_none()
        && inst.owner().is_none()
}

fn gib(mib: f64) -> f64 {
    mib / 1024.0
}

impl Sizing<'_> {
    /// The cheapest type that would have carried `load` (its p95 busy GPUs within the type's
    /// GPUs, at least one; its peak memory within [`MEMORY_HEADROOM`] of a GPU's; a GPU of the
    /// same maker and the same or a newer generation), when it is cheaper than the instance's
    /// own on the `running_s` seconds the policies leave it running over `period`.
    pub fn suggest(
        &self,
        inst: &Instance,
        load: &Load,
        running_s: i64,
        period: &Period,
    ) -> Option<Suggestion> {
        if !resizable(inst) || load.recorded < MIN_RECORDED || running_s <= 0 {
            return None;
        }
        let (busy, peak) = (load.busy_gpus_p95?, load.peak_memory_mib?);
        let own = self.catalogue.get(&inst.instance_type)?;
        let prices = self.on_demand.get(&inst.region)?;
        let own_price = *prices.get(&inst.instance_type)?;
        let carries = |facts: &TypeFacts| {
            facts.gpus >= busy.max(1)
                && peak <= MEMORY_HEADROOM * f64::from(facts.gpu_memory_mib)
                && facts.can_replace(own)
        };
        let (suggested, price) = self
            .catalogue
            .types
            .iter()
            .filter(|(name, facts)| *name != &inst.instance_type && carries(facts))
            .filter_map(|(name, _)| Some((name, *prices.get(name)?)))
            .filter(|(_, price)| *price < own_price)
            .min_by(|a, b| a.1.total_cmp(&b.1).then_with(|| a.0.cmp(b.0)))?;
        let saved = (own_price - price) * running_s as f64 / 3600.0;
        let monthly_savings = monthly(saved, period);
        let currency = inst.billing.cloud.currency();
        let why = format!(
            "busiest GPU p95 {:.0} %, p95 {busy} of {} GPUs busy, peak {:.1} GiB: {suggested} would carry it, {} a month less",
            load.busiest_p95_pct,
            own.gpus,
            gib(peak),
            crate::budget::money(monthly_savings, currency),
        );
        Some(Suggestion {
            instance: inst.id.clone(),
            instance_type: inst.instance_type.clone(),
            suggested_type: suggested.clone(),
            why,
            monthly_savings,
            currency,
        })
    }
}
