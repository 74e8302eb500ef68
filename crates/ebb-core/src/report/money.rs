//! From gross to net: what the commitments a team holds make of the hours ebb kept instances
//! stopped. Pure: no I/O; `ebb report` (and `/savings`) and `ebb replay` call it an hour at a
//! time.
//!
//! AWS applies commitments to each hour's running usage, the cheapest coverage first: reserved
//! instances to usage of their type in their region, then Savings Plans (instance family plans
//! before compute plans), each to the usage with the highest discount first. A stopped hour a
//! commitment would have covered saves nothing: the commitment is paid anyway and goes unused.
//! So the running usage takes the commitments first (it would have used them whether or not
//! ebb stopped anything), and what is left covers the stopped usage, in the same order: the
//! on-demand dollars it would have covered are **covered**, not saved, and the commitment
//! dollars it would have used are **unused** because of the stops.

use crate::fleet::money::{CommitmentKind, PlanKind, PriceTable};
use chrono::{DateTime, Utc};
use std::collections::BTreeMap;

/// One instance's use of (part of) an hour: running, or kept stopped by ebb.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct HourUse<'a> {
    /// Its region.
    pub region: &'a str,
    /// Its type.
    pub instance_type: &'a str,
    /// The part of the hour, 0 to 1.
    pub hours: f64,
}

/// What the commitments make of one stopped instance's part of an hour.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Covered {
    /// The on-demand dollars of that time a commitment would have covered: not saved.
    pub covered_usd: f64,
    /// The commitment dollars that time would have used, paid and unused because of the stop.
    pub unused_commitment_usd: f64,
}

/// The commitments left to apply in an hour.
struct Left<'t> {
    /// Reserved instances: region, type, instance-hours left, effective $/hour.
    reserved: Vec<(&'t str, &'t str, f64, f64)>,
    /// Savings Plans, in the order they apply: the plan's index and its dollars left.
    plans: Vec<(usize, f64)>,
}

