//! What the act phase takes on this tick: the decisions that change something, less those held
//! back after recent failures, in order, up to the cap and to what EC2's rate limits serve.

use super::calls::{order, CloudCall};
use super::Reconciler;
use crate::cloud::Provider;
use crate::engine::{Action, Code, Decision};
use crate::reconcile::TickReport;
use crate::store::{FailureStreak, StoreError};
use chrono::{DateTime, Duration, Utc};
use std::collections::HashMap;

/// After a failed action, the same action on the same instance waits this long before it is
/// tried again, twice as long after each further failure in a row, up to [`RETRY_MAX`]: an
/// action that keeps failing (access denied, no capacity) is retried, but does not fill the
/// audit log and the cloud's rate limits at every tick.
const RETRY_FIRST: Duration = Duration::minutes(1);
/// The longest wait before a failed action is tried again.
const RETRY_MAX: Duration = Duration::hours(1);
/// A start EC2 refused for lack of capacity is tried again at every tick this many times in a
/// row: GPU capacity comes and goes within minutes, and people are waiting for the box.
pub(super) const CAPACITY_EVERY_TICK: u32 = 10;
/// After that, it is tried again this often, still well short of [`RETRY_MAX`].
pub(super) const CAPACITY_RETRY: Duration = Duration::minutes(5);

impl<P: Provider> Reconciler<P> {
    /// The decisions acted on this tick, in order: those that change something, less those held
    /// back after recent failures, starts first (people are waiting for them), then notices,
    /// then stops, by instance id within each, up to the cap.
    pub(super) async fn this_tick(
        &self,
        decisions: Vec<Decision>,
        now: DateTime<Utc>,
        report: &mut TickReport,
    ) -> Result<Vec<Decision>, StoreError> {
        let mut to_act: Vec<Decision> = decisions
            .into_iter()
            .filter(|d| match CloudCall::of(d.action) {
                Some(_) => true,
                // Real moves go through the spot migrations; dry runs are audited here.
                None => d.action == Action::MigrateToSpot && self.is_dry_run(d),
            })
            .collect();
        let real: Vec<String> = to_act
            .iter()
            .filter(|d| !self.is_dry_run(d))
            .map(|d| d.instance.clone())
            .collect();
        if !real.is_empty() {
            let streaks = self.store.failure_streaks(&real).await?;
            let before = to_act.len();
            to_act.retain(|d| match streaks.get(&d.instance) {
                Some(s) if s.action == d.action.as_str() && !self.is_dry_run(d) => {
                    now >= s.last_at + wait_after(s)
                }
                _ => true,
            });
            report.held_back = before - to_act.len();
        }
        to_act.sort_by_key(|d| (order(d.action), d.instance.clone()));
        let deferred = self
            .options
            .max_actions
            .map_or(0, |cap| to_act.len().saturating_sub(cap));
        to_act.truncate(to_act.len() - deferred);
        report.deferred = deferred;
        if deferred > 0 {
            tracing::warn!(
                deferred,
                "more actions than EBB_MAX_ACTIONS_PER_TICK allows; the rest wait"
            );
        }
        Ok(self.within_pace(to_act, report))
    }

    /// `to_act` less the real actions the provider's token buckets cannot serve within the
    /// tick's wait (by API and region, in order): the backlog, decided afresh at the next
    /// tick. A tick that waited longer would run into its deadline with intents written for
    /// calls it never makes.
    fn within_pace(&self, to_act: Vec<Decision>, report: &mut TickReport) -> Vec<Decision> {
        let Some(pacing) = &self.options.pacing else {
            return to_act;
        };
        let mut room: HashMap<(&'static str, String), usize> = HashMap::new();
        let mut kept = Vec::with_capacity(to_act.len());
        for d in to_act {
            let call = CloudCall::of(d.action).filter(|_| !self.is_dry_run(&d));
            let Some(api) = call.map(CloudCall::api) else {
                kept.push(d);
                continue;
            };
            let left = room.entry((api, d.region.clone())).or_insert_with(|| {
                pacing
                    .pacer
                    .servable(&d.region, api, pacing.within, pacing.batch)
            });
            if *left == 0 {
                report.backlog += 1;
                continue;
            }
            *left -= 1;
            kept.push(d);
        }
        if report.backlog > 0 {
            tracing::warn!(
                backlog = report.backlog,
                "more actions than EC2's rate limits serve within the tick; the rest wait for the next"
            );
        }
        kept
    }
}

/// How long after the failures of `streak` its action waits before it is tried again: not at
/// all for a start refused for lack of capacity, for its first [`CAPACITY_EVERY_TICK`] attempts,
/// then [`CAPACITY_RETRY`]; after any other failure, [`retry_after`].
fn wait_after(streak: &FailureStreak) -> Duration {
    if streak.code.as_deref() != Some(Code::InsufficientCapacity.as_str()) {
        return retry_after(streak.failures);
    }
    if streak.failures < CAPACITY_EVERY_TICK {
        Duration::zero()
    } else {
        CAPACITY_RETRY
    }
}

/// How long after `failures` failures in a row an action waits before it is tried again.
fn retry_after(failures: u32) -> Duration {
    let doublings = failures.saturating_sub(1).min(16);
    (RETRY_FIRST * 2i32.pow(doublings)).min(RETRY_MAX)
}
