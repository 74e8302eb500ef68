//! GPU utilisation history: the readings ticks take, kept compactly (one row per instance and
//! hour, twelve five-minute readings), for the console's chart, `ebb metrics export` and
//! replays of what a policy would have done.

use super::{Result, Store};
use crate::fleet::Sample;
use chrono::{DateTime, Duration, DurationRound, Timelike, Utc};
use futures_util::TryStreamExt as _;
use std::collections::{BTreeMap, HashMap};
use std::sync::LazyLock;

/// Readings in an hour's row: one every five minutes.
const SLOTS: usize = 12;

/// Rows one statement writes.
const ROWS_PER_STATEMENT: usize = 10_000;

/// The hour `t` belongs to, and its five-minute slot in it.
fn slot_of(t: DateTime<Utc>) -> (DateTime<Utc>, usize) {
    let hour = t.duration_trunc(Duration::hours(1)).unwrap_or(t);
    (hour, (t.minute() / 5) as usize)
}

/// An hour's row: each slot's utilisation, memory and busy GPUs.
#[derive(Debug, Default)]
struct Row {
    percent: [Option<f32>; SLOTS],
    memory_mib: [Option<i32>; SLOTS],
    gpus_busy: [Option<i16>; SLOTS],
}

/// The rows `readings` (by instance) make: by instance and hour, each slot's reading (the
/// latest, if two fall in one slot).
fn rows_of<'a>(readings: &[(&'a str, &[Sample])]) -> BTreeMap<(&'a str, DateTime<Utc>), Row> {
    let mut rows: BTreeMap<(&str, DateTime<Utc>), Row> = BTreeMap::new();
    for (id, samples) in readings {
        for s in *samples {
            let (hour, slot) = slot_of(s.at);
            let row = rows.entry((id, hour)).or_default();
            row.percent[slot] = Some(s.percent as f32);
            row.memory_mib[slot] = s.memory_mib.map(|m| i32::try_from(m).unwrap_or(i32::MAX));
            row.gpus_busy[slot] = s.gpus_busy.map(|b| i16::try_from(b).unwrap_or(i16::MAX));
        }
    }
    rows
}

/// `readings` cut into runs of instances whose rows make about one statement: the rows of one
/// run are built, written and dropped before the next, so that a first tick's readings of a
/// large fleet (two hours of 100,000 instances) are never all held as rows at once.
fn statements<'r, 'a>(
    readings: &'r [(&'a str, &'r [Sample])],
) -> impl Iterator<Item = &'r [(&'a str, &'r [Sample])]> {
    let mut rest = readings;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        let (mut end, mut rows) = (0, 0);
        while end < rest.len() && (end == 0 || rows + hours_of(rest[end].1) <= ROWS_PER_STATEMENT) {
            rows += hours_of(rest[end].1);
            end += 1;
        }
        let (run, after) = rest.split_at(end);
        rest = after;
        Some(run)
    })
}

/// The rows `samples` (oldest first) make: the hours they fall in.
fn hours_of(samples: &[Sample]) -> usize {
    let mut hours = samples.iter().map(|s| slot_of(s.at).0);
    let Some(mut last) = hours.next() else {
        return 0;
    };
    1 + hours
        .filter(|&hour| std::mem::replace(&mut last, hour) != hour)
        .count()
}

