//! The measures of a replay, summed over instances and policies, and how they are shown:
//! JSON, a table, and a pull-request comment in Markdown; from gross to net in [`net`], the
//! budgets' periods in [`budgets`], and a report per currency in [`currencies`]. A report's
//! money is in its one currency: a replay of boxes billed in dollars and in yuan is two.

mod budgets;
mod currencies;
mod net;

pub use budgets::{BudgetPeriod, BudgetSpend, BudgetUse};
pub use currencies::Reports;
pub use net::Net;

use crate::policy::{Budget, PolicySet};
use crate::report::money::HourlyUse;
use chrono::{DateTime, SecondsFormat, Utc};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::ops::AddAssign;

/// What one scenario did to one instance, or to many summed.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Tally {
    /// Seconds running.
    pub running_s: i64,
    /// Seconds running while not busy.
    pub idle_running_s: i64,
    /// Seconds of demand while stopped.
    pub unserved_busy_s: i64,
    /// What the running cost, in the currency its boxes are billed in.
    pub cost: f64,
    /// Stops and hibernations.
    pub stops: u64,
    /// Starts, ebb's and a person's.
    pub starts: u64,
    /// Stops followed by demand within 30 minutes.
    pub wrongful_stops: u64,
    /// Spot replacements reclaimed (`--interruptions`).
    pub interruptions: u64,
    /// Seconds of work the reclaims lost: since the last checkpoint, and a relaunch.
    pub lost_work_s: i64,
    /// The same in GPU-seconds (times the GPUs of the reclaimed type).
    pub lost_gpu_s: i64,
    /// The lost work at the on-demand rate, in the same currency.
    pub lost_work: f64,
    /// Seconds running on spot.
    pub spot_s: i64,
    /// Seconds running on demand after a replacement fell back, until back on spot.
    pub fallback_s: i64,
}

impl AddAssign for Tally {
    fn add_assign(&mut self, o: Tally) {
        self.running_s += o.running_s;
        self.idle_running_s += o.idle_running_s;
        self.unserved_busy_s += o.unserved_busy_s;
        self.cost += o.cost;
        self.stops += o.stops;
        self.starts += o.starts;
        self.wrongful_stops += o.wrongful_stops;
        self.interruptions += o.interruptions;
        self.lost_work_s += o.lost_work_s;
        self.lost_gpu_s += o.lost_gpu_s;
        self.lost_work += o.lost_work;
        self.spot_s += o.spot_s;
        self.fallback_s += o.fallback_s;
    }
}

fn hours(seconds: i64) -> f64 {
    round(seconds as f64 / 3600.0, 4)
}

fn round(x: f64, places: i32) -> f64 {
    let f = 10f64.powi(places);
    (x * f).round() / f
}

impl Tally {
    /// The measures by their documented names.
    fn json(&self) -> serde_json::Map<String, Value> {
        let Value::Object(map) = json!({
            "running_hours": hours(self.running_s),
            "idle_running_hours": hours(self.idle_running_s),
            "cost_usd": round(self.cost, 4),
            "stops": self.stops,
            "starts": self.starts,
            "unserved_busy_hours": hours(self.unserved_busy_s),
            "wrongful_stops": self.wrongful_stops,
            "interruptions": self.interruptions,
            "lost_work_hours": hours(self.lost_work_s),
            "lost_gpu_hours": hours(self.lost_gpu_s),
            "lost_work_usd": round(self.lost_work, 4),
            "spot_hours": hours(self.spot_s),
            "fallback_on_demand_hours": hours(self.fallback_s),
        }) else {
            unreachable!("json! of an object is an object")
        };
        map
    }
}

/// One instance, one policy or the total, in every scenario.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Scenarios {
    /// Under the policies given.
    pub policies: Tally,
    /// Under `--baseline-policies`, when given.
    pub baseline: Option<Tally>,
    /// Under the policies given with `late_start: enforce` in each: what keeping people's late
    /// starts costs and serves. Only when some policy keeps them.
    pub late_start_enforce: Option<Tally>,
    /// Under the policies given without their idle rules' activity signals: the stops the
    /// signals prevent and what keeping those boxes costs. Only when some policy has them.
    pub without_activity: Option<Tally>,
    /// With `--interruptions`, the policies with each spot move placed by price alone (the
    /// policies place by expected cost).
    pub cheapest_first: Option<Tally>,
    /// Every instance running the whole period.
    pub always_on: Tally,
    /// Each instance running exactly while busy.
    pub oracle: Tally,
}

