//! Leader election: the replica holding a session-level advisory lock acts; the others serve
//! reads. The lock lives on a connection of its own, and the leader writes its intents on that
//! connection. Losing the connection loses the lock and the means to write an intent together,
//! so a replica that is no longer the leader cannot start an action (the intent is committed
//! before every cloud call). When a leader dies, Postgres drops its session and the lock with it.

use super::audit::append_in;
use super::audit_entry::{AuditEntry, NewAuditEntry};
use super::overrides::{protecting_in, OverrideRecord};
use super::{connect_within, Result, Store};
use crate::engine::{Action, Code};
use chrono::{DateTime, Utc};
use sqlx::{Connection, PgConnection};
use std::time::Duration;

/// Proof of leadership: the session that holds the lock.
///
/// The session has the store's statement, lock and idle-in-transaction limits, but no
/// `idle_session_timeout`: it is idle between ticks, outside any transaction (the lock is
/// session-level), and must stay open for as long as the replica leads. The server's TCP
/// keepalives end it when the replica is cut off, which frees the lock for another replica.
pub struct Leadership {
    conn: PgConnection,
    /// How long the liveness round trip may take.
    ping: Duration,
}

impl Store {
    /// Tries to become the leader as `name` (shown in `pg_stat_activity`); `None` when another
    /// replica leads.
    pub async fn try_lead(&self, name: &str) -> Result<Option<Leadership>> {
        let options = self
            .pool
            .connect_options()
            .as_ref()
            .clone()
            .application_name(&format!("ebb leader {name}"));
        let mut conn = connect_within(&options, self.timeouts.connect).await?;
        let held: bool = sqlx::query_scalar("SELECT pg_try_advisory_lock(hashtext('ebb.leader'))")
            .fetch_one(&mut conn)
            .await?;
        if held {
            Ok(Some(Leadership {
                conn,
                ping: self.timeouts.connect,
            }))
        } else {
            conn.close().await?;
            Ok(None)
        }
    }
}

impl Leadership {
    /// Whether the lock is still held: it is as long as its session is alive. A session that
    /// does not answer within the connect timeout counts as lost: across a network partition
    /// the round trip would otherwise wait for the kernel's retransmission timeout.
    pub async fn held(&mut self) -> bool {
        let ping = sqlx::query("SELECT 1").execute(&mut self.conn);
        matches!(tokio::time::timeout(self.ping, ping).await, Ok(Ok(_)))
    }

    /// Appends intents on the leader's session, as one transaction; fails once leadership is
    /// lost.
    pub async fn append_intents(&mut self, entries: &[NewAuditEntry]) -> Result<Vec<AuditEntry>> {
        let mut tx = self.conn.begin().await?;
        let rows = append_in(&mut tx, entries).await?;
        tx.commit().await?;
        Ok(rows)
    }

    /// Right before one cloud call, as one transaction on the leader's session (which proves
    /// that this replica still leads: the lock lives and dies with the session): re-reads the
    /// overrides of the instances that `intents` would stop (or give notice of a stop), and
    /// commits the intents of those that no override protects at `now`. An override made after
    /// the tick decided is honoured by the tick's later calls; a replica that no longer leads
    /// writes no intent, so it makes no call after the one in flight.
    pub async fn fence(
        &mut self,
        intents: Vec<NewAuditEntry>,
        now: DateTime<Utc>,
    ) -> Result<Fenced> {
        let mut tx = self.conn.begin().await?;
        let stops: Vec<String> = intents
            .iter()
            .filter(|e| stops_instance(e))
            .filter_map(|e| e.instance.clone())
            .collect();
        let protecting = if stops.is_empty() {
            Vec::new()
        } else {
            protecting_in(&mut tx, &stops, now).await?
        };
        let mut to_write = Vec::with_capacity(intents.len());
        let mut protected = Vec::new();
        for e in intents {
            let by = protecting
                .iter()
                .find(|o| stops_instance(&e) && e.instance.as_ref() == Some(&o.instance));
            match by {
                Some(o) => protected.push((e, o.clone())),
                None => to_write.push(e),
            }
        }
        let written = append_in(&mut tx, &to_write).await?;
        tx.commit().await?;
        Ok(Fenced { written, protected })
    }
}

/// Whether `intent` stops its instance, gives notice of a stop, or takes a spot migration's
/// step that moves it (stop, image, first launch, termination of the original): what an
/// override forbids. The calls that undo or end a move are never held back.
fn stops_instance(intent: &NewAuditEntry) -> bool {
    let moves = [
        Code::SpotStop,
        Code::SpotImage,
        Code::SpotLaunch,
        Code::SpotCleanup,
    ];
    match Action::parse(&intent.action) {
        Some(action) if action.stops() => true,
        Some(Action::MigrateToSpot) => moves
            .iter()
            .any(|c| intent.code.as_deref() == Some(c.as_str())),
        _ => false,
    }
}

/// What [`Leadership::fence`] wrote, and what it left out.
#[derive(Debug)]
pub struct Fenced {
    /// The intents committed, in order.
    pub written: Vec<AuditEntry>,
    /// The intents left out, each with the override that now protects its instance.
    pub protected: Vec<(NewAuditEntry, OverrideRecord)>,
}
