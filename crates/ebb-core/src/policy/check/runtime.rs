//! The `runtime` section: how long a box may run from its last start.

use super::{child, keys, Checker};
use crate::policy::yaml::{Step, Value};
use crate::policy::{RuntimeLimit, DEFAULT_RUNTIME_NOTICE};

impl Checker {
    /// A policy's `runtime` limit.
    pub(super) fn runtime(&mut self, v: &Value, path: &[Step]) -> Option<RuntimeLimit> {
        let f = self.fields(v, path, "a runtime limit", keys::RUNTIME)?;
        let max = match f.get("max") {
            Some((v, p)) => self.duration(v, &p, "runtime.max")?,
            None => {
                self.missing(
                    path,
                    "max",
                    "runtime needs \"max\" (how long a box may run from its last start, like \"72h\")"
                        .into(),
                );
                return None;
            }
        };
        let notify_before = match f.get("notify_before") {
            Some((v, p)) => self.duration(v, &p, "runtime.notify_before")?,
            None => DEFAULT_RUNTIME_NOTICE.min(max / 2),
        };
        if notify_before >= max {
            self.problem(
                &child(path, Step::Value("notify_before".into())),
                "runtime.notify_before must be shorter than runtime.max: the notice goes out that long before the limit is reached".into(),
            );
            return None;
        }
        Some(RuntimeLimit { max, notify_before })
    }
}
