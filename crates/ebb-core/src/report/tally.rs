//! The sums of a report: measures added up by group and by day. A span of time adds to the
//! groups at once and to the days as its first and last days' parts and one run of whole days
//! between, summed day by day only once, in [`finish`]: the work of a report grows with what
//! happened and the days of its window, never with the days each stretch lasted.

use super::{
    hours, DayMeasures, InstanceInfo, Measures, PolicyMeasures, Report, TagMeasures, Window,
    NO_POLICY, UNTAGGED,
};
use chrono::{DateTime, Duration, NaiveDate, Utc};
use std::collections::BTreeMap;

/// Measures added up by group.
pub(super) struct Tally<'a> {
    pub(super) by: Option<&'a str>,
    total: Measures,
    policies: BTreeMap<String, Measures>,
    tags: BTreeMap<Option<String>, Measures>,
    days: BTreeMap<NaiveDate, DayMeasures>,
    /// The whole days of spans, as changes to what each day gets from that day on: a run of
    /// days adds its share on its first day and takes it away the day after its last. `finish`
    /// sums them, so a stretch of a year costs two entries, not one a day.
    steps: BTreeMap<NaiveDate, Vec<(Step, Share)>>,
}

/// Whether a [`Share`] starts or ends on a day of the `steps`.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Step {
    Starts,
    Ends,
}

/// Measures of one group: its policy's name and its value of the `by` tag (`None` without
/// `by`; `Some(None)` for an instance without the tag).
struct Share {
    policy: String,
    tag: Option<Option<String>>,
    measures: Measures,
}

