//! Local times of day as written in policies (`HH:MM`).

use std::fmt;
use std::str::FromStr;

/// Minutes in a day; `24:00` is this many minutes after midnight.
const MINUTES_PER_DAY: u32 = 24 * 60;

/// A local wall-clock time of day with minute precision, from `00:00` to `24:00`.
///
/// `24:00` is the end of the day (the next day's midnight), so a window can close exactly at
/// midnight without wrapping to the next day.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct TimeOfDay {
    /// Minutes since local midnight, `0..=1440`.
    minutes: u32,
}

impl TimeOfDay {
    /// Minutes since local midnight, from 0 (`00:00`) to 1440 (`24:00`).
    pub fn minutes(self) -> u32 {
        self.minutes
    }
}

/// Why a text is not a time of day.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TimeOfDayError {
    /// The text is not `HH:MM` between `00:00` and `24:00`.
    #[error("\"{input}\" is not a time of day (HH:MM, 00:00-24:00)")]
    Invalid {
        /// The text as written.
        input: String,
    },
}

impl FromStr for TimeOfDay {
    type Err = TimeOfDayError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let invalid = || TimeOfDayError::Invalid {
            input: s.to_owned(),
        };
        // Exactly two digits on each side, so `8:00` or `08:00:00` are rejected rather than
        // guessed at.
        let (hh, mm) = s.split_once(':').ok_or_else(invalid)?;
        let two_digits = |t: &str| t.len() == 2 && t.bytes().all(|b| b.is_ascii_digit());
        if !two_digits(hh) || !two_digits(mm) {
            return Err(invalid());
        }
        let hours: u32 = hh.parse().map_err(|_| invalid())?;
        let minutes: u32 = mm.parse().map_err(|_| invalid())?;
        if minutes > 59 || hours * 60 + minutes > MINUTES_PER_DAY {
            return Err(invalid());
        }
        Ok(TimeOfDay {
            minutes: hours * 60 + minutes,
        })
    }
}

impl fmt::Display for TimeOfDay {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:02}:{:02}", self.minutes / 60, self.minutes % 60)
    }
}
