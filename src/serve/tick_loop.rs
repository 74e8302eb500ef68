//! The control loop as a background task: each activation makes sure this replica leads (or
//! leaves it following), then ticks once at the clock's now.

use super::driver::BackgroundTask;
use crate::checkpoint::Publisher;
use crate::clock::Clock;
use crate::cloud::Provider;
use crate::control::Control;
use crate::reconcile::{Reconciler, TickError};
use crate::store::Leadership;
use std::sync::Arc;
use std::time::Duration;

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
    async fn lead(&mut self) -> Result<Option<&mut Leadership>, String> {
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
                Err(err) => {
                    let message = format!("cannot reach the database to elect a leader: {err}");
                    tracing::error!("{message}");
                    return Err(message);
                }
            }
        }
        Ok(self.leader.as_mut())
    }
}

impl<P: Provider> BackgroundTask for TickLoop<'_, P> {
    const NAME: &'static str = "tick_loop";
    const DESCRIPTION: &'static str =
        "leads among the replicas and ticks: list, read, decide, act, record";

    async fn activate(&mut self) -> Result<String, String> {
        let (reconciler, clock, control, deadline) =
            (self.reconciler, self.clock, self.control, self.deadline);
        let Some(leader) = self.lead().await? else {
            return Ok("another replica leads; following".to_string());
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
            let message = format!(
                "tick at {} abandoned: still running after the tick deadline of {} \
                 (EBB_TICK_DEADLINE); an action it left without an outcome is resolved at the next tick",
                now.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
                humantime::format_duration(deadline)
            );
            tracing::error!("{message}");
            return Err(message);
        };
        control.set_last_tick(now);
        control.tick_completed();
        match result {
            Ok(report) => {
                report.record(&control.metrics, started.elapsed());
                report.log();
                Ok(report.headline())
            }
            Err(err) => {
                let invalid = matches!(err, TickError::Policies(_));
                control.metrics.tick_failed(started.elapsed(), invalid);
                tracing::error!("tick failed: {err}");
                Err(format!("tick failed: {err}"))
            }
        }
    }
}
