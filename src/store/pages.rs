//! Paged lists for the API: each read returns at most one page of rows in key order, after a
//! key the caller got from the previous page, so one request's work stays bounded however large
//! the fleet or its history grows.

use super::inventory::{select_instances, InstanceRecord, PlannedAction};
use super::{Result, Store};

/// One page of a list: at most `limit` rows whose key comes after `after`, in key order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Page<K> {
    /// The key of the previous page's last row; `None` for the first page.
    pub after: Option<K>,
    /// The most rows the page holds.
    pub limit: i64,
}

impl<K> Page<K> {
    /// The first `limit` rows.
    pub fn first(limit: i64) -> Self {
        Page { after: None, limit }
    }
}

impl Store {
    /// A page of the instances the store knows, by id: the live ones, and with `gone` also
    /// those the cloud no longer lists.
    pub async fn instances(&self, gone: bool, page: &Page<String>) -> Result<Vec<InstanceRecord>> {
        Ok(sqlx::query_as(concat!(
            select_instances!(),
            " WHERE (i.gone_at IS NULL OR $1) AND ($2::text IS NULL OR i.id > $2)
              ORDER BY i.id LIMIT $3"
        ))
        .bind(gone)
        .bind(page.after.as_deref())
        .bind(page.limit)
        .fetch_all(&self.pool)
        .await?)
    }

    /// A page of the latest decisions about live instances, by instance id: what the leader's
    /// last tick decided.
    pub async fn plan(&self, page: &Page<String>) -> Result<Vec<PlannedAction>> {
        Ok(sqlx::query_as(
            "SELECT id AS instance, decided_action AS action, policy, decided_code AS code,
                    decided_reason AS reason
             FROM instances
             WHERE gone_at IS NULL AND decided_action IS NOT NULL
               AND ($1::text IS NULL OR id > $1)
             ORDER BY id LIMIT $2",
        )
        .bind(page.after.as_deref())
        .bind(page.limit)
        .fetch_all(&self.pool)
        .await?)
    }
}
