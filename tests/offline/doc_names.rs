//! The names README.md and docs/ARCHITECTURE.md give in backticks exist: every file or folder
//! path (`crates/ebb-cloud/src/cloud/mod.rs`, `reconcile/act/`, `alibaba.rs`) is a file or
//! folder of the repository, and every Rust path (`engine::decide`, `Provider::instances`,
//! `ErrorKind::Unanswered`) names modules, types and items that ebb's source defines. A rename
//! that leaves these pages behind fails here.
//!
//! Plain std: the files of the work tree, read as text.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// The pages checked: the two a newcomer reads first.
const PAGES: &[&str] = &["README.md", "docs/ARCHITECTURE.md"];

/// The extensions that make a backticked word a file name.
const FILE_EXTENSIONS: &[&str] = &[
    "rs", "md", "yaml", "yml", "json", "toml", "sh", "py", "sql", "css", "txt",
];

/// The first segments of Rust paths that name another crate's items, not ebb's.
const OTHER_CRATES: &[&str] = &[
    "std",
    "core",
    "tokio",
    "sqlx",
    "axum",
    "clap",
    "serde",
    "hyper",
    "chrono",
    "aws_sdk_ec2",
];

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// Every file of the work tree ([`crate::docs::repository_files`]) and every folder that holds
/// one, relative to the root, folders ending in `/`.
fn repository_paths() -> Vec<String> {
    let files = crate::docs::repository_files();
    let mut paths: BTreeSet<String> = BTreeSet::new();
    for file in &files {
        for folder in file.ancestors().skip(1) {
            if !folder.as_os_str().is_empty() {
                paths.insert(format!("{}/", folder.display()));
            }
        }
        paths.insert(file.display().to_string());
    }
    paths.into_iter().collect()
}

/// Every span between backticks on a page, inline code only (fenced blocks are skipped).
fn backticked(text: &str) -> Vec<String> {
    let mut spans = Vec::new();
    let mut fenced = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if fenced {
            continue;
        }
        spans.extend(line.split('`').skip(1).step_by(2).map(str::to_string));
    }
    spans
}

/// The span as a path of the repository, when it looks like one: no spaces, no URL, no
/// placeholder (`{id}`, `PORT`, `NAME`), and a file extension or a closing `/`.
fn as_file_path(span: &str) -> Option<&str> {
    let plain = !span.contains([' ', '{', '<', '*', ':', '(', '#', '$', '='])
        && !span.starts_with('/')
        && (!span.starts_with('.') || span.starts_with(".ci/"));
    let placeholder = span.split('/').any(|segment| {
        segment.len() > 1
            && !segment.contains('.')
            && segment.chars().all(|c| c.is_ascii_uppercase() || c == '_')
    });
    let extension = Path::new(span)
        .extension()
        .map(|e| e.to_string_lossy().to_string());
    let file_like = span.ends_with('/')
        || extension.is_some_and(|e| FILE_EXTENSIONS.contains(&e.as_str()))
        || span.starts_with("scripts/")
        || span.starts_with(".ci/");
    (plain && !placeholder && file_like && span.len() > 1).then_some(span)
}

/// Whether a path the docs give exists. One that starts at a top-level entry of the repository
/// (`src/`, `crates/`, `deploy/`) is from the root; any other is the end of a longer path (docs
/// name `reconcile/act/fallback.rs` or `mod.rs` under the folder they are speaking of).
fn path_exists(path: &str, repository: &[String]) -> bool {
    let first = path.split('/').next().unwrap_or_default();
    let from_root = repository
        .iter()
        .any(|p| p == first || p.strip_suffix('/') == Some(first));
    repository
        .iter()
        .any(|p| p == path || (!from_root && p.ends_with(&format!("/{path}"))))
}

/// The span as a Rust path of ebb's (`engine::decide`, `Store::open`), without a call's
/// arguments or the crate it starts from (`ebb::`, `crate::`); `None` for another crate's
/// paths and for anything else.
fn as_rust_path(span: &str) -> Option<Vec<String>> {
    let path = span.split('(').next()?.trim_end_matches("()");
    let segments: Vec<&str> = path.split("::").collect();
    let identifier = |s: &&str| {
        !s.is_empty()
            && s.chars()
                .next()
                .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
            && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
    };
    if segments.len() < 2 || !segments.iter().all(identifier) {
        return None;
    }
    let segments: Vec<String> = segments
        .into_iter()
        // The crate a path starts from: ebb's own, or one whose modules it re-exports.
        .skip_while(|s| ["ebb", "crate", "ebb_core", "ebb_cloud"].contains(s))
        .map(str::to_string)
        .collect();
    let first = segments.first()?;
    (segments.len() >= 2 && !OTHER_CRATES.contains(&first.as_str())).then_some(segments)
}

/// ebb's Rust source, the `src/` of every crate of the workspace, as (path relative to its
/// crate's `src/`, text): the application re-exports the other crates' modules at the same
/// paths, so the docs name them as one tree.
struct Source {
    files: Vec<(PathBuf, String)>,
}

