//! The last good copies of what calendar addresses served (`calendar_copies`), which
//! `ebb serve` hands to the policy loader.

use super::{Result, Store};
use crate::policy::CalendarCopies;
use chrono::{DateTime, Utc};

impl Store {
    /// Every copy kept, by address.
    pub async fn calendar_copies(&self) -> Result<CalendarCopies> {
        let rows: Vec<(String, String)> = sqlx::query_as("SELECT url, body FROM calendar_copies")
            .fetch_all(&self.pool)
            .await?;
        Ok(rows.into_iter().collect())
    }

    /// Keeps `body` as the copy of `url`, fetched `at`.
    pub async fn keep_calendar_copy(&self, url: &str, body: &str, at: DateTime<Utc>) -> Result<()> {
        sqlx::query(
            "INSERT INTO calendar_copies (url, body, fetched_at) VALUES ($1, $2, $3)
             ON CONFLICT (url) DO UPDATE SET body = $2, fetched_at = $3",
        )
        .bind(url)
        .bind(body)
        .bind(at)
        .execute(&self.pool)
        .await?;
        Ok(())
    }
}
