//! A budget's spend so far in its period, its burn now and its forecast to the period's end.

use super::covered::Coverage;
use super::{bounds, money, periods};
use crate::engine::governing_policy;
use crate::fleet::money::PriceTable;
use crate::fleet::{Cloud, Fleet, Instance, InstanceState, Lifecycle, Tags};
use crate::policy::{Budget, OutsideHours, PolicySet};
use crate::schedule::Schedule;
use chrono::{DateTime, Duration, Utc};
use chrono_tz::Tz;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

/// A stretch one box ran (pending or running), with what it is matched by. A box's stretches
/// share its facts: a month of a large fleet is hundreds of thousands of them.
#[derive(Debug, Clone, PartialEq)]
pub struct Ran {
    /// The instance.
    pub instance: Arc<str>,
    /// Its region.
    pub region: Arc<str>,
    /// Its type.
    pub instance_type: Arc<str>,
    /// Its tags, as last listed.
    pub tags: Tags,
    /// Whether it is a spot (preemptible) box: its hours cost a market price ebb does not
    /// keep, far below the on-demand one, and no commitment covers them.
    pub spot: bool,
    /// From.
    pub from: DateTime<Utc>,
    /// To (now, for a box still running).
    pub to: DateTime<Utc>,
}

/// A raise of a budget's amount people made, on record and until a time (`ebb budgets raise`).
#[derive(Debug, Clone, PartialEq)]
pub struct Raise {
    /// The budget raised.
    pub budget: String,
    /// The value of its `per` tag raised; `None`: every value's.
    pub key: Option<String>,
    /// By how much.
    pub by: RaiseBy,
    /// When it was made.
    pub made_at: DateTime<Utc>,
    /// When it ends.
    pub until: DateTime<Utc>,
    /// Who made it.
    pub by_whom: String,
    /// Why, in their words.
    pub reason: String,
}

/// How much a raise adds to a budget's amount.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum RaiseBy {
    /// A share of the amount the policy files give, percent.
    Percent(f64),
    /// An amount in the budget's currency.
    Amount(f64),
}

impl RaiseBy {
    /// `20%`, or the amount in `currency`: `$500.00`.
    pub fn text(self, currency: &str) -> String {
        match self {
            RaiseBy::Percent(p) => format!("{p}%"),
            RaiseBy::Amount(a) => money(a, currency),
        }
    }
}

impl Raise {
    /// Whether it raises the standing of `budget` for `key` at `now`.
    fn applies(&self, budget: &str, key: Option<&str>, now: DateTime<Utc>) -> bool {
        self.budget == budget
            && (self.key.is_none() || self.key.as_deref() == key)
            && self.made_at <= now
            && now < self.until
    }

    /// By how much, who, and until when, for people: `20% by mei until 2026-12-20 00:00
    /// Asia/Shanghai`.
    pub fn describe(&self, currency: &str, tz: Tz) -> String {
        format!(
            "{} by {} until {}",
            self.by.text(currency),
            self.by_whom,
            local(self.until, tz)
        )
    }

    /// What it adds to `amount`.
    fn adds(&self, amount: f64) -> f64 {
        match self.by {
            RaiseBy::Percent(p) => amount * p / 100.0,
            RaiseBy::Amount(a) => a,
        }
    }
}

/// Where one budget (one value of its `per` tag) stands in its current period.
#[derive(Debug, Clone, PartialEq)]
pub struct Standing {
    /// The budget's name.
    pub budget: String,
    /// The value of its `per` tag.
    pub key: Option<String>,
    /// The currency of every figure.
    pub currency: String,
    /// What the period may spend: the policy files' amount with the raises in force.
    pub amount: f64,
    /// The raises in force, oldest first.
    pub raises: Vec<Raise>,
    /// The period: `[start, end)`.
    pub start: DateTime<Utc>,
    /// Its end.
    pub end: DateTime<Utc>,
    /// When this was worked out.
    pub now: DateTime<Utc>,
    /// The budget's zone.
    pub timezone: Tz,
    /// Spent so far by the boxes billed by the hour, or why that is unknown. Hours on spot
    /// are left out (`spot_hours`): never priced at on-demand, so `spent` never runs ahead of
    /// the bill and the budget acts only on what was surely spent.
    pub spent: Result<f64, String>,
    /// The hours the matched boxes ran on spot in the period so far, not in `spent`.
    pub spot_hours: f64,
    /// What the matched boxes running now cost an hour (spot boxes left out).
    pub per_hour: f64,
    /// What the period will have spent at its end, if what runs now keeps running through
    /// its policy's work hours (to the end without them); `None` while spend is unknown.
    pub forecast: Option<f64>,
    /// What each box spent so far, most first.
    pub boxes: Vec<(String, f64)>,
}

