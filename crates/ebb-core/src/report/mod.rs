//! `ebb report`: what ebb really saved over a window of time, worked out from what the store
//! recorded (ebb's stops and starts, the instances' observed state changes, spot migrations,
//! overrides). Pure: no I/O, the window's end an argument. The command, the API and the
//! console's `/savings` page call [`compute_parts`] on what `Store::report_parts` reads (whole
//! past days from their rollups); [`compute`] works out the same report from a window's whole
//! [`History`] (`Store::report_history`), and is what the rollups are checked against.
//!
//! The definitions, which docs/replay-and-report.md's "Report: what ebb saved" repeats:
//! - A **stop** is a stop or hibernation by ebb (the `scheduler` actor, not a dry run) that
//!   succeeded. It keeps the instance stopped from its outcome until the instance next ran: ebb
//!   started it, or it was seen `pending` or `running`; or until it was seen terminated,
//!   shutting down or gone (after that it costs nothing, whoever stopped it); or the window's
//!   end. Those hours, clipped to the window, are its **stopped hours**, and times the
//!   instance's on-demand price (the price table, by region and type) its **stopped savings**;
//!   a stop its cloud still bills (the stopped mode read back after it said so, or did not say)
//!   saves nothing: its hours are **charging stopped hours**.
//!   A stop before the window whose instance was still stopped at its start counts from the
//!   start; only stops inside the window are counted as stops.
//! - A **person's start** is the end of such a stretch by the instance being seen running
//!   without ebb having started it since its stop, inside the window.
//! - **Spot savings** are a migration's hours on spot inside the window times the difference
//!   of the original's on-demand price and the replacement's price. What earlier (reclaimed or
//!   ended) replacements saved is stored as one sum: it is spread evenly over the time from the
//!   migration's plan to the end of the last of them, and the part inside the window counts.
//! - An **override** counts when it was made inside the window; its hours are the time it was
//!   in force (until its end or its revocation) inside the window, whenever it was made.
//! - A **group's scale-down** (an Auto Scaling group's min and desired to the floor, which
//!   succeeded) keeps the members it removed from running until the group's next restore, or
//!   the window's end. Those hours times the members removed are its **group hours**, and times
//!   the members' on-demand price its **group savings**.
//! - Stops and people's starts belong to the stop's policy; spot savings to the migration's;
//!   overrides to the instance's last policy; a group's savings to its scale-down's. Tags are
//!   the instance's as last listed (a group has none here).

mod covered;
mod currencies;
mod format;
mod groups;
mod history;
pub mod money;
mod reclaimed;
mod reservations;
mod rollup;
mod tally;

pub use covered::{HourlyTotals, Usage};
use currencies::in_other_currencies;
pub use currencies::InCurrency;
pub use format::{csv, gross_to_net, table};
pub use groups::GroupMeasures;
pub use history::{
    ActionRecord, EbbAction, GroupChange, History, InstanceInfo, OverrideSpan, ReclaimSpan,
    ReservationSpan, RunningSpan, SpotMove, StateChange, StopSaved,
};
pub use rollup::{compute_parts, midnight, roll_up, Parts, RolledDay, RolledSum};

use crate::fleet::money::PriceTable;
use chrono::{DateTime, Duration, NaiveDate, Utc};
use covered::Kept;
use serde::Serialize;
use std::collections::BTreeMap;
use tally::{finish, Tally};

/// The longest window a report covers: its work and its answer (a row a day) grow with it, and
/// it runs on the serving process, so a request cannot ask for centuries.
pub const MAX_WINDOW: Duration = Duration::days(400);

/// The window a report covers: `[since, until)`, at most [`MAX_WINDOW`] long.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Window {
    /// Its start.
    pub since: DateTime<Utc>,
    /// Its end (now, usually).
    pub until: DateTime<Utc>,
}

