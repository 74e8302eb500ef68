//! Early starts, as numbers: when the starts due at an opening cannot all be made by it within
//! a token bucket (EC2's StartInstances instance bucket, or ModifyInstanceAttribute's for the
//! starts that change a type back first), the latest time each can be made so that all are, in
//! the order they are due. Pure: the buckets are data ([`StartRates`]), not the pacer.

use chrono::{DateTime, Duration, Utc};

/// A token bucket as data: its size and how fast it fills.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TokenRate {
    /// The most tokens it holds (the largest burst).
    pub burst: f64,
    /// Tokens added each second.
    pub per_second: f64,
}

impl TokenRate {
    /// A bucket of `burst` tokens filled by `per_second`.
    pub const fn of(burst: f64, per_second: f64) -> TokenRate {
        TokenRate { burst, per_second }
    }
}

/// The buckets the starts of one account and region wait for (`cloud::pacing`'s figures).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StartRates {
    /// StartInstances: one token an instance started.
    pub start: TokenRate,
    /// ModifyInstanceAttribute: one token a call, one call an instance whose type is changed
    /// back before its start (`start.restore_type`).
    pub modify: TokenRate,
}

/// The longest ebb starts ahead of `start_ahead` to keep within the buckets: more than this
/// and the starts are made as fast as the buckets allow, some after the opening.
pub const MAX_EARLY: Duration = Duration::hours(1);

/// The latest time each start of `due` (each one token of `rate`, sorted by when it is due,
/// earliest first) can be made so that every one is made by its due time, the bucket full
/// before the first: from the last backwards, each takes a token at its due time or, when
/// the bucket (filled backwards at its rate) has none left, as much earlier as a token takes
/// to come. A rate that never fills leaves every time as due.
pub fn latest_starts(due: &[DateTime<Utc>], rate: TokenRate) -> Vec<DateTime<Utc>> {
    let Some(&first) = due.first() else {
        return Vec::new();
    };
    if rate.per_second <= 0.0 || !rate.per_second.is_finite() {
        return due.to_vec();
    }
    let burst = rate.burst.max(1.0);
    // Seconds after the first due time, so that the sums stay exact enough.
    let secs = |t: DateTime<Utc>| (t - first).num_milliseconds() as f64 / 1000.0;
    let mut latest = vec![first; due.len()];
    let mut tokens = burst;
    let mut at: Option<f64> = None;
    for (n, &d) in due.iter().enumerate().rev() {
        let d = secs(d);
        let t = match at {
            None => d,
            Some(prev) => {
                let t = prev.min(d);
                tokens = (tokens + rate.per_second * (prev - t)).min(burst);
                t
            }
        };
        let t = if tokens < 1.0 {
            let wait = (1.0 - tokens) / rate.per_second;
            tokens = 1.0;
            t - wait
        } else {
            t
        };
        tokens -= 1.0;
        at = Some(t);
        latest[n] = first + Duration::milliseconds((t * 1000.0).floor() as i64);
    }
    latest
}

/// `lead` rounded up to whole minutes (ticks come every minute or so), at most [`MAX_EARLY`].
pub fn whole_minutes(lead: Duration) -> Duration {
    let secs = lead.num_seconds() + i64::from(lead.subsec_nanos() > 0);
    Duration::minutes((secs + 59) / 60).min(MAX_EARLY)
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    fn nine() -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 12, 7, 9, 0, 0).unwrap()
    }

    #[test]
    fn within_the_burst_nothing_is_early() {
        let due = vec![nine(); 1000];
        let latest = latest_starts(&due, TokenRate::of(1000.0, 2.0));
        assert!(latest.iter().all(|&t| t == nine()));
    }

    #[test]
    fn beyond_the_burst_the_first_start_early_by_what_the_rest_take_to_refill() {
        // 1240 due at 09:00, a bucket of 1000 filling at 2 a second: the last 1000 at 09:00,
        // the 240 before them half a second apart, the first 120 s (2 min) early.
        let due = vec![nine(); 1240];
        let latest = latest_starts(&due, TokenRate::of(1000.0, 2.0));
        assert_eq!(latest[1239], nine());
        assert_eq!(latest[240], nine());
        assert_eq!(latest[239], nine() - Duration::milliseconds(500));
        assert_eq!(latest[0], nine() - Duration::seconds(120));
        assert_eq!(whole_minutes(nine() - latest[0]), Duration::minutes(2));
    }

    #[test]
    fn earlier_openings_go_first_and_borrow_from_later_ones() {
        // A bucket of 5 filling at 1 a second, 10 starts due at 09:00 and 10 at 09:00:10.
        let later = nine() + Duration::seconds(10);
        let mut due = vec![nine(); 10];
        due.extend(vec![later; 10]);
        let latest = latest_starts(&due, TokenRate::of(5.0, 1.0));
        // The later 10: 5 at 09:00:10, then one a second back to 09:00:05.
        assert_eq!(latest[19], later);
        assert_eq!(latest[15], later);
        assert_eq!(latest[14], later - Duration::seconds(1));
        assert_eq!(latest[10], later - Duration::seconds(5));
        // The bucket is empty at 09:00:05 going backwards; the earlier 10 take one a second
        // from 09:00:00 (5 s of refill gives 5 tokens by then: 5 at 09:00, then one a second).
        assert_eq!(latest[9], nine());
        assert_eq!(latest[5], nine());
        assert_eq!(latest[4], nine() - Duration::seconds(1));
        assert_eq!(latest[0], nine() - Duration::seconds(5));
    }

    #[test]
    fn a_bucket_that_never_fills_changes_nothing() {
        let due = vec![nine(); 3];
        assert_eq!(latest_starts(&due, TokenRate::of(1.0, 0.0)), due);
        assert!(latest_starts(&[], TokenRate::of(1.0, 1.0)).is_empty());
    }

    #[test]
    fn leads_round_up_to_minutes_and_stop_at_an_hour() {
        assert_eq!(
            whole_minutes(Duration::milliseconds(500)),
            Duration::minutes(1)
        );
        assert_eq!(whole_minutes(Duration::seconds(120)), Duration::minutes(2));
        assert_eq!(whole_minutes(Duration::seconds(121)), Duration::minutes(3));
        assert_eq!(whole_minutes(Duration::zero()), Duration::zero());
        assert_eq!(whole_minutes(Duration::hours(5)), MAX_EARLY);
    }
}
