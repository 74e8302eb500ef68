//! Work hours written as cron events: hours open when a start expression fires and close when
//! a stop expression fires.
//!
//! Expressions are standard five-field cron (minute hour day-of-month month day-of-week) on
//! local wall-clock time. This module parses them itself, so that day-of-week numbers follow
//! standard cron (0 and 7 are Sunday) and errors name the field, and hands the `cron` crate
//! explicit lists. The crate is run on UTC as a stand-in for naive wall-clock time (UTC has no
//! DST, so it yields every wall time, gap times included); [`zone::resolve`] then decides the
//! instants.

use super::{zone, Schedule, ScheduleStatus};
use chrono::{DateTime, NaiveDateTime, TimeDelta, Utc};
use std::collections::BTreeSet;
use std::fmt;
use std::iter::Peekable;
use std::str::FromStr;

/// How far past the local time of `now` a wall time can be and still happen before `now`:
/// after the clocks go back, the repeated hour's later wall times happened in its first
/// occurrence. Two days is more than any zone has ever gone back.
const WALL_MARGIN_DAYS: i64 = 2;

/// What one cron field accepts.
struct FieldSpec {
    /// The field's name in messages.
    name: &'static str,
    /// The smallest value.
    min: u32,
    /// The largest value.
    max: u32,
    /// Names for values, lowercase, the first one standing for `min`.
    names: &'static [&'static str],
    /// Whether the field is the day of week, where 7 is Sunday again.
    weekdays: bool,
}

const MINUTE: FieldSpec = FieldSpec {
    name: "minute",
    min: 0,
    max: 59,
    names: &[],
    weekdays: false,
};
const HOUR: FieldSpec = FieldSpec {
    name: "hour",
    min: 0,
    max: 23,
    names: &[],
    weekdays: false,
};
const DAY_OF_MONTH: FieldSpec = FieldSpec {
    name: "day-of-month",
    min: 1,
    max: 31,
    names: &[],
    weekdays: false,
};
const MONTH: FieldSpec = FieldSpec {
    name: "month",
    min: 1,
    max: 12,
    names: &[
        "jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec",
    ],
    weekdays: false,
};
/// Standard cron numbering: 0 and 7 are both Sunday.
const DAY_OF_WEEK: FieldSpec = FieldSpec {
    name: "day-of-week",
    min: 0,
    max: 7,
    names: &["sun", "mon", "tue", "wed", "thu", "fri", "sat"],
    weekdays: true,
};

/// Day names as the `cron` crate reads them, indexed by standard cron number modulo 7; names
/// avoid the crate's own numbering (1 = Sunday).
const CRATE_DAY_NAMES: [&str; 7] = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"];

impl FieldSpec {
    /// The values of one field, or why the text is not valid for it.
    fn parse(&self, text: &str) -> Result<BTreeSet<u32>, String> {
        let mut values = BTreeSet::new();
        for item in text.split(',') {
            if item.is_empty() {
                return Err("empty item in list (expected values separated by commas)".into());
            }
            let (range, step) = match item.split_once('/') {
                Some((range, step)) => (range, Some(self.step(step)?)),
                None => (item, None),
            };
            let (first, last) = if range == "*" {
                (self.min, self.max)
            } else if let Some((first, last)) = range.split_once('-') {
                let first = self.value(first)?;
                let mut last = self.value(last)?;
                // `fri-sun` ends on Sunday as 7, not 0, so it does not run backwards.
                if self.weekdays && last == 0 && first > 0 {
                    last = 7;
                }
                if first > last {
                    return Err(format!(
                        "range {range} runs backwards (expected the start before the end)"
                    ));
                }
                (first, last)
            } else {
                let first = self.value(range)?;
                // A single value with a step (`5/15`) runs to the end of the field.
                (first, if step.is_some() { self.max } else { first })
            };
            values.extend((first..=last).step_by(step.unwrap_or(1)));
        }
        Ok(values)
    }

