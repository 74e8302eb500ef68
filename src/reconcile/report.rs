//! What a tick did, for `ebb tick`'s summary, the logs and the metrics.

use crate::engine::{Code, Decision};
use crate::fleet::Fleet;
use crate::metrics::{BudgetCount, Metrics, TickCounts};
use crate::policy::LoadError;
use crate::spot;
use crate::store::{AuditEntry, Outcome, StoreError};
use chrono::{DateTime, SecondsFormat, Utc};
use serde::Serialize;
use std::collections::{BTreeMap, HashMap};

/// Why a tick could not run.
#[derive(Debug, thiserror::Error)]
pub enum TickError {
    /// The store failed; nothing after the failure was done.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The policies are invalid and no earlier valid set is known.
    #[error("policies are not valid (run ebb validate): {0}")]
    Policies(LoadError),
}

/// What one action came to.
#[derive(Debug, Clone)]
pub struct ActionOutcome {
    /// The decision acted on.
    pub decision: Decision,
    /// Succeeded, failed, or skipped (a dry run, an override made since the decision, a box
    /// already stopped); [`Outcome::Intent`] while unknown (the call's answer was lost, and its
    /// intent stays open until the instance's state tells) or while a stop the cloud accepted
    /// is still stopping.
    pub outcome: Outcome,
    /// What the outcome row says: the reason, and what was done instead or the error.
    pub detail: String,
}

/// What the groups phase of a tick did with the Auto Scaling groups ebb manages.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct GroupCounts {
    /// Managed groups listed.
    pub listed: usize,
    /// Capacity changes that succeeded.
    pub succeeded: usize,
    /// Capacity changes that failed.
    pub failed: usize,
    /// Capacity changes whose answer was lost: resolved from the group's capacity later.
    pub unknown: usize,
    /// Changes left pending earlier, resolved from the group's capacity.
    pub resolved: usize,
}

/// What a tick came to, in counts: the tick loop's status in `GET /v1/status`, and (as text)
/// the headline of `ebb tick` and the logs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TickSummary {
    /// The decision time.
    pub at: DateTime<Utc>,
    /// Instances listed.
    pub instances: usize,
    /// Actions taken.
    pub actions: usize,
    /// Actions that succeeded.
    pub succeeded: usize,
    /// Actions that failed.
    pub failed: usize,
    /// Actions skipped, or not taken in a dry run.
    pub skipped: usize,
    /// Actions whose answer was lost: unknown, resolved from the instances' state at a later
    /// tick, never counted as failed; and stops accepted whose instances were still stopping,
    /// their outcomes written once they have stopped.
    pub unknown: usize,
    /// Actions left for the next tick by the cap.
    pub deferred: usize,
    /// Actions left for the next tick by EC2's rate limits.
    pub backlog: usize,
    /// Actions held back after failures.
    pub held_back: usize,
    /// Interrupted actions resolved from the instances' real state.
    pub resolved: usize,
    /// Instances awaiting an earlier call's outcome.
    pub awaiting: usize,
    /// Instances whose GPU utilisation could not be read.
    pub gpu_unread: usize,
    /// Instances kept because an activity signal of their idle rule could not be read
    /// (`activity_unreadable`): a wrong token or query shows only as boxes never stopped.
    pub activity_unread: usize,
    /// The Auto Scaling groups ebb manages.
    pub groups: GroupCounts,
}

