//! Asking the leader to tick now: any replica (or `ebb override`) notifies [`WAKE_CHANNEL`],
//! the notification reaches every replica, and the one that leads ticks.

use super::{Result, Store};
use sqlx::postgres::PgListener;
use sqlx::PgConnection;
use std::convert::Infallible;
use tokio::sync::Notify;

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

    /// Notifies `wake` whenever a tick is asked for on [`WAKE_CHANNEL`], until the listening
    /// connection fails.
    pub async fn listen_for_wakes(&self, wake: &Notify) -> Result<Infallible, sqlx::Error> {
        let mut listener = PgListener::connect_with(&self.pool).await?;
        listener.listen(WAKE_CHANNEL).await?;
        loop {
            listener.recv().await?;
            wake.notify_one();
        }
    }
}
