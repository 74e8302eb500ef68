//! The runtime limit (`runtime.max`): a box that has run that long since its last start is
//! stopped after its notice whether its GPUs are busy or not, a hard limit for runaway work.
//! Only a protection keeps it (an override, which is what a snooze link makes, or
//! `ebb:keep-until`).

use super::protection::Protection;
use super::text::span;
use super::{verdict, Action, Code, Eval, Trace, Verdict};
use crate::policy::RuntimeLimit;
use chrono::{DateTime, Utc};

impl Eval<'_> {
    /// The runtime limit's verdict once its notice is due: the notice, the stop once the limit
    /// is reached and the notice is `notify_before` old, the pending stop in between, or the
    /// protection that keeps the box. `None` before the notice is due, without the rule, or
    /// when the box's last start is unknown (then nothing is stopped for its runtime).
    pub(super) fn runtime_limit(
        &self,
        protection: Option<&Protection>,
        trace: &mut Trace,
    ) -> Option<Verdict> {
        let rule = self.policy.runtime.as_ref()?;
        let Some(started) = self.inst.launched_at else {
            trace.note(|| format!(
                "runtime.max {}: when it last started is unknown (its cloud does not say), so it is not stopped for its runtime",
                span(rule.max)
            ));
            return None;
        };
        let now = self.now();
        let limit = started + rule.max;
        let notice_from = limit - rule.notify_before;
        if now < notice_from {
            trace.note(|| {
                format!(
                    "runtime.max {}: started {}, reaches it {}",
                    span(rule.max),
                    self.at(started),
                    self.at(limit)
                )
            });
            return None;
        }
        if let Some(p) = protection {
            trace.note(|| {
                format!(
                    "runtime.max {} reached or near, but protected",
                    span(rule.max)
                )
            });
            return Some(p.verdict());
        }
        let ran = || {
            format!(
                "running since {}: runtime.max {} {} at {}",
                self.at(started),
                span(rule.max),
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

    /// The notice of the runtime stop: for the moment the limit is reached, or, when the notice
    /// comes late (ebb was not running), `notify_before` from now.
    fn runtime_notice(&self, rule: &RuntimeLimit, limit: DateTime<Utc>, ran: String) -> Verdict {
        let stop_at = limit.max(self.now() + rule.notify_before);
        Verdict {
            action: Action::Notify,
            code: Code::RuntimeNotice,
            reason: self.text(|| format!("{ran}; notice now, stop at {}", self.at(stop_at))),
            stop_at: Some(stop_at),
        }
    }
}