impl<'t> Left<'t> {
    /// An hour of every commitment of `table`.
    fn new(table: &'t PriceTable) -> Left<'t> {
        let held = &table.commitments;
        let mut reserved: Vec<_> = held
            .reserved_instances
            .iter()
            .map(|ri| {
                let rate = table
                    .commitment_rate(
                        CommitmentKind::Reserved,
                        ri.term,
                        &ri.region,
                        &ri.instance_type,
                    )
                    .unwrap_or(0.0);
                (
                    ri.region.as_str(),
                    ri.instance_type.as_str(),
                    f64::from(ri.count),
                    rate,
                )
            })
            .collect();
        // The cheapest first: a three-year reservation before a one-year one of the same type.
        reserved.sort_by(|a, b| a.3.total_cmp(&b.3));
        let mut plans: Vec<(usize, f64)> = held
            .savings_plans
            .iter()
            .enumerate()
            .map(|(i, p)| (i, p.hourly_usd))
            .collect();
        // EC2 Instance Savings Plans apply before Compute Savings Plans.
        plans.sort_by_key(|(i, _)| held.savings_plans[*i].kind == PlanKind::Compute);
        Left { reserved, plans }
    }
}

/// Applies what is `left` to `uses`, the cheapest coverage first; what each use was covered by.
fn apply(table: &PriceTable, left: &mut Left, uses: &[HourUse]) -> Vec<Covered> {
    let mut out = vec![Covered::default(); uses.len()];
    let mut uncovered: Vec<f64> = uses.iter().map(|u| u.hours.max(0.0)).collect();
    let on_demand: Vec<Option<f64>> = uses
        .iter()
        .map(|u| table.get(u.region, u.instance_type))
        .collect();
    for (region, ty, count, rate) in &mut left.reserved {
        for (i, u) in uses.iter().enumerate() {
            if u.region != *region || u.instance_type != *ty || *count <= 0.0 {
                continue;
            }
            let h = uncovered[i].min(*count);
            *count -= h;
            uncovered[i] -= h;
            out[i].covered_usd += h * on_demand[i].unwrap_or(0.0);
            out[i].unused_commitment_usd += h * *rate;
        }
    }
    for (plan_index, dollars) in &mut left.plans {
        let plan = &table.commitments.savings_plans[*plan_index];
        // The uses the plan applies to, with its rate, by discount, the highest first.
        let mut candidates: Vec<(usize, f64, f64)> = uses
            .iter()
            .enumerate()
            .filter(|(i, u)| uncovered[*i] > 0.0 && plan.covers(u.region, u.instance_type))
            .filter_map(|(i, u)| {
                let od = on_demand[i].filter(|p| *p > 0.0)?;
                let rate = table.commitment_rate(
                    CommitmentKind::SavingsPlan,
                    plan.term,
                    u.region,
                    u.instance_type,
                )?;
                Some((i, od, rate))
            })
            .collect();
        candidates.sort_by(|a, b| (a.2 / a.1).total_cmp(&(b.2 / b.1)));
        for (i, od, rate) in candidates {
            if *dollars <= 0.0 {
                break;
            }
            let h = if rate > 0.0 {
                uncovered[i].min(*dollars / rate)
            } else {
                uncovered[i]
            };
            *dollars -= h * rate;
            uncovered[i] -= h;
            out[i].covered_usd += h * od;
            out[i].unused_commitment_usd += h * rate;
        }
    }
    out
}

/// What the commitments of `table` make of one hour's `stopped` uses, given its `running`
/// ones: one [`Covered`] per stopped use, in order. Without commitments, nothing is covered.
pub fn cover_hour(table: &PriceTable, running: &[HourUse], stopped: &[HourUse]) -> Vec<Covered> {
    if table.commitments.is_empty() {
        return vec![Covered::default(); stopped.len()];
    }
    let mut left = Left::new(table);
    apply(table, &mut left, running);
    apply(table, &mut left, stopped)
}

/// What the commitments of `table` cover of one hour's running `uses`: one [`Covered`] per
/// use, in order (its `covered_usd` the on-demand dollars a commitment pays instead).
pub fn cover_running(table: &PriceTable, uses: &[HourUse]) -> Vec<Covered> {
    if table.commitments.is_empty() {
        return vec![Covered::default(); uses.len()];
    }
    apply(table, &mut Left::new(table), uses)
}

/// Seconds in an hour: commitments apply an hour at a time.
pub(super) const HOUR: i64 = 3600;

/// The hours (by index since the epoch) `[from, to)` touches, with the part of each it covers.
pub fn hours_of(from: DateTime<Utc>, to: DateTime<Utc>) -> impl Iterator<Item = (i64, f64)> {
    let (from, to) = (from.timestamp(), to.timestamp());
    let first = from.div_euclid(HOUR);
    let last = (to - 1).div_euclid(HOUR);
    (first..=last).filter_map(move |h| {
        let part = (to.min((h + 1) * HOUR) - from.max(h * HOUR)) as f64 / HOUR as f64;
        (part > 0.0).then_some((h, part))
    })
}

/// On-demand running hours by region and type, hour by hour from `first_hour` (hours since
/// the epoch): what a replay's scenario ran, for the commitments.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct HourlyUse {
    /// The first hour.
    pub first_hour: i64,
    /// (region, type) → running hours in each hour from `first_hour`.
    pub by_type: BTreeMap<(String, String), Vec<f64>>,
}

/// What a period's usage costs under the commitments held.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Bill {
    /// The on-demand dollars commitments covered.
    pub covered_usd: f64,
    /// The commitment dollars that usage used.
    pub commitment_used_usd: f64,
    /// The commitment dollars paid over the period, used or not.
    pub commitment_fees_usd: f64,
}

impl HourlyUse {
    /// Nothing used, from the hour of `from` on.
    pub fn starting(from: DateTime<Utc>) -> HourlyUse {
        HourlyUse {
            first_hour: from.timestamp().div_euclid(HOUR),
            by_type: BTreeMap::new(),
        }
    }

    /// Adds `[from, to)` of running for an instance of `instance_type` in `region`.
    pub fn add(
        &mut self,
        region: &str,
        instance_type: &str,
        from: DateTime<Utc>,
        to: DateTime<Utc>,
    ) {
        let key = (region.to_string(), instance_type.to_string());
        let hours = match self.by_type.get_mut(&key) {
            Some(hours) => hours,
            None => self.by_type.entry(key).or_default(),
        };
        for (h, part) in hours_of(from, to) {
            let Ok(at) = usize::try_from(h - self.first_hour) else {
                continue;
            };
            if hours.len() <= at {
                hours.resize(at + 1, 0.0);
            }
            hours[at] += part;
        }
    }

