//! Daily rollups: ebb's stopped stretches summed for each instance and whole UTC day, once the
//! day is over, so that a report reads a day's stops as one row per instance rather than
//! every stop, start and state change of it; and the day's hourly totals of what ran and what
//! ebb kept stopped, by region and type, which are all the commitments need
//! (`report::covered`). What scales with the fleet and the window (the
//! stretches) is rolled up; spot migrations, overrides and groups' changes, a few rows each,
//! are always worked out from what happened. A day's figures cannot change once it has ended:
//! every stop, start and state change is recorded at the time it happens, never back-dated.
//!
//! [`roll_up`] makes a day's rows from the day's history; [`compute_parts`] makes a report from
//! the rolled days' sums and the history of the rest, as [`compute`] would from the history of
//! the whole window (`tests/postgres/report_rollup.rs` checks that they agree).

use super::covered::{self, RolledStops};
use super::tally::{finish, Tally};
use super::{
    groups, overrides, spot, stops, stretches, End, History, HourlyTotals, InstanceInfo, Measures,
    Report, StopSaved, Window,
};
use crate::fleet::money::{Attached, PriceTable};
use chrono::{DateTime, NaiveDate, Utc};
use std::collections::{BTreeMap, BTreeSet};

/// What ebb's stops came to on one instance on one day, for one policy.
#[derive(Debug, Clone, PartialEq)]
pub struct RolledDay {
    /// The UTC day.
    pub day: NaiveDate,
    /// The instance.
    pub instance: String,
    /// The stop's policy.
    pub policy: Option<String>,
    /// ebb's stops that day.
    pub stops: u64,
    /// ebb's hibernations that day.
    pub hibernations: u64,
    /// Stretches a person ended that day.
    pub people_starts: u64,
    /// Hours of that day the instance was kept stopped by a stop that ended its charges.
    pub stopped_hours: f64,
    /// Hours of that day the instance was kept stopped by a stop its cloud still bills.
    pub charging_hours: f64,
    /// Hours of that day the instance was kept stopped by a stop inside a capacity
    /// reservation held outside ebb, which paid for them.
    pub reserved_hours: f64,
}

/// The rows of `day` from `history`, read over that day (`Store::report_stop_history`, with
/// what ran that day in every region as its `running`), and that day's hourly totals.
pub fn roll_up(history: &History, day: NaiveDate) -> (Vec<RolledDay>, HourlyTotals) {
    let since = midnight(day);
    let window = Window {
        since,
        until: day.succ_opt().map_or(since, midnight),
    };
    let mut rows: BTreeMap<(&str, Option<&str>), RolledDay> = BTreeMap::new();
    let mut totals = HourlyTotals::default();
    stretches(history, window.until, |instance, s, to, end| {
        let row = rows
            .entry((instance, s.policy))
            .or_insert_with(|| RolledDay {
                day,
                instance: instance.to_string(),
                policy: s.policy.map(str::to_string),
                stops: 0,
                hibernations: 0,
                people_starts: 0,
                stopped_hours: 0.0,
                charging_hours: 0.0,
                reserved_hours: 0.0,
            });
        if window.contains(s.at) {
            match s.action {
                super::EbbAction::Hibernate => row.hibernations += 1,
                _ => row.stops += 1,
            }
        }
        if end == End::Person && window.contains(to) {
            row.people_starts += 1;
        }
        let Some((from, to)) = window.clip(s.at, to) else {
            return;
        };
        // A stop its cloud still bills saved nothing, and takes no commitment; nor do the hours
        // a held reservation paid for.
        let h = super::hours(to - from);
        match s.saved {
            StopSaved::Charging => row.charging_hours += h,
            StopSaved::Reserved => row.reserved_hours += h,
            StopSaved::Saved => {
                row.stopped_hours += h;
                if let Some(info) = history.instances.get(instance) {
                    totals.add_span(&info.region, &info.instance_type, (from, to), false);
                }
            }
        }
    });
    for r in &history.running {
        if let Some(span) = window.clip(r.from, r.to) {
            totals.add_span(&r.region, &r.instance_type, span, true);
        }
    }
    let rows = rows
        .into_values()
        .filter(|r| {
            r.stops + r.hibernations + r.people_starts > 0
                || r.stopped_hours > 0.0
                || r.charging_hours > 0.0
                || r.reserved_hours > 0.0
        })
        .collect();
    (rows, totals)
}

/// Rolled days summed by day, policy, region, type and value of the report's `by` tag: what a
/// report reads of them.
#[derive(Debug, Clone, PartialEq)]
pub struct RolledSum {
    /// The UTC day.
    pub day: NaiveDate,
    /// The stops' policy.
    pub policy: Option<String>,
    /// The instances' region.
    pub region: String,
    /// The instances' type.
    pub instance_type: String,
    /// The instances' value of the `by` tag, as last listed (`None` without it, or without
    /// `by`).
    pub tag: Option<String>,
    /// ebb's stops.
    pub stops: u64,
    /// ebb's hibernations.
    pub hibernations: u64,
    /// Stretches people ended.
    pub people_starts: u64,
    /// Hours kept stopped by stops that ended the charges.
    pub stopped_hours: f64,
    /// Hours kept stopped by stops the cloud still bills.
    pub charging_hours: f64,
    /// Hours kept stopped inside capacity reservations held outside ebb.
    pub reserved_hours: f64,
    /// The instances' volumes and Elastic IPs, as last listed: what they paid stopped.
    pub attached: Attached,
    /// Spot or preemptible instances ([`InstanceInfo::interruptible`]): hours, never priced.
    pub interruptible: bool,
}

