//! The reads of the capacity reservations held outside ebb (`capacity_reads`): kept by the
//! leader hourly, read by `ebb advise` and the console's Advice page.

use super::{Result, Store};
use crate::fleet::capacity_reads::READ_STANDS_FOR;
use crate::fleet::{CapacityRead, HeldCapacity};
use chrono::{DateTime, Utc};
use sqlx::types::Json;
use std::collections::BTreeMap;

/// A read as a row: its region, time, reservations and the instances that ran outside them.
type ReadRow = (
    String,
    DateTime<Utc>,
    Json<Vec<HeldCapacity>>,
    Json<BTreeMap<String, Vec<String>>>,
);

impl Store {
    /// Keeps `read`.
    pub async fn keep_capacity_read(&self, read: &CapacityRead) -> Result<()> {
        sqlx::query(
            "INSERT INTO capacity_reads (region, read_at, reservations, ran_outside)
             VALUES ($1, $2, $3, $4)
             ON CONFLICT (region, read_at) DO UPDATE SET reservations = $3, ran_outside = $4",
        )
        .bind(&read.region)
        .bind(read.at)
        .bind(Json(&read.reservations))
        .bind(Json(&read.ran_outside))
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    /// Every read that stands for some of `from` to `to`: those made in it, and those made up
    /// to [`READ_STANDS_FOR`] before it.
    pub async fn capacity_reads(
        &self,
        from: DateTime<Utc>,
        to: DateTime<Utc>,
    ) -> Result<Vec<CapacityRead>> {
        let rows: Vec<ReadRow> = sqlx::query_as(
            "SELECT region, read_at, reservations, ran_outside FROM capacity_reads
             WHERE read_at >= $1 AND read_at < $2 ORDER BY region, read_at",
        )
        .bind(from - READ_STANDS_FOR)
        .bind(to)
        .fetch_all(&self.pool)
        .await?;
        Ok(rows
            .into_iter()
            .map(
                |(region, at, Json(reservations), Json(ran_outside))| CapacityRead {
                    region,
                    at,
                    reservations,
                    ran_outside,
                },
            )
            .collect())
    }
}
