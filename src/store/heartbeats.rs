//! The last heartbeat each instance posted through the API (`api/heartbeat.rs`).

use super::{Result, Store};
use chrono::{DateTime, Utc};
use std::collections::HashMap;

impl Store {
    /// Keeps a heartbeat of `instance` now, at the database's time.
    pub async fn record_heartbeat(&self, instance: &str) -> Result<()> {
        sqlx::query(
            "INSERT INTO heartbeats (instance_id, at) VALUES ($1, now())
             ON CONFLICT (instance_id) DO UPDATE SET at = excluded.at",
        )
        .bind(instance)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    /// The last heartbeat of each of `instances` that posted one.
    pub async fn heartbeats(&self, instances: &[String]) -> Result<HashMap<String, DateTime<Utc>>> {
        let rows: Vec<(String, DateTime<Utc>)> =
            sqlx::query_as("SELECT instance_id, at FROM heartbeats WHERE instance_id = ANY($1)")
                .bind(instances)
                .fetch_all(&self.pool)
                .await?;
        Ok(rows.into_iter().collect())
    }
}
