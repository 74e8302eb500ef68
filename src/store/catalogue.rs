//! The instance catalogue kept in Postgres: each accelerated type as DescribeInstanceTypes last
//! described it, and when.

use super::{Result, Store};
use crate::fleet::TypeFacts;
use chrono::{DateTime, Utc};
use sqlx::types::Json;
use std::collections::BTreeMap;

impl Store {
    /// When the catalogue was last described (the newest row), or `None` when it never was.
    pub async fn instance_types_described_at(&self) -> Result<Option<DateTime<Utc>>> {
        Ok(
            sqlx::query_scalar("SELECT max(described_at) FROM instance_types")
                .fetch_one(&self.pool)
                .await?,
        )
    }

    /// Keeps `types` as described at `at`, replacing what was kept of each.
    pub async fn keep_instance_types(
        &self,
        types: &BTreeMap<String, TypeFacts>,
        at: DateTime<Utc>,
    ) -> Result<()> {
        let (names, facts): (Vec<&str>, Vec<Json<&TypeFacts>>) =
            types.iter().map(|(n, f)| (n.as_str(), Json(f))).unzip();
        sqlx::query(
            "INSERT INTO instance_types (instance_type, facts, described_at)
             SELECT t, f, $3 FROM unnest($1::text[], $2::jsonb[]) AS u(t, f)
             ON CONFLICT (instance_type) DO UPDATE
             SET facts = excluded.facts, described_at = excluded.described_at",
        )
        .bind(&names)
        .bind(&facts)
        .bind(at)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    /// The catalogue as last described: type → facts (rows that no longer read are left out).
    pub async fn instance_types(&self) -> Result<BTreeMap<String, TypeFacts>> {
        let rows: Vec<(String, serde_json::Value)> =
            sqlx::query_as("SELECT instance_type, facts FROM instance_types")
                .fetch_all(&self.pool)
                .await?;
        Ok(rows
            .into_iter()
            .filter_map(|(name, facts)| Some((name, serde_json::from_value(facts).ok()?)))
            .collect())
    }
}