impl AddAssign for Scenarios {
    fn add_assign(&mut self, o: Scenarios) {
        self.policies += o.policies;
        self.always_on += o.always_on;
        self.oracle += o.oracle;
        if let Some(b) = o.baseline {
            *self.baseline.get_or_insert_with(Tally::default) += b;
        }
        if let Some(e) = o.late_start_enforce {
            *self.late_start_enforce.get_or_insert_with(Tally::default) += e;
        }
        if let Some(w) = o.without_activity {
            *self.without_activity.get_or_insert_with(Tally::default) += w;
        }
        if let Some(c) = o.cheapest_first {
            *self.cheapest_first.get_or_insert_with(Tally::default) += c;
        }
    }
}

impl Scenarios {
    /// What a policy scenario saves against always on.
    pub fn savings(&self, t: &Tally) -> f64 {
        self.always_on.cost - t.cost
    }

    /// What a policy scenario spends beyond the oracle, in percent of the oracle's cost;
    /// `None` when the oracle spends nothing.
    pub fn waste_pct(&self, t: &Tally) -> Option<f64> {
        (self.oracle.cost > 0.0).then(|| 100.0 * (t.cost - self.oracle.cost) / self.oracle.cost)
    }

    fn policy_json(&self, t: &Tally) -> Value {
        let mut map = t.json();
        map.insert(
            "savings_vs_always_on_usd".into(),
            json!(round(self.savings(t), 4)),
        );
        map.insert(
            "waste_over_oracle_pct".into(),
            json!(self.waste_pct(t).map(|p| round(p, 2))),
        );
        Value::Object(map)
    }

    fn json(&self) -> Value {
        let mut map = serde_json::Map::new();
        map.insert("policies".into(), self.policy_json(&self.policies));
        map.insert("always_on".into(), Value::Object(self.always_on.json()));
        map.insert("oracle".into(), Value::Object(self.oracle.json()));
        if let Some(b) = &self.baseline {
            map.insert("baseline".into(), self.policy_json(b));
        }
        if let Some(e) = &self.late_start_enforce {
            map.insert("late_start_enforce".into(), self.policy_json(e));
        }
        if let Some(w) = &self.without_activity {
            map.insert("without_activity".into(), self.policy_json(w));
        }
        if let Some(c) = &self.cheapest_first {
            map.insert("cheapest_first".into(), self.policy_json(c));
        }
        Value::Object(map)
    }
}

/// What the activity signals did, against the same policies without them: the stops they
/// prevented and what keeping those boxes running cost (in `currency`). `None` without signals.
fn activity_line(t: &Scenarios, currency: &str) -> Option<String> {
    let w = t.without_activity?;
    Some(format!(
        "The activity signals, against the same policies without them: stops prevented {}, running hours {:+.1}, cost {:+.2} {currency}.",
        w.stops.saturating_sub(t.policies.stops),
        (t.policies.running_s - w.running_s) as f64 / 3600.0,
        t.policies.cost - w.cost
    ))
}

/// The outcome of one instance.
#[derive(Debug, Clone, PartialEq)]
pub struct InstanceOutcome {
    /// The instance id.
    pub instance: String,
    /// The currency its cloud bills it in (`Cloud::currency`): its money is counted in the
    /// report of that currency alone.
    pub currency: &'static str,
    /// The policy governing it at the start under the policies given; `None` when none does.
    pub policy: Option<String>,
    /// What each scenario did to it.
    pub scenarios: Scenarios,
    /// Its hours on demand, for the commitments (taken out when the report adds it).
    pub on_demand: Option<Box<OnDemandUse>>,
    /// Its seconds on spot by placement and pool (zone, type), with `--interruptions`.
    pub spot_pools: SpotPools,
    /// The budgets that count it and its rate, when the policy files have budgets (taken out
    /// when the report adds it).
    pub budgets: Option<Box<BudgetUse>>,
}

