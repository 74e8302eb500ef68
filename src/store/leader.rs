//! Leader election: the replica holding a session-level advisory lock acts; the others serve
//! reads. The lock lives on a connection of its own, and the leader writes its intents on that
//! connection. Losing the connection loses the lock and the means to write an intent together,
//! so a replica that is no longer the leader cannot start an action (the intent is committed
//! before every cloud call). When a leader dies, Postgres drops its session and the lock with it.

use super::audit::append_in;
use super::audit_entry::{AuditEntry, NewAuditEntry};
use super::groups::mark_pending_in;
use super::overrides::{protecting_in, OverrideRecord};
use super::{connect_within, Result, Store, StoreError};
use crate::engine::{Action, Code};
use crate::fleet::Capacity;
use chrono::{DateTime, Utc};
use sqlx::{Connection, PgConnection, Row};
use std::time::Duration;

/// Proof of leadership: the session that holds the lock.
///
/// The session has the store's statement, lock and idle-in-transaction limits, but
/// `idle_session_timeout` is off on it whatever the role or database sets: it is idle between
/// ticks, outside any transaction (the lock is session-level), and must stay open for as long
/// as the replica leads. The server's TCP keepalives end it when the replica is cut off, which
/// frees the lock for another replica.
pub struct Leadership {
    conn: PgConnection,
    /// The server process of the session that took the lock: every later check asks that the
    /// statement ran in that same session and that the session still holds the lock.
    pid: i32,
    /// How long the liveness round trip may take.
    ping: Duration,
}

/// Whether the session running the statement holds the leader's lock, and its server process.
/// The lock's key is a bigint, which `pg_locks` shows as two 32-bit halves.
const LOCK_HELD: &str = "SELECT pg_backend_pid() AS pid, EXISTS (
    SELECT 1 FROM pg_locks
    WHERE locktype = 'advisory' AND granted AND objsubid = 1
      AND pid = pg_backend_pid()
      AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
      AND classid::bigint = (hashtext('ebb.leader')::bigint >> 32) & 4294967295
      AND objid::bigint = hashtext('ebb.leader')::bigint & 4294967295
) AS held";

/// Turns off `idle_session_timeout` (Postgres 14 and later) for this session only.
const NO_IDLE_SESSION_TIMEOUT: &str = "SELECT set_config('idle_session_timeout', '0', false)
    FROM pg_settings WHERE name = 'idle_session_timeout'";

impl Store {
    /// Tries to become the leader as `name` (shown in `pg_stat_activity`); `None` when another
    /// replica leads. Refuses a session that a pooler shares with other clients
    /// ([`StoreError::SharedSession`]), where a session-level lock would be no lock at all.
    ///
    /// These statements use the simple query protocol: a pooler in transaction mode may not
    /// keep prepared statements, and the refusal must say why rather than fail on one.
    pub async fn try_lead(&self, name: &str) -> Result<Option<Leadership>> {
        let options = self
            .pool
            .connect_options()
            .as_ref()
            .clone()
            .application_name(&format!("ebb leader {name}"));
        let mut conn = connect_within(&options, self.timeouts.connect).await?;
        sqlx::raw_sql(NO_IDLE_SESSION_TIMEOUT)
            .execute(&mut conn)
            .await?;
        let (pid, already) = lock_held(&mut conn).await?;
        // A fresh session cannot hold the lock already; nor can two connections share a server
        // process, unless a pooler hands one session to several clients.
        let mut probe = connect_within(&options, self.timeouts.connect).await?;
        let (probe_pid, _) = lock_held(&mut probe).await?;
        probe.close().await?;
        if already || probe_pid == pid {
            conn.close().await?;
            return Err(StoreError::SharedSession {
                evidence: if already {
                    format!(
                        "a new connection's server session {pid} already held the leader's lock"
                    )
                } else {
                    format!("two new connections were given the same server session {pid}")
                },
            });
        }
        let row = sqlx::raw_sql("SELECT pg_try_advisory_lock(hashtext('ebb.leader')) AS locked")
            .fetch_one(&mut conn)
            .await?;
        let locked: bool = row.try_get("locked")?;
        if !locked {
            conn.close().await?;
            return Ok(None);
        }
        let (now_pid, held) = lock_held(&mut conn).await?;
        if now_pid != pid || !held {
            conn.close().await?;
            return Err(StoreError::SharedSession {
                evidence: format!(
                    "the lock was taken in server session {pid}, and the next statement ran in {now_pid}"
                ),
            });
        }
        Ok(Some(Leadership {
            conn,
            pid,
            ping: self.timeouts.connect,
        }))
    }
}