impl Window {
    /// The window from `since` to `until` (or `now`) as people write them: each a duration back
    /// from `now` (30d) or an RFC 3339 time; `until` not after `now`, and the window at most
    /// [`MAX_WINDOW`] long. The message of an error names the field.
    pub fn parse(since: &str, until: Option<&str>, now: DateTime<Utc>) -> Result<Window, String> {
        let since = crate::when::parse_past(since, now).map_err(|e| format!("since: {e}"))?;
        let until = match until {
            Some(u) => crate::when::parse_past(u, now).map_err(|e| format!("until: {e}"))?,
            None => now,
        };
        if until > now {
            return Err(format!(
                "until: {} is after now ({}); a report ends at the latest now: leave until out or give an earlier time",
                until.to_rfc3339(),
                now.to_rfc3339()
            ));
        }
        if until <= since {
            return Err(format!(
                "until: {} is not after since {}; give a window that ends after it starts",
                until.to_rfc3339(),
                since.to_rfc3339()
            ));
        }
        if until - since > MAX_WINDOW {
            return Err(format!(
                "since: the window from {} to {} is longer than {} days; a report covers at most {} days: give a later since or an earlier until",
                since.to_rfc3339(),
                until.to_rfc3339(),
                MAX_WINDOW.num_days(),
                MAX_WINDOW.num_days()
            ));
        }
        Ok(Window { since, until })
    }

    /// `[from, to)` cut to the window; `None` when nothing of it is inside.
    fn clip(
        &self,
        from: DateTime<Utc>,
        to: DateTime<Utc>,
    ) -> Option<(DateTime<Utc>, DateTime<Utc>)> {
        let (from, to) = (from.max(self.since), to.min(self.until));
        (to > from).then_some((from, to))
    }

    fn contains(&self, t: DateTime<Utc>) -> bool {
        self.since <= t && t < self.until
    }
}

/// The measures of a report, for the whole fleet or one group.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Measures {
    /// Dollars saved, gross: stopped savings, spot savings, group savings and the disks of
    /// reclaimed boxes, every stopped hour at its on-demand price.
    pub saved_usd: f64,
    /// Dollars saved, net: gross less what commitments would have covered of the stopped hours,
    /// less the stopped hours reservations held outside ebb paid for, less what the capacity
    /// reservations ebb held cost, and less what reclaims' images stored. What stopped boxes
    /// still pay (`stopped_box_cost_usd`) is not taken off: a box pays for its disks whether it
    /// runs or not, so they are no cost of stopping it.
    pub net_saved_usd: f64,
    /// On-demand dollars of stopped hours that reservations or Savings Plans would have
    /// covered: paid anyway, so not saved.
    pub commitment_covered_usd: f64,
    /// Commitment dollars (at the commitments' rates) those hours would have used: paid and
    /// left unused because of the stops.
    pub unused_commitment_usd: f64,
    /// On-demand dollars of stopped hours of boxes stopped inside a capacity reservation held
    /// outside ebb (`stop.in_reservation: stop`): the reservation is paid anyway, so not saved.
    pub reserved_covered_usd: f64,
    /// What stopped boxes still paid while stopped: their EBS volumes and Elastic IPs, paid
    /// whether they run or not, so shown apart from the net.
    pub stopped_box_cost_usd: f64,
    /// Stopped hours of boxes whose volumes or addresses could not be read, or that the price
    /// table does not price: what they still paid is unknown (never zero).
    pub unknown_box_cost_hours: f64,
    /// Hours boxes ebb reclaimed stayed terminated, their data in their image.
    pub reclaimed_hours: f64,
    /// What those boxes' disks would have cost in those hours (the volumes their images
    /// restore to, at EBS prices): no longer paid. Elastic IPs are not in it: a termination
    /// does not release them.
    pub reclaim_saved_usd: f64,
    /// Hours reclaims' images were kept, before and after their boxes' terminations.
    pub image_hours: f64,
    /// What those images stored, at the snapshot price on their volumes' full size (EBS bills
    /// only the blocks stored, so at most this): taken off the net.
    pub image_storage_usd: f64,
    /// Reclaimed or image hours with no dollars: their volumes were not recorded, or the price
    /// table lacks their EBS or snapshot price. A reclaim saves nothing here unless its image's
    /// cost is known too.
    pub unpriced_reclaim_hours: f64,
    /// Dollars saved by ebb's stops.
    pub stopped_saved_usd: f64,
    /// Dollars saved on spot.
    pub spot_saved_usd: f64,
    /// Dollars saved by scaling Auto Scaling groups down.
    pub group_saved_usd: f64,
    /// ebb's stops (hibernations apart) inside the window.
    pub stops: u64,
    /// ebb's hibernations inside the window.
    pub hibernations: u64,
    /// Hours instances were kept stopped (or hibernated) by ebb.
    pub stopped_hours: f64,
    /// Of those, the hours of instances the price table has no price for (no dollars).
    pub unpriced_stopped_hours: f64,
    /// Of those, the hours of stops the cloud still billed, or did not say it did not (no
    /// dollars: a stop that still charges saves nothing).
    pub charging_stopped_hours: f64,
    /// Spot migrations planned inside the window.
    pub spot_moves: u64,
    /// Hours replacements ran on spot.
    pub spot_hours: f64,
    /// Overrides people made inside the window.
    pub overrides: u64,
    /// Hours overrides were in force.
    pub override_hours: f64,
    /// Instances people started while ebb's stop was its last action on them.
    pub people_starts: u64,
    /// ebb's scale-downs of Auto Scaling groups inside the window.
    pub group_scale_downs: u64,
    /// Instance-hours the members removed by those scale-downs did not run.
    pub group_hours: f64,
    /// Hours capacity reservations ebb made for starts were held (`start.reserve_capacity`).
    pub reservation_hours: f64,
    /// What they cost: those hours at their types' on-demand prices, taken off the net.
    pub reservation_cost_usd: f64,
}