/// Seconds on spot by placement (`expected_cost`, `cheapest_first`) and pool (zone, type).
pub type SpotPools = BTreeMap<(&'static str, String, String), i64>;

/// Hours running on demand under the policies and always on, by hour: what the commitments
/// held apply to.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct OnDemandUse {
    /// Under the policies given.
    pub policies: HourlyUse,
    /// Always on.
    pub always_on: HourlyUse,
}

/// A whole replay of the boxes billed in one currency: the total, per policy and per
/// instance.
#[derive(Debug, Clone)]
pub struct Report {
    /// The currency (ISO 4217) of every amount in it.
    currency: &'static str,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
    /// Every instance summed.
    pub total: Scenarios,
    /// By governing policy (`None`: no policy governs).
    pub by_policy: BTreeMap<Option<String>, Scenarios>,
    /// Each instance, in the order added.
    pub instances: Vec<InstanceOutcome>,
    /// Every instance's hours on demand, summed.
    on_demand: OnDemandUse,
    /// Gross to net, once [`Report::apply_prices`] found commitments held or stopped boxes'
    /// costs priced.
    pub net: Option<Net>,
    /// Every instance's seconds on spot, by placement and pool.
    pub spot_pools: SpotPools,
    /// Every budget's spend hour by hour under the policies.
    budget_spend: BudgetSpend,
    /// Each budget's periods, once [`Report::apply_budgets`] worked them out.
    pub budgets: Vec<BudgetPeriod>,
}

/// A row of the Markdown comparison: its name, the measure, and its decimal places.
type MarkdownRow<'a> = (&'a str, fn(&Tally) -> f64, usize);

/// How many instances the Markdown comment lists as changed most.
const MOST_CHANGED: usize = 10;

impl Report {
    /// An empty report of the replay from `from` to `to`, in dollars.
    pub fn new(from: DateTime<Utc>, to: DateTime<Utc>) -> Self {
        Report::in_currency("USD", from, to)
    }

    /// An empty report of the replay from `from` to `to` of the boxes billed in `currency`.
    fn in_currency(currency: &'static str, from: DateTime<Utc>, to: DateTime<Utc>) -> Self {
        Report {
            currency,
            from,
            to,
            total: Scenarios::default(),
            by_policy: BTreeMap::new(),
            instances: Vec::new(),
            on_demand: OnDemandUse {
                policies: HourlyUse::starting(from),
                always_on: HourlyUse::starting(from),
            },
            net: None,
            spot_pools: SpotPools::new(),
            budget_spend: BudgetSpend::default(),
            budgets: Vec::new(),
        }
    }

    /// Works out each budget of `set` in this report's currency period by period from the
    /// spend its instances added: when it was reached and what ran past it. A budget that
    /// names no currency is in its boxes': it is shown here when some box here counts in it,
    /// or when this report is in dollars and no box of another currency does (`elsewhere`).
    fn apply_budgets(&mut self, set: &PolicySet, elsewhere: impl Fn(&str) -> bool) {
        let first_hour = self.on_demand.policies.first_hour;
        let (spend, currency) = (&self.budget_spend, self.currency);
        let shown = |b: &Budget| match &b.currency {
            Some(c) => c == currency,
            None => spend.counts_in(&b.name) || (currency == "USD" && !elsewhere(&b.name)),
        };
        self.budgets = spend.periods(set, shown, self.from, self.to, first_hour);
    }

    /// Adds budgets' spend summed apart from the outcomes.
    pub fn add_budget_spend(&mut self, spend: &BudgetSpend) {
        self.budget_spend.merge(spend);
    }

    /// Adds hours on demand summed apart from their outcomes.
    pub fn add_on_demand(&mut self, used: &OnDemandUse) {
        self.on_demand.policies.merge(&used.policies);
        self.on_demand.always_on.merge(&used.always_on);
    }

