//! Times, durations and percentages as reasons show them.

use chrono::{DateTime, Duration, Utc};
use chrono_tz::Tz;

/// Formats `t` in `tz` for reasons: `20:00 Asia/Shanghai`, with the date when it is not the
/// local date of `now`.
pub(super) fn local(t: DateTime<Utc>, tz: Tz, now: DateTime<Utc>) -> String {
    let lt = t.with_timezone(&tz);
    if lt.date_naive() == now.with_timezone(&tz).date_naive() {
        format!("{} {}", lt.format("%H:%M"), tz.name())
    } else {
        format!("{} {}", lt.format("%Y-%m-%d %H:%M"), tz.name())
    }
}

/// A duration in words: `45m`, `4h`, `1h30m`, `2d3h`.
pub(super) fn span(d: Duration) -> String {
    let mins = d.num_minutes();
    let (days, hours, m) = (mins / 1440, mins / 60 % 24, mins % 60);
    let mut out = String::new();
    if days > 0 {
        out += &format!("{days}d");
    }
    if hours > 0 {
        out += &format!("{hours}h");
    }
    if m > 0 || out.is_empty() {
        out += &format!("{m}m");
    }
    out
}

/// A GPU percentage for people: at most one decimal (CloudWatch reports many).
pub(super) fn percent_text(percent: f64) -> String {
    let text = format!("{percent:.1}");
    text.strip_suffix(".0").map(str::to_string).unwrap_or(text)
}
