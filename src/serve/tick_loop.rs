//! The control loop as a background task: each activation makes sure this replica leads (or
//! leaves it following), then ticks once at the clock's now.

use super::driver::BackgroundTask;
use crate::checkpoint::Publisher;
use crate::clock::Clock;
use crate::cloud::Provider;
use crate::control::Control;
use crate::reconcile::{Reconciler, TickError, TickSummary};
use crate::store::{Leadership, StoreError};
use chrono::{DateTime, SecondsFormat, Utc};
use serde::Serialize;
use std::sync::Arc;
use std::time::Duration;

/// What an activation of the tick loop did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "role", rename_all = "snake_case")]
pub enum TickStatus {
    /// Another replica leads; this one did not tick.
    Follower,
    /// This replica leads and ticked.
    Leader {
        /// What the tick came to.
        tick: TickSummary,
    },
}

impl std::fmt::Display for TickStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TickStatus::Follower => write!(f, "another replica leads; following"),
            TickStatus::Leader { tick } => write!(f, "{tick}"),
        }
    }
}

/// Why an activation of the tick loop did not tick.
#[derive(Debug, thiserror::Error)]
pub enum TickLoopError {
    /// The database could not be asked who leads.
    #[error("cannot reach the database to elect a leader: {0}")]
    Elect(#[source] StoreError),
    /// The tick ran past its deadline and was dropped.
    #[error(
        "tick at {} abandoned: still running after the tick deadline of {} (EBB_TICK_DEADLINE); \
         an action it left without an outcome is resolved at the next tick",
        .at.to_rfc3339_opts(SecondsFormat::Secs, true),
        humantime::format_duration(*.deadline)
    )]
    Abandoned {
        /// The tick's decision time.
        at: DateTime<Utc>,
        /// The deadline it ran past.
        deadline: Duration,
    },
    /// The tick failed.
    #[error("tick failed: {0}")]
    Failed(#[source] TickError),
}

/// Ticks as the leader among replicas.
pub struct TickLoop<'a, P> {
    reconciler: &'a Reconciler<P>,
    /// This replica's name, shown as the leader's.
    name: &'a str,
    clock: Clock,
    control: &'a Control,
    /// How long a tick may run before it is abandoned.
    deadline: Duration,
    /// The leadership while this replica holds it.
    leader: Option<Leadership>,
    /// Publishes a checkpoint of the audit chain after each tick, when configured.
    checkpoints: Option<Arc<Publisher>>,
}

impl<'a, P: Provider> TickLoop<'a, P> {
    /// The loop of `reconciler` as replica `name`, at `clock`'s time, abandoning a tick that
    /// runs past `deadline`, publishing audit checkpoints with `checkpoints`.
    pub fn new(
        reconciler: &'a Reconciler<P>,
        name: &'a str,
        clock: Clock,
        control: &'a Control,
        deadline: Duration,
        checkpoints: Option<Arc<Publisher>>,
    ) -> Self {
        TickLoop {
            reconciler,
            name,
            clock,
            control,
            deadline,
            leader: None,
            checkpoints,
        }
    }

    /// The leadership, kept or won now; `Ok(None)` while another replica leads.
    async fn lead(&mut self) -> Result<Option<&mut Leadership>, TickLoopError> {
        if let Some(held) = self.leader.as_mut() {
            if !held.held().await {
                tracing::error!("lost the leadership (database session ended)");
                self.leader = None;
                self.control.set_leader(false);
            }
        }
        if self.leader.is_none() {
            match self.reconciler.store().try_lead(self.name).await {
                Ok(Some(won)) => {
                    tracing::info!(replica = self.name, "became the leader");
                    self.leader = Some(won);
                    self.control.set_leader(true);
                }
                Ok(None) => return Ok(None),
                Err(err) => return Err(TickLoopError::Elect(err)),
            }
        }
        Ok(self.leader.as_mut())
    }
}

impl<P: Provider> BackgroundTask for TickLoop<'_, P> {
    const NAME: &'static str = "tick_loop";
    const DESCRIPTION: &'static str =
        "leads among the replicas and ticks: list, read, decide, act, record";

    type Status = TickStatus;
    type Error = TickLoopError;

    async fn activate(&mut self) -> Result<TickStatus, TickLoopError> {
        let (reconciler, clock, control, deadline) =
            (self.reconciler, self.clock, self.control, self.deadline);
        let Some(leader) = self.lead().await? else {
            return Ok(TickStatus::Follower);
        };
        let started = std::time::Instant::now();
        let now = clock.now();
        // A tick past its deadline is dropped where it waits (a statement or a cloud call that
        // the database's and the SDK's own limits did not end). That may leave an intent
        // without its outcome: acceptable only because the next tick resolves such intents
        // from the instances' real state, as after a crash, and never calls again. The
        // leadership is kept; the next activation checks that its session still answers.
        let result = tokio::time::timeout(deadline, reconciler.tick(now, leader)).await;
        // Whatever the tick appended, even a failed or abandoned one, is checkpointed apart
        // from the loop: a slow or failing store never holds up the next tick.
        if let Some(publisher) = self.checkpoints.clone() {
            let store = reconciler.store().clone();
            tokio::spawn(async move { publisher.publish(&store, now).await });
        }
        let Ok(result) = result else {
            control.metrics.tick_failed(started.elapsed(), false);
            return Err(TickLoopError::Abandoned { at: now, deadline });
        };
        control.set_last_tick(now);
        control.tick_completed();
        match result {
            Ok(report) => {
                report.record(&control.metrics, started.elapsed());
                report.log();
                Ok(TickStatus::Leader {
                    tick: report.summary(),
                })
            }
            Err(err) => {
                let invalid = matches!(err, TickError::Policies(_));
                control.metrics.tick_failed(started.elapsed(), invalid);
                Err(TickLoopError::Failed(err))
            }
        }
    }
}
