//! Choosing where a replacement goes by expected cost, not price: each acceptable spot offer
//! (a type of `spot.instance_types` in a zone with a subnet) costs its spot price plus the
//! chance of an interruption in the next hour times the work an interruption loses, paid at
//! the on-demand rate. Pure: the pools' history and the placement scores come in as data.
//!
//! The chance comes from an empirical-Bayes estimate of each pool's interruption rate (per
//! hour), over the [`HISTORY_WINDOW`]:
//!
//! - the region's rate, over the candidate pools: `(N + 1) / (pools × W + 1 / PRIOR_RATE)`,
//!   `N` the interruptions ebb saw in the region, `W` the window in hours: a Gamma prior of one
//!   interruption per `1 / PRIOR_RATE` hours, updated as if every candidate pool had been
//!   watched for the window;
//! - each pool's rate, its own count shrunk toward the region's:
//!   `(n + K × region) / (W + K)`, the region's rate counting as [`REGION_WEIGHT`] of watching;
//! - with `spot.placement_scores`, EC2's score `s` (1 to 10) of the type in the zone counts as
//!   [`SCORE_WEIGHT`] more of watching at the region's rate times `(11 − s) / 5.5` (a 10 is
//!   0.18 times the region's rate, a 1 1.8 times, a 5.5 or a pool EC2 gave no score the
//!   region's rate itself).
//!
//! The chance in the next hour is `1 − e^(−rate)`; the work lost is the time since the job's
//! last checkpoint plus a relaunch ([`RELAUNCH`]). Without any history every pool has the same
//! chance, and the ranking is by price, as before.

use super::pools::{PoolEventKind, PoolHistory};
use chrono::{DateTime, Duration, Utc};
use std::collections::BTreeMap;

/// A type and zone that reclaimed a replacement is not used again for this long.
pub const AVOID_FOR: Duration = Duration::hours(3);
/// The window `max_interruptions` counts in.
pub const INTERRUPTION_WINDOW: Duration = Duration::hours(24);

/// The price of one instance type in one region.
#[derive(Debug, Clone, PartialEq)]
pub struct TypePrice {
    /// The instance type.
    pub instance_type: String,
    /// On-demand $/hour, from the price table, when it lists the type.
    pub on_demand: Option<f64>,
    /// The current spot $/hour in each availability zone that sells it.
    pub spot_by_zone: BTreeMap<String, f64>,
}

impl TypePrice {
    /// The cheapest spot price over the zones.
    pub fn cheapest_spot(&self) -> Option<f64> {
        self.spot_by_zone.values().copied().reduce(f64::min)
    }
}

/// Where a replacement goes.
#[derive(Debug, Clone, PartialEq)]
pub struct Target {
    /// The instance type.
    pub instance_type: String,
    /// The zone.
    pub zone: String,
    /// The subnet in that zone.
    pub subnet: String,
    /// Its spot $/hour now.
    pub price: f64,
    /// Why it was chosen: the ranking ([`Ranking::reason`]).
    pub why: String,
}

/// Interruptions per pool-hour assumed before ebb has seen any: one a hundred hours, a
/// cautious figure for GPU spot capacity.
pub const PRIOR_RATE: f64 = 0.01;
/// The history the rates are estimated over.
pub const HISTORY_WINDOW: Duration = Duration::days(7);
/// How many hours of a pool's own watching the region's rate is worth.
pub const REGION_WEIGHT: f64 = 168.0;
/// How many hours of a pool's own watching a placement score is worth.
pub const SCORE_WEIGHT: f64 = 168.0;
/// How long a relaunch takes, counted as work lost at each interruption.
pub const RELAUNCH: Duration = Duration::minutes(15);

