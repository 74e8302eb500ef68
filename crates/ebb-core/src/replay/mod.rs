//! `ebb replay`: what a policy set would have done over recorded GPU utilisation, against
//! keeping every instance running (`always_on`) and running each exactly while it is busy
//! (`oracle`), against the same policies stopping people's starts after the close at once
//! (`late_start_enforce`), against the same policies without their activity signals
//! (`without_activity`), and against another policy set (`baseline`).
//!
//! Pure, like the engine it runs: the recording and the snapshot come in as values, the
//! measures go out as numbers. Instances are replayed a chunk at a time (decisions are per
//! instance, so a chunk needs nothing of the others), each chunk tick by tick on virtual time
//! with the real engine ([`engine::Decider`]: `decide`'s verdicts, without the reason text),
//! each decision's action applied to a modelled fleet (`model`); the members of an Auto
//! Scaling group are scaled with their group (`groups`), never one by one. Demand is a sample at or
//! above the busy threshold; a sample stands for the time until the next one, at most
//! [`RECENT`] (the engine's coverage rule).

mod activity;
mod groups;
mod model;
mod pools;
mod report;
mod unpriced;

pub use activity::SignalRecording;
pub use model::Played;
pub use pools::{table as pools_table, without_checkpoints, Choice, Pools};
pub use report::{
    BudgetPeriod, BudgetSpend, BudgetUse, InstanceOutcome, Net, OnDemandUse, Report, Reports,
    Scenarios, SpotPools, Tally,
};
pub use unpriced::unpriced;

use crate::engine::{self, Prior, RECENT};
use crate::fleet::activity::SignalUses;
use crate::fleet::{Instance, InstanceState, Levers, Lifecycle, Prices, Sample};
use crate::policy::{LateStart, PolicySet};
use crate::report::money::HourlyUse;
use chrono::{DateTime, Duration, Utc};
use std::borrow::Cow;
use std::collections::HashMap;

/// How a replay runs.
#[derive(Debug, Clone, Copy)]
pub struct Options {
    /// The first tick, and the start of the accounting.
    pub from: DateTime<Utc>,
    /// The end of the accounting (exclusive).
    pub to: DateTime<Utc>,
    /// The virtual time between two decisions (ebb's `EBB_TICK`).
    pub tick: Duration,
    /// A sample at or above this percent is demand.
    pub busy_threshold: f64,
    /// What ebb can do on each cloud (a spot move is replayed only where it has them).
    pub levers: Levers,
}

/// A stop followed by demand within this long is wrongful: it cut off someone's work.
pub const WRONGFUL_WITHIN: Duration = Duration::minutes(30);

/// How many instances are replayed together: enough that each tick's schedules are worked out
/// for many, few enough that their samples stay small in memory.
pub const CHUNK: usize = 128;

/// One instance's recording: the instance as the snapshot has it at `from` (its own
/// `gpu_util` is not used), and its GPU utilisation samples.
#[derive(Debug, Clone)]
pub struct Recording {
    /// The instance at `from`.
    pub instance: Instance,
    /// Its samples, oldest first.
    pub samples: Vec<Sample>,
    /// Its activity signals' recordings, by signal (none unless the recording has them).
    pub activity: Vec<SignalRecording>,
}

impl Recording {
    /// `instance`'s recording of `samples` (in any order), without the instance's own
    /// `gpu_util`.
    pub fn new(instance: &Instance, mut samples: Vec<Sample>) -> Recording {
        samples.sort_by_key(|s| s.at);
        // Queued chunks hold a month of samples per instance: without the slack of growing.
        samples.shrink_to_fit();
        Recording {
            instance: Instance {
                gpu_util: Vec::new(),
                ..instance.clone()
            },
            samples,
            activity: Vec::new(),
        }
    }

    /// The recording with its activity signals' recordings.
    pub fn with_activity(self, activity: Vec<SignalRecording>) -> Recording {
        Recording { activity, ..self }
    }
}

/// The span of readings a replay from `from` to `to` needs: back far enough that the first
/// tick's longest idle window (of `sets`) is covered, on past `to` as far as a stop's demand
/// coming back is looked for.
pub fn readings_span(
    from: DateTime<Utc>,
    to: DateTime<Utc>,
    sets: &[&PolicySet],
) -> (DateTime<Utc>, DateTime<Utc>) {
    let longest = sets
        .iter()
        .flat_map(|set| &set.policies)
        .filter_map(|p| p.idle.as_ref().map(|i| i.window))
        .max()
        .unwrap_or(Duration::zero());
    (from - longest - RECENT, to + WRONGFUL_WITHIN + RECENT)
}

