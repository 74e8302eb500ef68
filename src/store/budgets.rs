//! The budget notices sent (`budget_notices`), each threshold of each budget's period once;
//! the calendars' running-out notices (`calendar_notices`), each warning once; and the raises
//! people made of budgets' amounts (`budget_raises`).

use super::audit::append_in;
use super::{NewAuditEntry, Result, Store};
use crate::budget::{Raise, RaiseBy};
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

impl Store {
    /// Records `warning` (a calendar that names no date of a year) as noticed and appends its
    /// notice `entry`, in one transaction; `false`, with nothing written, when it was noticed
    /// before.
    pub async fn record_calendar_notice(
        &self,
        warning: &str,
        at: DateTime<Utc>,
        entry: &NewAuditEntry,
    ) -> Result<bool> {
        let mut tx = self.pool.begin().await?;
        let new = sqlx::query(
            "INSERT INTO calendar_notices (warning, noticed_at) VALUES ($1, $2)
             ON CONFLICT DO NOTHING",
        )
        .bind(warning)
        .bind(at)
        .execute(&mut *tx)
        .await?
        .rows_affected();
        if new == 0 {
            return Ok(false);
        }
        append_in(&mut tx, std::slice::from_ref(entry)).await?;
        tx.commit().await?;
        Ok(true)
    }
}

/// A row of `budget_raises`.
type RaiseRow = (
    String,
    String,
    Option<f64>,
    Option<f64>,
    DateTime<Utc>,
    DateTime<Utc>,
    String,
    String,
);

impl Store {
    /// Records `raise` and its audit row (`budget_raise`, by the one who made it) in one
    /// transaction; its id.
    pub async fn raise_budget(&self, raise: &Raise) -> Result<i64> {
        let (percent, amount) = match raise.by {
            RaiseBy::Percent(p) => (Some(p), None),
            RaiseBy::Amount(a) => (None, Some(a)),
        };
        let mut tx = self.pool.begin().await?;
        let id: i64 = sqlx::query_scalar(
            "INSERT INTO budget_raises (budget, key, percent, amount, made_at, until, made_by, reason)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8) RETURNING id",
        )
        .bind(&raise.budget)
        .bind(raise.key.as_deref().unwrap_or(""))
        .bind(percent)
        .bind(amount)
        .bind(raise.made_at)
        .bind(raise.until)
        .bind(&raise.by_whom)
        .bind(&raise.reason)
        .fetch_one(&mut *tx)
        .await?;
        let by = match raise.by {
            RaiseBy::Percent(p) => format!("{p}%"),
            RaiseBy::Amount(a) => format!("{a} in its currency"),
        };
        let label = match &raise.key {
            Some(k) => format!("{} ({k})", raise.budget),
            None => raise.budget.clone(),
        };
        let reason = format!(
            "{label}: raised by {by} until {} (raise {id}): {}",
            raise
                .until
                .to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
            raise.reason
        );
        let entry = NewAuditEntry::event(raise.made_at, &raise.by_whom, "budget_raise", reason);
        append_in(&mut tx, &[entry]).await?;
        tx.commit().await?;
        Ok(id)
    }

    /// The raises in force at `now`, oldest first.
    pub async fn budget_raises(&self, now: DateTime<Utc>) -> Result<Vec<Raise>> {
        let rows: Vec<RaiseRow> = sqlx::query_as(
            "SELECT budget, key, percent, amount, made_at, until, made_by, reason
             FROM budget_raises WHERE made_at <= $1 AND until > $1 ORDER BY made_at, id",
        )
        .bind(now)
        .fetch_all(&self.pool)
        .await?;
        Ok(rows
            .into_iter()
            .filter_map(
                |(budget, key, percent, amount, made_at, until, by_whom, reason)| {
                    let by = match (percent, amount) {
                        (Some(p), _) => RaiseBy::Percent(p),
                        (None, Some(a)) => RaiseBy::Amount(a),
                        (None, None) => return None,
                    };
                    Some(Raise {
                        budget,
                        key: Some(key).filter(|k| !k.is_empty()),
                        by,
                        made_at,
                        until,
                        by_whom,
                        reason,
                    })
                },
            )
            .collect())
    }
}

/// Where the budgets stand as the store knows it, and what ran since the earliest period
/// began (for a burn-down).
pub type StoodAt = (Vec<crate::budget::Standing>, Vec<crate::budget::Ran>);

impl Store {
    /// Where each budget of `set` stands at `now`, worked out from what the store recorded:
    /// what ran, the instances as last listed (what runs now), the raises in force, with
    /// `prices` and the boxes of `cloud`. `None` when `set` has no budgets.
    pub async fn budget_standings(
        &self,
        set: &crate::policy::PolicySet,
        now: DateTime<Utc>,
        cloud: crate::fleet::Cloud,
        prices: &crate::fleet::money::PriceTable,
    ) -> Result<Option<StoodAt>> {
        let since = set
            .budgets
            .iter()
            .map(|b| crate::budget::bounds(b.period, b.timezone, now).0)
            .min();
        let Some(since) = since else {
            return Ok(None);
        };
        let ran = self.ran(since, now).await?;
        let raises = self.budget_raises(now).await?;
        let (instances, _) = self.fleet_at(now).await?;
        let fleet = crate::fleet::Fleet {
            instances,
            ..crate::fleet::Fleet::default()
        };
        let standings = crate::budget::standings(set, now, cloud, &ran, &fleet, prices, &raises);
        Ok(Some((standings, ran)))
    }
}
