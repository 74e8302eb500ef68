//! The instances a replay (or the advice, which replays) cannot price, named all at once: one
//! missing price at a time would take a run for each.

use super::rate;
use crate::fleet::{Instance, Prices};
use std::collections::BTreeMap;

/// Each type and region of `instances` that `prices` cannot price, with how many instances
/// (`TYPE in REGION (N instances)`), by region and type.
pub fn unpriced(prices: &Prices, instances: &[Instance]) -> Vec<String> {
    let mut missing: BTreeMap<(&str, &str), usize> = BTreeMap::new();
    for inst in instances {
        if rate(prices, inst).is_err() {
            *missing
                .entry((inst.region.as_str(), inst.instance_type.as_str()))
                .or_default() += 1;
        }
    }
    missing
        .iter()
        .map(|((region, ty), n)| {
            let instances = if *n == 1 { "instance" } else { "instances" };
            format!("{ty} in {region} ({n} {instances})")
        })
        .collect()
}
