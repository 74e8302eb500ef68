//! The last reading of each activity signal a tick asked a server for (Jupyter, Prometheus),
//! for the console: `activity_readings`, one row per instance and signal, replaced at each read
//! and pruned with the GPU readings.

use super::{Result, Store};
use crate::fleet::activity::SignalReading;
use chrono::{DateTime, Utc};

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
}
