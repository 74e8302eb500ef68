//! GPU utilisation history: the readings ticks take, kept compactly (one row per instance and
//! hour, twelve five-minute readings), for the console's chart, `ebb metrics export` and
//! replays of what a policy would have done.

use super::{Result, Store};
use crate::fleet::Sample;
use chrono::{DateTime, Duration, DurationRound, Timelike, Utc};
use futures_util::TryStreamExt as _;
use std::collections::{BTreeMap, HashMap};

/// Readings in an hour's row: one every five minutes.
const SLOTS: usize = 12;

/// Rows one statement writes.
const ROWS_PER_STATEMENT: usize = 10_000;

/// The hour `t` belongs to, and its five-minute slot in it.
fn slot_of(t: DateTime<Utc>) -> (DateTime<Utc>, usize) {
    let hour = t.duration_trunc(Duration::hours(1)).unwrap_or(t);
    (hour, (t.minute() / 5) as usize)
}

/// The rows `readings` (by instance) make: by instance and hour, each slot's reading (the
/// latest, if two fall in one slot).
fn rows_of<'a>(
    readings: &[(&'a str, &[Sample])],
) -> BTreeMap<(&'a str, DateTime<Utc>), [Option<f32>; SLOTS]> {
    let mut rows: BTreeMap<(&str, DateTime<Utc>), [Option<f32>; SLOTS]> = BTreeMap::new();
    for (id, samples) in readings {
        for s in *samples {
            let (hour, slot) = slot_of(s.at);
            rows.entry((id, hour)).or_default()[slot] = Some(s.percent as f32);
        }
    }
    rows
}

impl Store {
    /// Keeps GPU `readings`, by instance (those a tick read); a reading already kept for the
    /// same five minutes is replaced, the others of its hour are kept. Returns how many hours
    /// of one instance were written.
    pub async fn record_gpu_readings(&self, readings: &[(&str, &[Sample])]) -> Result<usize> {
        let rows = rows_of(readings);
        let rows: Vec<_> = rows.into_iter().collect();
        for chunk in rows.chunks(ROWS_PER_STATEMENT) {
            let ids: Vec<&str> = chunk.iter().map(|((id, _), _)| *id).collect();
            let hours: Vec<DateTime<Utc>> = chunk.iter().map(|((_, h), _)| *h).collect();
            // One array a slot, which UNNEST reads once, in step. A flat array sliced twelve at
            // a time made Postgres scan it from its start for every row (an array with NULLs
            // has no fixed offsets): 2-3 s a statement, about ten times as long as now.
            let slots: [Vec<Option<f32>>; SLOTS] =
                std::array::from_fn(|k| chunk.iter().map(|(_, s)| s[k]).collect());
            let mut insert = sqlx::query(
                "INSERT INTO gpu_readings (instance, hour, percent)
                 SELECT r.instance, r.hour, ARRAY[r.s1, r.s2, r.s3, r.s4, r.s5, r.s6, r.s7, r.s8,
                                                  r.s9, r.s10, r.s11, r.s12]
                 FROM UNNEST($1::text[], $2::timestamptz[], $3::real[], $4::real[], $5::real[],
                             $6::real[], $7::real[], $8::real[], $9::real[], $10::real[],
                             $11::real[], $12::real[], $13::real[], $14::real[])
                      AS r(instance, hour, s1, s2, s3, s4, s5, s6, s7, s8, s9, s10, s11, s12)
                 ON CONFLICT (instance, hour) DO UPDATE SET percent = ARRAY[
                     coalesce(excluded.percent[1], gpu_readings.percent[1]),
                     coalesce(excluded.percent[2], gpu_readings.percent[2]),
                     coalesce(excluded.percent[3], gpu_readings.percent[3]),
                     coalesce(excluded.percent[4], gpu_readings.percent[4]),
                     coalesce(excluded.percent[5], gpu_readings.percent[5]),
                     coalesce(excluded.percent[6], gpu_readings.percent[6]),
                     coalesce(excluded.percent[7], gpu_readings.percent[7]),
                     coalesce(excluded.percent[8], gpu_readings.percent[8]),
                     coalesce(excluded.percent[9], gpu_readings.percent[9]),
                     coalesce(excluded.percent[10], gpu_readings.percent[10]),
                     coalesce(excluded.percent[11], gpu_readings.percent[11]),
                     coalesce(excluded.percent[12], gpu_readings.percent[12])]",
            )
            .bind(&ids)
            .bind(&hours);
            for slot in &slots {
                insert = insert.bind(slot);
            }
            insert.execute(&self.pool).await?;
        }
        Ok(rows.len())
    }

    /// The readings kept of `instance` from `from` to `to`, oldest first.
    pub async fn gpu_readings(
        &self,
        instance: &str,
        from: DateTime<Utc>,
        to: DateTime<Utc>,
    ) -> Result<Vec<Sample>> {
        let rows: Vec<(DateTime<Utc>, Vec<Option<f32>>)> = sqlx::query_as(
            "SELECT hour, percent FROM gpu_readings
             WHERE instance = $1 AND hour > $2 - interval '1 hour' AND hour < $3 ORDER BY hour",
        )
        .bind(instance)
        .bind(from)
        .bind(to)
        .fetch_all(&self.pool)
        .await?;
        Ok(rows
            .into_iter()
            .flat_map(|(hour, slots)| samples(hour, slots))
            .filter(|s| s.at >= from && s.at < to)
            .collect())
    }

    /// The readings kept of each of `instances` from `from` to `to` (both included), oldest
    /// first: what a tick already holds of their idle windows, so that it asks CloudWatch only
    /// for what is newer. Instances with none are left out.
    pub async fn gpu_readings_of(
        &self,
        instances: &[String],
        from: DateTime<Utc>,
        to: DateTime<Utc>,
    ) -> Result<HashMap<String, Vec<Sample>>> {
        let mut rows = sqlx::query_as::<_, (String, DateTime<Utc>, Vec<Option<f32>>)>(
            "SELECT instance, hour, percent FROM gpu_readings
             WHERE instance = ANY($1::text[]) AND hour > $2::timestamptz - interval '1 hour'
               AND hour <= $3::timestamptz
             ORDER BY instance, hour",
        )
        .bind(instances)
        .bind(from)
        .bind(to)
        .fetch(&self.pool);
        let mut kept: HashMap<String, Vec<Sample>> = HashMap::new();
        while let Some((instance, hour, slots)) = rows.try_next().await? {
            let within = samples(hour, slots).filter(|s| s.at >= from && s.at <= to);
            match kept.get_mut(&instance) {
                Some(found) => found.extend(within),
                None => {
                    let found: Vec<Sample> = within.collect();
                    if !found.is_empty() {
                        kept.insert(instance, found);
                    }
                }
            }
        }
        Ok(kept)
    }

    /// Every reading kept since `since`, by instance and time, to `each`: what `ebb metrics
    /// export` writes. Streams, so a month of a large fleet is never in memory at once.
    pub async fn each_gpu_reading(
        &self,
        since: DateTime<Utc>,
        mut each: impl FnMut(&str, Sample),
    ) -> Result<u64> {
        let mut rows = sqlx::query_as::<_, (String, DateTime<Utc>, Vec<Option<f32>>)>(
            "SELECT instance, hour, percent FROM gpu_readings
             WHERE hour > $1 - interval '1 hour' ORDER BY instance, hour",
        )
        .bind(since)
        .fetch(&self.pool);
        let mut written = 0;
        while let Some((instance, hour, slots)) = rows.try_next().await? {
            for s in samples(hour, slots).filter(|s| s.at >= since) {
                each(&instance, s);
                written += 1;
            }
        }
        Ok(written)
    }
}

/// The readings of an hour's row.
fn samples(hour: DateTime<Utc>, slots: Vec<Option<f32>>) -> impl Iterator<Item = Sample> {
    slots.into_iter().enumerate().filter_map(move |(k, p)| {
        p.map(|p| Sample::new(hour + Duration::minutes(5 * k as i64), f64::from(p)))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn readings_fall_in_their_hour_and_five_minute_slot() {
        let t = |s: &str| s.parse::<DateTime<Utc>>().unwrap();
        assert_eq!(
            slot_of(t("2026-11-30T10:00:00Z")),
            (t("2026-11-30T10:00:00Z"), 0)
        );
        assert_eq!(
            slot_of(t("2026-11-30T10:59:59Z")),
            (t("2026-11-30T10:00:00Z"), 11)
        );
        assert_eq!(slot_of(t("2026-11-30T10:07:00Z")).1, 1);
        let back: Vec<Sample> = samples(t("2026-11-30T10:00:00Z"), {
            let mut v = vec![None; 12];
            v[3] = Some(42.0);
            v
        })
        .collect();
        assert_eq!(back[0].at, t("2026-11-30T10:15:00Z"));
        assert_eq!(back[0].percent, 42.0);
    }
}
