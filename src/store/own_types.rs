//! The types ebb changed instances from for lack of capacity (`start.fallback_types`), so that
//! `start.restore_type` can change them back at a later start, and `idle.min_gap` knows which
//! type a refused start was for.

use super::{Result, Store};
use std::collections::{HashMap, HashSet};

/// An instance ebb changed to a fallback type: the type it had, and the one ebb gave it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MovedType {
    /// The type it had before ebb's first fallback.
    pub own: String,
    /// The type ebb changed it to last.
    pub fallback: String,
}

impl Store {
    /// Remembers that ebb changed instance `id` from type `from` to fallback type `to`. Its own
    /// type stays the one remembered when `from` is the fallback ebb gave it before (a second
    /// fallback in a row); otherwise `from` is its own.
    pub async fn remember_fallback_type(&self, id: &str, from: &str, to: &str) -> Result<()> {
        sqlx::query(
            "UPDATE instances
             SET own_type = CASE WHEN own_type IS NOT NULL AND fallback_type = $2
                                 THEN own_type ELSE $2 END,
                 fallback_type = $3
             WHERE id = $1",
        )
        .bind(id)
        .bind(from)
        .bind(to)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    /// The instances among `ids` that ebb changed to a fallback type, by id.
    pub async fn fallback_types(&self, ids: &[String]) -> Result<HashMap<String, MovedType>> {
        let rows: Vec<(String, String, String)> = sqlx::query_as(
            "SELECT id, own_type, fallback_type FROM instances
             WHERE id = ANY($1) AND own_type IS NOT NULL AND fallback_type IS NOT NULL",
        )
        .bind(ids)
        .fetch_all(&self.pool)
        .await?;
        Ok(rows
            .into_iter()
            .map(|(id, own, fallback)| (id, MovedType { own, fallback }))
            .collect())
    }

    /// Every instance ebb changed to a fallback type: what a start changes back first under
    /// `start.restore_type`, for the early start's count of ModifyInstanceAttribute calls.
    pub async fn moved_types(&self) -> Result<HashSet<String>> {
        let ids: Vec<String> = sqlx::query_scalar(
            "SELECT id FROM instances WHERE own_type IS NOT NULL AND fallback_type IS NOT NULL",
        )
        .fetch_all(&self.pool)
        .await?;
        Ok(ids.into_iter().collect())
    }

    /// Forgets instance `id`'s own type: it runs as it again, or a person changed its type.
    pub async fn forget_fallback_type(&self, id: &str) -> Result<()> {
        sqlx::query("UPDATE instances SET own_type = NULL, fallback_type = NULL WHERE id = $1")
            .bind(id)
            .execute(&self.pool)
            .await?;
        Ok(())
    }
}
