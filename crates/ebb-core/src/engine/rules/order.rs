//! The order of the rules for one instance: by its state, then for a running instance each
//! rule in turn, the first that asks for an action deciding.

use super::protection::Protection;
use super::stop::NoticeFor;
use super::text::span;
use super::{verdict, Action, Code, Eval, Trace, Verdict, RECENT};
use crate::fleet::InstanceState;
use crate::names::MIGRATING_TAG;
use crate::policy::{IdleWhen, OutsideHours, WorkHours};
use crate::schedule::ScheduleStatus;
use chrono::{DateTime, Utc};
use std::ops::ControlFlow;

impl Eval<'_> {
    /// The verdict for the instance, by its state.
    pub(super) fn run(&self, trace: &mut Trace) -> Verdict {
        if let (Some(wh), Some(st)) = (&self.policy.work_hours, self.status) {
            trace.note(|| self.describe_hours(wh, st));
        }
        if let Some(id) = self.inst.tag(MIGRATING_TAG) {
            trace.note(|| {
                format!("tag ebb:migrating={id}: its spot migration acts on it, not the rules")
            });
            return verdict(
                Action::None,
                Code::Migrating,
                self.text(|| format!("spot migration {id} is under way (see ebb spot-moves)")),
            );
        }
        match self.inst.state {
            InstanceState::Terminated => verdict(
                Action::None,
                Code::Terminated,
                self.text(|| "terminated".into()),
            ),
            InstanceState::Pending | InstanceState::Stopping | InstanceState::ShuttingDown => {
                verdict(
                    Action::None,
                    Code::InTransition,
                    self.text(|| format!("{}; waiting for it to settle", self.inst.state.as_str())),
                )
            }
            InstanceState::Stopped => {
                let v = self.stopped(trace);
                self.refused_start(v, trace)
            }
            InstanceState::Running => self.running(trace),
        }
    }

    fn describe_hours(&self, wh: &WorkHours, st: ScheduleStatus) -> String {
        let when = |t: Option<DateTime<Utc>>| t.map_or("beyond the horizon".into(), |t| self.at(t));
        let tz = wh.schedule.timezone.name();
        let day = self.day_note();
        if st.in_hours {
            format!(
                "work hours ({tz}): open since {}, close {}{day}",
                when(st.since),
                when(st.next)
            )
        } else if let Some(open) = self.opening_ahead() {
            format!(
                "work hours ({tz}): closed since {}, open {}; starting {} ahead of {}{}: stopped instances start, running ones are not stopped{day}",
                when(st.since),
                self.at(open),
                span(self.lead()),
                self.at(open),
                self.early_note()
            )
        } else {
            format!(
                "work hours ({tz}): closed since {}, open {}{day}",
                when(st.since),
                when(st.next)
            )
        }
    }

    /// A running instance: the runtime limit first (busy or not), or a spent budget's stop,
    /// then stops outside work hours
    /// (a person's start after the close only once it has gone idle), the idle rule, the notice
    /// before the close and the spot rule, in that order; the first that asks for an action
    /// decides. A runtime or budget stop whose notice is out stands when no other rule acts.
    fn running(&self, trace: &mut Trace) -> Verdict {
        let protection = self.protection(trace);
        let limit = self
            .runtime_limit(protection.as_ref(), trace)
            .or_else(|| self.budget_stop(protection.as_ref(), trace));
        let runtime = match limit {
            Some(v) if v.action != Action::None || protection.is_some() => return v,
            pending => pending,
        };
        let v = self.running_rules(protection, trace);
        match runtime {
            Some(pending) if v.action == Action::None => pending,
            _ => v,
        }
    }

    /// The rules after the runtime limit, for a running instance.
    fn running_rules(&self, protection: Option<Protection>, trace: &mut Trace) -> Verdict {
        let threshold = self.policy.busy_threshold();
        let busy = self.busy_sample(threshold);
        trace.note(|| match (self.gpu_unread(), busy) {
            (Some(why), _) => format!(
                "busy: unknown, GPU utilisation could not be read ({why}); nothing is stopped for idleness, nor while busy would defer a stop"
            ),
            (None, Some((t, p))) => format!(
                "busy: {p}% at {} (threshold {threshold}%, last {})",
                self.at(t),
                span(RECENT)
            ),
            (None, None) => format!(
                "not busy: no sample at or above {threshold}% in the last {}",
                span(RECENT)
            ),
        });
        // In the lead time before an opening the hours count as open: what start_ahead
        // started, or found running, is kept for the opening.
        let outside = match (&self.policy.work_hours, self.status) {
            (Some(wh), Some(st)) if !st.in_hours && self.opening_ahead().is_none() => {
                Some((wh, st))
            }
            _ => None,
        };
        if let Some((wh, st)) = outside {
            if wh.outside_hours != OutsideHours::None {
                // A protection keeps the instance whatever the late start says.
                if let Some(v) = protection
                    .is_none()
                    .then(|| self.late_start(wh, st, trace))
                    .flatten()
                {
                    return v;
                }
                return self.scheduled_stop(wh, st, protection, busy, threshold, trace);
            }
        }
        let idle_code = match self.idle_step(outside.is_some(), protection.as_ref(), trace) {
            ControlFlow::Break(v) => return v,
            ControlFlow::Continue(code) => code,
        };
        if let Some(v) = self.close_notice(protection.is_some()) {
            return v;
        }
        let not_spot = match self.spot_step(protection.as_ref(), trace) {
            ControlFlow::Break(v) => return v,
            ControlFlow::Continue(why) => why,
        };
        if let Some((code, reason)) = idle_code {
            return verdict(Action::None, code, reason);
        }
        self.no_change(outside.is_some(), not_spot)
    }

    /// The idle rule, when it applies now: `Break` with the verdict when it stops the instance
    /// (or a protection keeps it), `Continue` with why it does not.
    fn idle_step(
        &self,
        outside: bool,
        protection: Option<&Protection>,
        trace: &mut Trace,
    ) -> ControlFlow<Verdict, Option<(Code, String)>> {
        let Some(rule) = &self.policy.idle else {
            return ControlFlow::Continue(None);
        };
        let mut by_budget = None;
        if rule.when != IdleWhen::Always && !outside {
            by_budget = self.idle_at_any_hour(trace);
            if by_budget.is_none() {
                trace.note(|| "idle rule: applies only outside work hours".into());
                return ControlFlow::Continue(None);
            }
        }
        match self.idle(rule, trace) {
            Ok(mut v) => ControlFlow::Break(match (protection, self.capacity_risk(rule)) {
                (Some(p), _) => p.verdict(),
                (None, Some(kept)) => kept,
                (None, None) => {
                    if let Some(s) = by_budget {
                        v.code = Code::BudgetExhausted;
                        v.reason = self.text(|| {
                            format!(
                                "{}; at_limit: stop_idle, so the idle rule applies at any hour until {}: {}",
                                s.summary, s.until, v.reason
                            )
                        });
                    }
                    self.with_notice(v, NoticeFor::Now, trace)
                }
            }),
            Err(code) => ControlFlow::Continue(Some(code)),
        }
    }

    /// The notice before work hours close, when it is due and nothing protects the instance.
    fn close_notice(&self, protected: bool) -> Option<Verdict> {
        let (Some(wh), Some(st), Some(n)) =
            (&self.policy.work_hours, self.status, &self.policy.notify)
        else {
            return None;
        };
        let close = st
            .next
            .filter(|c| st.in_hours && self.now() >= *c - n.before);
        match (close, wh.outside_hours != OutsideHours::None, protected) {
            (Some(close), true, false) => Some(self.notice_before_close(close, n.before)),
            _ => None,
        }
    }

    /// The spot rule: `Break` with the move (or the protection that blocks it), `Continue` with
    /// why the instance is not moved.
    fn spot_step(
        &self,
        protection: Option<&Protection>,
        trace: &mut Trace,
    ) -> ControlFlow<Verdict, Option<String>> {
        let Some(rule) = &self.policy.spot else {
            return ControlFlow::Continue(None);
        };
        match self.spot(rule) {
            Ok(reason) => {
                trace.note(|| format!("spot: eligible: {reason}"));
                ControlFlow::Break(match (protection, &self.inst.via_role) {
                    (Some(p), _) => p.verdict(),
                    // Its image and replacement would be made in ebb's own account, where the
                    // launch cannot find its disks: refused before anything is stopped.
                    (None, Some(role)) => verdict(
                        Action::None,
                        Code::SpotOtherAccount,
                        self.text(|| format!(
                            "{reason}; but it is in another account (listed through role {role}): ebb moves only instances of its own account to spot"
                        )),
                    ),
                    (None, None) => verdict(Action::MigrateToSpot, Code::SpotSavings, reason),
                })
            }
            Err(why) => {
                trace.note(|| format!("spot: not eligible: {why}"));
                ControlFlow::Continue(Some(why))
            }
        }
    }

    /// Running in the lead time before an opening: not stopped for being outside hours.
    fn kept_for_opening(&self) -> Verdict {
        verdict(
            Action::None,
            Code::StartAheadKept,
            self.text(|| {
                let open = self.opening_ahead().map_or(String::new(), |t| self.at(t));
                format!(
                    "outside work hours, but they open {open} and start_ahead is {}{}: kept running for the opening",
                    span(self.lead()),
                    self.early_note()
                )
            }),
        )
    }

    /// No rule asks for anything: say where the instance stands.
    fn no_change(&self, outside: bool, not_spot: Option<String>) -> Verdict {
        match (outside, self.status) {
            (true, _) => verdict(
                Action::None,
                Code::OutsideHoursKept,
                self.text(|| "outside work hours; outside_hours is none".into()),
            ),
            (false, Some(st)) if !st.in_hours => self.kept_for_opening(),
            (false, Some(st)) => {
                let reason = self.text(|| {
                    let close = st
                        .next
                        .map_or(String::new(), |t| format!(" (close {})", self.at(t)));
                    format!("in work hours{close}{}", self.day_note())
                });
                verdict(Action::None, Code::InHours, reason)
            }
            (false, None) => verdict(
                Action::None,
                Code::NoRuleApplies,
                self.text(|| match not_spot {
                    Some(why) => format!("running; not moved to spot: {why}"),
                    None => "running; no rule asks for a change".into(),
                }),
            ),
        }
    }
}
