//! The price table as data: on-demand prices, the rates of commitments (Savings Plans and
//! reserved instances), the commitments a team holds, and what a stopped box still pays (its
//! EBS volumes and Elastic IPs). `cloud::prices` reads it from a file (the one place that
//! does); `report::money` and replay price hours with it.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// region → instance type → a value.
pub type ByRegionAndType<T> = BTreeMap<String, BTreeMap<String, T>>;

/// Everything ebb knows of what instances cost (see `deploy/prices.yaml`). Every part but the
/// on-demand prices is optional, so an older table without them still loads.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PriceTable {
    /// Where the on-demand figures were taken from.
    pub source: String,
    /// When they were taken (a date).
    pub as_of: String,
    /// On-demand $/hour: region → instance type → $/hour.
    pub prices: ByRegionAndType<f64>,
    /// Compute Savings Plans' rates (no upfront), $/hour of each type under the plan.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub savings_plan: Option<CommitmentRates>,
    /// Standard reserved instances' effective rates (no upfront), $/hour.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reserved: Option<CommitmentRates>,
    /// The commitments the team holds.
    #[serde(default)]
    pub commitments: HeldCommitments,
    /// What a stopped instance still pays.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub while_stopped: Option<StoppedCosts>,
    /// Subscription prices (Alibaba's and Tencent's 包年包月): region → type → the term's
    /// months (1, 3, 6, 12, ...) → what a month of it costs, in this table's currency. Only
    /// `ebb advise` reads them, to compare a subscription with paying by the hour.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub subscription: ByRegionAndType<BTreeMap<u32, f64>>,
    /// Prices in other currencies than the dollar, by ISO 4217 code (`CNY` for an Alibaba
    /// Cloud or Tencent Cloud account on their China sites): each a table of its own, never
    /// added to the dollars, reported apart (`report::InCurrency`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub other_currencies: BTreeMap<String, PriceTable>,
}

impl PriceTable {
    /// The on-demand $/hour of `instance_type` in `region`, when the table lists it.
    pub fn get(&self, region: &str, instance_type: &str) -> Option<f64> {
        self.prices.get(region)?.get(instance_type).copied()
    }

    /// The $/hour of `instance_type` in `region` under a commitment of `kind` for `term`, when
    /// the table lists it.
    pub fn commitment_rate(
        &self,
        kind: CommitmentKind,
        term: Term,
        region: &str,
        instance_type: &str,
    ) -> Option<f64> {
        let rates = match kind {
            CommitmentKind::SavingsPlan => self.savings_plan.as_ref(),
            CommitmentKind::Reserved => self.reserved.as_ref(),
        }?;
        rates.get(term, region, instance_type)
    }
}

/// The two kinds of commitment whose rates the table keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CommitmentKind {
    /// A Compute Savings Plan: $/hour of spend at the plan's rates.
    SavingsPlan,
    /// A standard reserved instance of one type in one region.
    Reserved,
}

/// How long a commitment lasts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Term {
    /// One year.
    #[serde(rename = "1y")]
    OneYear,
    /// Three years.
    #[serde(rename = "3y")]
    ThreeYears,
}

impl Term {
    /// `1y` or `3y`, as the table and the reports write it.
    pub fn as_str(self) -> &'static str {
        match self {
            Term::OneYear => "1y",
            Term::ThreeYears => "3y",
        }
    }
}

/// One kind of commitment's rates, with where they come from.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CommitmentRates {
    /// Where the figures were taken from.
    pub source: String,
    /// When they were taken (a date).
    pub as_of: String,
    /// region → instance type → $/hour by term.
    pub rates: ByRegionAndType<TermRates>,
}

impl CommitmentRates {
    /// The $/hour of `instance_type` in `region` for `term`, when listed.
    pub fn get(&self, term: Term, region: &str, instance_type: &str) -> Option<f64> {
        self.rates.get(region)?.get(instance_type)?.get(term)
    }
}

