//! The idle rule: whether the GPU samples show an instance idle over the rule's window.

use super::text::{percent_text, span};
use super::{verdict, Action, Activity, Code, Eval, Trace, Verdict, RECENT};
use crate::fleet::Sample;
use crate::policy::{IdleAction, IdleRule, MissingMetrics, SignalSource};
use chrono::{DateTime, Duration, Utc};

impl Eval<'_> {
    /// The newest sample at or above `threshold` in the last [`RECENT`], ignoring samples after
    /// now.
    pub(super) fn busy_sample(&self, threshold: f64) -> Option<(DateTime<Utc>, f64)> {
        let now = self.now();
        let since = now - RECENT;
        self.inst
            .gpu_util
            .iter()
            .rev()
            .filter(|s| s.at <= now)
            .take_while(|s| s.at >= since)
            .find(|s| s.percent >= threshold)
            .map(|s| (s.at, s.percent))
    }

    /// `Ok` with the stop when the idle rule stops the instance; `Err` with the code and reason
    /// why it does not.
    pub(super) fn idle(
        &self,
        rule: &IdleRule,
        trace: &mut Trace,
    ) -> Result<Verdict, (Code, String)> {
        let now = self.now();
        let action = match rule.action {
            IdleAction::Stop => Action::Stop,
            IdleAction::Hibernate => Action::Hibernate,
        };
        if let Some(started) = self.inst.launched_at {
            if started + rule.grace_after_start > now {
                let why = self.text(|| {
                    format!(
                        "idle rule: started {}, within grace_after_start {}",
                        self.at(started),
                        span(rule.grace_after_start)
                    )
                });
                trace.note(|| why.clone());
                return Err((Code::IdleGrace, why));
            }
        }
        if let Some(unread) = self.gpu_unread() {
            // A failed read is not an empty one: `missing_metrics` is only for a read that
            // found too little data.
            let why = self.text(|| format!(
                "GPU utilisation could not be read ({unread}): idle or not is unknown, so no idle stop"
            ));
            trace.note(|| {
                format!(
                    "idle rule ({}% for {}): {why}, whatever missing_metrics says",
                    rule.gpu_below,
                    span(rule.window)
                )
            });
            return Err((Code::MetricsUnreadable, why));
        }
        let mut coverage = idle_coverage(&self.inst.gpu_util, now, rule);
        if let (Some(limit), false) = (
            rule.gpu_memory_below,
            matches!(coverage, Coverage::Busy { .. }),
        ) {
            match memory_held(&self.inst.gpu_util, now, rule.window, limit) {
                Memory::Held { at, mib } => {
                    let why = self.text(|| format!(
                        "GPU memory {mib} MiB in use at {}, not below gpu_memory_below {limit} MiB: a model is loaded",
                        self.at(at)
                    ));
                    trace.note(|| format!("idle rule (memory below {limit} MiB): {why}"));
                    return Err((Code::NotIdle, why));
                }
                // Below the utilisation threshold, but memory unknown: as short of data.
                Memory::Unknown(samples) if matches!(coverage, Coverage::Idle { .. }) => {
                    coverage = Coverage::Missing(Gap::NoMemory(samples));
                }
                Memory::Unknown(_) | Memory::Below => {}
            }
        }
        trace.note(|| {
            format!(
                "idle rule ({}% for {}): {}",
                rule.gpu_below,
                span(rule.window),
                coverage.describe(self)
            )
        });
        let window = || span(rule.window);
        // Whether the GPUs alone would stop it: then anything else showing use keeps it.
        let gpu_would_stop = match coverage {
            Coverage::Busy { .. } => false,
            Coverage::Missing(_) => rule.missing_metrics == MissingMetrics::Idle,
            Coverage::Idle { .. } => true,
        };
        if !rule.activity.is_empty() {
            trace.note(|| {
                format!(
                    "activity over {}: {}",
                    window(),
                    self.activity_lines(rule.window).join("; ")
                )
            });
        }
        // Read only when the GPUs alone would stop it: a busy box needs no more.
        let activity = gpu_would_stop.then(|| self.activity(rule.window));
        let unused = match activity {
            None => String::new(),
            Some(activity @ Activity::Used(signal, at)) => {
                // The countdown people see: a heartbeat keeps the box while fresh, any other
                // use for the rule's window after it.
                let earliest = match signal.source {
                    SignalSource::Heartbeat { max_age } => at + max_age,
                    _ => at + rule.window,
                };
                return Err((
                    Code::InUse,
                    self.text(|| {
                        format!(
                            "GPU not busy, but {}; if nothing more is used, stopped at {} at the earliest",
                            activity.text(|t| self.at(t)),
                            self.at(earliest)
                        )
                    }),
                ));
            }
            Some(activity @ Activity::Unread(..)) => {
                return Err((
                    Code::ActivityUnreadable,
                    self.text(|| {
                        format!(
                            "GPU not busy, but {}, so no idle stop",
                            activity.text(|t| self.at(t))
                        )
                    }),
                ))
            }
            Some(Activity::Unused(ref signals)) if signals.is_empty() => String::new(),
            Some(ref activity) => self.text(|| {
                format!(
                    "; no use in the window shown by {}",
                    activity.text(|t| self.at(t))
                )
            }),
        };
        match coverage {
            Coverage::Busy { at, percent } => Err((
                Code::NotIdle,
                self.text(|| format!("GPU at {}% at {}, not below {}% for {}", percent_text(percent), self.at(at), rule.gpu_below, window())),
            )),
            Coverage::Idle { samples, max } => Ok(verdict(
                action,
                Code::Idle,
                self.text(|| format!(
                    "GPU idle: {samples} samples over the last {}, max {}% < {}%{unused}",
                    window(),
                    percent_text(max),
                    rule.gpu_below
                )),
            )),
            Coverage::Missing(why) => match rule.missing_metrics {
                MissingMetrics::Idle => Ok(verdict(
                    action,
                    Code::IdleMetricsMissing,
                    self.text(|| format!("GPU metrics incomplete ({why}) and missing_metrics is idle; no sample ≥ {}%{unused}", rule.gpu_below)),
                )),
                MissingMetrics::Busy => Err((
                    Code::MetricsMissing,
                    self.text(|| format!("GPU metrics incomplete ({why}); counted as busy")),
                )),
            },
        }
    }
}

