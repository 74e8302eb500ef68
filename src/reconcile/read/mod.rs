//! The tick's reads beyond the listing: GPU utilisation, activity signals and prices, only for
//! the instances whose governing policy looks at them. CloudWatch bills every metric read, and a large fleet's
//! readings are its largest data, so what to read is worked out from the policies and the
//! listing before anything is decided.

use super::{ReadFailure, Reconciler, TickError};
use crate::cloud::prometheus::Prometheus;
use crate::cloud::Provider;
use crate::engine::{self, BudgetStanding};
use crate::fleet::{Fleet, Instance, InstanceState, Lifecycle, Price, Sample};
use crate::names::INTERRUPTIBLE_TAG;
use crate::policy::{AtLimit, Policy, PolicySet};
use chrono::{DateTime, Duration, Utc};
use incremental::{period_of, GpuRead};
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

mod activity;
mod cloudwatch;
mod incremental;

pub(super) use cloudwatch::MetricsRead;
pub(super) use incremental::Asked;

/// GPU readings are read this much further back than the longest idle window, so that the
/// window's start is covered.
const READING_MARGIN: Duration = Duration::minutes(10);

/// How far back each tick keeps the readings it took from Prometheus: ticks come at least this
/// often, and each tick's window reaches further back than that, so every five minutes is kept
/// once or twice, not once for each tick whose window covers it.
const PROMETHEUS_KEPT_BACK: Duration = Duration::minutes(15);

/// What a tick reads, by region.
#[derive(Debug, Default)]
struct Wanted {
    /// GPU utilisation: the positions in the listing of the instances to read, and the longest
    /// window any of them needs.
    pub readings: BTreeMap<String, (Vec<usize>, Duration)>,
    /// Prices: the instance types to price.
    pub prices: BTreeMap<String, BTreeSet<String>>,
    /// The activity signals to read.
    pub activity: activity::Wanted,
}

/// What to read for `fleet` under `set`:
/// - GPU utilisation of the running instances whose governing policy looks at it (an idle
///   rule, or work hours whose stop waits while the GPU is busy), over its longest window,
///   and of those a person started (`started_by_person`) under a policy that keeps a late
///   start until it is idle, over that window too, and under a policy with
///   `runtime.max_busy_without_checkpoint`, over that, and of those a spent budget stops
///   once idle or `max_defer` later, over the last 10 minutes;
/// - prices for the running on-demand instances a spot rule may move (tagged
///   `ebb:interruptible=true`): their own type and the rule's acceptable types.
fn wanted(
    set: &PolicySet,
    fleet: &Fleet,
    started_by_person: &HashSet<String>,
    budgets: &[BudgetStanding],
) -> Wanted {
    let mut wanted = Wanted::default();
    for (i, instance) in fleet.instances.iter().enumerate() {
        if instance.state != InstanceState::Running {
            continue;
        }
        let Some(policy) = engine::governing_policy(set, instance) else {
            continue;
        };
        let late_start = policy
            .late_start_idle()
            .filter(|_| started_by_person.contains(&instance.id))
            .map(|(window, _)| window);
        let window = reading_window(policy).into_iter().chain(late_start).max();
        let busy_defers_budget = stop_deferred_while_busy(set, budgets, instance);
        // A limit on busy runs reads the GPUs over that run, not the activity signals.
        let checkpoint = policy
            .runtime
            .as_ref()
            .and_then(|r| r.max_busy_without_checkpoint);
        let longest_here = window
            .into_iter()
            .chain(checkpoint)
            .chain(busy_defers_budget);
        if let Some(longest_here) = longest_here.max() {
            let (positions, longest) = wanted.readings.entry(instance.region.clone()).or_default();
            positions.push(i);
            *longest = (*longest).max(longest_here);
        }
        if let Some(window) = window {
            activity::want(&mut wanted.activity, policy, (i, &instance.id), window);
        }
        if let Some(rule) = &policy.spot {
            if instance.lifecycle == Lifecycle::OnDemand
                && instance.tag(INTERRUPTIBLE_TAG) == Some("true")
            {
                let types = wanted.prices.entry(instance.region.clone()).or_default();
                types.insert(instance.instance_type.clone());
                types.extend(rule.instance_types.iter().cloned());
            }
        }
    }
    wanted
}

