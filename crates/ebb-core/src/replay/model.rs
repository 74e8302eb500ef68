//! One scenario of a chunk, tick by tick: the engine decides on the modelled instances, its
//! actions change them as EC2 would (at once), and a person starts a stopped instance at the
//! tick after the recording shows demand on it (a start the engine then knows as a person's:
//! after the close, a late start). An Auto Scaling group's members move with their group's
//! decisions (`super::groups`), and no person starts one alone.

use super::activity::{self, SignalRecording};
use super::groups::{Groups, Move};
use super::pools::{Cadence, Choice, OnSpot, Pools};
use super::{demand_soon, settled, BusyCursor, Options, Recording, Span, Tally};
use crate::engine::{self, Action, Brief, Code, Decider, InstanceFacts, Prior, RECENT};
use crate::fleet::{Fleet, Instance, InstanceState, Lifecycle, Prices, Sample};
use crate::names::{CHECKPOINT_AT_TAG, MIGRATION_TAG, STOP_AT_TAG};
use crate::policy::PolicySet;
use crate::report::money::HourlyUse;
use chrono::{DateTime, Duration, SecondsFormat, Utc};
use std::collections::BTreeMap;

/// The replacement a modelled spot move launches is tagged as a migration's: what the engine
/// then knows it cannot stop (a one-time spot instance), as in production.
const MIGRATION_ID: &str = "replay";

/// How many samples older than the engine looks at an instance's view may hold.
const STALE_BATCH: usize = 64;

/// What the replay tracks of one instance beside the engine's view of it.
struct Modelled<'r> {
    samples: &'r [Sample],
    spans: &'r [Span],
    busy: BusyCursor<'r>,
    /// The first sample not yet offered to the engine.
    next_sample: usize,
    /// The last start: a stopped instance reports no utilisation, so the engine sees only
    /// samples from then on (`None`: running since before the replay, all of them).
    seen_from: Option<DateTime<Utc>>,
    /// $/hour while running.
    rate: f64,
    facts: InstanceFacts,
    /// The recording showed demand while it was stopped: a person starts it at the next tick.
    demand_while_stopped: bool,
    tally: Tally,
    /// When it ran, touching stretches merged (kept only when asked for).
    running: Option<Vec<Span>>,
    /// Hours running on demand, hour by hour from the hour of the replay's start: what
    /// commitments apply to.
    on_demand: HourlyUse,
    /// Its spot replacement's pool, when the replay models pools.
    on_spot: Option<OnSpot>,
    /// The reclaims of its replacements: type, zone, when.
    reclaimed: Vec<(String, String, DateTime<Utc>)>,
    /// How its job checkpoints, when the replay models pools and a cadence is known.
    cadence: Option<Cadence>,
    /// When its spot replacement fell back to on-demand, while it stays there.
    fell_back_at: Option<DateTime<Utc>>,
    /// Seconds on spot by pool (zone, type).
    spot_s: BTreeMap<(String, String), i64>,
}

/// What one scenario did to one instance: its measures, its hours running on demand, and when
/// it ran when that was asked for (`advise` prices each hour of it).
#[derive(Debug, Clone, Default)]
pub struct Played {
    /// The measures.
    pub tally: Tally,
    /// Hours running on demand, hour by hour from the hour of the replay's start.
    pub on_demand: HourlyUse,
    /// The stretches of time it ran, in order (empty unless asked for).
    pub running: Vec<Span>,
    /// Seconds on spot by pool (zone, type), when the replay models pools.
    pub spot_s: BTreeMap<(String, String), i64>,
}