impl std::fmt::Display for TickSummary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "tick at {}: {} instances, {} actions ({} succeeded, {} failed, {} skipped or dry run, {} unknown or still stopping, resolving), {} deferred by the cap, {} waiting for EC2's rate limits, {} held back after failures, {} interrupted actions resolved, {} instances awaiting an earlier call's outcome, {} instances with GPU utilisation unread",
            self.at.to_rfc3339_opts(SecondsFormat::Secs, true),
            self.instances,
            self.actions,
            self.succeeded,
            self.failed,
            self.skipped,
            self.unknown,
            self.deferred,
            self.backlog,
            self.held_back,
            self.resolved,
            self.awaiting,
            self.gpu_unread,
        )?;
        if self.activity_unread > 0 {
            write!(
                f,
                ", {} instances kept because an activity signal could not be read",
                self.activity_unread
            )?;
        }
        let g = &self.groups;
        if *g != GroupCounts::default() {
            write!(
                f,
                "; {} Auto Scaling groups, {} capacity changes ({} succeeded, {} failed, {} unknown, resolving), {} interrupted group changes resolved",
                g.listed,
                g.succeeded + g.failed + g.unknown,
                g.succeeded,
                g.failed,
                g.unknown,
                g.resolved,
            )?;
        }
        Ok(())
    }
}

/// What a tick did.
#[derive(Debug, Default)]
pub struct TickReport {
    /// The decision time.
    pub at: DateTime<Utc>,
    /// Where each budget stood at the decisions.
    pub budgets: Vec<crate::budget::Standing>,
    /// The policies failed to load and the last good set was used: why.
    pub policy_error: Option<String>,
    /// Instances listed.
    pub instances: usize,
    /// Regions or accounts that could not be listed, with why.
    pub inventory_failures: Vec<String>,
    /// Regions whose GPU utilisation could not be read: their instances were not stopped for
    /// idleness, nor while busy deferral could apply.
    pub gpu_read_failures: Vec<ReadFailure>,
    /// Interrupted intents resolved from the instances' real state.
    pub resolved: Vec<AuditEntry>,
    /// Instances left alone because an earlier intent of theirs is still open: its call may
    /// still be in flight.
    pub awaiting: usize,
    /// The actions, each with its outcome.
    pub actions: Vec<ActionOutcome>,
    /// Actions left for the next tick by the cap.
    pub deferred: usize,
    /// Actions held back because they failed lately.
    pub held_back: usize,
    /// Actions left for the next tick because the cloud's rate limits could not serve them
    /// within this one.
    pub backlog: usize,
    /// The token buckets after the tick, when the provider paces its calls.
    pub pacing: Option<crate::cloud::pacing::PacingCounts>,
    /// How many instances got each decision, by action and code.
    pub decided: BTreeMap<(&'static str, &'static str), usize>,
    /// How many instances are in each state, by state and governing policy (`""` for none).
    pub instances_by_state: BTreeMap<(&'static str, String), usize>,
    /// Spot migrations planned or advanced, each with what happened.
    pub migrations: Vec<MigrationStep>,
    /// When the tick looked for artifacts of migrations that no migration tracks: how many it
    /// found, by kind (`instance`, `image`, `snapshot`).
    pub orphans: Option<BTreeMap<&'static str, usize>>,
    /// Spot migrations waiting on a person, by alert (`image_missing`).
    pub spot_alerts: BTreeMap<&'static str, usize>,
    /// The Auto Scaling groups ebb manages: listed, changed, resolved.
    pub groups: GroupCounts,
}

/// A region whose GPU utilisation could not be read in a tick.
#[derive(Debug, Clone)]
pub struct ReadFailure {
    /// The region.
    pub region: String,
    /// How many instances' readings were wanted there.
    pub instances: usize,
    /// Why: the provider's error.
    pub error: String,
}

impl ReadFailure {
    /// One line for people: where, how many, why, and what it means.
    pub fn describe(&self) -> String {
        format!(
            "cannot read GPU utilisation in {} for {} instances: {}; none of them is stopped for idleness, nor while busy would defer its stop",
            self.region, self.instances, self.error
        )
    }
}

/// What one spot migration did in a tick.
#[derive(Debug, Clone)]
pub struct MigrationStep {
    /// The migration's id.
    pub id: i64,
    /// The instance it moves.
    pub instance: String,
    /// Its state after the tick.
    pub state: spot::State,
    /// What happened.
    pub detail: String,
}

impl ActionOutcome {
    /// Its outcome as the logs and metrics name it: `unknown` while no outcome is written.
    pub fn label(&self) -> &'static str {
        match self.outcome {
            Outcome::Intent => "unknown",
            other => other.as_str(),
        }
    }