/// What ebb kept of a chunk's instances, by instance id: their GPU readings, and the uses
/// each activity signal showed.
pub type Kept = (HashMap<String, Vec<Sample>>, HashMap<String, SignalUses>);

/// The recordings of `instances`, [`CHUNK`] at a time: `read` gives what was kept of a chunk's
/// ids (an instance without readings is recorded with none; its signals' uses are played at
/// its readings' times, as `ebb metrics export` writes them), `send` takes each chunk's
/// recordings. The reading is the caller's (Postgres, for `ebb replay` and `ebb advise`
/// without files, and the console's `/advice`).
pub fn in_chunks<E>(
    instances: &[Instance],
    mut read: impl FnMut(&[String]) -> Result<Kept, E>,
    mut send: impl FnMut(Vec<Recording>) -> Result<(), E>,
) -> Result<(), E> {
    for chunk in instances.chunks(CHUNK) {
        let ids: Vec<String> = chunk.iter().map(|i| i.id.clone()).collect();
        let (mut readings, mut uses) = read(&ids)?;
        let recordings = chunk
            .iter()
            .map(|inst| {
                let samples = readings.remove(&inst.id).unwrap_or_default();
                let times: Vec<DateTime<Utc>> = samples.iter().map(|s| s.at).collect();
                let activity = uses
                    .remove(&inst.id)
                    .unwrap_or_default()
                    .iter()
                    .map(|(name, used)| SignalRecording::at_rows(name, &times, used))
                    .collect();
                Recording::new(inst, samples).with_activity(activity)
            })
            .collect();
        send(recordings)?;
    }
    Ok(())
}

/// Why a chunk could not be replayed.
#[derive(Debug, thiserror::Error)]
pub enum ReplayError {
    /// An instance that runs in some scenario has no price to cost it at.
    #[error(
        "no on-demand price for {instance_type} in {region} (instance {instance}): add it to the fleet file's prices, or give --prices a table that has it"
    )]
    NoPrice {
        /// The instance.
        instance: String,
        /// Its type.
        instance_type: String,
        /// Its region.
        region: String,
    },
}

/// A half-open stretch of time `[start, end)`.
pub type Span = (DateTime<Utc>, DateTime<Utc>);

/// A policy set with what ebb remembers under it, as the replay changes it.
struct Scenario<'a> {
    set: Cow<'a, PolicySet>,
    prior: Prior,
}

/// Replays chunks of instances; the prior facts of each scenario evolve with its actions.
pub struct Replayer<'a> {
    options: Options,
    prices: &'a Prices,
    policies: Scenario<'a>,
    baseline: Option<Scenario<'a>>,
    /// The policies with `late_start: enforce`, when some of them keep late starts.
    late_start_enforce: Option<Scenario<'a>>,
    /// The policies without their idle rules' activity signals, when some have them.
    without_activity: Option<Scenario<'a>>,
    /// The spot pools, when modelled: the policies place by expected cost, and this scenario
    /// replays them placing by price alone.
    pools: Option<(&'a Pools, Scenario<'a>)>,
}

/// `set` with `late_start: enforce` in every policy, when some policy keeps people's starts
/// after the close (otherwise it would replay the same).
fn enforcing_late_starts(set: &PolicySet) -> Option<PolicySet> {
    if set.policies.iter().all(|p| p.late_start_idle().is_none()) {
        return None;
    }
    let mut enforcing = set.clone();
    for wh in enforcing
        .policies
        .iter_mut()
        .filter_map(|p| p.work_hours.as_mut())
    {
        wh.late_start = LateStart::Enforce;
    }
    Some(enforcing)
}

/// `set` without its idle rules' activity signals, when some policy has them (otherwise it
/// would replay the same).
fn without_activity(set: &PolicySet) -> Option<PolicySet> {
    if activity::signal_names(set).is_empty() {
        return None;
    }
    let mut without = set.clone();
    for idle in without.policies.iter_mut().filter_map(|p| p.idle.as_mut()) {
        idle.activity.clear();
    }
    Some(without)
}