/// A type's $/hour under a commitment, for each term listed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TermRates {
    /// For a one-year commitment.
    #[serde(rename = "1y", default, skip_serializing_if = "Option::is_none")]
    pub one_year: Option<f64>,
    /// For a three-year commitment.
    #[serde(rename = "3y", default, skip_serializing_if = "Option::is_none")]
    pub three_years: Option<f64>,
}

impl TermRates {
    /// The $/hour for `term`, when listed.
    pub fn get(&self, term: Term) -> Option<f64> {
        match term {
            Term::OneYear => self.one_year,
            Term::ThreeYears => self.three_years,
        }
    }
}

/// The commitments a team holds: AWS applies them to each hour's running usage, reserved
/// instances first, then Savings Plans.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HeldCommitments {
    /// Reserved instances (regional, standard).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub reserved_instances: Vec<ReservedInstances>,
    /// Savings Plans.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub savings_plans: Vec<SavingsPlan>,
}

impl HeldCommitments {
    /// Whether the team holds no commitment.
    pub fn is_empty(&self) -> bool {
        self.reserved_instances.is_empty() && self.savings_plans.is_empty()
    }
}

/// Reserved instances of one type in one region: each covers one running instance-hour of
/// that type there, paid whether used or not.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReservedInstances {
    /// The instance type.
    pub instance_type: String,
    /// The region.
    pub region: String,
    /// How many.
    pub count: u32,
    /// Their term, which picks their rate in `reserved`.
    pub term: Term,
}

/// A Savings Plan: `hourly_usd` of usage at the plan's rates each hour, paid whether used or
/// not.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SavingsPlan {
    /// The commitment, $/hour at the plan's rates (as AWS states it).
    pub hourly_usd: f64,
    /// Its term, which picks its rates in `savings_plan`.
    pub term: Term,
    /// Compute (any type, any region) or one instance family in one region.
    pub kind: PlanKind,
    /// The instance family (`g5`), for an instance family plan.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub family: Option<String>,
    /// The region, for an instance family plan.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub region: Option<String>,
}

impl SavingsPlan {
    /// Whether the plan applies to `instance_type` in `region`.
    pub fn covers(&self, region: &str, instance_type: &str) -> bool {
        match self.kind {
            PlanKind::Compute => true,
            PlanKind::InstanceFamily => {
                self.region.as_deref() == Some(region)
                    && self.family.as_deref() == Some(family_of(instance_type))
            }
        }
    }
}

/// What a Savings Plan applies to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PlanKind {
    /// Any instance type in any region.
    Compute,
    /// One instance family in one region.
    InstanceFamily,
}

/// The family of an instance type: `g5` for `g5.xlarge`.
pub fn family_of(instance_type: &str) -> &str {
    instance_type.split('.').next().unwrap_or(instance_type)
}

/// What a stopped instance still pays, with where the figures come from.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StoppedCosts {
    /// Where the figures were taken from.
    pub source: String,
    /// When they were taken (a date).
    pub as_of: String,
    /// EBS: region → volume type (`gp3`, `io2`, ...) → $ per GB-month.
    #[serde(default)]
    pub ebs_gb_month: ByRegionAndType<f64>,
    /// An Elastic IP (a public IPv4 address): region → $/hour.
    #[serde(default)]
    pub elastic_ip_hour: BTreeMap<String, f64>,
    /// EBS snapshots (the standard tier), what a reclaim's image stores: region → $ per
    /// GB-month.
    #[serde(default)]
    pub snapshot_gb_month: BTreeMap<String, f64>,
}

/// Hours in the month EBS prices are stated per (AWS bills GB-months of 730 hours).
pub const HOURS_PER_MONTH: f64 = 730.0;

impl StoppedCosts {
    /// $/hour of `gib` GiB of `volume_type` in `region`, when the table prices that type.
    pub fn volume_hour(&self, region: &str, volume_type: &str, gib: u64) -> Option<f64> {
        let per_month = self.ebs_gb_month.get(region)?.get(volume_type)?;
        Some(per_month * gib as f64 / HOURS_PER_MONTH)
    }

