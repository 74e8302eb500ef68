//! Capacity reservations held outside ebb that ran below their size: from the hourly reads
//! `ebb serve` keeps ([`crate::fleet::CapacityRead`]), the reserved instance-hours paid for and
//! those no instance used, priced at the type's on-demand rate (what EC2 bills an On-Demand
//! Capacity Reservation at, used or not), and the boxes of its type in its region that ran
//! outside any reservation while it had room. A time no read stands for is unread: counted
//! neither way, and said.

use super::{monthly, Period};
use crate::fleet::capacity_reads::READ_STANDS_FOR;
use crate::fleet::{CapacityRead, HeldCapacity, ReservationKind};
use chrono::{DateTime, Utc};
use std::collections::{BTreeMap, BTreeSet};

/// A reservation that ran below its size over the period.
#[derive(Debug, Clone, PartialEq)]
pub struct IdleReservation {
    /// The region.
    pub region: String,
    /// The reservation as its last read in the period found it.
    pub last_read: HeldCapacity,
    /// The reserved instance-hours read over the period (its size times the hours read).
    pub paid_hours: f64,
    /// Of those, the hours no instance used.
    pub unused_hours: f64,
    /// What the unused hours cost at the type's on-demand rate, in dollars; `None` when that
    /// rate is not known, or for a Capacity Block (paid ahead at its own price).
    pub unused_usd: Option<f64>,
    /// `unused_usd` as a month.
    pub unused_usd_a_month: Option<f64>,
    /// Boxes of its type in its region that a read found running on demand in no
    /// reservation while it had room.
    pub could_use: Vec<String>,
    /// What to do, in words.
    pub why: String,
}

/// What the reads of the period say of the held reservations.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ReservationUse {
    /// Per region read, the hours of the period its reads stand for (of [`Period::hours`]).
    pub hours_read: BTreeMap<String, f64>,
    /// The reservations that ran below their size, the costliest first.
    pub idle: Vec<IdleReservation>,
}

impl ReservationUse {
    /// How much of `period` the reservations were read for, in words.
    pub fn read_words(&self, period: &Period) -> String {
        let period = period.hours();
        if self.hours_read.is_empty() {
            return "not read in this period: ebb serve reads them hourly on EC2, so their use is unknown, not none".to_string();
        }
        let regions: Vec<String> = self
            .hours_read
            .iter()
            .map(|(region, h)| format!("{region} {h:.0} of {period:.0} h"))
            .collect();
        format!(
            "read for {}; unread hours count neither way",
            regions.join(", ")
        )
    }
}

/// Per reservation, what the reads add up to.
struct Tally {
    region: String,
    last_read: HeldCapacity,
    paid_hours: f64,
    unused_hours: f64,
    could_use: BTreeSet<String>,
}

/// The reserved hours `reads` (any order) paid for and left unused over `period`, priced by
/// `on_demand` (region → type → $/hour), with the boxes that could have used them. A read
/// stands from its time until the region's next read, for at most [`READ_STANDS_FOR`].
pub fn reservation_use(
    reads: &[CapacityRead],
    period: &Period,
    on_demand: &BTreeMap<String, BTreeMap<String, f64>>,
) -> ReservationUse {
    let mut by_region: BTreeMap<&str, Vec<&CapacityRead>> = BTreeMap::new();
    for read in reads {
        by_region.entry(&read.region).or_default().push(read);
    }
    let mut hours_read = BTreeMap::new();
    let mut tallies: BTreeMap<&str, Tally> = BTreeMap::new();
    for (region, mut region_reads) in by_region {
        region_reads.sort_by_key(|r| r.at);
        let mut read_h = 0.0;
        for (k, read) in region_reads.iter().enumerate() {
            let next = region_reads.get(k + 1).map(|r| r.at);
            let hours = stands_for(read.at, next, period);
            if hours <= 0.0 {
                continue;
            }
            read_h += hours;
            for r in &read.reservations {
                let tally = tallies.entry(&r.id).or_insert_with(|| Tally {
                    region: region.to_string(),
                    last_read: r.clone(),
                    paid_hours: 0.0,
                    unused_hours: 0.0,
                    could_use: BTreeSet::new(),
                });
                tally.last_read = r.clone();
                tally.paid_hours += f64::from(r.total) * hours;
                tally.unused_hours += f64::from(r.available.min(r.total)) * hours;
                if r.available > 0 {
                    let outside = read.ran_outside.get(&r.instance_type);
                    tally
                        .could_use
                        .extend(outside.into_iter().flatten().cloned());
                }
            }
        }
        hours_read.insert(region.to_string(), read_h);
    }
    let mut idle: Vec<IdleReservation> = tallies
        .into_values()
        .filter(|t| t.unused_hours > 0.0)
        .map(|t| idle_reservation(t, period, on_demand))
        .collect();
    idle.sort_by(|a, b| {
        let cost = |r: &IdleReservation| r.unused_usd.unwrap_or(-1.0);
        cost(b)
            .total_cmp(&cost(a))
            .then(b.unused_hours.total_cmp(&a.unused_hours))
            .then(a.last_read.id.cmp(&b.last_read.id))
    });
    ReservationUse { hours_read, idle }
}