impl<'a> Replayer<'a> {
    /// A replay of `policies` (and `baseline`, when given) over instances priced by `prices`,
    /// starting from what `prior` says ebb remembers at `options.from` (and its overrides).
    pub fn new(
        options: Options,
        policies: &'a PolicySet,
        baseline: Option<&'a PolicySet>,
        prices: &'a Prices,
        prior: &Prior,
    ) -> Self {
        Replayer {
            options,
            prices,
            policies: Scenario {
                set: Cow::Borrowed(policies),
                prior: prior.clone(),
            },
            baseline: baseline.map(|set| Scenario {
                set: Cow::Borrowed(set),
                prior: prior.clone(),
            }),
            late_start_enforce: enforcing_late_starts(policies).map(|set| Scenario {
                set: Cow::Owned(set),
                prior: prior.clone(),
            }),
            without_activity: None,
            pools: None,
        }
    }

    /// The replay with a `without_activity` scenario: the policies without their idle rules'
    /// activity signals, when some have them. Only for a recording of some signal: without any,
    /// every signal is unknown, and the comparison would take the stops unknown signals hold
    /// back for stops the signals prevented.
    pub fn comparing_activity(mut self) -> Self {
        self.without_activity = without_activity(&self.policies.set).map(|set| Scenario {
            set: Cow::Owned(set),
            prior: self.policies.prior.clone(),
        });
        self
    }

    /// The replay with spot moves placed in `pools` and reclaimed as their history says: the
    /// policies by expected cost, and a `cheapest_first` scenario by price alone.
    pub fn with_pools(mut self, pools: &'a Pools) -> Self {
        let cheapest_first = Scenario {
            set: self.policies.set.clone(),
            prior: self.policies.prior.clone(),
        };
        self.pools = Some((pools, cheapest_first));
        self
    }

    /// Replays `chunk` in every scenario: one outcome per instance, in chunk order.
    pub fn replay(&mut self, chunk: &[Recording]) -> Result<Vec<InstanceOutcome>, ReplayError> {
        let o = self.options;
        let rates = chunk
            .iter()
            .map(|r| rate(self.prices, &r.instance))
            .collect::<Result<Vec<f64>, _>>()?;
        let busy: Vec<Vec<Span>> = chunk
            .iter()
            .map(|r| busy_spans(&r.samples, o.busy_threshold))
            .collect();
        let chunk_refs: Vec<&Recording> = chunk.iter().collect();
        let pools = self.pools.as_ref().map(|(p, _)| *p);
        let run_placing = |s: &mut Scenario, choice: Choice| -> Vec<Played> {
            model::run(
                &s.set,
                &mut s.prior,
                &chunk_refs,
                &busy,
                &rates,
                &o,
                self.prices,
                false,
                pools.map(|p| (p, choice)),
            )
        };
        let run = |s: &mut Scenario| run_placing(s, Choice::ExpectedCost);
        let tallies = |run: Vec<Played>| run.into_iter().map(|p| p.tally).collect();
        let mut spot_pools = vec![SpotPools::new(); chunk.len()];
        let placed = |choice: Choice, played: Vec<Played>, pools: &mut Vec<SpotPools>| {
            let mut tallies = Vec::with_capacity(played.len());
            for (i, p) in played.into_iter().enumerate() {
                for ((zone, ty), seconds) in p.spot_s {
                    pools[i].insert((choice.name(), zone, ty), seconds);
                }
                tallies.push((p.tally, p.on_demand));
            }
            tallies
        };
        let policies = placed(
            Choice::ExpectedCost,
            run(&mut self.policies),
            &mut spot_pools,
        );
        let (policies, mut on_demand): (Vec<Tally>, Vec<HourlyUse>) = policies.into_iter().unzip();
        let baseline: Option<Vec<Tally>> = self.baseline.as_mut().map(run).map(tallies);
        let late_start_enforce: Option<Vec<Tally>> =
            self.late_start_enforce.as_mut().map(run).map(tallies);
        let without_activity: Option<Vec<Tally>> =
            self.without_activity.as_mut().map(run).map(tallies);
        let cheapest_first: Option<Vec<Tally>> = self.pools.as_mut().map(|(_, s)| {
            let played = run_placing(s, Choice::CheapestFirst);
            let placed = placed(Choice::CheapestFirst, played, &mut spot_pools);
            placed.into_iter().map(|(tally, _)| tally).collect()
        });
        Ok(chunk
            .iter()
            .enumerate()
            .map(|(i, r)| {
                let live = settled(r.instance.state) != InstanceState::Terminated;
                let (always_on, oracle) = match live {
                    true => (
                        always_on(&busy[i], rates[i], &o),
                        oracle(&busy[i], rates[i], &o, r.instance.state),
                    ),
                    false => Default::default(),
                };
                let mut always_on_demand = HourlyUse::starting(o.from);
                if live && r.instance.lifecycle == Lifecycle::OnDemand {
                    always_on_demand.add(
                        &r.instance.region,
                        &r.instance.instance_type,
                        o.from,
                        o.to,
                    );
                }
                InstanceOutcome {
                    budgets: budget_use(&self.policies.set, &r.instance, rates[i]),
                    spot_pools: std::mem::take(&mut spot_pools[i]),
                    on_demand: Some(Box::new(OnDemandUse {
                        policies: std::mem::take(&mut on_demand[i]),
                        always_on: always_on_demand,
                    })),
                    instance: r.instance.id.clone(),
                    currency: r.instance.billing.cloud.currency(),
                    policy: engine::governing_policy(&self.policies.set, &r.instance)
                        .map(|p| p.name.clone()),
                    scenarios: Scenarios {
                        policies: policies[i],
                        baseline: baseline.as_ref().map(|b| b[i]),
                        late_start_enforce: late_start_enforce.as_ref().map(|e| e[i]),
                        without_activity: without_activity.as_ref().map(|w| w[i]),
                        cheapest_first: cheapest_first.as_ref().map(|c| c[i]),
                        always_on,
                        oracle,
                    },
                }
            })
            .collect())
    }
}