impl Standing {
    /// `name (per=value)`.
    pub fn label(&self) -> String {
        match &self.key {
            Some(k) => format!("{} ({k})", self.budget),
            None => self.budget.clone(),
        }
    }

    /// The figures for people: `research-monthly: ¥152,310.00 of ¥150,000.00 spent by
    /// 2026-12-19 18:00 Asia/Shanghai`.
    pub fn summary(&self) -> String {
        let raised: Vec<String> = self
            .raises
            .iter()
            .map(|r| r.describe(&self.currency, self.timezone))
            .collect();
        let amount = match raised.is_empty() {
            true => money(self.amount, &self.currency),
            false => format!(
                "{} (raised {})",
                money(self.amount, &self.currency),
                raised.join(", ")
            ),
        };
        let by = local(self.now, self.timezone);
        let spot = match self.spot_hours >= 0.005 {
            true => format!(
                " (and {:.2} h on spot, not priced: ebb keeps no spot prices)",
                self.spot_hours
            ),
            false => String::new(),
        };
        match &self.spent {
            Ok(s) => format!(
                "{}: {} of {amount} spent by {by}{spot}",
                self.label(),
                money(*s, &self.currency)
            ),
            Err(why) => format!("{}: spend of {amount} unknown ({why})", self.label()),
        }
    }

    /// When the period ends, as people read it.
    pub fn until(&self) -> String {
        local(self.end, self.timezone)
    }

    /// The thresholds of `budget` (percent) reached by spend, and, with its `forecast`, by
    /// the forecast: each with whether only the forecast reached it.
    pub fn crossed(&self, budget: &Budget) -> Vec<(f64, bool)> {
        let Ok(spent) = self.spent else {
            return Vec::new();
        };
        let share = |v: f64| v / self.amount * 100.0;
        budget
            .notify_at
            .iter()
            .filter_map(|&t| {
                if share(spent) >= t {
                    Some((t, false))
                } else if budget.forecast && self.forecast.is_some_and(|f| share(f) >= t) {
                    Some((t, true))
                } else {
                    None
                }
            })
            .collect()
    }
}

/// One budget's standing as `ebb budgets --format json` and `GET /v1/budgets` give it.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct StandingRow {
    /// The budget.
    pub budget: String,
    /// Its `per` value.
    pub key: Option<String>,
    /// The currency of the figures.
    pub currency: String,
    /// The amount, with the raises in force.
    pub amount: f64,
    /// The period: `[period_start, period_end)`.
    pub period_start: DateTime<Utc>,
    /// Its end.
    pub period_end: DateTime<Utc>,
    /// Spent so far; `null` when unknown, with `unknown` saying why.
    pub spent: Option<f64>,
    /// Why the spend is unknown, when it is.
    pub unknown: Option<String>,
    /// The hours the boxes ran on spot, not in `spent` (ebb keeps no spot prices).
    pub spot_hours: f64,
    /// What the matched boxes running now cost an hour.
    pub per_hour: f64,
    /// The forecast to the period's end.
    pub forecast: Option<f64>,
    /// What happens at the limit.
    pub at_limit: &'static str,
    /// The raises in force: who, by how much, until when, why.
    pub raises: Vec<String>,
    /// The boxes that spent most, most first (at most five).
    pub top_boxes: Vec<(String, f64)>,
}

impl Standing {
    /// The standing as JSON rows give it, with what `at_limit` its budget does.
    pub fn row(&self, at_limit: &'static str) -> StandingRow {
        StandingRow {
            budget: self.budget.clone(),
            key: self.key.clone(),
            currency: self.currency.clone(),
            amount: self.amount,
            period_start: self.start,
            period_end: self.end,
            spent: self.spent.as_ref().ok().copied(),
            unknown: self.spent.as_ref().err().cloned(),
            spot_hours: self.spot_hours,
            per_hour: self.per_hour,
            forecast: self.forecast,
            at_limit,
            raises: self
                .raises
                .iter()
                .map(|r| {
                    format!(
                        "{}: {}",
                        r.describe(&self.currency, self.timezone),
                        r.reason
                    )
                })
                .collect(),
            top_boxes: self.boxes.iter().take(5).cloned().collect(),
        }
    }
}

