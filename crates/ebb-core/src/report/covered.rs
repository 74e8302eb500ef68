//! What the commitments held would have covered of ebb's stopped hours, from each hour's totals
//! by region and type: the hours that ran, and the hours ebb kept stopped. AWS applies
//! commitments to an hour's usage as a whole ([`money::cover_hour`]), so the totals are all it
//! needs; they come from the history of a window or from the rollups of its whole past days
//! (`report_hours`), and agree either way.
//!
//! AWS never says which stopped box would have taken a commitment, so each day's coverage of
//! a region and type is shared among that day's stopped stretches of it in proportion to their
//! hours: two boxes of one type stopped all day share a reservation of one equally, whichever
//! stopped first.

use super::money::{self, Covered, HourUse, HOUR};
use super::tally::Tally;
use super::{hours, InstanceInfo, Measures, RunningSpan};
use crate::fleet::money::PriceTable;
use chrono::{DateTime, NaiveDate, Utc};
use std::collections::BTreeMap;

/// A region and an instance type.
type RegionType = (String, String);

/// One hour's use of one region and type.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Usage {
    /// Instance-hours that ran (pending or running).
    pub running: f64,
    /// Instance-hours ebb kept stopped by stops that ended their charges.
    pub stopped: f64,
}

/// Each hour's [`Usage`] by region and type.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct HourlyTotals {
    /// (region, type) → hour (since the epoch) → use.
    by_type: BTreeMap<RegionType, BTreeMap<i64, Usage>>,
}

impl HourlyTotals {
    /// Adds `usage` to the hour that starts at `hour`, for `instance_type` in `region`.
    pub fn add(&mut self, hour: DateTime<Utc>, region: &str, instance_type: &str, usage: Usage) {
        let at = self
            .hours_of(region, instance_type)
            .entry(hour.timestamp().div_euclid(HOUR))
            .or_default();
        at.running += usage.running;
        at.stopped += usage.stopped;
    }

    /// Adds `[from, to)` of one instance of `instance_type` in `region`, running or stopped.
    pub fn add_span(
        &mut self,
        region: &str,
        instance_type: &str,
        (from, to): (DateTime<Utc>, DateTime<Utc>),
        running: bool,
    ) {
        let hours = self.hours_of(region, instance_type);
        for (h, part) in money::hours_of(from, to) {
            let at = hours.entry(h).or_default();
            if running {
                at.running += part;
            } else {
                at.stopped += part;
            }
        }
    }

    /// The hours of `instance_type` in `region`, made when missing.
    fn hours_of(&mut self, region: &str, instance_type: &str) -> &mut BTreeMap<i64, Usage> {
        let key = (region.to_string(), instance_type.to_string());
        self.by_type.entry(key).or_default()
    }

    /// Every hour's use, by region and type: what the rollups store.
    pub fn rows(&self) -> impl Iterator<Item = (DateTime<Utc>, &str, &str, Usage)> + '_ {
        self.by_type.iter().flat_map(|((region, ty), hours)| {
            hours.iter().map(move |(h, usage)| {
                let start = DateTime::from_timestamp(h * HOUR, 0).unwrap_or_default();
                (start, region.as_str(), ty.as_str(), *usage)
            })
        })
    }

    /// What the commitments of `table` would have covered of each day's stopped hours, by
    /// region and type: every hour's running use takes them first, the stopped use the rest.
    pub fn covered_by_day(&self, table: &PriceTable) -> CoveredByDay {
        let mut out = CoveredByDay::default();
        if table.commitments.is_empty() {
            return out;
        }
        let mut by_hour: BTreeMap<i64, Vec<(&RegionType, Usage)>> = BTreeMap::new();
        for (key, hours) in &self.by_type {
            for (h, usage) in hours {
                by_hour.entry(*h).or_default().push((key, *usage));
            }
        }
        for (h, uses) in by_hour {
            let stopped: Vec<_> = uses.iter().filter(|(_, u)| u.stopped > 0.0).collect();
            if stopped.is_empty() {
                continue;
            }
            let running: Vec<HourUse> = uses
                .iter()
                .filter(|(_, u)| u.running > 0.0)
                .map(|(key, u)| use_of(key, u.running))
                .collect();
            let stopped_uses: Vec<HourUse> = stopped
                .iter()
                .map(|(key, u)| use_of(key, u.stopped))
                .collect();
            let day = DateTime::from_timestamp(h * HOUR, 0)
                .unwrap_or_default()
                .date_naive();
            let covered = money::cover_hour(table, &running, &stopped_uses);
            for ((key, usage), c) in stopped.iter().zip(covered) {
                let day = out.days.entry((day, (*key).clone())).or_default();
                day.covered.covered_usd += c.covered_usd;
                day.covered.unused_commitment_usd += c.unused_commitment_usd;
                day.stopped_hours += usage.stopped;
            }
        }
        out
    }
}

