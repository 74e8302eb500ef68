//! Snooze links' state (`snooze_key`, `snooze_links_used`): the key that signs them, made once
//! and shared by every replica, and the links used so far, each claimed once.

use super::{Result, Store};
use chrono::{DateTime, Utc};
use rand_core::RngCore as _;

impl Store {
    /// The 32 secret bytes of the key that signs snooze links: made (from the OS's random
    /// source) by the first caller, the same for every caller after it.
    pub async fn snooze_key_seed(&self) -> Result<Vec<u8>> {
        let select = "SELECT seed FROM snooze_key";
        if let Some(seed) = sqlx::query_scalar(select)
            .fetch_optional(&self.pool)
            .await?
        {
            return Ok(seed);
        }
        let mut seed = [0u8; 32];
        rand_core::OsRng.fill_bytes(&mut seed);
        // Two replicas may make one at once: the first row stays, and both read it back.
        sqlx::query(
            "INSERT INTO snooze_key (only_row, seed) VALUES (true, $1) ON CONFLICT DO NOTHING",
        )
        .bind(&seed[..])
        .execute(&self.pool)
        .await?;
        Ok(sqlx::query_scalar(select).fetch_one(&self.pool).await?)
    }

    /// When link `id` was used, if it was (and has not expired since).
    pub async fn snooze_link_used(&self, id: &str) -> Result<Option<DateTime<Utc>>> {
        Ok(
            sqlx::query_scalar("SELECT used_at FROM snooze_links_used WHERE id = $1")
                .bind(id)
                .fetch_optional(&self.pool)
                .await?,
        )
    }

    /// Claims link `id` (of `instance`, expiring at `expires_at`) at `now`: `false` when it was
    /// claimed before. Forgets the links expired by the database's clock on the way: a
    /// replica whose own clock runs ahead must not forget a used link that can still be
    /// pressed, which would let it be used again.
    pub async fn claim_snooze_link(
        &self,
        id: &str,
        instance: &str,
        expires_at: DateTime<Utc>,
        now: DateTime<Utc>,
    ) -> Result<bool> {
        sqlx::query("DELETE FROM snooze_links_used WHERE expires_at <= now()")
            .execute(&self.pool)
            .await?;
        let claimed = sqlx::query(
            "INSERT INTO snooze_links_used (id, instance, used_at, expires_at) \
             VALUES ($1, $2, $3, $4) ON CONFLICT (id) DO NOTHING",
        )
        .bind(id)
        .bind(instance)
        .bind(now)
        .bind(expires_at)
        .execute(&self.pool)
        .await?;
        Ok(claimed.rows_affected() == 1)
    }

    /// Gives link `id` back after its override was refused, so that it can be used again.
    pub async fn release_snooze_link(&self, id: &str) -> Result<()> {
        sqlx::query("DELETE FROM snooze_links_used WHERE id = $1")
            .bind(id)
            .execute(&self.pool)
            .await?;
        Ok(())
    }
}