    /// Logs the action, in the spans of its tick and its cloud call; `dry_run` when the whole
    /// reconciler runs dry.
    pub(super) fn log(&self, at: DateTime<Utc>, dry_run: bool) {
        tracing::info!(
            at = %at.to_rfc3339_opts(SecondsFormat::Secs, true),
            instance = self.decision.instance,
            action = self.decision.action.as_str(),
            outcome = self.label(),
            policy = self.decision.policy.as_deref(),
            dry_run = self.decision.dry_run || dry_run,
            detail = self.detail,
            "action"
        );
    }
}

impl TickReport {
    /// Counts the decisions, and the listed instances by state and governing policy.
    pub(super) fn count(&mut self, fleet: &Fleet, decisions: &[Decision]) {
        for d in decisions {
            *self
                .decided
                .entry((d.action.as_str(), d.code.as_str()))
                .or_default() += 1;
        }
        let policy_of: HashMap<&str, &str> = decisions
            .iter()
            .map(|d| (d.instance.as_str(), d.policy.as_deref().unwrap_or("")))
            .collect();
        let mut by_state: BTreeMap<(&'static str, &str), usize> = BTreeMap::new();
        for instance in &fleet.instances {
            let policy = policy_of.get(instance.id.as_str()).copied().unwrap_or("");
            *by_state
                .entry((instance.state.as_str(), policy))
                .or_default() += 1;
        }
        self.instances_by_state = by_state
            .into_iter()
            .map(|((state, policy), n)| ((state, policy.to_string()), n))
            .collect();
    }

    /// Whether `ebb tick` should exit non-zero: an action failed, the policies are invalid, a
    /// region could not be listed, or GPU utilisation could not be read.
    pub fn failed(&self) -> bool {
        self.actions.iter().any(|a| a.outcome == Outcome::Failed)
            || self.policy_error.is_some()
            || !self.inventory_failures.is_empty()
            || !self.gpu_read_failures.is_empty()
    }

    /// How many instances' GPU utilisation could not be read.
    pub fn gpu_unread(&self) -> usize {
        self.gpu_read_failures.iter().map(|f| f.instances).sum()
    }

    /// One line: when, how many instances, what came of the actions.
    pub fn headline(&self) -> String {
        self.summary().to_string()
    }

    /// The counts of the headline.
    pub fn summary(&self) -> TickSummary {
        let count = |o: Outcome| self.actions.iter().filter(|a| a.outcome == o).count();
        TickSummary {
            at: self.at,
            instances: self.instances,
            actions: self.actions.len(),
            succeeded: count(Outcome::Succeeded),
            failed: count(Outcome::Failed),
            skipped: count(Outcome::Skipped),
            unknown: count(Outcome::Intent),
            deferred: self.deferred,
            backlog: self.backlog,
            held_back: self.held_back,
            resolved: self.resolved.len(),
            awaiting: self.awaiting,
            gpu_unread: self.gpu_unread(),
            activity_unread: self
                .decided
                .iter()
                .filter(|((_, code), _)| *code == Code::ActivityUnreadable.as_str())
                .map(|(_, n)| n)
                .sum(),
            groups: self.groups,
        }
    }

    /// Records the tick, which took `took`, in `metrics`.
    pub fn record(&self, metrics: &Metrics, took: std::time::Duration) {
        let mut actions: BTreeMap<(&'static str, &'static str), u64> = BTreeMap::new();
        for a in &self.actions {
            *actions
                .entry((a.decision.action.as_str(), a.label()))
                .or_default() += 1;
        }
        metrics.tick_done(
            took,
            &TickCounts {
                policy_error: self.policy_error.is_some(),
                decided: &self.decided,
                instances_by_state: &self.instances_by_state,
                actions,
                gpu_unread: self
                    .gpu_read_failures
                    .iter()
                    .map(|f| (f.region.as_str(), f.instances))
                    .collect(),
                orphans: self.orphans.as_ref(),
                spot_alerts: &spot::Alert::ALL
                    .iter()
                    .map(|a| {
                        let n = self.spot_alerts.get(a.as_str()).copied().unwrap_or(0);
                        (a.as_str(), n)
                    })
                    .collect(),
                backlog: self.backlog,
                throttles: self.pacing.as_ref().map(|p| p.throttles),
                tokens: self.pacing.as_ref().map(|p| &p.tokens),
                budgets: self
                    .budgets
                    .iter()
                    .map(|b| BudgetCount {
                        budget: b.budget.clone(),
                        key: b.key.clone().unwrap_or_default(),
                        currency: b.currency.clone(),
                        amount: b.amount,
                        spent: b.spent.as_ref().ok().copied(),
                        forecast: b.forecast,
                    })
                    .collect(),
            },
        );
    }

    /// Logs the tick: every migration step, then a summary line (each action was logged as it
    /// was done).
    pub fn log(&self) {
        let at = self.at.to_rfc3339_opts(SecondsFormat::Secs, true);
        for failure in &self.inventory_failures {
            tracing::error!(error = %failure, "cannot list instances");
        }
        for failure in &self.gpu_read_failures {
            tracing::error!(
                region = failure.region,
                instances = failure.instances,
                error = %failure.error,
                "cannot read GPU utilisation: none of these instances is stopped for idleness"
            );
        }
        for m in &self.migrations {
            tracing::info!(
                at,
                migration = m.id,
                instance = m.instance,
                state = m.state.as_str(),
                detail = m.detail,
                "migration"
            );
        }
        tracing::info!(
            at,
            instances = self.instances,
            actions = self.actions.len(),
            failed = self
                .actions
                .iter()
                .filter(|a| a.outcome == Outcome::Failed)
                .count(),
            deferred = self.deferred,
            backlog = self.backlog,
            held_back = self.held_back,
            resolved = self.resolved.len(),
            awaiting = self.awaiting,
            gpu_unread = self.gpu_unread(),
            policy_error = self.policy_error.as_deref(),
            "tick"
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failed_reads_are_in_the_headline_the_exit_code_and_the_metrics() {
        let failure = |region: &str, instances| ReadFailure {
            region: region.into(),
            instances,
            error: "GetMetricData: throttled".into(),
        };
        let report = TickReport {
            gpu_read_failures: vec![failure("eu-west-1", 2), failure("us-east-1", 1)],
            ..TickReport::default()
        };
        assert!(report.failed());
        assert!(
            report
                .headline()
                .ends_with(", 3 instances with GPU utilisation unread"),
            "{}",
            report.headline()
        );
        let metrics = Metrics::default();
        report.record(&metrics, std::time::Duration::ZERO);
        report.record(&metrics, std::time::Duration::ZERO);
        let text = metrics.encode();
        for line in [
            "ebb_gpu_read_failures_total{region=\"eu-west-1\"} 2",
            "ebb_gpu_read_failures_total{region=\"us-east-1\"} 2",
            "ebb_gpu_unread_instances 3",
        ] {
            assert!(text.contains(line), "{line} not in\n{text}");
        }
        TickReport::default().record(&metrics, std::time::Duration::ZERO);
        assert!(metrics.encode().contains("ebb_gpu_unread_instances 0"));
    }

    #[test]
    fn boxes_kept_by_an_unreadable_activity_signal_are_in_the_headline() {
        let report = TickReport {
            decided: [(("none", "activity_unreadable"), 2), (("stop", "idle"), 1)].into(),
            ..TickReport::default()
        };
        let headline = report.headline();
        assert!(
            headline.contains(", 2 instances kept because an activity signal could not be read"),
            "{headline}"
        );
        assert!(!report.failed(), "a box kept is not a failed tick");
        assert!(!TickReport::default().headline().contains("activity"));
    }
}
