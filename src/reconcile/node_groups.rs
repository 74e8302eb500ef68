//! The groups of EKS managed node groups, changed through EKS: UpdateNodegroupConfig answers
//! with an update id, kept on the group's pending change, and the change's one outcome is
//! written once DescribeUpdate says the update ended: `Successful` succeeded, `Failed` or
//! `Cancelled` failed with EKS's errors, `InProgress` asked again at the next tick.
//!
//! An update that cannot be read (DescribeUpdate refused, not found, unanswered), or a change
//! without an update id (a lost answer, a crash after the intent), is unknown: once its call
//! can no longer be in flight it is resolved from the node group's scaling config
//! (DescribeNodegroup), never by calling again; unread, it stays pending.

use super::groups::{End, SCALE_DOWN};
use super::Reconciler;
use crate::cloud::{Provider, ScalingGroups, UpdateStatus};
use crate::engine::GroupMemory;
use crate::fleet::{NodeGroup, ScalingGroup};
use crate::store::{NewAuditEntry, Outcome, PendingChange, StoreError, INTERRUPTED};

impl<P: Provider> Reconciler<P> {
    /// Right after the call that changed node group `ng` (of `group`) answered: its update id
    /// kept on the pending change, and the outcome written at once if EKS says the update
    /// ended already (the intent `intent`'s, with `memory`).
    pub(super) async fn node_group_changed(
        &self,
        scaling: &P::ScalingGroups,
        group: &ScalingGroup,
        ng: &NodeGroup,
        memory: &GroupMemory,
        pending: &PendingChange,
        intent: &NewAuditEntry,
    ) -> Result<(), StoreError> {
        if let Some(update) = &pending.update {
            self.store
                .group_update_started(&group.region, &group.name, pending.seq, update)
                .await?;
        }
        // Right after the call, it is in flight unless nothing ever is (the simulated fleet).
        let in_flight = self.options.in_flight_for > chrono::Duration::zero();
        let Some(end) = self
            .node_group_end(scaling, group, ng, pending, in_flight)
            .await
        else {
            return Ok(());
        };
        let memory = match end.outcome {
            Outcome::Succeeded if intent.action == SCALE_DOWN => GroupMemory {
                down_since: Some(pending.at),
                ..memory.clone()
            },
            Outcome::Succeeded => GroupMemory {
                down_since: None,
                ..memory.clone()
            },
            _ => memory.clone(),
        };
        tracing::info!(group = %group.name, region = %group.region, node_group = %ng, outcome = end.outcome.as_str(), "node group changed");
        let entry = NewAuditEntry {
            outcome: end.outcome,
            request_id: end.request_id,
            error: end.error,
            intent_seq: Some(pending.seq),
            ..intent.clone()
        };
        self.store
            .group_outcome(&entry, &group.region, &group.name, &memory)
            .await?;
        Ok(())
    }

    /// How node group `ng`'s pending change ended, if it did: as DescribeUpdate says of its
    /// update; unread (or without an update id), from the node group's scaling config once the
    /// call can no longer be in flight (`in_flight` false). `None` leaves it pending.
    pub(super) async fn node_group_end(
        &self,
        scaling: &P::ScalingGroups,
        group: &ScalingGroup,
        ng: &NodeGroup,
        pending: &PendingChange,
        in_flight: bool,
    ) -> Option<End> {
        let unread = match &pending.update {
            Some(update) => {
                let read = scaling
                    .node_group_update(&group.region, &group.name, ng, update);
                match read.await {
                    Ok(u) => {
                        let why = format!("EKS update {update} of node group {ng} is {}", u.status);
                        let (outcome, why) = match u.status {
                            UpdateStatus::Successful => (Outcome::Succeeded, why),
                            UpdateStatus::InProgress => {
                                tracing::info!(group = %group.name, region = %group.region, %why, "node group change not done yet");
                                return None;
                            }
                            UpdateStatus::Failed | UpdateStatus::Cancelled => {
                                let errors = if u.errors.is_empty() {
                                    "EKS gave no error".to_string()
                                } else {
                                    u.errors.join("; ")
                                };
                                (Outcome::Failed, format!("{why}: {errors}"))
                            }
                        };
                        let request_id = Some(update.clone());
                        return Some(End {
                            outcome,
                            aimed: outcome == Outcome::Succeeded,
                            error: (outcome == Outcome::Failed).then(|| why.clone()),
                            why,
                            request_id,
                        });
                    }
                    Err(err) => format!("its update {update} could not be read ({err})"),
                }
            }
            None => "no update id was kept (the call's answer was lost, or the tick stopped around the call)".to_string(),
        };
        if in_flight {
            tracing::warn!(group = %group.name, region = %group.region, node_group = %ng, why = %unread, "node group change unknown, resolved later");
            return None;
        }
        let config = scaling.node_group_capacity(&group.region, &group.name, ng);
        let now_at = match config.await {
            Ok(capacity) => capacity,
            Err(err) => {
                tracing::warn!(group = %group.name, region = %group.region, node_group = %ng, why = %unread, error = %err, "node group change unknown: its scaling config could not be read");
                return None;
            }
        };
        let (outcome, why) = if now_at == pending.to {
            (
                Outcome::Succeeded,
                format!("node group {ng} is at {now_at}"),
            )
        } else {
            let why = format!(
                "{INTERRUPTED}; node group {ng} is at {now_at}, not {}",
                pending.to
            );
            (Outcome::Failed, why)
        };
        Some(End {
            outcome,
            aimed: outcome == Outcome::Succeeded,
            why: format!("{unread}; resolved from the node group's scaling config: {why}"),
            error: (outcome == Outcome::Failed).then(|| format!("{why} ({unread})")),
            request_id: pending.update.clone(),
        })
    }
}