/// A time in `tz` as people read it: `2026-12-19 18:00 Asia/Shanghai`.
fn local(at: DateTime<Utc>, tz: Tz) -> String {
    format!(
        "{} {}",
        at.with_timezone(&tz).format("%Y-%m-%d %H:%M"),
        tz.name()
    )
}

/// Where every budget of `set` stands at `now`: for each, what the boxes it matches ran in
/// `ran` (every box's stretches since the earliest period began), priced in its currency, and
/// the boxes of `fleet` running now. Boxes of `cloud` are billed in its currency: a budget in
/// another has an unknown spend, and so does one with a box the table does not price. The
/// `raises` in force add to the amounts.
pub fn standings(
    set: &PolicySet,
    now: DateTime<Utc>,
    cloud: Cloud,
    ran: &[Ran],
    fleet: &Fleet,
    prices: &PriceTable,
    raises: &[Raise],
) -> Vec<Standing> {
    // Spot boxes burn a market price ebb does not keep: left out of the burn and forecast.
    let running: Vec<&Instance> = fleet
        .instances
        .iter()
        .filter(|i| matches!(i.state, InstanceState::Running | InstanceState::Pending))
        .filter(|i| i.lifecycle != Lifecycle::Spot)
        .collect();
    let earliest = set
        .budgets
        .iter()
        .map(|b| bounds(b.period, b.timezone, now).0)
        .min()
        .unwrap_or(now);
    // The commitments are the dollar table's: a budget in another currency sees none.
    let (dollars, none) = (
        Coverage::of(stretches(ran), prices, earliest, now),
        Coverage::default(),
    );
    let covered_in = |currency: &str| if currency == "USD" { &dollars } else { &none };
    let mut out = Vec::new();
    for b in &set.budgets {
        let ran_key = |r: &Ran| {
            b.key_for(&r.region, &r.instance_type, |k| r.tags.get(k))
                .map(|k| k.map(str::to_string))
        };
        let inst_key = |i: &Instance| {
            b.key_for(&i.region, &i.instance_type, |k| i.tag(k))
                .map(|k| k.map(str::to_string))
        };
        let mut keys: BTreeSet<Option<String>> = ran.iter().filter_map(ran_key).collect();
        keys.extend(running.iter().filter_map(|i| inst_key(i)));
        if b.per.is_none() {
            keys.insert(None);
        }
        let (start, end) = bounds(b.period, b.timezone, now);
        let currency = b
            .currency
            .clone()
            .unwrap_or_else(|| cloud.currency().to_string());
        for key in keys {
            let ran: Vec<&Ran> = ran
                .iter()
                .filter(|r| ran_key(r) == Some(key.clone()))
                .collect();
            let boxes: Vec<&Instance> = running
                .iter()
                .copied()
                .filter(|i| inst_key(i) == Some(key.clone()))
                .collect();
            let priced = Priced {
                prices,
                currency: &currency,
                cloud,
                coverage: covered_in(&currency),
            };
            let spent = priced.spent(&ran, start, now);
            let spot_hours = spot_hours(&ran, start, now);
            let per_hour: f64 = boxes.iter().filter_map(|i| priced.hourly(i).ok()).sum();
            let forecast = match &spent {
                Ok((total, _)) => boxes
                    .iter()
                    .map(|i| {
                        let hours = hours_left(set, i, now, end);
                        priced.hourly(i).map(|p| p * hours)
                    })
                    .sum::<Result<f64, String>>()
                    .ok()
                    .map(|rest| total + rest),
                Err(_) => None,
            };
            let raises: Vec<Raise> = raises
                .iter()
                .filter(|r| r.applies(&b.name, key.as_deref(), now))
                .cloned()
                .collect();
            let amount = b.amount + raises.iter().map(|r| r.adds(b.amount)).sum::<f64>();
            out.push(Standing {
                budget: b.name.clone(),
                key,
                currency: currency.clone(),
                amount,
                raises,
                start,
                end,
                now,
                timezone: b.timezone,
                boxes: spent.as_ref().map(|(_, by)| by.clone()).unwrap_or_default(),
                spent: spent.map(|(total, _)| total),
                spot_hours,
                per_hour,
                forecast,
            });
        }
    }
    out
}

