//! The groups phase: the Auto Scaling groups ebb manages, in each region listed completely,
//! scaled through their capacity (`engine::decide_group`), never member by member.
//!
//! Each change is one action: its intent and the group's pending change committed together on
//! the leader's session (`Leadership::fence_group`), then UpdateAutoScalingGroup, then its one
//! outcome with what ebb remembers of the group, in one transaction. A change whose outcome
//! was lost (a crash, an abandoned tick) is resolved at a later tick from the group's real
//! capacity, once its call can no longer be in flight; the group is left alone until then.

use super::{Reconciler, TickContext};
use crate::cloud::Provider;
use crate::engine::{decide_group, GroupAction, GroupDecision, GroupMemory};
use crate::fleet::{Fleet, ScalingGroup};
use crate::names::ACTOR;
use crate::policy::PolicySet;
use crate::store::{NewAuditEntry, Outcome, PendingChange, StoreError, INTERRUPTED};
use chrono::{DateTime, SecondsFormat, Utc};

/// The audit action of a scale-down to the floor.
const SCALE_DOWN: &str = "scale_down_group";
/// The audit action of the restoring of the up capacity.
const RESTORE: &str = "restore_group";

impl<P: Provider> Reconciler<P> {
    /// Decides and acts on the groups of `regions` (those listed completely this tick).
    pub(super) async fn groups(
        &self,
        set: &PolicySet,
        fleet: &Fleet,
        regions: &[String],
        tick: &mut TickContext<'_>,
    ) -> Result<(), StoreError> {
        for region in regions {
            let groups = match self.provider.scaling_groups(region).await {
                Ok(groups) => groups,
                Err(err) => {
                    // Unknown: no change, and no pending change resolved, in this region.
                    tracing::warn!(region = %region, error = %err, "Auto Scaling groups could not be listed");
                    continue;
                }
            };
            let mut stored = self.store.groups_of(region).await?;
            // Their capacity over time, for the console.
            self.store.note_group_sizes(tick.now, &groups).await?;
            for group in &groups {
                let kept = stored.remove(&group.name);
                if let Some(pending) = kept.as_ref().and_then(|k| k.pending.clone()) {
                    let memory = kept
                        .map(|k| k.memory)
                        .expect("a pending change has its group");
                    self.resolve_group(group, &memory, &pending, tick).await?;
                    continue;
                }
                let memory = kept.map(|k| k.memory);
                let d = decide_group(tick.now, set, fleet, group, memory.as_ref());
                if memory.as_ref() != Some(&d.memory) {
                    self.store
                        .remember_group(region, &group.name, &d.memory)
                        .await?;
                }
                if d.action == GroupAction::ScaleDown {
                    let again = self.decide_again(set, fleet, group, memory.as_ref(), tick.now);
                    if let Err(why) = again.await.and_then(|a| same(&d, &a)) {
                        tracing::info!(group = %group.name, region = %region, why = %why, "scale-down not done");
                        continue;
                    }
                }
                if d.action != GroupAction::None {
                    self.act_on_scaling_group(&d, tick).await?;
                }
            }
        }
        Ok(())
    }

    /// The decision for `group` from the group read again right before a scale-down: people
    /// change tags and capacity between a listing and the call. A failed read is an error:
    /// unknown means no scale-down.
    async fn decide_again(
        &self,
        set: &PolicySet,
        fleet: &Fleet,
        group: &ScalingGroup,
        memory: Option<&GroupMemory>,
        now: DateTime<Utc>,
    ) -> Result<GroupDecision, String> {
        let fresh = self
            .provider
            .scaling_groups(&group.region)
            .await
            .map_err(|err| {
                format!("could not read the group again ({err}); unknown means no scale-down")
            })?;
        let fresh = fresh
            .iter()
            .find(|g| g.name == group.name)
            .ok_or("the group is no longer listed (gone, or no longer tagged for ebb)")?;
        Ok(decide_group(now, set, fleet, fresh, memory))
    }

