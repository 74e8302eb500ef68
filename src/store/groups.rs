//! The Auto Scaling groups ebb schedules: the capacity each opening restores, whether ebb
//! holds the group down, and the change whose outcome is not written yet.

use super::audit::append_in;
use super::audit_entry::{AuditEntry, NewAuditEntry, Outcome};
use super::{Result, Store};
use crate::engine::GroupMemory;
use crate::fleet::Capacity;
use chrono::{DateTime, Utc};
use sqlx::postgres::PgRow;
use sqlx::{PgConnection, Row};
use std::collections::HashMap;

/// A change of a group's capacity whose intent is written and whose outcome is not.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PendingChange {
    /// The intent's audit row.
    pub seq: i64,
    /// When the intent was written.
    pub at: DateTime<Utc>,
    /// The capacity the call asked for.
    pub to: Capacity,
    /// EKS's update id, for a node group's change whose call answered with one.
    pub update: Option<String>,
}

/// What the store keeps of one group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredGroup {
    /// Its up capacity, types and whether ebb holds it down.
    pub memory: GroupMemory,
    /// A change still without its outcome.
    pub pending: Option<PendingChange>,
}

impl Store {
    /// The groups of `region` ebb remembers, by name.
    pub async fn groups_of(&self, region: &str) -> Result<HashMap<String, StoredGroup>> {
        let rows = sqlx::query(
            "SELECT name, up_min, up_desired, up_max, types, down_since, protected, intent_seq,
                    intent_at, intent_min, intent_desired, intent_max, intent_update
             FROM scaling_groups WHERE region = $1",
        )
        .bind(region)
        .fetch_all(self.pool())
        .await?;
        let mut found = HashMap::with_capacity(rows.len());
        for row in rows {
            found.insert(row.try_get("name")?, stored_group(&row)?);
        }
        Ok(found)
    }

    /// Keeps what ebb remembers of group `name`: its up capacity, types and `down_since`.
    pub async fn remember_group(
        &self,
        region: &str,
        name: &str,
        memory: &GroupMemory,
    ) -> Result<()> {
        let mut conn = self.pool().acquire().await?;
        remember_in(&mut conn, region, name, memory).await
    }

    /// Keeps EKS's update id `update` on the pending change of intent `seq` of group `name`,
    /// whose outcome waits for the update to end.
    pub async fn group_update_started(
        &self,
        region: &str,
        name: &str,
        seq: i64,
        update: &str,
    ) -> Result<()> {
        sqlx::query(
            "UPDATE scaling_groups SET intent_update = $4
             WHERE region = $1 AND name = $2 AND intent_seq = $3",
        )
        .bind(region)
        .bind(name)
        .bind(seq)
        .bind(update)
        .execute(self.pool())
        .await?;
        Ok(())
    }

    /// Appends the outcome of a group's change and, in the same transaction, clears its
    /// pending change and keeps `memory` (the group down or up once the change is done); a
    /// change that succeeded joins the groups' history (`ebb report`).
    pub async fn group_outcome(
        &self,
        outcome: &NewAuditEntry,
        region: &str,
        name: &str,
        memory: &GroupMemory,
    ) -> Result<Vec<AuditEntry>> {
        let mut tx = self.pool().begin().await?;
        let rows = append_in(&mut tx, std::slice::from_ref(outcome)).await?;
        remember_in(&mut tx, region, name, memory).await?;
        if outcome.outcome == Outcome::Succeeded {
            // The pending change says what was asked; its intent, which policy asked.
            sqlx::query(
                "INSERT INTO scaling_group_changes (region, name, at, scale_down, up_desired,
                     to_desired, instance_type, policy)
                 SELECT g.region, g.name, $3, g.intent_desired < g.up_desired, g.up_desired,
                        g.intent_desired, g.types[1],
                        coalesce($4, (SELECT policy FROM audit_log WHERE seq = g.intent_seq))
                 FROM scaling_groups g
                 WHERE g.region = $1 AND g.name = $2 AND g.intent_seq IS NOT NULL",
            )
            .bind(region)
            .bind(name)
            .bind(outcome.at)
            .bind(&outcome.policy)
            .execute(&mut *tx)
            .await?;
        }
        sqlx::query(
            "UPDATE scaling_groups SET intent_seq = NULL, intent_at = NULL, intent_min = NULL,
                    intent_desired = NULL, intent_max = NULL, intent_update = NULL
             WHERE region = $1 AND name = $2",
        )
        .bind(region)
        .bind(name)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(rows)
    }
}

/// A `scaling_groups` row (its `up_*`, `types`, `down_since` and `intent_*` columns) as the
/// store keeps it.
pub(super) fn stored_group(row: &PgRow) -> Result<StoredGroup> {
    let seq: Option<i64> = row.try_get("intent_seq")?;
    let at: Option<DateTime<Utc>> = row.try_get("intent_at")?;
    let to = (
        row.try_get::<Option<i32>, _>("intent_min")?,
        row.try_get::<Option<i32>, _>("intent_desired")?,
        row.try_get::<Option<i32>, _>("intent_max")?,
    );
    let pending = match (seq, at, to) {
        (Some(seq), Some(at), (Some(min), Some(desired), Some(max))) => Some(PendingChange {
            seq,
            at,
            to: Capacity { min, desired, max },
            update: row.try_get("intent_update")?,
        }),
        _ => None,
    };
    Ok(StoredGroup {
        memory: GroupMemory {
            up: Capacity {
                min: row.try_get("up_min")?,
                desired: row.try_get("up_desired")?,
                max: row.try_get("up_max")?,
            },
            types: row.try_get("types")?,
            down_since: row.try_get("down_since")?,
            protected: row.try_get("protected")?,
        },
        pending,
    })
}

/// Upserts what ebb remembers of a group, leaving any pending change as it is.
async fn remember_in(
    conn: &mut PgConnection,
    region: &str,
    name: &str,
    memory: &GroupMemory,
) -> Result<()> {
    sqlx::query(
        "INSERT INTO scaling_groups (region, name, up_min, up_desired, up_max, types, down_since,
             protected)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
         ON CONFLICT (region, name) DO UPDATE SET up_min = $3, up_desired = $4, up_max = $5,
             types = $6, down_since = $7, protected = $8",
    )
    .bind(region)
    .bind(name)
    .bind(memory.up.min)
    .bind(memory.up.desired)
    .bind(memory.up.max)
    .bind(&memory.types)
    .bind(memory.down_since)
    .bind(&memory.protected)
    .execute(conn)
    .await?;
    Ok(())
}

/// Marks the change of intent `intent` (its audit row, already appended in this transaction) as
/// pending on group `name`, which ebb remembers already.
pub(super) async fn mark_pending_in(
    conn: &mut PgConnection,
    region: &str,
    name: &str,
    intent: &AuditEntry,
    to: Capacity,
) -> Result<()> {
    sqlx::query(
        "UPDATE scaling_groups SET intent_seq = $3, intent_at = $4, intent_min = $5,
                intent_desired = $6, intent_max = $7, intent_update = NULL
         WHERE region = $1 AND name = $2",
    )
    .bind(region)
    .bind(name)
    .bind(intent.seq)
    .bind(intent.entry.at)
    .bind(to.min)
    .bind(to.desired)
    .bind(to.max)
    .execute(conn)
    .await?;
    Ok(())
}
