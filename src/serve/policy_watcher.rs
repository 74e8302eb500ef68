//! Watches the policy files and asks for a tick when they change (an edit, a `git pull`, a
//! ConfigMap update), so that a change takes effect without waiting for the next tick.

use super::driver::BackgroundTask;
use crate::control::Control;
use crate::policy::PolicySource;
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

impl BackgroundTask for PolicyWatcher {
    const NAME: &'static str = "policy_watcher";
    const DESCRIPTION: &'static str = "asks for a tick when the policy files change";

    async fn activate(&mut self) -> Result<String, String> {
        let policies = self.policies.clone();
        // Reading the files must not hold up the async runtime.
        let now = tokio::task::spawn_blocking(move || policies.fingerprint())
            .await
            .map_err(|err| format!("cannot read the policy files: {err}"))?;
        let changed = self.last.is_some_and(|last| last != now);
        self.last = Some(now);
        if changed {
            tracing::info!("the policy files changed; ticking now");
            self.control.wake.notify_one();
            Ok("the files changed; asked for a tick".to_string())
        } else {
            Ok("unchanged".to_string())
        }
    }
}
