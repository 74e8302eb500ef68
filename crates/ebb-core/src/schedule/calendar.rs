//! Calendars of dates that schedules skip (holidays, shutdowns) and of working days whatever
//! their weekday (make-up workdays, China's 调休).

use chrono::{Datelike, NaiveDate, Weekday};
use std::fmt;
use std::str::FromStr;

/// A named list of dates, such as public holidays, and of working days, such as the weekend
/// days a government moves work to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Calendar {
    /// The name policies refer to the calendar by.
    pub name: String,
    /// The dates on which a window does not open (`dates:`).
    pub dates: Vec<DateRange>,
    /// The dates that are working days whatever their weekday (`workdays:`).
    pub workdays: Vec<Workday>,
}

impl Calendar {
    /// Why the calendar may have run out on `today`, if it may: it names no date in `today`'s
    /// year, or, from 1 November, none in the next. A calendar of public holidays is written a
    /// year at a time; one that has run out makes every holiday a working day without a word.
    pub fn running_out(&self, today: NaiveDate) -> Option<String> {
        let names = |year: i32| self.names_year(year);
        let year = today.year();
        if !names(year) {
            return Some(format!(
                "calendar {} names no date in {year}: add this year's dates, or every one of them is taken as an ordinary day",
                self.name
            ));
        }
        if today.month() >= 11 && !names(year + 1) {
            return Some(format!(
                "calendar {} names no date in {} yet: add next year's dates before the year ends, or every one of them is taken as an ordinary day",
                self.name,
                year + 1
            ));
        }
        None
    }

    /// Whether the calendar names any date of `year`, skipped or working: one that names none
    /// has not been written for that year yet.
    pub fn names_year(&self, year: i32) -> bool {
        let ranges = self
            .dates
            .iter()
            .chain(self.workdays.iter().map(|w| &w.dates));
        ranges
            .map(|r| (r.first.year(), r.last.year()))
            .any(|(first, last)| (first..=last).contains(&year))
    }

    /// Whether `date` is in one of the calendar's ranges of skipped dates.
    pub fn contains(&self, date: NaiveDate) -> bool {
        self.dates.iter().any(|range| range.contains(date))
    }

    /// The weekday whose hours `date` opens with, when it is one of the calendar's working days.
    pub fn working_day(&self, date: NaiveDate) -> Option<Weekday> {
        self.workdays
            .iter()
            .find(|w| w.dates.contains(date))
            .map(|w| w.as_day)
    }
}

/// Dates that are working days whatever their weekday: windows open on them as on `as_day`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Workday {
    /// The working days.
    pub dates: DateRange,
    /// The weekday whose periods open on them (the calendar's `workday_as`, Monday by default,
    /// or the entry's `as`).
    pub as_day: Weekday,
}

/// An inclusive range of dates; a single date is a range of one day.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct DateRange {
    /// The first date in the range.
    pub first: NaiveDate,
    /// The last date in the range, on or after `first`.
    pub last: NaiveDate,
}

impl DateRange {
    /// Whether `date` is between `first` and `last`, both included.
    pub fn contains(&self, date: NaiveDate) -> bool {
        self.first <= date && date <= self.last
    }
}

/// Why a text is not a date or a date range.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CalendarError {
    /// The text is not a date.
    #[error("\"{input}\" is not a date (YYYY-MM-DD or YYYY-MM-DD..YYYY-MM-DD)")]
    NotADate {
        /// The text as written.
        input: String,
    },
    /// One end of a range is not a date.
    #[error("\"{input}\": \"{part}\" is not a date (expected YYYY-MM-DD..YYYY-MM-DD)")]
    NotADateInRange {
        /// The whole range as written.
        input: String,
        /// The end that is not a date.
        part: String,
    },
    /// A range ends before it starts.
    #[error("\"{input}\": the range ends before it starts (expected FIRST..LAST with FIRST on or before LAST)")]
    EndBeforeStart {
        /// The whole range as written.
        input: String,
    },
}

/// Parses exactly `YYYY-MM-DD`; chrono's own parser also takes one-digit months and days.
fn parse_date(s: &str) -> Option<NaiveDate> {
    let bytes = s.as_bytes();
    let shaped = bytes.len() == 10
        && bytes.iter().enumerate().all(|(i, b)| match i {
            4 | 7 => *b == b'-',
            _ => b.is_ascii_digit(),
        });
    if !shaped {
        return None;
    }
    let year = s.get(0..4)?.parse().ok()?;
    let month = s.get(5..7)?.parse().ok()?;
    let day = s.get(8..10)?.parse().ok()?;
    NaiveDate::from_ymd_opt(year, month, day)
}

impl FromStr for DateRange {
    type Err = CalendarError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let text = s.trim();
        let Some((first, last)) = text.split_once("..") else {
            let date = parse_date(text).ok_or_else(|| CalendarError::NotADate {
                input: s.to_owned(),
            })?;
            return Ok(DateRange {
                first: date,
                last: date,
            });
        };
        let end = |part: &str| {
            parse_date(part.trim()).ok_or_else(|| CalendarError::NotADateInRange {
                input: s.to_owned(),
                part: part.trim().to_owned(),
            })
        };
        let range = DateRange {
            first: end(first)?,
            last: end(last)?,
        };
        if range.last < range.first {
            return Err(CalendarError::EndBeforeStart {
                input: s.to_owned(),
            });
        }
        Ok(range)
    }
}

impl fmt::Display for DateRange {
    /// Prints a one-day range as its date and others as `FIRST..LAST`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.first == self.last {
            write!(f, "{}", self.first)
        } else {
            write!(f, "{}..{}", self.first, self.last)
        }
    }
}