impl Measures {
    fn add(&mut self, o: &Measures) {
        self.saved_usd += o.saved_usd;
        self.commitment_covered_usd += o.commitment_covered_usd;
        self.unused_commitment_usd += o.unused_commitment_usd;
        self.reserved_covered_usd += o.reserved_covered_usd;
        self.stopped_box_cost_usd += o.stopped_box_cost_usd;
        self.unknown_box_cost_hours += o.unknown_box_cost_hours;
        self.stopped_saved_usd += o.stopped_saved_usd;
        self.spot_saved_usd += o.spot_saved_usd;
        self.stops += o.stops;
        self.hibernations += o.hibernations;
        self.stopped_hours += o.stopped_hours;
        self.unpriced_stopped_hours += o.unpriced_stopped_hours;
        self.charging_stopped_hours += o.charging_stopped_hours;
        self.spot_moves += o.spot_moves;
        self.spot_hours += o.spot_hours;
        self.overrides += o.overrides;
        self.override_hours += o.override_hours;
        self.people_starts += o.people_starts;
        self.group_saved_usd += o.group_saved_usd;
        self.group_scale_downs += o.group_scale_downs;
        self.group_hours += o.group_hours;
        self.reservation_hours += o.reservation_hours;
        self.reservation_cost_usd += o.reservation_cost_usd;
        self.reclaimed_hours += o.reclaimed_hours;
        self.reclaim_saved_usd += o.reclaim_saved_usd;
        self.image_hours += o.image_hours;
        self.image_storage_usd += o.image_storage_usd;
        self.unpriced_reclaim_hours += o.unpriced_reclaim_hours;
    }

    /// Dollars and hours to the cent and the hundredth of an hour, for people and JSON, and
    /// the net worked out from the gross.
    fn round(&mut self) {
        let net = self.saved_usd
            - self.commitment_covered_usd
            - self.reserved_covered_usd
            - self.reservation_cost_usd
            - self.image_storage_usd;
        self.net_saved_usd = (net * 100.0).round() / 100.0;
        for v in [
            &mut self.saved_usd,
            &mut self.commitment_covered_usd,
            &mut self.unused_commitment_usd,
            &mut self.reserved_covered_usd,
            &mut self.stopped_box_cost_usd,
            &mut self.unknown_box_cost_hours,
            &mut self.stopped_saved_usd,
            &mut self.spot_saved_usd,
            &mut self.stopped_hours,
            &mut self.unpriced_stopped_hours,
            &mut self.charging_stopped_hours,
            &mut self.spot_hours,
            &mut self.override_hours,
            &mut self.group_saved_usd,
            &mut self.group_hours,
            &mut self.reservation_hours,
            &mut self.reservation_cost_usd,
            &mut self.reclaimed_hours,
            &mut self.reclaim_saved_usd,
            &mut self.image_hours,
            &mut self.image_storage_usd,
            &mut self.unpriced_reclaim_hours,
        ] {
            *v = (*v * 100.0).round() / 100.0;
        }
    }
}

