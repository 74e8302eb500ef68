//! `ebb replay --interruptions`: the interruption history (CSV: `time,region,zone,instance_type`)
//! and the spot pools it happened in (the fleet file's `spot_zones:`, else each type's spot
//! price in `{region}a`, as the simulated fleet has it), read into [`crate::replay::Pools`].

use crate::cloud::sim::SpotZones;
use crate::fleet::{Pool, PoolEvent, PoolEventKind, PoolHistory, Prices, TypePrice};
use crate::replay::Pools;
use anyhow::{bail, Context as _, Result};
use chrono::{DateTime, Duration, Utc};
use std::collections::BTreeMap;
use std::path::Path;

/// Reads the history at `path` and the pools of `prices` and `zones`, with jobs checkpointing
/// every `checkpoint_every` (their policy's `checkpoint_max_age` without it).
pub(super) fn read_pools(
    path: &Path,
    prices: &Prices,
    zones: &SpotZones,
    checkpoint_every: Option<Duration>,
) -> Result<Pools> {
    let history = read_history(path)?;
    let mut offers: BTreeMap<String, Vec<TypePrice>> = BTreeMap::new();
    for (region, types) in prices {
        let declared = zones.get(region).filter(|z| !z.is_empty());
        let mut in_region: Vec<TypePrice> = Vec::new();
        for (instance_type, price) in types {
            let spot_by_zone = match declared {
                Some(zones) => zones
                    .iter()
                    .filter_map(|z| Some((z.zone.clone(), *z.spot.get(instance_type)?)))
                    .collect(),
                None => price
                    .spot
                    .map(|s| BTreeMap::from([(format!("{region}a"), s)]))
                    .unwrap_or_default(),
            };
            in_region.push(TypePrice {
                instance_type: instance_type.clone(),
                on_demand: price.on_demand,
                spot_by_zone,
            });
        }
        offers.insert(region.clone(), in_region);
    }
    let gpus = crate::advise::catalogue::shipped()
        .types
        .into_iter()
        .map(|(t, facts)| (t, facts.gpus.max(1)))
        .collect();
    Ok(Pools::new(offers, history, checkpoint_every, gpus))
}

/// The interruptions of the CSV at `path`, one a row, under a header
/// `time,region,zone,instance_type`.
fn read_history(path: &Path) -> Result<PoolHistory> {
    let mut reader = csv::ReaderBuilder::new()
        .trim(csv::Trim::All)
        .from_path(path)
        .with_context(|| format!("cannot read the interruption history {}", path.display()))?;
    let header: Vec<String> = reader
        .headers()
        .with_context(|| format!("cannot read the header of {}", path.display()))?
        .iter()
        .map(str::to_string)
        .collect();
    if header != ["time", "region", "zone", "instance_type"] {
        bail!(
            "{}: the header is {:?}; an interruption history starts with time,region,zone,instance_type",
            path.display(),
            header.join(",")
        );
    }
    let mut events = Vec::new();
    for (i, row) in reader.records().enumerate() {
        let line = i + 2;
        let row = row.with_context(|| format!("{}:{line}: not a CSV row", path.display()))?;
        let (Some(time), Some(region), Some(zone), Some(instance_type)) =
            (row.get(0), row.get(1), row.get(2), row.get(3))
        else {
            bail!(
                "{}:{line}: give four fields, time,region,zone,instance_type",
                path.display()
            );
        };
        let at = DateTime::parse_from_rfc3339(time)
            .map(|t| t.with_timezone(&Utc))
            .map_err(|_| {
                anyhow::anyhow!(
                    "{}:{line}: \"{time}\" is not an RFC 3339 time (like 2026-11-30T20:05:00Z)",
                    path.display()
                )
            })?;
        events.push(PoolEvent {
            pool: Pool {
                account: String::new(),
                region: region.to_string(),
                zone: zone.to_string(),
                instance_type: instance_type.to_string(),
            },
            kind: PoolEventKind::Interruption,
            at,
            instance: None,
        });
    }
    Ok(PoolHistory { events })
}
