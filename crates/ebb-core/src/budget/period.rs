//! A budget's calendar period in its zone, as instants: from a local midnight to the next
//! period's, whatever the zone's clock changes do to the day's length.

use crate::policy::Period;
use chrono::{DateTime, Datelike, Duration, Months, NaiveDate, TimeZone, Utc};
use chrono_tz::Tz;

/// The period of `period` in `tz` that holds `now`: `[start, end)`.
pub fn bounds(period: Period, tz: Tz, now: DateTime<Utc>) -> (DateTime<Utc>, DateTime<Utc>) {
    let today = now.with_timezone(&tz).date_naive();
    let (first, next) = match period {
        Period::Day => (today, today + Duration::days(1)),
        Period::Week => {
            let monday = today - Duration::days(today.weekday().num_days_from_monday().into());
            (monday, monday + Duration::days(7))
        }
        Period::Month => {
            let first = today.with_day(1).unwrap_or(today);
            (first, first + Months::new(1))
        }
    };
    (midnight(tz, first), midnight(tz, next))
}

/// The periods of `period` in `tz` that `[from, to)` touches, each cut to it, in order.
pub fn periods(
    period: Period,
    tz: Tz,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
) -> impl Iterator<Item = (DateTime<Utc>, DateTime<Utc>)> {
    let mut at = from;
    std::iter::from_fn(move || {
        if at >= to {
            return None;
        }
        let (start, end) = bounds(period, tz, at);
        // A period always ends after the instant it holds; were it not to, stop rather than
        // loop.
        at = if end > at { end } else { to };
        Some((start.max(from), end.min(to)))
    })
}

/// The first instant of local `date` in `tz`: its midnight, or, where a clock change skips
/// midnight, the first local time that exists after it.
pub fn midnight(tz: Tz, date: NaiveDate) -> DateTime<Utc> {
    let mut at = date.and_time(chrono::NaiveTime::MIN);
    for _ in 0..4 {
        if let Some(t) = tz.from_local_datetime(&at).earliest() {
            return t.with_timezone(&Utc);
        }
        at += Duration::minutes(30);
    }
    // No zone skips two hours; were one to, its UTC midnight is still within the day.
    Utc.from_utc_datetime(&date.and_time(chrono::NaiveTime::MIN))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: &str) -> DateTime<Utc> {
        s.parse().unwrap()
    }

    #[test]
    fn periods_are_local_calendar_periods() {
        let sh: Tz = "Asia/Shanghai".parse().unwrap();
        let now = at("2026-12-19T10:00:00Z"); // 18:00 Saturday in Shanghai
        assert_eq!(
            bounds(Period::Day, sh, now),
            (at("2026-12-18T16:00:00Z"), at("2026-12-19T16:00:00Z"))
        );
        assert_eq!(
            bounds(Period::Week, sh, now),
            (at("2026-12-13T16:00:00Z"), at("2026-12-20T16:00:00Z"))
        );
        assert_eq!(
            bounds(Period::Month, sh, now),
            (at("2026-11-30T16:00:00Z"), at("2026-12-31T16:00:00Z"))
        );
    }

    #[test]
    fn a_day_of_a_clock_change_is_its_real_length() {
        let berlin: Tz = "Europe/Berlin".parse().unwrap();
        let (start, end) = bounds(Period::Day, berlin, at("2026-03-29T12:00:00Z"));
        assert_eq!(end - start, Duration::hours(23));
        // Havana's clocks skip midnight in March: the day starts at 01:00.
        let havana: Tz = "America/Havana".parse().unwrap();
        let (start, _) = bounds(Period::Day, havana, at("2026-03-08T12:00:00Z"));
        assert_eq!(start, at("2026-03-08T05:00:00Z"));
    }
}
