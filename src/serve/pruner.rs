//! Deletes what ebb keeps for a while but not for ever: instance state changes and spot
//! interruption warnings older than the retention (`EBB_RETENTION`). The audit log is never
//! pruned. Only the leader prunes, so replicas do not delete the same rows at once.

use super::driver::BackgroundTask;
use crate::clock::Clock;
use crate::control::Control;
use crate::store::Store;
use chrono::SecondsFormat;
use std::sync::Arc;

/// Prunes the store's history at each activation.
pub struct Pruner {
    store: Store,
    clock: Clock,
    control: Arc<Control>,
    keep: chrono::Duration,
}

impl Pruner {
    /// A pruner of `store` that keeps `keep` of history, by `clock`'s time.
    pub fn new(store: Store, clock: Clock, control: Arc<Control>, keep: chrono::Duration) -> Self {
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
    const DESCRIPTION: &'static str =
        "deletes instance state changes and spot warnings older than EBB_RETENTION (never the audit log)";

    async fn activate(&mut self) -> Result<String, String> {
        if !self.control.is_leader() {
            return Ok("not the leader, which prunes".to_string());
        }
        let before = self.clock.now() - self.keep;
        let pruned = self
            .store
            .prune(before)
            .await
            .map_err(|err| format!("cannot prune: {err}"))?;
        Ok(format!(
            "deleted {} instance state changes and {} spot warnings from before {}",
            pruned.events,
            pruned.warnings,
            before.to_rfc3339_opts(SecondsFormat::Secs, true)
        ))
    }
}
