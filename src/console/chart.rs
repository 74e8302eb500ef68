//! Charts as SVG rendered on the server: an instance's state over a span of time, with the
//! audit log's actions marked on it.

use super::time;
use crate::store::{AuditEntry, InstanceEvent, InstanceRecord, Outcome};
use chrono::{DateTime, Duration, Utc};
use maud::{html, Markup};

/// The drawing's width and height, in SVG units; it scales to the page's width.
const WIDTH: f64 = 960.0;
const HEIGHT: f64 = 64.0;
/// Where the state band lies.
const BAND: (f64, f64) = (12.0, 52.0);

/// A stretch of time in one state.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Stretch {
    state: String,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
}

/// The states of `i` between `from` and `to`, oldest first, from its current state and its
/// state changes (`events`, newest first); nothing before it was first seen.
fn stretches(
    i: &InstanceRecord,
    events: &[InstanceEvent],
    from: DateTime<Utc>,
    to: DateTime<Utc>,
) -> Vec<Stretch> {
    let mut out = Vec::new();
    let mut state = if i.gone_at.is_some() {
        "gone".to_string()
    } else {
        i.state.clone()
    };
    let mut end = to;
    for e in events {
        if e.at >= to {
            // A change after the span: the state before it is the one at its end.
            state = e.from_state.clone();
            continue;
        }
        if end <= from {
            break;
        }
        out.push(Stretch {
            state: state.clone(),
            from: e.at.max(from),
            to: end,
        });
        state = e.from_state.clone();
        end = e.at;
    }
    let start = i.first_seen_at.max(from);
    if end > start {
        out.push(Stretch {
            state,
            from: start,
            to: end,
        });
    }
    out.retain(|s| s.to > s.from);
    out.reverse();
    out
}

/// The CSS class of a state's colour.
fn colour(state: &str) -> &'static str {
    match state {
        "running" => "s-running",
        "stopped" => "s-stopped",
        "gone" | "terminated" | "shutting-down" => "s-gone",
        _ => "s-other",
    }
}

/// The chart of `i`'s state from `from` to `to`, with the audit rows of `audit` in that span
/// marked (failures in their own colour), a legend, and a text summary for screen readers.
pub(super) fn states(
    i: &InstanceRecord,
    events: &[InstanceEvent],
    audit: &[AuditEntry],
    from: DateTime<Utc>,
    to: DateTime<Utc>,
) -> Markup {
    let span = (to - from).num_seconds().max(1) as f64;
    let x = |t: DateTime<Utc>| ((t - from).num_seconds() as f64 / span * WIDTH).clamp(0.0, WIDTH);
    let stretches = stretches(i, events, from, to);
    let marks: Vec<&AuditEntry> = audit
        .iter()
        .filter(|a| a.entry.at >= from && a.entry.at <= to && a.entry.outcome != Outcome::Intent)
        .collect();
    let summary = summary(&stretches, &marks);
    let ticks: Vec<DateTime<Utc>> = (0..=4).map(|n| from + (to - from) / 4 * n).collect();
    let mut legend: Vec<&str> = stretches.iter().map(|s| s.state.as_str()).collect();
    legend.sort_unstable();
    legend.dedup();
    html! {
        figure.chart {
            svg viewBox=(format!("0 0 {WIDTH} {HEIGHT}")) role="img"
                aria-labelledby="chart-title chart-desc" preserveAspectRatio="none" {
                title #chart-title { "State of " (i.id) " over the last 24 hours" }
                desc #chart-desc { (summary) }
                rect.backdrop x="0" y=(BAND.0) width=(WIDTH) height=(BAND.1 - BAND.0) {}
                @for s in &stretches {
                    rect class=(colour(&s.state)) x=(format!("{:.1}", x(s.from)))
                        y=(BAND.0) width=(format!("{:.1}", x(s.to) - x(s.from)))
                        height=(BAND.1 - BAND.0) {
                        title { (s.state) " from " (stamp(s.from)) " to " (stamp(s.to)) }
                    }
                }
                @for a in &marks {
                    @let failed = a.entry.outcome == Outcome::Failed;
                    line class=(if failed { "mark failed" } else { "mark" })
                        x1=(format!("{:.1}", x(a.entry.at))) x2=(format!("{:.1}", x(a.entry.at)))
                        y1="4" y2=(BAND.1 + 8.0) {
                        title { (a.entry.action) " " (a.entry.outcome.as_str()) " at " (stamp(a.entry.at)) ": " (a.entry.reason) }
                    }
                }
            }
            // The axis in HTML, not in the stretched drawing, so its text keeps its shape.
            div.axis aria-hidden="true" {
                @for (n, t) in ticks.iter().enumerate() {
                    span {
                        @if n == 0 || n == ticks.len() - 1 {
                            (t.format("%d %b %H:%M").to_string())
                        } @else {
                            (t.format("%H:%M").to_string())
                        }
                    }
                }
            }
            figcaption {
                ul.legend {
                    @for state in &legend {
                        li { span class=(format!("swatch {}", colour(state))) {} (state) }
                    }
                    li { span.swatch.mark-swatch {} "an audited action" }
                }
                p.visually-hidden { (summary) }
            }
        }
        @if stretches.is_empty() { p.note { "ebb had not seen this instance in this span." } }
        p.note { "From " (time(from)) " to " (time(to)) "." }
    }
}