/// The statement that keeps rows: from one array per column and slot, which UNNEST reads
/// once, in step. A flat array sliced twelve at a time made Postgres scan it from its start for
/// every row (an array with NULLs has no fixed offsets): 2-3 s a statement, about ten times as
/// long as now. A slot read again replaces the kept one, its memory and count with it; a row
/// without memory (or counts) keeps NULL rather than twelve NULLs.
static INSERT: LazyLock<String> = LazyLock::new(|| {
    let slots =
        |prefix: &str| -> Vec<String> { (1..=SLOTS).map(|k| format!("r.{prefix}{k}")).collect() };
    let (p, m, b) = (slots("p"), slots("m"), slots("b"));
    let names: Vec<String> = [&p, &m, &b]
        .iter()
        .flat_map(|v| v.iter().map(|s| s.trim_start_matches("r.").to_string()))
        .collect();
    let types: Vec<String> = (0..SLOTS)
        .map(|k| format!("${}::real[]", k + 3))
        .chain((0..SLOTS).map(|k| format!("${}::integer[]", k + 3 + SLOTS)))
        .chain((0..SLOTS).map(|k| format!("${}::smallint[]", k + 3 + 2 * SLOTS)))
        .collect();
    let kept = |column: &str| -> String {
        let each: Vec<String> = (1..=SLOTS)
            .map(|k| {
                format!(
                    "CASE WHEN excluded.percent[{k}] IS NULL THEN gpu_readings.{column}[{k}] ELSE excluded.{column}[{k}] END"
                )
            })
            .collect();
        format!(
            "{column} = CASE WHEN excluded.{column} IS NULL AND gpu_readings.{column} IS NULL THEN NULL ELSE ARRAY[{}] END",
            each.join(", ")
        )
    };
    let percent: Vec<String> = (1..=SLOTS)
        .map(|k| format!("coalesce(excluded.percent[{k}], gpu_readings.percent[{k}])"))
        .collect();
    let has = 3 + 3 * SLOTS;
    format!(
        "INSERT INTO gpu_readings (instance, hour, percent, memory_mib, gpus_busy)
         SELECT r.instance, r.hour, ARRAY[{}],
                CASE WHEN r.has_memory THEN ARRAY[{}] END,
                CASE WHEN r.has_busy THEN ARRAY[{}] END
         FROM UNNEST($1::text[], $2::timestamptz[], {}, ${has}::boolean[], ${}::boolean[])
              AS r(instance, hour, {}, has_memory, has_busy)
         ON CONFLICT (instance, hour) DO UPDATE SET percent = ARRAY[{}], {}, {}",
        p.join(", "),
        m.join(", "),
        b.join(", "),
        types.join(", "),
        has + 1,
        names.join(", "),
        percent.join(", "),
        kept("memory_mib"),
        kept("gpus_busy"),
    )
});

/// The columns of a kept row: its hour, and the twelve slots of each reading.
type Kept = (
    DateTime<Utc>,
    Vec<Option<f32>>,
    Option<Vec<Option<i32>>>,
    Option<Vec<Option<i16>>>,
);

impl Store {
    /// Keeps GPU `readings`, by instance (those a tick read); a reading already kept for the
    /// same five minutes is replaced, the others of its hour are kept. Returns how many hours
    /// of one instance were written.
    pub async fn record_gpu_readings(&self, readings: &[(&str, &[Sample])]) -> Result<usize> {
        let mut written = 0;
        for instances in statements(readings) {
            let rows: Vec<_> = rows_of(instances).into_iter().collect();
            self.write_rows(&rows).await?;
            written += rows.len();
        }
        Ok(written)
    }

    /// Writes `rows`, [`ROWS_PER_STATEMENT`] a statement.
    async fn write_rows(&self, rows: &[((&str, DateTime<Utc>), Row)]) -> Result<()> {
        for chunk in rows.chunks(ROWS_PER_STATEMENT) {
            let ids: Vec<&str> = chunk.iter().map(|((id, _), _)| *id).collect();
            let hours: Vec<DateTime<Utc>> = chunk.iter().map(|((_, h), _)| *h).collect();
            let percent: [Vec<Option<f32>>; SLOTS] =
                std::array::from_fn(|k| chunk.iter().map(|(_, r)| r.percent[k]).collect());
            let memory: [Vec<Option<i32>>; SLOTS] =
                std::array::from_fn(|k| chunk.iter().map(|(_, r)| r.memory_mib[k]).collect());
            let busy: [Vec<Option<i16>>; SLOTS] =
                std::array::from_fn(|k| chunk.iter().map(|(_, r)| r.gpus_busy[k]).collect());
            let has_memory: Vec<bool> = chunk
                .iter()
                .map(|(_, r)| r.memory_mib.iter().any(Option::is_some))
                .collect();
            let has_busy: Vec<bool> = chunk
                .iter()
                .map(|(_, r)| r.gpus_busy.iter().any(Option::is_some))
                .collect();
            let mut insert = sqlx::query(INSERT.as_str()).bind(&ids).bind(&hours);
            for slot in &percent {
                insert = insert.bind(slot);
            }
            for slot in &memory {
                insert = insert.bind(slot);
            }
            for slot in &busy {
                insert = insert.bind(slot);
            }
            insert
                .bind(&has_memory)
                .bind(&has_busy)
                .execute(&self.pool)
                .await?;
        }
        Ok(())
    }

