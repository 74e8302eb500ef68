//! What a spent budget does to the boxes it matches (`at_limit`): their starts refused
//! (`refuse_starts`, and `stop`), their idle rule applied at any hour (`stop_idle`), or every
//! running one stopped after its notice, a busy one waiting at most `max_defer` (`stop`).
//! A budget whose spend is unknown does nothing; protections keep a box as for every stop.

use super::protection::Protection;
use super::text::span;
use super::{verdict, Action, Code, Eval, Trace, Verdict};
use crate::engine::BudgetStanding;
use crate::policy::{AtLimit, Budget};

impl Eval<'_> {
    /// The first budget, in file order, over this box that is spent and does one of `kinds`
    /// at its limit. A budget whose spend is unknown is passed over.
    fn spent_budget(
        &self,
        kinds: &[AtLimit],
        trace: &mut Trace,
    ) -> Option<(&Budget, &BudgetStanding)> {
        let inst = self.inst;
        self.ctx.policies.budgets.iter().find_map(|b| {
            if !kinds.contains(&b.at_limit) {
                return None;
            }
            let key = b.key_for(&inst.region, &inst.instance_type, |k| inst.tag(k))?;
            let Some(standing) = self.ctx.prior.budget(&b.name, key) else {
                trace.note(|| format!("budget {}: its spend is not worked out", b.name));
                return None;
            };
            if let Err(why) = &standing.spent {
                trace.note(|| {
                    format!(
                        "budget {}: spend unknown ({why}); nothing is done for it",
                        b.name
                    )
                });
                return None;
            }
            trace.note(|| standing.summary.clone());
            standing.exhausted().then_some((b, standing))
        })
    }

    /// A start (or the resize, reservation or targeting before one) of a box whose spent
    /// budget refuses starts becomes none.
    pub(super) fn refused_start(&self, v: Verdict, trace: &mut Trace) -> Verdict {
        let starts = matches!(
            v.action,
            Action::Start | Action::Resize | Action::ReserveCapacity | Action::TargetReservation
        );
        if !starts {
            return v;
        }
        match self.spent_budget(&[AtLimit::RefuseStarts, AtLimit::Stop], trace) {
            Some((b, s)) => verdict(
                Action::None,
                Code::BudgetExhausted,
                self.text(|| {
                    format!(
                        "{}; starts refused until {} (at_limit: {}); without it: {} ({})",
                        s.summary,
                        s.until,
                        b.at_limit.as_str(),
                        v.action,
                        v.reason
                    )
                }),
            ),
            None => v,
        }
    }

    /// Whether a spent budget applies the idle rule at any hour (`at_limit: stop_idle`), and
    /// the figures it says why with.
    pub(super) fn idle_at_any_hour(&self, trace: &mut Trace) -> Option<&BudgetStanding> {
        self.spent_budget(&[AtLimit::StopIdle], trace)
            .map(|(_, s)| s)
    }

    /// `at_limit: stop` of a spent budget over this running box: the notice, then the stop
    /// once it is `notify_before` old, a busy (or unread) box waiting at most `max_defer`
    /// after that; the protection that keeps it instead. `None` without such a budget.
    pub(super) fn budget_stop(
        &self,
        protection: Option<&Protection>,
        trace: &mut Trace,
    ) -> Option<Verdict> {
        let (b, s) = self.spent_budget(&[AtLimit::Stop], trace)?;
        if let Some(p) = protection {
            trace.note(|| format!("{}: at_limit: stop would act, but protected", s.summary));
            return Some(p.verdict());
        }
        let now = self.now();
        let Some(sent) = self.facts.notified_at.filter(|t| *t >= s.period_start) else {
            let stop_at = now + b.notify_before;
            return Some(Verdict {
                action: Action::Notify,
                code: Code::BudgetNotice,
                reason: self.text(|| {
                    format!(
                        "{}; at_limit: stop: notice now, stop at {}",
                        s.summary,
                        self.at(stop_at)
                    )
                }),
                stop_at: Some(stop_at),
            });
        };
        let served = sent + b.notify_before;
        if now < served {
            return Some(verdict(
                Action::None,
                Code::NoticePending,
                self.text(|| {
                    format!(
                        "{}; at_limit: stop: notice sent {}, stop at {}",
                        s.summary,
                        self.at(sent),
                        self.at(served)
                    )
                }),
            ));
        }
        let busy = match (
            self.gpu_unread(),
            self.busy_sample(self.policy.busy_threshold()),
        ) {
            (Some(why), _) => Some(format!("GPU utilisation could not be read ({why})")),
            (None, Some((at, pct))) => Some(format!("GPU busy ({pct}% at {})", self.at(at))),
            (None, None) => None,
        };
        let deadline = b.max_defer.map(|d| served + d);
        if let (Some(why), Some(deadline)) = (&busy, deadline) {
            if now < deadline {
                return Some(verdict(
                    Action::None,
                    Code::BusyDeferred,
                    self.text(|| {
                        format!(
                            "{}; at_limit: stop, but {why}: stop deferred until idle or {} (max_defer {})",
                            s.summary,
                            self.at(deadline),
                            span(deadline - served)
                        )
                    }),
                ));
            }
        }
        Some(verdict(
            Action::Stop,
            Code::BudgetExhausted,
            self.text(|| {
                let busy = busy.map_or(String::new(), |why| format!("; {why}, stopped anyway"));
                format!(
                    "{}; at_limit: stop until {}; notice sent {}{busy}",
                    s.summary,
                    s.until,
                    self.at(sent)
                )
            }),
        ))
    }
}
