//! The prices the clouds quoted, kept in Postgres (`price_quotes`): one row per region and
//! type, replaced at each good read, so that a failed read keeps the last good quote.

use super::{Result, Store};
use crate::fleet::money::PriceTable;
use crate::fleet::PriceQuote;
use chrono::{DateTime, Utc};
use sqlx::types::Json;
use std::collections::{BTreeMap, HashMap};

impl Store {
    /// When each kept quote of `region` was made, by instance type.
    pub async fn quoted_at(&self, region: &str) -> Result<HashMap<String, DateTime<Utc>>> {
        let rows: Vec<(String, DateTime<Utc>)> =
            sqlx::query_as("SELECT instance_type, quoted_at FROM price_quotes WHERE region = $1")
                .bind(region)
                .fetch_all(&self.pool)
                .await?;
        Ok(rows.into_iter().collect())
    }

    /// Keeps `quotes`, each replacing what was kept for its region and type.
    pub async fn keep_quotes(&self, quotes: &[PriceQuote]) -> Result<()> {
        let mut tx = self.pool.begin().await?;
        for q in quotes {
            sqlx::query(
                "INSERT INTO price_quotes
                     (region, instance_type, currency, hourly, monthly, source, quoted_at)
                 VALUES ($1, $2, $3, $4, $5, $6, $7)
                 ON CONFLICT (region, instance_type) DO UPDATE
                 SET currency = excluded.currency, hourly = excluded.hourly,
                     monthly = excluded.monthly, source = excluded.source,
                     quoted_at = excluded.quoted_at",
            )
            .bind(&q.region)
            .bind(&q.instance_type)
            .bind(&q.currency)
            .bind(q.hourly)
            .bind(Json(&q.monthly))
            .bind(&q.source)
            .bind(q.quoted_at)
            .execute(&mut *tx)
            .await?;
        }
        tx.commit().await?;
        Ok(())
    }

    /// Every kept quote.
    pub async fn quotes(&self) -> Result<Vec<PriceQuote>> {
        type Row = (
            String,
            String,
            String,
            Option<f64>,
            Json<BTreeMap<u32, f64>>,
            String,
            DateTime<Utc>,
        );
        let rows: Vec<Row> = sqlx::query_as(
            "SELECT region, instance_type, currency, hourly, monthly, source, quoted_at
             FROM price_quotes ORDER BY region, instance_type",
        )
        .fetch_all(&self.pool)
        .await?;
        Ok(rows
            .into_iter()
            .map(
                |(region, instance_type, currency, hourly, Json(monthly), source, quoted_at)| {
                    PriceQuote {
                        region,
                        instance_type,
                        currency,
                        hourly,
                        monthly,
                        source,
                        quoted_at,
                    }
                },
            )
            .collect())
    }

    /// `table` with the kept quotes laid over it ([`PriceTable::with_quotes`]).
    pub async fn quoted_table(&self, table: PriceTable) -> Result<PriceTable> {
        Ok(table.with_quotes(&self.quotes().await?))
    }
}
