//! Work-hour schedules: when a policy's hours are open, evaluated on wall-clock time in the
//! policy's zone.
//!
//! Both modes (weekly periods and cron events) work on local wall-clock times and turn them into
//! instants with [`zone::resolve`], which applies the DST rules of docs/ARCHITECTURE.md: a time
//! in a gap happens at the first instant after the gap, a time in a repeated hour at its first
//! occurrence.
//! The `cron` crate is only asked for wall-clock times (it is run on a zone without DST); it never
//! decides instants in the policy's zone itself, since it would silently skip gap times.

mod calendar;
mod calendar_files;
mod cron_events;
mod days;
mod periods;
mod time_of_day;
pub mod zone;

pub use calendar::{Calendar, CalendarError, DateRange, Workday};
pub use calendar_files::{read_calendar, CalendarFile, CalendarFormat};
pub use cron_events::{CronError, CronEvents};
pub use days::{day_name, parse_day, DayParseError, DaySet};
pub use time_of_day::{TimeOfDay, TimeOfDayError};

use chrono::{DateTime, NaiveDate, Utc, Weekday};
use chrono_tz::Tz;
use std::sync::Arc;

/// How far schedule look-ups search for a transition before they report that there is none
/// (a schedule open all the time, or never).
pub const HORIZON_DAYS: i64 = 400;

/// The instants [`HORIZON_DAYS`] before and after `now`, saturating at the ends of time.
fn horizon(now: DateTime<Utc>) -> (DateTime<Utc>, DateTime<Utc>) {
    let span = chrono::TimeDelta::days(HORIZON_DAYS);
    (
        now.checked_sub_signed(span)
            .unwrap_or(DateTime::<Utc>::MIN_UTC),
        now.checked_add_signed(span)
            .unwrap_or(DateTime::<Utc>::MAX_UTC),
    )
}

/// A weekly window: opens on each day of `days` at `start`, closes at `stop`.
///
/// A `stop` at or before `start` closes on the next day (an overnight window); the whole
/// window belongs to the day it starts on, for `days` and for skipped dates.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Period {
    /// Days on which the window opens.
    pub days: DaySet,
    /// Local opening time.
    pub start: TimeOfDay,
    /// Local closing time; `24:00` is the end of the start day.
    pub stop: TimeOfDay,
}

/// The two ways to write work hours.
#[derive(Debug, Clone)]
pub enum Hours {
    /// Weekly periods; hours are open inside any of them.
    Periods(Vec<Period>),
    /// Cron events: hours open at each `start` event and close at each `stop` event. When both
    /// fire at the same minute, the stop wins.
    Cron {
        /// Events that open the hours.
        start: CronEvents,
        /// Events that close the hours.
        stop: CronEvents,
    },
}

/// A policy's work hours in its time zone, with the calendars whose dates it skips and those
/// whose working days it opens on.
#[derive(Debug, Clone)]
pub struct Schedule {
    /// The IANA zone the times are written in.
    pub timezone: Tz,
    /// When hours open and close.
    pub hours: Hours,
    /// Calendars whose `dates` open no window (a window that starts on one stays closed).
    pub skip: Vec<Arc<Calendar>>,
    /// Calendars whose `workdays` open as working days: a period whose `days` leave out the
    /// date's weekday opens on it when they include the weekday the calendar gives. Periods only
    /// (the checker refuses them with cron events, which name their own dates).
    pub workdays: Vec<Arc<Calendar>>,
}

/// How a calendar changes the windows of one local date.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DateRule<'a> {
    /// No window opens on the date: one of the calendar's `dates`.
    Skipped {
        /// The calendar's name.
        calendar: &'a str,
    },
    /// A working day whatever its weekday: one of the calendar's `workdays`.
    WorkingDay {
        /// The calendar's name.
        calendar: &'a str,
        /// The weekday whose periods open on the date.
        as_day: Weekday,
    },
}

/// Where an instant falls in a schedule.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ScheduleStatus {
    /// Whether hours are open at the instant.
    pub in_hours: bool,
    /// The last transition at or before the instant: when the current window opened (in hours),
    /// or when the last one closed (outside). `None` when there is none within the horizon.
    pub since: Option<DateTime<Utc>>,
    /// The next transition strictly after the instant. `None` when there is none within the
    /// horizon.
    pub next: Option<DateTime<Utc>>,
}

impl Schedule {
    /// Where `now` falls in this schedule.
    pub fn status(&self, now: DateTime<Utc>) -> ScheduleStatus {
        match &self.hours {
            Hours::Periods(periods) => periods::status(self, periods, now),
            Hours::Cron { start, stop } => cron_events::status(self, start, stop, now),
        }
    }

    /// How the calendars change the windows that start on local `date`, if they do. A working
    /// day wins over a skipped date of another calendar: a stop on a working day loses work, an
    /// open holiday only costs its hours.
    pub fn date_rule(&self, date: NaiveDate) -> Option<DateRule<'_>> {
        let working = self.workdays.iter().find_map(|c| {
            c.working_day(date).map(|as_day| DateRule::WorkingDay {
                calendar: &c.name,
                as_day,
            })
        });
        working.or_else(|| {
            self.skip
                .iter()
                .find(|c| c.contains(date))
                .map(|c| DateRule::Skipped { calendar: &c.name })
        })
    }

    /// Whether a window that starts on `date` (local) is skipped by a calendar.
    fn skips(&self, date: NaiveDate) -> bool {
        matches!(self.date_rule(date), Some(DateRule::Skipped { .. }))
    }
}
