//! Work hours written as weekly periods: hours are open inside the union of the periods'
//! windows.
//!
//! Each period gives one window per local date whose weekday it lists (and no calendar skips),
//! or whose working-day weekday it lists (a calendar's make-up workday), from `date + start` to
//! `date + stop`, or to the next day's `stop` for an overnight period.
//! Windows are turned into instants with [`zone::resolve`]; overlapping or touching windows
//! merge, so `since` and `next` are always real changes of state.
//!
//! Searches go date by date and stop early using two bounds that follow from `resolve` being
//! monotonic: a window of date `d` opens no earlier than `d 00:00` and closes no later than
//! `(d + 2) 00:00` (a `24:00-24:00` window), in wall-clock time.

use super::{zone, DateRule, Period, Schedule, ScheduleStatus, HORIZON_DAYS};
use chrono::{DateTime, Datelike, NaiveDate, NaiveDateTime, TimeDelta, Utc};
use chrono_tz::Tz;
use std::iter::successors;

/// One window as instants: open at `open`, closed again at `close`.
#[derive(Debug, Clone, Copy)]
struct Window {
    /// The first instant inside.
    open: DateTime<Utc>,
    /// The first instant outside again, after `open`.
    close: DateTime<Utc>,
}

/// Wall-clock time `minutes` after the local midnight starting `date`.
fn wall(date: NaiveDate, minutes: i64) -> Option<NaiveDateTime> {
    date.and_time(chrono::NaiveTime::MIN)
        .checked_add_signed(TimeDelta::minutes(minutes))
}

/// The instant of wall-clock time `minutes` after `date`'s midnight, saturating at the end of
/// time so that bounds stay usable.
fn instant(tz: Tz, date: NaiveDate, minutes: i64) -> DateTime<Utc> {
    wall(date, minutes).map_or(DateTime::<Utc>::MAX_UTC, |w| zone::resolve(tz, w))
}

/// Before this, no window of `date` opens.
fn opens_from(tz: Tz, date: NaiveDate) -> DateTime<Utc> {
    instant(tz, date, 0)
}

/// After this, no window of `date` is open.
fn closes_by(tz: Tz, date: NaiveDate) -> DateTime<Utc> {
    instant(tz, date, 2 * 24 * 60)
}

/// The non-empty windows that open on local `date`, in order of opening.
fn windows_on(schedule: &Schedule, periods: &[Period], date: NaiveDate) -> Vec<Window> {
    let as_day = match schedule.date_rule(date) {
        Some(DateRule::Skipped { .. }) => return Vec::new(),
        Some(DateRule::WorkingDay { as_day, .. }) => Some(as_day),
        None => None,
    };
    let tz = schedule.timezone;
    let mut windows: Vec<Window> = periods
        .iter()
        .filter(|p| {
            p.days.contains(date.weekday()) || as_day.is_some_and(|day| p.days.contains(day))
        })
        .filter_map(|p| {
            let start = i64::from(p.start.minutes());
            let mut stop = i64::from(p.stop.minutes());
            // A stop at or before the start is on the next day.
            if stop <= start {
                stop += 24 * 60;
            }
            let open = zone::resolve(tz, wall(date, start)?);
            let close = zone::resolve(tz, wall(date, stop)?);
            // A window that lies inside a DST gap resolves to nothing.
            (open < close).then_some(Window { open, close })
        })
        .collect();
    windows.sort_by_key(|w| w.open);
    windows
}

/// Dates from `first` down to `last`.
fn dates_down(first: NaiveDate, last: NaiveDate) -> impl Iterator<Item = NaiveDate> {
    successors(Some(first), |d| d.pred_opt()).take_while(move |d| *d >= last)
}

/// Dates from `first` up to `last`.
fn dates_up(first: NaiveDate, last: NaiveDate) -> impl Iterator<Item = NaiveDate> {
    successors(Some(first), |d| d.succ_opt()).take_while(move |d| *d <= last)
}

/// `date` moved by `days`, saturating at the ends of the calendar.
fn shift(date: NaiveDate, days: i64) -> NaiveDate {
    let moved = if days >= 0 {
        date.checked_add_days(chrono::Days::new(days.unsigned_abs()))
    } else {
        date.checked_sub_days(chrono::Days::new(days.unsigned_abs()))
    };
    moved.unwrap_or(if days >= 0 {
        NaiveDate::MAX
    } else {
        NaiveDate::MIN
    })
}

