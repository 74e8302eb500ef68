//! What a call did: an outcome row per instance from the cloud's report, written with what ebb
//! remembers of it, and the notices it posts (their text in `notice.rs`).

use super::choose::{CAPACITY_EVERY_TICK, CAPACITY_RETRY};
use super::Reconciler;
use crate::cloud::{ActionReport, ErrorKind, Provider};
use crate::engine::{Action, Code, Decision};
use crate::reconcile::{ActionOutcome, TickContext};
use crate::store::{AcceptedStop, ActionDone, NewAuditEntry, Outcome, StoreError};
use std::collections::HashMap;

impl<P: Provider> Reconciler<P> {
    /// Writes the outcomes of `group`'s call (`answers`, one per decision) with what ebb
    /// remembers of it (one transaction), then posts its notices (`billings`: how the cloud
    /// bills the instances, for what a stop does to their public IP) and reports it. A lost answer
    /// writes nothing: its intent stays open, and a later tick resolves it from the instance's
    /// state once the call can no longer be in flight (`reconcile/resolve.rs`). A stop accepted
    /// before its instance had stopped marks its intent accepted, in the same transaction, and
    /// a later tick writes its outcome once the instance has stopped (`reconcile/stopping.rs`).
    pub(super) async fn record(
        &self,
        group: &[&Decision],
        answers: Vec<Answer>,
        billings: &Billings,
        tick: &mut TickContext<'_>,
    ) -> Result<(), StoreError> {
        let now = tick.now;
        let outcomes: Vec<NewAuditEntry> = answers
            .iter()
            .filter_map(|a| match a {
                Answer::Outcome(o) => Some((**o).clone()),
                Answer::Lost(_) | Answer::Stopping(_) => None,
            })
            .collect();
        let done: Vec<ActionDone> = group
            .iter()
            .zip(&answers)
            .filter(|(_, a)| matches!(a, Answer::Outcome(o) if o.outcome == Outcome::Succeeded))
            .map(|(d, _)| ActionDone {
                instance: d.instance.clone(),
                action: d.action,
                at: now,
            })
            .collect();
        let accepted: Vec<AcceptedStop> = answers
            .iter()
            .filter_map(|a| match a {
                Answer::Stopping(row) => Some(AcceptedStop {
                    intent_seq: row.intent_seq?,
                    request_id: row.request_id.clone(),
                    reason: row.reason.clone(),
                }),
                _ => None,
            })
            .collect();
        self.store
            .record_outcomes(&outcomes, &done, &accepted)
            .await?;
        for (d, answer) in group.iter().zip(&answers) {
            let o = match answer {
                Answer::Outcome(o) => o,
                Answer::Lost(error) => {
                    let unknown = ActionOutcome {
                        decision: (*d).clone(),
                        outcome: Outcome::Intent,
                        detail: format!(
                            "unknown: {error}; the intent stays open, resolved from the instance's state once the call cannot be in flight"
                        ),
                    };
                    unknown.log(now, false);
                    tick.report.actions.push(unknown);
                    continue;
                }
                Answer::Stopping(_) => {
                    let stopping = ActionOutcome {
                        decision: (*d).clone(),
                        outcome: Outcome::Intent,
                        detail: "accepted, still stopping: its outcome, with how the cloud bills it stopped, is written once a later listing shows it stopped".to_string(),
                    };
                    stopping.log(now, false);
                    tick.report.actions.push(stopping);
                    continue;
                }
            };
            if let (Outcome::Succeeded, Action::Notify, Some(webhook)) =
                (o.outcome, d.action, &self.options.webhook)
            {
                let billing = billings.get(&d.instance);
                webhook.send_message(self.notice(d, billing, tick).await);
            }
            if d.action == Action::Start {
                self.tell_of_capacity(d, o);
            }
            self.tell_of_charging(o);
            let done = ActionOutcome {
                decision: (*d).clone(),
                outcome: o.outcome,
                detail: o.error.clone().unwrap_or_else(|| o.reason.clone()),
            };
            done.log(now, false);
            tick.report.actions.push(done);
        }
        Ok(())
    }