/// The hours of `period` a read at `at` stands for, the region's next read being at `next`.
fn stands_for(at: DateTime<Utc>, next: Option<DateTime<Utc>>, period: &Period) -> f64 {
    let mut end = at + READ_STANDS_FOR;
    if let Some(next) = next {
        end = end.min(next);
    }
    let start = at.max(period.from);
    let end = end.min(period.to);
    ((end - start).num_seconds().max(0)) as f64 / 3600.0
}

fn idle_reservation(
    t: Tally,
    period: &Period,
    on_demand: &BTreeMap<String, BTreeMap<String, f64>>,
) -> IdleReservation {
    let r = &t.last_read;
    let rate = on_demand
        .get(&t.region)
        .and_then(|types| types.get(&r.instance_type));
    let unused_usd = match r.kind {
        ReservationKind::CapacityBlock => None,
        ReservationKind::CapacityReservation => rate.map(|rate| rate * t.unused_hours),
    };
    let could_use: Vec<String> = t.could_use.into_iter().collect();
    let why = why(r, rate.is_some(), &could_use);
    IdleReservation {
        region: t.region,
        paid_hours: t.paid_hours,
        unused_hours: t.unused_hours,
        unused_usd,
        unused_usd_a_month: unused_usd.map(|usd| monthly(usd, period)),
        could_use,
        why,
        last_read: t.last_read,
    }
}

/// What to do about an idle reservation, in words.
fn why(r: &HeldCapacity, priced: bool, could_use: &[String]) -> String {
    let mut why = match (r.kind, priced) {
        (ReservationKind::CapacityBlock, _) => format!(
            "a Capacity Block, paid ahead for its whole span: its unused hours are lost{}",
            end_words(r)
        ),
        (_, true) => format!(
            "billed at the on-demand rate whether used or not{}",
            end_words(r)
        ),
        (_, false) => format!(
            "billed at the on-demand rate whether used or not, which the price table does not give for {}{}",
            r.instance_type,
            end_words(r)
        ),
    };
    match (could_use.is_empty(), r.targeted) {
        (true, _) => why.push_str(
            "; no box of its type ran outside a reservation in its region while it had room: if it is not needed, cancel it or reduce its count (ModifyCapacityReservation)",
        ),
        (false, true) => why.push_str(&format!(
            "; it is targeted: a box runs in it only once made to start into it (ModifyInstanceCapacityReservationAttributes while stopped) and only in zone {}",
            r.zone
        )),
        (false, false) => why.push_str(&format!(
            "; it is open, so a running box of its type, platform ({}) and tenancy in zone {} would already use it: the boxes listed run elsewhere, and would use it if moved to that zone",
            r.platform, r.zone
        )),
    }
    why
}