    /// $/hour of snapshots of `volumes` in `region`, stored whole (EBS bills only the blocks
    /// stored, so at most this), when the table prices snapshots there.
    pub fn snapshot_hour(&self, region: &str, volumes: &[Volume]) -> Option<f64> {
        let per_month = self.snapshot_gb_month.get(region)?;
        let gib: u64 = volumes.iter().map(|v| v.size_gib).sum();
        Some(per_month * gib as f64 / HOURS_PER_MONTH)
    }

    /// $/hour of one Elastic IP in `region`, when listed.
    pub fn elastic_ip(&self, region: &str) -> Option<f64> {
        self.elastic_ip_hour.get(region).copied()
    }
}

/// One EBS volume attached to an instance, as DescribeVolumes gives it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Volume {
    /// Its type (`gp3`, `io2`, ...).
    pub volume_type: String,
    /// Its size, GiB.
    pub size_gib: u64,
}

/// What an instance keeps paying for while stopped, as last read: `None` for what could not
/// be read (a failed DescribeVolumes or DescribeAddresses), which makes its cost unknown,
/// never zero.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Attached {
    /// Its EBS volumes.
    #[serde(default)]
    pub volumes: Option<Vec<Volume>>,
    /// How many Elastic IPs are associated with it.
    #[serde(default)]
    pub elastic_ips: Option<u32>,
}

impl PriceTable {
    /// The $/hour an instance in `region` with `attached` pays while stopped: its volumes by
    /// size and type and its Elastic IPs. `None` when that is unknown: the volumes or addresses
    /// could not be read, or the table does not price them.
    pub fn stopped_cost(&self, region: &str, attached: &Attached) -> Option<f64> {
        let costs = self.while_stopped.as_ref()?;
        let mut per_hour = 0.0;
        for v in attached.volumes.as_ref()? {
            per_hour += costs.volume_hour(region, &v.volume_type, v.size_gib)?;
        }
        let ips = attached.elastic_ips?;
        if ips > 0 {
            per_hour += f64::from(ips) * costs.elastic_ip(region)?;
        }
        Some(per_hour)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table() -> PriceTable {
        PriceTable {
            while_stopped: Some(StoppedCosts {
                ebs_gb_month: [("r".to_string(), [("gp3".to_string(), 0.08)].into())].into(),
                elastic_ip_hour: [("r".to_string(), 0.005)].into(),
                ..StoppedCosts::default()
            }),
            ..PriceTable::default()
        }
    }

    fn gp3(size_gib: u64) -> Volume {
        Volume {
            volume_type: "gp3".into(),
            size_gib,
        }
    }

    #[test]
    fn a_stopped_box_pays_for_its_volumes_and_addresses() {
        // 500 GiB and 230 GiB of gp3 at $0.08 per GB-month of 730 hours: 730 GiB × 0.08 / 730
        // = $0.08/h; two Elastic IPs at $0.005/h: $0.01/h; $0.09/h in all.
        let attached = Attached {
            volumes: Some(vec![gp3(500), gp3(230)]),
            elastic_ips: Some(2),
        };
        let cost = table().stopped_cost("r", &attached).unwrap();
        assert!((cost - 0.09).abs() < 1e-12, "{cost}");
    }

    #[test]
    fn an_unread_volume_list_makes_the_cost_unknown_not_zero() {
        let unread = Attached {
            volumes: None,
            elastic_ips: Some(0),
        };
        assert_eq!(table().stopped_cost("r", &unread), None);
        let unread_addresses = Attached {
            volumes: Some(vec![gp3(100)]),
            elastic_ips: None,
        };
        assert_eq!(table().stopped_cost("r", &unread_addresses), None);
        // A volume type the table does not price, or a region it lacks: unknown too.
        let io2 = Attached {
            volumes: Some(vec![Volume {
                volume_type: "io2".into(),
                size_gib: 100,
            }]),
            elastic_ips: Some(0),
        };
        assert_eq!(table().stopped_cost("r", &io2), None);
        let none = Attached {
            volumes: Some(vec![]),
            elastic_ips: Some(0),
        };
        assert_eq!(table().stopped_cost("elsewhere", &none), Some(0.0));
        assert_eq!(PriceTable::default().stopped_cost("r", &none), None);
    }
}
