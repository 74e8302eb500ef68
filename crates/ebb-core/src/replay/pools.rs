//! Spot pools in a replay (`ebb replay --interruptions`): where a modelled spot move goes, and
//! what a reclaim of it costs.
//!
//! A move (and each relaunch) is placed by the spot ranking ebb runs, [`crate::fleet::rank`]:
//! by expected cost over the interruption history up to that moment ([`Choice::ExpectedCost`]),
//! or with no history at all, which ranks by price alone ([`Choice::CheapestFirst`]: the
//! cheapest offer `min_savings` accepts). Every interruption of the history in the pool a
//! replacement runs in reclaims it: the work since its last checkpoint and a relaunch are
//! lost, paid at the on-demand rate; it is relaunched into the next pool the ranking chooses,
//! or on-demand once the reclaims of 24 hours reach `max_interruptions` (or no offer is left),
//! as a migration does.

use super::report::Report;
use crate::fleet::rank::{rank, Inputs, TypePrice, AVOID_FOR, INTERRUPTION_WINDOW, RELAUNCH};
use crate::fleet::{PoolEventKind, PoolHistory};
use crate::policy::SpotRule;
use chrono::{DateTime, Duration, Utc};
use std::collections::BTreeMap;
use std::fmt::Write as _;

/// How a replay places its spot moves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Choice {
    /// By expected cost over the pools' history, as ebb does.
    ExpectedCost,
    /// The cheapest acceptable offer (`min_savings` alone): the ranking without history.
    CheapestFirst,
}

impl Choice {
    /// Its name in the replay's table.
    pub fn name(self) -> &'static str {
        match self {
            Choice::ExpectedCost => "expected_cost",
            Choice::CheapestFirst => "cheapest_first",
        }
    }
}

/// The spot pools of a replay and what happened in them.
#[derive(Debug, Clone, Default)]
pub struct Pools {
    /// By region: each type's on-demand price and spot price in each zone.
    offers: BTreeMap<String, Vec<TypePrice>>,
    /// The interruptions, before and during the replay: what the ranking learns from.
    history: PoolHistory,
    /// The interruptions by region, zone and type, oldest first.
    by_pool: BTreeMap<(String, String, String), Vec<DateTime<Utc>>>,
    /// How often a job checkpoints; `None`: its policy's `spot.checkpoint_max_age`.
    checkpoint_every: Option<Duration>,
    /// GPUs per instance type (1 for a type not listed), to count lost work in GPU-hours.
    gpus: BTreeMap<String, u32>,
}

/// A modelled replacement on spot.
#[derive(Debug, Clone)]
pub(super) struct OnSpot {
    /// Its type.
    pub(super) instance_type: String,
    /// Its zone.
    pub(super) zone: String,
    /// When its job started (from a checkpoint): its checkpoints are counted from then.
    pub(super) since: DateTime<Utc>,
    /// The on-demand $/hour its lost work is paid at.
    pub(super) on_demand: f64,
}

/// How a replayed job checkpoints: every `every` while it runs busy, counted from `since` or
/// from its last start, whichever is later.
#[derive(Debug, Clone, Copy)]
pub(super) struct Cadence {
    pub(super) every: Duration,
    pub(super) since: Option<DateTime<Utc>>,
}

impl Cadence {
    /// Its last checkpoint at `t`, for a job started at `started`.
    pub(super) fn last(&self, started: DateTime<Utc>, t: DateTime<Utc>) -> Option<DateTime<Utc>> {
        let since = self.since.map_or(started, |s| s.max(started));
        let every = self.every.num_seconds().max(1);
        (since <= t).then(|| since + Duration::seconds((t - since).num_seconds() / every * every))
    }
}

/// What one reclaim did.
#[derive(Debug, Clone)]
pub(super) struct Reclaim {
    /// Work lost: the time since the last checkpoint and a relaunch.
    pub(super) lost: Duration,
    /// GPUs of the reclaimed type.
    pub(super) gpus: u32,
    /// The on-demand $/hour of the lost work.
    pub(super) on_demand: f64,
    /// Where the job goes on: another spot pool, or on-demand (`None`).
    pub(super) next: Option<(OnSpot, f64)>,
}

impl Pools {
    /// The pools of `offers` (by region), with the interruptions of `history`, jobs
    /// checkpointing every `checkpoint_every` (their policy's `checkpoint_max_age` without it),
    /// and `gpus` per type.
    pub fn new(
        offers: BTreeMap<String, Vec<TypePrice>>,
        history: PoolHistory,
        checkpoint_every: Option<Duration>,
        gpus: BTreeMap<String, u32>,
    ) -> Self {
        let mut by_pool: BTreeMap<_, Vec<_>> = BTreeMap::new();
        for e in history
            .events
            .iter()
            .filter(|e| e.kind == PoolEventKind::Interruption)
        {
            let p = &e.pool;
            by_pool
                .entry((p.region.clone(), p.zone.clone(), p.instance_type.clone()))
                .or_default()
                .push(e.at);
        }
        for times in by_pool.values_mut() {
            times.sort();
        }
        Pools {
            offers,
            history,
            by_pool,
            checkpoint_every,
            gpus,
        }
    }

