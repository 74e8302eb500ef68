//! Postgres, ebb's memory: what the cloud said about each instance and what ebb did to it, the
//! tamper-evident audit log, and overrides.
//!
//! `DATABASE_URL` configures it. Every way the database can be unusable (unreachable, wrong
//! credentials, a schema newer than this binary) is a [`StoreError`] with a one-line message;
//! no caller acts without a store.

mod audit;
mod inventory;
mod leader;
mod overrides;
pub mod spot;

pub use audit::{
    AuditEntry, AuditFilter, FailureStreak, NewAuditEntry, Outcome, Verification, INTERRUPTED,
};
pub use inventory::{ActionDone, InstanceRecord, PlannedAction, SyncReport};
pub use leader::{Fenced, Leadership, WAKE_CHANNEL};
pub use overrides::{OverrideRecord, OverrideRefused, OverrideRequest};
pub use spot::MigrationRecord;

use sqlx::migrate::Migrator;
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::{Connection, PgConnection, PgPool};
use std::str::FromStr;
use std::time::Duration;

/// The schema migrations, embedded in the binary.
pub static MIGRATOR: Migrator = sqlx::migrate!("./migrations");

/// How long connecting may take before the database counts as unreachable.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// Why the store could not do what was asked.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// `DATABASE_URL` is not set.
    #[error("DATABASE_URL is not set: set it to postgres://USER:PASSWORD@HOST:PORT/DATABASE")]
    NoUrl,
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
    /// Applying migrations failed.
    #[error("migrating the database schema failed: {0}")]
    Migrate(#[from] sqlx::migrate::MigrateError),
    /// A statement failed.
    #[error("database error: {0}")]
    Db(#[from] sqlx::Error),
    /// An override id that does not exist (or was already revoked).
    #[error("no active override with id {0} (see ebb override --list)")]
    NoSuchOverride(i64),
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
}

/// Result of store operations.
pub type Result<T, E = StoreError> = std::result::Result<T, E>;

/// A connection pool to ebb's database.
#[derive(Debug, Clone)]
pub struct Store {
    pool: PgPool,
}

impl Store {
    /// Connects to `DATABASE_URL`, refuses a schema newer than this binary, and applies any
    /// pending migrations. What every command that uses the database calls first.
    pub async fn open_from_env() -> Result<Store> {
        let url = std::env::var("DATABASE_URL").map_err(|_| StoreError::NoUrl)?;
        let store = Store::connect(&url).await?;
        store.migrate().await?;
        Ok(store)
    }

    /// Connects to `url` without touching the schema.
    pub async fn connect(url: &str) -> Result<Store> {
        let options =
            PgConnectOptions::from_str(url).map_err(|e| StoreError::BadUrl(e.to_string()))?;
        let target = format!(
            "{}:{}/{}",
            options.get_host(),
            options.get_port(),
            options.get_database().unwrap_or("postgres")
        );
        // One direct attempt first: the pool would retry a refused connection until its
        // timeout, and a command should fail fast with the reason.
        let first = tokio::time::timeout(CONNECT_TIMEOUT, PgConnection::connect_with(&options))
            .await
            .map_err(|_| StoreError::Unreachable {
                target: target.clone(),
                reason: format!("no answer within {}s", CONNECT_TIMEOUT.as_secs()),
            })?
            .map_err(|e| classify(e, target))?;
        first.close().await?;
        let pool = PgPoolOptions::new()
            .max_connections(8)
            .acquire_timeout(CONNECT_TIMEOUT)
            .connect_lazy_with(options);
        Ok(Store { pool })
    }

    /// A store on an existing pool (tests get one per test from `#[sqlx::test]`).
    pub fn from_pool(pool: PgPool) -> Store {
        Store { pool }
    }

    /// The pool, for callers that compose their own statements (tests, benchmarks).
    pub fn pool(&self) -> &PgPool {
        &self.pool
    }

    /// Applies pending migrations; returns how many were applied. Refuses a database migrated
    /// by a newer ebb, which this binary could misread.
    pub async fn migrate(&self) -> Result<usize> {
        let known = MIGRATOR.iter().map(|m| m.version).max().unwrap_or(0);
        let applied: Vec<i64> = match sqlx::query_scalar(
            "SELECT version FROM _sqlx_migrations WHERE success ORDER BY version",
        )
        .fetch_all(&self.pool)
        .await
        {
            Ok(v) => v,
            Err(sqlx::Error::Database(e)) if e.code().as_deref() == Some("42P01") => Vec::new(),
            Err(e) => return Err(e.into()),
        };
        if let Some(&found) = applied.iter().max().filter(|v| **v > known) {
            return Err(StoreError::SchemaTooNew { found, known });
        }
        MIGRATOR.run(&self.pool).await?;
        Ok(MIGRATOR
            .iter()
            .filter(|m| !applied.contains(&m.version))
            .count())
    }
}

/// Turns a connection failure into the error a user can act on.
fn classify(err: sqlx::Error, target: String) -> StoreError {
    match &err {
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