/// [`engine::RECENT`] when a spent budget with `at_limit: stop` and `max_defer` is over
/// `instance`: its stop waits while the GPUs are busy.
fn stop_deferred_while_busy(
    set: &PolicySet,
    budgets: &[BudgetStanding],
    instance: &Instance,
) -> Option<Duration> {
    let spent = |name: &str, key: Option<&str>| {
        budgets
            .iter()
            .any(|s| s.budget == name && s.key.as_deref() == key && s.exhausted())
    };
    set.budgets
        .iter()
        .filter(|b| b.at_limit == AtLimit::Stop && b.max_defer.is_some())
        .any(|b| {
            b.key_for(&instance.region, &instance.instance_type, |k| {
                instance.tag(k)
            })
            .is_some_and(|key| spent(&b.name, key))
        })
        .then_some(engine::RECENT)
}

/// How far back `policy` looks at GPU utilisation, if it looks at all.
fn reading_window(policy: &Policy) -> Option<Duration> {
    let idle = policy.idle.as_ref().map(|i| i.window);
    let busy = policy
        .work_hours
        .as_ref()
        .filter(|w| w.busy_defers_stop)
        .map(|_| engine::RECENT);
    idle.into_iter().chain(busy).max()
}

impl<P: Provider> Reconciler<P> {
    /// The read phase: the GPU utilisation and prices the policies `set` and the spent
    /// `budgets` want of `fleet`, read into it, and the new readings kept; the regions whose
    /// GPU read failed.
    pub(super) async fn read(
        &self,
        set: &PolicySet,
        fleet: &mut Fleet,
        budgets: &[BudgetStanding],
        now: DateTime<Utc>,
    ) -> Result<Vec<ReadFailure>, TickError> {
        let started_by_person = self.store.started_by_person().await?;
        let mut wanted = wanted(set, fleet, &started_by_person, budgets);
        let read = self.read_gpu_utilisation(wanted.readings, fleet, now).await;
        let posted = self
            .store
            .heartbeats(&wanted.activity.heartbeat_ids(fleet))
            .await?;
        let mut asked = Vec::new();
        cloudwatch::read(
            self.provider.instance_metrics(),
            &self.memo.metrics_read,
            std::mem::take(&mut wanted.activity.cloudwatch),
            fleet,
            now,
            &mut asked,
        )
        .await;
        asked.extend(
            activity::read(
                self.options.prometheus.as_ref(),
                self.options.jupyter.as_ref(),
                wanted.activity,
                posted,
                fleet,
                now,
            )
            .await,
        );
        // For the console only: the tick decides on what it read, kept or not.
        if let Err(err) = self.store.record_activity(&asked).await {
            tracing::warn!(error = %err, "the activity readings could not be kept for the console");
        }
        self.keep_uses(set, fleet, now).await;
        self.read_prices(wanted.prices, fleet, now).await;
        self.keep_readings(fleet, &read.fresh, now).await?;
        Ok(read.failures)
    }

    /// Keeps the uses the activity signals showed this tick, for `ebb metrics export` and
    /// replays; only those newer than this process kept before. A failed write is not retried:
    /// the tick decides on what it read, kept or not.
    async fn keep_uses(&self, set: &PolicySet, fleet: &Fleet, now: DateTime<Utc>) {
        let fresh = {
            let kept = self.memo.uses_kept.lock().expect("kept uses poisoned");
            activity::new_uses(set, fleet, now, &kept)
        };
        match self.store.record_activity_uses(&fresh).await {
            Ok(()) => {
                let mut kept = self.memo.uses_kept.lock().expect("kept uses poisoned");
                kept.extend(fresh.into_iter().map(|(i, s, at)| ((i, s), at)));
            }
            Err(err) => {
                tracing::warn!(error = %err, "the activity signals' uses could not be kept");
            }
        }
    }