fn end_words(r: &HeldCapacity) -> String {
    match r.end {
        Some(end) => format!(", until {}", end.format("%Y-%m-%d %H:%M UTC")),
        None => ", until it is cancelled".to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(s: &str) -> DateTime<Utc> {
        s.parse().unwrap()
    }

    fn held(id: &str, total: u32, available: u32, kind: ReservationKind) -> HeldCapacity {
        HeldCapacity {
            id: id.to_string(),
            instance_type: "p5.48xlarge".to_string(),
            zone: "us-east-1a".to_string(),
            platform: "Linux/UNIX".to_string(),
            kind,
            total,
            available,
            targeted: true,
            end: None,
        }
    }

    fn read(at: &str, reservations: Vec<HeldCapacity>) -> CapacityRead {
        CapacityRead {
            region: "us-east-1".to_string(),
            at: t(at),
            reservations,
            ran_outside: BTreeMap::new(),
        }
    }

    fn prices() -> BTreeMap<String, BTreeMap<String, f64>> {
        BTreeMap::from([(
            "us-east-1".to_string(),
            BTreeMap::from([("p5.48xlarge".to_string(), 55.0)]),
        )])
    }

    fn period() -> Period {
        Period {
            from: t("2026-12-01T00:00:00Z"),
            to: t("2026-12-01T10:00:00Z"),
        }
    }

    #[test]
    fn unused_room_is_counted_for_the_hours_each_read_stands_for_and_priced_on_demand() {
        let cr = |available| held("cr-1", 4, available, ReservationKind::CapacityReservation);
        // Read at 00:00 (3 free), 01:00 (1 free), then not until 06:00 (4 free): the 01:00
        // read stands for two hours only, so 03:00 to 06:00 is unread; so are 08:00 to the
        // period's end at 10:00, after the last read's two hours.
        let reads = [
            read("2026-12-01T06:00:00Z", vec![cr(4)]),
            read("2026-12-01T00:00:00Z", vec![cr(3)]),
            read("2026-12-01T01:00:00Z", vec![cr(1)]),
        ];
        let used = reservation_use(&reads, &period(), &prices());
        assert_eq!(used.hours_read["us-east-1"], 1.0 + 2.0 + 2.0);
        let [idle] = used.idle.as_slice() else {
            panic!("{used:?}")
        };
        assert_eq!(idle.paid_hours, 4.0 * 5.0);
        assert_eq!(idle.unused_hours, 3.0 + 2.0 + 8.0);
        assert_eq!(idle.unused_usd, Some(13.0 * 55.0));
        assert_eq!(idle.unused_usd_a_month, Some(13.0 * 55.0 * 73.0));
        assert!(idle.why.contains("no box of its type"), "{}", idle.why);
    }

    #[test]
    fn a_read_before_the_period_counts_only_inside_it_and_a_full_reservation_is_not_idle() {
        let reads = [
            read(
                "2026-11-30T23:30:00Z",
                vec![
                    held("cr-full", 2, 0, ReservationKind::CapacityReservation),
                    held("cr-half", 2, 1, ReservationKind::CapacityReservation),
                ],
            ),
            read("2026-12-01T00:30:00Z", vec![]),
        ];
        let used = reservation_use(&reads, &period(), &prices());
        assert_eq!(used.hours_read["us-east-1"], 0.5 + 2.0);
        let ids: Vec<&str> = used.idle.iter().map(|r| r.last_read.id.as_str()).collect();
        assert_eq!(ids, ["cr-half"], "cr-half was cancelled by 00:30");
        assert_eq!(used.idle[0].unused_hours, 0.5);
    }

    #[test]
    fn no_read_is_unknown_not_unused_and_a_capacity_block_is_not_priced_on_demand() {
        let none = reservation_use(&[], &period(), &prices());
        assert!(none.hours_read.is_empty() && none.idle.is_empty());

        let block = held("cr-block", 1, 1, ReservationKind::CapacityBlock);
        let used = reservation_use(
            &[read("2026-12-01T00:00:00Z", vec![block])],
            &period(),
            &prices(),
        );
        assert_eq!(used.idle[0].unused_hours, 2.0);
        assert_eq!(used.idle[0].unused_usd, None);
        assert!(used.idle[0].why.contains("Capacity Block"));
    }

    #[test]
    fn the_boxes_that_could_use_it_ran_outside_while_it_had_room() {
        let at = |at, available, outside: &[&str]| {
            let mut r = read(
                at,
                vec![held(
                    "cr-1",
                    2,
                    available,
                    ReservationKind::CapacityReservation,
                )],
            );
            let ids = outside.iter().map(|s| s.to_string()).collect();
            r.ran_outside.insert("p5.48xlarge".to_string(), ids);
            r
        };
        let reads = [
            at("2026-12-01T00:00:00Z", 1, &["i-b", "i-a"]),
            at("2026-12-01T01:00:00Z", 0, &["i-full"]),
            at("2026-12-01T02:00:00Z", 2, &["i-b"]),
        ];
        let used = reservation_use(&reads, &period(), &prices());
        assert_eq!(
            used.idle[0].could_use,
            ["i-a", "i-b"],
            "not i-full: no room then"
        );
        assert!(
            used.idle[0].why.contains("targeted"),
            "{}",
            used.idle[0].why
        );
    }
}
