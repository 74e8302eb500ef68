//! The database settings every command that uses Postgres takes: its URL and time limits.

use crate::store::{Store, Timeouts};
use anyhow::{bail, Result};
use clap::Args;

/// Where the database is and how long it may take (`DATABASE_URL`, `EBB_DB_*`).
#[derive(Args, Clone, Debug)]
#[command(next_help_heading = "Database")]
pub(super) struct DbArgs {
    /// The Postgres to use: postgres://USER:PASSWORD@HOST:PORT/DATABASE (better set in the
    /// environment than on the command line, where other users' `ps` can see it).
    #[arg(
        long = "database-url",
        env = "DATABASE_URL",
        value_name = "URL",
        hide_env_values = true
    )]
    url: Option<String>,
    /// How long connecting, waiting for a pooled connection and the leader's session check may
    /// take.
    #[arg(
        long,
        env = "EBB_DB_CONNECT_TIMEOUT",
        value_name = "DURATION",
        default_value_t = Timeouts::default().connect.into(),
        value_parser = parse_connect_timeout
    )]
    db_connect_timeout: humantime::Duration,
    /// Postgres `statement_timeout` on every connection (0s: none).
    #[arg(
        long,
        env = "EBB_DB_STATEMENT_TIMEOUT",
        value_name = "DURATION",
        default_value_t = Timeouts::default().statement.into()
    )]
    db_statement_timeout: humantime::Duration,
    /// Postgres `lock_timeout` on every connection (0s: none).
    #[arg(
        long,
        env = "EBB_DB_LOCK_TIMEOUT",
        value_name = "DURATION",
        default_value_t = Timeouts::default().lock.into()
    )]
    db_lock_timeout: humantime::Duration,
    /// Postgres `idle_in_transaction_session_timeout` on every connection (0s: none).
    #[arg(
        long,
        env = "EBB_DB_IDLE_IN_TRANSACTION_TIMEOUT",
        value_name = "DURATION",
        default_value_t = Timeouts::default().idle_in_transaction.into()
    )]
    db_idle_in_transaction_timeout: humantime::Duration,
}

impl DbArgs {
    /// Connects and refuses a schema other than this binary's ([`Store::open`]).
    pub(super) async fn open(&self) -> Result<Store> {
        Ok(Store::open(self.url()?, self.timeouts()).await?)
    }

    /// Connects without touching or checking the schema (`ebb migrate`).
    pub(super) async fn connect(&self) -> Result<Store> {
        Ok(Store::connect_with(self.url()?, self.timeouts()).await?)
    }

    fn url(&self) -> Result<&str> {
        match &self.url {
            Some(url) => Ok(url),
            None => bail!(
                "DATABASE_URL is not set: set it to postgres://USER:PASSWORD@HOST:PORT/DATABASE"
            ),
        }
    }

    fn timeouts(&self) -> Timeouts {
        Timeouts {
            connect: self.db_connect_timeout.into(),
            statement: self.db_statement_timeout.into(),
            lock: self.db_lock_timeout.into(),
            idle_in_transaction: self.db_idle_in_transaction_timeout.into(),
        }
    }
}

/// Reads the connect timeout: a duration above zero.
fn parse_connect_timeout(s: &str) -> Result<humantime::Duration, String> {
    match s.parse::<humantime::Duration>() {
        Ok(d) if !d.is_zero() => Ok(d),
        Ok(_) => Err("connecting needs some time: give a duration above zero, like 10s".into()),
        Err(e) => Err(format!(
            "\"{s}\" is not a duration ({e}): write it like 10s"
        )),
    }
}
