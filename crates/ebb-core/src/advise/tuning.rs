//! Policy tuning: a small search over each policy's idle rule (`gpu_below`, `for`) and work
//! hours (the opening and closing times, from the hours its instances were busy in its zone).
//! Each candidate changes one key; the advisor replays it on the instances its policy governs.

use super::{monthly, Period};
use crate::policy::{PolicySet, WorkHours};
use crate::replay::{Span, Tally};
use crate::schedule::{Hours, TimeOfDay};
use chrono::{Duration, NaiveDate};
use chrono_tz::Tz;
use std::collections::{BTreeMap, HashMap};

/// Candidate times are on this grid, in minutes.
const GRID_MIN: u32 = 30;

/// The share of busy days whose first busy minute falls before a later opening (and whose last
/// falls after an earlier close) that a candidate may leave out: the replay then says what
/// they cost in unserved demand.
const OUTLIER_PCT: f64 = 10.0;

/// When the instances of each policy with work hours were busy, in its zone: each busy day's
/// first and last busy minute (local minutes since midnight, 0 to 1440).
#[derive(Debug, Clone, Default)]
pub struct BusyHours {
    /// Policy name → (first busy minute, end of the last) of each instance's busy days.
    days: BTreeMap<String, Vec<(u16, u16)>>,
}

impl BusyHours {
    /// Adds the busy `spans` of an instance that `policy` governs with work hours in `zone`.
    pub fn add(&mut self, policy: &str, zone: Tz, spans: &[Span]) {
        let mut by_day: HashMap<NaiveDate, (u16, u16)> = HashMap::new();
        let mut mark = |day: NaiveDate, a: u16, b: u16| {
            let e = by_day.entry(day).or_insert((a, b));
            *e = (e.0.min(a), e.1.max(b));
        };
        let minute = |t: chrono::NaiveDateTime| {
            use chrono::Timelike;
            (t.hour() * 60 + t.minute()) as u16
        };
        for (a, b) in spans {
            let (a, b) = (
                a.with_timezone(&zone).naive_local(),
                b.with_timezone(&zone).naive_local(),
            );
            let (da, db) = (a.date(), b.date());
            if da == db {
                mark(da, minute(a), minute(b).max(minute(a)));
                continue;
            }
            mark(da, minute(a), 1440);
            let mut d = da.succ_opt();
            while let Some(day) = d.filter(|d| *d < db) {
                mark(day, 0, 1440);
                d = day.succ_opt();
            }
            if minute(b) > 0 {
                mark(db, 0, minute(b));
            }
        }
        self.days
            .entry(policy.to_string())
            .or_default()
            .extend(by_day.into_values());
    }

    /// Adds what `other` found.
    pub fn merge(&mut self, other: BusyHours) {
        for (policy, days) in other.days {
            self.days.entry(policy).or_default().extend(days);
        }
    }

    /// The latest opening and the earliest closing the busy days allow (on the grid), when any
    /// instance of `policy` was busy.
    fn bounds(&self, policy: &str) -> Option<(u32, u32)> {
        let days = self.days.get(policy).filter(|d| !d.is_empty())?;
        let mut firsts: Vec<u16> = days.iter().map(|d| d.0).collect();
        let mut lasts: Vec<u16> = days.iter().map(|d| d.1).collect();
        firsts.sort_unstable();
        lasts.sort_unstable();
        let at = |v: &[u16], pct: f64| {
            let i = ((pct / 100.0) * (v.len() - 1) as f64).round() as usize;
            u32::from(v[i])
        };
        let open = at(&firsts, OUTLIER_PCT) / GRID_MIN * GRID_MIN;
        let close = at(&lasts, 100.0 - OUTLIER_PCT).div_ceil(GRID_MIN) * GRID_MIN;
        Some((open, close.min(1440)))
    }
}

/// One change to try: a policy set with one key of one policy changed.
#[derive(Debug, Clone)]
pub struct Candidate {
    /// The policy changed.
    pub policy: String,
    /// The key, as a path (`idle.for`, `work_hours.periods[0].stop`).
    pub key: String,
    /// Its value now, as written in YAML.
    pub from: String,
    /// The value tried.
    pub to: String,
    /// The policies with the change.
    pub set: PolicySet,
}

/// A duration as policies write it (`45m`, `1h`, `1h30m`).
pub fn duration_text(d: Duration) -> String {
    let m = d.num_minutes();
    match (m / 60, m % 60) {
        (0, m) => format!("{m}m"),
        (h, 0) => format!("{h}h"),
        (h, m) => format!("{h}h{m}m"),
    }
}

fn time_text(minutes: u32) -> String {
    format!("{:02}:{:02}", minutes / 60, minutes % 60)
}

