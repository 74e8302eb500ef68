//! The budgets over a replay: what each budget's boxes spent under the policies in each of its
//! periods, hour by hour, when the amount was reached, and what ran past it (what
//! `at_limit: stop` or `refuse_starts` would have acted on, less their notices).

use crate::budget::periods;
use crate::policy::{Budget, PolicySet};
use crate::report::money::HourlyUse;
use chrono::{DateTime, Duration, Utc};
use serde_json::{json, Value};
use std::collections::BTreeMap;

/// One hour, in seconds.
const HOUR: i64 = 3600;

/// Which budgets count one instance, and what an hour of it costs: what a chunk's replay
/// hands the report with its hours on demand.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct BudgetUse {
    /// The budgets (by name) that count the instance, each with its `per` value.
    pub keys: Vec<(String, Option<String>)>,
    /// What an hour of it costs, in the currency it is billed in (the replay's rate).
    pub rate: f64,
    /// Its GPUs, when known.
    pub gpus: Option<u32>,
}

/// Spend hour by hour, summed per budget and `per` value.
#[derive(Debug, Clone, Default)]
pub struct BudgetSpend {
    by_key: BTreeMap<(String, Option<String>), Hourly>,
}

/// Hour by hour from the replay's first hour: money, instance-hours and GPU-hours.
#[derive(Debug, Clone, Default)]
struct Hourly {
    cost: Vec<f64>,
    instance_hours: Vec<f64>,
    gpu_hours: Vec<f64>,
}

/// One period of one budget, as the replay played it.
#[derive(Debug, Clone, PartialEq)]
pub struct BudgetPeriod {
    /// The budget.
    pub budget: String,
    /// Its `per` value.
    pub key: Option<String>,
    /// Its amount, in the report's currency.
    pub amount: f64,
    /// What it does at the limit.
    pub at_limit: &'static str,
    /// Its zone, where its periods are days, weeks or months.
    pub timezone: chrono_tz::Tz,
    /// The period, clipped to the replay: `[start, end)`.
    pub start: DateTime<Utc>,
    /// Its end.
    pub end: DateTime<Utc>,
    /// Spent in it under the policies.
    pub spent: f64,
    /// When the spend reached the amount, if it did.
    pub reached_at: Option<DateTime<Utc>>,
    /// What ran after that, in money, instance-hours and GPU-hours (of the boxes whose GPUs
    /// are known).
    pub past_limit: (f64, f64, f64),
}

impl BudgetSpend {
    /// Adds one instance's hours on demand under the policies (`used`), for the budgets
    /// `counted` says count it, hour by hour from `first_hour` (the replay's).
    pub fn add(&mut self, counted: &BudgetUse, used: &HourlyUse, first_hour: i64) {
        for key in &counted.keys {
            let hourly = self.by_key.entry(key.clone()).or_default();
            for hours in used.by_type.values() {
                let offset = (used.first_hour - first_hour).max(0) as usize;
                for (i, h) in hours.iter().enumerate() {
                    let at = offset + i;
                    for v in [
                        &mut hourly.cost,
                        &mut hourly.instance_hours,
                        &mut hourly.gpu_hours,
                    ] {
                        if v.len() <= at {
                            v.resize(at + 1, 0.0);
                        }
                    }
                    hourly.cost[at] += h * counted.rate;
                    hourly.instance_hours[at] += h;
                    hourly.gpu_hours[at] += h * f64::from(counted.gpus.unwrap_or(0));
                }
            }
        }
    }

    /// Adds `other`'s spend, from the same first hour.
    pub fn merge(&mut self, other: &BudgetSpend) {
        for (key, theirs) in &other.by_key {
            let ours = self.by_key.entry(key.clone()).or_default();
            for (mine, more) in [
                (&mut ours.cost, &theirs.cost),
                (&mut ours.instance_hours, &theirs.instance_hours),
                (&mut ours.gpu_hours, &theirs.gpu_hours),
            ] {
                if mine.len() < more.len() {
                    mine.resize(more.len(), 0.0);
                }
                for (m, v) in mine.iter_mut().zip(more) {
                    *m += v;
                }
            }
        }
    }