    /// Adds the outcomes of a chunk.
    pub fn add(&mut self, outcomes: Vec<InstanceOutcome>) {
        for mut o in outcomes {
            if let (Some(counted), Some(used)) = (o.budgets.take(), &o.on_demand) {
                let first_hour = self.on_demand.policies.first_hour;
                self.budget_spend.add(&counted, &used.policies, first_hour);
            }
            if let Some(used) = o.on_demand.take() {
                self.on_demand.policies.merge(&used.policies);
                self.on_demand.always_on.merge(&used.always_on);
            }
            self.total += o.scenarios;
            for (pool, seconds) in std::mem::take(&mut o.spot_pools) {
                *self.spot_pools.entry(pool).or_default() += seconds;
            }
            *self.by_policy.entry(o.policy.clone()).or_default() += o.scenarios;
            self.instances.push(o);
        }
    }

    fn period(&self) -> (String, String) {
        let t = |t: DateTime<Utc>| t.to_rfc3339_opts(SecondsFormat::Secs, true);
        (t(self.from), t(self.to))
    }

    /// `{"currency", "from", "to", "scenarios", "policies": [...], "instances": [...]}`, the
    /// money keys ending in this report's currency (`cost_usd`, `cost_cny`).
    fn json_value(&self) -> Value {
        let (from, to) = self.period();
        let mut instances: Vec<&InstanceOutcome> = self.instances.iter().collect();
        instances.sort_by(|a, b| a.instance.cmp(&b.instance));
        let mut value = json!({
            "currency": self.currency,
            "from": from,
            "to": to,
            "scenarios": self.total.json(),
            "commitments": self.net.map(|n| n.json()),
            "policies": self.by_policy.iter().map(|(p, s)| json!({
                "policy": p,
                "scenarios": s.json(),
            })).collect::<Vec<_>>(),
            "budgets": self.budgets.iter().map(BudgetPeriod::json).collect::<Vec<_>>(),
            "instances": instances.iter().map(|o| json!({
                "instance": o.instance,
                "policy": o.policy,
                "scenarios": o.scenarios.json(),
            })).collect::<Vec<_>>(),
        });
        currencies::name_money_keys(&mut value, self.currency);
        value
    }

    /// The scenarios in total, then the policies scenario by policy.
    pub fn table(&self) -> String {
        let (from, to) = self.period();
        let c = self.currency.to_lowercase();
        let mut out = format!(
            "replay {from} to {to}, {} instances billed in {}\n\n",
            self.instances.len(),
            self.currency
        );
        let _ = writeln!(
            out,
            "{:<18} {:>10} {:>10} {:>12} {:>6} {:>6} {:>10} {:>8} {:>12} {:>8}",
            "scenario",
            "running_h",
            "idle_h",
            format!("cost_{c}"),
            "stops",
            "starts",
            "unserved_h",
            "wrongful",
            format!("savings_{c}"),
            "waste_%"
        );
        let t = &self.total;
        let mut rows = vec![("policies", t.policies, true)];
        rows.extend(
            t.late_start_enforce
                .map(|e| ("late_start_enforce", e, true)),
        );
        rows.extend(t.without_activity.map(|w| ("without_activity", w, true)));
        rows.extend(t.baseline.map(|b| ("baseline", b, true)));
        rows.push(("always_on", t.always_on, false));
        rows.push(("oracle", t.oracle, false));
        for (name, tally, policy) in rows {
            let (savings, waste) = match policy {
                true => (
                    format!("{:.2}", t.savings(&tally)),
                    t.waste_pct(&tally)
                        .map_or("-".into(), |p| format!("{p:.1}")),
                ),
                false => ("-".into(), "-".into()),
            };
            let _ = writeln!(
                out,
                "{name:<18} {:>10.2} {:>10.2} {:>12.2} {:>6} {:>6} {:>10.2} {:>8} {savings:>12} {waste:>8}",
                tally.running_s as f64 / 3600.0,
                tally.idle_running_s as f64 / 3600.0,
                tally.cost,
                tally.stops,
                tally.starts,
                tally.unserved_busy_s as f64 / 3600.0,
                tally.wrongful_stops,
            );
        }
        if let Some(net) = &self.net {
            let _ = writeln!(out, "\n{}", net.line(self.currency));
        }
        if let Some(line) = activity_line(t, self.currency) {
            let _ = writeln!(out, "\n{line}");
        }
        out.push_str(&budgets::table(&self.budgets, self.currency));
        let _ = writeln!(
            out,
            "\n{:<32} {:>12} {:>12} {:>10} {:>8}",
            "policy",
            format!("cost_{c}"),
            format!("savings_{c}"),
            "unserved_h",
            "wrongful"
        );
        for (policy, s) in &self.by_policy {
            let _ = writeln!(
                out,
                "{:<32} {:>12.2} {:>12.2} {:>10.2} {:>8}",
                policy.as_deref().unwrap_or("(no policy)"),
                s.policies.cost,
                s.savings(&s.policies),
                s.policies.unserved_busy_s as f64 / 3600.0,
                s.policies.wrongful_stops
            );
        }
        out
    }

