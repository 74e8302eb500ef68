//! From gross to net: what the commitments held make of the policies' savings against always
//! on; and, apart from the net, what the boxes the policies kept stopped still paid for their
//! volumes and Elastic IPs (paid whether they run or not), priced as `ebb report` prices them
//! ([`PriceTable::stopped_cost`]).

use super::{round, Report};
use crate::fleet::money::PriceTable;
use crate::fleet::Fleet;
use serde_json::{json, Value};
use std::collections::HashMap;

/// Unknown stopped hours below this are rounding, not unknown (as `ebb report` has it).
const UNKNOWN_HOURS: f64 = 0.005;

/// From gross to net: the policies' savings against always on, less what commitments would
/// have covered of the hours they stopped; and what the stopped boxes still paid.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Net {
    /// The savings at on-demand (and spot) prices, in the report's currency.
    pub gross: f64,
    /// The on-demand money of the hours the policies stopped that commitments would have
    /// covered: not saved.
    pub commitment_covered: f64,
    /// The commitment money left unused because of the stops.
    pub unused_commitment: f64,
    /// What the instances still paid for their volumes and Elastic IPs over the hours the
    /// policies kept them stopped (not counted without `while_stopped` in the price table).
    /// Not taken off the net: they pay it running too.
    pub stopped_box_cost: f64,
    /// Hours the policies kept stopped instances whose volumes or Elastic IPs are not known
    /// (not in the snapshot, never read) or not priced: what those paid is unknown.
    pub unknown_box_cost_hours: f64,
    /// Gross less what commitments covered.
    pub net: f64,
}

impl Net {
    pub(super) fn json(&self) -> Value {
        json!({
            "gross_savings_usd": round(self.gross, 4),
            "commitment_covered_usd": round(self.commitment_covered, 4),
            "unused_commitment_usd": round(self.unused_commitment, 4),
            "stopped_box_cost_usd": round(self.stopped_box_cost, 4),
            "unknown_box_cost_hours": round(self.unknown_box_cost_hours, 4),
            "net_savings_usd": round(self.net, 4),
        })
    }

    /// The line of the table and the comment, its amounts in `currency`.
    pub(super) fn line(&self, currency: &str) -> String {
        let money = |x: f64| crate::budget::money(x, currency);
        let mut line = format!(
            "Gross {}, net {}: less {} of stopped hours the commitments held would have covered ({} of commitment left unused by the stops). Still paid while stopped: {} for the stopped boxes' volumes and Elastic IPs, paid whether they run or not, so not taken off the net",
            money(self.gross),
            money(self.net),
            money(self.commitment_covered),
            money(self.unused_commitment),
            money(self.stopped_box_cost)
        );
        if self.unknown_box_cost_hours >= UNKNOWN_HOURS {
            line.push_str(&format!(
                ", and unknown for {:.2} stopped hours of instances whose volumes or Elastic IPs are not known (volumes and elastic_ips in the fleet snapshot) or not priced (while_stopped in the price table)",
                self.unknown_box_cost_hours
            ));
        }
        line.push('.');
        line
    }
}

impl Report {
    /// Works out gross to net with the commitments `table` holds and what it says a stopped
    /// box pays, for the volumes and Elastic IPs `fleet` knows (none of either: nothing).
    pub fn apply_prices(&mut self, table: &PriceTable, fleet: &Fleet) {
        if (table.commitments.is_empty() && table.while_stopped.is_none()) || self.to <= self.from {
            self.net = None;
            return;
        }
        let first = self.on_demand.policies.first_hour;
        let hours = (self.to.timestamp() - 1).div_euclid(3600) - first + 1;
        let policies = self.on_demand.policies.bill(table, hours);
        let always_on = self.on_demand.always_on.bill(table, hours);
        let gross = self.total.savings(&self.total.policies);
        let covered = always_on.covered_usd - policies.covered_usd;
        let (paid, unknown) = self.still_paid(table, fleet);
        self.net = Some(Net {
            gross,
            commitment_covered: covered,
            unused_commitment: always_on.commitment_used_usd - policies.commitment_used_usd,
            stopped_box_cost: paid,
            unknown_box_cost_hours: unknown,
            net: gross - covered,
        });
    }

