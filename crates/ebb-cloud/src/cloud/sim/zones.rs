//! The spot zones of the simulated fleet (`spot_zones:` in the fleet file): per region, the
//! availability zones that sell spot capacity, each with its spot prices and how often EC2
//! takes capacity back there. Without them a region has one zone, `{region}a`, at the fleet
//! file's spot prices, and nothing is ever reclaimed.
//!
//! A reclaim hits a pool (an instance type in a zone) once in each period of `reclaim_every`,
//! at a moment within the period that is a pure function of the pool and the period's number:
//! every spot instance of the pool running then is reclaimed. So a run is repeatable, and
//! `ebb replay --interruptions` can be given the same history ([`reclaims`]).

use super::spot::{SUBNET_PREFIX, TERMINATE_TAKES};
use super::{seed, SimProvider, Simulated};
use crate::cloud::SPOT_TERMINATION;
use crate::fleet::{InstanceState, Lifecycle};
use chrono::{DateTime, Duration, Utc};
use serde::Deserialize;
use std::collections::BTreeMap;

/// One spot zone of a region.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SpotZone {
    /// Its name (`eu-central-1a`).
    pub zone: String,
    /// Spot $/hour by instance type: the types it sells.
    #[serde(default)]
    pub spot: BTreeMap<String, f64>,
    /// How often EC2 reclaims the spot capacity of each of its pools, on average (`3h`, `10d`);
    /// never without it.
    #[serde(default, deserialize_with = "every")]
    pub reclaim_every: Option<Duration>,
}

/// The spot zones of each region, in the order the fleet file gives them (the first is where
/// the file's instances are).
pub type SpotZones = BTreeMap<String, Vec<SpotZone>>;

fn every<'de, D: serde::Deserializer<'de>>(de: D) -> Result<Option<Duration>, D::Error> {
    let text = String::deserialize(de)?;
    let wrong = || {
        serde::de::Error::custom(format!(
            "reclaim_every \"{text}\" is not a duration of a minute or more: write it like 3h or 10d"
        ))
    };
    let d = humantime::parse_duration(text.trim()).map_err(|_| wrong())?;
    match Duration::from_std(d) {
        Ok(d) if d >= Duration::minutes(1) => Ok(Some(d)),
        _ => Err(wrong()),
    }
}

/// The moments in `(after, until]` at which EC2 reclaims the spot capacity of `instance_type`
/// in `zone` of `region`, when it does so once `every`, oldest first: one in each period of
/// `every` counted from the Unix epoch, at an offset drawn from the pool and the period.
pub fn reclaims(
    region: &str,
    zone: &str,
    instance_type: &str,
    every: Duration,
    after: DateTime<Utc>,
    until: DateTime<Utc>,
) -> Vec<DateTime<Utc>> {
    let period = every.num_seconds().max(60);
    let first = after.timestamp().div_euclid(period);
    let last = until.timestamp().div_euclid(period);
    (first..=last)
        .filter_map(|k| {
            let offset = mix(seed(&format!("{region}/{zone}/{instance_type}/{k}"))) % period as u64;
            DateTime::from_timestamp(k * period + offset as i64, 0)
        })
        .filter(|m| after < *m && *m <= until)
        .collect()
}

/// The first reclaim of the pool in `(after, until]`, when its zone has a rate.
pub(super) fn first_reclaim(
    region: &str,
    zone: &str,
    instance_type: &str,
    every: Option<Duration>,
    after: DateTime<Utc>,
    until: DateTime<Utc>,
) -> Option<DateTime<Utc>> {
    let every = every?;
    if until <= after {
        return None;
    }
    // Period by period, so that a long-lived instance in a busy zone is not scanned whole.
    let mut from = after;
    while from < until {
        let to = (from + every * 16).min(until);
        if let Some(first) = reclaims(region, zone, instance_type, every, from, to).first() {
            return Some(*first);
        }
        from = to;
    }
    None
}

/// The zone the fleet file's instances of `region` are in: its first spot zone, else
/// `{region}a`.
pub(super) fn default_zone(region: &str, zones: &SpotZones) -> String {
    zones
        .get(region)
        .and_then(|z| z.first())
        .map_or_else(|| format!("{region}a"), |z| z.zone.clone())
}

/// The spot zone `zone` of `region`, when the fleet file declares it.
fn declared<'z>(zones: &'z SpotZones, region: &str, zone: &str) -> Option<&'z SpotZone> {
    zones.get(region)?.iter().find(|z| z.zone == zone)
}

impl Simulated {
    /// When EC2 reclaims this instance, if it is spot, running or starting, and its zone
    /// reclaims by `now`: the first reclaim of its pool since its launch.
    pub(super) fn reclaim_due(&self, now: DateTime<Utc>) -> Option<DateTime<Utc>> {
        let live = matches!(
            self.instance.state,
            InstanceState::Pending | InstanceState::Running
        );
        if !live || self.instance.lifecycle != Lifecycle::Spot {
            return None;
        }
        first_reclaim(
            &self.instance.region,
            &self.zone,
            &self.instance.instance_type,
            self.reclaim_every,
            self.instance.launched_at?,
            now,
        )
    }

