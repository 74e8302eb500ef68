//! What the commitments held pay of the hours budgets count. AWS applies reserved instances
//! and Savings Plans to each hour's running use as a whole (`report::money`), so each hour's
//! coverage of a region and type is shared among the boxes that ran in it in proportion to
//! their part of the hour, as `ebb report` shares it among stopped ones. An hour a commitment
//! pays costs a budget nothing more: it is paid whether the box runs or not. Only the use ebb
//! lists is seen: boxes it does not list that share the commitments would take some of them.

use crate::fleet::money::PriceTable;
use crate::report::money::{cover_running, hours_of, HourUse};
use chrono::{DateTime, Utc};
use std::collections::{BTreeMap, HashMap};

/// The share of each hour's running use of a region and type the commitments pay.
#[derive(Debug, Default)]
pub(super) struct Coverage {
    /// (hour since the epoch, region, type) → the share, 0 to 1.
    share: HashMap<(i64, String, String), f64>,
}

impl Coverage {
    /// From every box's stretches of running, `(region, type, from, to)`, within
    /// `[from, to)`, under the commitments `prices` holds (none: nothing is covered).
    pub(super) fn of<'r>(
        ran: impl Iterator<Item = (&'r str, &'r str, DateTime<Utc>, DateTime<Utc>)>,
        prices: &PriceTable,
        from: DateTime<Utc>,
        to: DateTime<Utc>,
    ) -> Coverage {
        let mut share = HashMap::new();
        if prices.commitments.is_empty() {
            return Coverage { share };
        }
        let mut by_hour: BTreeMap<i64, BTreeMap<(&str, &str), f64>> = BTreeMap::new();
        for (region, instance_type, ran_from, ran_to) in ran {
            let (start, end) = (ran_from.max(from), ran_to.min(to));
            if end <= start {
                continue;
            }
            for (hour, part) in hours_of(start, end) {
                let uses = by_hour.entry(hour).or_default();
                *uses.entry((region, instance_type)).or_default() += part;
            }
        }
        for (hour, uses) in by_hour {
            let uses: Vec<HourUse> = uses
                .into_iter()
                .map(|((region, instance_type), hours)| HourUse {
                    region,
                    instance_type,
                    hours,
                })
                .collect();
            for (u, covered) in uses.iter().zip(cover_running(prices, &uses)) {
                let full = prices.get(u.region, u.instance_type).unwrap_or(0.0) * u.hours;
                if full > 0.0 && covered.covered_usd > 0.0 {
                    let key = (hour, u.region.to_string(), u.instance_type.to_string());
                    share.insert(key, (covered.covered_usd / full).clamp(0.0, 1.0));
                }
            }
        }
        Coverage { share }
    }

    /// What a box of `instance_type` in `region` running `[from, to)` costs at `price` an
    /// hour, less what the commitments pay.
    pub(super) fn cost(
        &self,
        region: &str,
        instance_type: &str,
        price: f64,
        (from, to): (DateTime<Utc>, DateTime<Utc>),
    ) -> f64 {
        hours_of(from, to)
            .map(|(hour, part)| {
                let key = (hour, region.to_string(), instance_type.to_string());
                let paid = match self.share.is_empty() {
                    true => 0.0,
                    false => self.share.get(&key).copied().unwrap_or(0.0),
                };
                price * part * (1.0 - paid)
            })
            .sum()
    }
}
