//! The budget notices sent (`budget_notices`): each threshold of each budget's period once.

use super::audit::append_in;
use super::{NewAuditEntry, Result, Store};
use chrono::{DateTime, Utc};

/// Thresholds of one budget's period crossed, by its spend or by its forecast.
#[derive(Debug, Clone, Copy)]
pub struct Crossed<'a> {
    /// The budget's name.
    pub budget: &'a str,
    /// The value of its `per` tag.
    pub key: Option<&'a str>,
    /// When its period began.
    pub period_start: DateTime<Utc>,
    /// The shares of the amount crossed, percent.
    pub percents: &'a [f64],
    /// Whether the forecast crossed them, not the spend.
    pub by_forecast: bool,
}

impl Store {
    /// Records the thresholds of `crossed` not noticed before in their period, and appends the
    /// notice `entry` makes for the highest of them, in one transaction: several crossed at
    /// once make one notice. `None`, with nothing written, when every one went out before.
    pub async fn record_budget_notice(
        &self,
        crossed: Crossed<'_>,
        at: DateTime<Utc>,
        entry: impl FnOnce(f64) -> NewAuditEntry,
    ) -> Result<Option<NewAuditEntry>> {
        let mut tx = self.pool.begin().await?;
        let new: Vec<f64> = sqlx::query_scalar(
            "INSERT INTO budget_notices (budget, key, period_start, threshold, by_forecast, sent_at)
             SELECT $1, $2, $3, t, $5, $6 FROM UNNEST($4::float8[]) AS t
             ON CONFLICT DO NOTHING RETURNING threshold",
        )
        .bind(crossed.budget)
        .bind(crossed.key.unwrap_or(""))
        .bind(crossed.period_start)
        .bind(crossed.percents)
        .bind(crossed.by_forecast)
        .bind(at)
        .fetch_all(&mut *tx)
        .await?;
        let Some(highest) = new.into_iter().reduce(f64::max) else {
            return Ok(None);
        };
        let entry = entry(highest);
        append_in(&mut tx, std::slice::from_ref(&entry)).await?;
        tx.commit().await?;
        Ok(Some(entry))
    }
}
