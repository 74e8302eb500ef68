//! Deletes what ebb keeps for a while but not for ever: instance state changes and spot
//! interruption warnings older than the retention (`EBB_RETENTION`), GPU readings older than
//! theirs (`EBB_METRICS_RETENTION`). The audit log is never pruned. Only the leader prunes, so
//! replicas do not delete the same rows at once.

use super::driver::BackgroundTask;
use crate::clock::Clock;
use crate::control::Control;
use crate::store::Store;
use chrono::SecondsFormat;
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

impl BackgroundTask for Pruner {
    const NAME: &'static str = "pruner";
    const DESCRIPTION: &'static str = "deletes instance state changes and spot warnings older than EBB_RETENTION and GPU readings older than EBB_METRICS_RETENTION (never the audit log)";

    async fn activate(&mut self) -> Result<String, String> {
        if !self.control.is_leader() {
            return Ok("not the leader, which prunes".to_string());
        }
        let now = self.clock.now();
        let before = now - self.keep.history;
        let pruned = self
            .store
            .prune(before, now - self.keep.readings)
            .await
            .map_err(|err| format!("cannot prune: {err}"))?;
        Ok(format!(
            "deleted {} instance state changes and {} spot warnings from before {}, and {} hours of GPU readings",
            pruned.events,
            pruned.warnings,
            before.to_rfc3339_opts(SecondsFormat::Secs, true),
            pruned.readings
        ))
    }
}