/// One policy's measures.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PolicyMeasures {
    /// The policy (`(none)` for what no policy was recorded with).
    pub policy: String,
    /// Its measures.
    #[serde(flatten)]
    pub measures: Measures,
}

/// The measures of the instances with one value of the `by` tag.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TagMeasures {
    /// The value; `None` for instances without the tag.
    pub value: Option<String>,
    /// Their measures.
    #[serde(flatten)]
    pub measures: Measures,
}

/// One UTC day's measures, with the dollars saved by each policy and tag value that day.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DayMeasures {
    /// The day.
    pub day: NaiveDate,
    /// Its measures.
    #[serde(flatten)]
    pub measures: Measures,
    /// Dollars saved that day by policy.
    pub saved_by_policy: BTreeMap<String, f64>,
    /// Dollars saved that day by value of the `by` tag (`(untagged)` for instances without).
    pub saved_by_tag: BTreeMap<String, f64>,
}

/// A report: the totals, by policy, by the values of a tag, and by day.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Report {
    /// The window's start.
    pub since: DateTime<Utc>,
    /// The window's end.
    pub until: DateTime<Utc>,
    /// The tag grouped by, if any.
    pub by: Option<String>,
    /// The whole fleet.
    pub total: Measures,
    /// By policy, by name.
    pub policies: Vec<PolicyMeasures>,
    /// By value of the `by` tag (untagged last); empty without one.
    pub tags: Vec<TagMeasures>,
    /// By UTC day, oldest first, every day of the window.
    pub days: Vec<DayMeasures>,
    /// By Auto Scaling group ebb scaled, by region and name.
    pub groups: Vec<GroupMeasures>,
    /// The tag keys of the instances in the report (ebb's own left out): what `by` may be.
    pub tag_keys: Vec<String>,
    /// What was saved in each other currency the price table prices regions in
    /// (`other_currencies`), apart: never added to the dollars, whose figures count those
    /// regions' hours as unpriced.
    pub other_currencies: Vec<InCurrency>,
    /// The window's days the report does not count: their state changes were pruned before
    /// the report's roll-up reached them, and what is left cannot say how long a stop lasted.
    pub uncounted_days: Vec<NaiveDate>,
}

/// The name of what no policy was recorded with.
pub const NO_POLICY: &str = "(none)";
/// The name of instances without the `by` tag, in per-day figures.
pub const UNTAGGED: &str = "(untagged)";

fn hours(d: Duration) -> f64 {
    d.num_milliseconds() as f64 / 3_600_000.0
}

/// The report of `history` over `window`, grouped by the tag `by` when given, priced by
/// `prices`: on-demand prices for the gross, the commitments held and what a stopped box still
/// pays for the net.
pub fn compute(history: &History, window: Window, by: Option<&str>, prices: &PriceTable) -> Report {
    let price = |region: &str, ty: &str| prices.get(region, ty);
    let mut tally = Tally::new(by);
    let kept = stops(history, window, prices, &mut tally);
    let running = history.running.iter();
    covered::add_covered(
        prices,
        HourlyTotals::default(),
        running,
        &kept,
        &[],
        &mut tally,
    );
    spot(history, window, &mut tally);
    overrides(history, window, &mut tally);
    reservations::reservations(history, window, prices, &mut tally);
    reclaimed::reclaims(history, window, prices, &mut tally);
    let groups = groups::groups(history, window, &price, &mut tally);
    let mut report = finish(tally, window);
    report.groups = groups;
    report.tag_keys = history.tag_keys();
    report.other_currencies =
        in_other_currencies(prices, |table| compute(history, window, by, table));
    report
}

/// What happened to an instance, in time order: ebb's actions before state changes seen at
/// the same instant (a start is recorded before the next sync sees it running).
enum Happening<'a> {
    Ebb(&'a ActionRecord),
    Seen(&'a StateChange),
}

impl Happening<'_> {
    fn at(&self) -> DateTime<Utc> {
        match self {
            Happening::Ebb(a) => a.at,
            Happening::Seen(c) => c.at,
        }
    }
}