impl Eval<'_> {
    /// An idle stop weighed against getting the instance back: the verdict that keeps it when
    /// the next opening is within `idle.min_gap` and EC2 refused a start of its type in its
    /// region for lack of capacity within `idle.capacity_memory`.
    pub(super) fn capacity_risk(&self, rule: &IdleRule) -> Option<Verdict> {
        let gap = rule.min_gap?;
        let st = self.status?;
        let open = st.next.filter(|_| !st.in_hours)?;
        let now = self.now();
        if open - now >= gap {
            return None;
        }
        let (region, ty) = (&self.inst.region, &self.inst.instance_type);
        let refused = self.ctx.prior.last_capacity_failure(region, ty)?;
        if refused + rule.capacity_memory <= now {
            return None;
        }
        Some(verdict(
            Action::None,
            Code::CapacityRiskKept,
            self.text(|| {
                format!(
                    "idle, but work hours open at {} (within idle.min_gap {}) and EC2 refused a start of {ty} in {region} for lack of capacity at {} (within idle.capacity_memory {}): kept rather than risk not getting it back",
                    self.at(open),
                    span(gap),
                    self.at(refused),
                    span(rule.capacity_memory)
                )
            }),
        ))
    }
}

/// What the GPU samples say over an idle rule's window.
#[derive(Debug, Clone, PartialEq)]
pub enum Coverage {
    /// A sample at or above the threshold.
    Busy {
        /// When.
        at: DateTime<Utc>,
        /// How busy.
        percent: f64,
    },
    /// Every sample below the threshold and the window covered.
    Idle {
        /// How many samples.
        samples: usize,
        /// The highest.
        max: f64,
    },
    /// No sample at or above the threshold, but the window is not covered; why.
    Missing(Gap),
}

/// Why samples do not cover an idle rule's window; written out only for a reason, so that a
/// replay, which shows none, formats nothing.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Gap {
    /// No samples in the window, this long.
    NoSamples(Duration),
    /// The first sample is this long after the window starts.
    LateFirst(Duration),
    /// Two samples this far apart.
    Between(Duration),
    /// The newest sample is this old.
    Stale(Duration),
    /// This many samples without the GPU memory that `gpu_memory_below` looks at.
    NoMemory(usize),
}

