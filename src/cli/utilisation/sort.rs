//! Utilisation files whose rows are not grouped by instance (time-ordered, as Prometheus or
//! DCGM dumps are): a quick pass tells whether the rows are grouped, and if they are not, an
//! external sort groups them, so that a month of a large fleet is never in memory at once.
//!
//! The sort reads the file once, keeps up to [`RUN_ROWS`] samples at a time, sorts them by
//! instance and writes them to an unnamed temporary file (a run, about 32 bytes a sample); the
//! runs are then merged, an instance at a time, in instance id order. A file small enough for
//! one run is sorted in memory and writes nothing.

use super::{open, RowReader, ACTIVITY_PREFIX, REQUIRED};
use crate::fleet::{Instance, Sample};
use crate::replay::Recording;
use anyhow::{bail, Context as _, Result};
use chrono::DateTime;
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, HashSet};
use std::fs::File;
use std::io::{BufRead, BufReader, BufWriter, ErrorKind, Read, Seek, SeekFrom, Write};
use std::path::Path;

/// Samples sorted in memory at once: about 80 MB of them.
const RUN_ROWS: usize = 2_000_000;

/// Why a run could not be written.
const SPILL_FAILED: &str =
    "cannot write the utilisation file's rows sorted to a temporary file: give TMPDIR a directory with room for about 32 bytes a row";

/// What the reader of each run holds in memory.
const RUN_BUFFER: usize = 256 * 1024;

/// Whether each instance's rows in the file at `path` come together (its header skipped): a
/// byte scan of the first column only, without the CSV parser or the times. A quoted first
/// column is taken as not grouped, which the sort handles.
pub(super) fn grouped(path: &Path) -> Result<bool> {
    let file = File::open(path)
        .with_context(|| format!("cannot read utilisation file {}", path.display()))?;
    let mut reader = BufReader::with_capacity(1 << 20, file);
    let mut line = Vec::new();
    // The header.
    reader.read_until(b'\n', &mut line)?;
    let mut current: Vec<u8> = Vec::new();
    let mut done: HashSet<Vec<u8>> = HashSet::new();
    loop {
        line.clear();
        if reader.read_until(b'\n', &mut line)? == 0 {
            return Ok(true);
        }
        let id = line.split(|&b| b == b',').next().unwrap_or(&[]);
        if id.first() == Some(&b'"') {
            return Ok(false);
        }
        if id != current.as_slice() {
            if done.contains(id) {
                return Ok(false);
            }
            done.insert(std::mem::replace(&mut current, id.to_vec()));
        }
    }
}

/// One sample of a run: the instance's place in id order and the sample.
type Row = (u32, Sample);

/// The bytes of a row in a run file.
const ROW_BYTES: usize = 4 + 8 + 4 + 8 + 4 + 2 + 1;

/// Writes `row` to a run.
fn write_row(out: &mut impl Write, (place, s): &Row) -> std::io::Result<()> {
    let mut bytes = [0u8; ROW_BYTES];
    bytes[0..4].copy_from_slice(&place.to_le_bytes());
    bytes[4..12].copy_from_slice(&s.at.timestamp().to_le_bytes());
    bytes[12..16].copy_from_slice(&s.at.timestamp_subsec_nanos().to_le_bytes());
    bytes[16..24].copy_from_slice(&s.percent.to_le_bytes());
    bytes[24..28].copy_from_slice(&s.memory_mib.unwrap_or(0).to_le_bytes());
    bytes[28..30].copy_from_slice(&s.gpus_busy.unwrap_or(0).to_le_bytes());
    bytes[30] = u8::from(s.memory_mib.is_some()) | u8::from(s.gpus_busy.is_some()) << 1;
    out.write_all(&bytes)
}

/// The next row of a run, `None` at its end.
fn read_row(run: &mut impl Read) -> std::io::Result<Option<Row>> {
    let mut bytes = [0u8; ROW_BYTES];
    match run.read_exact(&mut bytes) {
        Ok(()) => {}
        Err(e) if e.kind() == ErrorKind::UnexpectedEof => return Ok(None),
        Err(e) => return Err(e),
    }
    let u32_at = |k: usize| u32::from_le_bytes(bytes[k..k + 4].try_into().expect("4 bytes"));
    let secs = i64::from_le_bytes(bytes[4..12].try_into().expect("8 bytes"));
    let at = DateTime::from_timestamp(secs, u32_at(12))
        .ok_or_else(|| std::io::Error::new(ErrorKind::InvalidData, "a run holds a bad time"))?;
    let flags = bytes[30];
    Ok(Some((
        u32_at(0),
        Sample {
            at,
            percent: f64::from_le_bytes(bytes[16..24].try_into().expect("8 bytes")),
            memory_mib: (flags & 1 != 0).then(|| u32_at(24)),
            gpus_busy: (flags & 2 != 0)
                .then(|| u16::from_le_bytes(bytes[28..30].try_into().expect("2 bytes"))),
        },
    )))
}

