//! Postgres, ebb's memory: what the cloud said about each instance and what ebb did to it, the
//! tamper-evident audit log, and overrides.
//!
//! It is given its URL (`DATABASE_URL`) and [`Timeouts`] (`EBB_DB_*`), which the command line
//! reads. Every way the database can be unusable (unreachable, wrong credentials, a schema
//! newer than this binary) is a [`StoreError`] with a one-line message; no caller acts without
//! a store.

mod accepted;
mod activity;
mod attached;
mod audit;
mod audit_entry;
mod budgets;
mod calendar_copies;
mod capacity;
mod capacity_reads;
mod catalogue;
mod console;
mod event_cursor;
mod fleet_at;
mod group_sizes;
mod groups;
mod heartbeats;
mod inventory;
mod leader;
mod overrides;
mod own_types;
mod pages;
mod pools;
mod quotes;
mod readings;
mod rebalances;
mod reclaims;
mod report;
mod report_days;
mod reservations;
mod retention;
mod roles;
mod running;
mod serve_clock;
mod sessions;
mod snooze;
pub mod spot;
mod summary;
mod sync_diff;
mod wake;

pub use accepted::AcceptedStop;
pub use activity::ActivityRecord;
pub use audit::{hex, unhex, verify_rows, AuditFilter, Verification, VerifiedHead};
pub use audit_entry::{AuditEntry, NewAuditEntry, Outcome, INTERRUPTED};
pub use budgets::{Crossed, StoodAt};
pub use console::{FleetFilter, FleetPage, FleetSort, InstanceEvent};
pub use group_sizes::{GroupRecord, GroupSize};
pub use groups::{PendingChange, StoredGroup};
pub use inventory::{ActionDone, InstanceRecord, PlannedAction, SyncReport};
pub use leader::{Fenced, Leadership};
pub use overrides::{OverrideRecord, OverrideRefused, OverrideRequest, MAX_REASON};
pub use own_types::MovedType;
pub use pages::Page;
pub use pools::{QueuedPoolEvent, POOL_HISTORY};
pub use reclaims::{ReclaimRecord, ReclaimState};
pub use report_days::{RolledDays, ROLL_UP_AFTER};
pub use reservations::{ReservationRow, ReservationStep};
pub use retention::Pruned;
pub use roles::{Grant, RUNTIME_PRIVILEGES};
pub use serve_clock::ServeClock;
pub use spot::MigrationRecord;
pub use summary::FailureStreak;
pub use wake::{WakeListener, WAKE_CHANNEL};

use sqlx::migrate::Migrator;
use sqlx::postgres::{PgConnectOptions, PgPoolOptions, PgSslMode};
use sqlx::{Connection, PgConnection, PgPool};
use std::str::FromStr;
use std::time::Duration;

/// The schema migrations, embedded in the binary.
pub static MIGRATOR: Migrator = sqlx::migrate!("./migrations");

/// Server-side TCP keepalives, set on every connection: the server probes an idle client after
/// 60 s, every 10 s, and ends the session after 6 unanswered probes. sqlx 0.9 has no
/// client-side keepalive setting, so this is what ends the session of a leader cut off by a
/// network partition, and with it the advisory lock, within about two minutes instead of the
/// kernel's retransmission timeout (the client side is bounded by ebb's own timeouts).
const KEEPALIVES: [(&str, &str); 3] = [
    ("tcp_keepalives_idle", "60"),
    ("tcp_keepalives_interval", "10"),
    ("tcp_keepalives_count", "6"),
];

/// How long the database may take, set on every connection ebb opens (the leader's included).
/// A statement, a lock wait or a transaction left open past its limit fails with a database
/// error instead of holding a tick for as long as the network or another session likes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timeouts {
    /// Connecting, acquiring a pooled connection, and the leader's liveness round trip
    /// (`EBB_DB_CONNECT_TIMEOUT`, 10 s).
    pub connect: Duration,
    /// Postgres `statement_timeout` (`EBB_DB_STATEMENT_TIMEOUT`, 60 s; the largest statement,
    /// the inventory sync of 100k instances, takes about 2 s).
    pub statement: Duration,
    /// Postgres `lock_timeout` (`EBB_DB_LOCK_TIMEOUT`, 10 s).
    pub lock: Duration,
    /// Postgres `idle_in_transaction_session_timeout` (`EBB_DB_IDLE_IN_TRANSACTION_TIMEOUT`,
    /// 60 s). The leader's session holds its advisory lock outside any transaction, so this
    /// never ends it between ticks.
    pub idle_in_transaction: Duration,
}