/// A stretch an ebb stop keeps going: since when, by which action and policy, and what its
/// hours come to.
struct Stopped<'a> {
    at: DateTime<Utc>,
    action: EbbAction,
    policy: Option<&'a str>,
    saved: StopSaved,
}

/// How a stopped stretch ended.
#[derive(PartialEq)]
enum End {
    /// ebb started it, the window ended, or the instance went away.
    Quiet,
    /// A person started it.
    Person,
}

/// The stopped stretches of every instance: hours, dollars, stops and people's starts; those
/// that saved, kept for the commitments.
fn stops<'h>(
    history: &'h History,
    window: Window,
    prices: &PriceTable,
    tally: &mut Tally,
) -> Vec<Kept<'h>> {
    let mut kept = Vec::new();
    stretches(history, window.until, |instance, s, to, end| {
        let info = history.instances.get(instance);
        let costs = Costs {
            // A spot box's hour has no price a table gives: its hours count, unpriced.
            rate: info
                .filter(|i| !i.interruptible)
                .and_then(|i| prices.get(&i.region, &i.instance_type)),
            while_stopped: info.and_then(|i| prices.stopped_cost(&i.region, &i.attached)),
        };
        let span = stretch(s, to, end, window, info, costs, tally);
        // A stop its cloud still bills saved nothing for a commitment to cover, the hours a
        // held reservation paid for are covered already, and commitments never pay for spot.
        if s.saved == StopSaved::Saved && info.is_some_and(|i| !i.interruptible) {
            kept.extend(span.zip(info).map(|(span, info)| Kept {
                span,
                policy: s.policy,
                info,
            }));
        }
    });
    kept
}

/// Calls `each` with every stopped stretch of `history`'s instances: the instance, the
/// stretch, when it ended (`until` for one still open) and how.
fn stretches<'h>(
    history: &'h History,
    until: DateTime<Utc>,
    mut each: impl FnMut(&'h str, &Stopped<'h>, DateTime<Utc>, End),
) {
    let mut by_instance: BTreeMap<&str, Vec<Happening>> = BTreeMap::new();
    for a in &history.actions {
        by_instance
            .entry(&a.instance)
            .or_default()
            .push(Happening::Ebb(a));
    }
    for c in &history.changes {
        if let Some(list) = by_instance.get_mut(c.instance.as_str()) {
            list.push(Happening::Seen(c));
        }
    }
    for (instance, mut list) in by_instance {
        list.sort_by_key(|h| (h.at(), matches!(h, Happening::Seen(_))));
        let mut open: Option<Stopped> = None;
        for h in &list {
            let ended = match h {
                Happening::Ebb(a) if a.action == EbbAction::Start => Some(End::Quiet),
                Happening::Ebb(a) => {
                    if open.is_none() {
                        open = Some(Stopped {
                            at: a.at,
                            action: a.action,
                            policy: a.policy.as_deref(),
                            saved: a.saved,
                        });
                    }
                    None
                }
                Happening::Seen(c) => match c.to_state.as_str() {
                    "pending" | "running" => Some(End::Person),
                    "terminated" | "shutting-down" | "gone" => Some(End::Quiet),
                    _ => None,
                },
            };
            if let Some(end) = ended {
                if let Some(s) = open.take() {
                    each(instance, &s, h.at(), end);
                }
            }
        }
        if let Some(s) = open {
            let to = until.max(s.at);
            each(instance, &s, to, End::Quiet);
        }
    }
}

/// What an instance's stopped hour is worth: its on-demand $/hour (the gross), and what it
/// still pays while stopped, when known.
#[derive(Clone, Copy)]
struct Costs {
    rate: Option<f64>,
    while_stopped: Option<f64>,
}

