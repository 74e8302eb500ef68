//! The manual's shape, checked on the files: README.md opens it in at most 300 lines; every
//! markdown page of the repository is reachable from README.md by relative links; every relative
//! link points at a file that exists, and its `#anchor` at a heading of that file (GitHub's
//! anchors); docs/SUMMARY.md, the mdBook index, lists every page of `docs/` and nothing else; and
//! every section a file of the repository names exists. A file names a section in one of two
//! ways: a page's path with an `#anchor`, or the section's title in double quotes after the
//! page's name and `'s` (or a comma), the page being README, ARCHITECTURE, RELIABILITY,
//! BENCHMARKS or a path ending in `.md`.
//!
//! Plain std: no services, no network, nothing but the files of the work tree.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::path::{Component, Path, PathBuf};

/// The most lines README.md may have: it opens the manual, the rest is in `docs/`.
const README_LINES: usize = 300;

/// Directories that hold no file of the repository: git's, and build output.
const NOT_THE_REPOSITORY: &[&str] = &[".git", "target", "book"];

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// Every file of the work tree, relative to the root, but none under [`NOT_THE_REPOSITORY`].
pub(crate) fn repository_files() -> Vec<PathBuf> {
    fn walk(dir: &Path, files: &mut Vec<PathBuf>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy().to_string();
            if path.is_dir() {
                if !NOT_THE_REPOSITORY.contains(&name.as_str()) {
                    walk(&path, files);
                }
            } else {
                files.push(path.strip_prefix(root()).unwrap().to_path_buf());
            }
        }
    }
    let mut files = Vec::new();
    walk(root(), &mut files);
    files.sort();
    files
}

/// The markdown pages of the repository, relative to the root.
fn pages() -> Vec<PathBuf> {
    repository_files()
        .into_iter()
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect()
}

/// `path` with `.` and `..` worked out, without asking the file system.
fn normal(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for part in path.components() {
        match part {
            Component::CurDir => {}
            Component::ParentDir => {
                if !out.pop() {
                    out.push("..");
                }
            }
            other => out.push(other),
        }
    }
    out
}

/// A heading's text as GitHub shows it: code marks, emphasis and links' targets taken out.
fn plain(heading: &str) -> String {
    let mut text = String::new();
    let mut rest = heading;
    while let Some(at) = rest.find("](") {
        let (before, after) = rest.split_at(at);
        text.push_str(&before.replacen('[', "", 1));
        rest = after[2..].split_once(')').map_or("", |(_, tail)| tail);
    }
    text.push_str(rest);
    text.chars()
        .filter(|c| *c != '`' && *c != '*')
        .collect::<String>()
        .trim()
        .to_string()
}