impl<'a> Tally<'a> {
    /// Nothing yet, grouped by the tag `by` too when given.
    pub(super) fn new(by: Option<&'a str>) -> Tally<'a> {
        Tally {
            by,
            total: Measures::default(),
            policies: BTreeMap::new(),
            tags: BTreeMap::new(),
            days: BTreeMap::new(),
            steps: BTreeMap::new(),
        }
    }

    /// `m` as a share of the group of `policy` and the instance `info`.
    fn share(&self, policy: Option<&str>, info: Option<&InstanceInfo>, m: Measures) -> Share {
        Share {
            policy: policy.unwrap_or(NO_POLICY).to_string(),
            tag: self
                .by
                .map(|key| info.and_then(|i| i.tags.get(key)).cloned()),
            measures: m,
        }
    }

    /// Adds `m`, which happened on `day`, to the total and to its policy's, tag's and day's.
    pub(super) fn add(
        &mut self,
        day: NaiveDate,
        policy: Option<&str>,
        info: Option<&InstanceInfo>,
        m: Measures,
    ) {
        let share = self.share(policy, info, m);
        self.add_to_groups(&share);
        self.add_to_day(day, &share);
    }

    /// Adds `share` to the total and to its policy's and tag's.
    fn add_to_groups(&mut self, share: &Share) {
        self.total.add(&share.measures);
        self.policies
            .entry(share.policy.clone())
            .or_default()
            .add(&share.measures);
        if let Some(value) = &share.tag {
            self.tags
                .entry(value.clone())
                .or_default()
                .add(&share.measures);
        }
    }

    /// Adds `share` to `day`'s figures.
    fn add_to_day(&mut self, day: NaiveDate, share: &Share) {
        self.days
            .entry(day)
            .or_insert_with(|| empty_day(day))
            .add(share, 1.0);
    }

    /// Adds what `[from, to)` (inside the window) contributes: `per_hour` makes measures from
    /// hours (in proportion). The groups get the whole span at once; the days get the parts of
    /// the first and last days, and the whole days between as one run of [`Tally::steps`].
    pub(super) fn add_span(
        &mut self,
        (from, to): (DateTime<Utc>, DateTime<Utc>),
        policy: Option<&str>,
        info: Option<&InstanceInfo>,
        per_hour: impl Fn(f64) -> Measures,
    ) {
        let whole = self.share(policy, info, per_hour(hours(to - from)));
        self.add_to_groups(&whole);
        let first_whole = if from == midnight(from.date_naive()) {
            from
        } else {
            from.date_naive().succ_opt().map_or(to, midnight)
        };
        let head_end = first_whole.min(to);
        if head_end > from {
            let head = self.share(policy, info, per_hour(hours(head_end - from)));
            self.add_to_day(from.date_naive(), &head);
        }
        let last_whole_end = midnight(to.date_naive());
        if first_whole < last_whole_end {
            let steps = [
                (first_whole.date_naive(), Step::Starts),
                (last_whole_end.date_naive(), Step::Ends),
            ];
            for (day, step) in steps {
                let day_share = self.share(policy, info, per_hour(24.0));
                self.steps.entry(day).or_default().push((step, day_share));
            }
        }
        let tail_start = last_whole_end.max(head_end);
        if to > tail_start {
            let tail = self.share(policy, info, per_hour(hours(to - tail_start)));
            self.add_to_day(tail_start.date_naive(), &tail);
        }
    }
}

/// The start of `day`, in UTC.
fn midnight(day: NaiveDate) -> DateTime<Utc> {
    day.and_time(chrono::NaiveTime::MIN).and_utc()
}

/// A day with nothing in it yet.
fn empty_day(day: NaiveDate) -> DayMeasures {
    DayMeasures {
        day,
        measures: Measures::default(),
        saved_by_policy: BTreeMap::new(),
        saved_by_tag: BTreeMap::new(),
    }
}

impl Measures {
    /// Takes away `o`, which was added before.
    fn remove(&mut self, o: &Measures) {
        for (v, by) in [
            (&mut self.saved_usd, o.saved_usd),
            (&mut self.commitment_covered_usd, o.commitment_covered_usd),
            (&mut self.unused_commitment_usd, o.unused_commitment_usd),
            (&mut self.stopped_box_cost_usd, o.stopped_box_cost_usd),
            (&mut self.unknown_box_cost_hours, o.unknown_box_cost_hours),
            (&mut self.stopped_saved_usd, o.stopped_saved_usd),
            (&mut self.spot_saved_usd, o.spot_saved_usd),
            (&mut self.stopped_hours, o.stopped_hours),
            (&mut self.unpriced_stopped_hours, o.unpriced_stopped_hours),
            (&mut self.charging_stopped_hours, o.charging_stopped_hours),
            (&mut self.spot_hours, o.spot_hours),
            (&mut self.override_hours, o.override_hours),
            (&mut self.group_saved_usd, o.group_saved_usd),
            (&mut self.group_hours, o.group_hours),
            (&mut self.reservation_hours, o.reservation_hours),
            (&mut self.reservation_cost_usd, o.reservation_cost_usd),
            (&mut self.reserved_covered_usd, o.reserved_covered_usd),
            (&mut self.reclaimed_hours, o.reclaimed_hours),
            (&mut self.reclaim_saved_usd, o.reclaim_saved_usd),
            (&mut self.image_hours, o.image_hours),
            (&mut self.image_storage_usd, o.image_storage_usd),
            (&mut self.unpriced_reclaim_hours, o.unpriced_reclaim_hours),
        ] {
            *v -= by;
            if v.abs() < RESIDUE {
                *v = 0.0;
            }
        }
        for (v, by) in [
            (&mut self.stops, o.stops),
            (&mut self.hibernations, o.hibernations),
            (&mut self.spot_moves, o.spot_moves),
            (&mut self.overrides, o.overrides),
            (&mut self.people_starts, o.people_starts),
            (&mut self.group_scale_downs, o.group_scale_downs),
        ] {
            *v = v.saturating_sub(by);
        }
    }
}

impl DayMeasures {
    /// Adds `share` (`sign` 1) or takes it away (`sign` -1, only what was added before).
    fn add(&mut self, share: &Share, sign: f64) {
        let m = &share.measures;
        if sign > 0.0 {
            self.measures.add(m);
        } else {
            self.measures.remove(m);
        }
        if m.saved_usd != 0.0 {
            add_to(&mut self.saved_by_policy, &share.policy, sign * m.saved_usd);
            if let Some(value) = &share.tag {
                let name = value.as_deref().unwrap_or(UNTAGGED);
                add_to(&mut self.saved_by_tag, name, sign * m.saved_usd);
            }
        }
    }
}

/// Adds `v` to `map[name]`; an entry that comes back to zero (a run that ended) goes.
fn add_to(map: &mut BTreeMap<String, f64>, name: &str, v: f64) {
    let entry = map.entry(name.to_string()).or_default();
    *entry += v;
    if entry.abs() < RESIDUE {
        map.remove(name);
    }
}

/// Below this, a sum that came back down is zero: what floating point leaves of a run that
/// was added and taken away again.
const RESIDUE: f64 = 1e-9;

/// Every day of the window (with the runs of whole days summed in), the groups in order,
/// figures rounded.
pub(super) fn finish(mut tally: Tally, window: Window) -> Report {
    if window.until > window.since {
        let last = (window.until - Duration::milliseconds(1)).date_naive();
        let mut day = window.since.date_naive();
        // What the runs of whole days give each day, as it changes from day to day.
        let mut running = empty_day(day);
        while day <= last {
            for (step, share) in tally.steps.remove(&day).unwrap_or_default() {
                running.add(&share, if step == Step::Starts { 1.0 } else { -1.0 });
            }
            let d = tally.days.entry(day).or_insert_with(|| empty_day(day));
            d.measures.add(&running.measures);
            for (name, v) in &running.saved_by_policy {
                *d.saved_by_policy.entry(name.clone()).or_default() += v;
            }
            for (name, v) in &running.saved_by_tag {
                *d.saved_by_tag.entry(name.clone()).or_default() += v;
            }
            match day.succ_opt() {
                Some(next) => day = next,
                None => break,
            }
        }
    }
    let round_map = |m: &mut BTreeMap<String, f64>| {
        m.values_mut()
            .for_each(|v| *v = (*v * 100.0).round() / 100.0)
    };
    tally.total.round();
    let policies = tally
        .policies
        .into_iter()
        .map(|(policy, mut measures)| {
            measures.round();
            PolicyMeasures { policy, measures }
        })
        .collect();
    // Untagged (None) sorts first in the map; it goes last.
    let mut tags: Vec<TagMeasures> = tally
        .tags
        .into_iter()
        .map(|(value, mut measures)| {
            measures.round();
            TagMeasures { value, measures }
        })
        .collect();
    tags.sort_by_key(|t| t.value.is_none());
    let days = tally
        .days
        .into_values()
        .map(|mut d| {
            d.measures.round();
            round_map(&mut d.saved_by_policy);
            round_map(&mut d.saved_by_tag);
            d
        })
        .collect();
    Report {
        since: window.since,
        until: window.until,
        by: tally.by.map(str::to_string),
        total: tally.total,
        policies,
        tags,
        days,
        groups: Vec::new(),
        tag_keys: Vec::new(),
        other_currencies: Vec::new(),
        uncounted_days: Vec::new(),
    }
}
