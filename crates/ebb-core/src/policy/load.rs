//! Reading policy directories: files, version, and problems with their positions.

use super::check::{check_file, CalendarSource, CheckedFile};
use super::yaml::{Position, Positions, Step};
use super::{PolicySet, PolicyVersion, Problem};
use crate::schedule::CalendarFormat;
use sha2::{Digest, Sha256};
use std::cell::RefCell;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::rc::Rc;

/// Why a policy set could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// A directory or file could not be read.
    #[error("cannot read {}: {source}", path.display())]
    Read {
        /// What could not be read.
        path: PathBuf,
        /// The operating system's reason.
        source: std::io::Error,
    },
    /// The directories hold no policy file.
    #[error("no policy files (*.yaml, *.yml) in {}", dirs.iter().map(|d| d.display().to_string()).collect::<Vec<_>>().join(", "))]
    NoFiles {
        /// The directories searched.
        dirs: Vec<PathBuf>,
    },
    /// The files have problems; each is one line.
    #[error("{}", problems.iter().map(|p| p.to_string()).collect::<Vec<_>>().join("\n"))]
    Invalid {
        /// Every problem found, by file and position.
        problems: Vec<Problem>,
    },
}

/// Copies of what the addresses of calendars' `url` served, by address: what `ebb serve`
/// fetched last and keeps in Postgres, or what a command fetched when it started.
pub type CalendarCopies = BTreeMap<String, String>;

/// Loads every `*.yaml` and `*.yml` file in `paths` (directories, not recursive, or single
/// files), checks them all, and reports every problem found. A calendar with a `url` is a
/// problem here: [`load_with`] hands out the copies of what the addresses served.
pub fn load(paths: &[PathBuf]) -> Result<PolicySet, LoadError> {
    load_with(paths, &CalendarCopies::new())
}

/// [`load`], reading a calendar's `url` from `copies`; one without a copy there is a problem.
pub fn load_with(paths: &[PathBuf], copies: &CalendarCopies) -> Result<PolicySet, LoadError> {
    load_listing_urls(paths, copies).0
}

/// [`load_with`], and the addresses the calendars take their dates from, with the format of
/// each: what to fetch (none when the files cannot be read).
pub fn load_listing_urls(
    paths: &[PathBuf],
    copies: &CalendarCopies,
) -> (Result<PolicySet, LoadError>, Vec<(String, CalendarFormat)>) {
    let asked: Rc<RefCell<Vec<(String, CalendarFormat)>>> = Rc::default();
    let set = load_asking(paths, copies, &asked);
    (set, asked.take())
}

/// [`load_with`], noting in `asked` each address a calendar takes its dates from.
fn load_asking(
    paths: &[PathBuf],
    copies: &CalendarCopies,
    asked: &Rc<RefCell<Vec<(String, CalendarFormat)>>>,
) -> Result<PolicySet, LoadError> {
    let files = policy_files(paths)?;
    if files.is_empty() {
        return Err(LoadError::NoFiles {
            dirs: paths.to_vec(),
        });
    }
    let mut hasher = Sha256::new();
    let mut problems = Vec::new();
    let mut checked = Vec::new();
    // The calendar files the policy files name, as read: part of the version, and of what
    // `PolicySource` watches.
    let named: Rc<RefCell<Vec<(PathBuf, String)>>> = Rc::default();
    let shared = Rc::new(copies.clone());
    for file in &files {
        let text = std::fs::read_to_string(file).map_err(|source| LoadError::Read {
            path: file.clone(),
            source,
        })?;
        let name = file.file_name().unwrap_or_default().to_string_lossy();
        hasher.update((name.len() as u64).to_le_bytes());
        hasher.update(name.as_bytes());
        hasher.update((text.len() as u64).to_le_bytes());
        hasher.update(text.as_bytes());
        let (kept, asked, copies) = (named.clone(), asked.clone(), shared.clone());
        let read_source = Box::new(move |source: CalendarSource<'_>| match source {
            CalendarSource::File(path) => {
                let text = std::fs::read_to_string(path).map_err(|e| e.to_string())?;
                kept.borrow_mut().push((path.to_path_buf(), text.clone()));
                Ok(text)
            }
            CalendarSource::Url { url, format } => {
                asked.borrow_mut().push((url.to_string(), format));
                copies.get(url).cloned().ok_or_else(|| {
                    "no copy of it yet (ebb serve fetches it at start and daily, the other \
                     commands when they start)"
                        .to_string()
                })
            }
        });
        match check_file(file, &text, read_source) {
            Ok(c) => checked.push((file.clone(), Positions::of(&text), c)),
            Err(p) => problems.push(p),
        }
    }
    let named = named.take();
    for (path, text) in &named {
        let name = path.as_os_str().as_encoded_bytes();
        hasher.update((name.len() as u64).to_le_bytes());
        hasher.update(name);
        hasher.update((text.len() as u64).to_le_bytes());
        hasher.update(text.as_bytes());
    }
    // The copies of the addresses read are part of the version too.
    for (url, _) in asked.borrow().iter() {
        let text = copies.get(url).map_or("", String::as_str);
        hasher.update((url.len() as u64).to_le_bytes());
        hasher.update(url.as_bytes());
        hasher.update((text.len() as u64).to_le_bytes());
        hasher.update(text.as_bytes());
    }
    let set = assemble(checked, &mut problems);
    if !problems.is_empty() {
        problems.sort_by(|a, b| (&a.file, a.position).cmp(&(&b.file, b.position)));
        return Err(LoadError::Invalid { problems });
    }
    Ok(PolicySet {
        policies: set.0,
        calendars: set.1,
        budgets: set.2,
        calendar_files: named.into_iter().map(|(path, _)| path).collect(),
        version: PolicyVersion {
            content_hash: format!("{:x}", hasher.finalize()),
            git_commit: git_commit(&files[0]),
        },
    })
}

