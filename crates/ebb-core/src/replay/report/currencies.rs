//! A replay's reports, one per currency its boxes are billed in: the dollars' (EC2) and one for
//! each other (`CNY` for Alibaba Cloud and Tencent Cloud), never added together.

use super::{BudgetSpend, InstanceOutcome, OnDemandUse, Report};
use crate::fleet::money::PriceTable;
use crate::fleet::Fleet;
use crate::policy::PolicySet;
use chrono::{DateTime, Utc};
use serde_json::Value;
use std::collections::BTreeMap;

/// A whole replay: the report of the boxes billed in dollars, and one for each other currency.
#[derive(Debug, Clone)]
pub struct Reports {
    /// The boxes billed in dollars (those of EC2); empty when there are none.
    pub dollars: Report,
    /// The boxes billed in each other currency, by its ISO 4217 code.
    pub others: BTreeMap<&'static str, Report>,
}

impl Reports {
    /// Empty reports of the replay from `from` to `to`.
    pub fn new(from: DateTime<Utc>, to: DateTime<Utc>) -> Self {
        Reports {
            dollars: Report::new(from, to),
            others: BTreeMap::new(),
        }
    }

    /// The report of `currency`, made when it is the first of its boxes.
    pub fn of(&mut self, currency: &'static str) -> &mut Report {
        match currency {
            "USD" => &mut self.dollars,
            other => {
                let (from, to) = (self.dollars.from, self.dollars.to);
                self.others
                    .entry(other)
                    .or_insert_with(|| Report::in_currency(other, from, to))
            }
        }
    }

    /// Adds the outcomes of a chunk, each to the report of its currency.
    pub fn add(&mut self, outcomes: Vec<InstanceOutcome>) {
        let mut by_currency: BTreeMap<&'static str, Vec<InstanceOutcome>> = BTreeMap::new();
        for o in outcomes {
            by_currency.entry(o.currency).or_default().push(o);
        }
        for (currency, outcomes) in by_currency {
            self.of(currency).add(outcomes);
        }
    }

    /// Adds the hours on demand and the budgets' spend of boxes billed in `currency`, summed
    /// apart from their outcomes.
    pub fn add_summed(&mut self, currency: &'static str, used: &OnDemandUse, spend: &BudgetSpend) {
        let report = self.of(currency);
        report.add_on_demand(used);
        report.add_budget_spend(spend);
    }

    /// Works out gross to net in each currency with that currency's table of `table` (the
    /// dollars' with the table itself; another without a table of its own: nothing).
    pub fn apply_prices(&mut self, table: &PriceTable, fleet: &Fleet) {
        self.dollars.apply_prices(table, fleet);
        for (currency, report) in &mut self.others {
            match table.other_currencies.get(*currency) {
                Some(theirs) => report.apply_prices(theirs, fleet),
                None => report.net = None,
            }
        }
    }

    /// Works out each budget of `set` in the report of its currency.
    pub fn apply_budgets(&mut self, set: &PolicySet) {
        let others: Vec<&BudgetSpend> = self.others.values().map(|r| &r.budget_spend).collect();
        let elsewhere = |name: &str| others.iter().any(|s| s.counts_in(name));
        self.dollars.apply_budgets(set, elsewhere);
        for report in self.others.values_mut() {
            report.apply_budgets(set, |_| true);
        }
    }

    /// The dollars' report with, under `other_currencies`, each other currency's in the same
    /// shape, its money keys ending in its currency (`cost_cny`).
    pub fn json(&self) -> String {
        let mut value = self.dollars.json_value();
        value["other_currencies"] =
            Value::Array(self.others.values().map(Report::json_value).collect());
        format!("{value:#}\n")
    }

