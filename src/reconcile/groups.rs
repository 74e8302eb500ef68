//! The groups phase: the Auto Scaling groups ebb manages, in each region listed completely,
//! scaled through their capacity (`engine::decide_group`), never member by member.
//!
//! Each change is one action: its intent and the group's pending change committed together on
//! the leader's session (`Leadership::fence_group`), then UpdateAutoScalingGroup, then its one
//! outcome with what ebb remembers of the group, in one transaction. A change whose outcome
//! was lost (a crash, an abandoned tick) is resolved at a later tick from the group's real
//! capacity, once its call can no longer be in flight; the group is left alone until then.
//!
//! An EKS managed node group's group is changed through EKS (`node_groups.rs`):
//! UpdateNodegroupConfig instead of UpdateAutoScalingGroup, and the outcome once DescribeUpdate
//! says the update ended.

use super::{Reconciler, TickContext};
use crate::cloud::{Provider, ScalingGroups};
use crate::engine::{decide_group, Code, GroupAction, GroupDecision, GroupMemory, Prior};
use crate::fleet::{Fleet, ScalingGroup};
use crate::names::ACTOR;
use crate::policy::PolicySet;
use crate::store::{NewAuditEntry, Outcome, PendingChange, StoreError, INTERRUPTED};
use chrono::{DateTime, SecondsFormat, Utc};
use std::collections::HashMap;

