//! Crash resolution: an intent left without an outcome (the process died between the intent and
//! the cloud call's outcome) is resolved from the instance's real state, never by acting again.
//! A stop the cloud accepted before its instance had stopped is resolved here too, once it has
//! stopped (`stopping.rs`).

use super::act::{add_note, stopped_note};
use super::{Reconciler, Timers};
use crate::cloud::{Inventory, Provider};
use crate::engine::Action;
use crate::fleet::{Instance, InstanceState, StoppedMode};
use crate::names::STOP_AT_TAG;
use crate::spot::drive::Unanswered;
use crate::store::{ActionDone, AuditEntry, NewAuditEntry, Outcome, StoreError, INTERRUPTED};
use chrono::{DateTime, SecondsFormat, Utc};
use std::collections::{HashMap, HashSet};

/// What crash resolution came to in one tick.
#[derive(Debug, Default)]
pub(super) struct Resolution {
    /// The outcomes written for intents left open.
    pub(super) resolved: Vec<AuditEntry>,
    /// Instances with an intent still open: its call may still be in flight, or its region
    /// could not be listed. Nothing is done to them until that intent has its outcome.
    pub(super) open: HashSet<String>,
    /// Spot migrations' intents left open whose calls can no longer be in flight: each
    /// migration resolves its own from what the cloud shows, before its next step
    /// (`spot::drive`).
    pub(super) migration_steps: Vec<Unanswered>,
    /// Reclaims' intents left open whose calls can no longer be in flight: each reclaim
    /// resolves its own from what the cloud shows (`reclaim::drive`).
    pub(super) reclaim_steps: Vec<Unanswered>,
}

impl<P: Provider> Reconciler<P> {
    /// Resolves intents left without an outcome from what the inventory shows now: those old
    /// enough that no call of theirs can still be in flight ([`super::Options::in_flight_for`]),
    /// by the clock of [`super::Options::timers`], which reads `timers` now.
    pub(super) async fn resolve_interrupted(
        &self,
        inventory: &Inventory,
        now: DateTime<Utc>,
        timers: DateTime<Utc>,
    ) -> Result<Resolution, StoreError> {
        let pending = self.store.pending_intents().await?;
        let mut found = Resolution::default();
        if pending.is_empty() {
            return Ok(found);
        }
        let seqs: Vec<i64> = pending.iter().map(|p| p.seq).collect();
        let recorded = self.store.intents_recorded(&seqs).await?;
        let accepted = self.store.accepted_stops(&seqs).await?;
        let listed: HashMap<&str, &Instance> = inventory
            .instances
            .iter()
            .map(|i| (i.id.as_str(), i))
            .collect();
        let mut outcomes = Vec::new();
        let mut done = Vec::new();
        for intent in pending {
            let e = &intent.entry;
            let Some(id) = e.instance.as_deref() else {
                continue;
            };
            let action = Action::parse(&e.action);
            if super::reservations::is_reservation_step(action) {
                // Resolved from the reservations EC2 holds (`reservations.rs`); the instance
                // is left alone meanwhile.
                found.open.insert(id.to_string());
                continue;
            }
            if let Some(accepted) = accepted.get(&intent.seq) {
                let region_listed = listed_completely(inventory, e.region.as_deref());
                let listed = listed.get(id).copied();
                match super::stopping::finished(&intent, accepted, listed, region_listed, now) {
                    Some(outcome) => {
                        if let Some(action) = action {
                            done.push(ActionDone {
                                instance: id.to_string(),
                                action,
                                at: e.at,
                            });
                        }
                        outcomes.push(outcome);
                    }
                    None => {
                        found.open.insert(id.to_string());
                    }
                }
                continue;
            }
            let since = self.intent_since(e.at, recorded.get(&intent.seq).copied());
            let in_flight = timers < since + self.options.in_flight_for;
            if is_migration_step(action) && !e.dry_run {
                // Left to its migration (`migrations.rs`), which waits while the call may land.
                if in_flight {
                    found.open.insert(id.to_string());
                } else {
                    found.migration_steps.push(Unanswered { intent, since });
                }
                continue;
            }
            if matches!(action, Some(Action::Reclaim | Action::Restore)) {
                // Left to its reclaim (`reclaims.rs`), as a migration's step is.
                if in_flight {
                    found.open.insert(id.to_string());
                } else {
                    found.reclaim_steps.push(Unanswered { intent, since });
                }
                continue;
            }
            let resolved = if e.dry_run {
                // Nothing was ever to be done; only its `skipped` outcome was lost.
                Some((Outcome::Skipped, "dry run, nothing done".to_string()))
            } else if in_flight {
                // A deposed leader's call, or one of a tick abandoned at its deadline, may
                // still land: resolved now, it could be called failed and then happen.
                None
            } else {
                resolution(
                    action,
                    since,
                    e.region.as_deref(),
                    listed.get(id).copied(),
                    inventory,
                )
            };
            let Some((outcome, detail)) = resolved else {
                found.open.insert(id.to_string());
                continue;
            };
            if outcome == Outcome::Succeeded {
                if let Some(action) = action {
                    done.push(ActionDone {
                        instance: id.to_string(),
                        action,
                        at: e.at,
                    });
                }
            }
            let mut resolved = NewAuditEntry {
                at: now,
                outcome,
                reason: format!("{}; {detail}", e.reason),
                error: (outcome == Outcome::Failed).then(|| detail.clone()),
                request_id: None,
                intent_seq: Some(intent.seq),
                ..e.clone()
            };
            let stopped = matches!(action, Some(Action::Stop | Action::Hibernate));
            if let (true, Outcome::Succeeded, Some(i)) = (stopped, outcome, listed.get(id)) {
                let mode = i.billing.stopped_mode.unwrap_or(StoppedMode::Unknown);
                add_note(&mut resolved, stopped_note(mode, Some(&i.billing)));
            }
            outcomes.push(resolved);
        }
        found.resolved = self.store.append_outcomes(&outcomes, &done).await?;
        for outcome in &outcomes {
            self.tell_of_charging(outcome);
        }
        Ok(found)
    }
}

