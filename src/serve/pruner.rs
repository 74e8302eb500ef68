//! Deletes what ebb keeps for a while but not for ever: instance state changes and spot
//! interruption warnings older than the retention (`EBB_RETENTION`; state changes only once the
//! report's roll-up has rolled their day), GPU readings, posted heartbeats and the last activity
//! readings older than theirs (`EBB_METRICS_RETENTION`). The audit log is never pruned. Only the
//! leader prunes, so replicas do not delete the same rows at once.

use super::driver::BackgroundTask;
use crate::clock::Clock;
use crate::control::Control;
use crate::store::{Store, StoreError};
use chrono::{DateTime, SecondsFormat, Utc};
use serde::Serialize;
use std::sync::Arc;

/// How long the pruner keeps each kind of history.
#[derive(Debug, Clone, Copy)]
pub struct Retention {
    /// Instance state changes and spot interruption warnings.
    pub history: chrono::Duration,
    /// GPU readings.
    pub readings: chrono::Duration,
}

/// Prunes the store's history at each activation.
pub struct Pruner {
    store: Store,
    clock: Clock,
    control: Arc<Control>,
    keep: Retention,
}

impl Pruner {
    /// A pruner of `store` that keeps `keep` of history, by `clock`'s time.
    pub fn new(store: Store, clock: Clock, control: Arc<Control>, keep: Retention) -> Self {
        Pruner {
            store,
            clock,
            control,
            keep,
        }
    }
}

/// What an activation of the pruner did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "pruned", rename_all = "snake_case")]
pub enum PruneStatus {
    /// Nothing: only the leader prunes.
    NotLeader,
    /// What was deleted.
    Deleted {
        /// Spot warnings and the pools' events before this were deleted.
        before: DateTime<Utc>,
        /// Instance state changes before this were deleted: `before`, or the first day the
        /// report's roll-up has still to roll.
        events_before: DateTime<Utc>,
        /// Instance state changes deleted.
        events: u64,
        /// Spot interruption warnings deleted.
        warnings: u64,
        /// The pools' interruptions and rebalance recommendations deleted.
        pool_events: u64,
        /// Hours of one instance's GPU readings deleted.
        readings: u64,
        /// Instances' last posted heartbeats deleted.
        heartbeats: u64,
        /// Instances' last activity readings deleted.
        activity: u64,
        /// Reads of held capacity reservations deleted.
        capacity_reads: u64,
    },
}

impl std::fmt::Display for PruneStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PruneStatus::NotLeader => write!(f, "not the leader, which prunes"),
            PruneStatus::Deleted {
                before,
                events_before,
                events,
                warnings,
                pool_events,
                readings,
                heartbeats,
                activity,
                capacity_reads,
            } => write!(
                f,
                "deleted {events} instance state changes from before {}{}, {warnings} spot warnings and {pool_events} pool events from before {}, and {readings} hours of GPU readings, {heartbeats} heartbeats, {activity} activity readings and {capacity_reads} reads of capacity reservations",
                events_before.to_rfc3339_opts(SecondsFormat::Secs, true),
                if events_before < before {
                    " (kept since for the report's roll-up)"
                } else {
                    ""
                },
                before.to_rfc3339_opts(SecondsFormat::Secs, true),
            ),
        }
    }
}

/// Why the pruner could not prune.
#[derive(Debug, thiserror::Error)]
#[error("cannot prune: {0}")]
pub struct PruneError(#[from] StoreError);

impl BackgroundTask for Pruner {
    const NAME: &'static str = "pruner";
    const DESCRIPTION: &'static str = "deletes instance state changes, spot warnings and the pools' events older than EBB_RETENTION and GPU readings, posted heartbeats, activity readings and reads of capacity reservations older than EBB_METRICS_RETENTION (never the audit log)";

    type Status = PruneStatus;
    type Error = PruneError;

    async fn activate(&mut self) -> Result<PruneStatus, PruneError> {
        if !self.control.is_leader() {
            return Ok(PruneStatus::NotLeader);
        }
        let now = self.clock.now();
        let before = now - self.keep.history;
        let pruned = self.store.prune(before, now - self.keep.readings).await?;
        Ok(PruneStatus::Deleted {
            before,
            events_before: pruned.events_before,
            events: pruned.events,
            warnings: pruned.warnings,
            pool_events: pruned.pool_events,
            readings: pruned.readings,
            heartbeats: pruned.heartbeats,
            activity: pruned.activity,
            capacity_reads: pruned.capacity_reads,
        })
    }
}
