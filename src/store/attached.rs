//! What listed instances keep paying for while stopped (their EBS volumes and Elastic IPs),
//! kept on their inventory rows for `ebb report` (migration 0023).

use super::{Result, Store};
use crate::fleet::money::{Attached, Volume};
use sqlx::types::Json;
use std::collections::HashMap;

/// An instance's id, its volumes and its Elastic IPs as kept (NULL: never read).
type AttachedRow = (String, Option<Json<Vec<Volume>>>, Option<i32>);

impl Store {
    /// Keeps what was read of each instance's volumes and Elastic IPs. A fact not read this
    /// time (`None`) leaves the one read before; never read, it stays unknown (NULL). Rows
    /// are written only when a fact changed.
    pub async fn keep_attached(&self, attached: &HashMap<String, Attached>) -> Result<()> {
        if attached.is_empty() {
            return Ok(());
        }
        let mut ids = Vec::with_capacity(attached.len());
        let mut volumes = Vec::with_capacity(attached.len());
        let mut elastic_ips = Vec::with_capacity(attached.len());
        for (id, a) in attached {
            ids.push(id.as_str());
            volumes.push(a.volumes.as_ref().map(|v| serde_json::json!(v)));
            elastic_ips.push(a.elastic_ips.map(|n| i32::try_from(n).unwrap_or(i32::MAX)));
        }
        sqlx::query(
            "UPDATE instances AS i
             SET volumes = coalesce(n.volumes, i.volumes),
                 elastic_ips = coalesce(n.elastic_ips, i.elastic_ips)
             FROM UNNEST($1::text[], $2::jsonb[], $3::int[]) AS n(id, volumes, elastic_ips)
             WHERE i.id = n.id
               AND (coalesce(n.volumes, i.volumes) IS DISTINCT FROM i.volumes
                    OR coalesce(n.elastic_ips, i.elastic_ips) IS DISTINCT FROM i.elastic_ips)",
        )
        .bind(&ids)
        .bind(&volumes)
        .bind(&elastic_ips)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    /// What was last read of the volumes and Elastic IPs of each of `ids` that ebb has read
    /// any of: what `ebb replay` from Postgres nets a stopped box's hours with.
    pub async fn attached_of(&self, ids: &[String]) -> Result<HashMap<String, Attached>> {
        let rows: Vec<AttachedRow> = sqlx::query_as(
            "SELECT id, volumes, elastic_ips FROM instances
             WHERE id = ANY($1::text[]) AND (volumes IS NOT NULL OR elastic_ips IS NOT NULL)",
        )
        .bind(ids)
        .fetch_all(&self.pool)
        .await?;
        Ok(rows
            .into_iter()
            .map(|(id, volumes, elastic_ips)| {
                let attached = Attached {
                    volumes: volumes.map(|v| v.0),
                    elastic_ips: elastic_ips.and_then(|n| u32::try_from(n).ok()),
                };
                (id, attached)
            })
            .collect())
    }
}
