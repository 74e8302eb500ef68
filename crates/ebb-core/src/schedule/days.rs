//! Sets of weekdays as written in policies (`mon-fri`, `sat,sun`, `fri-mon`).

use chrono::Weekday;
use std::fmt;
use std::str::FromStr;

/// Short names in the order of [`Weekday::num_days_from_monday`], as printed.
const SHORT_NAMES: [&str; 7] = ["mon", "tue", "wed", "thu", "fri", "sat", "sun"];

/// Full names in the same order, accepted as well.
const FULL_NAMES: [&str; 7] = [
    "monday",
    "tuesday",
    "wednesday",
    "thursday",
    "friday",
    "saturday",
    "sunday",
];

/// A set of weekdays.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct DaySet {
    /// Bit `n` is set when the day with `num_days_from_monday() == n` is in the set.
    bits: u8,
}

impl DaySet {
    /// Whether `day` is in the set.
    pub fn contains(self, day: Weekday) -> bool {
        self.bits & (1 << day.num_days_from_monday()) != 0
    }
}

/// Why a text is not a set of days.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DayParseError {
    /// The text, or one item of its list, is empty.
    #[error("\"{input}\": no day given (expected a day like mon, a range like mon-fri or a list like sat,sun)")]
    Empty {
        /// The whole text as written.
        input: String,
    },
    /// A name is not a day.
    #[error("\"{input}\": unknown day \"{token}\" (expected mon, tue, wed, thu, fri, sat, sun)")]
    UnknownDay {
        /// The whole text as written.
        input: String,
        /// The name that is not a day.
        token: String,
    },
    /// An item has more than one `-`.
    #[error(
        "\"{input}\": \"{item}\" is not a day or a range of days (expected e.g. mon or mon-fri)"
    )]
    BadRange {
        /// The whole text as written.
        input: String,
        /// The item that is not a day or a range.
        item: String,
    },
}

/// The number (Monday 0) of the day named `token`, an item of `input`.
fn day_number(input: &str, token: &str) -> Result<u32, DayParseError> {
    let token = token.trim();
    if token.is_empty() {
        return Err(DayParseError::Empty {
            input: input.to_owned(),
        });
    }
    let lower = token.to_ascii_lowercase();
    SHORT_NAMES
        .iter()
        .zip(FULL_NAMES)
        .position(|(short, full)| lower == *short || lower == full)
        .and_then(|n| u32::try_from(n).ok())
        .ok_or_else(|| DayParseError::UnknownDay {
            input: input.to_owned(),
            token: token.to_owned(),
        })
}

/// One day, `mon` or `monday` in any case, as a calendar's `workday_as` names it.
pub fn parse_day(s: &str) -> Result<Weekday, DayParseError> {
    let n = day_number(s, s)?;
    u8::try_from(n)
        .ok()
        .and_then(|n| Weekday::try_from(n).ok())
        .ok_or_else(|| DayParseError::UnknownDay {
            input: s.to_owned(),
            token: s.trim().to_owned(),
        })
}

/// The short name of `day`, as policies write it (`mon`).
pub fn day_name(day: Weekday) -> &'static str {
    SHORT_NAMES[day.num_days_from_monday() as usize]
}

impl FromStr for DaySet {
    type Err = DayParseError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let day = |token: &str| day_number(s, token);
        let mut bits = 0u8;
        for item in s.split(',') {
            let mut ends = item.split('-');
            let first = day(ends.next().unwrap_or_default())?;
            let last = match ends.next() {
                Some(last) => day(last)?,
                None => first,
            };
            if ends.next().is_some() {
                return Err(DayParseError::BadRange {
                    input: s.to_owned(),
                    item: item.trim().to_owned(),
                });
            }
            // A range whose end comes before its start wraps through Sunday (`fri-mon`).
            let len = (last + 7 - first) % 7;
            for offset in 0..=len {
                bits |= 1 << ((first + offset) % 7);
            }
        }
        Ok(DaySet { bits })
    }
}

impl fmt::Display for DaySet {
    /// Prints runs of three or more days as ranges and the rest as a list, Monday first
    /// (`mon-fri`, `sat,sun`, `mon,fri-sun`), in a form that parses back to the same set.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut parts = Vec::new();
        let mut day = 0;
        while day < 7 {
            if self.bits & (1 << day) == 0 {
                day += 1;
                continue;
            }
            let mut end = day;
            while end + 1 < 7 && self.bits & (1 << (end + 1)) != 0 {
                end += 1;
            }
            match end - day {
                0 => parts.push(SHORT_NAMES[day].to_owned()),
                1 => parts.push(format!("{},{}", SHORT_NAMES[day], SHORT_NAMES[end])),
                _ => parts.push(format!("{}-{}", SHORT_NAMES[day], SHORT_NAMES[end])),
            }
            day = end + 1;
        }
        f.write_str(&parts.join(","))
    }
}
