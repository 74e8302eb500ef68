//! The activity signals as ebb keeps them, both pruned with the GPU readings:
//! - the last reading of each signal a tick asked a server for (Jupyter, Prometheus,
//!   CloudWatch), for the console: `activity_readings`, one row per instance and signal,
//!   replaced at each read;
//! - when each signal showed use, for `ebb metrics export` and `ebb replay`: `activity_uses`,
//!   the latest use of each five-minute slot.

use super::{Result, Store};
use crate::fleet::activity::SignalReading;
use crate::fleet::activity::SignalUses;
use crate::fleet::Sample;
use chrono::{DateTime, Utc};
use futures_util::TryStreamExt as _;
use std::collections::HashMap;

/// What a tick read of one signal of one instance, as kept.
#[derive(Debug, Clone, PartialEq, sqlx::FromRow)]
pub struct ActivityRecord {
    /// The instance.
    pub instance: String,
    /// The signal's name.
    pub signal: String,
    /// When the tick read it.
    pub read_at: DateTime<Utc>,
    /// When a person last used the instance by it (Jupyter), if ever.
    pub last_use: Option<DateTime<Utc>>,
    /// Its newest value (Prometheus).
    pub value: Option<f64>,
    /// That value's time.
    pub value_at: Option<DateTime<Utc>>,
    /// Why it could not be read.
    pub unread: Option<String>,
}

impl ActivityRecord {
    /// The record of `reading`, signal `signal` of `instance`, read at `read_at`.
    pub fn of(
        instance: &str,
        signal: &str,
        reading: &SignalReading,
        read_at: DateTime<Utc>,
    ) -> ActivityRecord {
        let mut record = ActivityRecord {
            instance: instance.to_string(),
            signal: signal.to_string(),
            read_at,
            last_use: None,
            value: None,
            value_at: None,
            unread: None,
        };
        match reading {
            SignalReading::LastUse(last) => record.last_use = *last,
            SignalReading::Points(points) => {
                if let Some((at, value)) = points.last() {
                    (record.value_at, record.value) = (Some(*at), Some(*value));
                }
            }
            SignalReading::Unread(why) => record.unread = Some(why.to_string()),
        }
        record
    }
}

impl Store {
    /// Keeps `records`, each in place of the one before of its instance and signal.
    pub async fn record_activity(&self, records: &[ActivityRecord]) -> Result<()> {
        if records.is_empty() {
            return Ok(());
        }
        let column =
            |f: fn(&ActivityRecord) -> Option<DateTime<Utc>>| -> Vec<Option<DateTime<Utc>>> {
                records.iter().map(f).collect()
            };
        sqlx::query(
            "INSERT INTO activity_readings
                 (instance, signal, read_at, last_use, value, value_at, unread)
             SELECT * FROM UNNEST($1::text[], $2::text[], $3::timestamptz[], $4::timestamptz[],
                 $5::float8[], $6::timestamptz[], $7::text[])
             ON CONFLICT (instance, signal) DO UPDATE SET read_at = excluded.read_at,
                 last_use = excluded.last_use, value = excluded.value,
                 value_at = excluded.value_at, unread = excluded.unread",
        )
        .bind(
            records
                .iter()
                .map(|r| r.instance.as_str())
                .collect::<Vec<_>>(),
        )
        .bind(
            records
                .iter()
                .map(|r| r.signal.as_str())
                .collect::<Vec<_>>(),
        )
        .bind(records.iter().map(|r| r.read_at).collect::<Vec<_>>())
        .bind(column(|r| r.last_use))
        .bind(records.iter().map(|r| r.value).collect::<Vec<_>>())
        .bind(column(|r| r.value_at))
        .bind(
            records
                .iter()
                .map(|r| r.unread.as_deref())
                .collect::<Vec<_>>(),
        )
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    /// What ebb keeps of `instance`'s signals, by signal name.
    pub async fn activity_of(&self, instance: &str) -> Result<Vec<ActivityRecord>> {
        Ok(sqlx::query_as(
            "SELECT instance, signal, read_at, last_use, value, value_at, unread
             FROM activity_readings WHERE instance = $1 ORDER BY signal",
        )
        .bind(instance)
        .fetch_all(&self.pool)
        .await?)
    }

    /// Keeps `uses` (instance, signal, when it last showed use), each as the latest use of its
    /// five-minute slot. One per instance and signal in a call.
    pub async fn record_activity_uses(
        &self,
        uses: &[(String, String, DateTime<Utc>)],
    ) -> Result<()> {
        if uses.is_empty() {
            return Ok(());
        }
        sqlx::query(
            "INSERT INTO activity_uses (instance, signal, slot, used_at)
             SELECT instance, signal, date_bin('5 minutes', used_at, '2000-01-01'), used_at
             FROM UNNEST($1::text[], $2::text[], $3::timestamptz[]) AS u(instance, signal, used_at)
             ON CONFLICT (instance, signal, slot)
             DO UPDATE SET used_at = GREATEST(activity_uses.used_at, excluded.used_at)",
        )
        .bind(uses.iter().map(|u| u.0.as_str()).collect::<Vec<_>>())
        .bind(uses.iter().map(|u| u.1.as_str()).collect::<Vec<_>>())
        .bind(uses.iter().map(|u| u.2).collect::<Vec<_>>())
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    /// The uses kept of each of `instances` up to `to`; instances with none are left out.
    pub async fn activity_uses_of(
        &self,
        instances: &[String],
        to: DateTime<Utc>,
    ) -> Result<HashMap<String, SignalUses>> {
        let mut rows = sqlx::query_as::<_, (String, String, DateTime<Utc>)>(
            "SELECT instance, signal, used_at FROM activity_uses
             WHERE instance = ANY($1::text[]) AND used_at <= $2 ORDER BY used_at",
        )
        .bind(instances)
        .bind(to)
        .fetch(&self.pool);
        let mut kept: HashMap<String, SignalUses> = HashMap::new();
        while let Some((instance, signal, at)) = rows.try_next().await? {
            kept.entry(instance)
                .or_default()
                .entry(signal)
                .or_default()
                .push(at);
        }
        Ok(kept)
    }

    /// The names of the signals whose uses are kept: `ebb metrics export`'s activity columns.
    pub async fn activity_signals(&self) -> Result<Vec<String>> {
        Ok(
            sqlx::query_scalar("SELECT DISTINCT signal FROM activity_uses ORDER BY signal")
                .fetch_all(&self.pool)
                .await?,
        )
    }

    /// What a replay reads of `instances` within `span`: their GPU readings, and the uses
    /// their signals showed up to its end.
    pub async fn kept_of(
        &self,
        instances: &[String],
        (from, to): (DateTime<Utc>, DateTime<Utc>),
    ) -> Result<(HashMap<String, Vec<Sample>>, HashMap<String, SignalUses>)> {
        let readings = self.gpu_readings_of(instances, from, to).await?;
        Ok((readings, self.activity_uses_of(instances, to).await?))
    }
}