/// What a report is worked out from when its whole past days are rolled up.
#[derive(Debug, Clone, Default)]
pub struct Parts {
    /// The stops' history of each part of the window outside the rolled days, with that part.
    pub stops: Vec<(History, Window)>,
    /// Spot migrations, overrides and groups' changes over the whole window.
    pub rest: History,
    /// The rolled days inside the window, summed.
    pub rolled: Vec<RolledSum>,
    /// The tag keys of the rolled days' instances.
    pub rolled_tag_keys: Vec<String>,
    /// The rolled days' hourly totals, for the commitments (read only when some are held).
    pub hours: HourlyTotals,
    /// The days of the window the roll-up refused, their state changes pruned first.
    pub uncounted: Vec<NaiveDate>,
}

/// The report of `parts` over `window`, as [`super::compute`] makes it from the whole window's
/// history.
pub fn compute_parts(
    parts: &Parts,
    window: Window,
    by: Option<&str>,
    prices: &PriceTable,
) -> Report {
    let price = |region: &str, ty: &str| prices.get(region, ty);
    let mut tally = Tally::new(by);
    let mut kept = Vec::new();
    for (history, part) in &parts.stops {
        kept.extend(stops(history, *part, prices, &mut tally));
    }
    let infos: Vec<InstanceInfo> = parts
        .rolled
        .iter()
        .map(|r| InstanceInfo {
            region: r.region.clone(),
            instance_type: r.instance_type.clone(),
            tags: match (by, &r.tag) {
                (Some(key), Some(value)) => BTreeMap::from([(key.to_string(), value.clone())]),
                _ => BTreeMap::new(),
            },
            policy: None,
            attached: r.attached.clone(),
            interruptible: r.interruptible,
        })
        .collect();
    for (r, info) in parts.rolled.iter().zip(&infos) {
        tally.add(
            r.day,
            r.policy.as_deref(),
            Some(info),
            rolled_measures(r, prices),
        );
    }
    // Commitments never pay for spot hours: only the on-demand stops are theirs to cover.
    let rolled: Vec<RolledStops> = parts
        .rolled
        .iter()
        .zip(&infos)
        .filter(|(r, _)| !r.interruptible)
        .map(|(r, info)| RolledStops {
            day: r.day,
            policy: r.policy.as_deref(),
            info,
            hours: r.stopped_hours,
        })
        .collect();
    let running = parts.stops.iter().flat_map(|(h, _)| &h.running);
    let totals = parts.hours.clone();
    covered::add_covered(prices, totals, running, &kept, &rolled, &mut tally);
    spot(&parts.rest, window, &mut tally);
    overrides(&parts.rest, window, &mut tally);
    super::reservations::reservations(&parts.rest, window, prices, &mut tally);
    super::reclaimed::reclaims(&parts.rest, window, prices, &mut tally);
    let groups = groups::groups(&parts.rest, window, &price, &mut tally);
    let mut report = finish(tally, window);
    report.groups = groups;
    let keys: BTreeSet<String> = parts
        .stops
        .iter()
        .map(|(h, _)| h)
        .chain([&parts.rest])
        .flat_map(History::tag_keys)
        .chain(parts.rolled_tag_keys.iter().cloned())
        .collect();
    report.tag_keys = keys.into_iter().collect();
    report.uncounted_days = parts.uncounted.clone();
    report.other_currencies = super::currencies::in_other_currencies(prices, |table| {
        compute_parts(parts, window, by, table)
    });
    report
}

/// What a rolled day's row comes to, as `stretch` counts each stretch of the history.
fn rolled_measures(r: &RolledSum, prices: &PriceTable) -> Measures {
    let rate = (!r.interruptible)
        .then(|| prices.get(&r.region, &r.instance_type))
        .flatten();
    let box_cost = prices.stopped_cost(&r.region, &r.attached);
    let (saving, charging, reserved) = (r.stopped_hours, r.charging_hours, r.reserved_hours);
    let all = saving + charging + reserved;
    let reserved_usd = rate.map_or(0.0, |rate| rate * reserved);
    let saved = rate.map_or(0.0, |rate| rate * saving) + reserved_usd;
    Measures {
        saved_usd: saved,
        stopped_saved_usd: saved,
        reserved_covered_usd: reserved_usd,
        stops: r.stops,
        hibernations: r.hibernations,
        people_starts: r.people_starts,
        stopped_hours: all,
        unpriced_stopped_hours: if rate.is_none() {
            saving + reserved
        } else {
            0.0
        },
        charging_stopped_hours: charging,
        stopped_box_cost_usd: box_cost.map_or(0.0, |c| c * all),
        unknown_box_cost_hours: if box_cost.is_none() { all } else { 0.0 },
        ..Measures::default()
    }
}

/// The start of `day`, in UTC.
pub fn midnight(day: NaiveDate) -> DateTime<Utc> {
    day.and_time(chrono::NaiveTime::MIN).and_utc()
}
