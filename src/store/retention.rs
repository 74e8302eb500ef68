//! Pruning what ebb keeps for a while: instance state changes, spot interruption warnings, the
//! pools' events, GPU readings, posted heartbeats and the last activity readings. Never the audit log, which is append-only.

use super::{Result, Store};
use chrono::{DateTime, Utc};

/// Rows deleted by one statement: a long prune never holds one transaction, or many locks,
/// for long.
const ROWS_PER_DELETE: i64 = 10_000;

/// What [`Store::prune`] deleted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Pruned {
    /// Instance state changes.
    pub events: u64,
    /// Spot interruption warnings and rebalance recommendations.
    pub warnings: u64,
    /// The pools' interruptions and rebalance recommendations read from the queue.
    pub pool_events: u64,
    /// Hours of one instance's GPU readings.
    pub readings: u64,
    /// Instances' last heartbeats posted through the API.
    pub heartbeats: u64,
    /// Instances' last activity readings kept for the console, and the uses the signals
    /// showed.
    pub activity: u64,
}

impl Store {
    /// Deletes instance state changes, spot interruption warnings and the pools' events from
    /// before `before`, and GPU readings of hours that ended before `readings_before`, and
    /// heartbeats posted and activity read before it, in batches.
    pub async fn prune(
        &self,
        before: DateTime<Utc>,
        readings_before: DateTime<Utc>,
    ) -> Result<Pruned> {
        let mut pruned = Pruned::default();
        loop {
            let deleted = sqlx::query(
                "DELETE FROM instance_events WHERE id IN (
                     SELECT id FROM instance_events WHERE at < $1 LIMIT $2)",
            )
            .bind(before)
            .bind(ROWS_PER_DELETE)
            .execute(&self.pool)
            .await?
            .rows_affected();
            pruned.events += deleted;
            if deleted < ROWS_PER_DELETE as u64 {
                break;
            }
        }
        pruned.warnings = sqlx::query("DELETE FROM spot_warnings WHERE warned_at < $1")
            .bind(before)
            .execute(&self.pool)
            .await?
            .rows_affected();
        pruned.pool_events = sqlx::query("DELETE FROM pool_events WHERE at < $1")
            .bind(before)
            .execute(&self.pool)
            .await?
            .rows_affected();
        pruned.warnings += sqlx::query("DELETE FROM spot_rebalances WHERE recommended_at < $1")
            .bind(before)
            .execute(&self.pool)
            .await?
            .rows_affected();
        // One row per instance: those of instances long gone go with the readings.
        pruned.heartbeats = sqlx::query("DELETE FROM heartbeats WHERE at < $1")
            .bind(readings_before)
            .execute(&self.pool)
            .await?
            .rows_affected();
        pruned.activity = sqlx::query("DELETE FROM activity_readings WHERE read_at < $1")
            .bind(readings_before)
            .execute(&self.pool)
            .await?
            .rows_affected();
        pruned.activity += sqlx::query("DELETE FROM activity_uses WHERE used_at < $1")
            .bind(readings_before)
            .execute(&self.pool)
            .await?
            .rows_affected();
        loop {
            let deleted = sqlx::query(
                "DELETE FROM gpu_readings WHERE (instance, hour) IN (
                     SELECT instance, hour FROM gpu_readings
                     WHERE hour <= $1 - interval '1 hour' LIMIT $2)",
            )
            .bind(readings_before)
            .bind(ROWS_PER_DELETE)
            .execute(&self.pool)
            .await?
            .rows_affected();
            pruned.readings += deleted;
            if deleted < ROWS_PER_DELETE as u64 {
                return Ok(pruned);
            }
        }
    }
}