/// Reads the CSV at `path` in any row order and hands each instance's recording to `each`, by
/// instance id; the instances are those of `unseen` (of the fleet file `fleet`), and those
/// found are taken out of it.
pub(super) fn read_sorted(
    path: &Path,
    fleet: &Path,
    unseen: &mut HashMap<&str, &Instance>,
    each: impl FnMut(Recording) -> Result<()>,
) -> Result<()> {
    read_in_runs(path, fleet, unseen, RUN_ROWS, each)
}

/// [`read_sorted`] with runs of `run_rows` samples.
fn read_in_runs(
    path: &Path,
    fleet: &Path,
    unseen: &mut HashMap<&str, &Instance>,
    run_rows: usize,
    mut each: impl FnMut(Recording) -> Result<()>,
) -> Result<()> {
    let file = path.display().to_string();
    let mut instances: Vec<&Instance> = unseen.values().copied().collect();
    instances.sort_by(|a, b| a.id.cmp(&b.id));
    let places: HashMap<&str, u32> = instances
        .iter()
        .enumerate()
        .map(|(k, inst)| (inst.id.as_str(), k as u32))
        .collect();
    let (mut reader, columns) = open(path, &file)?;
    if let Some((name, _)) = columns.activity.first() {
        bail!(
            "{file}: the rows of each instance are not together, which the {ACTIVITY_PREFIX}{name} column needs: sort the file by instance (then time), as ebb metrics export writes it"
        );
    }
    let mut rows = RowReader::new(file.clone(), columns);
    let mut buffer: Vec<Row> = Vec::with_capacity(run_rows.min(1 << 16));
    let mut runs: Vec<File> = Vec::new();
    let mut record = csv::StringRecord::new();
    loop {
        let more = reader.read_record(&mut record).map_err(|e| {
            let line = e.position().map_or(0, |p| p.line());
            anyhow::anyhow!(
                "{file}:{line}: {e}; each line must have the header's columns ({})",
                REQUIRED.join(",")
            )
        })?;
        if !more {
            break;
        }
        let line = record.position().map_or(0, |p| p.line());
        let id = &record[0];
        let Some(&place) = places.get(id) else {
            bail!(
                "{file}:{line}: instance {id} is not in the fleet file {}: add it there, or leave its rows out",
                fleet.display()
            );
        };
        buffer.push((place, rows.sample(&record, line)?));
        if buffer.len() == run_rows {
            runs.push(spill(&mut buffer).context(SPILL_FAILED)?);
        }
    }
    let mut emit = |place: u32, samples: Vec<Sample>| -> Result<()> {
        let inst = instances[place as usize];
        unseen.remove(inst.id.as_str());
        each(Recording::new(inst, samples))
    };
    if runs.is_empty() {
        // Small enough to sort in memory.
        buffer.sort_unstable_by_key(|(place, _)| *place);
        let mut rest = buffer.as_slice();
        while let Some(&(place, _)) = rest.first() {
            let end = rest.partition_point(|(p, _)| *p == place);
            emit(place, rest[..end].iter().map(|(_, s)| *s).collect())?;
            rest = &rest[end..];
        }
        return Ok(());
    }
    if !buffer.is_empty() {
        runs.push(spill(&mut buffer).context(SPILL_FAILED)?);
    }
    // The merge holds an instance at a time, not a run.
    drop(buffer);
    merge(runs, &mut emit)
}

/// Sorts `buffer` by instance, writes it to a new run and empties it.
fn spill(buffer: &mut Vec<Row>) -> std::io::Result<File> {
    buffer.sort_unstable_by_key(|(place, _)| *place);
    let mut out = BufWriter::with_capacity(RUN_BUFFER, tempfile::tempfile()?);
    for row in buffer.iter() {
        write_row(&mut out, row)?;
    }
    buffer.clear();
    let mut run = out.into_inner().map_err(|e| e.into_error())?;
    run.seek(SeekFrom::Start(0))?;
    Ok(run)
}

