//! The utilisation CSV that `ebb metrics export` writes and `ebb replay` reads: a header, then
//! `instance,time,gpu_util` with the optional `gpu_mem_mib` and `gpus_busy` columns and an
//! `activity:NAME` column for each activity signal recorded (the latest use it had shown by the
//! row's time, RFC 3339; empty for none yet), read a row at a time into each instance's
//! [`Recording`]. A file whose rows come instance by instance (as the export writes them) is
//! streamed; any other order is sorted first ([`sort`]), which activity columns do not allow.

mod sort;

use crate::fleet::{Instance, Sample};
use crate::replay::{Recording, SignalRecording};
use anyhow::{bail, Context as _, Result};
use chrono::{DateTime, NaiveDate, NaiveTime, Utc};
use std::collections::{HashMap, HashSet};
use std::path::Path;

/// The columns every file has, in this order.
pub(super) const REQUIRED: [&str; 3] = ["instance", "time", "gpu_util"];

/// The columns a file may add after the required ones, in any order: the GPU memory used
/// (MiB, the GPU that held the most) and how many GPUs were busy.
pub(super) const OPTIONAL: [&str; 2] = ["gpu_mem_mib", "gpus_busy"];

/// How an activity signal's column is named: this, then the signal's name.
pub(super) const ACTIVITY_PREFIX: &str = "activity:";

/// Where the optional columns of a file are, by position.
#[derive(Debug, Clone, Default)]
pub(super) struct Columns {
    /// The `gpu_mem_mib` column.
    memory: Option<usize>,
    /// The `gpus_busy` column.
    busy: Option<usize>,
    /// The `activity:NAME` columns: each signal's name and position.
    pub(super) activity: Vec<(String, usize)>,
}

impl Columns {
    /// The columns of `header`: the required ones first, then optional ones, each at most once.
    pub(super) fn of(header: &csv::StringRecord, file: &str) -> Result<Columns> {
        let names: Vec<&str> = header.iter().collect();
        let wrong = || {
            anyhow::anyhow!(
                "{file}:1: the header is \"{}\"; it must be {}, optionally followed by {} and an {ACTIVITY_PREFIX}NAME column for each activity signal recorded, each at most once",
                names.join(","),
                REQUIRED.join(","),
                OPTIONAL.join(" and ")
            )
        };
        if names.len() < REQUIRED.len() || names[..REQUIRED.len()] != REQUIRED {
            return Err(wrong());
        }
        let mut columns = Columns::default();
        for (k, name) in names.iter().enumerate().skip(REQUIRED.len()) {
            if let Some(signal) = name.strip_prefix(ACTIVITY_PREFIX) {
                let known = columns.activity.iter().any(|(n, _)| n == signal);
                if signal.trim().is_empty() || known {
                    return Err(wrong());
                }
                columns.activity.push((signal.to_string(), k));
                continue;
            }
            let slot = match *name {
                "gpu_mem_mib" => &mut columns.memory,
                "gpus_busy" => &mut columns.busy,
                _ => return Err(wrong()),
            };
            if slot.replace(k).is_some() {
                return Err(wrong());
            }
        }
        Ok(columns)
    }
}

/// Reads the rows of a utilisation file into samples: the times, the percents and the optional
/// columns, with the file and line of what does not parse.
pub(super) struct RowReader {
    /// The file's name, for errors.
    file: String,
    /// Its optional columns.
    columns: Columns,
    /// Its times.
    times: TimeReader,
}

impl RowReader {
    /// A reader of the rows of `file` with these `columns`.
    pub(super) fn new(file: String, columns: Columns) -> RowReader {
        RowReader {
            file,
            columns,
            times: TimeReader::default(),
        }
    }

