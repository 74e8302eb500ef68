//! Watches the policy files and asks for a tick when they change (an edit, a `git pull`, a
//! ConfigMap update), so that a change takes effect without waiting for the next tick; and
//! says, in the log once a day, in `GET /v1/status` and in `ebb_calendars_running_out`, which
//! calendars may have run out.

use super::driver::BackgroundTask;
use crate::clock::Clock;
use crate::control::Control;
use crate::policy::PolicySource;
use chrono::NaiveDate;
use serde::Serialize;
use std::sync::Arc;

/// Compares the policy files' fingerprint with the last one seen.
pub struct PolicyWatcher {
    policies: Arc<PolicySource>,
    control: Arc<Control>,
    clock: Clock,
    last: Option<[u8; 32]>,
    /// The day the calendars' warnings were last logged, and what they were.
    told: Option<(NaiveDate, Vec<String>)>,
}

impl PolicyWatcher {
    /// A watcher of `policies` that wakes `control`'s tick loop, its days by `clock`.
    pub fn new(policies: Arc<PolicySource>, control: Arc<Control>, clock: Clock) -> Self {
        PolicyWatcher {
            policies,
            control,
            clock,
            last: None,
            told: None,
        }
    }
}

/// What an activation of the watcher saw.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PolicyFiles {
    /// Whether the files changed since the last look (which asked for a tick).
    pub changed: bool,
    /// Why each calendar of the policies in force may have run out: a year it names no date
    /// of, whose holidays are then taken as ordinary days.
    pub calendars_running_out: Vec<String>,
}

impl std::fmt::Display for PolicyFiles {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.changed {
            true => write!(f, "the files changed; asked for a tick")?,
            false => write!(f, "unchanged")?,
        }
        for why in &self.calendars_running_out {
            write!(f, "; {why}")?;
        }
        Ok(())
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
        let today = self.clock.now().date_naive();
        // Reading the files must not hold up the async runtime. Files that do not load say
        // nothing of calendars: the tick reports them, and the last valid set stands in.
        let (now, calendars_running_out) = tokio::task::spawn_blocking(move || {
            let warnings = policies.load().map(|p| p.set.calendars_running_out(today));
            (policies.fingerprint(), warnings.unwrap_or_default())
        })
        .await?;
        let changed = self.last.is_some_and(|last| last != now);
        self.last = Some(now);
        if changed {
            tracing::info!("the policy files changed; ticking now");
            self.control.wake.notify_one();
        }
        self.control
            .metrics
            .calendars_running_out(calendars_running_out.len());
        let told = (today, calendars_running_out.clone());
        if self.told.as_ref() != Some(&told) {
            for why in &calendars_running_out {
                tracing::warn!(calendar_warning = %why, "a calendar may have run out");
            }
            self.told = Some(told);
        }
        Ok(PolicyFiles {
            changed,
            calendars_running_out,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// With the shipped calendars in December 2026, which name no 2027 date, the watcher's
    /// status (what `GET /v1/status` shows) names both.
    #[tokio::test]
    async fn the_status_names_the_calendars_that_may_have_run_out() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
        let policies = Arc::new(PolicySource::new(
            vec![root.join("policies/calendars.yaml")],
        ));
        let december = "2026-12-07T00:00:00Z".parse().unwrap();
        let mut watcher = PolicyWatcher::new(
            policies.clone(),
            Arc::new(Control::default()),
            Clock::Fixed(december),
        );
        let status = watcher.activate().await.unwrap();
        let named = |name: &str| {
            status
                .calendars_running_out
                .iter()
                .any(|w| w.contains(&format!("calendar {name} names no date in 2027")))
        };
        assert!(named("cn-holidays") && named("cn-workdays"), "{status}");
        assert!(watcher
            .control
            .metrics
            .encode()
            .contains("ebb_calendars_running_out 2"));
        assert!(status.to_string().contains("cn-holidays"), "{status}");
        // In June the year is covered and November is months away: nothing to say.
        let june = "2026-06-01T00:00:00Z".parse().unwrap();
        let mut watcher =
            PolicyWatcher::new(policies, Arc::new(Control::default()), Clock::Fixed(june));
        assert!(watcher
            .activate()
            .await
            .unwrap()
            .calendars_running_out
            .is_empty());
    }
}
