//! An instance's GPU utilisation over a span, as SVG rendered on the server: the readings ebb
//! kept, the idle threshold of its policy, and the audit log's actions marked.

use super::time;
use crate::fleet::Sample;
use crate::store::{AuditEntry, Outcome};
use chrono::{DateTime, Duration, Utc};
use maud::{html, Markup};

/// The drawing's width and height, in SVG units; it scales to the page's width.
const WIDTH: f64 = 960.0;
const HEIGHT: f64 = 120.0;
/// A reading stands for at most this long: a longer gap breaks the line (the engine's coverage
/// rule), since nothing is known of it.
const COVERS: Duration = Duration::minutes(10);

/// The runs of `samples` without a gap longer than [`COVERS`], as SVG polyline points.
fn runs(samples: &[Sample], x: impl Fn(DateTime<Utc>) -> f64) -> Vec<String> {
    let y = |percent: f64| HEIGHT - percent.clamp(0.0, 100.0) / 100.0 * HEIGHT;
    let mut runs: Vec<Vec<String>> = Vec::new();
    let mut last: Option<DateTime<Utc>> = None;
    for s in samples {
        if last.is_none_or(|l| s.at - l > COVERS) {
            runs.push(Vec::new());
        }
        if let Some(run) = runs.last_mut() {
            run.push(format!("{:.1},{:.1}", x(s.at), y(s.percent)));
        }
        last = Some(s.at);
    }
    runs.into_iter().map(|r| r.join(" ")).collect()
}

/// The chart of `id`'s GPU utilisation from `from` to `to`, with its policy's idle threshold
/// (`gpu_below`) when it has an idle rule, and the audit rows of `audit` in that span marked.
pub(super) fn gpu(
    id: &str,
    samples: &[Sample],
    threshold: Option<f64>,
    audit: &[AuditEntry],
    from: DateTime<Utc>,
    to: DateTime<Utc>,
) -> Markup {
    if samples.is_empty() {
        return html! {
            p.note {
                "GPU utilisation: no readings kept in this span. ebb keeps the readings it takes "
                "for instances whose policy looks at them (an idle rule, or a stop that waits "
                "while the GPU is busy), for EBB_METRICS_RETENTION."
            }
        };
    }
    let span = (to - from).num_seconds().max(1) as f64;
    let x = |t: DateTime<Utc>| ((t - from).num_seconds() as f64 / span * WIDTH).clamp(0.0, WIDTH);
    let marks: Vec<&AuditEntry> = audit
        .iter()
        .filter(|a| a.entry.at >= from && a.entry.at <= to && a.entry.outcome != Outcome::Intent)
        .collect();
    let peak = samples.iter().map(|s| s.percent).fold(0.0, f64::max);
    let summary = format!(
        "{} readings from {} to {}, highest {peak:.0} %{}",
        samples.len(),
        samples[0].at.format("%H:%M"),
        samples[samples.len() - 1].at.format("%H:%M"),
        threshold.map_or(String::new(), |t| format!(", idle below {t:.0} %"))
    );
    html! {
        figure.chart {
            svg.gpu viewBox=(format!("0 0 {WIDTH} {HEIGHT}")) role="img"
                aria-labelledby="gpu-title gpu-desc" preserveAspectRatio="none" {
                title #gpu-title { "GPU utilisation of " (id) " over the last 24 hours" }
                desc #gpu-desc { (summary) }
                rect.backdrop x="0" y="0" width=(WIDTH) height=(HEIGHT) {}
                @if let Some(t) = threshold {
                    @let y = HEIGHT - t.clamp(0.0, 100.0) / 100.0 * HEIGHT;
                    line.threshold x1="0" x2=(WIDTH) y1=(format!("{y:.1}")) y2=(format!("{y:.1}")) {
                        title { "idle below " (t) " %" }
                    }
                }
                @for points in runs(samples, x) {
                    polyline.gpu-line points=(points) {}
                }
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
                span { "0 % at the bottom, 100 % at the top" }
            }
            figcaption {
                ul.legend {
                    li { span.swatch.gpu-swatch {} "GPU utilisation (the busiest GPU)" }
                    @if threshold.is_some() { li { span.swatch.threshold-swatch {} "idle threshold" } }
                    li { span.swatch.mark-swatch {} "an audited action" }
                }
                p.visually-hidden { (summary) }
            }
        }
        p.note { "GPU readings from " (time(from)) " to " (time(to)) "; a gap means none was taken." }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_gap_longer_than_a_reading_covers_breaks_the_line() {
        let t = |m: i64| {
            "2026-11-30T10:00:00Z".parse::<DateTime<Utc>>().unwrap() + Duration::minutes(m)
        };
        let at = |m: i64, percent: f64| Sample::new(t(m), percent);
        let samples = [at(0, 0.0), at(5, 100.0), at(10, 50.0), at(30, 20.0)];
        let lines = runs(&samples, |s| (s - t(0)).num_minutes() as f64);
        assert_eq!(lines, ["0.0,120.0 5.0,0.0 10.0,60.0", "30.0,96.0"]);
    }
}