type Assembled = (
    Vec<super::Policy>,
    BTreeMap<String, std::sync::Arc<crate::schedule::Calendar>>,
    Vec<super::Budget>,
);

/// Cross-file checks and name resolution: calendars are shared by all files, policy and
/// budget names are unique across them. Every file's own problems are located here too.
fn assemble(
    checked: Vec<(PathBuf, Positions, CheckedFile)>,
    problems: &mut Vec<Problem>,
) -> Assembled {
    let locate = |file: &Path, positions: &Positions, path: &[Step], message: String| {
        Problem::new(file, positions.locate(path), &message)
    };
    let mut calendars = BTreeMap::new();
    let mut calendar_at: BTreeMap<String, String> = BTreeMap::new();
    for (file, positions, c) in &checked {
        for def in &c.calendars {
            let (name, path) = (&def.calendar.name, &def.path);
            let here = place(file, positions.locate(path));
            if let Some(first) = calendar_at.get(name) {
                problems.push(locate(
                    file,
                    positions,
                    path,
                    format!("duplicate calendar \"{name}\" (also defined at {first})"),
                ));
            } else {
                calendar_at.insert(name.clone(), here);
                calendars.insert(name.clone(), def.calendar.clone());
            }
        }
    }
    let mut policies = Vec::new();
    let mut policy_at: BTreeMap<String, String> = BTreeMap::new();
    let mut budgets = Vec::new();
    let mut budget_at: BTreeMap<String, String> = BTreeMap::new();
    for (file, positions, c) in checked {
        for (mut budget, path) in c.budgets {
            let name_pos =
                positions.locate(&[path.clone(), vec![Step::Value("name".into())]].concat());
            if let Some(first) = budget_at.get(&budget.name) {
                let message = format!(
                    "duplicate budget name \"{}\" (also defined at {first})",
                    budget.name
                );
                problems.push(Problem::new(&file, name_pos, &message));
                continue;
            }
            budget_at.insert(budget.name.clone(), place(&file, name_pos));
            budget.source = super::Source {
                file: file.clone(),
                line: name_pos.map_or(0, |p| p.line),
            };
            budgets.push(budget);
        }
        for p in &c.problems {
            problems.push(locate(&file, &positions, &p.path, p.message.clone()));
        }
        for draft in c.policies {
            let name_path = draft.name_path();
            let name_pos = positions.locate(&name_path);
            if let Some(first) = policy_at.get(&draft.name) {
                let message = format!(
                    "duplicate policy name \"{}\" (also defined at {first})",
                    draft.name
                );
                problems.push(Problem::new(&file, name_pos, &message));
                continue;
            }
            policy_at.insert(draft.name.clone(), place(&file, name_pos));
            match draft.resolve(&calendars, &file, name_pos.map_or(0, |p| p.line)) {
                Ok(policy) => policies.push(policy),
                Err(unresolved) => {
                    for p in unresolved {
                        problems.push(locate(&file, &positions, &p.path, p.message));
                    }
                }
            }
        }
    }
    (policies, calendars, budgets)
}

fn place(file: &Path, position: Option<Position>) -> String {
    match position {
        Some(p) => format!("{}:{}:{}", file.display(), p.line, p.column),
        None => file.display().to_string(),
    }
}

/// The policy files `paths` name: files as given, and every `*.yaml` and `*.yml` in the
/// directories, in name order.
pub fn policy_files(paths: &[PathBuf]) -> Result<Vec<PathBuf>, LoadError> {
    let mut files = Vec::new();
    for path in paths {
        let read_err = |source| LoadError::Read {
            path: path.clone(),
            source,
        };
        if path.is_file() {
            files.push(path.clone());
            continue;
        }
        let mut in_dir = Vec::new();
        for entry in std::fs::read_dir(path).map_err(read_err)? {
            let entry_path = entry.map_err(read_err)?.path();
            let is_yaml = entry_path
                .extension()
                .is_some_and(|e| e == "yaml" || e == "yml");
            if is_yaml && entry_path.is_file() {
                in_dir.push(entry_path);
            }
        }
        in_dir.sort();
        files.extend(in_dir);
    }
    Ok(files)
}

/// The files in the directories of `paths` that may be calendar files (`.ics`, `.json`): what
/// a policy file may name, watched before it is named, so that a calendar file added after
/// the policy that names it is seen.
pub fn calendar_like_files(paths: &[PathBuf]) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = paths
        .iter()
        .filter(|p| p.is_dir())
        .filter_map(|dir| std::fs::read_dir(dir).ok())
        .flatten()
        .filter_map(|entry| Some(entry.ok()?.path()))
        .filter(|path| {
            let extension = path.extension().and_then(|e| e.to_str()).unwrap_or("");
            CalendarFormat::of_extension(extension).is_some() && path.is_file()
        })
        .collect();
    files.sort();
    files
}

/// The commit checked out in the git work tree that holds `file`, if any.
fn git_commit(file: &Path) -> Option<String> {
    let dir = match file.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(["rev-parse", "--verify", "--quiet", "HEAD"])
        .output()
        .ok()?;
    let commit = String::from_utf8(out.stdout).ok()?.trim().to_string();
    (out.status.success() && !commit.is_empty()).then_some(commit)
}