    /// Keeps the GPU readings this tick read (those `fresh` names, from when they are new),
    /// for later ticks, the console's chart, `ebb metrics export` and replays; then notes them
    /// read in the period of `now`. Only once they are kept: a later tick of this period reads
    /// them from Postgres.
    async fn keep_readings(
        &self,
        fleet: &Fleet,
        fresh: &HashMap<String, DateTime<Utc>>,
        now: DateTime<Utc>,
    ) -> Result<(), TickError> {
        let recent: Vec<(&str, &[Sample])> = fleet
            .instances
            .iter()
            .filter_map(|i| {
                let since = *fresh.get(&i.id)?;
                // Readings come oldest first.
                let newer = &i.gpu_util[i.gpu_util.partition_point(|s| s.at < since)..];
                (!newer.is_empty()).then_some((i.id.as_str(), newer))
            })
            .collect();
        self.store.record_gpu_readings(&recent).await?;
        self.memo.gpu_asked.mark(period_of(now), fresh.keys());
        Ok(())
    }

    /// Reads GPU utilisation into `fleet`, one region at a time, so that a large fleet's
    /// readings are held once. The instances of a region that could not be read are marked
    /// unread in `fleet`: for them idle and busy are unknown, not "no samples".
    async fn read_gpu_utilisation(
        &self,
        wanted: BTreeMap<String, (Vec<usize>, Duration)>,
        fleet: &mut Fleet,
        now: DateTime<Utc>,
    ) -> GpuRead {
        if let Some(prometheus) = &self.options.prometheus {
            return read_from_prometheus(prometheus, wanted, fleet, now).await;
        }
        let mut read = GpuRead::default();
        for (region, (positions, window)) in wanted {
            let from = now - window - READING_MARGIN;
            self.read_region_incrementally(&region, &positions, from, now, fleet, &mut read)
                .await;
        }
        read
    }

    /// Reads prices into `fleet`.
    async fn read_prices(
        &self,
        wanted: BTreeMap<String, BTreeSet<String>>,
        fleet: &mut Fleet,
        now: DateTime<Utc>,
    ) {
        for (region, types) in wanted {
            let types: Vec<String> = types.into_iter().collect();
            match self.provider.prices(&region, &types, now).await {
                Ok(found) => {
                    let table = fleet.prices.entry(region).or_default();
                    for p in found {
                        table.insert(
                            p.instance_type.clone(),
                            Price {
                                on_demand: p.on_demand,
                                spot: p.cheapest_spot(),
                            },
                        );
                    }
                }
                // Without prices no spot rule moves anything.
                Err(err) => tracing::warn!(region, error = %err, "cannot read prices"),
            }
        }
    }
}

/// Reads GPU utilisation into `fleet` from Prometheus: one range query for every region, over
/// the longest window any of them needs (Prometheus does not bill reads, so every tick reads
/// it all, and its readings of the last [`PROMETHEUS_KEPT_BACK`] are kept). When it fails,
/// every wanted instance is unread.
async fn read_from_prometheus(
    prometheus: &Prometheus,
    wanted: BTreeMap<String, (Vec<usize>, Duration)>,
    fleet: &mut Fleet,
    now: DateTime<Utc>,
) -> GpuRead {
    let mut read = GpuRead::default();
    let Some(window) = wanted.values().map(|(_, w)| *w).max() else {
        return read;
    };
    let from = now - window - READING_MARGIN;
    match prometheus.gpu_utilisation(from, now).await {
        Ok(mut found) => {
            for (positions, _) in wanted.values() {
                for &i in positions {
                    let instance = &mut fleet.instances[i];
                    if let Some(samples) = found.remove(&instance.id) {
                        instance.gpu_util = samples;
                    }
                    read.fresh
                        .insert(instance.id.clone(), now - PROMETHEUS_KEPT_BACK);
                }
            }
        }
        Err(err) => {
            let error = err.to_string();
            for (region, (positions, _)) in wanted {
                let ids = positions
                    .iter()
                    .map(|&i| fleet.instances[i].id.clone())
                    .collect();
                read.unread(fleet, &region, ids, error.clone());
            }
        }
    }
    read
}
