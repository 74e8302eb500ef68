//! The cursor of the events sent to `EBB_EVENTS_URL` (`serve/events.rs`): the audit log is the
//! outbox, and `event_cursor` holds the `seq` of the last row handled. Rows are numbered under
//! one advisory lock held until their transaction commits, so no row can appear later below a
//! row already read: a cursor over `seq` misses none.

use super::{Result, Store};

impl Store {
    /// The cursor, made at the audit log's newest row if there is none yet (the first `serve`
    /// with events: what happened before is history, read with `ebb audit`). Safe to repeat and
    /// to race: the first to make it wins.
    pub async fn start_event_cursor(&self) -> Result<i64> {
        sqlx::query(
            "INSERT INTO event_cursor (delivered_through)
             SELECT coalesce(max(seq), 0) FROM audit_log
             ON CONFLICT (one) DO NOTHING",
        )
        .execute(&self.pool)
        .await?;
        Ok(self.event_cursor().await?.unwrap_or(0))
    }

    /// The `seq` of the last audit row handled, if the cursor was made.
    pub async fn event_cursor(&self) -> Result<Option<i64>> {
        Ok(
            sqlx::query_scalar("SELECT delivered_through FROM event_cursor")
                .fetch_optional(&self.pool)
                .await?,
        )
    }

    /// Moves the cursor to `seq` if that is forward: a deposed leader still sending cannot move
    /// it back.
    pub async fn advance_event_cursor(&self, seq: i64) -> Result<()> {
        sqlx::query(
            "UPDATE event_cursor SET delivered_through = $1, updated_at = now()
             WHERE delivered_through < $1",
        )
        .bind(seq)
        .execute(&self.pool)
        .await?;
        Ok(())
    }
}
