//! Reading the plain values of a policy file (text, numbers, durations, percentages, choices),
//! each reporting what it expected at the node's path.

use super::{child, closest, suggest, Checker, Fields, PathProblem};
use crate::policy::yaml::{self, Step, Value};
use chrono::Duration;

impl Checker {
    /// Reports `message` at `path`.
    pub(super) fn problem(&mut self, path: &[Step], message: String) {
        self.problems.push(PathProblem {
            path: path.to_vec(),
            message,
        });
    }

    /// Reports a missing required `key` of the mapping at `path`, unless it was misspelt.
    pub(super) fn missing(&mut self, path: &[Step], key: &str, message: String) {
        let misspelt = self.misspelt.iter().any(|(p, k)| p == path && k == key);
        if !misspelt {
            self.problem(path, message);
        }
    }

    /// Reports that the node at `path` is not `what`.
    pub(super) fn expected(&mut self, path: &[Step], what: &str, v: &Value) {
        self.problem(path, format!("expected {what}, found {}", kind(v)));
    }

    /// A mapping whose keys must all be in `allowed`.
    pub(super) fn fields<'v>(
        &mut self,
        v: &'v Value,
        path: &[Step],
        what: &str,
        allowed: &[&str],
    ) -> Option<Fields<'v>> {
        let Value::Mapping(m) = v else {
            self.expected(path, what, v);
            return None;
        };
        let mut entries = Vec::new();
        for (k, value) in m {
            match yaml::key_text(k) {
                Some(key) if allowed.contains(&key.as_str()) => entries.push((key, value)),
                Some(key) => {
                    if let Some(known) = closest(&key, allowed.iter().copied()) {
                        self.misspelt.push((path.to_vec(), known.to_string()));
                    }
                    let hint = suggest(&key, allowed.iter().copied());
                    let hint = if hint.is_empty() {
                        format!(" (expected one of: {})", allowed.join(", "))
                    } else {
                        hint
                    };
                    self.problem(
                        &child(path, Step::Key(key.clone())),
                        format!("unknown key \"{key}\"{hint}"),
                    );
                }
                None => self.problem(path, format!("{what} has a key that is not text")),
            }
        }
        Some(Fields {
            entries,
            path: path.to_vec(),
        })
    }

    /// A list.
    pub(super) fn seq<'v>(
        &mut self,
        v: &'v Value,
        path: &[Step],
        what: &str,
    ) -> Option<&'v [Value]> {
        match v {
            Value::Sequence(s) => Some(s),
            _ => {
                self.expected(path, what, v);
                None
            }
        }
    }

    /// A string (a number or boolean is not taken for one).
    pub(super) fn string(&mut self, v: &Value, path: &[Step], what: &str) -> Option<String> {
        match v {
            Value::String(s) => Some(s.clone()),
            _ => {
                self.expected(path, what, v);
                None
            }
        }
    }

    /// A scalar as text: tag values are strings, but `true` or `3` unquoted mean the same.
    pub(super) fn scalar_text(&mut self, v: &Value, path: &[Step], what: &str) -> Option<String> {
        match v {
            Value::String(s) => Some(s.clone()),
            Value::Bool(b) => Some(b.to_string()),
            Value::Number(n) => Some(n.to_string()),
            _ => {
                self.expected(path, what, v);
                None
            }
        }
    }

    /// A list of strings; `None` when any item is not one.
    pub(super) fn strings(&mut self, v: &Value, path: &[Step], what: &str) -> Option<Vec<String>> {
        let items = self.seq(v, path, what)?;
        let mut out = Vec::new();
        let mut ok = true;
        for (i, item) in items.iter().enumerate() {
            match self.string(item, &child(path, Step::Index(i)), "a string") {
                Some(s) => out.push(s),
                None => ok = false,
            }
        }
        ok.then_some(out)
    }

    /// `true` or `false`.
    pub(super) fn boolean(&mut self, v: &Value, path: &[Step]) -> Option<bool> {
        match v {
            Value::Bool(b) => Some(*b),
            _ => {
                self.expected(path, "true or false", v);
                None
            }
        }
    }

    /// A whole number.
    pub(super) fn integer(&mut self, v: &Value, path: &[Step], what: &str) -> Option<i64> {
        match v.as_i64() {
            Some(i) => Some(i),
            None => {
                self.expected(path, what, v);
                None
            }
        }
    }

    /// A duration longer than zero and at most ten years, like `45m`.
    pub(super) fn duration(&mut self, v: &Value, path: &[Step], key: &str) -> Option<Duration> {
        let text = match v {
            Value::String(s) => s,
            _ => {
                self.expected(path, "a duration like \"45m\" or \"4h\"", v);
                return None;
            }
        };
        let parsed = humantime::parse_duration(text)
            .ok()
            .and_then(|d| Duration::from_std(d).ok())
            .filter(|d| *d <= Duration::days(3650));
        match parsed {
            Some(d) if d > Duration::zero() => Some(d),
            Some(_) => {
                self.problem(path, format!("{key} must be longer than zero"));
                None
            }
            None => {
                self.problem(
                    path,
                    format!(
                        "\"{text}\" is not a duration (like \"90s\", \"45m\", \"4h\", \"1h30m\")"
                    ),
                );
                None
            }
        }
    }

    /// A percentage written `40%` or `40`, as a number from 0 to 100.
    pub(super) fn percent(&mut self, v: &Value, path: &[Step], key: &str) -> Option<f64> {
        let number = match v {
            Value::Number(n) => n.as_f64(),
            Value::String(s) => s
                .trim()
                .strip_suffix('%')
                .and_then(|n| n.trim().parse().ok()),
            _ => None,
        };
        match number {
            Some(n) if (0.0..=100.0).contains(&n) => Some(n),
            Some(_) => {
                self.problem(path, format!("{key} must be between 0% and 100%"));
                None
            }
            None => {
                self.expected(path, "a percentage like \"40%\"", v);
                None
            }
        }
    }

    /// One of the names in `options`, as its value.
    pub(super) fn choice<T: Copy>(
        &mut self,
        v: &Value,
        path: &[Step],
        key: &str,
        options: &[(&str, T)],
    ) -> Option<T> {
        let names: Vec<&str> = options.iter().map(|(n, _)| *n).collect();
        let Value::String(s) = v else {
            self.expected(path, &format!("one of: {}", names.join(", ")), v);
            return None;
        };
        match options.iter().find(|(n, _)| n == s) {
            Some((_, t)) => Some(*t),
            None => {
                self.problem(
                    path,
                    format!(
                        "{key}: \"{s}\" is not one of: {}{}",
                        names.join(", "),
                        suggest(s, names.iter().copied())
                    ),
                );
                None
            }
        }
    }

    /// Runs `parse` on a string node, reporting its error text at the node.
    pub(super) fn parsed<T, E: std::fmt::Display>(
        &mut self,
        v: &Value,
        path: &[Step],
        what: &str,
        parse: impl Fn(&str) -> Result<T, E>,
    ) -> Option<T> {
        let s = self.string(v, path, what)?;
        match parse(&s) {
            Ok(t) => Some(t),
            Err(e) => {
                self.problem(path, e.to_string());
                None
            }
        }
    }
}

/// What kind of node `v` is, for "expected ..., found ..." messages.
fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "nothing",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Sequence(_) => "a list",
        Value::Mapping(_) => "a mapping",
        Value::Tagged(_) => "a tagged value",
    }
}