/// GitHub's anchor of a heading: lower case, punctuation but `-` and `_` dropped, each space a `-`.
fn slug(heading: &str) -> String {
    plain(heading)
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

/// `line` without its code spans (text between runs of as many backticks).
fn without_code_spans(line: &str) -> String {
    let mut out = String::new();
    let mut rest = line;
    while let Some(at) = rest.find('`') {
        out.push_str(&rest[..at]);
        let run = rest[at..].chars().take_while(|c| *c == '`').count();
        let marks = "`".repeat(run);
        let after = &rest[at + run..];
        match after.find(&marks) {
            Some(end) => rest = &after[end + run..],
            None => {
                out.push_str(&rest[at..]);
                return out;
            }
        }
    }
    out.push_str(rest);
    out
}

/// What a markdown page offers and points at.
#[derive(Debug, Default)]
struct Page {
    /// The headings' titles (plain text), in order.
    titles: Vec<String>,
    /// The headings' anchors, duplicates numbered as GitHub numbers them (`-1`, `-2`, ...).
    anchors: BTreeSet<String>,
    /// Each link's line number and target, as written.
    links: Vec<(usize, String)>,
}

/// Reads the headings and links of a markdown text, outside fenced code and code spans.
fn parse(text: &str) -> Page {
    let mut page = Page::default();
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    let mut fence: Option<&str> = None;
    for (n, line) in text.lines().enumerate() {
        let trimmed = line.trim_start();
        for marks in ["```", "~~~"] {
            if trimmed.starts_with(marks) {
                fence = match fence {
                    None => Some(marks),
                    Some(open) if open == marks => None,
                    other => other,
                };
            }
        }
        if fence.is_some() || trimmed.starts_with("```") || trimmed.starts_with("~~~") {
            continue;
        }
        let level = line.chars().take_while(|c| *c == '#').count();
        if (1..=6).contains(&level) && line[level..].starts_with(' ') {
            let title = line[level..].trim().trim_end_matches('#').trim();
            let base = slug(title);
            let count = seen.entry(base.clone()).or_insert(0);
            let anchor = match *count {
                0 => base.clone(),
                k => format!("{base}-{k}"),
            };
            *count += 1;
            page.titles.push(plain(title));
            page.anchors.insert(anchor);
        }
        let code_free = without_code_spans(line);
        let mut rest = code_free.as_str();
        while let Some(at) = rest.find("](") {
            rest = &rest[at + 2..];
            let mut depth = 0;
            let end = rest
                .char_indices()
                .find(|&(_, c)| match c {
                    '(' => {
                        depth += 1;
                        false
                    }
                    ')' if depth == 0 => true,
                    ')' => {
                        depth -= 1;
                        false
                    }
                    _ => false,
                })
                .map_or(rest.len(), |(i, _)| i);
            let inside = rest[..end].trim();
            let target = match inside.strip_prefix('<') {
                Some(bracketed) => bracketed.split('>').next().unwrap_or(""),
                None => inside.split_whitespace().next().unwrap_or(""),
            };
            page.links.push((n + 1, target.to_string()));
            rest = &rest[end..];
        }
        // Reference definitions: `[label]: target`.
        if let Some(definition) = trimmed.strip_prefix('[') {
            if let Some((_, target)) = definition.split_once("]: ") {
                if let Some(target) = target.split_whitespace().next() {
                    page.links.push((n + 1, target.to_string()));
                }
            }
        }
    }
    page
}

/// Whether a link leaves the repository (a URL, or an address of a site).
fn is_external(target: &str) -> bool {
    target.contains("://") || target.starts_with("mailto:") || target.starts_with("//")
}

/// Every markdown page of the repository, parsed, by its path from the root.
fn parsed_pages() -> BTreeMap<PathBuf, Page> {
    pages()
        .into_iter()
        .map(|p| {
            let text = std::fs::read_to_string(root().join(&p)).unwrap();
            (p, parse(&text))
        })
        .collect()
}

/// The file a relative link of `page` names, from the root, and its anchor.
fn resolve(page: &Path, target: &str) -> (PathBuf, Option<String>) {
    let (path, anchor) = match target.split_once('#') {
        Some((path, anchor)) => (path, Some(anchor.to_string())),
        None => (target, None),
    };
    let file = if path.is_empty() {
        page.to_path_buf()
    } else {
        normal(&page.parent().unwrap_or(Path::new("")).join(path))
    };
    (file, anchor)
}

#[test]
fn the_readme_opens_the_manual_in_few_lines() {
    let readme = std::fs::read_to_string(root().join("README.md")).unwrap();
    let lines = readme.lines().count();
    assert!(
        lines <= README_LINES,
        "README.md has {lines} lines, more than {README_LINES}: move the rest into a page of docs/ \
         and link it from README.md"
    );
}

#[test]
fn every_relative_link_points_at_a_file_and_a_heading_it_has() {
    let pages = parsed_pages();
    let mut broken = Vec::new();
    for (path, page) in &pages {
        for (line, target) in &page.links {
            if is_external(target) || target.is_empty() {
                continue;
            }
            let (file, anchor) = resolve(path, target);
            let at = format!("{}:{line}", path.display());
            if !root().join(&file).exists() {
                broken.push(format!("{at}: {target}: there is no {}", file.display()));
                continue;
            }
            let Some(anchor) = anchor.filter(|a| !a.is_empty()) else {
                continue;
            };
            match pages.get(&file) {
                Some(target_page) if !target_page.anchors.contains(&anchor) => {
                    broken.push(format!(
                        "{at}: {target}: {} has no heading #{anchor}",
                        file.display()
                    ))
                }
                Some(_) => {}
                None => broken.push(format!(
                    "{at}: {target}: #{anchor} of a file that is not a markdown page"
                )),
            }
        }
    }
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

#[test]
fn every_page_is_reachable_from_the_readme() {
    let pages = parsed_pages();
    let start = PathBuf::from("README.md");
    let mut reached = BTreeSet::from([start.clone()]);
    let mut queue = VecDeque::from([start]);
    while let Some(path) = queue.pop_front() {
        for (_, target) in &pages[&path].links {
            if is_external(target) {
                continue;
            }
            let (file, _) = resolve(&path, target);
            if pages.contains_key(&file) && reached.insert(file.clone()) {
                queue.push_back(file);
            }
        }
    }
    let unreached: Vec<String> = pages
        .keys()
        .filter(|p| !reached.contains(*p))
        .map(|p| p.display().to_string())
        .collect();
    assert!(
        unreached.is_empty(),
        "no chain of relative links from README.md reaches {unreached:?}: link each from \
         README.md's \"Where to read next\" or from a page it reaches"
    );
}

#[test]
fn the_summary_lists_every_page_of_docs_and_nothing_else() {
    let summary = PathBuf::from("docs/SUMMARY.md");
    let pages = parsed_pages();
    let listed: BTreeSet<PathBuf> = pages[&summary]
        .links
        .iter()
        .filter(|(_, target)| !is_external(target))
        .map(|(_, target)| resolve(&summary, target).0)
        .collect();
    let in_docs: BTreeSet<PathBuf> = pages
        .keys()
        .filter(|p| p.starts_with("docs") && **p != summary)
        .cloned()
        .collect();
    let unlisted: Vec<_> = in_docs.difference(&listed).collect();
    let missing: Vec<_> = listed.difference(&in_docs).collect();
    assert!(
        unlisted.is_empty(),
        "docs/SUMMARY.md does not list {unlisted:?}: add a line `- [Title](page.md)` for each"
    );
    assert!(
        missing.is_empty(),
        "docs/SUMMARY.md lists {missing:?}, which are not pages of docs/"
    );
}

/// The page a name refers to (`README`, `docs/ARCHITECTURE.md`, `policies.md`, ...), as a path
/// from the root, when `file` names one: relative to `file`'s directory, else to the root.
fn named_page(file: &Path, name: &str) -> Option<PathBuf> {
    let name = match name {
        "README" => "README.md",
        "ARCHITECTURE" => "docs/ARCHITECTURE.md",
        "RELIABILITY" => "RELIABILITY.md",
        "BENCHMARKS" => "BENCHMARKS.md",
        name if name.ends_with(".md") => name,
        _ => return None,
    };
    let near = normal(&file.parent().unwrap_or(Path::new("")).join(name));
    if root().join(&near).is_file() {
        return Some(near);
    }
    Some(normal(Path::new(name)))
}

/// A name's characters: paths and words.
fn is_name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || "_./-".contains(c)
}

/// `text` as one line: each line without its indentation and comment marks, joined by spaces, so
/// that a reference wrapped over two comment lines reads as one. With each line's start.
fn flatten(text: &str) -> (String, Vec<usize>) {
    let mut flat = String::new();
    let mut starts = Vec::new();
    for line in text.lines() {
        let mut line = line.trim_start();
        for mark in ["//!", "///", "//", "#"] {
            if let Some(rest) = line.strip_prefix(mark) {
                line = rest;
                break;
            }
        }
        starts.push(flat.len());
        flat.push_str(line.trim());
        flat.push(' ');
    }
    (flat, starts)
}

/// The sections `text` names: (line, page name, anchor or title, whether it is a title).
fn section_references(text: &str) -> Vec<(usize, String, String, bool)> {
    let (flat, starts) = flatten(text);
    let line_of = |at: usize| starts.partition_point(|&s| s <= at);
    let name_before = |at: usize| -> String {
        let name: String = flat[..at]
            .chars()
            .rev()
            .take_while(|c| is_name_char(*c))
            .collect();
        name.chars().rev().collect()
    };
    let mut found = Vec::new();
    // A page's path, then `#` and an anchor.
    for (at, _) in flat.match_indices(".md#") {
        let name = name_before(at + 3);
        let anchor: String = flat[at + 4..]
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '-' || *c == '_')
            .collect();
        let start = at + 3 - name.len();
        let url = flat[..start].ends_with(':') || name.starts_with("//");
        if name.len() > 3 && !anchor.is_empty() && !url {
            found.push((line_of(at), name, anchor, false));
        }
    }
    // A title in double quotes after a page's name and `'s` or a comma.
    for joint in ["'s ", ", "] {
        for (at, _) in flat.match_indices(joint) {
            let name = name_before(at);
            let after = &flat[at + joint.len()..];
            let (open, close) = if after.starts_with("\\\"") {
                ("\\\"", "\\\"")
            } else if after.starts_with('"') {
                ("\"", "\"")
            } else if after.starts_with('\u{201c}') {
                ("\u{201c}", "\u{201d}")
            } else {
                continue;
            };
            let quoted = &after[open.len()..];
            let Some(end) = quoted.find(close) else {
                continue;
            };
            let title = &quoted[..end];
            if named_page(Path::new(""), &name).is_some() && !title.is_empty() && end < 120 {
                found.push((line_of(at), name, title.to_string(), true));
            }
        }
    }
    found
}

