//! Commitments sized on the spend the policies leave: each hour's on-demand spend of a region,
//! and the hourly commitment (at plan rates) that saves the most over it, simulated hour by
//! hour: the covered spend at the plan's rate, the rest on demand, the unused commitment paid.

use super::{monthly, Period};
pub use crate::fleet::money::Term;
use serde::Serialize;

/// Whose spend a commitment was sized on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Basis {
    /// The spend the policies leave: what ebb advises.
    AfterPolicies,
    /// Every instance running the whole period, as before ebb's stops: what an advisor looking
    /// backward would size; its figures are what it would reach after the policies.
    BeforePolicies,
}

impl Basis {
    /// The JSON name.
    pub fn as_str(self) -> &'static str {
        match self {
            Basis::AfterPolicies => "after_policies",
            Basis::BeforePolicies => "before_policies",
        }
    }
}

/// One region's spend, hour by hour over the period.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct HourlySpend {
    /// On-demand dollars spent in each hour.
    pub on_demand: Vec<f64>,
    /// The same usage at the plan's rates, dollars, in each hour.
    pub at_plan: Vec<f64>,
}

impl HourlySpend {
    /// No spend over `hours` hours.
    pub fn zero(hours: usize) -> Self {
        HourlySpend {
            on_demand: vec![0.0; hours],
            at_plan: vec![0.0; hours],
        }
    }

    /// Adds `seconds` of usage in hour `h` at `on_demand` and `plan` $/hour.
    pub fn add(&mut self, h: usize, seconds: f64, on_demand: f64, plan: f64) {
        if let (Some(od), Some(p)) = (self.on_demand.get_mut(h), self.at_plan.get_mut(h)) {
            *od += on_demand * seconds / 3600.0;
            *p += plan * seconds / 3600.0;
        }
    }

    /// Adds `other`'s spend hour by hour.
    pub fn merge(&mut self, other: &HourlySpend) {
        for (a, b) in self.on_demand.iter_mut().zip(&other.on_demand) {
            *a += b;
        }
        for (a, b) in self.at_plan.iter_mut().zip(&other.at_plan) {
            *a += b;
        }
    }
}

/// What a commitment of some $/hour (at plan rates) comes to over a spend.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Outcome {
    /// The commitment, plan dollars an hour.
    pub hourly: f64,
    /// What the period costs with it: the commitment every hour, plus the uncovered usage
    /// on demand.
    pub cost: f64,
    /// The period's on-demand spend without it.
    pub on_demand: f64,
    /// Plan dollars of usage the commitment covered.
    pub used: f64,
    /// On-demand dollars of usage it covered.
    pub covered_on_demand: f64,
    /// Hours in the period.
    pub hours: usize,
}

impl Outcome {
    /// Dollars saved over the period against paying on demand (negative when it costs more).
    pub fn savings(&self) -> f64 {
        self.on_demand - self.cost
    }

    /// The share of the commitment used, percent.
    pub fn utilisation_pct(&self) -> f64 {
        match self.hourly * self.hours as f64 {
            paid if paid > 0.0 => 100.0 * self.used / paid,
            _ => 0.0,
        }
    }

    /// The share of the on-demand spend it covered, percent.
    pub fn coverage_pct(&self) -> f64 {
        match self.on_demand {
            spent if spent > 0.0 => 100.0 * self.covered_on_demand / spent,
            _ => 0.0,
        }
    }
}

/// A commitment of `hourly` plan dollars an hour over `spend`. In an hour it covers its amount
/// of the usage at plan rates; the on-demand dollars that covers are the hour's in proportion
/// (one discount for the hour's mix of types).
pub fn simulate(spend: &HourlySpend, hourly: f64) -> Outcome {
    let mut out = Outcome {
        hourly,
        cost: 0.0,
        on_demand: 0.0,
        used: 0.0,
        covered_on_demand: 0.0,
        hours: spend.at_plan.len(),
    };
    for (&od, &plan) in spend.on_demand.iter().zip(&spend.at_plan) {
        let used = hourly.min(plan);
        let covered = match plan > 0.0 {
            true => od * used / plan,
            false => 0.0,
        };
        out.on_demand += od;
        out.used += used;
        out.covered_on_demand += covered;
        out.cost += hourly + (od - covered);
    }
    out
}