    /// One change of a group's capacity: dry runs logged only; otherwise the fenced intent,
    /// the call, and its one outcome.
    async fn act_on_scaling_group(
        &self,
        d: &GroupDecision,
        tick: &mut TickContext<'_>,
    ) -> Result<(), StoreError> {
        let Some(to) = d.to else {
            return Ok(());
        };
        let action = match d.action {
            GroupAction::ScaleDown => SCALE_DOWN,
            _ => RESTORE,
        };
        if d.dry_run || self.options.dry_run {
            tracing::info!(group = %d.group, region = %d.region, action, reason = %d.reason, "dry run, nothing done");
            return Ok(());
        }
        let intent = NewAuditEntry {
            at: tick.now,
            actor: ACTOR.to_string(),
            instance: None,
            region: Some(d.region.clone()),
            action: action.to_string(),
            outcome: Outcome::Intent,
            policy: d.policy.clone(),
            policy_version: Some(tick.version.to_string()),
            code: Some(d.code.as_str().to_string()),
            reason: format!("group {}: {}", d.group, d.reason),
            dry_run: false,
            request_id: None,
            error: None,
            intent_seq: None,
        };
        let written = tick
            .leader
            .fence_group(&intent, &d.region, &d.group, to)
            .await?;
        let answer = self
            .provider
            .set_group_capacity(&d.region, &d.group, to)
            .await;
        if let Err(err) = &answer {
            if err.kind.may_have_landed() {
                // The answer was lost (a timeout, a 5xx, a connection dropped after sending):
                // the change may have landed. Unknown, not failed: resolved from the group's
                // capacity later.
                tracing::warn!(group = %d.group, region = %d.region, action, error = %err, "group change unanswered, resolved from its capacity later");
                return Ok(());
            }
        }
        let (outcome, memory, request_id, error) = match answer {
            Ok(request_id) => {
                let down_since = (d.action == GroupAction::ScaleDown).then_some(tick.now);
                let memory = GroupMemory {
                    down_since,
                    ..d.memory.clone()
                };
                (Outcome::Succeeded, memory, request_id, None)
            }
            Err(err) => (
                Outcome::Failed,
                d.memory.clone(),
                err.request_id.clone(),
                Some(err.to_string()),
            ),
        };
        tracing::info!(
            at = %tick.now.to_rfc3339_opts(SecondsFormat::Secs, true),
            group = %d.group,
            region = %d.region,
            action,
            outcome = outcome.as_str(),
            policy = d.policy.as_deref(),
            detail = d.reason,
            "group capacity changed"
        );
        let entry = NewAuditEntry {
            outcome,
            request_id,
            error,
            intent_seq: Some(written.seq),
            ..intent
        };
        self.store
            .group_outcome(&entry, &d.region, &d.group, &memory)
            .await?;
        Ok(())
    }

    /// The outcome of a change left pending, from `group`'s capacity now: done when the group
    /// is at the capacity asked for, otherwise interrupted before it landed. Left pending while
    /// its call may still be in flight.
    async fn resolve_group(
        &self,
        group: &ScalingGroup,
        memory: &GroupMemory,
        pending: &PendingChange,
        tick: &mut TickContext<'_>,
    ) -> Result<(), StoreError> {
        if tick.now < pending.at + self.options.in_flight_for {
            return Ok(());
        }
        let scale_down = pending.to.desired < memory.up.desired || pending.to.min < memory.up.min;
        let action = if scale_down { SCALE_DOWN } else { RESTORE };
        let landed = group.capacity == pending.to;
        let (outcome, memory, detail) = if landed {
            let down_since = scale_down.then_some(pending.at);
            let memory = GroupMemory {
                down_since,
                ..memory.clone()
            };
            let detail = format!("the group is at {}", group.capacity);
            (Outcome::Succeeded, memory, detail)
        } else {
            let detail = format!(
                "{INTERRUPTED}; the group is at {}, not {}",
                group.capacity, pending.to
            );
            (Outcome::Failed, memory.clone(), detail)
        };
        let entry = NewAuditEntry {
            at: tick.now,
            actor: ACTOR.to_string(),
            instance: None,
            region: Some(group.region.clone()),
            action: action.to_string(),
            outcome,
            policy: None,
            policy_version: Some(tick.version.to_string()),
            code: None,
            reason: format!("group {}: resolved from its capacity: {detail}", group.name),
            dry_run: false,
            request_id: None,
            error: (outcome == Outcome::Failed).then_some(detail),
            intent_seq: Some(pending.seq),
        };
        self.store
            .group_outcome(&entry, &group.region, &group.name, &memory)
            .await?;
        Ok(())
    }
}

/// `Ok` when the decision made again right before the call still asks for what `d` does.
fn same(d: &GroupDecision, again: &GroupDecision) -> Result<(), String> {
    if again.action == d.action && again.to == d.to {
        Ok(())
    } else {
        Err(format!(
            "read again right before the call: {}",
            again.reason
        ))
    }
}
