//! The `start` section, how a start goes on when EC2 has no capacity for the instance's type,
//! and the `stop` section, how stops go where a stop may keep charging.

use super::{keys, Checker};
use crate::policy::yaml::{Step, Value};
use crate::policy::{InReservation, StartRule, StopRule};

impl Checker {
    /// A policy's `start` rule.
    pub(super) fn start(&mut self, v: &Value, path: &[Step]) -> Option<StartRule> {
        let f = self.fields(v, path, "a start rule", keys::START)?;
        let fallback_types = match f.get("fallback_types") {
            Some((v, p)) => {
                let types = self.strings(v, &p, "a list of instance types")?;
                if let Some(bad) = types.iter().find(|t| !is_instance_type(t)) {
                    self.problem(
                        &p,
                        format!("\"{bad}\" is not an instance type (like \"g6.2xlarge\")"),
                    );
                    return None;
                }
                types
            }
            None => Vec::new(),
        };
        let restore_type = match f.get("restore_type") {
            Some((v, p)) => self.boolean(v, &p)?,
            None => false,
        };
        let reserve_capacity = match f.get("reserve_capacity") {
            Some((v, p)) => self.boolean(v, &p)?,
            None => false,
        };
        Some(StartRule {
            fallback_types,
            restore_type,
            reserve_capacity,
        })
    }

    /// A policy's `stop` rule.
    pub(super) fn stop(&mut self, v: &Value, path: &[Step]) -> Option<StopRule> {
        let f = self.fields(v, path, "a stop rule", keys::STOP)?;
        let allow_charging_stop = match f.get("allow_charging_stop") {
            Some((v, p)) => self.boolean(v, &p)?,
            None => false,
        };
        let in_reservation = match f.get("in_reservation") {
            Some((v, p)) => self.choice(
                v,
                &p,
                "in_reservation",
                &[("keep", InReservation::Keep), ("stop", InReservation::Stop)],
            )?,
            None => InReservation::Keep,
        };
        Some(StopRule {
            allow_charging_stop,
            in_reservation,
        })
    }
}

/// Whether `name` looks like an EC2 instance type: a family and a size, without wildcards
/// (a type is set on the instance as written).
fn is_instance_type(name: &str) -> bool {
    match name.split_once('.') {
        Some((family, size)) => {
            let ok =
                |s: &str| !s.is_empty() && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '-');
            ok(family) && ok(size)
        }
        None => false,
    }
}