    /// EC2 took its capacity back `at`: it shuts down with EC2's reason for a spot reclaim.
    pub(super) fn reclaimed(&mut self, at: DateTime<Utc>) {
        self.begin(
            InstanceState::ShuttingDown,
            InstanceState::Terminated,
            at,
            TERMINATE_TAKES,
        );
        self.running_since = None;
        self.reason = Some(SPOT_TERMINATION);
    }
}

impl SimProvider {
    /// The fleet with the spot zones of `zones` (the fleet file's `spot_zones:`): its
    /// instances in the first zone of their region, spot ones reclaimed at its rate.
    pub fn with_zones(mut self, zones: SpotZones) -> Self {
        for sim in &mut self.fleet().instances {
            sim.zone = default_zone(&sim.instance.region, &zones);
            sim.reclaim_every =
                declared(&zones, &sim.instance.region, &sim.zone).and_then(|z| z.reclaim_every);
        }
        self.zones = zones;
        self
    }

    /// The spot $/hour of `instance_type` in each zone of `region` that sells it: the declared
    /// zones', else `spot` (the fleet file's price) in `{region}a`.
    pub(super) fn spot_by_zone(
        &self,
        region: &str,
        instance_type: &str,
        spot: Option<f64>,
    ) -> BTreeMap<String, f64> {
        match self.zones.get(region).filter(|z| !z.is_empty()) {
            Some(zones) => zones
                .iter()
                .filter_map(|z| Some((z.zone.clone(), *z.spot.get(instance_type)?)))
                .collect(),
            None => spot
                .map(|s| BTreeMap::from([(format!("{region}a"), s)]))
                .unwrap_or_default(),
        }
    }

    /// The zones an instance of `region` in `own` may be launched into: the declared ones and
    /// its own.
    pub(super) fn zones_of(&self, region: &str, own: &str) -> Vec<String> {
        let mut all: Vec<String> = self
            .zones
            .get(region)
            .map(|z| z.iter().map(|z| z.zone.clone()).collect())
            .unwrap_or_default();
        if !all.iter().any(|z| z == own) {
            all.insert(0, own.to_string());
        }
        all
    }

    /// The zone a launch into `subnet` (of `subnets_by_zone`) goes to, with its reclaim rate.
    pub(super) fn launch_zone(
        &self,
        region: &str,
        subnet: &str,
        subnets_by_zone: &BTreeMap<String, String>,
    ) -> (String, Option<Duration>) {
        let zone = subnets_by_zone
            .iter()
            .find(|(_, s)| s.as_str() == subnet)
            .map(|(z, _)| z.clone())
            .or_else(|| subnet.strip_prefix(SUBNET_PREFIX).map(str::to_string))
            .unwrap_or_else(|| default_zone(region, &self.zones));
        let every = declared(&self.zones, region, &zone).and_then(|z| z.reclaim_every);
        (zone, every)
    }
}

/// SplitMix64's finaliser: the seed's low bits, which the offset is taken from, spread.
fn mix(mut x: u64) -> u64 {
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: &str) -> DateTime<Utc> {
        s.parse().unwrap()
    }

    #[test]
    fn a_pool_is_reclaimed_once_a_period_at_the_same_moments_every_time() {
        let (from, to) = (at("2026-11-01T00:00:00Z"), at("2026-12-01T00:00:00Z"));
        let every = Duration::hours(3);
        let a = reclaims(
            "eu-central-1",
            "eu-central-1a",
            "p4d.24xlarge",
            every,
            from,
            to,
        );
        // 30 days of 3-hour periods: one reclaim in each.
        assert_eq!(a.len(), 240);
        assert!(a.windows(2).all(|w| w[0] < w[1] && w[1] - w[0] < every * 2));
        assert_eq!(
            a,
            reclaims(
                "eu-central-1",
                "eu-central-1a",
                "p4d.24xlarge",
                every,
                from,
                to
            )
        );
        // Another pool is reclaimed at other moments.
        let b = reclaims(
            "eu-central-1",
            "eu-central-1b",
            "p4d.24xlarge",
            every,
            from,
            to,
        );
        assert_ne!(a, b);
        // The first after a moment is the first of the list after it.
        let after = a[10] + Duration::seconds(1);
        assert_eq!(
            first_reclaim(
                "eu-central-1",
                "eu-central-1a",
                "p4d.24xlarge",
                Some(every),
                after,
                to
            ),
            Some(a[11])
        );
        assert_eq!(
            first_reclaim(
                "eu-central-1",
                "eu-central-1a",
                "p4d.24xlarge",
                None,
                from,
                to
            ),
            None
        );
    }
}