    fn checkpoint_every(&self, rule: &SpotRule) -> Duration {
        self.checkpoint_every
            .unwrap_or(rule.checkpoint_max_age)
            .max(Duration::minutes(1))
    }

    /// How a job under `rule` whose snapshot tags its last checkpoint `tag` checkpoints in the
    /// replay from `from`: every `--checkpoint-every`, counted from its last start; without
    /// it, every `checkpoint_max_age` counted from the tag's time when that is at or before
    /// `from`; `None` otherwise: the recording shows no checkpoint, so none is assumed.
    pub(super) fn cadence(
        &self,
        rule: &SpotRule,
        tag: Option<&str>,
        from: DateTime<Utc>,
    ) -> Option<Cadence> {
        if self.checkpoint_every.is_some() {
            return Some(Cadence {
                every: self.checkpoint_every(rule),
                since: None,
            });
        }
        let at = DateTime::parse_from_rfc3339(tag?.trim())
            .ok()?
            .with_timezone(&Utc);
        (at <= from).then(|| Cadence {
            every: self.checkpoint_every(rule),
            since: Some(at),
        })
    }

    /// Where a move of an instance of `own_type` in `region` goes at `now` under `rule`, with
    /// its spot $/hour: the ranking's best offer, away from the pools in `reclaimed` (this
    /// job's reclaims: type, zone, when) of the last [`AVOID_FOR`]; `None` when no offer is
    /// acceptable.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn place(
        &self,
        choice: Choice,
        rule: &SpotRule,
        region: &str,
        own_type: &str,
        on_demand: f64,
        reclaimed: &[(String, String, DateTime<Utc>)],
        now: DateTime<Utc>,
    ) -> Option<(OnSpot, f64)> {
        let offers = self.offers.get(region)?;
        let types = match rule.instance_types.is_empty() {
            true => vec![own_type.to_string()],
            false => rule.instance_types.clone(),
        };
        let prices: Vec<TypePrice> = offers
            .iter()
            .filter(|p| types.contains(&p.instance_type))
            .cloned()
            .collect();
        // The zones stand for their subnets.
        let zones: BTreeMap<String, String> = prices
            .iter()
            .flat_map(|p| p.spot_by_zone.keys())
            .map(|z| (z.clone(), z.clone()))
            .collect();
        let avoid: Vec<(String, String)> = reclaimed
            .iter()
            .filter(|(_, _, at)| now - *at < AVOID_FOR)
            .map(|(t, z, _)| (t.clone(), z.clone()))
            .collect();
        let none = PoolHistory::default();
        let (history, avoid_reclaimed_for) = match choice {
            Choice::ExpectedCost => (&self.history, rule.avoid_reclaimed_for),
            Choice::CheapestFirst => (&none, Duration::zero()),
        };
        let ranking = rank(&Inputs {
            region,
            prices: &prices,
            subnets_by_zone: &zones,
            own_zone: zones.keys().next().map_or("", String::as_str),
            max_price: on_demand * (1.0 - rule.min_savings),
            on_demand,
            since_checkpoint: self.checkpoint_every(rule),
            history,
            avoid: &avoid,
            avoid_reclaimed_for,
            scores: None,
            now,
        });
        let best = ranking.best()?;
        Some((
            OnSpot {
                instance_type: best.instance_type,
                zone: best.zone,
                since: now,
                on_demand,
            },
            best.price,
        ))
    }

    /// The first interruption of `on`'s pool in `region` within `[from, to)` after its job
    /// started.
    pub(super) fn next_reclaim(
        &self,
        region: &str,
        on: &OnSpot,
        from: DateTime<Utc>,
        to: DateTime<Utc>,
    ) -> Option<DateTime<Utc>> {
        let key = (
            region.to_string(),
            on.zone.clone(),
            on.instance_type.clone(),
        );
        let times = self.by_pool.get(&key)?;
        let first = times.partition_point(|t| *t < from || *t <= on.since);
        times.get(first).copied().filter(|t| *t < to)
    }

    /// `on` reclaimed `at` under `rule`, after this job's earlier `reclaimed` ones (this one
    /// added): the work lost, and where the job goes on.
    pub(super) fn reclaim(
        &self,
        choice: Choice,
        rule: &SpotRule,
        region: &str,
        on: &OnSpot,
        at: DateTime<Utc>,
        reclaimed: &[(String, String, DateTime<Utc>)],
    ) -> Reclaim {
        let every = self.checkpoint_every(rule).num_seconds();
        let since_checkpoint = Duration::seconds((at - on.since).num_seconds().rem_euclid(every));
        let recent = reclaimed
            .iter()
            .filter(|(_, _, t)| at - *t < INTERRUPTION_WINDOW)
            .count();
        let next = match recent >= rule.max_interruptions as usize {
            true => None,
            // The job starts again from its last checkpoint once relaunched.
            false => self
                .place(
                    choice,
                    rule,
                    region,
                    &on.instance_type,
                    on.on_demand,
                    reclaimed,
                    at,
                )
                .map(|(mut next, price)| {
                    next.since = at + RELAUNCH;
                    (next, price)
                }),
        };
        Reclaim {
            lost: since_checkpoint + RELAUNCH,
            gpus: self.gpus.get(&on.instance_type).copied().unwrap_or(1),
            on_demand: on.on_demand,
            next,
        }
    }
}