impl<P: Provider> Reconciler<P> {
    /// When an intent made at `at` (the tick's time) was committed, on the clock of
    /// [`super::Options::timers`]: the database's time of its commit, `recorded`, or `at`.
    pub(super) fn intent_since(
        &self,
        at: DateTime<Utc>,
        recorded: Option<DateTime<Utc>>,
    ) -> DateTime<Utc> {
        match (self.options.timers, recorded) {
            (Timers::Database, Some(recorded)) => recorded,
            _ => at,
        }
    }
}

/// Whether `instance`'s `ebb:stop-at` tag can be the notice of an intent made at `intent_at`:
/// a notice announces a stop at or after the time it is given. ebb does not remove the tag, so
/// one left by an earlier notice, whose stop time had passed, is not this one.
fn noticed_since_intent(instance: &Instance, intent_at: DateTime<Utc>) -> bool {
    instance
        .tag(STOP_AT_TAG)
        .and_then(|t| DateTime::parse_from_rfc3339(t).ok())
        .is_some_and(|t| t.timestamp() >= intent_at.timestamp())
}

/// Whether `action` is a spot migration's step: its intent left open (a crash, or an answer
/// lost: `spot::drive`) waits like any other until its call can no longer land, and is then
/// resolved by its migration from what the cloud shows of that call (a tag, an image, a launch
/// by its `ebb:launch` tag, ...), which the instance's state alone does not tell.
fn is_migration_step(action: Option<Action>) -> bool {
    matches!(
        action,
        Some(Action::MigrateToSpot | Action::RelaunchSpot | Action::FallbackOnDemand)
    )
}

/// Whether `region` was listed completely: an instance missing from it is gone.
fn listed_completely(inventory: &Inventory, region: Option<&str>) -> bool {
    region.is_some_and(|r| inventory.complete_regions.iter().any(|c| c == r))
}

/// What an interrupted intent of `action`, made at `intent_at`, came to, from the instance as
/// the inventory lists it now; `None` while its region could not be listed.
fn resolution(
    action: Option<Action>,
    intent_at: DateTime<Utc>,
    region: Option<&str>,
    listed: Option<&Instance>,
    inventory: &Inventory,
) -> Option<(Outcome, String)> {
    let resolved = match listed {
        None if listed_completely(inventory, region) => {
            (Outcome::Skipped, "the instance is gone".to_string())
        }
        // Its region could not be listed: resolve it at a later tick.
        None => return None,
        Some(instance) => match (action, instance.state) {
            // A stop that began before the intent, or at an unknown time, was a person's:
            // crediting it to ebb would have `start_at_open: stopped-by-ebb` start what a
            // person stopped.
            (
                Some(Action::Stop | Action::Hibernate),
                InstanceState::Stopping | InstanceState::Stopped,
            ) if !instance.in_state_since(intent_at) => (
                Outcome::Skipped,
                format!(
                    "found {} after an interruption, stopped {}: not ebb's stop",
                    instance.state.as_str(),
                    instance
                        .state_since
                        .map_or("at an unknown time".to_string(), |t| {
                            format!(
                                "at {}, before the intent",
                                t.to_rfc3339_opts(SecondsFormat::Secs, true)
                            )
                        })
                ),
            ),
            // How a stopped instance is billed is known once it has stopped.
            (Some(Action::Stop | Action::Hibernate), InstanceState::Stopping) => return None,
            (Some(Action::Stop | Action::Hibernate), InstanceState::Stopped)
            | (Some(Action::Start), InstanceState::Pending | InstanceState::Running) => (
                Outcome::Succeeded,
                format!("found {} after an interruption", instance.state.as_str()),
            ),
            (Some(Action::Notify), _) if noticed_since_intent(instance, intent_at) => (
                Outcome::Succeeded,
                format!("found the {STOP_AT_TAG} tag after an interruption"),
            ),
            (Some(Action::WithdrawNotice), _) if instance.tag(STOP_AT_TAG).is_none() => (
                Outcome::Succeeded,
                format!("found no {STOP_AT_TAG} tag after an interruption"),
            ),
            (_, state) => (
                Outcome::Failed,
                format!(
                    "{INTERRUPTED}; the instance is {} (it is decided again from here)",
                    state.as_str()
                ),
            ),
        },
    };
    Some(resolved)
}
