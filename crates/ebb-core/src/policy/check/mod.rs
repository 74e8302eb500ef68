//! Turning one parsed file into policies, collecting every problem with the path to its node.
//!
//! [`check_file`] walks the document; each section of a policy file has its own checker
//! (`calendars`, `policy`, `work_hours`, `idle`, `activity`, `spot`, `start`, `runtime`,
//! `budget`), all
//! methods of one [`Checker`] that collects the problems, and `values` reads the plain values
//! they share.

mod activity;
mod budget;
mod calendars;
mod idle;
pub(super) mod keys;
mod policy;
mod runtime;
mod spot;
mod start;
mod values;
mod work_hours;

use super::yaml::{self, Step, Value};
use super::{Budget, Policy, Problem, Source};
use crate::schedule::Calendar;
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

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
    /// Budgets that parsed, each with the path of its entry.
    pub budgets: Vec<(Budget, Vec<Step>)>,
    /// Problems inside this file.
    pub problems: Vec<PathProblem>,
}

/// A calendar and the path of its name in the file.
pub(super) struct CalendarDef {
    pub calendar: Arc<Calendar>,
    pub path: Vec<Step>,
}

/// The calendar names a policy's work hours give, each with its path, resolved across files.
#[derive(Default)]
pub(super) struct CalendarRefs {
    /// Calendars whose dates are skipped (`skip`).
    pub skip: Vec<(String, Vec<Step>)>,
    /// Calendars whose working days open (`workdays`).
    pub workdays: Vec<(String, Vec<Step>)>,
}

/// A policy whose own fields are valid, waiting for its calendars.
pub(super) struct Draft {
    pub name: String,
    index: usize,
    policy: Option<Policy>,
    calendars: CalendarRefs,
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

    /// Attaches the calendars named in `skip` and `workdays`; `None` when the policy had
    /// problems of its own.
    pub fn resolve(
        self,
        calendars: &BTreeMap<String, Arc<Calendar>>,
        file: &Path,
        line: usize,
    ) -> Result<Policy, Vec<PathProblem>> {
        let mut problems = Vec::new();
        let skip = named(calendars, self.calendars.skip, Use::Skip, &mut problems);
        let workdays = named(
            calendars,
            self.calendars.workdays,
            Use::Workdays,
            &mut problems,
        );
        match self.policy {
            Some(mut policy) if problems.is_empty() => {
                if let Some(wh) = &mut policy.work_hours {
                    wh.schedule.skip = skip;
                    wh.schedule.workdays = workdays;
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

/// How work hours use a calendar they name.
#[derive(Clone, Copy)]
enum Use {
    /// Under `skip`: its dates open no window.
    Skip,
    /// Under `workdays`: its working days open.
    Workdays,
}

/// The calendars of `names`, with a problem for each unknown name and each calendar that has
/// nothing for its use (working days only, named under `skip`, or the other way round: the
/// list it was meant for is elsewhere).
fn named(
    calendars: &BTreeMap<String, Arc<Calendar>>,
    names: Vec<(String, Vec<Step>)>,
    under: Use,
    problems: &mut Vec<PathProblem>,
) -> Vec<Arc<Calendar>> {
    let mut found = Vec::new();
    for (name, path) in names {
        let Some(c) = calendars.get(&name) else {
            problems.push(PathProblem {
                path,
                message: format!(
                    "unknown calendar \"{name}\"{}",
                    suggest(&name, calendars.keys().map(String::as_str))
                ),
            });
            continue;
        };
        let misplaced = match under {
            Use::Skip if c.dates.is_empty() && !c.workdays.is_empty() => Some(format!(
                "calendar \"{name}\" has working days and no dates to skip: name it under \"workdays\""
            )),
            Use::Workdays if c.workdays.is_empty() && !c.dates.is_empty() => Some(format!(
                "calendar \"{name}\" has dates to skip and no working days: name it under \"skip\""
            )),
            _ => None,
        };
        match misplaced {
            Some(message) => problems.push(PathProblem { path, message }),
            None => found.push(c.clone()),
        }
    }
    found
}

/// Where a calendar's dates are kept: a file beside the policy file (its `file`), or the copy
/// of what an address served (its `url`).
pub enum CalendarSource<'a> {
    /// A file, its path joined to the policy file's directory.
    File(&'a Path),
    /// An address, with the format its copy is read in.
    Url {
        /// The address as the policy gives it.
        url: &'a str,
        /// The format of what it serves.
        format: crate::schedule::CalendarFormat,
    },
}

/// What reads the text of a calendar's source: the loader's, which does the I/O (or hands out
/// the copies of the addresses), so that the checks do none. `Err` says why it cannot.
pub(super) type ReadSource = Box<dyn FnMut(CalendarSource<'_>) -> Result<String, String>>;

/// Parses and checks one file, reading the calendars it names with `read_source`. `Err` is a YAML
/// syntax error, which stops this file only.
pub(super) fn check_file(
    file: &Path,
    text: &str,
    read_source: ReadSource,
) -> Result<CheckedFile, Problem> {
    let doc = yaml::parse(text)
        .map_err(|e| Problem::new(file, e.position, &format!("not valid YAML: {}", e.message)))?;
    let mut c = Checker {
        dir: file.parent().map(Path::to_path_buf).unwrap_or_default(),
        read_source,
        problems: Vec::new(),
        misspelt: Vec::new(),
    };
    let mut out = CheckedFile {
        calendars: Vec::new(),
        policies: Vec::new(),
        budgets: Vec::new(),
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
            None if top.get("calendars").is_none() && top.get("budgets").is_none() => {
                c.problem(&root, "a policy file needs a \"policies\" list".to_string())
            }
            None => {}
        }
        if let Some((v, p)) = top.get("budgets") {
            if let Some(items) = c.seq(v, &p, "a list of budgets") {
                for (i, item) in items.iter().enumerate() {
                    let at = child(&p, Step::Index(i));
                    if let Some(b) = c.budget(item, &at) {
                        out.budgets.push((b, at));
                    }
                }
            }
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

/// Collects the problems of one file while its sections are read.
struct Checker {
    /// The directory of the file checked: what a calendar's `file` is relative to.
    dir: std::path::PathBuf,
    /// Reads the calendars it names.
    read_source: ReadSource,
    /// Every problem so far, in the order found.
    problems: Vec<PathProblem>,
    /// Unknown keys that look like a known one: (mapping path, the known key). A missing
    /// required key that was only misspelt is reported once, as the misspelling.
    misspelt: Vec<(Vec<Step>, String)>,
}