/// The instances of `instances` a spot rule of `set` governs whose checkpoints the replay
/// from `from` cannot know (no `--checkpoint-every`, and no `ebb:checkpoint-at` at or before
/// `from`): it assumes they do not checkpoint, so none of them moves to spot.
pub fn without_checkpoints(
    pools: &Pools,
    set: &crate::policy::PolicySet,
    instances: &[crate::fleet::Instance],
    from: DateTime<Utc>,
) -> Vec<String> {
    let unknown = |i: &crate::fleet::Instance| {
        let rule = crate::engine::governing_policy(set, i)?.spot.as_ref()?;
        let tag = i.tag(crate::names::CHECKPOINT_AT_TAG);
        pools
            .cadence(rule, tag, from)
            .is_none()
            .then(|| i.id.clone())
    };
    instances.iter().filter_map(unknown).collect()
}

/// With `--interruptions`: the spot moves placed by expected cost (the policies) against
/// by price alone, with what their reclaims lost and the hours each spent in each pool; or,
/// when no job moved, why (`without_checkpoints`: the instances whose checkpoints the
/// recording does not show).
pub fn table(report: &Report, without_checkpoints: &[String]) -> String {
    let total = &report.total;
    let Some(cheapest) = total.cheapest_first else {
        return String::new();
    };
    if total.policies.spot_s == 0 && cheapest.spot_s == 0 {
        let why = match without_checkpoints.len() {
            0 => "no spot offer passed the policies' min_savings, or no instance was eligible when they were judged (ebb explain on the snapshot says why)".to_string(),
            n => format!(
                "the recording shows no checkpoint of {n} instance(s) under a spot rule ({}: no ebb:checkpoint-at at or before --from), so the replay assumed they do not checkpoint; give --checkpoint-every to replay jobs that checkpoint that often",
                without_checkpoints.join(", ")
            ),
        };
        return format!("\nspot placement: no job moved to spot: {why}.\n");
    }
    let mut out = format!(
        "\n{:<18} {:>13} {:>10} {:>10} {:>12} {:>12} {:>14} {:>8} {:>11}\n",
        "spot placement",
        "interruptions",
        "lost_h",
        "lost_gpu_h",
        "lost_usd",
        "cost_usd",
        "cost+lost_usd",
        "spot_h",
        "fallback_h"
    );
    let placements = [
        (Choice::ExpectedCost.name(), total.policies),
        (Choice::CheapestFirst.name(), cheapest),
    ];
    for (name, t) in placements {
        let _ = writeln!(
            out,
            "{name:<18} {:>13} {:>10.2} {:>10.2} {:>12.2} {:>12.2} {:>14.2} {:>8.1} {:>11.1}",
            t.interruptions,
            t.lost_work_s as f64 / 3600.0,
            t.lost_gpu_s as f64 / 3600.0,
            t.lost_work,
            t.cost,
            t.cost + t.lost_work,
            t.spot_s as f64 / 3600.0,
            t.fallback_s as f64 / 3600.0,
        );
    }
    let _ = writeln!(
        out,
        "\n{:<18} {:<20} {:<20} {:>8}",
        "hours on spot", "zone", "type", "spot_h"
    );
    for (name, _) in placements {
        let pools = report.spot_pools.iter().filter(|((c, _, _), _)| *c == name);
        for ((_, zone, ty), seconds) in pools {
            let hours = *seconds as f64 / 3600.0;
            let _ = writeln!(out, "{name:<18} {zone:<20} {ty:<20} {hours:>8.1}");
        }
    }
    out
}