/// The budgets of `set` that count `inst`, and its `rate`; `None` when none does.
fn budget_use(set: &PolicySet, inst: &Instance, rate: f64) -> Option<Box<BudgetUse>> {
    let keys: Vec<(String, Option<String>)> = set
        .budgets
        .iter()
        .filter_map(|b| {
            let key = b.key_for(&inst.region, &inst.instance_type, |k| inst.tag(k))?;
            Some((b.name.clone(), key.map(str::to_string)))
        })
        .collect();
    (!keys.is_empty()).then(|| {
        Box::new(BudgetUse {
            keys,
            rate,
            gpus: inst.gpus.as_ref().map(|g| g.count),
        })
    })
}

/// One policy set replayed on chunks of instances (any of them: `ebb advise` replays each
/// candidate change of a policy on the instances that policy governs), keeping when each ran.
pub struct PolicyRun<'a> {
    options: Options,
    prices: &'a Prices,
    scenario: Scenario<'a>,
}

impl<'a> PolicyRun<'a> {
    /// A replay of `set` over instances priced by `prices`, from what `prior` remembers.
    pub fn new(
        options: Options,
        set: Cow<'a, PolicySet>,
        prices: &'a Prices,
        prior: &Prior,
    ) -> Self {
        PolicyRun {
            options,
            prices,
            scenario: Scenario {
                set,
                prior: prior.clone(),
            },
        }
    }

    /// The policies replayed.
    pub fn set(&self) -> &PolicySet {
        &self.scenario.set
    }

    /// Replays `chunk`: one outcome per instance, in chunk order, with when each ran.
    pub fn replay(&mut self, chunk: &[&Recording]) -> Result<Vec<Played>, ReplayError> {
        let o = self.options;
        let rates = chunk
            .iter()
            .map(|r| rate(self.prices, &r.instance))
            .collect::<Result<Vec<f64>, _>>()?;
        let busy: Vec<Vec<Span>> = chunk
            .iter()
            .map(|r| busy_spans(&r.samples, o.busy_threshold))
            .collect();
        let s = &mut self.scenario;
        Ok(model::run(
            &s.set,
            &mut s.prior,
            chunk,
            &busy,
            &rates,
            &o,
            self.prices,
            true,
            None,
        ))
    }
}

/// The state an instance is taken to be in: transitions as where they lead.
pub fn settled(state: InstanceState) -> InstanceState {
    match state {
        InstanceState::Pending => InstanceState::Running,
        InstanceState::Stopping => InstanceState::Stopped,
        InstanceState::ShuttingDown => InstanceState::Terminated,
        s => s,
    }
}