    /// Whether some box of this spend counts in budget `name`.
    pub(in crate::replay) fn counts_in(&self, name: &str) -> bool {
        self.by_key.keys().any(|(n, _)| n == name)
    }

    /// Every period of every budget of `set` that `shown` keeps, in `[from, to)`, that its
    /// boxes spent in (every period of a budget without `per`), with when it was reached.
    pub(in crate::replay) fn periods(
        &self,
        set: &PolicySet,
        shown: impl Fn(&Budget) -> bool,
        from: DateTime<Utc>,
        to: DateTime<Utc>,
        first_hour: i64,
    ) -> Vec<BudgetPeriod> {
        let mut out = Vec::new();
        let empty = Hourly::default();
        for b in set.budgets.iter().filter(|b| shown(b)) {
            let mut keys: Vec<Option<String>> = self
                .by_key
                .keys()
                .filter(|(name, _)| *name == b.name)
                .map(|(_, k)| k.clone())
                .collect();
            if b.per.is_none() && keys.is_empty() {
                keys.push(None);
            }
            for key in keys {
                let hourly = self
                    .by_key
                    .get(&(b.name.clone(), key.clone()))
                    .unwrap_or(&empty);
                for (start, end) in periods(b.period, b.timezone, from, to) {
                    let (spent, reached_at, past_limit) =
                        hourly.played(start, end, first_hour, b.amount);
                    out.push(BudgetPeriod {
                        budget: b.name.clone(),
                        key: key.clone(),
                        amount: b.amount,
                        at_limit: b.at_limit.as_str(),
                        timezone: b.timezone,
                        start,
                        end,
                        spent,
                        reached_at,
                        past_limit,
                    });
                }
            }
        }
        out
    }
}

impl Hourly {
    /// In `[start, end)`: the spend, when it reached `amount` (each hour's spend spread evenly
    /// over it), and what ran after that.
    fn played(
        &self,
        start: DateTime<Utc>,
        end: DateTime<Utc>,
        first_hour: i64,
        amount: f64,
    ) -> (f64, Option<DateTime<Utc>>, (f64, f64, f64)) {
        let (mut spent, mut reached, mut past) = (0.0, None, (0.0, 0.0, 0.0));
        let mut hour = start.timestamp().div_euclid(HOUR);
        let last = (end.timestamp() - 1).div_euclid(HOUR);
        while hour <= last {
            let i = hour - first_hour;
            let get = |v: &Vec<f64>| usize::try_from(i).ok().and_then(|i| v.get(i)).copied();
            let hour_start = DateTime::from_timestamp(hour * HOUR, 0).unwrap_or(start);
            // The part of the hour inside the period: a period of a zone whose midnight is not
            // on the hour shares an hour with the next, each getting its part.
            let inside = (end.min(hour_start + Duration::hours(1)) - start.max(hour_start))
                .num_seconds() as f64
                / HOUR as f64;
            let (cost, instance_hours, gpu_hours) = (
                get(&self.cost).unwrap_or(0.0) * inside,
                get(&self.instance_hours).unwrap_or(0.0) * inside,
                get(&self.gpu_hours).unwrap_or(0.0) * inside,
            );
            match reached {
                Some(_) => {
                    past.0 += cost;
                    past.1 += instance_hours;
                    past.2 += gpu_hours;
                }
                None if cost > 0.0 && spent + cost >= amount => {
                    let share = (amount - spent) / cost;
                    let into = Duration::milliseconds((share * inside * 3_600_000.0) as i64);
                    reached = Some(hour_start.max(start) + into);
                    let rest = 1.0 - share;
                    past.0 += cost * rest;
                    past.1 += instance_hours * rest;
                    past.2 += gpu_hours * rest;
                }
                None => {}
            }
            spent += cost;
            hour += 1;
        }
        (spent, reached, past)
    }
}