    /// Each currency's table, the dollars' first (left out when no box is billed in dollars
    /// and some in another currency).
    pub fn table(&self) -> String {
        self.each()
            .map(Report::table)
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// Each currency's pull-request comment, the dollars' first.
    pub fn markdown(&self) -> String {
        self.each()
            .map(Report::markdown)
            .collect::<Vec<_>>()
            .join("\n")
    }

    fn each(&self) -> impl Iterator<Item = &Report> {
        let dollars = !self.dollars.instances.is_empty() || self.others.is_empty();
        dollars
            .then_some(&self.dollars)
            .into_iter()
            .chain(self.others.values())
    }
}

/// Renames `value`'s money keys, which end in `_usd`, to end in `currency`'s code
/// (`cost_usd` → `cost_cny`), so no figure of another currency is labelled as dollars.
pub(super) fn name_money_keys(value: &mut Value, currency: &str) {
    if currency == "USD" {
        return;
    }
    let suffix = format!("_{}", currency.to_lowercase());
    match value {
        Value::Object(map) => {
            let old = std::mem::take(map);
            for (key, mut v) in old {
                name_money_keys(&mut v, currency);
                let key = match key.strip_suffix("_usd") {
                    Some(stem) => format!("{stem}{suffix}"),
                    None => key,
                };
                map.insert(key, v);
            }
        }
        Value::Array(items) => items.iter_mut().for_each(|v| name_money_keys(v, currency)),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::replay::{Scenarios, SpotPools, Tally};
    use serde_json::json;

    fn at(s: &str) -> DateTime<Utc> {
        s.parse().unwrap()
    }

    fn outcome(instance: &str, currency: &'static str, cost: f64) -> InstanceOutcome {
        let tally = |cost| Tally {
            running_s: 3600,
            cost,
            ..Tally::default()
        };
        InstanceOutcome {
            instance: instance.into(),
            currency,
            policy: Some("p".into()),
            scenarios: Scenarios {
                policies: tally(cost),
                always_on: tally(3.0 * cost),
                oracle: tally(cost),
                ..Scenarios::default()
            },
            on_demand: None,
            spot_pools: SpotPools::new(),
            budgets: None,
        }
    }

    #[test]
    fn each_currency_is_summed_apart_and_labelled() {
        let mut r = Reports::new(at("2026-11-30T00:00:00Z"), at("2026-11-30T10:00:00Z"));
        r.add(vec![
            outcome("i-aws", "USD", 2.0),
            outcome("i-hz", "CNY", 10.0),
            outcome("i-gz", "CNY", 5.0),
        ]);
        let json: Value = serde_json::from_str(&r.json()).unwrap();
        assert_eq!(json["currency"], "USD");
        assert_eq!(json["scenarios"]["policies"]["cost_usd"], 2.0);
        assert_eq!(json["instances"].as_array().unwrap().len(), 1);
        let cny = &json["other_currencies"][0];
        assert_eq!(cny["currency"], "CNY");
        assert_eq!(cny["scenarios"]["policies"]["cost_cny"], 15.0);
        assert_eq!(
            cny["scenarios"]["policies"]["savings_vs_always_on_cny"],
            30.0
        );
        assert_eq!(cny["scenarios"]["policies"].get("cost_usd"), None);
        assert_eq!(
            cny["policies"][0]["scenarios"]["always_on"]["cost_cny"],
            45.0
        );
        let table = r.table();
        assert!(table.contains("1 instances billed in USD"), "{table}");
        assert!(table.contains("2 instances billed in CNY"), "{table}");
        assert!(table.contains("cost_cny"), "{table}");
        let md = r.markdown();
        assert!(
            md.contains("| cost (CNY) | 45.00 | 15.00 | -30.00 |"),
            "{md}"
        );
        assert!(
            md.contains("The policies save ¥30.00 against always on"),
            "{md}"
        );
    }

    #[test]
    fn a_fleet_billed_in_yuan_alone_shows_no_empty_dollars() {
        let mut r = Reports::new(at("2026-11-30T00:00:00Z"), at("2026-11-30T10:00:00Z"));
        r.add(vec![outcome("i-hz", "CNY", 10.0)]);
        assert!(!r.table().contains("billed in USD"));
        let json: Value = serde_json::from_str(&r.json()).unwrap();
        assert_eq!(json["instances"], json!([]));
        assert_eq!(
            json["other_currencies"][0]["instances"][0]["instance"],
            "i-hz"
        );
    }

    #[test]
    fn money_keys_are_renamed_at_every_depth_and_nothing_else() {
        let mut v = json!({"cost_usd": 1, "a": [{"spent_usd": 2, "usd": 3}], "hours": 4});
        name_money_keys(&mut v, "CNY");
        assert_eq!(
            v,
            json!({"cost_cny": 1, "a": [{"spent_cny": 2, "usd": 3}], "hours": 4})
        );
        let mut same = json!({"cost_usd": 1});
        name_money_keys(&mut same, "USD");
        assert_eq!(same, json!({"cost_usd": 1}));
    }
}