/// What the ranking weighs.
#[derive(Debug, Clone, Copy)]
pub struct Inputs<'a> {
    /// The region.
    pub region: &'a str,
    /// The spot prices of the acceptable types, by zone.
    pub prices: &'a [TypePrice],
    /// The subnet of each zone the workload may go to.
    pub subnets_by_zone: &'a BTreeMap<String, String>,
    /// The zone of the original: first on a tie.
    pub own_zone: &'a str,
    /// The highest acceptable spot price (`min_savings` below on-demand).
    pub max_price: f64,
    /// The on-demand $/hour at which lost work is counted.
    pub on_demand: f64,
    /// How long ago the job last checkpointed.
    pub since_checkpoint: Duration,
    /// What ebb saw in the pools (ebb's own account's count: account empty).
    pub history: &'a PoolHistory,
    /// The types and zones this migration was reclaimed from within [`AVOID_FOR`].
    pub avoid: &'a [(String, String)],
    /// A pool interrupted this recently is skipped (`spot.avoid_reclaimed_for`).
    pub avoid_reclaimed_for: Duration,
    /// Spot Placement Scores by type and zone, when `spot.placement_scores` and EC2 answered.
    pub scores: Option<&'a BTreeMap<(String, String), u8>>,
    /// Now.
    pub now: DateTime<Utc>,
}

/// One acceptable offer with its expected cost.
#[derive(Debug, Clone, PartialEq)]
pub struct Ranked {
    /// Where.
    pub target: Target,
    /// The chance of an interruption in the next hour.
    pub chance: f64,
    /// Hours of work an interruption loses.
    pub lost_hours: f64,
    /// $/hour: the price plus the chance times the lost work at the on-demand rate.
    pub expected: f64,
}

/// A pool left out because it was interrupted recently.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skipped {
    /// The type.
    pub instance_type: String,
    /// The zone.
    pub zone: String,
    /// How long ago it was interrupted.
    pub ago: Duration,
}

/// The acceptable offers, best first, and the pools skipped.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Ranking {
    /// Lowest expected cost first; on a tie the original's zone, then the order of the prices.
    pub ranked: Vec<Ranked>,
    /// The pools interrupted too recently, most recent first.
    pub skipped: Vec<Skipped>,
}

impl Ranking {
    /// The best offer, with the ranking's reason.
    pub fn best(&self) -> Option<Target> {
        let best = self.ranked.first()?;
        Some(Target {
            why: self.reason(),
            ..best.target.clone()
        })
    }

    /// The ranking in a sentence: the choice's figures, the runner-up's expected cost and the
    /// pools skipped ("p4d.24xlarge in us-east-1d: $14.34/h + 6.0 % x 45 min lost = $16.10/h
    /// expected; next p4d.24xlarge in us-east-1a at $16.90/h; p4d.24xlarge in us-east-1b
    /// reclaimed 20 min ago").
    pub fn reason(&self) -> String {
        let mut parts = Vec::new();
        if let Some(best) = self.ranked.first() {
            let t = &best.target;
            parts.push(format!(
                "{} in {}: ${:.2}/h + {:.1} % x {} min lost = ${:.2}/h expected",
                t.instance_type,
                t.zone,
                t.price,
                best.chance * 100.0,
                (best.lost_hours * 60.0).round(),
                best.expected
            ));
        }
        if let Some(next) = self.ranked.get(1) {
            parts.push(format!(
                "next {} in {} at ${:.2}/h",
                next.target.instance_type, next.target.zone, next.expected
            ));
        }
        for s in &self.skipped {
            parts.push(format!(
                "{} in {} reclaimed {} min ago",
                s.instance_type,
                s.zone,
                s.ago.num_minutes()
            ));
        }
        parts.join("; ")
    }
}

