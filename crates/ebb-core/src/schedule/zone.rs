//! Turning local wall-clock times into instants under the DST rules of docs/ARCHITECTURE.md.

use chrono::{DateTime, NaiveDate, NaiveDateTime, Offset, TimeDelta, TimeZone, Timelike, Utc};
use chrono_tz::Tz;

/// How far past a non-existent local time to look for the end of its gap; the largest gap on
/// record is a whole day (Samoa, 2011-12-30).
const MAX_GAP_MINUTES: i64 = 48 * 60;

/// The instant at which wall-clock time `local` happens in `tz`.
///
/// - A time that exists once happens at that instant.
/// - A time in a repeated hour (the clocks went back) happens at its first occurrence.
/// - A time in a gap (the clocks went forward) happens at the first instant after the gap, which
///   is the instant of the transition: `02:30` on a day New York springs forward from `02:00`
///   to `03:00` happens at `03:00` EDT.
pub fn resolve(tz: Tz, local: NaiveDateTime) -> DateTime<Utc> {
    if let Some(instant) = tz.from_local_datetime(&local).earliest() {
        return instant.with_timezone(&Utc);
    }
    // Zone transitions fall on whole minutes, so the first existing whole minute after the
    // start of the gap is its end, and maps to the transition instant.
    let minute = local
        .with_second(0)
        .and_then(|t| t.with_nanosecond(0))
        .unwrap_or(local);
    (1..=MAX_GAP_MINUTES)
        .filter_map(|m| minute.checked_add_signed(TimeDelta::minutes(m)))
        .find_map(|t| tz.from_local_datetime(&t).earliest())
        .map(|instant| instant.with_timezone(&Utc))
        .unwrap_or_else(|| {
            // No gap this long exists in the zone database; read the time with the offset in
            // force around it rather than fail.
            let offset = tz.offset_from_utc_datetime(&local).fix();
            Utc.from_utc_datetime(&local.checked_sub_offset(offset).unwrap_or(local))
        })
}

/// The local (wall-clock) date in `tz` at `instant`.
pub fn local_date(tz: Tz, instant: DateTime<Utc>) -> NaiveDate {
    instant.with_timezone(&tz).date_naive()
}
