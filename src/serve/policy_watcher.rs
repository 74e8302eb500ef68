//! Watches the policy files and asks for a tick when they change (an edit, a `git pull`, a
//! ConfigMap update), so that a change takes effect without waiting for the next tick.

use super::driver::BackgroundTask;
use crate::control::Control;
use crate::policy::PolicySource;
use serde::Serialize;
use std::sync::Arc;

/// Compares the policy files' fingerprint with the last one seen.
pub struct PolicyWatcher {
    policies: Arc<PolicySource>,
    control: Arc<Control>,
    last: Option<[u8; 32]>,
}

impl PolicyWatcher {
    /// A watcher of `policies` that wakes `control`'s tick loop.
    pub fn new(policies: Arc<PolicySource>, control: Arc<Control>) -> Self {
        PolicyWatcher {
            policies,
            control,
            last: None,
        }
    }
}

/// What an activation of the watcher saw.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct PolicyFiles {
    /// Whether the files changed since the last look (which asked for a tick).
    pub changed: bool,
}

impl std::fmt::Display for PolicyFiles {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.changed {
            true => write!(f, "the files changed; asked for a tick"),
            false => write!(f, "unchanged"),
        }
    }
}

/// Why the policy files could not be looked at.
#[derive(Debug, thiserror::Error)]
#[error("cannot read the policy files: {0}")]
pub struct WatchError(#[from] tokio::task::JoinError);

impl BackgroundTask for PolicyWatcher {
    const NAME: &'static str = "policy_watcher";
    const DESCRIPTION: &'static str = "asks for a tick when the policy files change";

    type Status = PolicyFiles;
    type Error = WatchError;

    async fn activate(&mut self) -> Result<PolicyFiles, WatchError> {
        let policies = self.policies.clone();
        // Reading the files must not hold up the async runtime.
        let now = tokio::task::spawn_blocking(move || policies.fingerprint()).await?;
        let changed = self.last.is_some_and(|last| last != now);
        self.last = Some(now);
        if changed {
            tracing::info!("the policy files changed; ticking now");
            self.control.wake.notify_one();
        }
        Ok(PolicyFiles { changed })
    }
}