    /// The sample of `row`, at `line`.
    pub(super) fn sample(&mut self, row: &csv::StringRecord, line: u64) -> Result<Sample> {
        let file = &self.file;
        let (time, util) = (&row[1], &row[2]);
        let at = self.times.read(time).with_context(|| {
            format!("{file}:{line}: \"{time}\" is not an RFC 3339 time (like 2026-11-30T20:05:00Z)")
        })?;
        let percent = util
            .parse::<f64>()
            .ok()
            .filter(|p| (0.0..=100.0).contains(p))
            .with_context(|| {
                format!("{file}:{line}: gpu_util \"{util}\" is not a percent from 0 to 100")
            })?;
        let cell = |k: Option<usize>| k.map(|k| &row[k]).filter(|c| !c.is_empty());
        let memory_mib = match cell(self.columns.memory) {
            None => None,
            Some(text) => Some(
                text.parse::<f64>()
                    .ok()
                    .filter(|m| (0.0..=f64::from(u32::MAX)).contains(m))
                    .map(|m| m.round() as u32)
                    .with_context(|| {
                        format!("{file}:{line}: gpu_mem_mib \"{text}\" is not a number of MiB (0 or more; leave it empty when unknown)")
                    })?,
            ),
        };
        let gpus_busy = match cell(self.columns.busy) {
            None => None,
            Some(text) => Some(text.parse::<u16>().with_context(|| {
                format!("{file}:{line}: gpus_busy \"{text}\" is not a count of GPUs (0 or more; leave it empty when unknown)")
            })?),
        };
        Ok(Sample {
            at,
            percent,
            memory_mib,
            gpus_busy,
        })
    }

    /// The last use each activity column of `row` (at `line`, its time `at`) says, in the
    /// columns' order: a time no later than the row's, or none for an empty cell.
    pub(super) fn uses(
        &mut self,
        row: &csv::StringRecord,
        line: u64,
        at: DateTime<Utc>,
    ) -> Result<Vec<Option<DateTime<Utc>>>> {
        let file = &self.file;
        let mut uses = Vec::with_capacity(self.columns.activity.len());
        for (name, k) in &self.columns.activity {
            let text = &row[*k];
            if text.is_empty() {
                uses.push(None);
                continue;
            }
            let used = self.times.read(text).with_context(|| {
                format!("{file}:{line}: {ACTIVITY_PREFIX}{name} \"{text}\" is not an RFC 3339 time (the signal's last use by the row's time; leave it empty for none)")
            })?;
            if used > at {
                bail!(
                    "{file}:{line}: {ACTIVITY_PREFIX}{name} \"{text}\" is after the row's time: a cell holds the last use seen by then"
                );
            }
            uses.push(Some(used));
        }
        Ok(uses)
    }
}

/// Reads the CSV at `path`, handing each instance's recording to `each` once its rows end.
/// Instances found are taken out of `unseen`; each must be in the fleet file `fleet`. Rows
/// may come in any order: a file whose instances' rows are together is streamed in its order,
/// any other is sorted by instance through temporary files (a month of a large fleet is
/// never in memory at once).
pub(super) fn read_utilisation(
    path: &Path,
    fleet: &Path,
    unseen: &mut HashMap<&str, &Instance>,
    each: impl FnMut(Recording) -> Result<()>,
) -> Result<()> {
    if sort::grouped(path)? {
        read_grouped(path, fleet, unseen, each)
    } else {
        sort::read_sorted(path, fleet, unseen, each)
    }
}

/// [`read_utilisation`] of a file whose instances' rows are together, in its order.
fn read_grouped(
    path: &Path,
    fleet: &Path,
    unseen: &mut HashMap<&str, &Instance>,
    mut each: impl FnMut(Recording) -> Result<()>,
) -> Result<()> {
    let file = path.display().to_string();
    let (mut reader, columns) = open(path, &file)?;
    let signals: Vec<String> = columns.activity.iter().map(|(n, _)| n.clone()).collect();
    let mut rows = RowReader::new(file.clone(), columns);
    let mut done: HashSet<String> = HashSet::new();
    let mut current: Option<(&Instance, Vec<Sample>, Uses)> = None;
    let mut row = csv::StringRecord::new();
    loop {
        let more = reader.read_record(&mut row).map_err(|e| {
            let line = e.position().map_or(0, |p| p.line());
            anyhow::anyhow!(
                "{file}:{line}: {e}; each line must have the header's columns ({})",
                REQUIRED.join(",")
            )
        })?;
        if !more {
            break;
        }
        let line = row.position().map_or(0, |p| p.line());
        let id = &row[0];
        if current.as_ref().is_none_or(|(inst, ..)| inst.id != id) {
            if let Some((inst, samples, uses)) = current.take() {
                done.insert(inst.id.clone());
                each(recording(inst, samples, &signals, uses))?;
            }
            if done.contains(id) {
                // The order pass found them together: the file changed while it was read.
                bail!(
                    "{file}:{line}: the rows of instance {id} are not together though they were when the file was first read: is something writing the file? Replay a copy that no longer changes"
                );
            }
            let Some(inst) = unseen.remove(id) else {
                bail!(
                    "{file}:{line}: instance {id} is not in the fleet file {}: add it there, or leave its rows out",
                    fleet.display()
                );
            };
            current = Some((inst, Vec::new(), vec![Vec::new(); signals.len()]));
        }
        let sample = rows.sample(&row, line)?;
        let used = rows.uses(&row, line, sample.at)?;
        if let Some((_, samples, uses)) = current.as_mut() {
            samples.push(sample);
            for (column, last) in uses.iter_mut().zip(used) {
                column.push((sample.at, last));
            }
        }
    }
    if let Some((inst, samples, uses)) = current {
        each(recording(inst, samples, &signals, uses))?;
    }
    Ok(())
}

