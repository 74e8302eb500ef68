//! The simulated GPU readings beside utilisation: the memory the fullest GPU holds and how many
//! GPUs are busy, from an instance's usage pattern and the GPUs of its type, so that the demo
//! and the generated recordings carry the signals the CloudWatch agent and DCGM give.
//!
//! Work loads a model: a notebook holds a quarter to a half of one GPU's memory from its
//! first burst of the day, and some kernels are left running after work (the memory stays,
//! the utilisation does not); training and busy boxes fill every GPU; idle boxes hold nothing.

use super::behaviour::{unit, Behaviour, Usage};
use crate::fleet::{Sample, GPU_BUSY_PERCENT};
use chrono::{DateTime, Datelike, Utc};

/// The GPUs of a simulated type: how many, and the memory of each, MiB.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shape {
    /// How many GPUs.
    pub count: u16,
    /// Memory per GPU, MiB.
    pub memory_mib: u32,
}

/// The GPUs of `instance_type` for the simulation: the GPU families of the demo fleet by size,
/// one GPU of 24 GiB for any other type.
pub fn shape_of(instance_type: &str) -> Shape {
    let (family, size) = instance_type.split_once('.').unwrap_or((instance_type, ""));
    let gib = match family {
        "g4dn" | "p3" => 16,
        "g5" | "g6" | "g5g" | "g6f" => 24,
        "g6e" => 48,
        "p4d" => 40,
        "p4de" | "p5" | "p5e" => 80,
        _ => 24,
    };
    let count = match (family, size) {
        (_, "48xlarge" | "metal") | ("p3", "16xlarge") | ("p4d" | "p4de", "24xlarge") => 8,
        (_, "12xlarge" | "24xlarge") | ("p3", "8xlarge") => 4,
        _ => 1,
    };
    Shape {
        count,
        memory_mib: gib * 1024,
    }
}

/// The reading at `at` of a running instance with `behaviour`, noise `seed` and GPUs `shape`;
/// `None` when it reports no metrics.
pub fn reading(
    behaviour: &Behaviour,
    seed: u64,
    at: DateTime<Utc>,
    shape: Shape,
) -> Option<Sample> {
    let percent = behaviour.percent(seed, at)?;
    let full = |share: f64| (f64::from(shape.memory_mib) * share).round() as u32;
    let busy = u16::from(percent >= GPU_BUSY_PERCENT);
    // The day's model: a quarter to a half of a GPU, the same all day.
    let day = at.date_naive().num_days_from_ce() as u64;
    let model = full(0.25 + 0.25 * unit(seed ^ 0x0005_eed0_fa11, day));
    // Half of the notebooks' kernels stay up after work, holding their model.
    let kept_after_work = unit(seed ^ 0x6b65_726e_656c, day) < 0.5;
    let (memory_mib, gpus_busy) = match behaviour.usage {
        Usage::None => return None,
        Usage::Idle => (0, 0),
        Usage::Busy => (full(0.85), shape.count),
        Usage::Training if percent >= GPU_BUSY_PERCENT => (full(0.9), shape.count),
        Usage::Training => (0, 0),
        Usage::Notebook | Usage::Forgotten if busy == 1 || kept_after_work => (model, busy),
        Usage::Notebook | Usage::Forgotten => (0, 0),
    };
    Some(Sample {
        at,
        percent,
        memory_mib: Some(memory_mib),
        gpus_busy: Some(gpus_busy),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_demo_types_have_their_gpus() {
        assert_eq!(
            shape_of("g5.xlarge"),
            Shape {
                count: 1,
                memory_mib: 24_576
            }
        );
        assert_eq!(shape_of("g5.12xlarge").count, 4);
        assert_eq!(shape_of("g5.48xlarge").count, 8);
        assert_eq!(
            shape_of("p4d.24xlarge"),
            Shape {
                count: 8,
                memory_mib: 40_960
            }
        );
        assert_eq!(
            shape_of("p5.48xlarge"),
            Shape {
                count: 8,
                memory_mib: 81_920
            }
        );
        assert_eq!(
            shape_of("p3.2xlarge"),
            Shape {
                count: 1,
                memory_mib: 16_384
            }
        );
        assert_eq!(shape_of("m5.large").count, 1);
    }

    #[test]
    fn readings_follow_the_usage_pattern() {
        let at: DateTime<Utc> = "2026-11-30T12:00:00Z".parse().unwrap();
        let p5 = shape_of("p5.48xlarge");
        let of = |usage| Behaviour {
            usage,
            ..Behaviour::default()
        };
        let busy = reading(&of(Usage::Busy), 7, at, p5).unwrap();
        assert_eq!(busy.gpus_busy, Some(8));
        assert!(busy.memory_mib.unwrap() > 60_000 && busy.memory_mib.unwrap() < 81_920);
        let idle = reading(&of(Usage::Idle), 7, at, p5).unwrap();
        assert_eq!((idle.memory_mib, idle.gpus_busy), (Some(0), Some(0)));
        assert_eq!(reading(&of(Usage::None), 7, at, p5), None);
        // A notebook outside work (UTC, 03:00): idle, its model kept by some kernels only.
        let night: DateTime<Utc> = "2026-11-30T03:00:00Z".parse().unwrap();
        let held: Vec<Option<u32>> = (0..64)
            .map(|seed| reading(&of(Usage::Notebook), seed, night, p5).unwrap())
            .inspect(|s| assert_eq!(s.gpus_busy, Some(0)))
            .map(|s| s.memory_mib)
            .collect();
        assert!(held.contains(&Some(0)));
        assert!(held
            .iter()
            .flatten()
            .any(|m| *m >= 81_920 / 4 && *m <= 81_920 / 2));
    }
}
