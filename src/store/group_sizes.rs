//! The Auto Scaling groups as the console shows them: each group's capacity over time (a row
//! each time a tick's listing found it changed, `scaling_group_sizes`), what ebb remembers of
//! it (`scaling_groups`) and its members among the instances.

use super::audit::{from_row, select_where, Row as AuditRow};
use super::groups::{stored_group, StoredGroup};
use super::inventory::select_instances;
use super::{AuditEntry, AuditFilter, InstanceRecord, Result, Store};
use crate::fleet::{Capacity, ScalingGroup};
use chrono::{DateTime, Utc};
use sqlx::postgres::PgRow;
use sqlx::types::Json;
use sqlx::Row;
use std::collections::BTreeMap;

/// The most groups the console lists, and the most members a group's page shows.
const MOST: i64 = 500;

/// A group as one tick listed it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupSize {
    /// When it was listed so.
    pub at: DateTime<Utc>,
    /// Its min, desired and max sizes.
    pub capacity: Capacity,
    /// How many instances it had, in any state but ended.
    pub members: i32,
    /// Its tags.
    pub tags: BTreeMap<String, String>,
}

/// A group ebb has listed: what it remembers of it and how it was last listed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupRecord {
    /// Its region.
    pub region: String,
    /// Its name.
    pub name: String,
    /// What ebb remembers of it (its up capacity, whether ebb holds it down, a change pending).
    pub stored: StoredGroup,
    /// The group as last listed; `None` before the first listing this ebb kept.
    pub last: Option<GroupSize>,
}

/// The `SELECT` of `scaling_groups` with each group's newest size, for [`group_record`],
/// without a `WHERE` or an order.
macro_rules! select_groups {
    () => {
        "SELECT g.*, s.at, s.min_size, s.desired_size, s.max_size, s.members, s.tags
     FROM scaling_groups g
     LEFT JOIN LATERAL (
         SELECT * FROM scaling_group_sizes s
         WHERE s.region = g.region AND s.name = g.name ORDER BY s.at DESC LIMIT 1
     ) s ON true"
    };
}

impl Store {
    /// Keeps each of `groups` as listed `at` when its capacity, members or tags differ from its
    /// newest row, in one statement; how many it kept.
    pub async fn note_group_sizes(
        &self,
        at: DateTime<Utc>,
        groups: &[ScalingGroup],
    ) -> Result<u64> {
        if groups.is_empty() {
            return Ok(0);
        }
        let column = |f: fn(&ScalingGroup) -> i32| groups.iter().map(f).collect::<Vec<i32>>();
        let tags: Vec<String> = groups
            .iter()
            .map(|g| {
                let tags: BTreeMap<&str, &str> = g.tags.iter().collect();
                serde_json::to_string(&tags).unwrap_or_else(|_| "{}".to_string())
            })
            .collect();
        let done = sqlx::query(
            "INSERT INTO scaling_group_sizes
                 (region, name, at, min_size, desired_size, max_size, members, tags)
             SELECT n.region, n.name, $3, n.min_size, n.desired_size, n.max_size, n.members,
                    n.tags::jsonb
             FROM unnest($1::text[], $2::text[], $4::int[], $5::int[], $6::int[], $7::int[],
                         $8::text[])
                 AS n(region, name, min_size, desired_size, max_size, members, tags)
             WHERE NOT EXISTS (
                 SELECT 1 FROM (
                     SELECT * FROM scaling_group_sizes s
                     WHERE s.region = n.region AND s.name = n.name ORDER BY s.at DESC LIMIT 1
                 ) last
                 WHERE (last.min_size, last.desired_size, last.max_size, last.members, last.tags)
                     = (n.min_size, n.desired_size, n.max_size, n.members, n.tags::jsonb)
             )
             ON CONFLICT DO NOTHING",
        )
        .bind(groups.iter().map(|g| g.region.as_str()).collect::<Vec<_>>())
        .bind(groups.iter().map(|g| g.name.as_str()).collect::<Vec<_>>())
        .bind(at)
        .bind(column(|g| g.capacity.min))
        .bind(column(|g| g.capacity.desired))
        .bind(column(|g| g.capacity.max))
        .bind(column(|g| {
            i32::try_from(g.members.len()).unwrap_or(i32::MAX)
        }))
        .bind(tags)
        .execute(self.pool())
        .await?;
        Ok(done.rows_affected())
    }