/// Where `now` falls in the union of the periods' windows.
pub(super) fn status(
    schedule: &Schedule,
    periods: &[Period],
    now: DateTime<Utc>,
) -> ScheduleStatus {
    let tz = schedule.timezone;
    let today = zone::local_date(tz, now);
    let (earliest, latest) = super::horizon(now);
    // Dates a little past the horizon, so windows that reach into it are seen.
    let first_date = shift(today, -HORIZON_DAYS - 3);
    let last_date = shift(today, HORIZON_DAYS + 3);

    // Only windows of these dates can contain `now` (see the module bounds).
    let in_hours = dates_up(shift(today, -2), shift(today, 1))
        .flat_map(|d| windows_on(schedule, periods, d))
        .any(|w| w.open <= now && now < w.close);

    if in_hours {
        ScheduleStatus {
            in_hours,
            since: merged_start(schedule, periods, now, first_date, earliest),
            next: merged_end(schedule, periods, now, last_date, latest),
        }
    } else {
        ScheduleStatus {
            in_hours,
            since: last_close(schedule, periods, now, first_date, earliest),
            next: first_open(schedule, periods, now, last_date, latest),
        }
    }
}

/// The start of the merged interval of windows containing `now`; `None` if it starts before
/// `earliest`.
fn merged_start(
    schedule: &Schedule,
    periods: &[Period],
    now: DateTime<Utc>,
    first_date: NaiveDate,
    earliest: DateTime<Utc>,
) -> Option<DateTime<Utc>> {
    let tz = schedule.timezone;
    let mut start = now;
    // Taking windows latest opening first, a window that does not reach `start` when seen is
    // inside any earlier-opening window that later does, so one pass suffices.
    for date in dates_down(shift(zone::local_date(tz, now), 1), first_date) {
        if closes_by(tz, date) < start {
            return (start >= earliest).then_some(start);
        }
        for w in windows_on(schedule, periods, date).iter().rev() {
            if w.open < start && w.close >= start {
                start = w.open;
            }
        }
        if start < earliest {
            return None;
        }
    }
    None
}

/// The end of the merged interval of windows containing `now`; `None` if it ends after
/// `latest`.
fn merged_end(
    schedule: &Schedule,
    periods: &[Period],
    now: DateTime<Utc>,
    last_date: NaiveDate,
    latest: DateTime<Utc>,
) -> Option<DateTime<Utc>> {
    let tz = schedule.timezone;
    let mut end = now;
    // Windows come earliest opening first, so the first one that opens after `end` is the gap.
    for date in dates_up(shift(zone::local_date(tz, now), -2), last_date) {
        if opens_from(tz, date) > end {
            return (end <= latest).then_some(end);
        }
        for w in windows_on(schedule, periods, date) {
            if w.open > end {
                return (end <= latest).then_some(end);
            }
            end = end.max(w.close);
        }
        if end > latest {
            return None;
        }
    }
    None
}

/// The latest close at or before `now` and not before `earliest`, when outside hours.
fn last_close(
    schedule: &Schedule,
    periods: &[Period],
    now: DateTime<Utc>,
    first_date: NaiveDate,
    earliest: DateTime<Utc>,
) -> Option<DateTime<Utc>> {
    let tz = schedule.timezone;
    let mut best: Option<DateTime<Utc>> = None;
    for date in dates_down(shift(zone::local_date(tz, now), 1), first_date) {
        if best.is_some_and(|b| closes_by(tz, date) <= b) {
            break;
        }
        for w in windows_on(schedule, periods, date) {
            if w.close <= now && w.close >= earliest {
                best = best.max(Some(w.close));
            }
        }
    }
    best
}

/// The earliest open after `now` and not after `latest`, when outside hours.
fn first_open(
    schedule: &Schedule,
    periods: &[Period],
    now: DateTime<Utc>,
    last_date: NaiveDate,
    latest: DateTime<Utc>,
) -> Option<DateTime<Utc>> {
    let tz = schedule.timezone;
    // Windows of later dates never open before those of earlier ones, so the first date with an
    // open after `now` has the earliest.
    dates_up(shift(zone::local_date(tz, now), -2), last_date)
        .find_map(|date| {
            windows_on(schedule, periods, date)
                .into_iter()
                .map(|w| w.open)
                .find(|open| *open > now)
        })
        .filter(|open| *open <= latest)
}
