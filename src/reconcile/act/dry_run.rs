//! Dry runs: audited, never called.

use super::Reconciler;
use crate::cloud::Provider;
use crate::engine::Decision;
use crate::reconcile::{ActionOutcome, TickContext};
use crate::store::{NewAuditEntry, Outcome, StoreError};

impl<P: Provider> Reconciler<P> {
    /// Dry runs: the intent and a `skipped` outcome, so the log shows what would have been
    /// done; once, not at every tick while the same decision holds.
    pub(super) async fn audit_dry_runs(
        &self,
        dry: Vec<Decision>,
        tick: &mut TickContext<'_>,
    ) -> Result<(), StoreError> {
        let ids: Vec<String> = dry.iter().map(|d| d.instance.clone()).collect();
        let noted = self.store.last_dry_runs(&ids).await?;
        let (repeated, new): (Vec<Decision>, Vec<Decision>) = dry.into_iter().partition(|d| {
            noted.get(&d.instance).is_some_and(|(action, code)| {
                action == d.action.as_str() && code.as_deref() == Some(d.code.as_str())
            })
        });
        let intents: Vec<NewAuditEntry> = new
            .iter()
            .map(|d| tick.entry(d, Outcome::Intent, true))
            .collect();
        self.store
            .append_dry_runs(&intents, "dry run, nothing done")
            .await?;
        let new = new.into_iter().map(|decision| ActionOutcome {
            detail: format!("{}; dry run, nothing done", decision.reason),
            decision,
            outcome: Outcome::Skipped,
        });
        let repeated = repeated.into_iter().map(|decision| ActionOutcome {
            detail: format!(
                "{}; dry run, nothing done (already in the audit log)",
                decision.reason
            ),
            decision,
            outcome: Outcome::Skipped,
        });
        for done in new.chain(repeated) {
            done.log(tick.now, self.options.dry_run);
            tick.report.actions.push(done);
        }
        Ok(())
    }
}
