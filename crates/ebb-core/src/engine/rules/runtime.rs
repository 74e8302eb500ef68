//! The runtime limits, for work that runs away: a box that has run `runtime.max` since its last
//! start, or stayed busy for `runtime.max_busy_without_checkpoint` while its `ebb:checkpoint-at`
//! tag is older than that, is stopped after its notice whether its GPUs are busy or not. Only a
//! protection keeps it (an override, which is what a snooze link makes, or `ebb:keep-until`).

use super::idle::{gap, within};
use super::protection::Protection;
use super::stop::NoticeFor;
use super::text::span;
use super::{verdict, Action, Code, Eval, Trace, Verdict};
use crate::policy::RuntimeLimit;
use chrono::{DateTime, Duration, Utc};

impl Eval<'_> {
    /// The runtime limits' verdict once a notice is due: the notice, the stop once it is
    /// served, the pending stop in between, or the protection that keeps the box. `None`
    /// before then, without the rule, or when what a limit needs is unknown (the last start,
    /// the GPUs, the checkpoint): then nothing is stopped for it.
    pub(super) fn runtime_limit(
        &self,
        protection: Option<&Protection>,
        trace: &mut Trace,
    ) -> Option<Verdict> {
        let rule = self.policy.runtime.as_ref()?;
        let v = self
            .runtime_max(rule, trace)
            .or_else(|| self.checkpoint_overdue(rule, trace))?;
        match protection {
            Some(p) => {
                trace.note(|| format!("a runtime limit would act ({}), but protected", v.reason));
                Some(p.verdict())
            }
            None => Some(v),
        }
    }

    /// `runtime.max`, once its notice is due.
    fn runtime_max(&self, rule: &RuntimeLimit, trace: &mut Trace) -> Option<Verdict> {
        let max = rule.max?;
        let Some(started) = self.inst.launched_at else {
            trace.note(|| format!(
                "runtime.max {}: when it last started is unknown (its cloud does not say), so it is not stopped for its runtime",
                span(max)
            ));
            return None;
        };
        let now = self.now();
        let limit = started + max;
        let notice_from = limit - rule.notify_before;
        if now < notice_from {
            trace.note(|| {
                format!(
                    "runtime.max {}: started {}, reaches it {}",
                    span(max),
                    self.at(started),
                    self.at(limit)
                )
            });
            return None;
        }
        let ran = || {
            format!(
                "running since {}: runtime.max {} {} at {}",
                self.at(started),
                span(max),
                if now >= limit {
                    "reached"
                } else {
                    "is reached"
                },
                self.at(limit)
            )
        };
        Some(match self.facts.notified_at.filter(|t| *t >= notice_from) {
            None => self.runtime_notice(rule, limit, self.text(ran)),
            Some(sent) if now >= limit.max(sent + rule.notify_before) => verdict(
                Action::Stop,
                Code::RuntimeExceeded,
                self.text(|| {
                    format!(
                        "{}; stopped busy or not; notice sent {}",
                        ran(),
                        self.at(sent)
                    )
                }),
            ),
            Some(sent) => verdict(
                Action::None,
                Code::NoticePending,
                self.text(|| {
                    format!(
                        "{}; notice sent {}, stop at {}",
                        ran(),
                        self.at(sent),
                        self.at(limit.max(sent + rule.notify_before))
                    )
                }),
            ),
        })
    }

    /// The notice of the stop at `runtime.max`: for the moment it is reached, or, when the
    /// notice comes late (ebb was not running), `notify_before` from now.
    fn runtime_notice(&self, rule: &RuntimeLimit, limit: DateTime<Utc>, ran: String) -> Verdict {
        let stop_at = limit.max(self.now() + rule.notify_before);
        Verdict {
            action: Action::Notify,
            code: Code::RuntimeNotice,
            reason: self.text(|| format!("{ran}; notice now, stop at {}", self.at(stop_at))),
            stop_at: Some(stop_at),
        }
    }

    /// `runtime.max_busy_without_checkpoint`: busy at every reading over that long, all of it
    /// since the last start, and the last checkpoint older than that. A box without the tag
    /// (or with one that is not a time), or whose GPUs are unread or not covered, is not judged.
    fn checkpoint_overdue(&self, rule: &RuntimeLimit, trace: &mut Trace) -> Option<Verdict> {
        let length = rule.max_busy_without_checkpoint?;
        let now = self.now();
        let note = |trace: &mut Trace, why: &str| {
            trace.note(|| format!("max_busy_without_checkpoint {}: {why}", span(length)));
        };
        let checkpoint = match self.last_checkpoint() {
            Ok(at) if now - at >= length => at,
            Ok(at) => {
                note(trace, &format!("last checkpoint {}", self.at(at)));
                return None;
            }
            Err(why) => {
                note(trace, &format!("{why}; not judged"));
                return None;
            }
        };
        if self.inst.launched_at.is_none_or(|t| now - t < length) {
            note(
                trace,
                "not running that long since its last start (or when is unknown)",
            );
            return None;
        }
        let threshold = self.policy.busy_threshold();
        if let Some(why) = self.busy_throughout(length, threshold) {
            note(trace, &why);
            return None;
        }
        let stop = verdict(
            Action::Stop,
            Code::CheckpointOverdue,
            self.text(|| {
                format!(
                    "GPU busy (≥ {threshold}%) at every reading for the last {}, and the last checkpoint (ebb:checkpoint-at) was {}, {} ago: past runtime.max_busy_without_checkpoint, work that is not saving itself",
                    span(length),
                    self.at(checkpoint),
                    span(now - checkpoint)
                )
            }),
        );
        Some(self.after_notice(stop, NoticeFor::Now, rule.notify_before, trace))
    }

    /// Why the GPUs were not shown busy at every reading of the last `length`, if they were not.
    fn busy_throughout(&self, length: Duration, threshold: f64) -> Option<String> {
        if let Some(why) = self.gpu_unread() {
            return Some(format!("GPU utilisation could not be read ({why})"));
        }
        let now = self.now();
        let window = within(&self.inst.gpu_util, now, length);
        if let Some(s) = window.iter().rev().find(|s| s.percent < threshold) {
            return Some(format!("GPU below {threshold}% at {}", self.at(s.at)));
        }
        gap(window, now, length).map(|g| format!("busy, but not covered by data: {g}"))
    }
}