impl std::fmt::Display for Gap {
    fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        match *self {
            Gap::NoSamples(window) => write!(f, "no samples in the last {}", span(window)),
            Gap::LateFirst(d) => write!(f, "first sample {} after the window starts", span(d)),
            Gap::Between(d) => write!(f, "a gap of {} in the samples", span(d)),
            Gap::Stale(d) => write!(f, "newest sample {} old", span(d)),
            Gap::NoMemory(n) => write!(
                f,
                "{n} samples without a GPU memory reading, which gpu_memory_below needs"
            ),
        }
    }
}

impl Coverage {
    pub(super) fn describe(&self, e: &Eval) -> String {
        match self {
            Coverage::Busy { at, percent } => format!("busy, {percent}% at {}", e.at(*at)),
            Coverage::Idle { samples, max } => {
                format!("idle, {samples} samples, max {}%", percent_text(*max))
            }
            Coverage::Missing(why) => format!("not covered by data: {why}"),
        }
    }
}

/// What the GPU memory of a window's samples says against `gpu_memory_below`.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Memory {
    /// The newest sample holding at least the limit: when, and how much.
    Held { at: DateTime<Utc>, mib: u32 },
    /// Every sample below the limit, or the window empty.
    Below,
    /// None at or above the limit, but this many samples without a memory reading.
    Unknown(usize),
}

/// The memory of the samples of `[now - length, now]` against `limit` MiB.
fn memory_held(samples: &[Sample], now: DateTime<Utc>, length: Duration, limit: u32) -> Memory {
    let window = within(samples, now, length);
    if let Some((s, mib)) = window
        .iter()
        .rev()
        .find_map(|s| s.memory_mib.filter(|m| *m >= limit).map(|m| (s, m)))
    {
        return Memory::Held { at: s.at, mib };
    }
    match window.iter().filter(|s| s.memory_mib.is_none()).count() {
        0 => Memory::Below,
        n => Memory::Unknown(n),
    }
}

/// Evaluates an idle rule's window `[now - for, now]` over `samples` (oldest first). Covered
/// means: the first sample no later than [`RECENT`] after the window starts, no gap over
/// [`RECENT`], the newest no older than [`RECENT`]. Samples after `now` are ignored.
pub fn idle_coverage(samples: &[Sample], now: DateTime<Utc>, rule: &IdleRule) -> Coverage {
    coverage(samples, now, rule.window, rule.gpu_below)
}

/// [`idle_coverage`] over `[now - window, now]` with `threshold`: for a rule, or a late start.
pub(super) fn coverage(
    samples: &[Sample],
    now: DateTime<Utc>,
    length: Duration,
    threshold: f64,
) -> Coverage {
    let window = within(samples, now, length);
    if let Some(s) = window.iter().rev().find(|s| s.percent >= threshold) {
        return Coverage::Busy {
            at: s.at,
            percent: s.percent,
        };
    }
    if let Some(gap) = gap(window, now, length) {
        return Coverage::Missing(gap);
    }
    Coverage::Idle {
        samples: window.len(),
        max: window.iter().map(|s| s.percent).fold(0.0, f64::max),
    }
}

/// The samples of `[now - length, now]`.
pub(super) fn within(samples: &[Sample], now: DateTime<Utc>, length: Duration) -> &[Sample] {
    let start = now - length;
    let lo = samples.partition_point(|s| s.at < start);
    let hi = samples.partition_point(|s| s.at <= now);
    &samples[lo..hi.max(lo)]
}

/// Why `window`, the samples of `[now - length, now]`, does not cover it, if it does not: the
/// first sample later than [`RECENT`] after the start, a gap over [`RECENT`], or the newest
/// older than [`RECENT`].
pub(super) fn gap(window: &[Sample], now: DateTime<Utc>, length: Duration) -> Option<Gap> {
    let start = now - length;
    let (Some(first), Some(last)) = (window.first(), window.last()) else {
        return Some(Gap::NoSamples(length));
    };
    if first.at - start > RECENT {
        return Some(Gap::LateFirst(first.at - start));
    }
    if let Some(w) = window.windows(2).find(|w| w[1].at - w[0].at > RECENT) {
        return Some(Gap::Between(w[1].at - w[0].at));
    }
    (now - last.at > RECENT).then(|| Gap::Stale(now - last.at))
}
