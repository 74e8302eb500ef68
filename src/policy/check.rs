//! Turning one parsed file into policies, collecting every problem with the path to its node.

use super::load::Problem;
use super::yaml::{self, Step, Value};
use super::*;
use crate::schedule::{CronEvents, DateRange, DaySet, Hours, Period, TimeOfDay};
use chrono_tz::Tz;
use std::path::Path;
use std::str::FromStr;

/// The keys each mapping of a policy file may have; the JSON Schema is built from the same lists.
pub(super) mod keys {
    pub const FILE: &[&str] = &["calendars", "policies"];
    pub const CALENDAR: &[&str] = &["description", "dates"];
    pub const POLICY: &[&str] = &[
        "name",
        "description",
        "priority",
        "match",
        "work_hours",
        "idle",
        "notify",
        "spot",
        "dry_run",
    ];
    pub const MATCH: &[&str] = &["regions", "tags", "instance_types"];
    pub const WORK_HOURS: &[&str] = &[
        "timezone",
        "periods",
        "cron",
        "skip",
        "outside_hours",
        "start_at_open",
        "busy_defers_stop",
        "max_defer",
    ];
    pub const PERIOD: &[&str] = &["days", "start", "stop"];
    pub const CRON: &[&str] = &["start", "stop"];
    pub const IDLE: &[&str] = &[
        "gpu_below",
        "for",
        "grace_after_start",
        "missing_metrics",
        "when",
        "action",
    ];
    pub const NOTIFY: &[&str] = &["before"];
    pub const SPOT: &[&str] = &[
        "min_savings",
        "checkpoint_max_age",
        "instance_types",
        "max_interruptions",
        "keep_original_for",
    ];
}

/// A problem at a path in the document; positions are looked up only for reported problems.
#[derive(Debug, Clone)]
pub(super) struct PathProblem {
    pub path: Vec<Step>,
    pub message: String,
}

/// What one file defines, before names are resolved across files.
pub(super) struct CheckedFile {
    /// Calendars, in file order.
    pub calendars: Vec<CalendarDef>,
    /// Policies that parsed (possibly with unresolved calendar names).
    pub policies: Vec<Draft>,
    /// Problems inside this file.
    pub problems: Vec<PathProblem>,
}

/// A calendar and the path of its name in the file.
pub(super) struct CalendarDef {
    pub calendar: Arc<Calendar>,
    pub path: Vec<Step>,
}

/// A policy whose own fields are valid, waiting for its `skip` calendars.
pub(super) struct Draft {
    pub name: String,
    index: usize,
    policy: Option<Policy>,
    skip: Vec<(String, Vec<Step>)>,
}

impl Draft {
    /// The path of the policy's `name` node.
    pub fn name_path(&self) -> Vec<Step> {
        vec![
            Step::Value("policies".into()),
            Step::Index(self.index),
            Step::Value("name".into()),
        ]
    }

    /// Attaches the calendars named in `skip`; `None` when the policy had problems of its own.
    pub fn resolve(
        self,
        calendars: &BTreeMap<String, Arc<Calendar>>,
        file: &Path,
        line: usize,
    ) -> Result<Policy, Vec<PathProblem>> {
        let mut problems = Vec::new();
        let mut skip = Vec::new();
        for (name, path) in self.skip {
            match calendars.get(&name) {
                Some(c) => skip.push(c.clone()),
                None => problems.push(PathProblem {
                    path,
                    message: format!(
                        "unknown calendar \"{name}\"{}",
                        suggest(&name, calendars.keys().map(String::as_str))
                    ),
                }),
            }
        }
        match self.policy {
            Some(mut policy) if problems.is_empty() => {
                if let Some(wh) = &mut policy.work_hours {
                    wh.schedule.skip = skip;
                }
                policy.source = Source {
                    file: file.to_path_buf(),
                    line,
                };
                Ok(policy)
            }
            _ => Err(problems),
        }
    }
}

/// Parses and checks one file. `Err` is a YAML syntax error, which stops this file only.
pub(super) fn check_file(file: &Path, text: &str) -> Result<CheckedFile, Problem> {
    let doc = yaml::parse(text)
        .map_err(|e| Problem::new(file, e.position, &format!("not valid YAML: {}", e.message)))?;
    let mut c = Checker {
        problems: Vec::new(),
        misspelt: Vec::new(),
    };
    let mut out = CheckedFile {
        calendars: Vec::new(),
        policies: Vec::new(),
        problems: Vec::new(),
    };
    let root = Vec::new();
    if doc.is_null() {
        c.problem(
            &root,
            "the file is empty; a policy file has a \"policies\" list".into(),
        );
    } else if let Some(top) = c.fields(&doc, &root, "a policy file", keys::FILE) {
        if let Some((v, p)) = top.get("calendars") {
            out.calendars = c.calendars(v, &p);
        }
        match top.get("policies") {
            Some((v, p)) => {
                if let Some(items) = c.seq(v, &p, "a list of policies") {
                    for (i, item) in items.iter().enumerate() {
                        if let Some(d) = c.policy(item, &child(&p, Step::Index(i)), i) {
                            out.policies.push(d);
                        }
                    }
                }
            }
            None if top.get("calendars").is_none() => {
                c.problem(&root, "a policy file needs a \"policies\" list".to_string())
            }
            None => {}
        }
    }
    out.problems = c.problems;
    Ok(out)
}

