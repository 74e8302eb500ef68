//! The `idle` section: stop instances whose GPUs sit idle.

use super::{keys, Checker};
use crate::policy::yaml::{Step, Value};
use crate::policy::{
    IdleAction, IdleRule, IdleWhen, MissingMetrics, DEFAULT_CAPACITY_MEMORY, MAX_CAPACITY_MEMORY,
};
use chrono::Duration;

impl Checker {
    /// A policy's `idle` rule.
    pub(super) fn idle(&mut self, v: &Value, path: &[Step]) -> Option<IdleRule> {
        let f = self.fields(v, path, "an idle rule", keys::IDLE)?;
        let gpu_below = match f.get("gpu_below") {
            Some((v, p)) => self.percent(v, &p, "gpu_below"),
            None => {
                self.missing(
                    path,
                    "gpu_below",
                    "an idle rule needs \"gpu_below\" (percent)".into(),
                );
                None
            }
        };
        let gpu_memory_below = match f.get("gpu_memory_below") {
            Some((v, p)) => match self.integer(v, &p, "a whole number of MiB") {
                Some(n) if (1..=i64::from(u32::MAX)).contains(&n) => Some(Some(n as u32)),
                Some(_) => {
                    self.problem(
                        &p,
                        "gpu_memory_below must be a number of MiB above 0 (like 2048 for 2 GiB)"
                            .into(),
                    );
                    None
                }
                None => None,
            },
            None => Some(None),
        };
        let window = match f.get("for") {
            Some((v, p)) => self.duration(v, &p, "for"),
            None => {
                self.missing(
                    path,
                    "for",
                    "an idle rule needs \"for\" (a duration like \"45m\")".into(),
                );
                None
            }
        };
        let grace_after_start = match f.get("grace_after_start") {
            Some((v, p)) => self.duration(v, &p, "grace_after_start"),
            None => Some(Duration::zero()),
        };
        let missing_metrics =
            f.get("missing_metrics")
                .map_or(Some(MissingMetrics::Busy), |(v, p)| {
                    self.choice(
                        v,
                        &p,
                        "missing_metrics",
                        &[
                            ("busy", MissingMetrics::Busy),
                            ("idle", MissingMetrics::Idle),
                        ],
                    )
                });
        let when = f.get("when").map_or(Some(IdleWhen::Always), |(v, p)| {
            self.choice(
                v,
                &p,
                "when",
                &[
                    ("always", IdleWhen::Always),
                    ("outside_hours", IdleWhen::OutsideHours),
                ],
            )
        });
        let action = f.get("action").map_or(Some(IdleAction::Stop), |(v, p)| {
            self.choice(
                v,
                &p,
                "action",
                &[
                    ("stop", IdleAction::Stop),
                    ("hibernate", IdleAction::Hibernate),
                ],
            )
        });
        let min_gap = match f.get("min_gap") {
            Some((v, p)) => Some(Some(self.duration(v, &p, "min_gap")?)),
            None => Some(None),
        };
        let capacity_memory = match f.get("capacity_memory") {
            Some((v, p)) => self.capacity_memory(v, &p),
            None => Some(DEFAULT_CAPACITY_MEMORY),
        };
        let activity = match f.get("activity") {
            Some((v, p)) => self.activity(v, &p),
            None => Some(Vec::new()),
        };
        Some(IdleRule {
            activity: activity?,
            min_gap: min_gap?,
            capacity_memory: capacity_memory?,
            gpu_below: gpu_below?,
            gpu_memory_below: gpu_memory_below?,
            window: window?,
            grace_after_start: grace_after_start?,
            missing_metrics: missing_metrics?,
            when: when?,
            action: action?,
        })
    }
}

impl Checker {
    /// `capacity_memory`: at most [`MAX_CAPACITY_MEMORY`], as far back as ebb looks for refused
    /// starts.
    fn capacity_memory(&mut self, v: &Value, path: &[Step]) -> Option<Duration> {
        let memory = self.duration(v, path, "capacity_memory")?;
        if memory > MAX_CAPACITY_MEMORY {
            self.problem(
                path,
                format!(
                    "capacity_memory is at most {}d (how far back ebb looks for starts refused for lack of capacity)",
                    MAX_CAPACITY_MEMORY.num_days()
                ),
            );
            return None;
        }
        Some(memory)
    }
}