/// Replays `chunk` under `set`: one outcome per instance, with its hours running on demand and
/// when it ran if `keep_running`. `prior` holds what ebb remembers and is updated with the
/// facts the modelled actions leave. With `pools`, spot moves go into pools chosen so, and
/// are reclaimed as their history says.
#[allow(clippy::too_many_arguments)]
pub(super) fn run(
    set: &PolicySet,
    prior: &mut Prior,
    chunk: &[&Recording],
    busy: &[Vec<Span>],
    rates: &[f64],
    o: &Options,
    prices: &Prices,
    keep_running: bool,
    pools: Option<(&Pools, Choice)>,
) -> Vec<Played> {
    // The engine needs no sample older than the longest idle window (a late start's too, and
    // a busy run's limit), and the busy check's last RECENT.
    let lookback = set
        .policies
        .iter()
        .flat_map(|p| {
            let late_start = p.late_start_idle().map(|(window, _)| window);
            let busy_run = p
                .runtime
                .as_ref()
                .and_then(|r| r.max_busy_without_checkpoint);
            p.idle
                .as_ref()
                .map(|i| i.window)
                .into_iter()
                .chain(late_start)
                .chain(busy_run)
        })
        .max()
        .unwrap_or_else(Duration::zero)
        + RECENT;
    let mut fleet = Fleet {
        instances: chunk.iter().map(|r| initial_view(&r.instance)).collect(),
        prices: prices.clone(),
        levers: o.levers,
        ..Fleet::default()
    };
    let signals = activity::signal_names(set);
    let recorded: Vec<&[SignalRecording]> = chunk.iter().map(|r| &r.activity[..]).collect();
    let unknown = activity::Unknown::default();
    let mut models: Vec<Modelled> = chunk
        .iter()
        .enumerate()
        .map(|(i, r)| Modelled {
            samples: &r.samples,
            spans: &busy[i],
            busy: BusyCursor::new(&busy[i]),
            next_sample: 0,
            seen_from: None,
            rate: rates[i],
            facts: prior.facts(&r.instance.id),
            demand_while_stopped: false,
            tally: Tally::default(),
            running: keep_running.then(Vec::new),
            on_demand: HourlyUse::starting(o.from),
            on_spot: None,
            reclaimed: Vec::new(),
            cadence: pools.and_then(|(pools, _)| {
                let rule = engine::governing_policy(set, &r.instance)?.spot.as_ref()?;
                pools.cadence(rule, r.instance.tag(CHECKPOINT_AT_TAG), o.from)
            }),
            fell_back_at: None,
            spot_s: BTreeMap::new(),
        })
        .collect();
    let mut groups = Groups::of(&fleet.instances);
    let mut person_started = vec![false; chunk.len()];
    let mut decider = Decider::new(set);
    let mut t = o.from;
    while t < o.to {
        for (i, (m, view)) in models.iter_mut().zip(&mut fleet.instances).enumerate() {
            person_started[i] = !groups.is_member(i) && m.person_start(view, t, prior);
            m.show_samples(view, t, lookback);
            m.checkpoint(view, t, o.from);
        }
        activity::readings_at(
            &signals,
            &fleet.instances,
            &recorded,
            t,
            &unknown,
            &mut fleet.activity,
        );
        let decisions = decider.decide(t, &fleet, prior);
        let moves = groups.decide(t, set, &fleet, prior);
        let end = (t + o.tick).min(o.to);
        let length = (end - t).num_seconds();
        for (i, ((m, view), d)) in models
            .iter_mut()
            .zip(&mut fleet.instances)
            .zip(&decisions)
            .enumerate()
        {
            // A person's start happened at this tick; ebb sees the instance next tick.
            if !person_started[i] {
                m.apply(d, view, t, set, prices, prior, pools);
            }
            if let Some(pools) = pools {
                m.reclaims(view, t, end, set, pools);
            }
            if let Some(to) = moves[i] {
                m.scaled(view, t, to);
            }
            m.account(view.state, t, end, length);
            if view.state == InstanceState::Running {
                m.count_spot(view.lifecycle, length);
            }
            if view.state == InstanceState::Running && view.lifecycle == Lifecycle::OnDemand {
                m.on_demand.add(&view.region, &view.instance_type, t, end);
            }
        }
        t = end;
    }
    models
        .into_iter()
        .map(|m| Played {
            tally: m.tally,
            on_demand: m.on_demand,
            running: m.running.unwrap_or_default(),
            spot_s: m.spot_s,
        })
        .collect()
}

/// The engine's view of `inst` at the start: transitions settled, no samples yet.
fn initial_view(inst: &Instance) -> Instance {
    Instance {
        state: settled(inst.state),
        gpu_util: Vec::new(),
        ..inst.clone()
    }
}