/// What the boxes of `standing` (a standing [`standings`] worked out for budget `b`) had spent
/// by each of `points`, from what `ran`: the burn-down of its period so far. Empty while its
/// spend is unknown.
pub fn spent_by(
    b: &Budget,
    standing: &Standing,
    cloud: Cloud,
    ran: &[Ran],
    prices: &PriceTable,
    points: &[DateTime<Utc>],
) -> Vec<f64> {
    if standing.spent.is_err() {
        return Vec::new();
    }
    let end = points.iter().copied().max().unwrap_or(standing.start);
    // Every box's hours share the commitments, not only the budget's.
    let coverage = match standing.currency.as_str() {
        "USD" => Coverage::of(stretches(ran), prices, standing.start, end),
        _ => Coverage::default(),
    };
    let key = standing.key.as_deref();
    let ran: Vec<&Ran> = ran
        .iter()
        .filter(|r| b.key_for(&r.region, &r.instance_type, |k| r.tags.get(k)) == Some(key))
        .collect();
    let priced = Priced {
        prices,
        currency: &standing.currency,
        cloud,
        coverage: &coverage,
    };
    points
        .iter()
        .map(|&t| {
            priced
                .spent(&ran, standing.start, t)
                .map_or(0.0, |(total, _)| total)
        })
        .collect()
}

/// What one budget's boxes (one value of its `per` tag's) spent in one of its periods, cut to
/// a report's window.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct PeriodSpend {
    /// The budget.
    pub budget: String,
    /// Its `per` value.
    pub key: Option<String>,
    /// The currency of the figures.
    pub currency: String,
    /// The amount the policy files give (raises left out).
    pub amount: f64,
    /// The period, cut to the window.
    pub from: DateTime<Utc>,
    /// Its end, cut to the window.
    pub to: DateTime<Utc>,
    /// Spent in it, or why that is unknown.
    pub spent: Option<f64>,
    /// Why the spend is unknown, when it is.
    pub unknown: Option<String>,
    /// The hours its boxes ran on spot in it, not in `spent` (ebb keeps no spot prices).
    pub spot_hours: f64,
}

/// What each budget of `set` spent in each of its periods in `[from, to)`, from what `ran` (as
/// [`standings`] prices it): for `ebb report`.
pub fn spent_in_periods(
    set: &PolicySet,
    cloud: Cloud,
    ran: &[Ran],
    prices: &PriceTable,
    (from, to): (DateTime<Utc>, DateTime<Utc>),
) -> Vec<PeriodSpend> {
    let dollars = Coverage::of(stretches(ran), prices, from, to);
    let mut out = Vec::new();
    for b in &set.budgets {
        let currency = b
            .currency
            .clone()
            .unwrap_or_else(|| cloud.currency().to_string());
        let key_of = |r: &Ran| {
            b.key_for(&r.region, &r.instance_type, |k| r.tags.get(k))
                .map(|k| k.map(str::to_string))
        };
        let mut keys: BTreeSet<Option<String>> = ran.iter().filter_map(key_of).collect();
        if b.per.is_none() {
            keys.insert(None);
        }
        let coverage = match currency.as_str() {
            "USD" => Some(&dollars),
            _ => None,
        };
        let none = Coverage::default();
        let priced = Priced {
            prices,
            currency: &currency,
            cloud,
            coverage: coverage.unwrap_or(&none),
        };
        for key in keys {
            let mine: Vec<&Ran> = ran
                .iter()
                .filter(|r| key_of(r) == Some(key.clone()))
                .collect();
            for (start, end) in periods(b.period, b.timezone, from, to) {
                let spent = priced.spent(&mine, start, end);
                out.push(PeriodSpend {
                    budget: b.name.clone(),
                    key: key.clone(),
                    currency: currency.clone(),
                    amount: b.amount,
                    from: start,
                    to: end,
                    spent: spent.as_ref().ok().map(|(total, _)| *total),
                    unknown: spent.err(),
                    spot_hours: spot_hours(&mine, start, end),
                });
            }
        }
    }
    out
}