/// Adds one stopped stretch from `s.at` to `to`, ended as `end`; the part of it inside the
/// window.
fn stretch(
    s: &Stopped,
    to: DateTime<Utc>,
    end: End,
    window: Window,
    info: Option<&InstanceInfo>,
    costs: Costs,
    tally: &mut Tally,
) -> Option<(DateTime<Utc>, DateTime<Utc>)> {
    if window.contains(s.at) {
        let m = Measures {
            stops: u64::from(s.action == EbbAction::Stop),
            hibernations: u64::from(s.action == EbbAction::Hibernate),
            ..Measures::default()
        };
        tally.add(s.at.date_naive(), s.policy, info, m);
    }
    if end == End::Person && window.contains(to) {
        let m = Measures {
            people_starts: 1,
            ..Measures::default()
        };
        tally.add(to.date_naive(), s.policy, info, m);
    }
    let span = window.clip(s.at, to)?;
    // A stop its cloud still bills saves nothing, priced or not.
    let charging = s.saved == StopSaved::Charging;
    let rate = if charging { Some(0.0) } else { costs.rate };
    let reserved = s.saved == StopSaved::Reserved;
    tally.add_span(span, s.policy, info, |h| {
        let saved = rate.map(|r| r * h).unwrap_or(0.0);
        Measures {
            saved_usd: saved,
            stopped_saved_usd: saved,
            reserved_covered_usd: if reserved { saved } else { 0.0 },
            stopped_hours: h,
            unpriced_stopped_hours: if rate.is_none() { h } else { 0.0 },
            charging_stopped_hours: if charging { h } else { 0.0 },
            stopped_box_cost_usd: costs.while_stopped.map(|c| c * h).unwrap_or(0.0),
            unknown_box_cost_hours: if costs.while_stopped.is_none() {
                h
            } else {
                0.0
            },
            ..Measures::default()
        }
    });
    Some(span)
}

/// What spot migrations saved in the window.
fn spot(history: &History, window: Window, tally: &mut Tally) {
    for m in &history.migrations {
        let info = history.instances.get(&m.original);
        let policy = Some(m.policy.as_str());
        if window.contains(m.created_at) {
            let moves = Measures {
                spot_moves: 1,
                ..Measures::default()
            };
            tally.add(m.created_at.date_naive(), policy, info, moves);
        }
        earlier(m, window, policy, info, tally);
        let (Some(since), Some(on_demand), Some(price), true) =
            (m.running_since, m.on_demand_price, m.price, m.on_spot)
        else {
            continue;
        };
        let until = m.ended_at.unwrap_or(window.until);
        let Some(span) = window.clip(since, until) else {
            continue;
        };
        let per_hour = (on_demand - price).max(0.0);
        tally.add_span(span, policy, info, |h| Measures {
            saved_usd: h * per_hour,
            spot_saved_usd: h * per_hour,
            spot_hours: h,
            ..Measures::default()
        });
    }
}

/// What earlier replacements saved, one sum: spread evenly over the time from the plan to the
/// end of the last of them, and counted for the part of it inside the window.
fn earlier(
    m: &SpotMove,
    window: Window,
    policy: Option<&str>,
    info: Option<&InstanceInfo>,
    tally: &mut Tally,
) {
    if m.saved_before <= 0.0 {
        return;
    }
    let until = m.earlier_until.unwrap_or(m.created_at).max(m.created_at);
    let whole = hours(until - m.created_at);
    let saved = |usd: f64| Measures {
        saved_usd: usd,
        spot_saved_usd: usd,
        ..Measures::default()
    };
    if whole == 0.0 {
        if window.contains(m.created_at) {
            tally.add(
                m.created_at.date_naive(),
                policy,
                info,
                saved(m.saved_before),
            );
        }
    } else if let Some(span) = window.clip(m.created_at, until) {
        let per_hour = m.saved_before / whole;
        tally.add_span(span, policy, info, |h| saved(h * per_hour));
    }
}

/// People's overrides: those made in the window, and every one's hours in force in it.
fn overrides(history: &History, window: Window, tally: &mut Tally) {
    for o in &history.overrides {
        let info = history.instances.get(&o.instance);
        let policy = info.and_then(|i| i.policy.as_deref());
        if window.contains(o.created_at) {
            let made = Measures {
                overrides: 1,
                ..Measures::default()
            };
            tally.add(o.created_at.date_naive(), policy, info, made);
        }
        if let Some(span) = window.clip(o.created_at, o.ends_at) {
            tally.add_span(span, policy, info, |h| Measures {
                override_hours: h,
                ..Measures::default()
            });
        }
    }
}

#[cfg(test)]
mod reclaimed_tests;
#[cfg(test)]
mod reserved_tests;
#[cfg(test)]
mod spot_tests;
#[cfg(test)]
mod tests;