/// `hours` of `key`'s region and type, for [`money::cover_hour`].
fn use_of(key: &RegionType, hours: f64) -> HourUse<'_> {
    HourUse {
        region: &key.0,
        instance_type: &key.1,
        hours,
    }
}

/// One day's coverage of one region and type, and the stopped hours it is shared among.
#[derive(Debug, Clone, Copy, Default)]
struct DayCovered {
    covered: Covered,
    stopped_hours: f64,
}

/// What the commitments would have covered, by day, region and type
/// ([`HourlyTotals::covered_by_day`]).
#[derive(Debug, Clone, Default)]
pub struct CoveredByDay {
    days: BTreeMap<(NaiveDate, RegionType), DayCovered>,
}

impl CoveredByDay {
    /// The share of `hours` stopped hours of `instance_type` in `region` on `day`: its part
    /// of what that day's coverage of them came to. `None` when nothing was covered.
    fn share(
        &self,
        day: NaiveDate,
        region: &str,
        instance_type: &str,
        hours: f64,
    ) -> Option<Measures> {
        let key = (day, (region.to_string(), instance_type.to_string()));
        let d = self.days.get(&key)?;
        if d.stopped_hours <= 0.0 || d.covered == Covered::default() {
            return None;
        }
        let part = (hours / d.stopped_hours).min(1.0);
        Some(Measures {
            commitment_covered_usd: d.covered.covered_usd * part,
            unused_commitment_usd: d.covered.unused_commitment_usd * part,
            ..Measures::default()
        })
    }
}

/// A stopped stretch (by a stop that ended its charges) inside the window, kept for the
/// commitments once every hour's totals are known.
pub(super) struct Kept<'a> {
    /// From, to.
    pub(super) span: (DateTime<Utc>, DateTime<Utc>),
    /// The stop's policy.
    pub(super) policy: Option<&'a str>,
    /// The instance.
    pub(super) info: &'a InstanceInfo,
}

/// The hours a rolled day's row kept instances of `info`'s region and type stopped, by stops
/// that ended their charges, for `policy`.
pub(super) struct RolledStops<'a> {
    /// The day.
    pub(super) day: NaiveDate,
    /// The stops' policy.
    pub(super) policy: Option<&'a str>,
    /// The instances' region, type and tag.
    pub(super) info: &'a InstanceInfo,
    /// The hours.
    pub(super) hours: f64,
}

/// Adds to `tally` what the commitments of `prices` would have covered of the `kept` stretches
/// and the `rolled` days, shared among them: every hour's totals are those of the rolled days
/// (`totals`), what ran outside them (`running`) and the `kept` stretches. Nothing without
/// commitments.
pub(super) fn add_covered<'r>(
    prices: &PriceTable,
    mut totals: HourlyTotals,
    running: impl Iterator<Item = &'r RunningSpan>,
    kept: &[Kept],
    rolled: &[RolledStops],
    tally: &mut Tally,
) {
    if prices.commitments.is_empty() {
        return;
    }
    for r in running {
        totals.add_span(&r.region, &r.instance_type, (r.from, r.to), true);
    }
    for k in kept {
        totals.add_span(&k.info.region, &k.info.instance_type, k.span, false);
    }
    add_shares(&totals.covered_by_day(prices), kept, rolled, tally);
}

/// Adds to `tally` each stretch's and each rolled day's share of what the commitments would
/// have covered, by `covered`.
fn add_shares(covered: &CoveredByDay, kept: &[Kept], rolled: &[RolledStops], tally: &mut Tally) {
    for k in kept {
        let (region, ty) = (&k.info.region, &k.info.instance_type);
        for (day, h) in days_of(k.span) {
            if let Some(m) = covered.share(day, region, ty, h) {
                tally.add(day, k.policy, Some(k.info), m);
            }
        }
    }
    for r in rolled {
        let (region, ty) = (&r.info.region, &r.info.instance_type);
        if let Some(m) = covered.share(r.day, region, ty, r.hours) {
            tally.add(r.day, r.policy, Some(r.info), m);
        }
    }
}