/// Each activity column's rows of one instance: the row's time and the last use it says.
type Uses = Vec<Vec<(DateTime<Utc>, Option<DateTime<Utc>>)>>;

/// The recording of `inst`: its `samples`, and its `uses` of each of the `signals`.
fn recording(inst: &Instance, samples: Vec<Sample>, signals: &[String], uses: Uses) -> Recording {
    let activity = signals
        .iter()
        .zip(uses)
        .map(|(name, rows)| SignalRecording::new(name, rows))
        .collect();
    Recording::new(inst, samples).with_activity(activity)
}

/// The activity signals the utilisation file at `path` records (its `activity:NAME` columns).
pub(super) fn recorded_signals(path: &Path) -> Result<Vec<String>> {
    let (_, columns) = open(path, &path.display().to_string())?;
    Ok(columns.activity.into_iter().map(|(n, _)| n).collect())
}

/// A reader of the utilisation file at `path` (named `file` in errors) past its header, and
/// the header's columns.
pub(super) fn open(path: &Path, file: &str) -> Result<(csv::Reader<std::fs::File>, Columns)> {
    let mut reader = csv::ReaderBuilder::new()
        .has_headers(true)
        .from_path(path)
        .with_context(|| format!("cannot read utilisation file {file}"))?;
    let header = reader
        .headers()
        .with_context(|| format!("{file}:1: cannot read the header"))?;
    let columns = Columns::of(header, file)?;
    Ok((reader, columns))
}

/// Reads the times of the CSV: the form `ebb metrics export` and the workload generator write
/// (`2026-11-30T20:05:00Z`) directly, its date worked out once for all the rows of a day; any
/// other by chrono's RFC 3339 parser. A recording holds millions of times, and this is most of
/// the time it takes to read.
#[derive(Default)]
struct TimeReader {
    /// The last date read in the direct form, as written and as a date.
    day: Option<([u8; 10], NaiveDate)>,
}

impl TimeReader {
    /// `text` as a time, if it is an RFC 3339 time.
    fn read(&mut self, text: &str) -> Option<DateTime<Utc>> {
        self.direct(text.as_bytes()).or_else(|| {
            DateTime::parse_from_rfc3339(text)
                .ok()
                .map(|t| t.with_timezone(&Utc))
        })
    }

    /// `YYYY-MM-DDTHH:MM:SSZ` with a valid date and time (no leap second); `None` for
    /// anything else, which chrono then reads or refuses.
    fn direct(&mut self, text: &[u8]) -> Option<DateTime<Utc>> {
        let [date @ .., b'T', h1, h2, b':', m1, m2, b':', s1, s2, b'Z'] = text else {
            return None;
        };
        let date: &[u8; 10] = date.try_into().ok()?;
        let day = match self.day {
            Some((written, day)) if written == *date => day,
            _ => {
                let [y1, y2, y3, y4, b'-', mo1, mo2, b'-', d1, d2] = *date else {
                    return None;
                };
                let day = NaiveDate::from_ymd_opt(
                    i32::try_from(digits(&[y1, y2, y3, y4])?).ok()?,
                    digits(&[mo1, mo2])?,
                    digits(&[d1, d2])?,
                )?;
                self.day = Some((*date, day));
                day
            }
        };
        let time = NaiveTime::from_hms_opt(
            digits(&[*h1, *h2])?,
            digits(&[*m1, *m2])?,
            digits(&[*s1, *s2])?,
        )?;
        Some(day.and_time(time).and_utc())
    }
}