/// Fails unless `tx` runs in the session `pid` that took the lock and that session still holds
/// it: the intents it writes are then a leader's.
async fn check_lock(tx: &mut PgConnection, pid: i32) -> Result<()> {
    match lock_held(tx).await? {
        (now, true) if now == pid => Ok(()),
        _ => Err(StoreError::LockLost),
    }
}

/// The server process of the session `conn` runs in, and whether it holds the leader's lock.
async fn lock_held(conn: &mut PgConnection) -> Result<(i32, bool)> {
    let row = sqlx::raw_sql(LOCK_HELD).fetch_one(conn).await?;
    Ok((row.try_get("pid")?, row.try_get("held")?))
}

impl Leadership {
    /// Whether the lock is still held, as `pg_locks` shows it for the session that took it. A
    /// session that does not answer within the connect timeout counts as lost: across a network
    /// partition the round trip would otherwise wait for the kernel's retransmission timeout.
    pub async fn held(&mut self) -> bool {
        let check = lock_held(&mut self.conn);
        matches!(
            tokio::time::timeout(self.ping, check).await,
            Ok(Ok((pid, true))) if pid == self.pid
        )
    }

    /// Appends intents on the leader's session, as one transaction; fails once leadership is
    /// lost.
    pub async fn append_intents(&mut self, entries: &[NewAuditEntry]) -> Result<Vec<AuditEntry>> {
        let mut tx = self.conn.begin().await?;
        check_lock(&mut tx, self.pid).await?;
        let rows = append_in(&mut tx, entries).await?;
        tx.commit().await?;
        Ok(rows)
    }

    /// Right before a group's UpdateAutoScalingGroup, as one transaction on the leader's
    /// session that first checks that this session still holds the lock: appends the change's
    /// intent and marks it pending on the group (to `to`), so that a crash after it is resolved
    /// from the group's real capacity.
    pub async fn fence_group(
        &mut self,
        intent: &NewAuditEntry,
        region: &str,
        name: &str,
        to: Capacity,
    ) -> Result<AuditEntry> {
        let mut tx = self.conn.begin().await?;
        check_lock(&mut tx, self.pid).await?;
        let mut rows = append_in(&mut tx, std::slice::from_ref(intent)).await?;
        let row = rows.pop().expect("one intent appended");
        mark_pending_in(&mut tx, region, name, &row, to).await?;
        tx.commit().await?;
        Ok(row)
    }

    /// Right before one cloud call, as one transaction on the leader's session that first checks,
    /// in `pg_locks`, that this very session still holds the lock: re-reads the
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
        check_lock(&mut tx, self.pid).await?;
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

    /// [`Leadership::fence`] of the one intent of a step's call: its sequence number, or why
    /// not when an override made since protects its instance from it.
    pub async fn fence_one(
        &mut self,
        intent: NewAuditEntry,
        now: DateTime<Utc>,
    ) -> Result<std::result::Result<i64, String>> {
        let fenced = self.fence(vec![intent], now).await?;
        if let Some((_, o)) = fenced.protected.first() {
            return Ok(Err(format!(
                "an override by {} until {} protects it: {}",
                o.created_by,
                o.until.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
                o.reason
            )));
        }
        Ok(Ok(fenced.written[0].seq))
    }
}

/// Whether `intent` stops its instance, gives notice of a stop, takes a spot migration's
/// step that moves it (stop, image, first launch, termination of the original), or a step of
/// its reclaim (its image, its termination): what an override forbids. The calls that undo or
/// end a move, and a restore, are never held back.
fn stops_instance(intent: &NewAuditEntry) -> bool {
    let moves = [
        Code::SpotStop,
        Code::SpotImage,
        Code::SpotLaunch,
        Code::SpotCleanup,
    ];
    match Action::parse(&intent.action) {
        Some(action) if action.stops() => true,
        Some(Action::Reclaim) => true,
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
