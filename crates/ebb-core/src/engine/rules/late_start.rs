//! A late start: a person started the instance outside work hours. Their choice stands until the
//! instance has gone idle, counted from the start (`work_hours.late_start`); then it is stopped
//! for being outside hours, after the notice if the policy gives one.

use super::idle::{coverage, Coverage};
use super::stop::NoticeFor;
use super::text::{percent_text, span};
use super::{verdict, Action, Activity, Code, Eval, Trace, Verdict};
use crate::policy::{MissingMetrics, OutsideHours, SignalSource, WorkHours};
use crate::schedule::ScheduleStatus;
use chrono::{DateTime, Utc};

impl Eval<'_> {
    /// When a person started the instance since work hours closed and the policy keeps such a
    /// start: `Some` with the verdict (kept, or stopped as idle now); `None` otherwise, for the
    /// rules that stop any running instance outside hours.
    pub(super) fn late_start(
        &self,
        wh: &WorkHours,
        st: ScheduleStatus,
        trace: &mut Trace,
    ) -> Option<Verdict> {
        let now = self.now();
        let started = self.facts.started_by_person_at.filter(|t| *t <= now)?;
        let Some((idle_for, missing)) = self.policy.late_start_idle() else {
            trace.note(|| {
                format!(
                    "started by a person {}; late_start: enforce, so outside hours it is stopped like any other",
                    self.at(started)
                )
            });
            return None;
        };
        // Started before the close: in work hours, a box left running from the day.
        if st.since.is_some_and(|close| started < close) {
            trace.note(|| {
                format!(
                    "started by a person {}, before the close: not a late start",
                    self.at(started)
                )
            });
            return None;
        }
        let who = || {
            format!(
                "started by a person at {} outside work hours",
                self.at(started)
            )
        };
        // The reason's detail (why it is not idle yet, and when it is stopped at the earliest
        // if it stays idle: the countdown people see) is written only when reasons are.
        let kept =
            |why: &dyn Fn() -> String, earliest: Option<DateTime<Utc>>, trace: &mut Trace| {
                let text = self.text(|| {
                    let why = why();
                    let why = match why.is_empty() {
                        true => why,
                        false => format!(": {why}"),
                    };
                    let countdown = earliest.map_or(String::new(), |t| {
                        format!(
                            "; if it stays idle, stopped at {} at the earliest",
                            self.at(t)
                        )
                    });
                    format!(
                        "{}; kept until idle for {}{why}{countdown}",
                        who(),
                        span(idle_for)
                    )
                });
                trace.note(|| format!("late start: {text}"));
                verdict(Action::None, Code::LateStartKept, text)
            };
        if now < started + idle_for {
            return Some(kept(&String::new, Some(started + idle_for), trace));
        }
        if let Some(why) = self.gpu_unread() {
            return Some(verdict(
                Action::None,
                Code::MetricsUnreadable,
                self.text(|| format!(
                    "{}; GPU utilisation could not be read ({why}): idle or not is unknown, so it is kept",
                    who()
                )),
            ));
        }
        let threshold = self.policy.busy_threshold();
        let found = coverage(&self.inst.gpu_util, now, idle_for, threshold);
        trace.note(|| {
            format!(
                "late start: idle for {} below {threshold}%: {}",
                span(idle_for),
                found.describe(self)
            )
        });
        let idle = match found {
            Coverage::Busy { at, percent } => {
                return Some(kept(
                    &|| format!("GPU at {}% at {}", percent_text(percent), self.at(at)),
                    Some(at + idle_for),
                    trace,
                ))
            }
            Coverage::Missing(gap) if missing == MissingMetrics::Busy => {
                return Some(kept(
                    &|| format!("GPU metrics incomplete ({gap}); counted as busy"),
                    None,
                    trace,
                ))
            }
            idle => idle,
        };
        match self.activity(idle_for) {
            Activity::Unused(_) => {}
            Activity::Used(signal, at) => {
                let used = Activity::Used(signal, at);
                // A heartbeat keeps it while fresh; a reading, for idle_for after it.
                let until = match signal.source {
                    SignalSource::Heartbeat { max_age } => at + max_age,
                    SignalSource::Jupyter { .. }
                    | SignalSource::Prometheus { .. }
                    | SignalSource::Cloudwatch { .. } => at + idle_for,
                };
                return Some(kept(&|| used.text(|t| self.at(t)), Some(until), trace));
            }
            unread => return Some(kept(&|| unread.text(|t| self.at(t)), None, trace)),
        }
        let action = match wh.outside_hours {
            OutsideHours::Hibernate => Action::Hibernate,
            _ => Action::Stop,
        };
        let stop = verdict(
            action,
            Code::LateStartIdle,
            self.text(|| {
                let how = match idle {
                    Coverage::Idle { samples, max } => format!(
                        "{samples} samples, max {}% < {threshold}%",
                        percent_text(max)
                    ),
                    Coverage::Missing(gap) => format!(
                        "GPU metrics incomplete ({gap}) and missing_metrics is idle; no sample ≥ {threshold}%"
                    ),
                    Coverage::Busy { .. } => String::new(),
                };
                format!("{}; GPU idle for {}: {how}", who(), span(idle_for))
            }),
        );
        Some(self.with_notice(stop, NoticeFor::Now, trace))
    }
}
