//! Instants as people write them on the command line and in API requests: an RFC 3339 time,
//! or a duration counted from now (`24h` ago, `4h` ahead).

use chrono::{DateTime, Utc};

/// An RFC 3339 time.
pub fn parse_time(s: &str) -> Result<DateTime<Utc>, String> {
    DateTime::parse_from_rfc3339(s)
        .map(|t| t.with_timezone(&Utc))
        .map_err(|_| format!("\"{s}\" is not an RFC 3339 time (like 2026-11-30T20:05:00Z or 2026-11-30T20:05:00+08:00)"))
}

/// A past instant: `24h` (that long before `now`) or an RFC 3339 time.
pub fn parse_past(s: &str, now: DateTime<Utc>) -> Result<DateTime<Utc>, String> {
    match humantime::parse_duration(s) {
        Ok(d) => chrono::Duration::from_std(d)
            .ok()
            .and_then(|d| now.checked_sub_signed(d))
            .ok_or_else(|| format!("\"{s}\" is too long ago")),
        Err(_) => parse_time(s).map_err(|e| format!("{e}, or a duration like 24h")),
    }
}

/// A future instant: `4h` (that long after `now`) or an RFC 3339 time.
pub fn parse_future(s: &str, now: DateTime<Utc>) -> Result<DateTime<Utc>, String> {
    match humantime::parse_duration(s) {
        Ok(d) => chrono::Duration::from_std(d)
            .ok()
            .and_then(|d| now.checked_add_signed(d))
            .ok_or_else(|| format!("\"{s}\" is too far ahead")),
        Err(_) => parse_time(s).map_err(|e| format!("{e}, or a duration like 4h")),
    }
}