fn child(path: &[Step], step: Step) -> Vec<Step> {
    let mut p = path.to_vec();
    p.push(step);
    p
}

/// The candidate closest to `word`, when one is close enough to be a likely misspelling.
fn closest<'a>(word: &str, candidates: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    candidates
        .into_iter()
        .map(|c| (strsim::jaro_winkler(word, c), c))
        .filter(|(score, _)| *score >= 0.85)
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, c)| c)
}

/// ` (did you mean "x"?)` when a candidate is close to `word`.
fn suggest<'a>(word: &str, candidates: impl IntoIterator<Item = &'a str>) -> String {
    closest(word, candidates)
        .map(|c| format!(" (did you mean \"{c}\"?)"))
        .unwrap_or_default()
}

/// A mapping's known fields, looked up by name.
struct Fields<'v> {
    entries: Vec<(String, &'v Value)>,
    path: Vec<Step>,
}

impl<'v> Fields<'v> {
    fn get(&self, key: &str) -> Option<(&'v Value, Vec<Step>)> {
        self.entries
            .iter()
            .find(|(k, _)| k == key)
            .map(|(k, v)| (*v, child(&self.path, Step::Value(k.clone()))))
    }
}

struct Checker {
    problems: Vec<PathProblem>,
    /// Unknown keys that look like a known one: (mapping path, the known key). A missing
    /// required key that was only misspelt is reported once, as the misspelling.
    misspelt: Vec<(Vec<Step>, String)>,
}

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

impl Checker {
    fn problem(&mut self, path: &[Step], message: String) {
        self.problems.push(PathProblem {
            path: path.to_vec(),
            message,
        });
    }

    /// Reports a missing required `key` of the mapping at `path`, unless it was misspelt.
    fn missing(&mut self, path: &[Step], key: &str, message: String) {
        let misspelt = self.misspelt.iter().any(|(p, k)| p == path && k == key);
        if !misspelt {
            self.problem(path, message);
        }
    }

    fn expected(&mut self, path: &[Step], what: &str, v: &Value) {
        self.problem(path, format!("expected {what}, found {}", kind(v)));
    }

    /// A mapping whose keys must all be in `allowed`.
    fn fields<'v>(
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