impl BudgetPeriod {
    /// As the replay's JSON has it.
    pub fn json(&self) -> Value {
        json!({
            "budget": self.budget,
            "key": self.key,
            "amount_usd": self.amount,
            "at_limit": self.at_limit,
            "from": self.start,
            "to": self.end,
            "spent_usd": self.spent,
            "reached_at": self.reached_at,
            "reached_local": self.reached_at.map(|t| local(t, self.timezone)),
            "past_limit_usd": self.past_limit.0,
            "past_limit_instance_hours": self.past_limit.1,
            "past_limit_gpu_hours": self.past_limit.2,
        })
    }
}

/// A time in `tz` as people read it, with its weekday: `2026-11-02 (Mon) 15:20 America/New_York`.
fn local(at: DateTime<Utc>, tz: chrono_tz::Tz) -> String {
    format!(
        "{} {}",
        at.with_timezone(&tz).format("%Y-%m-%d (%a) %H:%M"),
        tz.name()
    )
}

/// The budgets' lines of the replay's table (amounts in `currency`): for each budget, in how
/// many periods it was reached, then each period it was, when, and what ran past it.
pub(super) fn table(periods: &[BudgetPeriod], currency: &str) -> String {
    let money = |x: f64| crate::budget::money(x, currency);
    use std::fmt::Write as _;
    let mut out = String::new();
    let mut names: Vec<(&str, Option<&str>)> = periods
        .iter()
        .map(|p| (p.budget.as_str(), p.key.as_deref()))
        .collect();
    names.dedup();
    for (name, key) in names {
        let mine: Vec<&BudgetPeriod> = periods
            .iter()
            .filter(|p| p.budget == name && p.key.as_deref() == key)
            .collect();
        let reached: Vec<&&BudgetPeriod> = mine.iter().filter(|p| p.reached_at.is_some()).collect();
        let label = key.map_or(name.to_string(), |k| format!("{name} ({k})"));
        let highest = mine.iter().map(|p| p.spent).fold(0.0, f64::max);
        let _ = writeln!(
            out,
            "\nbudget {label}: {} a period, at_limit {}: reached in {} of {} periods (highest spend {})",
            money(mine.first().map_or(0.0, |p| p.amount)),
            mine.first().map_or("", |p| p.at_limit),
            reached.len(),
            mine.len(),
            money(highest)
        );
        for p in reached {
            // GPU-hours of the boxes whose GPUs the fleet gives: none known, none said.
            let gpu_hours = match p.past_limit.2 > 0.0 {
                true => format!(", {:.1} GPU-hours", p.past_limit.2),
                false => String::new(),
            };
            let _ = writeln!(
                out,
                "  reached {}: {} spent in the period; ran past it {}, {:.1} instance-hours{gpu_hours}",
                p.reached_at.map_or(String::new(), |t| local(t, p.timezone)),
                money(p.spent),
                money(p.past_limit.0),
                p.past_limit.1,
            );
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: &str) -> DateTime<Utc> {
        s.parse().unwrap()
    }

    #[test]
    fn an_hour_two_periods_share_is_split_and_the_limit_falls_inside_its_hour() {
        // $10 an hour, every hour from 00:00 UTC.
        let first_hour = at("2026-12-01T00:00:00Z").timestamp() / HOUR;
        let hourly = Hourly {
            cost: vec![10.0; 24],
            instance_hours: vec![1.0; 24],
            gpu_hours: vec![4.0; 24],
        };
        // Kolkata's midnight is 18:30 UTC: the hour from 18:00 is half in each day.
        let (spent, reached, past) = hourly.played(
            at("2026-12-01T00:00:00Z"),
            at("2026-12-01T18:30:00Z"),
            first_hour,
            55.0,
        );
        assert_eq!(spent, 185.0);
        assert_eq!(reached, Some(at("2026-12-01T05:30:00Z")));
        assert_eq!(past, (130.0, 13.0, 52.0));
        let (spent, reached, _) = hourly.played(
            at("2026-12-01T18:30:00Z"),
            at("2026-12-02T00:00:00Z"),
            first_hour,
            1000.0,
        );
        assert_eq!((spent, reached), (55.0, None));
    }
}