fn time_of_day(minutes: u32) -> Option<TimeOfDay> {
    time_text(minutes).parse().ok()
}

/// A threshold as policies write it: no trailing zeros.
fn percent_text(p: f64) -> String {
    let text = format!("{p:.2}");
    text.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// The periods of `wh`, when its hours are weekly periods.
fn periods(wh: &mut WorkHours) -> Option<&mut Vec<crate::schedule::Period>> {
    match &mut wh.schedule.hours {
        Hours::Periods(p) => Some(p),
        Hours::Cron { .. } => None,
    }
}

/// The changes worth replaying for each policy with an idle rule or work hours: only ones that
/// could cut cost (a higher `gpu_below`, a shorter `for`, a later opening, an earlier close).
pub fn candidates(set: &PolicySet, busy: &BusyHours) -> Vec<Candidate> {
    let mut out = Vec::new();
    for (i, policy) in set.policies.iter().enumerate() {
        let mut change = |key: String, from: String, to: String, edit: &dyn Fn(&mut PolicySet)| {
            let mut changed = set.clone();
            edit(&mut changed);
            out.push(Candidate {
                policy: policy.name.clone(),
                key,
                from,
                to,
                set: changed,
            });
        };
        if let Some(idle) = &policy.idle {
            let below = idle.gpu_below;
            let mut higher = vec![below + 5.0, below * 2.0];
            higher.retain(|b| *b <= 50.0);
            higher.dedup();
            for b in higher {
                change(
                    "idle.gpu_below".into(),
                    percent_text(below),
                    percent_text(b),
                    &|s| {
                        if let Some(idle) = s.policies[i].idle.as_mut() {
                            idle.gpu_below = b;
                        }
                    },
                );
            }
            let window = idle.window.num_minutes();
            let mut shorter: Vec<i64> = [window * 3 / 4, window / 2]
                .into_iter()
                .map(|m| m / 5 * 5)
                .filter(|m| *m >= 10 && *m < window)
                .collect();
            shorter.dedup();
            for m in shorter {
                change(
                    "idle.for".into(),
                    duration_text(idle.window),
                    duration_text(Duration::minutes(m)),
                    &|s| {
                        if let Some(idle) = s.policies[i].idle.as_mut() {
                            idle.window = Duration::minutes(m);
                        }
                    },
                );
            }
        }
        let Some(mut wh) = policy.work_hours.clone() else {
            continue;
        };
        let Some((open, close)) = busy.bounds(&policy.name) else {
            continue;
        };
        let Some(list) = periods(&mut wh) else {
            continue;
        };
        for (p, period) in list.iter().enumerate() {
            let (start, stop) = (period.start.minutes(), period.stop.minutes());
            // Overnight windows are left alone: their busy days span two dates.
            if stop <= start {
                continue;
            }
            let mut hours = |which: &'static str, now: u32, to: u32| {
                let Some(time) = time_of_day(to) else { return };
                change(
                    format!("work_hours.periods[{p}].{which}"),
                    time_text(now),
                    time_text(to),
                    &|s| {
                        let wh = s.policies[i].work_hours.as_mut();
                        if let Some(period) = wh.and_then(periods).and_then(|l| l.get_mut(p)) {
                            match which {
                                "start" => period.start = time,
                                _ => period.stop = time,
                            }
                        }
                    },
                );
            };
            if open > start && open < stop {
                hours("start", start, open);
            }
            if close < stop && close > start {
                hours("stop", stop, close);
            }
        }
    }
    out
}

/// A candidate's replay against the current policies', on the instances its policy governs.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Compared {
    /// The currency the instances are billed in; `None` before the first.
    pub currency: Option<&'static str>,
    /// Whether they are billed in more than one: their costs cannot be summed, so no change
    /// of their policy is advised.
    pub mixed: bool,
    /// Under the current policies.
    pub current: Tally,
    /// With the change.
    pub changed: Tally,
}

impl Compared {
    /// Adds one instance billed in `currency`: its tally now and with the change.
    pub fn add(&mut self, currency: &'static str, current: Tally, changed: Tally) {
        self.billed_in(currency);
        self.current += current;
        self.changed += changed;
    }

    /// Adds what another worker compared of the same candidate.
    pub fn merge(&mut self, other: Compared) {
        if let Some(currency) = other.currency {
            self.billed_in(currency);
        }
        self.mixed |= other.mixed;
        self.current += other.current;
        self.changed += other.changed;
    }

    fn billed_in(&mut self, currency: &'static str) {
        match self.currency {
            None => self.currency = Some(currency),
            Some(c) if c != currency => self.mixed = true,
            Some(_) => {}
        }
    }
}