#[test]
fn every_section_a_file_names_exists() {
    let pages = parsed_pages();
    let mut dangling = Vec::new();
    for file in repository_files() {
        let Ok(text) = std::fs::read_to_string(root().join(&file)) else {
            continue; // not text
        };
        for (line, name, section, is_title) in section_references(&text) {
            let at = format!("{}:{line}", file.display());
            let page = named_page(&file, &name).unwrap();
            let Some(target) = pages.get(&page) else {
                dangling.push(format!("{at}: {name}: there is no page {}", page.display()));
                continue;
            };
            let exists = if is_title {
                let wanted = plain(&section).to_lowercase();
                target.titles.iter().any(|t| t.to_lowercase() == wanted)
            } else {
                target.anchors.contains(&section)
            };
            if !exists {
                let what = if is_title {
                    format!("section {section:?}")
                } else {
                    format!("heading #{section}")
                };
                dangling.push(format!(
                    "{at}: {} has no {what}; point it at where the text is now",
                    page.display()
                ));
            }
        }
    }
    assert!(
        dangling.is_empty(),
        "sections named that do not exist:\n{}",
        dangling.join("\n")
    );
}

#[test]
fn anchors_are_githubs() {
    let page = parse(
        "# ebb — architecture\n## The control plane: `ebb tick` and `ebb serve`\n\
         ## Replay: what a policy would save\n## Notes\n```\n## Not a heading\n```\n## Notes\n\
         ### [Linked](elsewhere.md) *title*\n#hashtag\n",
    );
    let anchors: Vec<&str> = page.anchors.iter().map(String::as_str).collect();
    assert_eq!(
        anchors,
        [
            "ebb--architecture",
            "linked-title",
            "notes",
            "notes-1",
            "replay-what-a-policy-would-save",
            "the-control-plane-ebb-tick-and-ebb-serve",
        ]
    );
    assert_eq!(page.titles[1], "The control plane: ebb tick and ebb serve");
}

