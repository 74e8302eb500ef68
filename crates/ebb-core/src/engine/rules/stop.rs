//! Stops outside work hours, busy deferral, and the notices before a stop.

use super::protection::Protection;
use super::text::{percent_text, span};
use super::{verdict, Action, Activity, Code, Eval, Trace, Verdict, NOTICE_SLACK, RECENT};
use crate::policy::{OutsideHours, WorkHours};
use crate::schedule::ScheduleStatus;
use chrono::{DateTime, Duration, Utc};

/// How a notice counts for a stop.
#[derive(Clone, Copy)]
pub(super) enum NoticeFor {
    /// A stop at the close of work hours at this instant.
    Close(DateTime<Utc>),
    /// A stop for a reason that holds now (idle): only a recent notice counts.
    Now,
}

impl Eval<'_> {
    /// Outside work hours: the stop or hibernation, unless a protection keeps the instance or
    /// busy deferral waits (for a busy GPU, or one whose utilisation could not be read).
    pub(super) fn scheduled_stop(
        &self,
        wh: &WorkHours,
        st: ScheduleStatus,
        protection: Option<Protection>,
        busy: Option<(DateTime<Utc>, f64)>,
        threshold: f64,
        trace: &mut Trace,
    ) -> Verdict {
        let closed = || {
            let since = st
                .since
                .map_or(String::new(), |t| format!(" (closed {})", self.at(t)));
            since + &self.day_note()
        };
        if let Some(p) = protection {
            return verdict(Action::None, p.code, p.reason);
        }
        let action = match wh.outside_hours {
            OutsideHours::Hibernate => Action::Hibernate,
            _ => Action::Stop,
        };
        let mut v = verdict(
            action,
            Code::OutsideHours,
            self.text(|| format!("outside work hours{}", closed())),
        );
        if wh.busy_defers_stop {
            let deadline = match (wh.max_defer, st.since) {
                (Some(max), Some(close)) => Some(close + max),
                _ => None,
            };
            let past_deadline = deadline.is_some_and(|d| self.now() >= d);
            let max_defer = || span(wh.max_defer.unwrap_or_default());
            let until = || {
                deadline.map_or("until idle".to_string(), |d| {
                    format!("until idle or {}", self.at(d))
                })
            };
            match (self.gpu_unread(), busy) {
                // Busy or not, the stop would happen now: the unknown changes nothing.
                (Some(why), _) if past_deadline => {
                    v.code = Code::MaxDeferReached;
                    v.reason = self.text(|| format!(
                        "outside work hours{}; GPU utilisation could not be read ({why}), but max_defer {} has passed",
                        closed(),
                        max_defer()
                    ));
                }
                (Some(why), _) => {
                    return verdict(
                        Action::None,
                        Code::MetricsUnreadable,
                        self.text(|| format!(
                            "outside work hours{}, but GPU utilisation could not be read ({why}): busy or not is unknown; stop deferred {}",
                            closed(),
                            until()
                        )),
                    );
                }
                (None, Some((at, pct))) if past_deadline => {
                    v.code = Code::MaxDeferReached;
                    v.reason = self.text(|| {
                        format!(
                            "outside work hours{}; busy ({}% at {}) but max_defer {} has passed",
                            closed(),
                            percent_text(pct),
                            self.at(at),
                            max_defer()
                        )
                    });
                }
                (None, Some((at, pct))) => {
                    return verdict(
                        Action::None,
                        Code::BusyDeferred,
                        self.text(|| format!(
                            "outside work hours{}, but GPU busy ({}% at {} ≥ {threshold}%); stop deferred {}",
                            closed(),
                            percent_text(pct),
                            self.at(at),
                            until()
                        )),
                    );
                }
                // The GPUs are not busy: a person using the box defers the stop as they would.
                (None, None) => match self.activity(RECENT) {
                    Activity::Unused(_) => {}
                    activity if past_deadline => {
                        v.code = Code::MaxDeferReached;
                        v.reason = self.text(|| {
                            format!(
                                "outside work hours{}; {} but max_defer {} has passed",
                                closed(),
                                activity.text(|t| self.at(t)),
                                max_defer()
                            )
                        });
                    }
                    activity => {
                        let code = match activity {
                            Activity::Used(..) => Code::InUse,
                            _ => Code::ActivityUnreadable,
                        };
                        return verdict(
                            Action::None,
                            code,
                            self.text(|| {
                                format!(
                                    "outside work hours{}, but {}; stop deferred {}",
                                    closed(),
                                    activity.text(|t| self.at(t)),
                                    until()
                                )
                            }),
                        );
                    }
                },
            }
        }
        // Why late: the stop waited for a busy GPU since then.
        if let Some(since) = self.facts.busy_deferred_since.filter(|t| *t <= self.now()) {
            let stop = std::mem::take(&mut v.reason);
            v.reason = self.text(|| {
                format!(
                    "{stop}; waited {} while the GPU was busy (since {})",
                    span(self.now() - since),
                    self.at(since)
                )
            });
        }
        let notice = st.since.map_or(NoticeFor::Now, NoticeFor::Close);
        self.with_notice(v, notice, trace)
    }

    /// Gates a stop behind the policy's notice: a stop happens only once a notice for it is
    /// `before` old; a missing notice is sent now, which delays the stop.
    pub(super) fn with_notice(
        &self,
        stop: Verdict,
        notice_for: NoticeFor,
        trace: &mut Trace,
    ) -> Verdict {
        match &self.policy.notify {
            Some(n) => self.after_notice(stop, notice_for, n.before, trace),
            None => stop,
        }
    }

    /// Gates a stop behind a notice `before` ahead of it, as [`Eval::with_notice`] does with
    /// the policy's.
    pub(super) fn after_notice(
        &self,
        stop: Verdict,
        notice_for: NoticeFor,
        before: Duration,
        trace: &mut Trace,
    ) -> Verdict {
        let now = self.now();
        let counts = |sent: DateTime<Utc>| match notice_for {
            NoticeFor::Close(close) => sent >= close - before,
            NoticeFor::Now => sent >= now - before - NOTICE_SLACK,
        };
        match self.facts.notified_at.filter(|t| counts(*t)) {
            Some(sent) if now >= sent + before => {
                trace.note(|| format!("notice sent {}, {} ago", self.at(sent), span(now - sent)));
                Verdict {
                    reason: self.text(|| format!("{}; notice sent {}", stop.reason, self.at(sent))),
                    ..stop
                }
            }
            Some(sent) => verdict(
                Action::None,
                Code::NoticePending,
                self.text(|| {
                    format!(
                        "{}; notice sent {}, stop at {}",
                        stop.reason,
                        self.at(sent),
                        self.at(sent + before)
                    )
                }),
            ),
            None => {
                let stop_at = now + before;
                let code = match stop.code {
                    Code::Idle | Code::IdleMetricsMissing | Code::LateStartIdle => Code::IdleNotice,
                    Code::CheckpointOverdue => Code::RuntimeNotice,
                    Code::BudgetExhausted => Code::BudgetNotice,
                    _ => Code::NoticeLate,
                };
                Verdict {
                    action: Action::Notify,
                    code,
                    reason: self.text(|| {
                        format!("{}; notice now, stop at {}", stop.reason, self.at(stop_at))
                    }),
                    stop_at: Some(stop_at),
                }
            }
        }
    }

    pub(super) fn notice_before_close(&self, close: DateTime<Utc>, before: Duration) -> Verdict {
        match self.facts.notified_at.filter(|t| *t >= close - before) {
            Some(sent) => verdict(
                Action::None,
                Code::NoticePending,
                self.text(|| {
                    format!(
                        "work hours close {}; notice sent {}",
                        self.at(close),
                        self.at(sent)
                    )
                }),
            ),
            None => Verdict {
                action: Action::Notify,
                code: Code::Notice,
                reason: self.text(|| {
                    format!(
                        "work hours close {}; notice {} before the stop",
                        self.at(close),
                        span(before)
                    )
                }),
                stop_at: Some(close),
            },
        }
    }
}