/// The audit action of a scale-down to the floor.
pub(super) const SCALE_DOWN: &str = "scale_down_group";
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
        let Some(scaling) = self.provider.groups() else {
            return Ok(());
        };
        // The overrides on members hold a scale-down; read again right before each one.
        let overrides = Prior::new(HashMap::new(), self.store.overrides_at(tick.now).await?);
        for region in regions {
            let groups = match scaling.scaling_groups(region).await {
                Ok(groups) => groups,
                Err(err) => {
                    // Unknown: no change, and no pending change resolved, in this region.
                    tracing::warn!(region = %region, error = %err, "Auto Scaling groups could not be listed");
                    continue;
                }
            };
            tick.report.groups.listed += groups.len();
            let mut stored = self.store.groups_of(region).await?;
            // Their capacity over time, for the console.
            self.store.note_group_sizes(tick.now, &groups).await?;
            for group in &groups {
                let kept = stored.remove(&group.name);
                if let Some(pending) = kept.as_ref().and_then(|k| k.pending.clone()) {
                    let memory = kept
                        .map(|k| k.memory)
                        .expect("a pending change has its group");
                    self.resolve_group(scaling, group, &memory, &pending, tick)
                        .await?;
                    continue;
                }
                let memory = kept.map(|k| k.memory);
                let d = decide_group(tick.now, set, fleet, &overrides, group, memory.as_ref());
                if d.code == Code::GroupMemberProtected {
                    tracing::info!(group = %group.name, region = %region, reason = %d.reason, "scale-down held");
                }
                // A dry run protects no member, so it remembers none as protected by ebb: the
                // restore would take off a protection someone else put on since.
                let mut remember = d.memory.clone();
                if d.dry_run || self.options.dry_run {
                    remember.protected.retain(|id| !d.protect.contains(id));
                }
                if memory.as_ref() != Some(&remember) {
                    self.store
                        .remember_group(region, &group.name, &remember)
                        .await?;
                }
                if d.action == GroupAction::ScaleDown {
                    let again =
                        self.decide_again(scaling, set, fleet, group, memory.as_ref(), tick.now);
                    if let Err(why) = again.await.and_then(|a| same(&d, &a)) {
                        tracing::info!(group = %group.name, region = %region, why = %why, "scale-down not done");
                        continue;
                    }
                }
                if d.action != GroupAction::None {
                    self.act_on_scaling_group(scaling, group, &d, tick).await?;
                }
            }
        }
        Ok(())
    }

    /// The decision for `group` from the group and the overrides read again right before a
    /// scale-down: people change tags, overrides and capacity between a listing and the call.
    /// A failed read is an error: unknown means no scale-down.
    async fn decide_again(
        &self,
        scaling: &P::ScalingGroups,
        set: &PolicySet,
        fleet: &Fleet,
        group: &ScalingGroup,
        memory: Option<&GroupMemory>,
        now: DateTime<Utc>,
    ) -> Result<GroupDecision, String> {
        let fresh = scaling.scaling_groups(&group.region).await.map_err(|err| {
            format!("could not read the group again ({err}); unknown means no scale-down")
        })?;
        let fresh = fresh
            .iter()
            .find(|g| g.name == group.name)
            .ok_or("the group is no longer listed (gone, or no longer tagged for ebb)")?;
        let overrides = self.store.overrides_at(now).await.map_err(|err| {
            format!("could not read the overrides again ({err}); unknown means no scale-down")
        })?;
        let prior = Prior::new(HashMap::new(), overrides);
        Ok(decide_group(now, set, fleet, &prior, fresh, memory))
    }

    /// One change of `group`'s capacity: dry runs logged only; otherwise the fenced intent,
    /// the call, and its one outcome (for a node group, once EKS says its update ended).
    async fn act_on_scaling_group(
        &self,
        scaling: &P::ScalingGroups,
        group: &ScalingGroup,
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
            reason: format!("group {}: {}{}", d.group, d.reason, through(group)),
            dry_run: false,
            request_id: None,
            error: None,
            intent_seq: None,
        };
        let written = tick
            .leader
            .fence_group(&intent, &d.region, &d.group, to)
            .await?;
        let mut memory = d.memory.clone();
        if let Err(why) = self.protect_members(scaling, d, &mut memory).await {
            // No capacity change: a member the change keeps is not protected from it.
            tracing::warn!(group = %d.group, region = %d.region, action, why = %why, "group change not made");
            tick.report.groups.failed += 1;
            let entry = NewAuditEntry {
                outcome: Outcome::Failed,
                error: Some(why),
                intent_seq: Some(written.seq),
                ..intent
            };
            self.store
                .group_outcome(&entry, &d.region, &d.group, &memory)
                .await?;
            return Ok(());
        }
        let node_group = group.node_group();
        let answer = match &node_group {
            Some(ng) => {
                let call = scaling.set_node_group_capacity(&d.region, &d.group, ng, to);
                call.await
            }
            None => {
                let call = scaling.set_group_capacity(&d.region, &d.group, to);
                call.await
            }
        };
        if let Err(err) = &answer {
            if err.kind.may_have_landed() {
                // The answer was lost (a timeout, a 5xx, a connection dropped after sending):
                // the change may have landed. Unknown, not failed: resolved from the group's
                // capacity later.
                tracing::warn!(group = %d.group, region = %d.region, action, error = %err, "group change unanswered, resolved from its capacity later");
                tick.report.groups.unknown += 1;
                return Ok(());
            }
        }
        if let (Some(ng), Ok(update)) = (&node_group, &answer) {
            let pending = PendingChange {
                seq: written.seq,
                at: tick.now,
                to,
                update: update.clone(),
            };
            return self
                .node_group_changed(scaling, group, ng, &d.memory, &pending, &intent)
                .await;
        }
        let (outcome, memory, request_id, error) = match answer {
            Ok(request_id) => {
                let down_since = (d.action == GroupAction::ScaleDown).then_some(tick.now);
                let memory = GroupMemory {
                    down_since,
                    ..memory
                };
                (Outcome::Succeeded, memory, request_id, None)
            }
            Err(err) => (
                Outcome::Failed,
                memory,
                err.request_id.clone(),
                Some(err.stored()),
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
        match outcome {
            Outcome::Succeeded => tick.report.groups.succeeded += 1,
            _ => tick.report.groups.failed += 1,
        }
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

    /// Before a change of a group: takes ebb's scale-in protection off the members of
    /// `d.unprotect` (those it comes off are dropped from `memory`; one that stays protected
    /// only keeps a member the group would end, and is tried again at the next change), then
    /// puts it on those of `d.protect` and reads the group again: every member the change keeps
    /// must read as protected, whatever the call answered (a lost answer may have landed).
    /// `Err` says why not: unknown means no change.
    async fn protect_members(
        &self,
        scaling: &P::ScalingGroups,
        d: &GroupDecision,
        memory: &mut GroupMemory,
    ) -> Result<(), String> {
        if !d.unprotect.is_empty() {
            let call = scaling.set_scale_in_protection(&d.region, &d.group, &d.unprotect, false);
            match call.await {
                Ok(_) => memory.protected.retain(|id| !d.unprotect.contains(id)),
                Err(err) => {
                    tracing::warn!(group = %d.group, region = %d.region, members = ?d.unprotect, error = %err, "scale-in protection ebb set could not be taken off; tried again at the next change");
                }
            }
        }
        if d.protect.is_empty() {
            return Ok(());
        }
        let call = scaling.set_scale_in_protection(&d.region, &d.group, &d.protect, true);
        let answer = call.await.err();
        let fresh = scaling.scaling_groups(&d.region).await.map_err(|err| {
            format!("could not read the group again after protecting its members ({err}); unknown means no scale-down")
        })?;
        let unprotected: Vec<&String> = d
            .protect
            .iter()
            .filter(|id| {
                !fresh
                    .iter()
                    .filter(|g| g.name == d.group)
                    .flat_map(|g| &g.members)
                    .any(|m| &m.id == *id && m.protected_from_scale_in)
            })
            .collect();
        match (unprotected.is_empty(), answer) {
            (true, _) => Ok(()),
            (false, Some(err)) => Err(format!(
                "could not protect {} from the group's scale-in ({err}); not scaled down",
                list(&unprotected)
            )),
            (false, None) => Err(format!(
                "{} still not protected from the group's scale-in after SetInstanceProtection; not scaled down",
                list(&unprotected)
            )),
        }
    }

    /// The outcome of a change left pending, from `group`'s capacity now: done when the group
    /// is at the capacity asked for ([`landed`] says how otherwise). Left pending while its call
    /// may still be in flight. A node group's change ends as its EKS update does
    /// ([`Reconciler::node_group_end`]).
    async fn resolve_group(
        &self,
        scaling: &P::ScalingGroups,
        group: &ScalingGroup,
        memory: &GroupMemory,
        pending: &PendingChange,
        tick: &mut TickContext<'_>,
    ) -> Result<(), StoreError> {
        let recorded = self.store.intents_recorded(&[pending.seq]).await?;
        let since = self.intent_since(pending.at, recorded.get(&pending.seq).copied());
        let in_flight = tick.timers < since + self.options.in_flight_for;
        let end = match group.node_group() {
            Some(ng) => {
                self.node_group_end(scaling, group, &ng, pending, in_flight)
                    .await
            }
            None if in_flight => None,
            None => Some(landed(group, memory, pending)),
        };
        let Some(end) = end else {
            return Ok(());
        };
        let scale_down = pending.to.desired < memory.up.desired || pending.to.min < memory.up.min;
        let action = if scale_down { SCALE_DOWN } else { RESTORE };
        let memory = match end.aimed {
            true => GroupMemory {
                down_since: scale_down.then_some(pending.at),
                ..memory.clone()
            },
            false => memory.clone(),
        };
        let entry = NewAuditEntry {
            at: tick.now,
            actor: ACTOR.to_string(),
            instance: None,
            region: Some(group.region.clone()),
            action: action.to_string(),
            outcome: end.outcome,
            policy: None,
            policy_version: Some(tick.version.to_string()),
            code: None,
            reason: format!("group {}: {}", group.name, end.why),
            dry_run: false,
            request_id: end.request_id,
            error: end.error,
            intent_seq: Some(pending.seq),
        };
        self.store
            .group_outcome(&entry, &group.region, &group.name, &memory)
            .await?;
        tick.report.groups.resolved += 1;
        Ok(())
    }
}

/// How a pending change of a group ended.
pub(super) struct End {
    /// Succeeded or failed.
    pub(super) outcome: Outcome,
    /// Whether the group is taken as being where the change aimed (down after a scale-down):
    /// when it succeeded, and when someone else changed the group meanwhile.
    pub(super) aimed: bool,
    /// Why, for the audit row's reason.
    pub(super) why: String,
    /// The error of a failed outcome: beginning with [`INTERRUPTED`] when the call did not
    /// land, EKS's errors when EKS says the update failed.
    pub(super) error: Option<String>,
    /// The request id for the audit row: EKS's update id for a node group's change.
    pub(super) request_id: Option<String>,
}

/// The end of a plain group's pending change, from its capacity now: succeeded when the group
/// is at the capacity asked for; interrupted before it landed when a scale-down's group is
/// still at its up capacity, or a restore's below the capacity asked for (the restore is made
/// again). At any other capacity someone else changed the group meanwhile, and whether ebb's
/// change landed is unknown: it is not counted as ebb's (failed), and the group is taken as
/// being where the change aimed, so that ebb scales nothing down on an unknown state: a
/// scale-down's group is held down at the person's capacity until the opening restores the one
/// ebb found; a restore's is up, at the person's capacity.
fn landed(group: &ScalingGroup, memory: &GroupMemory, pending: &PendingChange) -> End {
    let now_at = group.capacity;
    let scale_down = pending.to.desired < memory.up.desired || pending.to.min < memory.up.min;
    let interrupted = match scale_down {
        true => now_at == memory.up,
        false => now_at.min < pending.to.min || now_at.desired < pending.to.desired,
    };
    let (outcome, aimed, why) = if now_at == pending.to {
        let why = format!("the group is at {now_at}");
        (Outcome::Succeeded, true, why)
    } else if interrupted {
        let why = format!(
            "{INTERRUPTED}; the group is at {now_at}, not {}",
            pending.to
        );
        (Outcome::Failed, false, why)
    } else {
        let (found, taken_as) = match scale_down {
            true => (
                format!("neither {} asked for nor {} it had", pending.to, memory.up),
                format!("held down, {} restored at the opening", memory.up),
            ),
            false => (
                format!("above {} asked for", pending.to),
                "up, at that capacity".to_string(),
            ),
        };
        let why = format!(
            "the group is at {now_at}, {found}: someone else changed it meanwhile, so whether \
             ebb's change landed is unknown; not counted as ebb's, and the group is taken as \
             {taken_as}"
        );
        (Outcome::Failed, true, why)
    };
    End {
        outcome,
        aimed,
        why: format!("resolved from its capacity: {why}"),
        error: (outcome == Outcome::Failed).then_some(why),
        request_id: None,
    }
}

/// What the intent's reason adds for a group changed through EKS.
fn through(group: &ScalingGroup) -> String {
    group
        .node_group()
        .map(|ng| format!(" (through EKS node group {ng}: UpdateNodegroupConfig)"))
        .unwrap_or_default()
}

/// Member ids, comma-separated.
fn list(ids: &[&String]) -> String {
    ids.iter()
        .map(|id| id.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

/// `Ok` when the decision made again right before the call still asks for what `d` does.
fn same(d: &GroupDecision, again: &GroupDecision) -> Result<(), String> {
    if again.action == d.action && again.to == d.to && again.keep == d.keep {
        Ok(())
    } else {
        Err(format!(
            "read again right before the call: {}",
            again.reason
        ))
    }
}