    /// A pull-request comment: the baseline's totals and the policies' side by side with the
    /// difference (against always on without a baseline), and the instances whose outcome
    /// changed most.
    pub fn markdown(&self) -> String {
        let (from, to) = self.period();
        let t = &self.total;
        let (label, base) = match t.baseline {
            Some(b) => ("baseline", b),
            None => ("always on", t.always_on),
        };
        let mut out = format!(
            "### ebb replay, {from} to {to} ({} instances billed in {})\n\n| | {label} | policies | difference |\n|---|---:|---:|---:|\n",
            self.instances.len(),
            self.currency
        );
        let cost_row = format!("cost ({})", self.currency);
        let rows: [MarkdownRow; 7] = [
            (&cost_row, |t| t.cost, 2),
            ("running hours", |t| t.running_s as f64 / 3600.0, 1),
            (
                "idle running hours",
                |t| t.idle_running_s as f64 / 3600.0,
                1,
            ),
            (
                "unserved busy hours",
                |t| t.unserved_busy_s as f64 / 3600.0,
                2,
            ),
            ("stops", |t| t.stops as f64, 0),
            ("starts", |t| t.starts as f64, 0),
            ("wrongful stops", |t| t.wrongful_stops as f64, 0),
        ];
        for (name, measure, places) in rows {
            let (b, p) = (measure(&base), measure(&t.policies));
            let _ = writeln!(
                out,
                "| {name} | {b:.places$} | {p:.places$} | {:+.places$} |",
                p - b
            );
        }
        let money = |x: f64| crate::budget::money(x, self.currency);
        let _ = writeln!(
            out,
            "\nAlways on would cost {}; the oracle (running exactly while busy) {}. The policies save {} against always on.\n",
            money(t.always_on.cost),
            money(t.oracle.cost),
            money(t.savings(&t.policies))
        );
        if let Some(net) = &self.net {
            let _ = writeln!(out, "{}\n", net.line(self.currency));
        }
        if let Some(e) = t.late_start_enforce {
            let _ = writeln!(
                out,
                "Keeping people's starts after the close until idle, against `late_start: enforce`: cost {:+.2} {}, running hours {:+.1}, unserved busy hours {:+.2} (enforce leaves {:.2} h unserved).\n",
                t.policies.cost - e.cost,
                self.currency,
                (t.policies.running_s - e.running_s) as f64 / 3600.0,
                (t.policies.unserved_busy_s - e.unserved_busy_s) as f64 / 3600.0,
                e.unserved_busy_s as f64 / 3600.0
            );
        }
        if let Some(line) = activity_line(t, self.currency) {
            let _ = writeln!(out, "{line}\n");
        }
        out.push_str(&self.most_changed(label));
        out
    }