    /// Adds all of `other` (from the same first hour).
    pub fn merge(&mut self, other: &HourlyUse) {
        for (key, theirs) in &other.by_type {
            let ours = self.by_type.entry(key.clone()).or_default();
            if ours.len() < theirs.len() {
                ours.resize(theirs.len(), 0.0);
            }
            for (o, t) in ours.iter_mut().zip(theirs) {
                *o += t;
            }
        }
    }

    /// What this usage costs under the commitments of `table`, over the `hours` hours from
    /// `first_hour`: every hour's commitments applied as AWS does, and paid whether used or
    /// not.
    pub fn bill(&self, table: &PriceTable, hours: i64) -> Bill {
        let held = &table.commitments;
        let per_hour_fees: f64 = held
            .reserved_instances
            .iter()
            .map(|ri| {
                let rate = table.commitment_rate(
                    CommitmentKind::Reserved,
                    ri.term,
                    &ri.region,
                    &ri.instance_type,
                );
                f64::from(ri.count) * rate.unwrap_or(0.0)
            })
            .chain(held.savings_plans.iter().map(|p| p.hourly_usd))
            .sum();
        let mut bill = Bill {
            commitment_fees_usd: per_hour_fees * hours.max(0) as f64,
            ..Bill::default()
        };
        if held.is_empty() {
            return bill;
        }
        for at in 0..usize::try_from(hours).unwrap_or(0) {
            let uses: Vec<HourUse> = self
                .by_type
                .iter()
                .filter_map(|((region, instance_type), hours)| {
                    let used = *hours.get(at)?;
                    (used > 0.0).then_some(HourUse {
                        region,
                        instance_type,
                        hours: used,
                    })
                })
                .collect();
            for c in cover_hour(table, &[], &uses) {
                bill.covered_usd += c.covered_usd;
                bill.commitment_used_usd += c.unused_commitment_usd;
            }
        }
        bill
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fleet::money::{
        CommitmentRates, HeldCommitments, ReservedInstances, SavingsPlan, Term, TermRates,
    };

    const R: &str = "us-east-1";

    /// g.a: $10/h on demand, $6 under a reservation, $8 under a plan (20 % off);
    /// g.b: $10/h on demand, $5 under a plan (50 % off); g.c: $4/h, no commitment rates.
    fn table(held: HeldCommitments) -> PriceTable {
        let one = |rate: f64| TermRates {
            one_year: Some(rate),
            three_years: None,
        };
        let rates = |list: &[(&str, f64)]| CommitmentRates {
            source: "test".into(),
            as_of: "today".into(),
            rates: [(
                R.to_string(),
                list.iter().map(|(t, r)| (t.to_string(), one(*r))).collect(),
            )]
            .into(),
        };
        PriceTable {
            prices: [(
                R.to_string(),
                [("g.a", 10.0), ("g.b", 10.0), ("g.c", 4.0)]
                    .into_iter()
                    .map(|(t, p)| (t.to_string(), p))
                    .collect(),
            )]
            .into(),
            reserved: Some(rates(&[("g.a", 6.0)])),
            savings_plan: Some(rates(&[("g.a", 8.0), ("g.b", 5.0)])),
            commitments: held,
            ..PriceTable::default()
        }
    }

    fn ri(ty: &str, count: u32) -> ReservedInstances {
        ReservedInstances {
            instance_type: ty.into(),
            region: R.into(),
            count,
            term: Term::OneYear,
        }
    }

    fn plan(hourly_usd: f64) -> SavingsPlan {
        SavingsPlan {
            hourly_usd,
            term: Term::OneYear,
            kind: PlanKind::Compute,
            family: None,
            region: None,
        }
    }

    fn used(ty: &str, hours: f64) -> HourUse<'_> {
        HourUse {
            region: R,
            instance_type: ty,
            hours,
        }
    }

    #[test]
    fn a_period_is_billed_its_commitments_whether_used_or_not() {
        // One g.a reservation ($6/h) over 3 hours; g.a runs the first hour and a half: the
        // reservation covers 1.5 h ($15 on demand) and uses $9 of the $18 paid.
        let t = table(HeldCommitments {
            reserved_instances: vec![ri("g.a", 1)],
            savings_plans: vec![],
        });
        let from: DateTime<Utc> = "2026-11-30T00:00:00Z".parse().unwrap();
        let mut used = HourlyUse::starting(from);
        used.add(R, "g.a", from, from + chrono::Duration::minutes(90));
        let bill = used.bill(&t, 3);
        assert_eq!(bill.covered_usd, 15.0);
        assert_eq!(bill.commitment_used_usd, 9.0);
        assert_eq!(bill.commitment_fees_usd, 18.0);
        let mut twice = used.clone();
        twice.merge(&used);
        assert_eq!(
            twice.by_type[&(R.to_string(), "g.a".to_string())],
            vec![2.0, 1.0]
        );
    }

