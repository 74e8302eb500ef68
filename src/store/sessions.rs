//! Console logins kept on the server (`console_sessions`): a browser's cookie holds a random
//! session id; a row holds the id's SHA-256, the login's binding to its API token, and when it
//! expires. Every replica shares the table, so a login holds whichever replica answers; logging
//! out deletes the row, so a copied cookie is worth nothing after it. Times are the database's.

use super::{Result, Store};

impl Store {
    /// Records a login: the session with id hash `id_hash`, bound to its token by `binding`,
    /// for `lasts` from now. Forgets expired logins on the way.
    pub async fn start_console_session(
        &self,
        id_hash: &[u8],
        binding: &[u8],
        lasts: chrono::Duration,
    ) -> Result<()> {
        self.prune_console_sessions().await?;
        sqlx::query(
            "INSERT INTO console_sessions (id_hash, token_binding, expires_at) \
             VALUES ($1, $2, now() + make_interval(secs => $3))",
        )
        .bind(id_hash)
        .bind(binding)
        .bind(lasts.num_seconds() as f64)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    /// Deletes the logins that have expired: how many.
    pub async fn prune_console_sessions(&self) -> Result<u64> {
        Ok(
            sqlx::query("DELETE FROM console_sessions WHERE expires_at <= now()")
                .execute(&self.pool)
                .await?
                .rows_affected(),
        )
    }

    /// The token binding of the unexpired login with id hash `id_hash`, if there is one.
    pub async fn console_session(&self, id_hash: &[u8]) -> Result<Option<Vec<u8>>> {
        Ok(sqlx::query_scalar(
            "SELECT token_binding FROM console_sessions WHERE id_hash = $1 AND expires_at > now()",
        )
        .bind(id_hash)
        .fetch_optional(&self.pool)
        .await?)
    }

    /// Ends the login with id hash `id_hash` (logging out); nothing when there is none.
    pub async fn end_console_session(&self, id_hash: &[u8]) -> Result<()> {
        sqlx::query("DELETE FROM console_sessions WHERE id_hash = $1")
            .bind(id_hash)
            .execute(&self.pool)
            .await?;
        Ok(())
    }
}
