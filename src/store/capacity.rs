//! The starts EC2 refused for lack of capacity, by region and type, for `idle.min_gap`.

use super::{Result, Store};
use crate::engine::MAX_CAPACITY_MEMORY;
use chrono::{DateTime, Utc};
use std::collections::HashMap;

impl Store {
    /// The last start refused for lack of capacity in the [`MAX_CAPACITY_MEMORY`] before `now`,
    /// by region and instance type. The type is the instance's own (the one it had before a
    /// fallback type, see `own_types.rs`), since a fallback changes it after the refusal.
    pub async fn capacity_failures(
        &self,
        now: DateTime<Utc>,
    ) -> Result<HashMap<(String, String), DateTime<Utc>>> {
        let rows: Vec<(String, String, DateTime<Utc>)> = sqlx::query_as(
            "SELECT i.region, COALESCE(i.own_type, i.instance_type), max(a.at)
             FROM audit_log a JOIN instances i ON i.id = a.instance
             WHERE a.action = 'start' AND a.outcome = 'failed'
               AND a.code = 'insufficient_capacity' AND a.at > $1 AND a.at <= $2
             GROUP BY 1, 2",
        )
        .bind(now - MAX_CAPACITY_MEMORY)
        .bind(now)
        .fetch_all(&self.pool)
        .await?;
        Ok(rows
            .into_iter()
            .map(|(region, ty, at)| ((region, ty), at))
            .collect())
    }
}