/// What an hour of `inst` costs while running at `from`, in the currency its cloud bills in:
/// its spot price when it is spot (the on-demand one when there is none), its on-demand price
/// otherwise. Nothing for a terminated one, which never runs.
pub fn rate(prices: &Prices, inst: &Instance) -> Result<f64, ReplayError> {
    if settled(inst.state) == InstanceState::Terminated {
        return Ok(0.0);
    }
    let price = prices
        .get(&inst.region)
        .and_then(|p| p.get(&inst.instance_type));
    let spot = price
        .and_then(|p| p.spot)
        .filter(|_| inst.lifecycle == Lifecycle::Spot);
    spot.or(price.and_then(|p| p.on_demand))
        .ok_or_else(|| ReplayError::NoPrice {
            instance: inst.id.clone(),
            instance_type: inst.instance_type.clone(),
            region: inst.region.clone(),
        })
}

/// The stretches of demand in `samples`: each sample at or above `threshold` stands until the
/// next sample, at most [`RECENT`]; touching stretches merge.
pub fn busy_spans(samples: &[Sample], threshold: f64) -> Vec<Span> {
    let mut spans: Vec<Span> = Vec::new();
    for (i, s) in samples.iter().enumerate() {
        if s.percent < threshold {
            continue;
        }
        let end = samples
            .get(i + 1)
            .map_or(s.at + RECENT, |n| n.at.min(s.at + RECENT));
        if end <= s.at {
            continue;
        }
        match spans.last_mut() {
            Some(last) if last.1 >= s.at => last.1 = last.1.max(end),
            _ => spans.push((s.at, end)),
        }
    }
    spans
}

/// Sums the demand within stretches of time asked for in order, each after the last.
pub(crate) struct BusyCursor<'s> {
    spans: &'s [Span],
    next: usize,
}

impl<'s> BusyCursor<'s> {
    /// A cursor at the start of `spans`.
    pub(crate) fn new(spans: &'s [Span]) -> Self {
        BusyCursor { spans, next: 0 }
    }

    /// How much of `[a, b)` is demand; `a` no earlier than the last call's `b`.
    pub(crate) fn overlap(&mut self, a: DateTime<Utc>, b: DateTime<Utc>) -> Duration {
        while self.spans.get(self.next).is_some_and(|s| s.1 <= a) {
            self.next += 1;
        }
        self.spans[self.next..]
            .iter()
            .take_while(|s| s.0 < b)
            .map(|s| s.1.min(b) - s.0.max(a))
            .sum()
    }
}

/// Whether demand is recorded in `(t, t + WRONGFUL_WITHIN]`, or still goes on at `t`.
pub(crate) fn demand_soon(spans: &[Span], t: DateTime<Utc>) -> bool {
    let first = spans.partition_point(|s| s.1 <= t);
    spans.get(first).is_some_and(|s| s.0 <= t + WRONGFUL_WITHIN)
}

fn seconds(d: Duration) -> i64 {
    d.num_seconds()
}

/// Every hour of the period running, at the instance's rate.
fn always_on(busy: &[Span], rate: f64, o: &Options) -> Tally {
    let running = seconds(o.to - o.from);
    let busy = seconds(BusyCursor::new(busy).overlap(o.from, o.to));
    Tally {
        running_s: running,
        idle_running_s: running - busy,
        cost: rate * running as f64 / 3600.0,
        ..Tally::default()
    }
}