    #[test]
    fn without_commitments_nothing_is_covered() {
        let t = table(HeldCommitments::default());
        let c = cover_hour(&t, &[], &[used("g.a", 1.0)]);
        assert_eq!(c, vec![Covered::default()]);
    }

    #[test]
    fn running_usage_takes_a_reservation_before_the_stopped() {
        // One reservation of g.a; two g.a boxes, one running, one stopped: the running box
        // uses it whether or not the other was stopped, so the stop saves the full $10.
        let t = table(HeldCommitments {
            reserved_instances: vec![ri("g.a", 1)],
            savings_plans: vec![],
        });
        let c = cover_hour(&t, &[used("g.a", 1.0)], &[used("g.a", 1.0)]);
        assert_eq!(c, vec![Covered::default()]);
        // With nothing running, the stopped box's hour is the reservation's: $10 covered, the
        // reservation's $6 paid and unused.
        let c = cover_hour(&t, &[], &[used("g.a", 1.0)]);
        assert_eq!(
            c,
            vec![Covered {
                covered_usd: 10.0,
                unused_commitment_usd: 6.0
            }]
        );
    }

    #[test]
    fn reservations_apply_before_savings_plans() {
        // A reservation of g.a and a $8/h plan; g.a stopped for the hour. Were the plan first,
        // it would cover the g.a hour ($8 at its rate) and leave the reservation unused too;
        // AWS applies the reservation first, and the plan is left whole (nothing else runs).
        let t = table(HeldCommitments {
            reserved_instances: vec![ri("g.a", 1)],
            savings_plans: vec![plan(8.0)],
        });
        let c = cover_hour(&t, &[], &[used("g.a", 1.0)]);
        assert_eq!(
            c,
            vec![Covered {
                covered_usd: 10.0,
                unused_commitment_usd: 6.0
            }]
        );
    }

    #[test]
    fn a_plan_covers_the_usage_with_the_highest_discount_first() {
        // A $5/h compute plan; g.a (20 % off: $8 under the plan) and g.b (50 % off: $5)
        // stopped for the hour. The plan buys g.b's hour first: $5 of commitment covers $10
        // of on-demand g.b; nothing is left for g.a, which saves its full $10.
        let t = table(HeldCommitments {
            reserved_instances: vec![],
            savings_plans: vec![plan(5.0)],
        });
        let c = cover_hour(&t, &[], &[used("g.a", 1.0), used("g.b", 1.0)]);
        assert_eq!(c[0], Covered::default());
        assert_eq!(
            c[1],
            Covered {
                covered_usd: 10.0,
                unused_commitment_usd: 5.0
            }
        );
    }

    #[test]
    fn a_plan_left_short_covers_part_of_an_hour() {
        // A $4/h plan and g.a ($8 under the plan) stopped: the plan covers half the hour,
        // $5 of on-demand, with its whole $4 unused. g.c has no plan rate: never covered.
        let t = table(HeldCommitments {
            reserved_instances: vec![],
            savings_plans: vec![plan(4.0)],
        });
        let c = cover_hour(&t, &[], &[used("g.c", 1.0), used("g.a", 1.0)]);
        assert_eq!(c[0], Covered::default());
        assert_eq!(
            c[1],
            Covered {
                covered_usd: 5.0,
                unused_commitment_usd: 4.0
            }
        );
    }

    #[test]
    fn an_instance_family_plan_covers_only_its_family_and_region() {
        let family = SavingsPlan {
            kind: PlanKind::InstanceFamily,
            family: Some("g".into()),
            region: Some("eu-west-1".into()),
            ..plan(100.0)
        };
        let t = table(HeldCommitments {
            reserved_instances: vec![],
            savings_plans: vec![family],
        });
        let c = cover_hour(&t, &[], &[used("g.a", 1.0)]);
        assert_eq!(c, vec![Covered::default()]);
    }
}