/// Ranks the acceptable offers of `inputs` by expected cost per hour.
pub fn rank(inputs: &Inputs) -> Ranking {
    let window_hours = HISTORY_WINDOW.num_seconds() as f64 / 3600.0;
    let offers: Vec<(&String, &String, f64)> = inputs
        .prices
        .iter()
        .flat_map(|p| {
            p.spot_by_zone
                .iter()
                .map(move |(zone, price)| (&p.instance_type, zone, *price))
        })
        .filter(|(_, zone, price)| {
            *price <= inputs.max_price && inputs.subnets_by_zone.contains_key(*zone)
        })
        .collect();
    let reclaims: Vec<_> = inputs
        .history
        .events
        .iter()
        .filter(|e| {
            e.kind == PoolEventKind::Interruption
                && e.pool.account.is_empty()
                && e.pool.region == inputs.region
                && e.at <= inputs.now
                && inputs.now - e.at < HISTORY_WINDOW
        })
        .collect();
    let pools = offers.len().max(1) as f64;
    let region_rate = (reclaims.len() as f64 + 1.0) / (pools * window_hours + 1.0 / PRIOR_RATE);
    let lost_hours =
        (inputs.since_checkpoint.max(Duration::zero()) + RELAUNCH).num_seconds() as f64 / 3600.0;
    let mut ranking = Ranking::default();
    for (instance_type, zone, price) in offers {
        let in_pool = || {
            reclaims
                .iter()
                .filter(|e| &e.pool.instance_type == instance_type && &e.pool.zone == zone)
        };
        let last = in_pool().map(|e| e.at).max();
        let own_reclaim = inputs
            .avoid
            .iter()
            .any(|(t, z)| t == instance_type && z == zone);
        let recent = last.filter(|at| inputs.now - *at < inputs.avoid_reclaimed_for);
        if own_reclaim || recent.is_some() {
            ranking.skipped.push(Skipped {
                instance_type: instance_type.clone(),
                zone: zone.clone(),
                ago: last.map_or(Duration::zero(), |at| inputs.now - at),
            });
            continue;
        }
        let mut events = in_pool().count() as f64 + REGION_WEIGHT * region_rate;
        let mut hours = window_hours + REGION_WEIGHT;
        if let Some(scores) = inputs.scores {
            let factor = scores
                .get(&(instance_type.clone(), zone.clone()))
                .map_or(1.0, |s| (11.0 - f64::from((*s).clamp(1, 10))) / 5.5);
            events += SCORE_WEIGHT * region_rate * factor;
            hours += SCORE_WEIGHT;
        }
        let chance = 1.0 - (-events / hours).exp();
        ranking.ranked.push(Ranked {
            target: Target {
                instance_type: instance_type.clone(),
                zone: zone.clone(),
                subnet: inputs.subnets_by_zone[zone].clone(),
                price,
                why: String::new(),
            },
            chance,
            lost_hours,
            expected: price + chance * lost_hours * inputs.on_demand,
        });
    }
    // Stable: on a tie the original's zone, then the order of the prices.
    ranking.ranked.sort_by(|a, b| {
        a.expected
            .total_cmp(&b.expected)
            .then((a.target.zone != inputs.own_zone).cmp(&(b.target.zone != inputs.own_zone)))
    });
    ranking.skipped.sort_by_key(|s| s.ago);
    ranking
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fleet::pools::{Pool, PoolEvent};

    fn at(s: &str) -> DateTime<Utc> {
        s.parse().unwrap()
    }

    fn price(ty: &str, zones: &[(&str, f64)]) -> TypePrice {
        TypePrice {
            instance_type: ty.into(),
            on_demand: Some(30.0),
            spot_by_zone: zones.iter().map(|(z, p)| (z.to_string(), *p)).collect(),
        }
    }

    fn reclaim(ty: &str, zone: &str, when: &str) -> PoolEvent {
        PoolEvent {
            pool: Pool {
                account: String::new(),
                region: "us-east-1".into(),
                zone: zone.into(),
                instance_type: ty.into(),
            },
            kind: PoolEventKind::Interruption,
            at: at(when),
            instance: None,
        }
    }

    fn subnets(zones: &[&str]) -> BTreeMap<String, String> {
        zones
            .iter()
            .map(|z| (z.to_string(), format!("subnet-{z}")))
            .collect()
    }

    fn inputs<'a>(
        prices: &'a [TypePrice],
        subnets: &'a BTreeMap<String, String>,
        history: &'a PoolHistory,
    ) -> Inputs<'a> {
        Inputs {
            region: "us-east-1",
            prices,
            subnets_by_zone: subnets,
            own_zone: "us-east-1a",
            max_price: 100.0,
            on_demand: 30.0,
            since_checkpoint: Duration::minutes(45),
            history,
            avoid: &[],
            avoid_reclaimed_for: Duration::hours(1),
            scores: None,
            now: at("2026-12-04T12:00:00Z"),
        }
    }

    #[test]
    fn without_history_the_cheapest_offer_wins_and_ties_stay_in_the_original_zone() {
        let subnets = subnets(&["z-a", "z-b"]);
        let prices = [
            price("p4d", &[("z-a", 14.0), ("z-b", 12.0), ("z-c", 5.0)]),
            price("p4de", &[("z-a", 12.0)]),
        ];
        let history = PoolHistory::default();
        let mut i = inputs(&prices, &subnets, &history);
        i.own_zone = "z-a";
        // z-c is cheapest but has no subnet; p4d in z-b and p4de in z-a tie: z-a is home.
        let t = rank(&i).best().unwrap();
        assert_eq!(
            (t.instance_type.as_str(), t.subnet.as_str()),
            ("p4de", "subnet-z-a")
        );
        let avoid = [("p4de".to_string(), "z-a".to_string())];
        let t = rank(&Inputs { avoid: &avoid, ..i }).best().unwrap();
        assert_eq!((t.instance_type.as_str(), t.zone.as_str()), ("p4d", "z-b"));
        assert_eq!(
            rank(&Inputs {
                max_price: 11.0,
                ..i
            })
            .best(),
            None
        );
    }

    #[test]
    fn a_pool_that_is_often_reclaimed_loses_to_a_dearer_quiet_one() {
        // Two pools of p4d: us-east-1a at $10.00/h, reclaimed three times this week (the
        // last two hours ago, outside avoid_reclaimed_for), and us-east-1b at $10.20/h, never.
        let subnets = subnets(&["us-east-1a", "us-east-1b"]);
        let prices = [price(
            "p4d.24xlarge",
            &[("us-east-1a", 10.0), ("us-east-1b", 10.2)],
        )];
        let history = PoolHistory {
            events: vec![
                reclaim("p4d.24xlarge", "us-east-1a", "2026-12-04T10:00:00Z"),
                reclaim("p4d.24xlarge", "us-east-1a", "2026-12-02T10:00:00Z"),
                reclaim("p4d.24xlarge", "us-east-1a", "2026-11-30T10:00:00Z"),
                // Older than the week: not counted.
                reclaim("p4d.24xlarge", "us-east-1b", "2026-11-20T10:00:00Z"),
            ],
        };
        let ranking = rank(&inputs(&prices, &subnets, &history));
        // By hand: W = 168 h, two pools, three reclaims in the region.
        //   region rate = (3 + 1) / (2 × 168 + 100) = 4 / 436 = 0.0091743 /h
        //   1a: (3 + 168 × 0.0091743) / (168 + 168) = 4.541284 / 336 = 0.0135157 /h
        //       chance 1 − e^−0.0135157 = 0.0134248
        //   1b: (0 + 1.541284) / 336 = 0.0045872 /h, chance 0.0045767
        //   lost: 45 min since the checkpoint + 15 min relaunch = 1 h at $30/h
        //   1a: 10.00 + 0.0134248 × 1 × 30 = $10.4027/h
        //   1b: 10.20 + 0.0045767 × 1 × 30 = $10.3373/h  → 1b wins
        let [b, a] = &ranking.ranked[..] else {
            panic!("{ranking:?}")
        };
        assert_eq!(b.target.zone, "us-east-1b");
        assert!((b.chance - 0.0045767).abs() < 1e-6, "{}", b.chance);
        assert!((b.expected - 10.3373).abs() < 1e-4, "{}", b.expected);
        assert_eq!(a.target.zone, "us-east-1a");
        assert!((a.chance - 0.0134248).abs() < 1e-6, "{}", a.chance);
        assert!((a.expected - 10.4027).abs() < 1e-4, "{}", a.expected);
        assert_eq!(
            ranking.reason(),
            "p4d.24xlarge in us-east-1b: $10.20/h + 0.5 % x 60 min lost = $10.34/h expected; \
             next p4d.24xlarge in us-east-1a at $10.40/h"
        );
    }

    #[test]
    fn a_pool_reclaimed_within_avoid_reclaimed_for_is_skipped_and_named() {
        let subnets = subnets(&["us-east-1a", "us-east-1b"]);
        let prices = [price(
            "p4d.24xlarge",
            &[("us-east-1a", 10.0), ("us-east-1b", 14.0)],
        )];
        let history = PoolHistory {
            events: vec![reclaim(
                "p4d.24xlarge",
                "us-east-1a",
                "2026-12-04T11:40:00Z",
            )],
        };
        let i = inputs(&prices, &subnets, &history);
        let best = rank(&i).best().unwrap();
        assert_eq!(best.zone, "us-east-1b");
        assert!(
            best.why
                .ends_with("; p4d.24xlarge in us-east-1a reclaimed 20 min ago"),
            "{}",
            best.why
        );
        // Past avoid_reclaimed_for it is a candidate again, and still the cheaper by far.
        let later = rank(&Inputs {
            avoid_reclaimed_for: Duration::minutes(15),
            ..i
        });
        assert_eq!(later.best().unwrap().zone, "us-east-1a");
        assert!(later.skipped.is_empty());
    }

    #[test]
    fn a_high_placement_score_lowers_the_chance_of_an_interruption() {
        // Two pools at one price and no history: 1a scored 1, 1b scored 10.
        let subnets = subnets(&["us-east-1a", "us-east-1b"]);
        let prices = [price(
            "g5.xlarge",
            &[("us-east-1a", 0.5), ("us-east-1b", 0.5)],
        )];
        let history = PoolHistory::default();
        let scores = BTreeMap::from([
            (("g5.xlarge".to_string(), "us-east-1a".to_string()), 1),
            (("g5.xlarge".to_string(), "us-east-1b".to_string()), 10),
        ]);
        let ranking = rank(&Inputs {
            scores: Some(&scores),
            ..inputs(&prices, &subnets, &history)
        });
        // By hand: region rate 1 / (2 × 168 + 100) = 0.0022936 /h, worth 168 h, and the
        // score worth 168 h more at the region's rate times (11 − s) / 5.5:
        //   1b: score 10, factor 1 / 5.5 = 0.181818:
        //       (168 × 0.0022936 + 168 × 0.0022936 × 0.181818) / (168 + 168 + 168)
        //       = (0.385321 + 0.070058) / 504 = 0.00090353 /h
        //   1a: score 1, factor 10 / 5.5 = 1.818182:
        //       (0.385321 + 0.700584) / 504 = 0.00215458 /h
        let [b, a] = &ranking.ranked[..] else {
            panic!("{ranking:?}")
        };
        assert_eq!(b.target.zone, "us-east-1b");
        assert!((b.chance - (1.0 - (-0.00090353f64).exp())).abs() < 1e-7);
        assert!((a.chance - (1.0 - (-0.00215458f64).exp())).abs() < 1e-7);
        // A pool EC2 gave no score counts at the region's rate: between the two.
        let unscored = BTreeMap::from([(("g5.xlarge".to_string(), "us-east-1b".to_string()), 10)]);
        let ranking = rank(&Inputs {
            scores: Some(&unscored),
            ..inputs(&prices, &subnets, &history)
        });
        let a = &ranking.ranked[1];
        assert_eq!(a.target.zone, "us-east-1a");
        assert!((a.chance - (1.0 - (-0.0022936f64 * 2.0 / 3.0).exp())).abs() < 1e-7);
    }
}