/// Running exactly while there is demand: started at each stretch's start (unless running
/// already at `from`), stopped at each end before `to`.
fn oracle(busy: &[Span], rate: f64, o: &Options, state: InstanceState) -> Tally {
    let inside: Vec<Span> = busy
        .iter()
        .filter(|s| s.1 > o.from && s.0 < o.to)
        .map(|s| (s.0.max(o.from), s.1.min(o.to)))
        .collect();
    let running: i64 = inside.iter().map(|s| seconds(s.1 - s.0)).sum();
    let was_running = settled(state) == InstanceState::Running;
    let starts = inside
        .iter()
        .filter(|s| s.0 > o.from || !was_running)
        .count();
    let stopped_at: Vec<DateTime<Utc>> = inside.iter().map(|s| s.1).filter(|e| *e < o.to).collect();
    Tally {
        running_s: running,
        cost: rate * running as f64 / 3600.0,
        starts: starts as u64,
        stops: stopped_at.len() as u64,
        wrongful_stops: stopped_at.iter().filter(|t| demand_soon(busy, **t)).count() as u64,
        ..Tally::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: &str) -> DateTime<Utc> {
        crate::when::parse_time(s).unwrap()
    }

    fn samples(from: &str, every_min: i64, percents: &[f64]) -> Vec<Sample> {
        percents
            .iter()
            .enumerate()
            .map(|(i, &percent)| {
                Sample::new(at(from) + Duration::minutes(every_min * i as i64), percent)
            })
            .collect()
    }

    #[test]
    fn a_busy_sample_stands_until_the_next_at_most_ten_minutes() {
        // 5-minute samples: busy, busy, idle; then a lone busy one 30 minutes later.
        let mut s = samples("2026-11-30T09:00:00Z", 5, &[50.0, 50.0, 1.0]);
        s.push(Sample::new(at("2026-11-30T09:40:00Z"), 80.0));
        let spans = busy_spans(&s, 5.0);
        assert_eq!(
            spans,
            vec![
                (at("2026-11-30T09:00:00Z"), at("2026-11-30T09:10:00Z")),
                (at("2026-11-30T09:40:00Z"), at("2026-11-30T09:50:00Z")),
            ]
        );
        // A gap of 20 minutes after a busy sample: it counts for 10 only.
        let gap = vec![
            Sample::new(at("2026-11-30T09:00:00Z"), 50.0),
            Sample::new(at("2026-11-30T09:20:00Z"), 50.0),
        ];
        let spans = busy_spans(&gap, 5.0);
        assert_eq!(spans.len(), 2);
        assert_eq!(spans[0].1, at("2026-11-30T09:10:00Z"));
        let mut cursor = BusyCursor::new(&spans);
        assert_eq!(
            cursor.overlap(at("2026-11-30T09:05:00Z"), at("2026-11-30T09:25:00Z")),
            Duration::minutes(10)
        );
        assert_eq!(
            cursor.overlap(at("2026-11-30T09:25:00Z"), at("2026-11-30T10:00:00Z")),
            Duration::minutes(5)
        );
    }

    #[test]
    fn demand_soon_after_a_stop_is_within_thirty_minutes() {
        let spans = vec![(at("2026-11-30T10:00:00Z"), at("2026-11-30T10:10:00Z"))];
        assert!(demand_soon(&spans, at("2026-11-30T09:30:00Z")));
        assert!(!demand_soon(&spans, at("2026-11-30T09:29:00Z")));
        assert!(
            demand_soon(&spans, at("2026-11-30T10:05:00Z")),
            "still busy"
        );
        assert!(!demand_soon(&spans, at("2026-11-30T10:10:00Z")));
    }

    #[test]
    fn always_on_and_the_oracle_cost_what_they_run() {
        let o = Options {
            from: at("2026-11-30T00:00:00Z"),
            to: at("2026-12-01T00:00:00Z"),
            tick: Duration::minutes(5),
            busy_threshold: 5.0,
            levers: Levers::default(),
        };
        // Busy 09:00-11:00 and 11:20-12:00.
        let spans = vec![
            (at("2026-11-30T09:00:00Z"), at("2026-11-30T11:00:00Z")),
            (at("2026-11-30T11:20:00Z"), at("2026-11-30T12:00:00Z")),
        ];
        let a = always_on(&spans, 2.0, &o);
        assert_eq!(a.running_s, 24 * 3600);
        assert_eq!(a.idle_running_s, 24 * 3600 - 160 * 60);
        assert!((a.cost - 48.0).abs() < 1e-9);
        let oracle = oracle(&spans, 2.0, &o, InstanceState::Stopped);
        assert_eq!(oracle.running_s, 160 * 60);
        assert_eq!(oracle.idle_running_s, 0);
        assert!((oracle.cost - 2.0 * 160.0 / 60.0).abs() < 1e-9);
        assert_eq!((oracle.starts, oracle.stops), (2, 2));
        assert_eq!(
            oracle.wrongful_stops, 1,
            "the 11:00 stop, demand again at 11:20"
        );
    }
}