/// The UTC days `[from, to)` touches, with its hours in each.
fn days_of((from, to): (DateTime<Utc>, DateTime<Utc>)) -> impl Iterator<Item = (NaiveDate, f64)> {
    let mut at = from;
    std::iter::from_fn(move || {
        if at >= to {
            return None;
        }
        let day = at.date_naive();
        let next = day.succ_opt().and_then(|d| d.and_hms_opt(0, 0, 0));
        let end = next.map_or(to, |d| d.and_utc()).min(to);
        let piece = (day, hours(end - at));
        at = end;
        Some(piece)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fleet::money::{
        CommitmentRates, HeldCommitments, ReservedInstances, Term, TermRates,
    };

    const R: &str = "us-east-1";

    fn t(s: &str) -> DateTime<Utc> {
        s.parse().unwrap()
    }

    /// g.a at $10/h on demand, $6/h under a one-year reservation, of which `count` are held.
    fn table(count: u32) -> PriceTable {
        PriceTable {
            prices: [(R.to_string(), [("g.a".to_string(), 10.0)].into())].into(),
            reserved: Some(CommitmentRates {
                source: "test".into(),
                as_of: "today".into(),
                rates: [(
                    R.to_string(),
                    [(
                        "g.a".to_string(),
                        TermRates {
                            one_year: Some(6.0),
                            three_years: None,
                        },
                    )]
                    .into(),
                )]
                .into(),
            }),
            commitments: HeldCommitments {
                reserved_instances: vec![ReservedInstances {
                    instance_type: "g.a".into(),
                    region: R.into(),
                    count,
                    term: Term::OneYear,
                }],
                savings_plans: vec![],
            },
            ..PriceTable::default()
        }
    }

    #[test]
    fn a_day_s_coverage_is_shared_by_stopped_hours_not_by_who_stopped_first() {
        // One g.a reservation; box A stopped 00:00–12:00, box B 06:00–12:00, nothing running.
        // 00–06 the reservation covers A alone ($60 covered, $36 unused); 06–12 it covers one
        // of the two boxes each hour ($60, $36). The day's $120 covered is shared 12 : 6.
        let mut totals = HourlyTotals::default();
        let a = (t("2026-11-30T00:00:00Z"), t("2026-11-30T12:00:00Z"));
        let b = (t("2026-11-30T06:00:00Z"), t("2026-11-30T12:00:00Z"));
        totals.add_span(R, "g.a", a, false);
        totals.add_span(R, "g.a", b, false);
        let covered = totals.covered_by_day(&table(1));
        let day = a.0.date_naive();
        let share_a = covered.share(day, R, "g.a", 12.0).unwrap();
        let share_b = covered.share(day, R, "g.a", 6.0).unwrap();
        assert_eq!(share_a.commitment_covered_usd, 80.0);
        assert_eq!(share_b.commitment_covered_usd, 40.0);
        assert_eq!(
            share_a.unused_commitment_usd + share_b.unused_commitment_usd,
            72.0
        );
        // Another day, or with no reservation held, nothing is covered.
        assert!(covered
            .share(day.succ_opt().unwrap(), R, "g.a", 1.0)
            .is_none());
        assert!(totals
            .covered_by_day(&table(0))
            .share(day, R, "g.a", 12.0)
            .is_none());
    }

    #[test]
    fn what_runs_in_an_hour_takes_the_commitment_before_what_was_stopped() {
        // Two reservations; three g.a boxes run all hour 01, one is stopped then: the running
        // boxes use both, the stop saves in full. In hour 02 one box runs, one reservation is
        // left for the stopped one.
        let mut totals = HourlyTotals::default();
        for (hour, running) in [("2026-11-30T01:00:00Z", 3.0), ("2026-11-30T02:00:00Z", 1.0)] {
            let usage = Usage {
                running,
                stopped: 1.0,
            };
            totals.add(t(hour), R, "g.a", usage);
        }
        let covered = totals.covered_by_day(&table(2));
        let m = covered
            .share(t("2026-11-30T00:00:00Z").date_naive(), R, "g.a", 2.0)
            .unwrap();
        assert_eq!(m.commitment_covered_usd, 10.0);
        assert_eq!(m.unused_commitment_usd, 6.0);
    }

    #[test]
    fn spans_are_cut_at_hours_and_rows_give_them_back() {
        let mut totals = HourlyTotals::default();
        let span = (t("2026-11-30T23:30:00Z"), t("2026-12-01T01:15:00Z"));
        totals.add_span(R, "g.a", span, true);
        let rows: Vec<_> = totals.rows().map(|(at, _, _, u)| (at, u.running)).collect();
        assert_eq!(
            rows,
            vec![
                (t("2026-11-30T23:00:00Z"), 0.5),
                (t("2026-12-01T00:00:00Z"), 1.0),
                (t("2026-12-01T01:00:00Z"), 0.25),
            ]
        );
        let days: Vec<_> = days_of(span).collect();
        assert_eq!(
            days,
            vec![(span.0.date_naive(), 0.5), (span.1.date_naive(), 1.25),]
        );
    }
}
