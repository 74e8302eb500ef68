//! The `spot` section: move interruptible work to spot capacity.

use super::{keys, Checker};
use crate::policy::yaml::{Step, Value};
use crate::policy::{SpotRule, DEFAULT_BACK_TO_SPOT_AFTER};
use chrono::Duration;

impl Checker {
    /// A policy's `spot` rule.
    pub(super) fn spot(&mut self, v: &Value, path: &[Step]) -> Option<SpotRule> {
        let f = self.fields(v, path, "a spot rule", keys::SPOT)?;
        let min_savings = match f.get("min_savings") {
            Some((v, p)) => self.percent(v, &p, "min_savings"),
            None => {
                self.missing(
                    path,
                    "min_savings",
                    "a spot rule needs \"min_savings\" (like \"40%\")".into(),
                );
                None
            }
        };
        let checkpoint_max_age = match f.get("checkpoint_max_age") {
            Some((v, p)) => self.duration(v, &p, "checkpoint_max_age"),
            None => {
                self.missing(
                    path,
                    "checkpoint_max_age",
                    "a spot rule needs \"checkpoint_max_age\" (how fresh the ebb:checkpoint-at tag must be)".into(),
                );
                None
            }
        };
        let instance_types = match f.get("instance_types") {
            Some((v, p)) => self.strings(v, &p, "a list of instance types"),
            None => Some(Vec::new()),
        };
        let max_interruptions = match f.get("max_interruptions") {
            Some((v, p)) => match self.integer(v, &p, "a whole number") {
                Some(n) if (0..=1000).contains(&n) => Some(n as u32),
                Some(_) => {
                    self.problem(&p, "max_interruptions must be between 0 and 1000".into());
                    None
                }
                None => None,
            },
            None => Some(3),
        };
        let keep_original_for = match f.get("keep_original_for") {
            Some((v, p)) => self.duration(v, &p, "keep_original_for"),
            None => Some(Duration::hours(6)),
        };
        let keep_image_for = match f.get("keep_image_for") {
            Some((v, p)) => self.duration(v, &p, "keep_image_for"),
            None => Some(Duration::days(7)),
        };
        let avoid_reclaimed_for = match f.get("avoid_reclaimed_for") {
            Some((v, p)) => self.duration(v, &p, "avoid_reclaimed_for"),
            None => Some(Duration::hours(1)),
        };
        let placement_scores = match f.get("placement_scores") {
            Some((v, p)) => self.boolean(v, &p),
            None => Some(false),
        };
        let back_to_spot_after = match f.get("back_to_spot_after") {
            Some((v, p)) => self.duration(v, &p, "back_to_spot_after"),
            None => Some(DEFAULT_BACK_TO_SPOT_AFTER),
        };
        Some(SpotRule {
            min_savings: min_savings? / 100.0,
            checkpoint_max_age: checkpoint_max_age?,
            instance_types: instance_types?,
            max_interruptions: max_interruptions?,
            keep_original_for: keep_original_for?,
            keep_image_for: keep_image_for?,
            avoid_reclaimed_for: avoid_reclaimed_for?,
            placement_scores: placement_scores?,
            back_to_spot_after: back_to_spot_after?,
        })
    }
}
