//! An Auto Scaling group's capacity over a span, as SVG rendered on the server: its desired
//! size and its members as the ticks listed them, between its min and max, with the audit
//! log's changes of its capacity marked.

use super::time;
use crate::store::{AuditEntry, GroupSize, Outcome};
use chrono::{DateTime, Utc};
use maud::{html, Markup};

/// The drawing's width and height, in SVG units; it scales to the page's width.
const WIDTH: f64 = 960.0;
const HEIGHT: f64 = 120.0;
/// Room above the largest size, so that a line at the top stays visible.
const HEADROOM: f64 = 8.0;

/// The SVG points of a step line through `value` of each of `sizes` (oldest first), each held
/// from its listing (or `from`) until the next (or `to`).
fn steps(
    sizes: &[GroupSize],
    value: impl Fn(&GroupSize) -> i32,
    x: impl Fn(DateTime<Utc>) -> f64,
    y: impl Fn(i32) -> f64,
    to: DateTime<Utc>,
) -> String {
    let mut points = Vec::with_capacity(sizes.len() * 2);
    for (i, size) in sizes.iter().enumerate() {
        let end = sizes.get(i + 1).map_or(to, |next| next.at);
        let v = y(value(size));
        points.push(format!("{:.1},{v:.1}", x(size.at)));
        points.push(format!("{:.1},{v:.1}", x(end)));
    }
    points.join(" ")
}

/// The chart of group `name`'s capacity from `from` to `to` (`sizes` oldest first, the first
/// the size it had at `from`), with the outcomes among `changes` in that span marked.
pub(super) fn capacity(
    name: &str,
    sizes: &[GroupSize],
    changes: &[AuditEntry],
    from: DateTime<Utc>,
    to: DateTime<Utc>,
) -> Markup {
    if sizes.is_empty() {
        return html! {
            p.note { "Capacity: no listing of the group kept in this span." }
        };
    }
    let span = (to - from).num_seconds().max(1) as f64;
    let x = |t: DateTime<Utc>| ((t - from).num_seconds() as f64 / span * WIDTH).clamp(0.0, WIDTH);
    let top = sizes
        .iter()
        .map(|s| s.capacity.max.max(s.members))
        .max()
        .unwrap_or(0)
        .max(1);
    let y = |v: i32| HEIGHT - f64::from(v.max(0)) / f64::from(top) * (HEIGHT - HEADROOM);
    let marks: Vec<&AuditEntry> = changes
        .iter()
        .filter(|a| a.entry.at >= from && a.entry.at <= to && a.entry.outcome != Outcome::Intent)
        .collect();
    let last = &sizes[sizes.len() - 1];
    let lowest = sizes.iter().map(|s| s.capacity.desired).min().unwrap_or(0);
    let summary = format!(
        "{} listings with a change; desired between {lowest} and {}; now {}, {} members",
        sizes.len(),
        sizes.iter().map(|s| s.capacity.desired).max().unwrap_or(0),
        last.capacity,
        last.members,
    );
    html! {
        figure.chart {
            svg.gpu viewBox=(format!("0 0 {WIDTH} {HEIGHT}")) role="img"
                aria-labelledby="capacity-title capacity-desc" preserveAspectRatio="none" {
                title #capacity-title { "Capacity of group " (name) " over the span" }
                desc #capacity-desc { (summary) }
                rect.backdrop x="0" y="0" width=(WIDTH) height=(HEIGHT) {}
                polyline.max-line points=(steps(sizes, |s| s.capacity.max, x, y, to)) {}
                polyline.min-line points=(steps(sizes, |s| s.capacity.min, x, y, to)) {}
                polyline.members-line points=(steps(sizes, |s| s.members, x, y, to)) {}
                polyline.gpu-line points=(steps(sizes, |s| s.capacity.desired, x, y, to)) {}
                @for a in &marks {
                    @let failed = a.entry.outcome == Outcome::Failed;
                    line class=(if failed { "mark failed" } else { "mark" })
                        x1=(format!("{:.1}", x(a.entry.at))) x2=(format!("{:.1}", x(a.entry.at)))
                        y1="0" y2=(HEIGHT) {
                        title { (a.entry.action) " " (a.entry.outcome.as_str()) ": " (a.entry.reason) }
                    }
                }
            }
            div.axis aria-hidden="true" {
                span { "0 at the bottom, " (top) " at the top" }
            }
            figcaption {
                ul.legend {
                    li { span.swatch.gpu-swatch {} "desired" }
                    li { span.swatch.members-swatch {} "members" }
                    li { span.swatch.min-swatch {} "min" }
                    li { span.swatch.max-swatch {} "max" }
                    li { span.swatch.mark-swatch {} "a change by ebb" }
                }
                p.visually-hidden { (summary) }
            }
        }
        p.note {
            "The group as ebb's ticks listed it from " (time(from)) " to " (time(to))
            "; a change shows at the first tick that saw it."
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fleet::Capacity;

    #[test]
    fn each_size_holds_until_the_next_listing() {
        let t = |m: i64| {
            "2026-11-30T10:00:00Z".parse::<DateTime<Utc>>().unwrap() + chrono::Duration::minutes(m)
        };
        let size = |m: i64, desired: i32| GroupSize {
            at: t(m),
            capacity: Capacity {
                min: 0,
                desired,
                max: 4,
            },
            members: desired,
            tags: Default::default(),
        };
        let sizes = [size(0, 2), size(10, 0)];
        let line = steps(
            &sizes,
            |s| s.capacity.desired,
            |at| (at - t(0)).num_minutes() as f64,
            |v| f64::from(10 - v),
            t(30),
        );
        assert_eq!(line, "0.0,8.0 10.0,8.0 10.0,10.0 30.0,10.0");
    }
}