    /// Posts to the webhook, once until the instance starts, that a start of `d` was refused for
    /// lack of capacity (`outcome`): people are waiting for the box, and it may stay stopped
    /// for a while.
    fn tell_of_capacity(&self, d: &Decision, outcome: &NewAuditEntry) {
        let mut told = self
            .memo
            .capacity_told
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        let refused = outcome.outcome == Outcome::Failed
            && outcome.code.as_deref() == Some(Code::InsufficientCapacity.as_str());
        if !refused {
            if outcome.outcome == Outcome::Succeeded {
                told.remove(&d.instance);
            }
            return;
        }
        let Some(webhook) = &self.options.webhook else {
            return;
        };
        if told.insert(d.instance.clone()) {
            webhook.send(format!(
                "ebb could not start {} ({}), policy {}: EC2 has no capacity for it now. ebb tries again at every tick ({CAPACITY_EVERY_TICK} times, then every {} minutes), and the policy's start.fallback_types if it lists any; no further notice until it starts.",
                d.instance,
                d.region,
                d.policy.as_deref().unwrap_or("-"),
                CAPACITY_RETRY.num_minutes()
            ));
        }
    }
}

/// How the instances of a call are billed, by id, as read again right before it.
pub(super) type Billings = HashMap<String, crate::fleet::Billing>;

/// What became of one decision's call.
#[derive(Debug)]
pub(super) enum Answer {
    /// The cloud said: the outcome row.
    Outcome(Box<NewAuditEntry>),
    /// No answer says whether the call was carried out (the error that says so): no outcome
    /// yet.
    Lost(String),
    /// A stop the cloud accepted, of an instance not stopped yet when read back: its outcome
    /// row, completed with how the cloud bills the stopped instance and written by a later
    /// tick once a listing shows it stopped (`reconcile/stopping.rs`).
    Stopping(Box<NewAuditEntry>),
}

impl Answer {
    /// The outcome written, if any.
    pub(super) fn outcome(&self) -> Option<Outcome> {
        match self {
            Answer::Outcome(o) => Some(o.outcome),
            Answer::Lost(_) | Answer::Stopping(_) => None,
        }
    }
}

/// One answer per decision of `group`, in order, from what the cloud reported: an outcome row,
/// or, when the error says the call may have been carried out, none.
pub(super) fn outcome_entries(
    group: &[&Decision],
    cloud: &ActionReport,
    entry: impl Fn(&Decision, Outcome) -> NewAuditEntry,
) -> Vec<Answer> {
    let done: HashMap<&str, _> = cloud
        .done
        .iter()
        .map(|d| (d.instance.as_str(), d))
        .collect();
    let failed: HashMap<&str, _> = cloud
        .failed
        .iter()
        .map(|f| (f.instance.as_str(), f))
        .collect();
    group
        .iter()
        .map(|d| {
            let outcome = match (
                done.get(d.instance.as_str()),
                failed.get(d.instance.as_str()),
            ) {
                (None, Some(failed)) if failed.error.kind.may_have_landed() => {
                    return Answer::Lost(failed.error.to_string())
                }
                // A person's stop landed between the decision and ebb's call: crediting it to
                // ebb would have `start_at_open: stopped-by-ebb` start what a person stopped.
                (Some(done), _) if done.already => NewAuditEntry {
                    request_id: done.request_id.clone(),
                    reason: format!(
                        "{}; already stopped when ebb's call arrived: not ebb's stop",
                        d.reason
                    ),
                    ..entry(d, Outcome::Skipped)
                },
                (Some(done), _) => NewAuditEntry {
                    request_id: done.request_id.clone(),
                    reason: match &done.fallback {
                        Some(fallback) => format!("{}; {fallback}", d.reason),
                        None => d.reason.clone(),
                    },
                    ..entry(d, Outcome::Succeeded)
                },
                (None, Some(failed)) if failed.error.kind == ErrorKind::InsufficientCapacity => {
                    NewAuditEntry {
                        request_id: failed.error.request_id.clone(),
                        error: Some(failed.error.stored()),
                        code: Some(Code::InsufficientCapacity.as_str().to_string()),
                        reason: format!(
                            "{}; EC2 has no capacity for it now: tried again at every tick, {CAPACITY_EVERY_TICK} times, then every {} minutes",
                            d.reason,
                            CAPACITY_RETRY.num_minutes()
                        ),
                        ..entry(d, Outcome::Failed)
                    }
                }
                (None, Some(failed)) => NewAuditEntry {
                    request_id: failed.error.request_id.clone(),
                    error: Some(failed.error.stored()),
                    ..entry(d, Outcome::Failed)
                },
                (None, None) => NewAuditEntry {
                    error: Some("the cloud did not report on this instance".to_string()),
                    ..entry(d, Outcome::Failed)
                },
            };
            Answer::Outcome(Box::new(outcome))
        })
        .collect()
}
