//! The simulated clock an `ebb serve` on a simulated fleet publishes (`serve_clock`), and what
//! time it is by that clock for a command that reads the same database. Both instants of a
//! row are on the database's clock, so the host a command runs on does not matter.

use super::{Result, Store};
use chrono::{DateTime, Utc};

/// A published clock older than this (on the database's clock) belongs to a serve that has
/// stopped: commands then count to the system clock again. Serve publishes every few seconds.
const SERVE_CLOCK_STALE: chrono::TimeDelta = chrono::TimeDelta::seconds(60);

/// The simulated clock as last published, and when it was read.
#[derive(Debug, Clone, Copy, PartialEq, sqlx::FromRow)]
pub struct ServeClock {
    /// The simulated time when it was published.
    pub simulated_at: DateTime<Utc>,
    /// Simulated seconds per real second.
    pub speed: f64,
    /// When it was published, on the database's clock.
    pub published_at: DateTime<Utc>,
    /// When it was read, on the database's clock.
    pub read_at: DateTime<Utc>,
}

impl ServeClock {
    /// The simulated time at `read_at`; none once the clock is [`SERVE_CLOCK_STALE`].
    pub fn now(&self) -> Option<DateTime<Utc>> {
        let since = self.read_at - self.published_at;
        if since > SERVE_CLOCK_STALE {
            return None;
        }
        let micros = (since.num_microseconds()? as f64 * self.speed).round() as i64;
        self.simulated_at
            .checked_add_signed(chrono::TimeDelta::microseconds(micros))
    }
}

impl Store {
    /// Publishes a simulated clock at `simulated_at`, running `speed` times real time.
    pub async fn publish_serve_clock(&self, simulated_at: DateTime<Utc>, speed: f64) -> Result<()> {
        sqlx::query(
            "INSERT INTO serve_clock (id, simulated_at, speed, published_at)
             VALUES (true, $1, $2, now())
             ON CONFLICT (id) DO UPDATE SET simulated_at = $1, speed = $2, published_at = now()",
        )
        .bind(simulated_at)
        .bind(speed)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    /// The simulated clock last published in this database, if any.
    pub async fn serve_clock(&self) -> Result<Option<ServeClock>> {
        Ok(sqlx::query_as(
            "SELECT simulated_at, speed, published_at, now() AS read_at FROM serve_clock",
        )
        .fetch_optional(&self.pool)
        .await?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(s: &str) -> DateTime<Utc> {
        s.parse().unwrap()
    }

    #[test]
    fn a_published_clock_runs_on_at_its_speed_until_it_is_stale() {
        let clock = |read_at: &str| ServeClock {
            simulated_at: t("2026-11-30T10:00:00Z"),
            speed: 600.0,
            published_at: t("2026-12-07T16:00:00Z"),
            read_at: t(read_at),
        };
        // Two real seconds later: twenty simulated minutes.
        assert_eq!(
            clock("2026-12-07T16:00:02Z").now(),
            Some(t("2026-11-30T10:20:00Z"))
        );
        assert_eq!(
            clock("2026-12-07T16:01:00Z").now(),
            Some(t("2026-11-30T20:00:00Z"))
        );
        assert_eq!(clock("2026-12-07T16:01:01Z").now(), None);
    }
}