impl Default for Timeouts {
    fn default() -> Self {
        Timeouts {
            connect: Duration::from_secs(10),
            statement: Duration::from_secs(60),
            lock: Duration::from_secs(10),
            idle_in_transaction: Duration::from_secs(60),
        }
    }
}

impl Timeouts {
    /// `options` with these limits and the keepalives as session settings.
    fn apply(&self, options: PgConnectOptions) -> PgConnectOptions {
        let millis = |d: Duration| d.as_millis().to_string();
        options
            .options([
                ("statement_timeout", millis(self.statement)),
                ("lock_timeout", millis(self.lock)),
                (
                    "idle_in_transaction_session_timeout",
                    millis(self.idle_in_transaction),
                ),
            ])
            .options(KEEPALIVES)
    }
}

/// Why the store could not do what was asked.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// `DATABASE_URL` cannot be parsed.
    #[error("DATABASE_URL is not a valid Postgres URL ({0}): expected postgres://USER:PASSWORD@HOST:PORT/DATABASE")]
    BadUrl(String),
    /// The server cannot be reached.
    #[error("cannot connect to the database at {target}: {reason}; check DATABASE_URL and that Postgres is running")]
    Unreachable {
        /// `host:port/database`.
        target: String,
        /// What the connection attempt said.
        reason: String,
    },
    /// The TLS handshake failed: the server's certificate is not signed by the CA given, or does
    /// not name the host connected to.
    #[error("the TLS connection to the database at {target} failed: {reason}; with sslmode=verify-full, sslrootcert in DATABASE_URL must be the CA that signed the server's certificate, and the host must be a name or address that certificate holds")]
    Tls {
        /// `host:port/database`.
        target: String,
        /// What the handshake said.
        reason: String,
    },
    /// The server refused the credentials or the database name.
    #[error("the database at {target} refused the connection: {reason}; check the user, password and database name in DATABASE_URL")]
    Refused {
        /// `host:port/database`.
        target: String,
        /// The server's message.
        reason: String,
    },
    /// The database was migrated by a newer ebb.
    #[error("the database schema is at migration {found}, newer than this ebb knows (up to {known}); run a newer ebb")]
    SchemaTooNew {
        /// The newest migration applied to the database.
        found: i64,
        /// The newest migration this binary has.
        known: i64,
    },
    /// The database has no ebb schema.
    #[error("the database has no ebb schema: run `ebb migrate` as the owner of the database first (with --grant-runtime ROLE for the role ebb runs as); commands other than migrate never change the schema")]
    SchemaMissing,
    /// The database was migrated by an older ebb.
    #[error("the database schema is at migration {found}, behind this ebb's {known}: run `ebb migrate` of this ebb as the owner of the database (and --grant-runtime ROLE again); commands other than migrate never change the schema")]
    SchemaBehind {
        /// The newest migration applied to the database.
        found: i64,
        /// The newest migration this binary has.
        known: i64,
    },
    /// A migration applied to the database is not the one this binary has under its number.
    #[error("migration {version} applied to the database differs from this ebb's: it was migrated by another build of ebb; run that build, or restore the schema it expects")]
    SchemaDiffers {
        /// The migration's version.
        version: i64,
    },
    /// The role cannot read the migrations table.
    #[error("this database role may not read the schema version (_sqlx_migrations): have the owner of the database run `ebb migrate --grant-runtime ROLE` (or --grant-reader ROLE) for it")]
    SchemaUnreadable,
    /// `ebb migrate --grant-*` was given a role that does not exist.
    #[error("there is no database role {0:?}: create it first as a superuser or a role with CREATEROLE (CREATE ROLE \"{0}\" LOGIN PASSWORD '...'), then run ebb migrate --grant-runtime (or --grant-reader) again")]
    NoSuchRole(String),
    /// `ebb migrate --grant-*` was given a role it must not grant to.
    #[error("not granting to role {role:?}: {why}; give ebb a role of its own without SUPERUSER")]
    GrantRefused {
        /// The role.
        role: String,
        /// Why it is refused.
        why: String,
    },
    /// Applying migrations failed.
    #[error("migrating the database schema failed: {0}")]
    Migrate(#[from] sqlx::migrate::MigrateError),
    /// A statement failed.
    #[error("database error: {0}")]
    Db(#[from] sqlx::Error),
    /// The leader's session is shared with other clients: a transaction-mode pooler
    /// (PgBouncer, RDS Proxy) hands one server session to several clients, so a session-level
    /// advisory lock would be "held" by every replica routed to it.
    #[error("DATABASE_URL goes through a connection pooler in transaction or statement mode ({evidence}): ebb's leader election needs a session of its own; connect ebb directly to Postgres, or through a pooler in session mode (PgBouncer pool_mode=session)")]
    SharedSession {
        /// What showed it.
        evidence: String,
    },
    /// The leader's session no longer holds the advisory lock, though the session answers.
    #[error("this replica's database session no longer holds the leader's lock: not acting")]
    LockLost,
    /// An override id that does not exist (or was already revoked).
    #[error("no active override with id {0} (see ebb override --list)")]
    NoSuchOverride(i64),
    /// Someone else's override, which only an admin may revoke.
    #[error("override {id} was made by {owner}: only a token with the admin scope may revoke another's override")]
    NotYours {
        /// The override.
        id: i64,
        /// Who made it.
        owner: String,
    },
    /// A spot migration row holds a state or market this ebb does not know.
    #[error("spot migration {id} has {column} {value:?}, which this ebb does not know; it was written by a newer ebb or by hand: run the ebb that wrote it, or set spot_migrations.{column} of row {id} to a known value")]
    UnknownMigrationValue {
        /// The migration's id.
        id: i64,
        /// The column: `state` or `market`.
        column: &'static str,
        /// The value found.
        value: String,
    },
    /// A reclaim row holds a state this ebb does not know.
    #[error("reclaim {id} has state {value:?}, which this ebb does not know; it was written by a newer ebb or by hand: run the ebb that wrote it")]
    UnknownReclaimState {
        /// The reclaim's id.
        id: i64,
        /// The state found.
        value: String,
    },
}

/// Result of store operations.
pub type Result<T, E = StoreError> = std::result::Result<T, E>;

/// A connection pool to ebb's database.
#[derive(Debug, Clone)]
pub struct Store {
    pool: PgPool,
    timeouts: Timeouts,
}

/// The settings of ebb's pools. A connection's buffers grow to the largest message it has sent
/// or read (a statement that binds 10,000 rows' arrays is megabytes) and sqlx keeps them; they
/// are shrunk whenever the connection goes back to the pool, so that `serve`'s resident memory
/// does not keep every connection's largest statement between ticks.
fn pool_options(connections: u32, connect: Duration) -> PgPoolOptions {
    PgPoolOptions::new()
        .max_connections(connections)
        .acquire_timeout(connect)
        .after_release(|connection, _| {
            Box::pin(async move {
                connection.shrink_buffers();
                Ok(true)
            })
        })
}

impl Store {
    /// Connects to `url` with `timeouts` and refuses a schema other than this binary's
    /// ([`Store::check_schema`]): what every command that uses the database but `ebb migrate`
    /// calls first. It never migrates: the role ebb runs as need not own the tables, and
    /// replicas starting together leave the schema to the one migrate step.
    pub async fn open(url: &str, timeouts: Timeouts) -> Result<Store> {
        let store = Store::connect_with(url, timeouts).await?;
        store.check_schema().await?;
        Ok(store)
    }

    /// Connects to `url` with the default timeouts, without touching the schema.
    pub async fn connect(url: &str) -> Result<Store> {
        Store::connect_with(url, Timeouts::default()).await
    }

    /// Connects to `url` with `timeouts` on every connection, without touching the schema.
    pub async fn connect_with(url: &str, timeouts: Timeouts) -> Result<Store> {
        let options =
            PgConnectOptions::from_str(url).map_err(|e| StoreError::BadUrl(e.to_string()))?;
        let options = timeouts.apply(options);
        let connect = timeouts.connect;
        let target = format!(
            "{}:{}/{}",
            options.get_host(),
            options.get_port(),
            options.get_database().unwrap_or("postgres")
        );
        // One direct attempt first: the pool would retry a refused connection until its
        // timeout, and a command should fail fast with the reason.
        let first = tokio::time::timeout(connect, PgConnection::connect_with(&options))
            .await
            .map_err(|_| StoreError::Unreachable {
                target: target.clone(),
                reason: format!("no answer within {}", humantime::format_duration(connect)),
            })?
            .map_err(|e| classify(e, target, options.get_ssl_mode()))?;
        first.close().await?;
        let pool = pool_options(8, connect).connect_lazy_with(options);
        Ok(Store { pool, timeouts })
    }

    /// A store on an existing pool (tests get one per test from `#[sqlx::test]`); its
    /// connections keep the pool's own settings.
    pub fn from_pool(pool: PgPool) -> Store {
        Store {
            pool,
            timeouts: Timeouts::default(),
        }
    }

    /// A store on a pool of its own of at most `connections`, to the same database, whose
    /// statements end after `statement`: for the API and the web console, so that no read,
    /// however slow or many, holds a connection the control loop needs.
    pub fn for_readers(&self, connections: u32, statement: Duration) -> Store {
        let options = self
            .pool
            .connect_options()
            .as_ref()
            .clone()
            .options([("statement_timeout", statement.as_millis().to_string())]);
        let pool = pool_options(connections, self.timeouts.connect).connect_lazy_with(options);
        Store {
            pool,
            timeouts: Timeouts {
                statement,
                ..self.timeouts
            },
        }
    }

    /// The pool, for callers that compose their own statements (tests, benchmarks).
    pub fn pool(&self) -> &PgPool {
        &self.pool
    }

    /// Applies pending migrations; returns how many were applied. Refuses a database migrated
    /// by a newer ebb, which this binary could misread.
    pub async fn migrate(&self) -> Result<usize> {
        let known = MIGRATOR.iter().map(|m| m.version).max().unwrap_or(0);
        let applied: Vec<i64> = self
            .applied_migrations()
            .await?
            .unwrap_or_default()
            .into_iter()
            .map(|(version, _)| version)
            .collect();
        if let Some(&found) = applied.iter().max().filter(|v| **v > known) {
            return Err(StoreError::SchemaTooNew { found, known });
        }
        // On a connection of its own without statement or lock limits: a migration may rewrite
        // a large table, and a replica starting beside another waits for that one's migrations.
        // (Later settings in the startup options win over the pool's.)
        let options = self
            .pool
            .connect_options()
            .as_ref()
            .clone()
            .options([("statement_timeout", "0"), ("lock_timeout", "0")]);
        let mut conn = connect_within(&options, self.timeouts.connect).await?;
        MIGRATOR.run(&mut conn).await?;
        conn.close().await?;
        Ok(MIGRATOR
            .iter()
            .filter(|m| !applied.contains(&m.version))
            .count())
    }
}

/// A connection of its own, or an error once `limit` has passed without one.
async fn connect_within(options: &PgConnectOptions, limit: Duration) -> Result<PgConnection> {
    match tokio::time::timeout(limit, PgConnection::connect_with(options)).await {
        Ok(conn) => Ok(conn?),
        Err(_) => Err(StoreError::Db(sqlx::Error::Io(std::io::Error::new(
            std::io::ErrorKind::TimedOut,
            format!(
                "no connection to the database within {}",
                humantime::format_duration(limit)
            ),
        )))),
    }
}

/// Turns a connection failure into the error a user can act on.
fn classify(err: sqlx::Error, target: String, tls: PgSslMode) -> StoreError {
    // A refused certificate comes out of the handshake as invalid data on the socket.
    let handshake = |e: &std::io::Error| {
        e.kind() == std::io::ErrorKind::InvalidData && !matches!(tls, PgSslMode::Disable)
    };
    match &err {
        sqlx::Error::Tls(e) => StoreError::Tls {
            target,
            reason: e.to_string(),
        },
        sqlx::Error::Io(e) if handshake(e) => StoreError::Tls {
            target,
            reason: e.to_string(),
        },
        sqlx::Error::Database(db) => {
            let refused =
                matches!(db.code().as_deref(), Some(c) if c.starts_with("28") || c == "3D000");
            if refused {
                StoreError::Refused {
                    target,
                    reason: db.message().to_string(),
                }
            } else {
                StoreError::Db(err)
            }
        }
        _ => StoreError::Unreachable {
            target,
            reason: err.to_string(),
        },
    }
}
