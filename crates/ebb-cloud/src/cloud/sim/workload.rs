//! Recorded-looking GPU utilisation for tests and benchmarks: the demand of the simulated
//! fleet's usage patterns (notebooks and forgotten boxes in their offices' zones, training
//! runs, busy and idle boxes) written as the CSV `ebb replay --utilisation` reads.

use super::behaviour::seed;
use super::gpus::{reading, shape_of, Shape};
use super::{Behaviour, READING_PERIOD};
use crate::fleet::{Fleet, Instance};
use chrono::{DateTime, Duration, Utc};
use std::collections::HashMap;
use std::io::{self, Write};

/// An instance with a behaviour, its noise seed and its GPUs.
type Simulated<'a> = (&'a Instance, &'a Behaviour, u64, Shape);

/// The order of a written recording's rows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RowOrder {
    /// Instance by instance, as `ebb metrics export` writes them.
    ByInstance,
    /// Time by time, every instance's reading of a time together, as Prometheus or DCGM dumps
    /// are.
    ByTime,
}

/// Writes `instance,time,gpu_util,gpu_mem_mib,gpus_busy` rows (header first; the memory and
/// busy GPUs as [`super::gpus`] simulates them for the instance's type) for every instance of
/// `fleet` with a behaviour, one reading every 5 minutes from `from` (rounded up to a reading)
/// until `to`, in `order`: the demand its pattern makes whatever its state, which is what a
/// replay asks of a recording. Instances without GPU metrics (`usage: none`) have no rows.
/// Returns how many rows it wrote.
pub fn write_utilisation_in(
    order: RowOrder,
    fleet: &Fleet,
    behaviours: &HashMap<String, Behaviour>,
    (from, to): (DateTime<Utc>, DateTime<Utc>),
    out: &mut impl Write,
) -> io::Result<u64> {
    let first = -(-from.timestamp()).div_euclid(READING_PERIOD) * READING_PERIOD;
    // The times, formatted once for every instance.
    let times: Vec<(DateTime<Utc>, String)> = (0..)
        .map(|i| DateTime::<Utc>::UNIX_EPOCH + Duration::seconds(first + i * READING_PERIOD))
        .take_while(|t| *t < to)
        .map(|t| (t, t.format("%Y-%m-%dT%H:%M:%SZ").to_string()))
        .collect();
    let simulated: Vec<Simulated> = fleet
        .instances
        .iter()
        .filter_map(|inst| {
            let behaviour = behaviours.get(&inst.id)?;
            Some((
                inst,
                behaviour,
                seed(&inst.id),
                shape_of(&inst.instance_type),
            ))
        })
        .collect();
    writeln!(out, "instance,time,gpu_util,gpu_mem_mib,gpus_busy")?;
    let mut rows = 0;
    let mut write = |&(inst, behaviour, noise, shape): &Simulated,
                     (at, text): &(DateTime<Utc>, String)| {
        match reading(behaviour, noise, *at, shape) {
            Some(s) => {
                let (memory, busy) = (s.memory_mib.unwrap_or(0), s.gpus_busy.unwrap_or(0));
                rows += 1;
                writeln!(out, "{},{text},{:.1},{memory},{busy}", inst.id, s.percent)
            }
            None => Ok(()),
        }
    };
    match order {
        RowOrder::ByInstance => {
            for one in &simulated {
                for time in &times {
                    write(one, time)?;
                }
            }
        }
        RowOrder::ByTime => {
            for time in &times {
                for one in &simulated {
                    write(one, time)?;
                }
            }
        }
    }
    Ok(rows)
}

/// [`write_utilisation_in`] instance by instance.
pub fn write_utilisation(
    fleet: &Fleet,
    behaviours: &HashMap<String, Behaviour>,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
    out: &mut impl Write,
) -> io::Result<u64> {
    write_utilisation_in(RowOrder::ByInstance, fleet, behaviours, (from, to), out)
}

#[cfg(test)]
mod tests {
    use super::super::Usage;
    use super::*;
    use crate::fleet::{Billing, Instance, InstanceState, Lifecycle};

    fn instance(id: &str) -> Instance {
        Instance {
            id: id.into(),
            region: "eu-central-1".into(),
            instance_type: "g5.xlarge".into(),
            state: InstanceState::Stopped,
            state_since: None,
            lifecycle: Lifecycle::OnDemand,
            launched_at: None,
            tags: Default::default(),
            gpus: None,
            gpu_util: Vec::new(),
            via_role: None,
            billing: Billing::ec2(true),
            private_ip: None,
        }
    }

    #[test]
    fn a_berlin_notebook_works_in_berlin_hours_and_a_box_without_metrics_writes_nothing() {
        let fleet = Fleet {
            instances: vec![instance("i-notebook"), instance("i-dark")],
            ..Fleet::default()
        };
        let behaviours = HashMap::from([
            (
                "i-notebook".to_string(),
                Behaviour {
                    usage: Usage::Notebook,
                    timezone: Some(chrono_tz::Europe::Berlin),
                    ..Behaviour::default()
                },
            ),
            ("i-dark".to_string(), Behaviour::default()),
        ]);
        let at = |s: &str| ebb_core::when::parse_time(s).unwrap();
        let mut csv = Vec::new();
        // Monday: 288 readings, stopped or not.
        let rows = write_utilisation(
            &fleet,
            &behaviours,
            at("2026-11-30T00:00:01Z"),
            at("2026-12-01T00:05:00Z"),
            &mut csv,
        )
        .unwrap();
        assert_eq!(rows, 288);
        let text = String::from_utf8(csv).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], "instance,time,gpu_util,gpu_mem_mib,gpus_busy");
        assert_eq!(
            lines[1].split(',').nth(1),
            Some("2026-11-30T00:05:00Z"),
            "rounded up"
        );
        let busy_at = |hour: &str| {
            lines[1..]
                .iter()
                .filter(|l| l.contains(&format!("T{hour}:")))
                .any(|l| l.split(',').nth(2).unwrap().parse::<f64>().unwrap() >= 5.0)
        };
        // 09:00-12:30 and 13:00-18:30 in Berlin are 08:00-11:30 and 12:00-17:30 UTC.
        assert!(busy_at("08") && busy_at("16"));
        assert!(!busy_at("07") && !busy_at("18") && !busy_at("03"));
    }
}