impl Modelled<'_> {
    /// Starts a stopped instance whose recording showed demand since the last tick, as its
    /// person would: ebb's rules then see a start that was not theirs.
    fn person_start(&mut self, view: &mut Instance, t: DateTime<Utc>, prior: &mut Prior) -> bool {
        let wanted = std::mem::take(&mut self.demand_while_stopped);
        if !wanted || view.state != InstanceState::Stopped {
            return false;
        }
        self.started(view, t);
        // Seen running again: the last stop is no longer ebb's, and the start is a person's
        // (as the inventory sync records them).
        self.facts.stopped_by_ebb_at = None;
        self.facts.started_by_person_at = Some(t);
        prior.set_facts(&view.id, self.facts);
        true
    }

    fn started(&mut self, view: &mut Instance, t: DateTime<Utc>) {
        view.state = InstanceState::Running;
        view.state_since = Some(t);
        view.launched_at = Some(t);
        view.gpu_util.clear();
        self.seen_from = Some(t);
        self.tally.starts += 1;
    }

    /// Counts `length` seconds running as `lifecycle`: on spot (in its replacement's pool when
    /// the replay models pools), or on demand after a fallback.
    fn count_spot(&mut self, lifecycle: Lifecycle, length: i64) {
        if let Some(on) = &self.on_spot {
            let pool = (on.zone.clone(), on.instance_type.clone());
            *self.spot_s.entry(pool).or_default() += length;
        }
        if self.fell_back_at.is_some() {
            self.tally.fallback_s += length;
        } else if lifecycle == Lifecycle::Spot {
            self.tally.spot_s += length;
        }
    }

    /// Tags its last checkpoint as its job's cadence says, while it runs busy: the snapshot's
    /// tag is of one moment, and a job that checkpoints keeps it fresh.
    fn checkpoint(&self, view: &mut Instance, t: DateTime<Utc>, from: DateTime<Utc>) {
        let Some(cadence) = self.cadence else {
            return;
        };
        let first = self.spans.partition_point(|s| s.1 <= t);
        let busy = self.spans.get(first).is_some_and(|s| s.0 <= t);
        if view.state != InstanceState::Running || !busy {
            return;
        }
        let replaced = self.on_spot.as_ref().map(|on| on.since);
        let started = self
            .seen_from
            .into_iter()
            .chain(replaced)
            .max()
            .unwrap_or(from);
        if let Some(last) = cadence.last(started, t) {
            let tag = last.to_rfc3339_opts(SecondsFormat::Secs, true);
            view.tags.insert(CHECKPOINT_AT_TAG.into(), tag);
        }
    }

    /// Offers the engine the samples up to `t` it could have read: from the last start on,
    /// no older than `lookback`.
    fn show_samples(&mut self, view: &mut Instance, t: DateTime<Utc>, lookback: Duration) {
        while let Some(s) = self.samples.get(self.next_sample).filter(|s| s.at <= t) {
            if self.seen_from.is_none_or(|f| s.at >= f) {
                view.gpu_util.push(*s);
            }
            self.next_sample += 1;
        }
        // The engine looks no further back than `lookback`: older samples change nothing, and
        // are let go a batch at a time rather than moving the others at every tick.
        let since = t - lookback;
        let old = view.gpu_util.partition_point(|s| s.at < since);
        if old >= STALE_BATCH {
            view.gpu_util.drain(..old);
        }
    }

    /// Carries out `d` on the modelled instance, and remembers what ebb would.
    #[allow(clippy::too_many_arguments)]
    fn apply(
        &mut self,
        d: &Brief,
        view: &mut Instance,
        t: DateTime<Utc>,
        set: &PolicySet,
        prices: &Prices,
        prior: &mut Prior,
        pools: Option<(&Pools, Choice)>,
    ) {
        let running = view.state == InstanceState::Running;
        let before = self.facts;
        match d.action {
            Action::Stop | Action::Hibernate if running => {
                view.state = InstanceState::Stopped;
                view.state_since = Some(t);
                self.facts.stopped_by_ebb_at = Some(t);
                self.facts.started_by_person_at = None;
                self.tally.stops += 1;
                if demand_soon(self.spans, t) {
                    self.tally.wrongful_stops += 1;
                }
            }
            Action::Start if view.state == InstanceState::Stopped => {
                self.started(view, t);
                self.facts.started_by_ebb_at = Some(t);
                self.facts.stopped_by_ebb_at = None;
                self.facts.started_by_person_at = None;
            }
            Action::Notify => {
                let stop_at = d.stop_at.unwrap_or(t);
                view.tags.insert(
                    STOP_AT_TAG.into(),
                    stop_at.to_rfc3339_opts(SecondsFormat::Secs, true),
                );
                self.facts.notified_at = Some(t);
            }
            Action::WithdrawNotice => {
                view.tags.remove(STOP_AT_TAG);
                self.facts.notified_at = None;
            }
            Action::MigrateToSpot if running => {
                if let Some((pools, choice)) = pools {
                    let placed = engine::governing_policy(set, view)
                        .and_then(|p| p.spot.as_ref())
                        .and_then(|rule| {
                            let region = &view.region;
                            let (ty, reclaimed) = (&view.instance_type, &self.reclaimed);
                            pools.place(choice, rule, region, ty, self.rate, reclaimed, t)
                        });
                    // No acceptable offer: the migration rolls back, the instance stays.
                    let Some((on_spot, price)) = placed else {
                        return;
                    };
                    self.on_spot = Some(on_spot);
                    self.rate = price;
                } else if let Some(spot) = spot_rate(set, prices, view) {
                    self.rate = spot;
                }
                view.lifecycle = Lifecycle::Spot;
                view.tags.insert(MIGRATION_TAG.into(), MIGRATION_ID.into());
            }
            _ => {}
        }
        // As the store keeps it: the wait for a busy GPU is the decision's, since first made.
        self.facts.busy_deferred_since = match d.code {
            Code::BusyDeferred => self.facts.busy_deferred_since.or(Some(t)),
            _ => None,
        };
        if self.facts != before {
            prior.set_facts(&view.id, self.facts);
        }
    }

    /// Reclaims its spot replacement at each interruption of its pool within `[t, end)`: the
    /// work lost is counted, and the job goes on where the ranking says (on-demand at the
    /// on-demand rate once no spot is left to it).
    fn reclaims(
        &mut self,
        view: &Instance,
        t: DateTime<Utc>,
        end: DateTime<Utc>,
        set: &PolicySet,
        (pools, choice): (&Pools, Choice),
    ) {
        let Some(rule) = engine::governing_policy(set, view).and_then(|p| p.spot.as_ref()) else {
            return;
        };
        // Back to spot once `back_to_spot_after` has passed since the fallback, as a migration
        // goes back, into the pool the ranking chooses then.
        let back_at = self.fell_back_at.map(|at| at + rule.back_to_spot_after);
        if let Some(back_at) = back_at.filter(|at| *at < end) {
            let at = back_at.max(t);
            let (region, ty) = (&view.region, &view.instance_type);
            // Fallen back, it runs at the on-demand rate.
            let on_demand = self.rate;
            if let Some((mut next, price)) =
                pools.place(choice, rule, region, ty, on_demand, &self.reclaimed, at)
            {
                next.since = at;
                self.rate = price;
                self.on_spot = Some(next);
                self.fell_back_at = None;
            }
        }
        while let Some(on) = self.on_spot.take() {
            let Some(at) = pools.next_reclaim(&view.region, &on, t, end) else {
                self.on_spot = Some(on);
                return;
            };
            self.reclaimed
                .push((on.instance_type.clone(), on.zone.clone(), at));
            let r = pools.reclaim(choice, rule, &view.region, &on, at, &self.reclaimed);
            let lost = r.lost.num_seconds();
            self.tally.interruptions += 1;
            self.tally.lost_work_s += lost;
            self.tally.lost_gpu_s += lost * i64::from(r.gpus);
            self.tally.lost_work += r.on_demand * lost as f64 / 3600.0;
            match r.next {
                Some((next, price)) => {
                    self.rate = price;
                    self.on_spot = Some(next);
                }
                None => {
                    self.rate = r.on_demand;
                    self.fell_back_at = Some(at);
                }
            }
        }
    }

    /// Takes a group's member out of running (its group's scale-in: a stop, as far as the
    /// replay's measures go) or brings it back (the restore: a start).
    fn scaled(&mut self, view: &mut Instance, t: DateTime<Utc>, to: Move) {
        match to {
            Move::Out if view.state == InstanceState::Running => {
                view.state = InstanceState::Stopped;
                view.state_since = Some(t);
                self.tally.stops += 1;
                if demand_soon(self.spans, t) {
                    self.tally.wrongful_stops += 1;
                }
            }
            Move::In if view.state == InstanceState::Stopped => self.started(view, t),
            _ => {}
        }
    }

    /// Counts `[t, end)`, `length` seconds, in the state the tick left the instance in.
    fn account(&mut self, state: InstanceState, t: DateTime<Utc>, end: DateTime<Utc>, length: i64) {
        let busy = self.busy.overlap(t, end).num_seconds();
        match state {
            InstanceState::Running => {
                self.tally.running_s += length;
                self.tally.idle_running_s += length - busy;
                self.tally.cost += self.rate * length as f64 / 3600.0;
                if let Some(running) = self.running.as_mut() {
                    match running.last_mut() {
                        Some(last) if last.1 == t => last.1 = end,
                        _ => running.push((t, end)),
                    }
                }
            }
            InstanceState::Stopped => {
                self.tally.unserved_busy_s += busy;
                self.demand_while_stopped = busy > 0;
            }
            _ => {}
        }
    }
}

/// The spot $/hour a move of `inst` pays: the cheapest spot price among its policy's spot
/// types (its own type when the rule names none), as the engine's spot rule chooses.
fn spot_rate(set: &PolicySet, prices: &Prices, inst: &Instance) -> Option<f64> {
    let rule = engine::governing_policy(set, inst)?.spot.as_ref()?;
    let region = prices.get(&inst.region)?;
    let own = std::slice::from_ref(&inst.instance_type);
    let types = match rule.instance_types.is_empty() {
        true => own,
        false => &rule.instance_types[..],
    };
    types
        .iter()
        .filter_map(|t| region.get(t)?.spot)
        .min_by(f64::total_cmp)
}