#[test]
fn links_are_read_outside_code() {
    // Built at run time, so that this file names no section itself.
    let page = parse(&format!(
        "See [a]({}#x), ![b](img/b.png \"title\") and `[c](c.md)`.\n\
         ```\n[d](d.md)\n```\n[e]: e.md\n[f](<f g.md>) [h](https://example.com/h.md)\n",
        "a.md"
    ));
    let targets: Vec<&str> = page.links.iter().map(|(_, t)| t.as_str()).collect();
    assert_eq!(targets[0], format!("{}#x", "a.md"));
    assert_eq!(
        targets[1..],
        ["img/b.png", "e.md", "f g.md", "https://example.com/h.md"]
    );
    assert!(is_external(targets[4]));
    let page = Path::new("docs/testing.md");
    assert_eq!(
        resolve(page, &format!("../{}#{}", "README.md", "status")),
        (PathBuf::from("README.md"), Some("status".to_string()))
    );
    assert_eq!(
        resolve(page, "#here"),
        (PathBuf::from("docs/testing.md"), Some("here".to_string()))
    );
}

#[test]
fn section_references_are_found_in_comments_and_prose() {
    // Built at run time, so that this file names no section itself.
    let text = [
        format!("/// as {}'s \"{}", "README", "The two"),
        "/// commands\" and more".to_string(),
        format!("# (see {}#{})", "docs/settings.md", "settings"),
        format!("{}, \"{}\"", "RELIABILITY.md", "How to run"),
        format!("\"see {}'s \\\"{}\\\"\"", "docs/aws.md", "IAM"),
        format!("https://example.com/{}#{}", "README.md", "status"),
        format!(
            "{}'s \"{}\" and Bob's \"{}\"",
            "ARCHITECTURE", "Module map", "x"
        ),
    ]
    .join("\n");
    let references = section_references(&text);
    let found: Vec<(usize, &str, &str, bool)> = references
        .iter()
        .map(|(l, n, s, t)| (*l, n.as_str(), s.as_str(), *t))
        .collect();
    assert_eq!(
        found,
        [
            (3, "docs/settings.md", "settings", false),
            (1, "README", "The two commands", true),
            (5, "docs/aws.md", "IAM", true),
            (7, "ARCHITECTURE", "Module map", true),
            (4, "RELIABILITY.md", "How to run", true),
        ]
    );
}
