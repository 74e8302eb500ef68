//! Moving interruptible training to spot capacity, and bringing it back when spot capacity is
//! reclaimed.
//!
//! A migration is a state machine persisted in `spot_migrations` and advanced one step per
//! tick by the leader ([`drive`]): `planned → stopping → imaging → launching → verifying →
//! done`, or `rolled_back` / `failed`. Every step is written before the cloud is asked and is
//! safe to repeat, so a crash at any point resumes without a second replacement.
//!
//! This module holds the decisions, which are pure: the cheapest acceptable type and zone, which
//! reclaimed places to avoid, when to fall back to on-demand, and what has been saved.

pub mod drive;

use crate::cloud::{Market, TypePrice};
use crate::store::MigrationRecord;
use chrono::{DateTime, Duration, Utc};
use std::collections::BTreeMap;

// The persisted types of a migration belong to the store, which must not import this module.
pub use crate::store::spot::{Interruption, State, Step};

/// A type and zone that reclaimed a replacement is not used again for this long.
pub const AVOID_FOR: Duration = Duration::hours(3);
/// The window `max_interruptions` counts in.
pub const INTERRUPTION_WINDOW: Duration = Duration::hours(24);
/// After a migration was rolled back or failed, the instance is not planned again for this long.
pub const RETRY_AFTER: Duration = Duration::hours(6);
/// The original must have stopped within this long, or the migration rolls back.
pub const STOP_TIMEOUT: Duration = Duration::minutes(30);
/// The image must be available within this long (large volumes take a while).
pub const IMAGE_TIMEOUT: Duration = Duration::hours(3);
/// A replacement must be running within this long.
pub const LAUNCH_TIMEOUT: Duration = Duration::minutes(15);

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
}

/// The cheapest spot offer among `prices` in a zone with a subnet, not in `avoid`, at most
/// `max_price`; on a tie the original's zone, then the order of `prices`.
pub fn cheapest(
    prices: &[TypePrice],
    subnets_by_zone: &BTreeMap<String, String>,
    avoid: &[(String, String)],
    own_zone: &str,
    max_price: f64,
) -> Option<Target> {
    prices
        .iter()
        .flat_map(|p| {
            p.spot_by_zone
                .iter()
                .map(move |(zone, price)| (&p.instance_type, zone, *price))
        })
        .filter(|(ty, zone, price)| {
            *price <= max_price
                && !avoid
                    .iter()
                    .any(|(t, z)| t.as_str() == ty.as_str() && z.as_str() == zone.as_str())
        })
        .filter_map(|(ty, zone, price)| {
            let subnet = subnets_by_zone.get(zone)?;
            Some(Target {
                instance_type: ty.clone(),
                zone: zone.clone(),
                subnet: subnet.clone(),
                price,
            })
        })
        .min_by(|a, b| {
            a.price
                .total_cmp(&b.price)
                .then((a.zone != own_zone).cmp(&(b.zone != own_zone)))
        })
}

/// The types and zones reclaimed within [`AVOID_FOR`] before `now`.
pub fn avoided(interruptions: &[Interruption], now: DateTime<Utc>) -> Vec<(String, String)> {
    interruptions
        .iter()
        .filter(|i| now - i.at < AVOID_FOR)
        .map(|i| (i.instance_type.clone(), i.zone.clone()))
        .collect()
}

/// Reclaims within [`INTERRUPTION_WINDOW`] before `now`.
pub fn recent_interruptions(interruptions: &[Interruption], now: DateTime<Utc>) -> usize {
    interruptions
        .iter()
        .filter(|i| now - i.at < INTERRUPTION_WINDOW)
        .count()
}

/// Dollars the current replacement has saved from its start to `until`: spot hours times the
/// difference to the original's on-demand price.
pub fn current_savings(m: &MigrationRecord, until: DateTime<Utc>) -> f64 {
    match (m.market, m.running_since, m.on_demand_price, m.price) {
        (Market::Spot, Some(since), Some(on_demand), Some(price)) if until > since => {
            let hours = (until - since).num_seconds() as f64 / 3600.0;
            hours * (on_demand - price).max(0.0)
        }
        _ => 0.0,
    }
}

/// Dollars saved so far: earlier replacements, and the current one until `now` (or until the
/// migration ended).
pub fn savings(m: &MigrationRecord, now: DateTime<Utc>) -> f64 {
    let until = m.ended_at.unwrap_or(now);
    m.saved_before + current_savings(m, until)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(s).unwrap().with_timezone(&Utc)
    }

    fn price(ty: &str, zones: &[(&str, f64)]) -> TypePrice {
        TypePrice {
            instance_type: ty.into(),
            on_demand: Some(40.0),
            spot_by_zone: zones.iter().map(|(z, p)| (z.to_string(), *p)).collect(),
        }
    }

    #[test]
    fn the_cheapest_offer_wins_and_ties_stay_in_the_original_zone() {
        let subnets: BTreeMap<String, String> = [("z-a", "s-a"), ("z-b", "s-b")]
            .iter()
            .map(|(z, s)| (z.to_string(), s.to_string()))
            .collect();
        let prices = [
            price("p4d", &[("z-a", 14.0), ("z-b", 12.0), ("z-c", 5.0)]),
            price("p4de", &[("z-a", 12.0)]),
        ];
        // z-c is cheapest but has no subnet; p4d in z-b and p4de in z-a tie: z-a is home.
        let t = cheapest(&prices, &subnets, &[], "z-a", 100.0).unwrap();
        assert_eq!(
            (t.instance_type.as_str(), t.subnet.as_str()),
            ("p4de", "s-a")
        );
        let avoid = [("p4de".to_string(), "z-a".to_string())];
        let t = cheapest(&prices, &subnets, &avoid, "z-a", 100.0).unwrap();
        assert_eq!((t.instance_type.as_str(), t.zone.as_str()), ("p4d", "z-b"));
        assert_eq!(cheapest(&prices, &subnets, &[], "z-a", 11.0), None);
    }

    #[test]
    fn reclaims_are_avoided_for_a_while_and_counted_for_a_day() {
        let i = |t: &str| Interruption {
            at: at(t),
            instance: "i-1".into(),
            instance_type: "p4d".into(),
            zone: "z-a".into(),
        };
        let list = [i("2026-11-30T00:00:00Z"), i("2026-11-30T10:00:00Z")];
        let now = at("2026-11-30T12:00:00Z");
        assert_eq!(avoided(&list, now).len(), 1);
        assert_eq!(recent_interruptions(&list, now), 2);
        assert_eq!(recent_interruptions(&list, at("2026-12-01T06:00:00Z")), 1);
    }
}
