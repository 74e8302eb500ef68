//! What time it is for a command that works on the store, and the instants written on its
//! command line (`--since 24h`, `--until 4h`), which count from that time. It is the system
//! clock's, unless an `ebb serve` on a simulated clock (the demo of `scripts/run`) is
//! publishing its clock in the same database: then the command counts to the demo's time, and
//! says so on stderr, so that its figures are the console's.

use crate::store::Store;
use crate::when;
use anyhow::Result;
use chrono::{DateTime, Utc};

/// The time to count to on `store`'s database.
pub(super) async fn now(store: &Store) -> Result<DateTime<Utc>> {
    let published = store.serve_clock().await?;
    Ok(match published.and_then(|c| Some((c.now()?, c.speed))) {
        Some((now, speed)) => {
            eprintln!(
                "note: counting to the simulated clock of the ebb serve on this database: {} \
                 ({speed}x real time)",
                now.format("%Y-%m-%d %H:%M:%S UTC")
            );
            now
        }
        None => Utc::now(),
    })
}

/// A past instant as written: a duration back from now (`24h`) or an RFC 3339 time.
#[derive(Debug, Clone)]
pub(super) struct Past(String);

impl Past {
    /// The instant, counted from `now`.
    pub(super) fn at(&self, now: DateTime<Utc>) -> Result<DateTime<Utc>> {
        when::parse_past(&self.0, now).map_err(anyhow::Error::msg)
    }
}

/// A future instant as written: a duration ahead of now (`4h`) or an RFC 3339 time.
#[derive(Debug, Clone)]
pub(super) struct Future(String);

impl Future {
    /// The instant, counted from `now`.
    pub(super) fn at(&self, now: DateTime<Utc>) -> Result<DateTime<Utc>> {
        when::parse_future(&self.0, now).map_err(anyhow::Error::msg)
    }
}

/// Checks that `s` is a past instant, as the flag's value parser.
pub(super) fn parse_past(s: &str) -> Result<Past, String> {
    when::parse_past(s, Utc::now()).map(|_| Past(s.to_string()))
}

/// Checks that `s` is a future instant, as the flag's value parser.
pub(super) fn parse_future(s: &str) -> Result<Future, String> {
    when::parse_future(s, Utc::now()).map(|_| Future(s.to_string()))
}
