//! One entry of `policies`: its name, priority and `match`, with each rule section read by its
//! own checker.

use super::{child, keys, CalendarRefs, Checker, Draft, Fields};
use crate::policy::yaml::{self, Step, Value};
use crate::policy::{IdleWhen, LateStart, Match, Notify, Policy, Source, TagMatch, TypeGlob};
use std::collections::BTreeMap;
use std::path::PathBuf;

impl Checker {
    /// One entry of `policies`; `None` when it has no usable name.
    pub(super) fn policy(&mut self, v: &Value, path: &[Step], index: usize) -> Option<Draft> {
        let f = self.fields(v, path, "a policy", keys::POLICY)?;
        let before = self.problems.len();
        let name = self.policy_name(&f, path);
        let description = f
            .get("description")
            .and_then(|(v, p)| self.string(v, &p, "text"));
        let priority = f
            .get("priority")
            .and_then(|(v, p)| self.integer(v, &p, "a whole number"))
            .unwrap_or(0);
        let matcher = self.policy_match(&f, path);
        let mut calendars = CalendarRefs::default();
        let work_hours = f
            .get("work_hours")
            .and_then(|(v, p)| self.work_hours(v, &p, &mut calendars));
        let idle = f.get("idle").and_then(|(v, p)| self.idle(v, &p));
        let notify = f.get("notify").and_then(|(v, p)| self.notify(v, &p));
        let spot = f.get("spot").and_then(|(v, p)| self.spot(v, &p));
        let start = f.get("start").and_then(|(v, p)| self.start(v, &p));
        let stop = f.get("stop").and_then(|(v, p)| self.stop(v, &p));
        let runtime = f.get("runtime").and_then(|(v, p)| self.runtime(v, &p));
        let group = f.get("group").and_then(|(v, p)| self.group(v, &p));
        let stopped = f.get("stopped").and_then(|(v, p)| self.stopped(v, &p));
        let dry_run = f
            .get("dry_run")
            .and_then(|(v, p)| self.boolean(v, &p))
            .unwrap_or(false);
        if let (Some(i), None) = (&idle, &f.get("work_hours")) {
            if i.when == IdleWhen::OutsideHours {
                self.problem(
                    &child(path, Step::Value("idle".into())),
                    "idle.when: outside_hours needs work_hours in the same policy".into(),
                );
            }
        }
        if let (Some(_), Some(wh)) = (&idle, &work_hours) {
            if let LateStart::KeepUntilIdle { idle_for: Some(_) } = wh.late_start {
                let at = ["work_hours", "late_start", "idle_for"]
                    .iter()
                    .fold(path.to_vec(), |p, k| child(&p, Step::Value((*k).into())));
                self.problem(
                    &at,
                    "late_start.idle_for is for a policy without an idle rule: with one, a late start is idle after the idle rule's \"for\"; remove idle_for".into(),
                );
            }
        }
        let name = name?;
        let policy = (self.problems.len() == before).then(|| Policy {
            name: name.clone(),
            description,
            priority,
            matcher: matcher.unwrap_or_default(),
            work_hours,
            idle,
            notify,
            spot,
            start,
            stop,
            runtime,
            group,
            stopped,
            dry_run,
            source: Source {
                file: PathBuf::new(),
                line: 0,
            },
        });
        Some(Draft {
            name,
            index,
            policy,
            calendars,
        })
    }

    /// The policy's `name`, which must be there and not blank.
    fn policy_name(&mut self, f: &Fields, path: &[Step]) -> Option<String> {
        let name = match f.get("name") {
            Some((v, p)) => self.string(v, &p, "a policy name"),
            None => {
                self.missing(path, "name", "a policy needs a \"name\"".to_string());
                None
            }
        };
        if let Some(n) = &name {
            if n.trim().is_empty() {
                self.problem(
                    &child(path, Step::Value("name".into())),
                    "a policy name must not be empty".into(),
                );
            }
        }
        name
    }

    /// The policy's `match`, which must be there (empty matches every instance).
    fn policy_match(&mut self, f: &Fields, path: &[Step]) -> Option<Match> {
        match f.get("match") {
            Some((v, p)) => self.matcher(v, &p),
            None => {
                self.missing(
                    path,
                    "match",
                    "a policy needs \"match\" (write \"match: {}\" to match every instance)".into(),
                );
                None
            }
        }
    }

    pub(super) fn matcher(&mut self, v: &Value, path: &[Step]) -> Option<Match> {
        if matches!(v, Value::Mapping(m) if m.is_empty()) {
            return Some(Match::default());
        }
        let f = self.fields(v, path, "a match", keys::MATCH)?;
        let regions = f
            .get("regions")
            .and_then(|(v, p)| self.strings(v, &p, "a list of regions"));
        let mut tags = BTreeMap::new();
        if let Some((tv, tp)) = f.get("tags") {
            match tv {
                Value::Mapping(m) => {
                    for (k, val) in m {
                        let Some(key) = yaml::key_text(k) else {
                            self.problem(&tp, "a tag key must be text".into());
                            continue;
                        };
                        let vp = child(&tp, Step::Value(key.clone()));
                        if let Some(text) = self.scalar_text(val, &vp, "a tag value") {
                            let m = if text == "*" {
                                TagMatch::Present
                            } else {
                                TagMatch::Equals(text)
                            };
                            tags.insert(key, m);
                        }
                    }
                }
                _ => self.expected(&tp, "a mapping of tag keys to values", tv),
            }
        }
        let instance_types = f
            .get("instance_types")
            .and_then(|(v, p)| self.strings(v, &p, "a list of instance type globs"))
            .map(|globs| globs.iter().map(|g| TypeGlob::new(g)).collect());
        Some(Match {
            regions,
            tags,
            instance_types,
        })
    }

    fn notify(&mut self, v: &Value, path: &[Step]) -> Option<Notify> {
        let f = self.fields(v, path, "a notice", keys::NOTIFY)?;
        match f.get("before") {
            Some((v, p)) => Some(Notify {
                before: self.duration(v, &p, "before")?,
            }),
            None => {
                self.missing(
                    path,
                    "before",
                    "notify needs \"before\" (a duration like \"15m\")".into(),
                );
                None
            }
        }
    }
}