    /// The readings kept of `instance` from `from` to `to`, oldest first.
    pub async fn gpu_readings(
        &self,
        instance: &str,
        from: DateTime<Utc>,
        to: DateTime<Utc>,
    ) -> Result<Vec<Sample>> {
        let rows: Vec<Kept> = sqlx::query_as(
            "SELECT hour, percent, memory_mib, gpus_busy FROM gpu_readings
             WHERE instance = $1 AND hour > $2 - interval '1 hour' AND hour < $3 ORDER BY hour",
        )
        .bind(instance)
        .bind(from)
        .bind(to)
        .fetch_all(&self.pool)
        .await?;
        Ok(rows
            .into_iter()
            .flat_map(samples)
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
        let mut rows = sqlx::query_as::<
            _,
            (
                String,
                DateTime<Utc>,
                Vec<Option<f32>>,
                Option<Vec<Option<i32>>>,
                Option<Vec<Option<i16>>>,
            ),
        >(
            "SELECT instance, hour, percent, memory_mib, gpus_busy FROM gpu_readings
             WHERE instance = ANY($1::text[]) AND hour > $2::timestamptz - interval '1 hour'
               AND hour <= $3::timestamptz
             ORDER BY instance, hour",
        )
        .bind(instances)
        .bind(from)
        .bind(to)
        .fetch(&self.pool);
        let mut kept: HashMap<String, Vec<Sample>> = HashMap::new();
        while let Some((instance, hour, percent, memory, busy)) = rows.try_next().await? {
            let within =
                samples((hour, percent, memory, busy)).filter(|s| s.at >= from && s.at <= to);
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

    /// The instances with readings kept since `since`, in order: what `ebb metrics export`
    /// reads a chunk at a time.
    pub async fn instances_with_readings(&self, since: DateTime<Utc>) -> Result<Vec<String>> {
        Ok(sqlx::query_scalar(
            "SELECT DISTINCT instance FROM gpu_readings
             WHERE hour > $1 - interval '1 hour' ORDER BY instance",
        )
        .bind(since)
        .fetch_all(&self.pool)
        .await?)
    }
}

/// The readings of an hour's row.
fn samples((hour, percent, memory, busy): Kept) -> impl Iterator<Item = Sample> {
    percent.into_iter().enumerate().filter_map(move |(k, p)| {
        let memory = memory.as_ref().and_then(|m| m.get(k).copied().flatten());
        let busy = busy.as_ref().and_then(|b| b.get(k).copied().flatten());
        Some(Sample {
            at: hour + Duration::minutes(5 * k as i64),
            percent: f64::from(p?),
            memory_mib: memory.and_then(|m| u32::try_from(m).ok()),
            gpus_busy: busy.and_then(|b| u16::try_from(b).ok()),
        })
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
        let mut percent = vec![None; 12];
        percent[3] = Some(42.0);
        percent[4] = Some(1.0);
        let mut memory = vec![None; 12];
        memory[3] = Some(12_288);
        let back: Vec<Sample> =
            samples((t("2026-11-30T10:00:00Z"), percent, Some(memory), None)).collect();
        assert_eq!(back[0].at, t("2026-11-30T10:15:00Z"));
        assert_eq!(back[0].percent, 42.0);
        assert_eq!(
            (back[0].memory_mib, back[0].gpus_busy),
            (Some(12_288), None)
        );
        assert_eq!((back[1].memory_mib, back[1].gpus_busy), (None, None));
    }

    #[test]
    fn readings_are_written_a_statement_of_rows_at_a_time_each_instance_once() {
        let t = |s: &str| s.parse::<DateTime<Utc>>().unwrap();
        // Two hours of readings: 10:55 and 11:00 are two rows.
        let two_hours = [
            Sample::new(t("2026-11-30T10:55:00Z"), 1.0),
            Sample::new(t("2026-11-30T11:00:00Z"), 2.0),
        ];
        assert_eq!(hours_of(&two_hours), 2);
        assert_eq!(hours_of(&two_hours[..1]), 1);
        assert_eq!(hours_of(&[]), 0);
        let ids: Vec<String> = (0..6_001).map(|n| format!("i-{n}")).collect();
        let readings: Vec<(&str, &[Sample])> =
            ids.iter().map(|id| (id.as_str(), &two_hours[..])).collect();
        let runs: Vec<usize> = statements(&readings).map(<[_]>::len).collect();
        assert_eq!(
            runs,
            [5_000, 1_001],
            "at most {ROWS_PER_STATEMENT} rows a run"
        );
    }
}
