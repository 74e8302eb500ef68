//! Reads spot interruption warnings from the SQS queue EventBridge sends them to, and records
//! each one, which wakes the leader (on any replica: the store notifies through Postgres).

use super::driver::BackgroundTask;
use crate::cloud::aws::warnings::{InterruptionQueue, Signal, Warning};
use crate::cloud::CloudError;
use crate::fleet::PoolEventKind;
use crate::store::{QueuedPoolEvent, Store, StoreError};
use serde::Serialize;
use std::time::Duration;

/// How long to wait after the interruption queue failed before reading it again.
const QUEUE_RETRY: Duration = Duration::from_secs(30);

/// One long poll of the queue per activation.
pub struct InterruptionReader {
    queue: InterruptionQueue,
    store: Store,
}

impl InterruptionReader {
    /// A reader of `queue` that records into `store`.
    pub fn new(queue: InterruptionQueue, store: Store) -> Self {
        InterruptionReader { queue, store }
    }
}

/// What one read of the queue came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct WarningsRead {
    /// Warnings and rebalance recommendations recorded for a live migration's replacement.
    pub recorded: usize,
    /// Warnings and rebalance recommendations for other instances, ignored.
    pub ignored: usize,
    /// Interruption warnings and rebalance recommendations kept in the pools' history.
    pub pool_events: u64,
}

impl std::fmt::Display for WarningsRead {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} warnings recorded, {} ignored, {} pool events kept",
            self.recorded, self.ignored, self.pool_events
        )
    }
}

/// Why a read of the queue came to nothing.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    /// The queue could not be read.
    #[error("cannot read the spot interruption queue: {0}")]
    Queue(#[source] CloudError),
    /// The warnings read could not be recorded; the queue shows them again.
    #[error("cannot record spot interruption warnings: {0}")]
    Record(#[source] StoreError),
}

impl InterruptionReader {
    /// Records the rebalance recommendations among `signals` for instances that are a live
    /// migration's current spot replacement, which may then move early (`spot::early`): how
    /// many were recorded, and how many were for other instances and ignored.
    async fn record_rebalances(&self, signals: &[Warning]) -> Result<(usize, usize), ReadError> {
        let rows: Vec<_> = signals
            .iter()
            .filter(|w| w.signal == Signal::Rebalance)
            .map(|w| (w.instance.clone(), w.region.clone(), w.at))
            .collect();
        if rows.is_empty() {
            return Ok((0, 0));
        }
        let recorded = self
            .store
            .record_spot_rebalances(&rows)
            .await
            .map_err(ReadError::Record)?;
        for (instance, region, at) in &rows {
            if recorded.contains(instance) {
                tracing::info!(instance, region, at = %at, "spot rebalance recommendation");
            } else {
                tracing::debug!(
                    instance,
                    region,
                    "a rebalance recommendation for an instance that is no live migration's spot replacement is not acted on"
                );
            }
        }
        Ok((recorded.len(), rows.len() - recorded.len()))
    }
}

impl BackgroundTask for InterruptionReader {
    const NAME: &'static str = "interruption_reader";
    const DESCRIPTION: &'static str =
        "records spot interruption warnings from the queue, which wakes the leader";

    /// A message is deleted only once its warning is recorded; otherwise the queue shows it
    /// again.
    type Status = WarningsRead;
    type Error = ReadError;

    async fn activate(&mut self) -> Result<WarningsRead, ReadError> {
        let batch = self.queue.receive().await.map_err(ReadError::Queue)?;
        let own = self.queue.account();
        let pool_events: Vec<QueuedPoolEvent> = batch
            .warnings
            .iter()
            .map(|w| QueuedPoolEvent {
                kind: match w.signal {
                    Signal::Interruption => PoolEventKind::Interruption,
                    Signal::Rebalance => PoolEventKind::Rebalance,
                },
                instance: w.instance.clone(),
                region: w.region.clone(),
                account: match Some(w.account.as_str()) == own {
                    true => String::new(),
                    false => w.account.clone(),
                },
                at: w.at,
            })
            .collect();
        // Kept before the warnings: a failure leaves the messages in the queue for both.
        let kept = match pool_events.is_empty() {
            true => 0,
            false => self
                .store
                .record_pool_events(&pool_events)
                .await
                .map_err(ReadError::Record)?,
        };
        // A rebalance recommendation is no reclaim: it does not make a migration relaunch.
        let rows: Vec<_> = batch
            .warnings
            .iter()
            .filter(|w| w.signal == Signal::Interruption)
            .map(|w| (w.instance.clone(), w.region.clone(), w.at))
            .collect();
        let mut recorded = Vec::new();
        if !rows.is_empty() {
            recorded = self
                .store
                .record_spot_warnings(&rows)
                .await
                .map_err(ReadError::Record)?;
        }
        for (instance, region, at) in &rows {
            if recorded.contains(instance) {
                tracing::info!(instance, region, at = %at, "spot interruption warning");
            } else {
                tracing::warn!(
                    instance,
                    region,
                    "a spot interruption warning for an instance that is no live migration's replacement is ignored"
                );
            }
        }
        let (rebalances, passed) = self.record_rebalances(&batch.warnings).await?;
        if let Err(err) = self.queue.delete(batch).await {
            // Recorded already: the queue shows them again, and recording twice is harmless.
            tracing::error!(error = %err, "cannot delete read spot interruption warnings");
        }
        Ok(WarningsRead {
            recorded: recorded.len() + rebalances,
            ignored: rows.len() - recorded.len() + passed,
            pool_events: kept,
        })
    }

    fn retry_after_failure(&self) -> Option<Duration> {
        Some(QUEUE_RETRY)
    }
}
