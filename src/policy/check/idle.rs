//! The `idle` section: stop instances whose GPUs sit idle.

use super::{keys, Checker};
use crate::policy::yaml::{Step, Value};
use crate::policy::{IdleAction, IdleRule, IdleWhen, MissingMetrics};
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
        Some(IdleRule {
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
