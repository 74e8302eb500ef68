//! Pruning what ebb keeps for a while: instance state changes (never those the report's
//! roll-up still needs), spot interruption warnings, the pools' events, GPU readings, posted
//! heartbeats and the last activity readings. Never the audit log, which is append-only.

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
    /// Instance state changes before this were deleted: the retention's horizon, or the first
    /// day the report's roll-up has still to roll, when that is earlier.
    pub events_before: DateTime<Utc>,
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
    /// Reads of the capacity reservations held outside ebb.
    pub capacity_reads: u64,
}

/// The time before which state changes may go, given the retention's horizon `$1`: the
/// earlier of it and the start of the first day the report's roll-up has still to roll (the
/// day of ebb's first stop or start when nothing is rolled up yet).
const KEPT_FOR_ROLL_UP: &str = "SELECT least($1, coalesce(
         (SELECT rolled_until::timestamp AT TIME ZONE 'UTC' FROM report_rollup),
         (SELECT date_trunc('day', min(at) AT TIME ZONE 'UTC') AT TIME ZONE 'UTC'
          FROM audit_log
          WHERE actor = 'scheduler' AND NOT dry_run AND outcome = 'succeeded'
            AND action IN ('stop', 'hibernate', 'start')),
         $1))";

/// Deletes up to `$2` state changes from before `$1`, but never one since its instance's last
/// action by ebb when that is a stop or hibernation: a report (or a day's roll-up) counts that
/// stretch from the stop, however old, until a change shows the box up again, and without the
/// changes it would miss a person's start and count the box stopped since. (The predicate of
/// migration 0010's index on ebb's actions by instance, repeated so that it is used.)
const PRUNABLE_CHANGES: &str = "DELETE FROM instance_events WHERE id IN (
         SELECT e.id FROM instance_events e
         WHERE e.at < $1 AND NOT EXISTS (
             SELECT 1 FROM (
                 SELECT action, at FROM audit_log
                 WHERE instance = e.instance AND actor = 'scheduler' AND NOT dry_run
                   AND outcome = 'succeeded' AND action IN ('stop', 'hibernate', 'start')
                 ORDER BY at DESC LIMIT 1
             ) AS last
             WHERE last.action <> 'start' AND last.at <= e.at)
         LIMIT $2)";

impl Store {
    /// Deletes instance state changes, spot interruption warnings and the pools' events from
    /// before `before`, and GPU readings of hours that ended before `readings_before`, and
    /// heartbeats posted, activity and capacity reservations read before it, in batches. State changes of days the
    /// report's roll-up has still to roll are kept, and those since an instance's last stop
    /// by ebb: a report without them would be wrong, and a rolled-up day wrong for good.
    pub async fn prune(
        &self,
        before: DateTime<Utc>,
        readings_before: DateTime<Utc>,
    ) -> Result<Pruned> {
        let events_before: DateTime<Utc> = sqlx::query_scalar(KEPT_FOR_ROLL_UP)
            .bind(before)
            .fetch_one(&self.pool)
            .await?;
        let mut pruned = Pruned {
            events_before,
            ..Pruned::default()
        };
        loop {
            let deleted = sqlx::query(PRUNABLE_CHANGES)
                .bind(events_before)
                .bind(ROWS_PER_DELETE)
                .execute(&self.pool)
                .await?
                .rows_affected();
            pruned.events += deleted;
            if deleted < ROWS_PER_DELETE as u64 {
                break;
            }
        }
        sqlx::query(
            "INSERT INTO state_changes_pruned (before) VALUES ($1)
             ON CONFLICT (only_row) DO UPDATE
             SET before = greatest(state_changes_pruned.before, excluded.before)",
        )
        .bind(events_before)
        .execute(&self.pool)
        .await?;
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
        pruned.capacity_reads = sqlx::query("DELETE FROM capacity_reads WHERE read_at < $1")
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