/// The commitment that saves the most over `spend`. Savings are piecewise linear in the
/// commitment, bending only at an hour's spend at plan rates, so the best is one of those (or
/// none at all); of equal savings the smaller.
pub fn best(spend: &HourlySpend) -> Outcome {
    let mut levels: Vec<f64> = spend.at_plan.iter().copied().filter(|p| *p > 0.0).collect();
    levels.sort_by(f64::total_cmp);
    levels.dedup_by(|a, b| (*a - *b).abs() < 1e-9);
    let mut chosen = simulate(spend, 0.0);
    for level in levels {
        let candidate = simulate(spend, level);
        if candidate.savings() > chosen.savings() + 1e-9 {
            chosen = candidate;
        }
    }
    chosen
}

/// One commitment advised (or shown for comparison).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Commitment {
    /// The region.
    pub region: String,
    /// `1y` or `3y`.
    pub term: Term,
    /// The plan's own $/hour (at plan rates), as AWS states a commitment.
    pub hourly_commitment_usd: f64,
    /// The share of it used on the spend the policies leave, percent.
    pub utilisation_pct: f64,
    /// The share of the on-demand spend the policies leave that it covers, percent.
    pub coverage_pct: f64,
    /// What it saves in a month (730 hours) on the spend the policies leave.
    pub monthly_savings_usd: f64,
    /// The spend it was sized on.
    pub basis: Basis,
}

/// The commitments of one region and term: the one sized on the spend after the policies,
/// and the one sized on the spend before them, both measured on the spend after them.
pub fn advise(
    region: &str,
    term: Term,
    after: &HourlySpend,
    before: &HourlySpend,
    period: &Period,
) -> [Commitment; 2] {
    let row = |outcome: Outcome, basis| Commitment {
        region: region.to_string(),
        term,
        hourly_commitment_usd: outcome.hourly,
        utilisation_pct: outcome.utilisation_pct(),
        coverage_pct: outcome.coverage_pct(),
        monthly_savings_usd: monthly(outcome.savings(), period),
        basis,
    };
    let backward = best(before).hourly;
    [
        row(best(after), Basis::AfterPolicies),
        row(simulate(after, backward), Basis::BeforePolicies),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_best_commitment_covers_what_runs_often_enough() {
        // Four hours: plan-rated usage 1, 1, 3, 3 at a 30 % discount (on demand = plan / 0.7).
        let at_plan = vec![1.0, 1.0, 3.0, 3.0];
        let spend = HourlySpend {
            on_demand: at_plan.iter().map(|p| p / 0.7).collect(),
            at_plan,
        };
        // Committing 1: pays 4, covers all the on-demand spend of 1/0.7 in each hour; the rest
        // is 2 × 2/0.7 on demand. Saved: 8/0.7 - (4 + 4/0.7) = 4/0.7 - 4 = 1.714.
        let one = simulate(&spend, 1.0);
        assert!((one.savings() - (4.0 / 0.7 - 4.0)).abs() < 1e-9);
        assert!((one.utilisation_pct() - 100.0).abs() < 1e-9);
        // Committing 3: pays 12, covers everything: saved 8/0.7 - 12 = -0.571.
        let three = simulate(&spend, 3.0);
        assert!((three.savings() - (8.0 / 0.7 - 12.0)).abs() < 1e-9);
        assert!((three.utilisation_pct() - 100.0 * 8.0 / 12.0).abs() < 1e-9);
        let chosen = best(&spend);
        assert_eq!(chosen.hourly, 1.0);
        // Nothing used at all saves nothing, and a zero commitment is the answer.
        let idle = HourlySpend::zero(4);
        assert_eq!(best(&idle).hourly, 0.0);
    }
}