    fn seq<'v>(&mut self, v: &'v Value, path: &[Step], what: &str) -> Option<&'v [Value]> {
        match v {
            Value::Sequence(s) => Some(s),
            _ => {
                self.expected(path, what, v);
                None
            }
        }
    }

    fn string(&mut self, v: &Value, path: &[Step], what: &str) -> Option<String> {
        match v {
            Value::String(s) => Some(s.clone()),
            _ => {
                self.expected(path, what, v);
                None
            }
        }
    }

    /// A scalar as text: tag values are strings, but `true` or `3` unquoted mean the same.
    fn scalar_text(&mut self, v: &Value, path: &[Step], what: &str) -> Option<String> {
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

    fn strings(&mut self, v: &Value, path: &[Step], what: &str) -> Option<Vec<String>> {
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

    fn boolean(&mut self, v: &Value, path: &[Step]) -> Option<bool> {
        match v {
            Value::Bool(b) => Some(*b),
            _ => {
                self.expected(path, "true or false", v);
                None
            }
        }
    }

    fn integer(&mut self, v: &Value, path: &[Step], what: &str) -> Option<i64> {
        match v.as_i64() {
            Some(i) => Some(i),
            None => {
                self.expected(path, what, v);
                None
            }
        }
    }

    fn duration(&mut self, v: &Value, path: &[Step], key: &str) -> Option<Duration> {
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
    fn percent(&mut self, v: &Value, path: &[Step], key: &str) -> Option<f64> {
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

    fn choice<T: Copy>(
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
    fn parsed<T, E: std::fmt::Display>(
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

    fn calendars(&mut self, v: &Value, path: &[Step]) -> Vec<CalendarDef> {
        let mut out = Vec::new();
        let Value::Mapping(m) = v else {
            self.expected(path, "a mapping of calendar names to calendars", v);
            return out;
        };
        for (k, body) in m {
            let Some(name) = yaml::key_text(k) else {
                self.problem(path, "a calendar name must be text".to_string());
                continue;
            };
            let cpath = child(path, Step::Value(name.clone()));
            let Some(f) = self.fields(body, &cpath, "a calendar", keys::CALENDAR) else {
                continue;
            };
            if let Some((v, p)) = f.get("description") {
                self.string(v, &p, "text");
            }
            let Some((dv, dp)) = f.get("dates") else {
                self.missing(
                    &cpath,
                    "dates",
                    format!("calendar \"{name}\" needs \"dates\""),
                );
                continue;
            };
            let Some(items) = self.seq(
                dv,
                &dp,
                "a list of dates (YYYY-MM-DD or YYYY-MM-DD..YYYY-MM-DD)",
            ) else {
                continue;
            };
            let mut dates = Vec::new();
            let mut ok = true;
            for (i, item) in items.iter().enumerate() {
                match self.parsed(
                    item,
                    &child(&dp, Step::Index(i)),
                    "a date",
                    DateRange::from_str,
                ) {
                    Some(d) => dates.push(d),
                    None => ok = false,
                }
            }
            if ok {
                let key = Step::Key(name.clone());
                out.push(CalendarDef {
                    calendar: Arc::new(Calendar { name, dates }),
                    path: child(path, key),
                });
            }
        }
        out
    }

    fn policy(&mut self, v: &Value, path: &[Step], index: usize) -> Option<Draft> {
        let f = self.fields(v, path, "a policy", keys::POLICY)?;
        let before = self.problems.len();
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
        let description = f
            .get("description")
            .and_then(|(v, p)| self.string(v, &p, "text"));
        let priority = f
            .get("priority")
            .and_then(|(v, p)| self.integer(v, &p, "a whole number"))
            .unwrap_or(0);
        let matcher = match f.get("match") {
            Some((v, p)) => self.matcher(v, &p),
            None => {
                self.missing(
                    path,
                    "match",
                    "a policy needs \"match\" (write \"match: {}\" to match every instance)".into(),
                );
                None
            }
        };
        let mut skip = Vec::new();
        let work_hours = f
            .get("work_hours")
            .and_then(|(v, p)| self.work_hours(v, &p, &mut skip));
        let idle = f.get("idle").and_then(|(v, p)| self.idle(v, &p));
        let notify = f.get("notify").and_then(|(v, p)| self.notify(v, &p));
        let spot = f.get("spot").and_then(|(v, p)| self.spot(v, &p));
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
            skip,
        })
    }

    fn matcher(&mut self, v: &Value, path: &[Step]) -> Option<Match> {
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

    fn work_hours(
        &mut self,
        v: &Value,
        path: &[Step],
        skip: &mut Vec<(String, Vec<Step>)>,
    ) -> Option<WorkHours> {
        let f = self.fields(v, path, "work hours", keys::WORK_HOURS)?;
        let timezone = match f.get("timezone") {
            Some((v, p)) => self.parsed(v, &p, "an IANA time zone name", |s| {
                Tz::from_str(s).map_err(|_| {
                    format!(
                        "unknown time zone \"{s}\"{}",
                        suggest(s, chrono_tz::TZ_VARIANTS.iter().map(|z| z.name()))
                    )
                })
            }),
            None => {
                self.missing(
                    path,
                    "timezone",
                    "work_hours needs a \"timezone\" (an IANA name like \"Europe/Berlin\")".into(),
                );
                None
            }
        };
        let hours = match (f.get("periods"), f.get("cron")) {
            (Some((v, p)), None) => self.periods(v, &p),
            (None, Some((v, p))) => self.cron(v, &p),
            (Some(_), Some((_, p))) => {
                self.problem(
                    &p,
                    "work_hours takes either \"periods\" or \"cron\", not both".into(),
                );
                None
            }
            (None, None) => {
                if !["periods", "cron"]
                    .iter()
                    .any(|k| self.misspelt.contains(&(path.to_vec(), k.to_string())))
                {
                    self.problem(path, "work_hours needs \"periods\" or \"cron\"".into());
                }
                None
            }
        };
        if let Some((v, p)) = f.get("skip") {
            if let Some(names) = self.strings(v, &p, "a list of calendar names") {
                skip.extend(
                    names
                        .into_iter()
                        .enumerate()
                        .map(|(i, n)| (n, child(&p, Step::Index(i)))),
                );
            }
        }
        let outside_hours = f
            .get("outside_hours")
            .map_or(Some(OutsideHours::Stop), |(v, p)| {
                self.choice(
                    v,
                    &p,
                    "outside_hours",
                    &[
                        ("stop", OutsideHours::Stop),
                        ("hibernate", OutsideHours::Hibernate),
                        ("none", OutsideHours::None),
                    ],
                )
            });
        let start_at_open =
            f.get("start_at_open")
                .map_or(Some(StartAtOpen::StoppedByEbb), |(v, p)| {
                    self.choice(
                        v,
                        &p,
                        "start_at_open",
                        &[
                            ("stopped-by-ebb", StartAtOpen::StoppedByEbb),
                            ("all", StartAtOpen::All),
                            ("never", StartAtOpen::Never),
                        ],
                    )
                });
        let busy_defers_stop = f
            .get("busy_defers_stop")
            .map_or(Some(true), |(v, p)| self.boolean(v, &p));
        let max_defer = match f.get("max_defer") {
            Some((v, p)) => Some(self.duration(v, &p, "max_defer")?),
            None => None,
        };
        Some(WorkHours {
            schedule: Schedule {
                timezone: timezone?,
                hours: hours?,
                skip: Vec::new(),
            },
            outside_hours: outside_hours?,
            start_at_open: start_at_open?,
            busy_defers_stop: busy_defers_stop?,
            max_defer,
        })
    }

    fn periods(&mut self, v: &Value, path: &[Step]) -> Option<Hours> {
        let items = self.seq(v, path, "a list of periods")?;
        if items.is_empty() {
            self.problem(path, "periods must not be empty".into());
            return None;
        }
        let mut periods = Vec::new();
        let mut ok = true;
        for (i, item) in items.iter().enumerate() {
            let ip = child(path, Step::Index(i));
            match self.period(item, &ip) {
                Some(p) => periods.push(p),
                None => ok = false,
            }
        }
        ok.then_some(Hours::Periods(periods))
    }

    fn period(&mut self, v: &Value, path: &[Step]) -> Option<Period> {
        let f = self.fields(v, path, "a period", keys::PERIOD)?;
        let required = |key: &str, this: &mut Self| {
            let got = f.get(key);
            if got.is_none() {
                this.missing(path, key, format!("a period needs \"{key}\""));
            }
            got
        };
        let days = required("days", self);
        let start = required("start", self);
        let stop = required("stop", self);
        let days = days.and_then(|(v, p)| match v {
            Value::Sequence(_) => self.strings(v, &p, "days like \"mon-fri\"").and_then(|d| {
                self.parsed(&Value::String(d.join(",")), &p, "days", DaySet::from_str)
            }),
            _ => self.parsed(v, &p, "days like \"mon-fri\"", DaySet::from_str),
        });
        let time = |this: &mut Self, got: Option<(&Value, Vec<Step>)>| {
            got.and_then(|(v, p)| {
                this.parsed(v, &p, "a time of day like \"08:30\"", TimeOfDay::from_str)
            })
        };
        let start = time(self, start);
        let stop = time(self, stop);
        let (days, start, stop) = (days?, start?, stop?);
        if start == stop {
            self.problem(
                path,
                format!("start and stop are both {start}: the window would be empty (use 00:00 and 24:00 for a whole day)"),
            );
            return None;
        }
        if start.minutes() == 24 * 60 {
            self.problem(
                path,
                "start cannot be 24:00 (write 00:00 of the next day)".into(),
            );
            return None;
        }
        Some(Period { days, start, stop })
    }

    fn cron(&mut self, v: &Value, path: &[Step]) -> Option<Hours> {
        let f = self.fields(v, path, "cron events", keys::CRON)?;
        let event = |key: &str, this: &mut Self| match f.get(key) {
            Some((v, p)) => this.parsed(v, &p, "a 5-field cron expression", CronEvents::from_str),
            None => {
                this.missing(path, key, format!("cron needs \"{key}\""));
                None
            }
        };
        let start = event("start", self);
        let stop = event("stop", self);
        Some(Hours::Cron {
            start: start?,
            stop: stop?,
        })
    }

    fn idle(&mut self, v: &Value, path: &[Step]) -> Option<IdleRule> {
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
            window: window?,
            grace_after_start: grace_after_start?,
            missing_metrics: missing_metrics?,
            when: when?,
            action: action?,
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

    fn spot(&mut self, v: &Value, path: &[Step]) -> Option<SpotRule> {
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
        Some(SpotRule {
            min_savings: min_savings? / 100.0,
            checkpoint_max_age: checkpoint_max_age?,
            instance_types: instance_types?,
            max_interruptions: max_interruptions?,
            keep_original_for: keep_original_for?,
        })
    }
}