impl Source {
    fn read() -> Source {
        let mut files = Vec::new();
        let sources: Vec<String> = crate::structure::workspace_members()
            .iter()
            .map(|member| {
                format!("{member}/src/")
                    .trim_start_matches("./")
                    .to_string()
            })
            .collect();
        for path in repository_paths() {
            let Some(src) = sources.iter().find(|src| path.starts_with(src.as_str())) else {
                continue;
            };
            if path.ends_with(".rs") {
                let relative = PathBuf::from(&path[src.len()..]);
                files.push((
                    relative,
                    std::fs::read_to_string(root().join(&path)).unwrap(),
                ));
            }
        }
        Source { files }
    }

    /// Whether `segments` names a module: `cloud::prices` is `cloud/prices.rs` or
    /// `cloud/prices/mod.rs` under a crate's `src/`.
    fn is_module(&self, segments: &[String]) -> bool {
        let folder = segments.join("/");
        self.files.iter().any(|(path, _)| {
            path == Path::new(&format!("{folder}.rs"))
                || path == Path::new(&format!("{folder}/mod.rs"))
        })
    }

    /// Whether some file defines `name`: an item, a field, a method or an enum variant.
    fn defines(&self, name: &str) -> bool {
        let item_words = [
            "fn", "struct", "enum", "trait", "type", "const", "static", "mod", "union",
        ];
        self.files.iter().any(|(_, text)| {
            text.lines().any(|line| {
                let words: Vec<&str> = line
                    .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '!'))
                    .filter(|w| !w.is_empty())
                    .collect();
                let item = words.windows(2).any(|w| {
                    (item_words.contains(&w[0]) || w[0] == "macro_rules!") && w[1] == name
                });
                let trimmed = line.trim_start().trim_start_matches("pub ");
                let trimmed = trimmed
                    .strip_prefix("pub(crate) ")
                    .or_else(|| trimmed.strip_prefix("pub(super) "))
                    .unwrap_or(trimmed);
                let member = trimmed.strip_prefix(name).is_some_and(|rest| {
                    rest.starts_with(':') && !rest.starts_with("::")
                        || rest.starts_with(',')
                        || rest.starts_with(" {")
                        || rest.starts_with('(')
                        || rest.starts_with(" =")
                        || rest.is_empty()
                });
                item || member
            })
        })
    }

    /// What is wrong with a Rust path the docs give, if anything. The leading lowercase
    /// segments are modules under `src/` (the longest run that exists); every later segment is
    /// defined somewhere in the source.
    fn check(&self, segments: &[String]) -> Result<(), String> {
        let modules = (1..=segments.len())
            .rev()
            .find(|&n| self.is_module(&segments[..n]))
            .unwrap_or(0);
        if modules == 0 && !self.defines(&segments[0]) {
            return Err(format!("no module or item {}", segments[0]));
        }
        for name in &segments[modules.max(1)..] {
            if !self.defines(name) {
                return Err(format!("nothing defines {name}"));
            }
        }
        Ok(())
    }
}

#[test]
fn every_path_and_rust_item_the_main_pages_name_exists() {
    let repository = repository_paths();
    let source = Source::read();
    let mut missing = Vec::new();
    let (mut paths, mut items) = (0, 0);
    for page in PAGES {
        let text = std::fs::read_to_string(root().join(page)).unwrap();
        for span in backticked(&text) {
            if let Some(path) = as_file_path(&span) {
                paths += 1;
                if !path_exists(path, &repository) {
                    missing.push(format!("{page}: `{span}`: no such file or folder"));
                }
            } else if let Some(segments) = as_rust_path(&span) {
                items += 1;
                if let Err(why) = source.check(&segments) {
                    missing.push(format!("{page}: `{span}`: {why}"));
                }
            }
        }
    }
    // The pages do name both kinds; a parser that found none would pass anything.
    assert!(
        paths > 50 && items > 50,
        "{paths} paths and {items} items found"
    );
    assert!(missing.is_empty(), "{}", missing.join("\n"));
}

/// The check tells a name that exists from one that does not, for each kind it recognises.
#[test]
fn the_name_check_finds_what_is_missing() {
    let repository = repository_paths();
    assert!(path_exists(
        "crates/ebb-cloud/src/cloud/mod.rs",
        &repository
    ));
    assert!(path_exists("cloud/mod.rs", &repository));
    // From the root: the application's `src/` has no cloud module.
    assert!(!path_exists("src/cloud/mod.rs", &repository));
    assert!(path_exists("reconcile/act/", &repository));
    assert!(!path_exists(
        "crates/ebb-cloud/src/cloud/nowhere.rs",
        &repository
    ));
    assert!(!path_exists("cloud/mod.rs/", &repository));
    assert_eq!(as_file_path("crates/ebb-cloud/src/cloud/NAME/"), None);
    assert_eq!(as_file_path("GET /v1/status"), None);
    let source = Source::read();
    let check = |span: &str| source.check(&as_rust_path(span).unwrap());
    for present in [
        "engine::decide(now, &policies, &fleet, &prior)",
        "cloud::prices::PricesError",
        "ErrorKind::Unanswered",
        "Store::open",
        "ebb::cli::main()",
    ] {
        assert_eq!(check(present), Ok(()), "{present}");
    }
    for absent in [
        "engine::decide_everything",
        "cloud::nowhere::PricesError",
        "ErrorKind::Misunderstood",
        "Vault::open",
    ] {
        assert!(check(absent).is_err(), "{absent}");
    }
    assert_eq!(as_rust_path("std::env::var"), None);
    assert_eq!(as_rust_path("#[sqlx::test]"), None);
}