/// A change advised.
#[derive(Debug, Clone, PartialEq)]
pub struct PolicyChange {
    /// The policy.
    pub policy: String,
    /// The key changed.
    pub key: String,
    /// Its value now.
    pub from: String,
    /// The value advised.
    pub to: String,
    /// What it saves in a month (730 hours), in `currency`.
    pub monthly_savings: f64,
    /// The currency the policy's instances are billed in.
    pub currency: &'static str,
    /// Hours of demand the change leaves unserved over the period.
    pub unserved_busy_hours: f64,
    /// The same under the current policy.
    pub current_unserved_busy_hours: f64,
    /// Stops followed by demand within 30 minutes, with the change.
    pub wrongful_stops: u64,
    /// The same under the current policy.
    pub current_wrongful_stops: u64,
    /// The change as a diff of the policy's YAML.
    pub yaml_diff: String,
}

/// The changes that cut cost with no more unserved demand than the current policy (or than
/// `max_unserved`, when that is more) and no more wrongful stops: the cheapest for each policy
/// and key.
pub fn keep(
    candidates: &[Candidate],
    compared: &[Compared],
    max_unserved: Option<Duration>,
    period: &Period,
) -> Vec<PolicyChange> {
    let mut best: BTreeMap<(String, String), PolicyChange> = BTreeMap::new();
    for (c, r) in candidates.iter().zip(compared) {
        let budget = max_unserved.map_or(0, |d| d.num_seconds());
        let saved = r.current.cost - r.changed.cost;
        let serves = r.changed.unserved_busy_s <= r.current.unserved_busy_s.max(budget);
        if r.mixed
            || saved <= 0.005
            || !serves
            || r.changed.wrongful_stops > r.current.wrongful_stops
        {
            continue;
        }
        let change = PolicyChange {
            policy: c.policy.clone(),
            key: c.key.clone(),
            from: c.from.clone(),
            to: c.to.clone(),
            monthly_savings: monthly(saved, period),
            currency: r.currency.unwrap_or("USD"),
            unserved_busy_hours: r.changed.unserved_busy_s as f64 / 3600.0,
            current_unserved_busy_hours: r.current.unserved_busy_s as f64 / 3600.0,
            wrongful_stops: r.changed.wrongful_stops,
            current_wrongful_stops: r.current.wrongful_stops,
            yaml_diff: diff(&c.policy, &c.key, &c.from, &c.to),
        };
        let slot = best.entry((c.policy.clone(), c.key.clone()));
        match slot {
            std::collections::btree_map::Entry::Occupied(mut o) => {
                if change.monthly_savings > o.get().monthly_savings {
                    o.insert(change);
                }
            }
            std::collections::btree_map::Entry::Vacant(v) => {
                v.insert(change);
            }
        }
    }
    let mut kept: Vec<PolicyChange> = best.into_values().collect();
    // By currency first: a saving in yuan is not ranked against one in dollars.
    kept.sort_by(|a, b| {
        (a.currency != "USD", a.currency)
            .cmp(&(b.currency != "USD", b.currency))
            .then_with(|| b.monthly_savings.total_cmp(&a.monthly_savings))
    });
    kept
}