/// Prices hours in a budget's currency.
struct Priced<'a> {
    prices: &'a PriceTable,
    currency: &'a str,
    cloud: Cloud,
    /// What the commitments pay of each hour (in dollars: none for another currency).
    coverage: &'a Coverage,
}

impl Priced<'_> {
    /// The hourly price of `instance_type` in `region`, or why there is none.
    fn price(&self, region: &str, instance_type: &str) -> Result<f64, String> {
        let billed_in = self.cloud.currency();
        if billed_in != self.currency {
            return Err(format!(
                "the budget is in {}, but {} bills in {billed_in}",
                self.currency,
                self.cloud.display_name()
            ));
        }
        let table = match self.currency {
            "USD" => Some(self.prices),
            other => self.prices.other_currencies.get(other),
        };
        table
            .and_then(|t| t.get(region, instance_type))
            .ok_or_else(|| {
                format!(
                    "the price table has no {} price of {instance_type} in {region}; add it to EBB_PRICES",
                    self.currency
                )
            })
    }

    fn hourly(&self, inst: &Instance) -> Result<f64, String> {
        self.price(&inst.region, &inst.instance_type)
    }

    /// What `ran` cost inside `[start, now)`, in total and by box (most first).
    fn spent(
        &self,
        ran: &[&Ran],
        start: DateTime<Utc>,
        now: DateTime<Utc>,
    ) -> Result<(f64, Vec<(String, f64)>), String> {
        let mut by_box: BTreeMap<&str, f64> = BTreeMap::new();
        for r in ran.iter().filter(|r| !r.spot) {
            let (from, to) = (r.from.max(start), r.to.min(now));
            if to <= from {
                continue;
            }
            let price = self.price(&r.region, &r.instance_type)?;
            let cost = self
                .coverage
                .cost(&r.region, &r.instance_type, price, (from, to));
            *by_box.entry(&r.instance).or_default() += cost;
        }
        let total = by_box.values().sum();
        let mut by: Vec<(String, f64)> = by_box
            .into_iter()
            .map(|(i, c)| (i.to_string(), c))
            .collect();
        by.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        Ok((total, by))
    }
}

fn hours(d: Duration) -> f64 {
    d.num_milliseconds() as f64 / 3_600_000.0
}

/// The hours `inst` would still run in `[now, end)`: its policy's work hours left in it when
/// the policy stops boxes outside them, all of it otherwise.
fn hours_left(set: &PolicySet, inst: &Instance, now: DateTime<Utc>, end: DateTime<Utc>) -> f64 {
    let wh = governing_policy(set, inst)
        .and_then(|p| p.work_hours.as_ref())
        .filter(|wh| wh.outside_hours != OutsideHours::None);
    match wh {
        Some(wh) => hours(in_hours(&wh.schedule, now, end)),
        None => hours(end - now),
    }
}

/// How long `schedule` is open in `[from, to)`.
fn in_hours(schedule: &Schedule, from: DateTime<Utc>, to: DateTime<Utc>) -> Duration {
    let mut total = Duration::zero();
    let mut t = from;
    while t < to {
        let st = schedule.status(t);
        let next = st.next.map_or(to, |n| n.min(to));
        if st.in_hours {
            total += next - t;
        }
        if next <= t {
            break;
        }
        t = next;
    }
    total
}

/// Every stretch of `ran` as the commitments' coverage takes it: on-demand ones, since no
/// commitment covers a spot hour.
fn stretches(ran: &[Ran]) -> impl Iterator<Item = (&str, &str, DateTime<Utc>, DateTime<Utc>)> {
    ran.iter()
        .filter(|r| !r.spot)
        .map(|r| (&*r.region, &*r.instance_type, r.from, r.to))
}

/// The hours the spot boxes of `ran` ran inside `[start, now)`.
fn spot_hours(ran: &[&Ran], start: DateTime<Utc>, now: DateTime<Utc>) -> f64 {
    ran.iter()
        .filter(|r| r.spot)
        .map(|r| hours((r.to.min(now) - r.from.max(start)).max(Duration::zero())))
        .sum()
}