    /// The instances whose cost or unserved demand changed most against the baseline (or
    /// always on).
    fn most_changed(&self, label: &str) -> String {
        let base = |s: &Scenarios| s.baseline.unwrap_or(s.always_on);
        let change = |o: &&InstanceOutcome| {
            let (b, p) = (base(&o.scenarios), o.scenarios.policies);
            (
                (p.cost - b.cost).abs(),
                (p.unserved_busy_s - b.unserved_busy_s).abs(),
            )
        };
        let mut changed: Vec<&InstanceOutcome> = self
            .instances
            .iter()
            .filter(|o| base(&o.scenarios) != o.scenarios.policies)
            .collect();
        changed.sort_by(|a, b| {
            let (ca, cb) = (change(a), change(b));
            cb.0.total_cmp(&ca.0)
                .then(cb.1.cmp(&ca.1))
                .then(a.instance.cmp(&b.instance))
        });
        if changed.is_empty() {
            return format!("No instance's outcome differs from {label}.\n");
        }
        let mut out = format!(
            "#### Instances whose outcome changed most\n\n| instance | policy | cost {label} | cost policies | difference | unserved hours difference | stops difference |\n|---|---|---:|---:|---:|---:|---:|\n"
        );
        for o in changed.into_iter().take(MOST_CHANGED) {
            let (b, p) = (base(&o.scenarios), o.scenarios.policies);
            let _ = writeln!(
                out,
                "| {} | {} | {:.2} | {:.2} | {:+.2} | {:+.2} | {:+} |",
                o.instance,
                o.policy.as_deref().unwrap_or("(no policy)"),
                b.cost,
                p.cost,
                p.cost - b.cost,
                (p.unserved_busy_s - b.unserved_busy_s) as f64 / 3600.0,
                p.stops as i64 - b.stops as i64
            );
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fleet::money::PriceTable;
    use crate::fleet::Fleet;

    fn tally(running_h: i64, cost: f64) -> Tally {
        Tally {
            running_s: running_h * 3600,
            cost,
            ..Tally::default()
        }
    }

    fn outcome(instance: &str, policy: Option<&str>, policies: Tally) -> InstanceOutcome {
        InstanceOutcome {
            instance: instance.into(),
            currency: "USD",
            policy: policy.map(String::from),
            scenarios: Scenarios {
                policies,
                baseline: None,
                late_start_enforce: None,
                without_activity: None,
                cheapest_first: None,
                always_on: tally(10, 10.0),
                oracle: tally(2, 2.0),
            },
            on_demand: None,
            spot_pools: SpotPools::new(),
            budgets: None,
        }
    }

    #[test]
    fn a_stop_a_reservation_covers_saves_gross_but_not_net() {
        use crate::fleet::money::{
            CommitmentRates, HeldCommitments, ReservedInstances, Term, TermRates,
        };
        // One g.a ($10/h on demand, $6/h reserved) running 24 h always on, 12 h under the
        // policies; one g.a reservation held. Gross: $240 − $120 = $120. Always on, the
        // reservation covers all 24 h ($240); under the policies 12 h ($120): the 12 stopped
        // hours ($120) were covered, so the net is $0, and 12 h × $6 = $72 of the reservation
        // went unused because of the stops.
        let from: DateTime<Utc> = "2026-11-30T00:00:00Z".parse().unwrap();
        let to = from + chrono::Duration::hours(24);
        let mut report = Report::new(from, to);
        let mut used = OnDemandUse {
            policies: HourlyUse::starting(from),
            always_on: HourlyUse::starting(from),
        };
        used.policies
            .add("r", "g.a", from, from + chrono::Duration::hours(12));
        used.always_on.add("r", "g.a", from, to);
        let mut o = outcome("i-a", Some("office"), tally(12, 120.0));
        o.scenarios.always_on = tally(24, 240.0);
        o.on_demand = Some(Box::new(used));
        report.add(vec![o]);
        let one = |rate| TermRates {
            one_year: Some(rate),
            three_years: None,
        };
        let table = PriceTable {
            prices: [("r".to_string(), [("g.a".to_string(), 10.0)].into())].into(),
            reserved: Some(CommitmentRates {
                rates: [("r".to_string(), [("g.a".to_string(), one(6.0))].into())].into(),
                ..CommitmentRates::default()
            }),
            commitments: HeldCommitments {
                reserved_instances: vec![ReservedInstances {
                    instance_type: "g.a".into(),
                    region: "r".into(),
                    count: 1,
                    term: Term::OneYear,
                }],
                savings_plans: vec![],
            },
            ..PriceTable::default()
        };
        report.apply_prices(&table, &Fleet::default());
        let net = report.net.unwrap();
        assert_eq!(net.gross, 120.0);
        assert_eq!(net.commitment_covered, 120.0);
        assert_eq!(net.unused_commitment, 72.0);
        assert_eq!(net.net, 0.0);
        let json: Value = report.json_value();
        assert_eq!(json["commitments"]["net_savings_usd"], 0.0);
        assert!(report.table().contains("Gross $120.00, net $0.00"));
        // Without commitments held, no gross-to-net line.
        report.apply_prices(&PriceTable::default(), &Fleet::default());
        assert_eq!(report.net, None);
    }

    #[test]
    fn totals_and_policies_are_the_sums_of_the_instances() {
        let at = |s: &str| crate::when::parse_time(s).unwrap();
        let mut r = Report::new(at("2026-11-30T00:00:00Z"), at("2026-11-30T10:00:00Z"));
        r.add(vec![
            outcome("i-b", Some("dev"), tally(4, 4.0)),
            outcome("i-a", Some("dev"), tally(10, 10.0)),
            outcome("i-c", None, tally(2, 2.0)),
        ]);
        assert_eq!(r.total.policies.running_s, 16 * 3600);
        assert_eq!(r.total.always_on.cost, 30.0);
        let dev = &r.by_policy[&Some("dev".to_string())];
        assert_eq!(dev.policies.cost, 14.0);
        assert_eq!(dev.savings(&dev.policies), 6.0);
        // (14 - 4) / 4: 250 % over the oracle.
        assert_eq!(dev.waste_pct(&dev.policies), Some(250.0));
        let json: Value = r.json_value();
        let ids: Vec<&str> = json["instances"]
            .as_array()
            .unwrap()
            .iter()
            .map(|i| i["instance"].as_str().unwrap())
            .collect();
        assert_eq!(ids, ["i-a", "i-b", "i-c"], "sorted by instance");
        assert_eq!(
            json["policies"][0]["policy"],
            Value::Null,
            "no policy first"
        );
        assert_eq!(
            json["scenarios"]["policies"]["savings_vs_always_on_usd"],
            14.0
        );
        assert!(json["scenarios"]["always_on"]
            .get("savings_vs_always_on_usd")
            .is_none());
        // Without a baseline the comment compares with always on; i-a runs as always on does.
        let md = r.markdown();
        assert!(
            md.contains("| | always on | policies | difference |"),
            "{md}"
        );
        assert!(
            md.contains("| cost (USD) | 30.00 | 16.00 | -14.00 |"),
            "{md}"
        );
        assert!(
            md.contains("| i-c | (no policy) |") && !md.contains("| i-a |"),
            "{md}"
        );
    }

    #[test]
    fn late_start_enforce_is_shown_beside_the_policies_in_every_format() {
        let at = |s: &str| crate::when::parse_time(s).unwrap();
        let mut r = Report::new(at("2026-11-30T00:00:00Z"), at("2026-11-30T10:00:00Z"));
        let mut late = outcome("i-late", Some("dev"), tally(4, 4.0));
        late.scenarios.policies.unserved_busy_s = 300;
        late.scenarios.late_start_enforce = Some(Tally {
            unserved_busy_s: 900,
            stops: 3,
            ..tally(3, 3.0)
        });
        let mut day = outcome("i-day", Some("dev"), tally(2, 2.0));
        day.scenarios.late_start_enforce = Some(tally(2, 2.0));
        r.add(vec![late, day]);
        let enforce = r.total.late_start_enforce.unwrap();
        assert_eq!((enforce.running_s, enforce.stops), (5 * 3600, 3));
        let json: Value = r.json_value();
        let e = &json["scenarios"]["late_start_enforce"];
        assert_eq!(e["running_hours"], 5.0);
        assert_eq!(e["cost_usd"], 5.0);
        assert_eq!(e["unserved_busy_hours"], 0.25);
        assert_eq!(e["savings_vs_always_on_usd"], 15.0);
        let table = r.table();
        assert!(table.contains("\nlate_start_enforce       5.00"), "{table}");
        let md = r.markdown();
        assert!(
            md.contains("Keeping people's starts after the close until idle, against `late_start: enforce`: cost +1.00 USD, running hours +1.0, unserved busy hours -0.17 (enforce leaves 0.25 h unserved)."),
            "{md}"
        );
    }

    #[test]
    fn an_oracle_that_costs_nothing_has_no_waste_percentage() {
        let s = Scenarios {
            policies: tally(1, 1.0),
            ..Scenarios::default()
        };
        assert_eq!(s.waste_pct(&s.policies), None);
        assert_eq!(s.json()["policies"]["waste_over_oracle_pct"], Value::Null);
    }
}
