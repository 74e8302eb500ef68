//! Asking the leader to tick now: any replica (or `ebb override`) notifies [`WAKE_CHANNEL`],
//! the notification reaches every replica, and the one that leads ticks.

use super::{Result, Store};
use sqlx::postgres::PgListener;
use sqlx::PgConnection;
use std::time::Duration;

/// The notification channel on which the leader is asked to tick now.
pub const WAKE_CHANNEL: &str = "ebb_wake";

/// Notifies [`WAKE_CHANNEL`]; delivered when `conn`'s transaction commits.
pub(super) async fn wake_leader(conn: &mut PgConnection) -> Result<()> {
    sqlx::query("SELECT pg_notify($1, '')")
        .bind(WAKE_CHANNEL)
        .execute(conn)
        .await?;
    Ok(())
}

impl Store {
    /// Asks the leader, whichever replica it is, to tick now.
    pub async fn wake_leader(&self) -> Result<()> {
        wake_leader(&mut *self.pool.acquire().await?).await
    }

    /// A connection of its own that listens on [`WAKE_CHANNEL`].
    pub async fn listen_for_wakes(&self) -> Result<WakeListener, sqlx::Error> {
        let mut listener = PgListener::connect_with(&self.pool).await?;
        listener.listen(WAKE_CHANNEL).await?;
        Ok(WakeListener(listener))
    }
}

/// A connection listening for tick requests; requests made between two waits are kept.
#[derive(Debug)]
pub struct WakeListener(PgListener);

impl WakeListener {
    /// Waits at most `within` for a tick request: whether one came. An error means the
    /// connection failed and is not listening any more.
    pub async fn wait(&mut self, within: Duration) -> Result<bool, sqlx::Error> {
        match tokio::time::timeout(within, self.0.recv()).await {
            Ok(Ok(_)) => Ok(true),
            Ok(Err(err)) => Err(err),
            Err(_) => Ok(false),
        }
    }
}