/// The number ASCII digits `text` write, if they are all digits.
fn digits(text: &[u8]) -> Option<u32> {
    text.iter().try_fold(0, |n, &c| {
        c.is_ascii_digit().then(|| n * 10 + u32::from(c - b'0'))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_read_directly_are_the_ones_chrono_reads() {
        let mut reader = TimeReader::default();
        for text in [
            "2026-11-30T20:05:00Z",
            "2026-11-30T23:59:59Z",
            "2026-12-01T00:00:00Z",
            "2024-02-29T12:00:00Z",
            "1999-01-01T00:00:00Z",
        ] {
            let chrono = DateTime::parse_from_rfc3339(text)
                .unwrap()
                .with_timezone(&Utc);
            assert_eq!(reader.direct(text.as_bytes()), Some(chrono), "{text}");
            assert_eq!(reader.read(text), Some(chrono), "{text}");
        }
        // Other forms go to chrono, which reads them or refuses them.
        for text in [
            "2026-11-30T21:05:00+01:00",
            "2026-11-30T20:05:00.5Z",
            "2026-11-30t20:05:00z",
            "2026-11-30T23:59:60Z",
        ] {
            assert_eq!(reader.direct(text.as_bytes()), None, "{text}");
            let chrono = DateTime::parse_from_rfc3339(text)
                .ok()
                .map(|t| t.with_timezone(&Utc));
            assert_eq!(reader.read(text), chrono, "{text}");
        }
        for text in [
            "2026-02-30T20:05:00Z",
            "2026-11-30T24:00:00Z",
            "2026-11-30T20:60:00Z",
            "2026-1a-30T20:05:00Z",
            "+026-11-30T20:05:00Z",
            "monday",
            "",
        ] {
            assert_eq!(reader.read(text), None, "{text}");
        }
    }

    fn record(cells: &[&str]) -> csv::StringRecord {
        csv::StringRecord::from(cells.to_vec())
    }

    #[test]
    fn the_optional_columns_are_read_by_name_and_empty_cells_are_none() {
        let columns = Columns::of(
            &record(&["instance", "time", "gpu_util", "gpus_busy", "gpu_mem_mib"]),
            "u.csv",
        )
        .unwrap();
        let mut rows = RowReader::new("u.csv".into(), columns);
        let s = rows
            .sample(
                &record(&["i-1", "2026-11-30T20:05:00Z", "30", "1", "12288.4"]),
                2,
            )
            .unwrap();
        assert_eq!(
            (s.percent, s.memory_mib, s.gpus_busy),
            (30.0, Some(12288), Some(1))
        );
        let s = rows
            .sample(&record(&["i-1", "2026-11-30T20:10:00Z", "0", "", ""]), 3)
            .unwrap();
        assert_eq!((s.memory_mib, s.gpus_busy), (None, None));
        let err = rows
            .sample(&record(&["i-1", "2026-11-30T20:10:00Z", "0", "1.5", ""]), 4)
            .unwrap_err();
        assert!(
            err.to_string().starts_with("u.csv:4: gpus_busy \"1.5\""),
            "{err}"
        );
        let err = rows
            .sample(&record(&["i-1", "2026-11-30T20:10:00Z", "0", "", "-3"]), 5)
            .unwrap_err();
        assert!(
            err.to_string().starts_with("u.csv:5: gpu_mem_mib \"-3\""),
            "{err}"
        );
        // The three columns alone: no memory, no count.
        let mut plain = RowReader::new(
            "p.csv".into(),
            Columns::of(&record(&REQUIRED), "p.csv").unwrap(),
        );
        let s = plain
            .sample(&record(&["i-1", "2026-11-30T20:05:00Z", "30"]), 2)
            .unwrap();
        assert_eq!((s.memory_mib, s.gpus_busy), (None, None));
        for wrong in [
            &["instance", "gpu_util", "time"][..],
            &["instance", "time", "gpu_util", "gpu_mem_mib", "gpu_mem_mib"],
            &["instance", "time", "gpu_util", "gpu_temp"],
        ] {
            let err = Columns::of(&record(wrong), "w.csv").unwrap_err();
            assert!(
                err.to_string()
                    .contains("optionally followed by gpu_mem_mib and gpus_busy"),
                "{err}"
            );
        }
    }
}