    /// What the instances paid while the policies kept them stopped (the hours they ran always
    /// on but not under the policies), and the hours of those whose cost is unknown.
    fn still_paid(&self, table: &PriceTable, fleet: &Fleet) -> (f64, f64) {
        if table.while_stopped.is_none() {
            return (0.0, 0.0);
        }
        let regions: HashMap<&str, &str> = fleet
            .instances
            .iter()
            .map(|i| (i.id.as_str(), i.region.as_str()))
            .collect();
        let (mut paid, mut unknown) = (0.0, 0.0);
        for o in &self.instances {
            let s = &o.scenarios;
            let stopped_s = (s.always_on.running_s - s.policies.running_s).max(0);
            if stopped_s == 0 {
                continue;
            }
            let h = stopped_s as f64 / 3600.0;
            let cost = regions
                .get(o.instance.as_str())
                .zip(fleet.attached.get(&o.instance))
                .and_then(|(region, attached)| table.stopped_cost(region, attached));
            match cost {
                Some(per_hour) => paid += per_hour * h,
                None => unknown += h,
            }
        }
        (paid, unknown)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fleet::money::{Attached, StoppedCosts, Volume};
    use crate::replay::{InstanceOutcome, Scenarios, Tally};
    use chrono::{DateTime, Utc};

    fn outcome(id: &str, running_h: i64, always_on_h: i64) -> InstanceOutcome {
        let tally = |h: i64| Tally {
            running_s: h * 3600,
            cost: h as f64,
            ..Tally::default()
        };
        InstanceOutcome {
            instance: id.into(),
            currency: "USD",
            policy: Some("office".into()),
            scenarios: Scenarios {
                policies: tally(running_h),
                always_on: tally(always_on_h),
                ..Scenarios::default()
            },
            on_demand: None,
            spot_pools: Default::default(),
            budgets: None,
        }
    }

    #[test]
    fn a_stopped_box_pays_for_its_volume_apart_from_the_net_and_an_unread_one_is_unknown() {
        // i-a, $1/h, runs 12 of 24 hours under the policies: $12 gross. It keeps 500 GiB of
        // gp3 at $0.08 per GB-month of 730 hours ($40 a month, 40 / 730 $/h) and one Elastic
        // IP at $0.005/h: 12 × (40 / 730 + 0.005) = $0.7175 over its 12 stopped hours.
        let from: DateTime<Utc> = "2026-11-30T00:00:00Z".parse().unwrap();
        let mut report = Report::new(from, from + chrono::Duration::hours(24));
        report.add(vec![outcome("i-a", 12, 24)]);
        let table = PriceTable {
            while_stopped: Some(StoppedCosts {
                ebs_gb_month: [("r".to_string(), [("gp3".to_string(), 0.08)].into())].into(),
                elastic_ip_hour: [("r".to_string(), 0.005)].into(),
                ..StoppedCosts::default()
            }),
            ..PriceTable::default()
        };
        let mut inst = crate::fleet::Instance {
            id: "i-a".into(),
            region: "r".into(),
            instance_type: "g.a".into(),
            state: crate::fleet::InstanceState::Running,
            state_since: None,
            lifecycle: crate::fleet::Lifecycle::OnDemand,
            launched_at: None,
            tags: Default::default(),
            gpus: None,
            gpu_util: Vec::new(),
            via_role: None,
            billing: crate::fleet::Billing::EC2,
            private_ip: None,
        };
        let attached = Attached {
            volumes: Some(vec![Volume {
                volume_type: "gp3".into(),
                size_gib: 500,
            }]),
            elastic_ips: Some(1),
        };
        let mut fleet = Fleet {
            instances: vec![inst.clone()],
            attached: [("i-a".to_string(), attached)].into(),
            ..Fleet::default()
        };
        report.apply_prices(&table, &fleet);
        let net = report.net.unwrap();
        let paid = 12.0 * (40.0 / 730.0 + 0.005);
        assert_eq!(net.gross, 12.0);
        assert!((net.stopped_box_cost - paid).abs() < 1e-9, "{net:?}");
        // Paid running or stopped, the disks and the address are no cost of stopping: the net
        // is the gross.
        assert_eq!(net.net, 12.0, "{net:?}");
        assert!(report
            .table()
            .contains("Gross $12.00, net $12.00: less $0.00 of stopped hours the commitments held would have covered ($0.00 of commitment left unused by the stops). Still paid while stopped: $0.72 for the stopped boxes' volumes"));
        // A second box stopped 6 hours whose volumes were never read: what it paid is unknown,
        // the net is not.
        inst.id = "i-b".into();
        fleet.instances.push(inst);
        report.add(vec![outcome("i-b", 18, 24)]);
        report.apply_prices(&table, &fleet);
        let net = report.net.unwrap();
        assert_eq!(net.net, 18.0);
        assert_eq!(net.unknown_box_cost_hours, 6.0);
        let json: Value = report.json_value();
        assert_eq!(json["commitments"]["net_savings_usd"], 18.0);
        assert!(report
            .table()
            .contains("so not taken off the net, and unknown for 6.00 stopped hours"));
    }
}