    /// One value, by number or name.
    fn value(&self, text: &str) -> Result<u32, String> {
        let lower = text.to_ascii_lowercase();
        if let Some(index) = self.names.iter().position(|name| *name == lower) {
            return u32::try_from(index)
                .map(|index| self.min + index)
                .map_err(|_| self.expected(text));
        }
        if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
            return Err(self.expected(text));
        }
        match text.parse::<u32>() {
            Ok(value) if (self.min..=self.max).contains(&value) => Ok(value),
            _ => Err(format!("{text} is out of range {}-{}", self.min, self.max)),
        }
    }

    /// A step after `/`.
    fn step(&self, text: &str) -> Result<usize, String> {
        match text.parse::<usize>() {
            Ok(step) if step >= 1 && text.bytes().all(|b| b.is_ascii_digit()) => Ok(step),
            _ => Err(format!(
                "step \"{text}\" is not a whole number of at least 1"
            )),
        }
    }

    /// The message for a text that is neither a number nor a name.
    fn expected(&self, text: &str) -> String {
        match (self.names.first(), self.names.last()) {
            (Some(first), Some(last)) => format!(
                "\"{text}\" is not a value (expected {}-{} or {first}-{last})",
                self.min, self.max
            ),
            _ => format!(
                "\"{text}\" is not a value (expected {}-{})",
                self.min, self.max
            ),
        }
    }

    /// The values as a `cron` crate field: `*` for all of them, else a comma list.
    fn crate_field(&self, values: &BTreeSet<u32>) -> String {
        if self.weekdays {
            let days: BTreeSet<usize> = values.iter().map(|v| (*v % 7) as usize).collect();
            if days.len() == 7 {
                return "*".into();
            }
            let names: Vec<&str> = days
                .iter()
                .filter_map(|d| CRATE_DAY_NAMES.get(*d).copied())
                .collect();
            return names.join(",");
        }
        if values.len() == (self.min..=self.max).count() {
            return "*".into();
        }
        let numbers: Vec<String> = values.iter().map(u32::to_string).collect();
        numbers.join(",")
    }
}

/// A standard five-field cron expression on local wall-clock time.
#[derive(Debug, Clone)]
pub struct CronEvents {
    /// The expression as written, for display and messages.
    expression: String,
    /// `cron` crate schedules (with a leading seconds field) whose firings together are the
    /// events: one, or two when day-of-month and day-of-week are both restricted and either
    /// may match.
    schedules: Vec<cron::Schedule>,
}

impl CronEvents {
    /// The expression as written.
    pub fn as_str(&self) -> &str {
        &self.expression
    }
}

/// Why a text is not a cron expression.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CronError {
    /// The expression does not have five fields.
    #[error("invalid cron expression \"{expression}\": expected 5 fields (minute hour day-of-month month day-of-week), found {found}")]
    FieldCount {
        /// The expression as written.
        expression: String,
        /// How many whitespace-separated fields it has.
        found: usize,
    },
    /// One field is not valid.
    #[error("invalid cron expression \"{expression}\": {field} field \"{text}\": {reason}")]
    Field {
        /// The expression as written.
        expression: String,
        /// The field's name, such as `minute`.
        field: &'static str,
        /// The field as written.
        text: String,
        /// What is wrong with it and what is expected.
        reason: String,
    },
    /// The `cron` crate refused the translated expression.
    #[error("invalid cron expression \"{expression}\": {reason}")]
    Rejected {
        /// The expression as written.
        expression: String,
        /// The crate's explanation.
        reason: String,
    },
}

impl FromStr for CronEvents {
    type Err = CronError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let expression = s.trim().to_owned();
        let fields: Vec<&str> = expression.split_whitespace().collect();
        let [minute, hour, day_of_month, month, day_of_week] = fields[..] else {
            return Err(CronError::FieldCount {
                found: fields.len(),
                expression,
            });
        };
        let parse = |spec: &FieldSpec, text: &str| {
            spec.parse(text)
                .map(|values| spec.crate_field(&values))
                .map_err(|reason| CronError::Field {
                    expression: expression.clone(),
                    field: spec.name,
                    text: text.to_owned(),
                    reason,
                })
        };
        let minutes = parse(&MINUTE, minute)?;
        let hours = parse(&HOUR, hour)?;
        let days = parse(&DAY_OF_MONTH, day_of_month)?;
        let months = parse(&MONTH, month)?;
        let weekdays = parse(&DAY_OF_WEEK, day_of_week)?;
        let schedule = |days: &str, weekdays: &str| {
            cron::Schedule::from_str(&format!("0 {minutes} {hours} {days} {months} {weekdays}"))
                .map_err(|e| CronError::Rejected {
                    expression: expression.clone(),
                    reason: e.to_string(),
                })
        };
        // Standard cron: when both day fields are restricted (neither starts with `*`), a day
        // matches if either does; the crate requires both, so take the union of two schedules.
        let schedules = if !day_of_month.starts_with('*') && !day_of_week.starts_with('*') {
            vec![schedule(&days, "*")?, schedule("*", &weekdays)?]
        } else {
            vec![schedule(&days, &weekdays)?]
        };
        Ok(CronEvents {
            expression,
            schedules,
        })
    }
}

impl fmt::Display for CronEvents {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.expression)
    }
}

/// A time-ordered stream of instants.
type Instants<'a> = Peekable<Box<dyn Iterator<Item = DateTime<Utc>> + 'a>>;