/// `t` as `MM-DD HH:MM`.
fn stamp(t: DateTime<Utc>) -> String {
    t.format("%m-%d %H:%M").to_string()
}

/// The chart in words: time in each state, and the actions marked.
fn summary(stretches: &[Stretch], marks: &[&AuditEntry]) -> String {
    let mut time_in: Vec<(String, Duration)> = Vec::new();
    for s in stretches {
        match time_in.iter_mut().find(|(state, _)| *state == s.state) {
            Some((_, d)) => *d += s.to - s.from,
            None => time_in.push((s.state.clone(), s.to - s.from)),
        }
    }
    let states: Vec<String> = time_in
        .iter()
        .map(|(state, d)| format!("{state} {}h{:02}m", d.num_hours(), d.num_minutes() % 60))
        .collect();
    let actions: Vec<String> = marks
        .iter()
        .map(|a| {
            format!(
                "{} {} at {}",
                a.entry.action,
                a.entry.outcome.as_str(),
                stamp(a.entry.at)
            )
        })
        .collect();
    format!(
        "Time in each state: {}. Actions: {}.",
        if states.is_empty() {
            "unknown".to_string()
        } else {
            states.join(", ")
        },
        if actions.is_empty() {
            "none".to_string()
        } else {
            actions.join("; ")
        }
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use sqlx::types::Json;

    fn t(s: &str) -> DateTime<Utc> {
        s.parse().unwrap()
    }

    fn event(at: &str, from: &str, to: &str) -> InstanceEvent {
        InstanceEvent {
            at: t(at),
            from_state: from.into(),
            to_state: to.into(),
            cause: "observed".into(),
        }
    }

    fn stretch(state: &str, from: &str, to: &str) -> Stretch {
        Stretch {
            state: state.into(),
            from: t(from),
            to: t(to),
        }
    }

    #[test]
    fn stretches_follow_the_state_changes_back_to_the_first_sighting() {
        let i = InstanceRecord {
            id: "i-1".into(),
            region: "us-east-1".into(),
            instance_type: "g5.xlarge".into(),
            state: "running".into(),
            lifecycle: "on-demand".into(),
            launched_at: None,
            tags: Json(Default::default()),
            owner: None,
            first_seen_at: t("2026-11-30T09:00:00Z"),
            last_seen_at: t("2026-12-01T09:00:00Z"),
            gone_at: None,
            state_since: t("2026-12-01T07:00:00Z"),
            policy: None,
            stopped_by_ebb_at: None,
            started_by_ebb_at: None,
            notified_at: None,
            started_by_person_at: None,
            decided_action: None,
            decided_code: None,
            decided_reason: None,
            decided_since: None,
            billing: None,
        };
        // Newest first, as the store reads them.
        let events = [
            event("2026-12-01T07:00:00Z", "stopped", "running"),
            event("2026-11-30T19:00:00Z", "running", "stopped"),
        ];
        let (from, to) = (t("2026-11-30T06:00:00Z"), t("2026-12-01T06:00:00Z"));
        assert_eq!(
            stretches(&i, &events, from, to),
            [
                stretch("running", "2026-11-30T09:00:00Z", "2026-11-30T19:00:00Z"),
                stretch("stopped", "2026-11-30T19:00:00Z", "2026-12-01T06:00:00Z"),
            ]
        );
        // A window that starts after the first change is cut at its start.
        let (from, to) = (t("2026-11-30T20:00:00Z"), t("2026-12-01T08:00:00Z"));
        assert_eq!(
            stretches(&i, &events, from, to),
            [
                stretch("stopped", "2026-11-30T20:00:00Z", "2026-12-01T07:00:00Z"),
                stretch("running", "2026-12-01T07:00:00Z", "2026-12-01T08:00:00Z"),
            ]
        );
    }
}