/// Merges the sorted `runs`, handing each instance's samples to `each` in place order.
fn merge(runs: Vec<File>, each: &mut dyn FnMut(u32, Vec<Sample>) -> Result<()>) -> Result<()> {
    let failed = || "cannot read back a sorted run of the utilisation file from its temporary file";
    let mut readers: Vec<BufReader<File>> = runs
        .into_iter()
        .map(|run| BufReader::with_capacity(RUN_BUFFER, run))
        .collect();
    // The next row of each run, smallest place first.
    let mut heads: BinaryHeap<Reverse<(u32, usize)>> = BinaryHeap::new();
    let mut pending: Vec<Option<Sample>> = vec![None; readers.len()];
    for (k, reader) in readers.iter_mut().enumerate() {
        if let Some((place, s)) = read_row(reader).with_context(failed)? {
            pending[k] = Some(s);
            heads.push(Reverse((place, k)));
        }
    }
    let mut current: Option<(u32, Vec<Sample>)> = None;
    while let Some(Reverse((place, k))) = heads.pop() {
        if current.as_ref().is_some_and(|(p, _)| *p != place) {
            if let Some((p, samples)) = current.take() {
                each(p, samples)?;
            }
        }
        let samples = &mut current.get_or_insert_with(|| (place, Vec::new())).1;
        samples.extend(pending[k].take());
        // The rest of this run's rows of the instance, then its next instance's first row.
        loop {
            match read_row(&mut readers[k]).with_context(failed)? {
                Some((p, s)) if p == place => samples.push(s),
                Some((p, s)) => {
                    pending[k] = Some(s);
                    heads.push(Reverse((p, k)));
                    break;
                }
                None => break,
            }
        }
    }
    if let Some((p, samples)) = current {
        each(p, samples)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fleet::{Billing, InstanceState, Lifecycle};

    fn instance(id: &str) -> Instance {
        Instance {
            id: id.into(),
            region: "us-east-1".into(),
            instance_type: "g5.xlarge".into(),
            state: InstanceState::Running,
            state_since: None,
            lifecycle: Lifecycle::OnDemand,
            launched_at: None,
            billing: Billing::EC2,
            tags: Default::default(),
            gpus: None,
            gpu_util: Vec::new(),
            via_role: None,
            private_ip: None,
        }
    }

    /// A sample as (time, percent, memory, busy).
    type Seen = (i64, f64, Option<u32>, Option<u16>);

    /// Each instance's samples as `read_in_runs` hands them over with runs of `run_rows`, in
    /// order.
    fn read(text: &str, run_rows: usize) -> Vec<(String, Vec<Seen>)> {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("u.csv");
        std::fs::write(&path, text).unwrap();
        let fleet: Vec<Instance> = ["i-a", "i-b", "i-c", "i-none"].map(instance).into();
        let mut unseen: HashMap<&str, &Instance> =
            fleet.iter().map(|i| (i.id.as_str(), i)).collect();
        let mut got = Vec::new();
        read_in_runs(&path, Path::new("fleet.yaml"), &mut unseen, run_rows, |r| {
            let samples = r
                .samples
                .iter()
                .map(|s| (s.at.timestamp(), s.percent, s.memory_mib, s.gpus_busy))
                .collect();
            got.push((r.instance.id.clone(), samples));
            Ok(())
        })
        .unwrap();
        assert_eq!(unseen.keys().collect::<Vec<_>>(), [&"i-none"]);
        got
    }

    #[test]
    fn runs_merge_into_each_instance_s_samples_whatever_their_size() {
        let mut text = String::from("instance,time,gpu_util,gpu_mem_mib,gpus_busy\n");
        // Time-ordered, three instances, one of them missing some periods.
        for minute in 0..20 {
            for (k, id) in ["i-c", "i-a", "i-b"].iter().enumerate() {
                if *id == "i-b" && minute % 3 == 0 {
                    continue;
                }
                let memory = if k == 0 {
                    String::new()
                } else {
                    format!("{}", minute * 100)
                };
                text.push_str(&format!(
                    "{id},2026-11-30T10:{minute:02}:00Z,{}.5,{memory},{}\n",
                    minute + k,
                    k
                ));
            }
        }
        let in_memory = read(&text, usize::MAX);
        assert_eq!(
            in_memory
                .iter()
                .map(|(id, s)| (id.as_str(), s.len()))
                .collect::<Vec<_>>(),
            [("i-a", 20), ("i-b", 13), ("i-c", 20)]
        );
        let a = &in_memory[0].1;
        let at = "2026-11-30T10:03:00Z".parse::<chrono::DateTime<chrono::Utc>>();
        assert_eq!(a[3], (at.unwrap().timestamp(), 4.5, Some(300), Some(1)));
        assert!(in_memory[2]
            .1
            .iter()
            .all(|s| s.2.is_none() && s.3 == Some(0)));
        // Runs of 1, 4 and 7 rows: many temporary files, the same samples.
        for run_rows in [1, 4, 7] {
            assert_eq!(read(&text, run_rows), in_memory, "runs of {run_rows}");
        }
    }

    #[test]
    fn the_order_pass_tells_grouped_files_from_others() {
        let dir = tempfile::tempdir().unwrap();
        let check = |text: &str| {
            let path = dir.path().join("u.csv");
            std::fs::write(&path, text).unwrap();
            grouped(&path).unwrap()
        };
        let header = "instance,time,gpu_util\n";
        assert!(check(header));
        assert!(check(&format!("{header}i-a,t,1\ni-a,t,2\ni-b,t,1\n")));
        assert!(check(&format!("{header}i-a,t,1\r\ni-b,t,1\r\ni-b,t,2")));
        assert!(!check(&format!("{header}i-a,t,1\ni-b,t,1\ni-a,t,2\n")));
        // A quoted id is left to the sort, which reads it as the CSV says.
        assert!(!check(&format!("{header}\"i-a\",t,1\n")));
    }
}