/// The change of `key` in `policy` as lines of its YAML: the policy's name, the key's path,
/// the old line and the new.
fn diff(policy: &str, key: &str, from: &str, to: &str) -> String {
    let (path, leaf) = key.rsplit_once('.').unwrap_or(("", key));
    let mut out = format!("   - name: {policy}\n");
    let mut indent = String::from("     ");
    for part in path.split('.').filter(|p| !p.is_empty()) {
        match part.split_once('[') {
            Some((name, index)) => {
                out.push_str(&format!(
                    "{indent}{name}:   # item {}\n",
                    index.trim_end_matches(']')
                ));
            }
            None => out.push_str(&format!("{indent}{part}:\n")),
        }
        indent.push_str("  ");
    }
    let quote = |v: &str| match v.contains(':') {
        true => format!("\"{v}\""),
        false => v.to_string(),
    };
    out.push_str(&format!("-{}{leaf}: {}\n", &indent[1..], quote(from)));
    out.push_str(&format!("+{}{leaf}: {}\n", &indent[1..], quote(to)));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: &str) -> chrono::DateTime<chrono::Utc> {
        crate::when::parse_time(s).unwrap()
    }

    #[test]
    fn busy_days_give_the_latest_opening_and_the_earliest_close_on_the_half_hour() {
        let mut busy = BusyHours::default();
        // Ten days busy 09:10-18:20 in Berlin (UTC+1 in December), one of them also until 23:00.
        for day in 1..=10 {
            let d = format!("2026-12-{day:02}");
            let mut spans = vec![(at(&format!("{d}T08:10:00Z")), at(&format!("{d}T17:20:00Z")))];
            if day == 3 {
                spans.push((at(&format!("{d}T21:00:00Z")), at(&format!("{d}T22:00:00Z"))));
            }
            busy.add("office", chrono_tz::Europe::Berlin, &spans);
        }
        // The late evening is one day in ten: left to the replay to price.
        assert_eq!(busy.bounds("office"), Some((9 * 60, 18 * 60 + 30)));
        assert_eq!(busy.bounds("other"), None);
        // A span over midnight makes both days whole-day busy at their ends.
        let mut night = BusyHours::default();
        night.add(
            "n",
            chrono_tz::UTC,
            &[(at("2026-12-01T22:00:00Z"), at("2026-12-02T02:00:00Z"))],
        );
        assert_eq!(night.bounds("n"), Some((0, 1440)));
    }

    fn candidate(key: &str) -> Candidate {
        Candidate {
            policy: "office".into(),
            key: key.into(),
            from: "a".into(),
            to: "b".into(),
            set: PolicySet {
                policies: Vec::new(),
                budgets: Vec::new(),
                calendars: BTreeMap::new(),
                calendar_files: Vec::new(),
                version: crate::policy::PolicyVersion {
                    content_hash: String::new(),
                    git_commit: None,
                },
            },
        }
    }

    fn tally(cost: f64, unserved_h: f64, wrongful_stops: u64) -> Tally {
        Tally {
            cost,
            unserved_busy_s: (unserved_h * 3600.0) as i64,
            wrongful_stops,
            ..Tally::default()
        }
    }

    #[test]
    fn a_change_is_kept_only_when_it_costs_less_and_serves_as_much() {
        let period = Period {
            from: at("2026-11-30T00:00:00Z"),
            to: at("2026-12-07T00:00:00Z"),
        };
        let now = tally(100.0, 0.5, 1);
        let candidates = [
            candidate("idle.for"),
            candidate("idle.gpu_below"),
            candidate("work_hours.periods[0].stop"),
        ];
        let compared = [
            // $10 less, but an hour unserved against half an hour now.
            Compared {
                current: now,
                changed: tally(90.0, 1.0, 1),
                ..Compared::default()
            },
            // $20 less, one more wrongful stop.
            Compared {
                current: now,
                changed: tally(80.0, 0.5, 2),
                ..Compared::default()
            },
            // Dearer.
            Compared {
                current: now,
                changed: tally(101.0, 0.0, 0),
                ..Compared::default()
            },
        ];
        assert!(keep(&candidates, &compared, None, &period).is_empty());
        // A budget of two unserved hours lets the first through, and only it.
        let kept = keep(&candidates, &compared, Some(Duration::hours(2)), &period);
        assert_eq!(kept.len(), 1, "{kept:?}");
        assert_eq!(kept[0].key, "idle.for");
        // $10 over 168 hours is 10 × 730 / 168 a month.
        assert!((kept[0].monthly_savings - 10.0 * 730.0 / 168.0).abs() < 1e-9);
        assert_eq!(kept[0].unserved_busy_hours, 1.0);
        assert_eq!(kept[0].currency, "USD");
    }

    #[test]
    fn a_change_is_in_its_boxes_currency_and_none_is_advised_over_two() {
        let period = Period {
            from: at("2026-11-30T00:00:00Z"),
            to: at("2026-12-07T00:00:00Z"),
        };
        let candidates = [candidate("idle.for")];
        let mut yuan = Compared::default();
        yuan.add("CNY", tally(100.0, 0.0, 0), tally(50.0, 0.0, 0));
        let kept = keep(&candidates, &[yuan], None, &period);
        assert_eq!(kept[0].currency, "CNY");
        // A box in dollars beside it: the sums would add yuan to dollars, so nothing is kept,
        // whichever worker saw it.
        let mut dollars = Compared::default();
        dollars.add("USD", tally(10.0, 0.0, 0), tally(5.0, 0.0, 0));
        let mut both = yuan;
        both.merge(dollars);
        assert!(both.mixed);
        assert!(keep(&candidates, &[both], None, &period).is_empty());
        let mut one = yuan;
        one.add("USD", tally(10.0, 0.0, 0), tally(5.0, 0.0, 0));
        assert!(one.mixed);
    }

    #[test]
    fn durations_and_the_diff_read_as_policies_write_them() {
        assert_eq!(duration_text(Duration::minutes(45)), "45m");
        assert_eq!(duration_text(Duration::minutes(120)), "2h");
        assert_eq!(duration_text(Duration::minutes(90)), "1h30m");
        assert_eq!(percent_text(10.0), "10");
        assert_eq!(percent_text(7.5), "7.5");
        assert_eq!(
            diff("office", "work_hours.periods[0].stop", "20:00", "18:30"),
            "   - name: office\n     work_hours:\n       periods:   # item 0\n-        stop: \"20:00\"\n+        stop: \"18:30\"\n"
        );
    }
}
