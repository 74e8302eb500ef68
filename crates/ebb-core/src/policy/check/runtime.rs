//! The `runtime` section: how long a box may run from its last start, and stay busy without
//! a checkpoint; the `group` section, how a group is scaled down around protected members; and
//! the `stopped` section, when a box stopped for long is reclaimed.

use super::{child, keys, Checker};
use crate::policy::yaml::{Step, Value};
use crate::policy::{GroupRule, RuntimeLimit, StoppedRule, DEFAULT_RUNTIME_NOTICE};

impl Checker {
    /// A policy's `runtime` limits.
    pub(super) fn runtime(&mut self, v: &Value, path: &[Step]) -> Option<RuntimeLimit> {
        let f = self.fields(v, path, "a runtime limit", keys::RUNTIME)?;
        let mut limit = |key: &str| {
            f.get(key)
                .map(|(v, p)| self.duration(v, &p, &format!("runtime.{key}")))
        };
        let max = limit("max");
        let busy = limit("max_busy_without_checkpoint");
        if let (None, None) = (&max, &busy) {
            self.missing(
                path,
                "max",
                "runtime needs \"max\" (how long a box may run from its last start, like \"72h\") or \"max_busy_without_checkpoint\" (how long it may stay busy without its ebb:checkpoint-at tag moving)".into(),
            );
            return None;
        }
        // A limit that is not a duration is reported already.
        if max == Some(None) || busy == Some(None) {
            return None;
        }
        let (max, busy) = (max.flatten(), busy.flatten());
        let shortest = max.into_iter().chain(busy).min()?;
        let notify_before = match f.get("notify_before") {
            Some((v, p)) => self.duration(v, &p, "runtime.notify_before")?,
            None => DEFAULT_RUNTIME_NOTICE.min(shortest / 2),
        };
        if notify_before >= shortest {
            self.problem(
                &child(path, Step::Value("notify_before".into())),
                "runtime.notify_before must be shorter than runtime.max and max_busy_without_checkpoint: the notice goes out that long before the stop".into(),
            );
            return None;
        }
        Some(RuntimeLimit {
            max,
            notify_before,
            max_busy_without_checkpoint: busy,
        })
    }
}

impl Checker {
    /// A policy's `group` section.
    pub(super) fn group(&mut self, v: &Value, path: &[Step]) -> Option<GroupRule> {
        let f = self.fields(v, path, "a group rule", keys::GROUP)?;
        let protect_members = f
            .get("protect_members")
            .and_then(|(v, p)| self.boolean(v, &p))
            .unwrap_or(false);
        Some(GroupRule { protect_members })
    }
}

impl Checker {
    /// A policy's `stopped` section.
    pub(super) fn stopped(&mut self, v: &Value, path: &[Step]) -> Option<StoppedRule> {
        let f = self.fields(v, path, "a stopped rule", keys::STOPPED)?;
        let reclaim_after = match f.get("reclaim_after") {
            Some((v, p)) => self.duration(v, &p, "stopped.reclaim_after")?,
            None => {
                self.missing(
                    path,
                    "reclaim_after",
                    "stopped needs \"reclaim_after\" (how long a box stays stopped before it is reclaimed, like \"30d\")".into(),
                );
                return None;
            }
        };
        match f.get("reclaim") {
            Some((v, p)) => match self.string(v, &p, "a way to reclaim")?.as_str() {
                "image" => {}
                "snapshot" => {
                    self.problem(&p, "reclaim: snapshot is not built yet; use \"image\" (an image of the box with all its volumes, then the box terminated)".into());
                    return None;
                }
                other => {
                    self.problem(&p, format!("reclaim must be \"image\", not \"{other}\""));
                    return None;
                }
            },
            None => {
                self.missing(
                    path,
                    "reclaim",
                    "stopped needs \"reclaim: image\" (the box is imaged with all its volumes, the image proven, then the box terminated)".into(),
                );
                return None;
            }
        }
        let keep_image_for = match f.get("keep_image_for") {
            Some((v, p)) => Some(self.duration(v, &p, "stopped.keep_image_for")?),
            None => None,
        };
        Some(StoppedRule {
            reclaim_after,
            keep_image_for,
        })
    }
}