/// The instants at which one expression fires, in time order (forward or backward), each once:
/// its crate schedules are merged, and wall times that resolve to the same instant (in a DST
/// gap) are folded.
struct Firings<'a> {
    /// Each crate schedule's firings, in the same order; never decreasing (or increasing),
    /// because [`zone::resolve`] is monotonic.
    streams: Vec<Instants<'a>>,
    /// Whether time runs forward.
    forward: bool,
}

impl Iterator for Firings<'_> {
    type Item = DateTime<Utc>;

    fn next(&mut self) -> Option<DateTime<Utc>> {
        let heads = self.streams.iter_mut().filter_map(|s| s.peek().copied());
        let at = if self.forward {
            heads.min()
        } else {
            heads.max()
        }?;
        for stream in &mut self.streams {
            while stream.next_if_eq(&at).is_some() {}
        }
        Some(at)
    }
}

/// When `events` fires in `schedule`'s zone, strictly after (or before) wall-clock time
/// `from`. With `skipping`, firings on dates a calendar skips are left out.
fn firings<'a>(
    schedule: &'a Schedule,
    events: &'a CronEvents,
    skipping: bool,
    from: NaiveDateTime,
    forward: bool,
) -> Firings<'a> {
    let tz = schedule.timezone;
    let streams = events
        .schedules
        .iter()
        .map(|s| {
            let walls = s.after(&from.and_utc()).map(|t| t.naive_utc());
            let walls: Box<dyn Iterator<Item = NaiveDateTime>> = if forward {
                Box::new(walls)
            } else {
                Box::new(walls.rev())
            };
            let instants: Box<dyn Iterator<Item = DateTime<Utc>>> = Box::new(
                walls
                    // A start belongs to its wall-clock date, which a calendar may skip.
                    .filter(move |wall| !(skipping && schedule.skips(wall.date())))
                    .map(move |wall| zone::resolve(tz, wall)),
            );
            instants.peekable()
        })
        .collect();
    Firings { streams, forward }
}

/// Where `now` falls in hours opened by `start` events and closed by `stop` events.
///
/// A start on a skipped date does not happen, and a start at the same instant as a stop is
/// cancelled by it. Each search looks for one firing of one expression, so that frequent
/// firings of the other (every minute, say) are never walked through.
pub(super) fn status(
    schedule: &Schedule,
    start: &CronEvents,
    stop: &CronEvents,
    now: DateTime<Utc>,
) -> ScheduleStatus {
    let tz = schedule.timezone;
    let (earliest, latest) = super::horizon(now);
    let wall = |t: DateTime<Utc>| t.with_timezone(&tz).naive_local();
    let wall_now = wall(now);
    let back_from = wall_now
        .checked_add_signed(TimeDelta::days(WALL_MARGIN_DAYS))
        .unwrap_or(wall_now);

    // Firings at or before `now`, latest first, within the horizon.
    let before_now = |events, skipping| {
        firings(schedule, events, skipping, back_from, false)
            .skip_while(move |t| *t > now)
            .take_while(move |t| *t >= earliest)
    };
    // Firings strictly after `t`, earliest first. Wall times up to the local time at `t`
    // happen at or before `t`, so the search starts there.
    let after = |events, skipping, t: DateTime<Utc>| {
        firings(schedule, events, skipping, wall(t), true).skip_while(move |u| *u <= t)
    };
    // Whether a stop fires at instant `t`. Wall times that happen at `t` are at most its local
    // time, so the latest stop up to that local time is the only candidate.
    let stops_at = |t: DateTime<Utc>| {
        let from = wall(t)
            .checked_add_signed(TimeDelta::seconds(1))
            .unwrap_or(wall(t));
        firings(schedule, stop, false, from, false).next() == Some(t)
    };

    let last_start = before_now(start, true).next();
    let last_stop = before_now(stop, false).next();
    // A stop at the same instant as the start wins.
    let in_hours = match (last_start, last_stop) {
        (Some(start), Some(stop)) => start > stop,
        (Some(_), None) => true,
        (None, _) => false,
    };
    if in_hours {
        ScheduleStatus {
            in_hours,
            // Opened by the first start after the last stop; unknown if that stop is past the
            // horizon.
            since: last_stop.and_then(|stop| after(start, true, stop).next()),
            next: after(stop, false, now).take_while(|t| *t <= latest).next(),
        }
    } else {
        // The last start that no stop cancelled, then the first stop after it.
        let since = before_now(start, true)
            .find(|t| !stops_at(*t))
            .and_then(|start| after(stop, false, start).next());
        ScheduleStatus {
            in_hours,
            since,
            next: after(start, true, now)
                .take_while(|t| *t <= latest)
                .find(|t| !stops_at(*t)),
        }
    }
}