    /// Group `name` of `region`'s sizes from `from` to `to`, oldest first, starting with the
    /// size it had at `from` (the newest row before it).
    pub async fn group_sizes(
        &self,
        region: &str,
        name: &str,
        from: DateTime<Utc>,
        to: DateTime<Utc>,
    ) -> Result<Vec<GroupSize>> {
        let rows = sqlx::query(
            "(SELECT * FROM scaling_group_sizes WHERE region = $1 AND name = $2 AND at < $3
              ORDER BY at DESC LIMIT 1)
             UNION ALL
             (SELECT * FROM scaling_group_sizes
              WHERE region = $1 AND name = $2 AND at >= $3 AND at <= $4)
             ORDER BY at LIMIT 10000",
        )
        .bind(region)
        .bind(name)
        .bind(from)
        .bind(to)
        .fetch_all(self.pool())
        .await?;
        rows.iter().map(size_of).collect()
    }

    /// The groups ebb has listed, by region and name.
    pub async fn scaling_groups(&self) -> Result<Vec<GroupRecord>> {
        let rows = sqlx::query(concat!(
            select_groups!(),
            " ORDER BY g.region, g.name LIMIT $1"
        ))
        .bind(MOST)
        .fetch_all(self.pool())
        .await?;
        rows.iter().map(group_record).collect()
    }

    /// Group `name` of `region`, if ebb has listed it.
    pub async fn scaling_group(&self, region: &str, name: &str) -> Result<Option<GroupRecord>> {
        let row = sqlx::query(concat!(
            select_groups!(),
            " WHERE g.region = $1 AND g.name = $2"
        ))
        .bind(region)
        .bind(name)
        .fetch_optional(self.pool())
        .await?;
        row.as_ref().map(group_record).transpose()
    }

    /// The newest `limit` audit rows of changes of group `name`'s capacity (their intents and
    /// outcomes), newest first.
    pub async fn group_changes(
        &self,
        region: &str,
        name: &str,
        limit: i64,
    ) -> Result<Vec<AuditEntry>> {
        let mut q = select_where(&AuditFilter::default());
        // The reconciler's actions, and the way its reasons name the group (`group NAME: ...`).
        q.push(" AND action IN ('scale_down_group', 'restore_group') AND region = ")
            .push_bind(region.to_string())
            .push(" AND starts_with(reason, ")
            .push_bind(format!("group {name}:"))
            .push(") ORDER BY seq DESC LIMIT ")
            .push_bind(limit);
        let rows: Vec<AuditRow> = q.build_query_as().fetch_all(self.pool()).await?;
        Ok(rows.into_iter().map(from_row).collect())
    }

    /// The live instances of `region` that group `name` owns (an Auto Scaling group, or an
    /// EKS node group's), by id.
    pub async fn group_members(&self, region: &str, name: &str) -> Result<Vec<InstanceRecord>> {
        Ok(sqlx::query_as(concat!(
            select_instances!(),
            " WHERE i.region = $1 AND i.gone_at IS NULL AND i.owner ->> 'group' = $2
                AND i.owner ->> 'kind' IN ('asg', 'eks_nodegroup')
              ORDER BY i.id LIMIT $3"
        ))
        .bind(region)
        .bind(name)
        .bind(MOST)
        .fetch_all(self.pool())
        .await?)
    }
}

fn size_of(row: &PgRow) -> Result<GroupSize> {
    let Json(tags): Json<BTreeMap<String, String>> = row.try_get("tags")?;
    Ok(GroupSize {
        at: row.try_get("at")?,
        capacity: Capacity {
            min: row.try_get("min_size")?,
            desired: row.try_get("desired_size")?,
            max: row.try_get("max_size")?,
        },
        members: row.try_get("members")?,
        tags,
    })
}

fn group_record(row: &PgRow) -> Result<GroupRecord> {
    let listed: Option<DateTime<Utc>> = row.try_get("at")?;
    Ok(GroupRecord {
        region: row.try_get("region")?,
        name: row.try_get("name")?,
        stored: stored_group(row)?,
        last: listed.map(|_| size_of(row)).transpose()?,
    })
}
