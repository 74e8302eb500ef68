//! The shape docs/ARCHITECTURE.md promises, checked on the source itself: the top-level modules
//! of `src/` import each other without cycles, and only as the module map's "may import" column
//! allows; the files of every folder import each other without cycles (judged by the
//! `crate::`, `super::` and `self::` paths of their code); the pure core imports only pure
//! modules and does no I/O but loading the policy files; `main.rs` stays thin, no source file
//! grows past 650 lines outside its test module, every document the code and docs point at is
//! in the repository, only the command line (`src/cli`) reads the environment, each setting
//! defined there once, and log messages are fixed strings with the errors as fields.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The crates of the workspace, as the root Cargo.toml's `members` lists them (`.` the root).
pub(crate) fn workspace_members() -> Vec<String> {
    let manifest = std::fs::read_to_string(root().join("Cargo.toml")).unwrap();
    let line = manifest
        .lines()
        .find(|l| l.starts_with("members = ["))
        .expect("Cargo.toml: a [workspace] with members on one line");
    line.split('"')
        .skip(1)
        .step_by(2)
        .map(str::to_string)
        .collect()
}

/// The `src/` folder of each crate of the workspace: one module tree, since the application
/// re-exports the other crates' modules at the paths it names them by.
fn source_roots() -> Vec<PathBuf> {
    workspace_members()
        .iter()
        .map(|member| root().join(member).join("src"))
        .collect()
}

/// Every `.rs` file of the workspace's crates.
fn source_files() -> Vec<PathBuf> {
    source_roots().iter().flat_map(|r| rust_files(r)).collect()
}

/// The source file or folder of module `path` (`["policy", "load"]`), in whichever crate has it.
fn module_location(path: &str) -> PathBuf {
    source_roots()
        .into_iter()
        .map(|r| r.join(path))
        .find(|p| p.exists() || p.with_extension("rs").exists())
        .unwrap_or_else(|| root().join("src").join(path))
}

/// Every `.rs` file under `dir`.
pub(crate) fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            files.extend(rust_files(&path));
        } else if path.extension().is_some_and(|e| e == "rs") {
            files.push(path);
        }
    }
    files.sort();
    files
}

/// The code of a file before its `#[cfg(test)]` module.
fn code(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap();
    match text.find("#[cfg(test)]") {
        Some(at) => text[..at].to_string(),
        None => text,
    }
}

/// A file's module path from its crate's root: `["store", "audit"]` for src/store/audit.rs,
/// `["store"]` for src/store/mod.rs (and for src/reconcile/act.rs, `["reconcile", "act"]`, the
/// root of src/reconcile/act/), none for lib.rs.
fn module_path(path: &Path) -> Vec<String> {
    let relative = source_roots()
        .iter()
        .find_map(|r| path.strip_prefix(r).ok())
        .unwrap_or_else(|| panic!("{} is in no crate's src/", path.display()))
        .to_path_buf();
    let mut segments: Vec<String> = relative
        .iter()
        .map(|c| c.to_str().unwrap().to_string())
        .collect();
    let file = segments.pop().unwrap();
    if file != "mod.rs" && file != "lib.rs" {
        segments.push(file.trim_end_matches(".rs").to_string());
    }
    segments
}

/// `code` without its comment lines: a doc link names a module, but does not import it.
fn without_comments(code: &str) -> String {
    code.lines()
        .filter(|l| !l.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Reads paths and `use` trees, from a byte offset of a text.
struct PathReader<'a> {
    text: &'a [u8],
    at: usize,
}

impl PathReader<'_> {
    fn skip_space(&mut self) {
        while self.text.get(self.at).is_some_and(u8::is_ascii_whitespace) {
            self.at += 1;
        }
    }

    fn eat(&mut self, token: &str) -> bool {
        let found = self.text[self.at..].starts_with(token.as_bytes());
        if found {
            self.at += token.len();
        }
        found
    }

    fn ident(&mut self) -> Option<String> {
        let start = self.at;
        while self
            .text
            .get(self.at)
            .is_some_and(|c| c.is_ascii_alphanumeric() || *c == b'_')
        {
            self.at += 1;
        }
        (self.at > start).then(|| String::from_utf8_lossy(&self.text[start..self.at]).into_owned())
    }

    /// Reads one path, or one `use` tree with its groups, each path after `path` into `out`.
    fn tree(&mut self, mut path: Vec<String>, out: &mut Vec<Vec<String>>) {
        loop {
            if self.eat("*") {
                break;
            }
            if self.eat("{") {
                loop {
                    self.skip_space();
                    let before = self.at;
                    if self.at >= self.text.len() || self.eat("}") {
                        return;
                    }
                    self.tree(path.clone(), out);
                    self.skip_space();
                    if self.eat("as ") {
                        self.skip_space();
                        self.ident();
                        self.skip_space();
                    }
                    self.eat(",");
                    if self.at == before {
                        // Not a group this reader knows: what it read so far stands.
                        return;
                    }
                }
            }
            match self.ident() {
                Some(segment) => path.push(segment),
                None => break,
            }
            if !self.eat("::") {
                break;
            }
        }
        out.push(path);
    }
}

/// The paths `code` names from `crate::`, `super::` and `self::`, as written, with `use` groups
/// expanded: `use super::{a, b::{self, C}}` names `super::a`, `super::b::self` and `super::b::C`.
fn named_paths(code: &str) -> Vec<Vec<String>> {
    let text = code.as_bytes();
    let mut paths = Vec::new();
    let mut at = 0;
    while at < text.len() {
        let starts = ["crate::", "super::", "self::", "ebb_core::", "ebb_cloud::"]
            .iter()
            .any(|p| text[at..].starts_with(p.as_bytes()));
        let inside_a_word = at > 0 && {
            let c = text[at - 1];
            c.is_ascii_alphanumeric() || c == b'_' || c == b':'
        };
        if starts && !inside_a_word {
            let mut reader = PathReader { text, at };
            reader.tree(Vec::new(), &mut paths);
            at = reader.at.max(at + 1);
        } else {
            at += 1;
        }
    }
    paths
}

/// `written`, a path named in module `module`, from the crate root (`self` segments dropped);
/// `None` for a path that is not `crate::`, `super::` or `self::`, or climbs above the root.
fn absolute(module: &[String], written: &[String]) -> Option<Vec<String>> {
    let (mut path, rest) = match written.first()?.as_str() {
        // The other crates' modules are re-exported at the same paths: one tree.
        "crate" | "ebb_core" | "ebb_cloud" => (Vec::new(), &written[1..]),
        "self" => (module.to_vec(), &written[1..]),
        "super" => {
            let climbs = written.iter().take_while(|s| *s == "super").count();
            let mut path = module.to_vec();
            for _ in 0..climbs {
                path.pop()?;
            }
            (path, &written[climbs..])
        }
        _ => return None,
    };
    path.extend(rest.iter().filter(|s| *s != "self").cloned());
    Some(path)
}

/// For each item a module's root file brings in from one of its child modules with `use`
/// (`pub use audit::{AuditFilter, ..}` in src/store/mod.rs), that child: what `super::AuditFilter`
/// in a file of the folder names.
fn brought_in(
    module: &[String],
    root_code: &str,
    children: &BTreeSet<String>,
) -> BTreeMap<String, String> {
    let mut found = BTreeMap::new();
    for line in root_code.lines() {
        let line = line.trim_start();
        let Some(at) = line.find("use ") else {
            continue;
        };
        if !matches!(&line[..at], "" | "pub " | "pub(crate) " | "pub(super) ") {
            continue;
        }
        let text = root_code.as_bytes();
        let offset = line.as_ptr() as usize - root_code.as_ptr() as usize + at + "use ".len();
        let mut paths = Vec::new();
        PathReader { text, at: offset }.tree(Vec::new(), &mut paths);
        for written in paths {
            let path = match written.first().map(String::as_str) {
                Some("crate" | "self" | "super" | "ebb_core" | "ebb_cloud") => {
                    absolute(module, &written)
                }
                _ => Some(module.iter().chain(&written).cloned().collect()),
            };
            let Some(path) = path.filter(|p| p.len() > module.len() + 1 && p.starts_with(module))
            else {
                continue;
            };
            if children.contains(&path[module.len()]) {
                found.insert(path.last().unwrap().clone(), path[module.len()].clone());
            }
        }
    }
    found
}

/// A graph: node → the nodes it imports.
type Graph = BTreeMap<String, BTreeSet<String>>;

/// The import graph of each folder (module) of `code`, a module path → code map: its nodes
/// are the folder's child modules (a file, a folder, or `foo.rs` with `foo/` as one), and a
/// node imports another when any of its files names it by `crate::`, `super::` or `self::`,
/// directly or through an item the folder's root file brings in from it with `use`. The root
/// file (mod.rs, foo.rs of `foo/`, lib.rs) is the folder's own: its files may use it and it
/// uses them, so it is no node.
fn folder_graphs_of(code: &BTreeMap<Vec<String>, String>) -> BTreeMap<Vec<String>, Graph> {
    let mut graphs: BTreeMap<Vec<String>, Graph> = BTreeMap::new();
    for module in code.keys() {
        for depth in 0..module.len() {
            let folder = module[..depth].to_vec();
            graphs
                .entry(folder)
                .or_default()
                .entry(module[depth].clone())
                .or_default();
        }
    }
    let brought: BTreeMap<Vec<String>, BTreeMap<String, String>> = graphs
        .iter()
        .map(|(folder, graph)| {
            let children = graph.keys().cloned().collect();
            let root_code = code.get(folder).map_or("", String::as_str);
            (folder.clone(), brought_in(folder, root_code, &children))
        })
        .collect();
    for (module, text) in code {
        for written in named_paths(&without_comments(text)) {
            let Some(target) = absolute(module, &written) else {
                continue;
            };
            let common = module
                .iter()
                .zip(&target)
                .take_while(|(a, b)| a == b)
                .count();
            // From the folder's root file, or naming the root itself.
            let (Some(from), Some(named)) = (module.get(common), target.get(common)) else {
                continue;
            };
            let folder = &module[..common];
            let graph = graphs.get_mut(folder).unwrap();
            let to = if graph.contains_key(named) {
                named.clone()
            } else if let Some(child) = brought[folder].get(named) {
                child.clone()
            } else {
                // An item of the root file.
                continue;
            };
            if &to != from {
                graph.get_mut(from).unwrap().insert(to);
            }
        }
    }
    graphs
}

/// The import graph of each folder of the crates' `src/`, from their files' code before their
/// test modules. The crates' lib.rs files are one root file.
fn folder_graphs() -> BTreeMap<Vec<String>, Graph> {
    let mut code: BTreeMap<Vec<String>, String> = BTreeMap::new();
    for file in source_files()
        .into_iter()
        .filter(|f| !f.ends_with("src/main.rs"))
    {
        let text = code.entry(module_path(&file)).or_default();
        text.push_str(&without_comments(&self::code(&file)));
        text.push('\n');
    }
    folder_graphs_of(&code)
}

/// The top-level module graph: module → the modules it imports.
fn module_graph() -> Graph {
    folder_graphs().remove(&Vec::new()).unwrap()
}

/// The files of `folder`'s node `node`: `src/store/audit.rs`, `src/reconcile/act.rs + act/`.
fn node_files(folder: &[String], node: &str) -> String {
    let mut relative: Vec<&str> = folder.iter().map(String::as_str).collect();
    relative.push(node);
    let base = module_location(&relative.join("/"));
    let file = base.with_extension("rs");
    let name = |p: &Path| p.strip_prefix(root()).unwrap().display().to_string();
    match (file.exists(), base.is_dir()) {
        (true, true) => format!("{} + {node}/", name(&file)),
        (false, true) => format!("{}/", name(&base)),
        _ => name(&file),
    }
}

/// A cycle of `graph`, as the path that closes it, if there is one.
fn find_cycle(graph: &Graph) -> Option<Vec<String>> {
    fn visit(
        node: &str,
        graph: &Graph,
        path: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) -> Option<Vec<String>> {
        if let Some(at) = path.iter().position(|n| n == node) {
            let mut cycle = path[at..].to_vec();
            cycle.push(node.to_string());
            return Some(cycle);
        }
        if done.contains(node) {
            return None;
        }
        path.push(node.to_string());
        for next in graph.get(node).into_iter().flatten() {
            if let Some(cycle) = visit(next, graph, path, done) {
                return Some(cycle);
            }
        }
        path.pop();
        done.insert(node.to_string());
        None
    }
    let mut done = BTreeSet::new();
    graph
        .keys()
        .find_map(|node| visit(node, graph, &mut Vec::new(), &mut done))
}

/// The cycles of `graph`: one, then another once an import of each found is taken away, until
/// none is left.
fn cycles(graph: &Graph) -> Vec<Vec<String>> {
    let mut graph = graph.clone();
    let mut found = Vec::new();
    while let Some(cycle) = find_cycle(&graph) {
        graph.get_mut(&cycle[0]).unwrap().remove(&cycle[1]);
        found.push(cycle);
    }
    found
}

/// A row of docs/ARCHITECTURE.md's module map.
#[derive(Debug)]
struct MapRow {
    /// The module.
    module: String,
    /// Its "may import" cell, as written.
    cell: String,
    /// The modules the cell names, parenthesised notes left aside.
    named: BTreeSet<String>,
    /// The modules the cell allows it to import.
    allowed: BTreeSet<String>,
    /// The crate it is in (the last column).
    krate: String,
}

/// docs/ARCHITECTURE.md's module map, lowest first. A "may import" cell is `—`, a list of
/// modules, `everything` (every module above) or `everything above but` a list; parenthesised
/// notes are left aside.
fn module_map() -> Vec<MapRow> {
    let doc = std::fs::read_to_string(root().join("docs/ARCHITECTURE.md")).unwrap();
    let mut map: Vec<MapRow> = Vec::new();
    for line in doc.lines().filter(|l| l.starts_with("| `")) {
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        let (module, cell) = (cells[1].trim_matches('`').to_string(), cells[3]);
        let mut plain = String::new();
        let mut depth = 0;
        for c in cell.chars() {
            match c {
                '(' => depth += 1,
                ')' => depth -= 1,
                c if depth == 0 => plain.push(c),
                _ => {}
            }
        }
        let plain = plain.trim();
        let pieces: Vec<&str> = plain.split('`').collect();
        let named: BTreeSet<String> = pieces
            .iter()
            .skip(1)
            .step_by(2)
            .map(|s| s.to_string())
            .collect();
        let between: Vec<&str> = pieces.iter().step_by(2).map(|s| s.trim()).collect();
        let above: BTreeSet<String> = map.iter().map(|row| row.module.clone()).collect();
        let allowed = match between.as_slice() {
            ["—"] => BTreeSet::new(),
            ["everything" | "everything above"] => above,
            ["everything above but", rest @ ..]
                if rest.iter().all(|s| ["", ",", "and"].contains(s)) =>
            {
                above.difference(&named).cloned().collect()
            }
            between if !named.is_empty() && between.iter().all(|s| ["", ",", "and"].contains(s)) => {
                named.clone()
            }
            _ => panic!(
                "docs/ARCHITECTURE.md: {module}'s \"may import\" cell {cell:?} is not `—`, a list of modules, `everything` or `everything above but` a list"
            ),
        };
        let krate = cells.get(4).map_or("", |c| c.trim_matches('`')).to_string();
        map.push(MapRow {
            module,
            cell: cell.to_string(),
            named,
            allowed,
            krate,
        });
    }
    assert!(map.len() > 10, "docs/ARCHITECTURE.md's module map: {map:?}");
    map
}

#[test]
fn the_top_level_modules_import_each_other_without_cycles() {
    let graph = module_graph();
    assert!(graph.len() > 10, "{graph:?}");
    assert_eq!(find_cycle(&graph), None, "{graph:#?}");
}

#[test]
fn the_files_of_each_folder_import_each_other_without_cycles() {
    let graphs = folder_graphs();
    let imports: usize = graphs
        .iter()
        .filter(|(folder, _)| !folder.is_empty())
        .flat_map(|(_, graph)| graph.values())
        .map(BTreeSet::len)
        .sum();
    assert!(graphs.len() > 10 && imports > 20, "{graphs:#?}");
    let mut found = Vec::new();
    for (folder, graph) in &graphs {
        for cycle in cycles(graph) {
            let files: Vec<String> = cycle.iter().map(|n| node_files(folder, n)).collect();
            found.push(files.join(" -> "));
        }
    }
    assert!(
        found.is_empty(),
        "files of one folder import each other in a cycle; move what both need into a file \
         that imports neither:\n{}",
        found.join("\n")
    );
}

#[test]
fn each_module_imports_only_those_above_it_in_the_architecture_map() {
    let order: Vec<String> = module_map().into_iter().map(|row| row.module).collect();
    let graph = module_graph();
    for (module, imports) in &graph {
        let at = order
            .iter()
            .position(|m| m == module)
            .unwrap_or_else(|| panic!("docs/ARCHITECTURE.md's module map lacks {module}"));
        for import in imports {
            let above = order[..at].contains(import);
            assert!(
                above,
                "{module} imports {import}, which is not above it in the map"
            );
        }
    }
}

#[test]
fn each_module_imports_only_what_its_row_of_the_architecture_map_allows() {
    let map = module_map();
    let rows: BTreeSet<&String> = map.iter().map(|row| &row.module).collect();
    let graph = module_graph();
    let mut wrong = Vec::new();
    for row in &map {
        let module = &row.module;
        for name in row.named.iter().filter(|m| !rows.contains(m)) {
            wrong.push(format!("{module}'s cell names {name}, which has no row"));
        }
        let imports = graph.get(module).cloned().unwrap_or_default();
        for import in imports.difference(&row.allowed) {
            wrong.push(format!(
                "{module} imports {import}, which its \"may import\" cell ({}) does not allow: \
                 add it there, or import it no more",
                row.cell
            ));
        }
    }
    assert!(
        wrong.is_empty(),
        "docs/ARCHITECTURE.md's module map:\n{}",
        wrong.join("\n")
    );
}

#[test]
fn the_cycle_finder_finds_cycles() {
    let graph: Graph = [
        ("a", vec!["b"]),
        ("b", vec!["c"]),
        ("c", vec!["a", "d"]),
        ("d", vec!["c"]),
        ("e", vec![]),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.into_iter().map(String::from).collect()))
    .collect();
    let path = |p: &str| p.split(' ').map(String::from).collect::<Vec<String>>();
    assert_eq!(find_cycle(&graph), Some(path("a b c a")));
    assert_eq!(cycles(&graph), [path("a b c a"), path("c d c")]);
}

#[test]
fn imports_are_read_from_paths_and_use_groups() {
    let code = "use crate::{engine, fleet::Instance};\nuse super::{a, b::{self, C as D}, c::*};\n\
                fn f() { super::super::x::y(); self::z::w(); Self::new(); my_crate::q(); }";
    let path = |p: &str| p.split("::").map(String::from).collect::<Vec<String>>();
    assert_eq!(
        named_paths(code),
        [
            "crate::engine",
            "crate::fleet::Instance",
            "super::a",
            "super::b::self",
            "super::b::C",
            "super::c",
            "super::super::x::y",
            "self::z::w",
        ]
        .map(path)
    );
    let module = path("store::audit");
    assert_eq!(
        absolute(&module, &path("super::b::self")),
        Some(path("store::b"))
    );
    assert_eq!(
        absolute(&module, &path("self::z")),
        Some(path("store::audit::z"))
    );
    assert_eq!(absolute(&module, &path("super::super::x")), Some(path("x")));
    assert_eq!(absolute(&module, &path("super::super::super::x")), None);

    // A folder `a` whose root brings `Thing` in from `x`; `y` imports it from the root, and
    // `x/deep.rs` imports `y`: `x` (with its folder) and `y` import each other.
    let files: BTreeMap<Vec<String>, String> = [
        ("", "pub mod a;\npub mod b;"),
        (
            "a",
            "mod x;\nmod y;\npub use x::{Thing, Other};\npub struct Root;",
        ),
        ("a::x", "mod deep;\npub struct Thing;"),
        ("a::x::deep", "use super::super::y::f;\nuse crate::a::Root;"),
        ("a::y", "use super::Thing;\npub fn f() {}"),
        ("b", "// A doc link: [`crate::a::y`]\nuse crate::a::Root;"),
    ]
    .into_iter()
    .map(|(m, code)| {
        let module = if m.is_empty() { Vec::new() } else { path(m) };
        (module, code.to_string())
    })
    .collect();
    let graphs = folder_graphs_of(&files);
    let edges = |folder: &str| -> Vec<(String, String)> {
        let folder = if folder.is_empty() {
            Vec::new()
        } else {
            path(folder)
        };
        graphs[&folder]
            .iter()
            .flat_map(|(from, to)| to.iter().map(move |t| (from.clone(), t.clone())))
            .collect()
    };
    let edge = |a: &str, b: &str| (a.to_string(), b.to_string());
    assert_eq!(edges(""), [edge("b", "a")]);
    assert_eq!(edges("a"), [edge("x", "y"), edge("y", "x")]);
    assert!(edges("a::x").is_empty());
    assert_eq!(cycles(&graphs[&path("a")]), [path("x::y::x")]);
}

#[test]
fn the_pure_core_imports_only_pure_modules() {
    // The decision core does no I/O and takes `now` as an argument: no cloud, store, clock,
    // simulator or control loop.
    let pure = [
        "policy",
        "schedule",
        "engine",
        "fleet",
        "names",
        "when",
        "report",
        "spreadsheet",
        "budget",
    ];
    let graph = module_graph();
    // `replay` runs the engine on virtual time, and is as pure.
    // `report` works out savings from the store's history, which it is handed (and replay
    // prices its hours under commitments with `report::money`); `budget` works out where each
    // budget stands from what ran, which it is handed too.
    for module in [
        "policy", "schedule", "engine", "fleet", "replay", "report", "budget",
    ] {
        let impure: Vec<&String> = graph[module]
            .iter()
            .filter(|m| !pure.contains(&m.as_str()))
            .collect();
        assert!(impure.is_empty(), "{module} imports {impure:?}");
    }
}

#[test]
fn the_pure_core_does_no_io_but_loading_the_policy_files() {
    // Reading the policy files, and asking git for their commit, is the pure core's one I/O,
    // kept in two files; the model, its checks and every decision do none, and take `now`.
    let loaders = ["policy/load.rs", "policy/source.rs"];
    let io = [
        "std::fs",
        "std::process",
        "std::net",
        "std::env",
        "tokio::",
        "Utc::now",
        "SystemTime",
        "Instant::now",
    ];
    let mut found = Vec::new();
    for module in [
        "policy", "schedule", "engine", "fleet", "names", "when", "replay", "report",
    ] {
        let dir = module_location(module);
        let files = match dir.is_dir() {
            true => rust_files(&dir),
            false => vec![dir.with_extension("rs")],
        };
        for file in files
            .iter()
            .filter(|f| !loaders.iter().any(|l| f.ends_with(l)))
        {
            let code = without_comments(&code(file));
            for name in io.iter().filter(|name| code.contains(*name)) {
                found.push(format!("{} uses {name}", file.display()));
            }
        }
    }
    assert!(found.is_empty(), "{found:#?}");
}

#[test]
fn main_is_thin_and_files_stay_small() {
    let main = std::fs::read_to_string(root().join("src/main.rs")).unwrap();
    assert!(main.lines().count() <= 300, "src/main.rs is too long");
    let mut too_long = Vec::new();
    for file in source_files() {
        // The JSON Schema literal may stay whole.
        if file.ends_with("policy/schema.rs") {
            continue;
        }
        let lines = code(&file).lines().count();
        if lines > 650 {
            too_long.push(format!("{}: {lines}", file.display()));
        }
    }
    assert!(too_long.is_empty(), "over 650 lines: {too_long:?}");
}

#[test]
fn documents_referred_to_are_in_the_repository() {
    let mut files = source_files();
    files.extend(rust_files(&root().join("tests")));
    files.extend(rust_files(&root().join("benches")));
    for other in [
        "README.md",
        "BENCHMARKS.md",
        "RELIABILITY.md",
        "docs/ARCHITECTURE.md",
        "Cargo.toml",
    ] {
        files.push(root().join(other));
    }
    for dir in ["deploy", "scripts", "policies"] {
        for entry in std::fs::read_dir(root().join(dir)).unwrap() {
            let path = entry.unwrap().path();
            if path.is_file() {
                files.push(path);
            }
        }
    }
    let mut dangling = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(&file).unwrap_or_default();
        // The first design lived outside this repository; docs/ARCHITECTURE.md replaced it.
        if text.contains("DESIGN.md") && !file.ends_with("tests/offline/structure.rs") {
            dangling.push(format!("{} names DESIGN.md", file.display()));
        }
        for (dir, ext) in [("docs/", ".md"), ("tests/", ".rs")] {
            for (at, _) in text.match_indices(dir) {
                let name: String = text[at..]
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || "/_.-".contains(*c))
                    .collect();
                let name = name.trim_end_matches('.');
                if name.ends_with(ext) && !root().join(name).exists() {
                    dangling.push(format!("{} names {name}", file.display()));
                }
            }
        }
    }
    assert!(dangling.is_empty(), "{dangling:#?}");
}

#[test]
fn integration_tests_are_modules_of_a_few_targets() {
    // Each test target links ebb and the AWS SDK anew: a file directly in tests/ would be one
    // more. A test file goes into the target of the services it needs (tests/*/main.rs).
    let mut loose = Vec::new();
    let mut targets = Vec::new();
    for entry in std::fs::read_dir(root().join("tests")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "rs") {
            loose.push(path.display().to_string());
        } else if path.join("main.rs").exists() {
            targets.push(path.display().to_string());
        }
    }
    assert!(loose.is_empty(), "test files outside a target: {loose:?}");
    assert!(targets.len() <= 10, "too many test targets: {targets:?}");
}

#[test]
fn only_the_test_layers_implement_provider() {
    // Each `impl Provider` in the tests is one more place a new Provider method must be added
    // to: faults go through the one layer of tests/common/intercept.rs, as hooks.
    let mut found = Vec::new();
    for file in rust_files(&root().join("tests")) {
        let text = std::fs::read_to_string(&file).unwrap();
        for line in text.lines() {
            let line = line.trim_start();
            let implements = line.starts_with("impl")
                && (line.contains(" Provider for ") || line.contains("::Provider for "));
            if implements && !file.starts_with(root().join("tests/common")) {
                found.push(format!("{}: {line}", file.display()));
            }
        }
    }
    assert!(
        found.is_empty(),
        "Provider implemented outside tests/common (set hooks on common::intercept::Intercept \
         instead): {found:#?}"
    );
}

#[test]
fn only_the_command_line_reads_the_environment() {
    // Settings are clap's (src/cli): the library takes values, so every setting has a flag,
    // a default in one place and a row in docs/settings.md. The AWS SDK and the allocator read
    // their own variables.
    let reads = [
        "env::var",
        "env::vars",
        "from_env(",
        "from_env_lossy(",
        "env::args",
    ];
    let mut found = Vec::new();
    for file in source_files() {
        if file.starts_with(root().join("src/cli")) || file.ends_with("src/main.rs") {
            continue;
        }
        let code = without_comments(&code(&file));
        for read in reads.iter().filter(|r| code.contains(*r)) {
            found.push(format!("{} uses {read}", file.display()));
        }
    }
    assert!(
        found.is_empty(),
        "the environment is read outside src/cli (add a flag with env = \"...\" in src/cli and \
         pass the value in): {found:#?}"
    );
}

#[test]
fn each_setting_is_defined_once() {
    // A variable named by two `#[arg(env = ..)]` attributes has two defaults and two help
    // texts to keep equal: define it in one `clap::Args` struct that the commands flatten.
    let mut defined: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for file in rust_files(&root().join("src/cli")) {
        let code = code(&file);
        for (at, _) in code.match_indices("env = \"") {
            let name: String = code[at + 7..].chars().take_while(|c| *c != '"').collect();
            defined
                .entry(name)
                .or_default()
                .push(file.display().to_string());
        }
    }
    assert!(defined.len() >= 30, "too few settings found: {defined:?}");
    let twice: Vec<_> = defined
        .iter()
        .filter(|(_, files)| files.len() > 1)
        .collect();
    assert!(twice.is_empty(), "defined more than once: {twice:#?}");
}

/// The `tracing` macro calls of `code` whose message is formatted (a string literal holding a
/// `{...}` placeholder), each as its first line.
fn formatted_log_lines(code: &str) -> Vec<String> {
    let mut found = Vec::new();
    for level in ["trace", "debug", "info", "warn", "error"] {
        let call = format!("tracing::{level}!(");
        for (at, _) in code.match_indices(&call) {
            let mut depth = 1;
            let mut end = at + call.len();
            for (i, c) in code[end..].char_indices() {
                match c {
                    '(' => depth += 1,
                    ')' => depth -= 1,
                    _ => {}
                }
                if depth == 0 {
                    end += i;
                    break;
                }
            }
            let body = &code[at..end];
            let formatted = body.split('"').skip(1).step_by(2).any(|literal| {
                literal.split('{').skip(1).any(|rest| {
                    rest.starts_with(|c: char| {
                        c == '}' || c == ':' || c.is_alphanumeric() || c == '_'
                    })
                })
            });
            if formatted {
                found.push(body.lines().next().unwrap_or_default().trim().to_string());
            }
        }
    }
    found
}

#[test]
fn log_lines_carry_errors_as_fields_not_in_the_message() {
    // `tracing::error!(error = %err, "cannot read prices")`: the message is one fixed string to
    // search and count by, and the error a field of its own in the JSON line.
    let sample = "tracing::warn!(region, \"cannot read prices: {err}\");\n\
                  tracing::error!(error = %err, \"cannot read prices\");\n\
                  tracing::info!(\"{}\", x);";
    assert_eq!(formatted_log_lines(sample).len(), 2);
    let mut found = Vec::new();
    for file in source_files() {
        for line in formatted_log_lines(&code(&file)) {
            found.push(format!("{}: {line}", file.display()));
        }
    }
    assert!(
        found.is_empty(),
        "log messages formatted with values (give them as fields: error = %err): {found:#?}"
    );
}

/// The names of the methods a trait's or an impl's block defines, from its opening line (found
/// by `start`) to the first line that closes it at column 0.
fn methods_of_block(text: &str, start: &str) -> BTreeSet<String> {
    let from = text.find(start).unwrap_or_else(|| panic!("no `{start}`"));
    let block = &text[from..];
    let block = &block[..block.find("\n}").unwrap()];
    block
        .split("fn ")
        .skip(1)
        .filter_map(|rest| {
            let name: String = rest
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            (!name.is_empty()).then_some(name)
        })
        .collect()
}

/// The traits of a cloud (`Provider` and each capability trait), by name: the calls each
/// declares (its methods that return a future; `Provider`'s accessors of its capabilities are
/// not calls), after checking that no method has a default body: a default would answer for a
/// cloud (an empty list, a refusal) that does not implement the method.
fn cloud_traits() -> BTreeMap<String, BTreeSet<String>> {
    let mut traits = BTreeMap::new();
    for file in ["cloud/mod.rs", "cloud/capability.rs"] {
        let text = std::fs::read_to_string(module_location(file)).unwrap();
        for (at, _) in text.match_indices("\npub trait ") {
            let block = &text[at + 1..];
            let block = &block[..block.find("\n}").unwrap()];
            let name: String = block["pub trait ".len()..]
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric())
                .collect();
            let body = &block[block.find('{').unwrap() + 1..];
            assert!(
                !body.contains('{'),
                "{file}: a method of trait {name} has a default body; a cloud without the \
                 method must not implement the trait instead"
            );
            let calls: BTreeSet<String> = body
                .split(';')
                .filter(|decl| decl.contains("impl Future"))
                .filter_map(|decl| {
                    let rest = &decl[decl.find("fn ")? + 3..];
                    Some(
                        rest.chars()
                            .take_while(|c| *c == '_' || c.is_ascii_alphanumeric())
                            .collect(),
                    )
                })
                .collect();
            traits.insert(name, calls);
        }
    }
    traits
}

/// The test layer (`tests/common/intercept.rs`) implements `Provider` and every capability
/// trait, and each call of them has its `Method`, so that hooks and faults reach it.
#[test]
fn the_test_layer_intercepts_every_call_of_every_cloud_trait() {
    let traits = cloud_traits();
    assert!(traits.len() >= 6, "{traits:?}");
    assert!(
        traits.values().map(BTreeSet::len).sum::<usize>() > 30,
        "{traits:?}"
    );
    let layer = std::fs::read_to_string(root().join("tests/common/intercept.rs")).unwrap();
    let named: BTreeSet<String> = layer
        .split("=> \"")
        .skip(1)
        .filter_map(|rest| rest.split('"').next().map(str::to_string))
        .collect();
    for (name, calls) in &traits {
        let forwarded = methods_of_block(&layer, &format!(" {name} for Intercept<P> {{"));
        let unforwarded: Vec<&String> = calls.difference(&forwarded).collect();
        assert!(
            unforwarded.is_empty(),
            "{name}: not forwarded by the layer: {unforwarded:?}"
        );
        let unnamed: Vec<&String> = calls.difference(&named).collect();
        assert!(unnamed.is_empty(), "{name}: no Method for: {unnamed:?}");
    }
}

/// What a cloud lacks is a trait its provider does not implement: no source says a call is
/// not available on a cloud, and the clouds without spot moves name `Lacks` for them
/// (`lacks!`).
#[test]
fn no_cloud_refuses_a_call_for_lack_of_the_capability() {
    for file in source_files() {
        let text = std::fs::read_to_string(&file).unwrap();
        for phrase in ["not available on", "is not supported on", "AWS-only"] {
            assert!(
                !text.contains(phrase),
                "{} says \"{phrase}\": a cloud that lacks a capability does not implement its trait",
                file.display()
            );
        }
    }
    for provider in ["cloud/alibaba/provider.rs", "cloud/tencent/provider.rs"] {
        let text = std::fs::read_to_string(module_location(provider)).unwrap();
        assert!(
            text.contains("lacks!(SpotMoves, spot_moves);"),
            "{provider}"
        );
    }
}

/// The engine learns what a cloud can do from the levers it is given, never from which cloud
/// an instance is in.
#[test]
fn the_engine_compares_no_instance_with_a_named_cloud() {
    let engine = module_location("engine/mod.rs");
    for file in rust_files(engine.parent().unwrap()) {
        let text = std::fs::read_to_string(&file).unwrap();
        let code = text.split("#[cfg(test)]").next().unwrap();
        for named in ["Cloud::Aws", "Cloud::Alibaba", "Cloud::Tencent"] {
            assert!(
                !code.contains(named),
                "{} names {named}: give the engine the capability as data (`Fleet::levers`)",
                file.display()
            );
        }
    }
}

/// Each crate of the workspace by its package name: its `src/` folder.
fn crate_sources() -> BTreeMap<String, PathBuf> {
    workspace_members()
        .iter()
        .map(|member| {
            let manifest = std::fs::read_to_string(root().join(member).join("Cargo.toml")).unwrap();
            let name = manifest
                .lines()
                .find_map(|l| l.strip_prefix("name = \""))
                .and_then(|rest| rest.split('"').next())
                .unwrap_or_else(|| panic!("{member}/Cargo.toml has no name"))
                .to_string();
            (name, root().join(member).join("src"))
        })
        .collect()
}

/// The map's last column says where each module is, and the map names every module of every
/// crate: a module moved between crates moves its row's crate too.
#[test]
fn each_module_is_in_the_crate_its_row_of_the_architecture_map_names() {
    let sources = crate_sources();
    assert!(sources.len() >= 3, "{sources:?}");
    let map = module_map();
    let mut wrong = Vec::new();
    for row in &map {
        let Some(src) = sources.get(&row.krate) else {
            wrong.push(format!("{}: no crate {:?}", row.module, row.krate));
            continue;
        };
        let here = src.join(&row.module);
        if !here.is_dir() && !here.with_extension("rs").is_file() {
            wrong.push(format!("{} is not in {}", row.module, src.display()));
        }
    }
    let mapped: BTreeSet<&str> = map.iter().map(|row| row.module.as_str()).collect();
    for top in module_graph().keys() {
        if !mapped.contains(top.as_str()) {
            wrong.push(format!("{top} has no row in the map"));
        }
    }
    assert!(
        wrong.is_empty(),
        "docs/ARCHITECTURE.md's module map: {wrong:#?}"
    );
}

/// The packages of Cargo.lock: each name → the names of its dependencies.
fn locked_packages() -> BTreeMap<String, BTreeSet<String>> {
    let lock = std::fs::read_to_string(root().join("Cargo.lock")).unwrap();
    let mut packages: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for block in lock.split("[[package]]").skip(1) {
        let name = block
            .lines()
            .find_map(|l| l.strip_prefix("name = \""))
            .and_then(|rest| rest.split('"').next())
            .unwrap()
            .to_string();
        let dependencies = block
            .split("dependencies = [")
            .nth(1)
            .map(|list| list.split(']').next().unwrap_or_default())
            .unwrap_or_default()
            .split('"')
            .skip(1)
            .step_by(2)
            // "name version" when two versions of a package are locked.
            .map(|d| d.split(' ').next().unwrap().to_string());
        packages.entry(name).or_default().extend(dependencies);
    }
    packages
}

/// What `cargo tree -p ebb-core` shows, read from Cargo.lock: the core links no cloud SDK, no
/// HTTP stack, no database driver and no async runtime, and none of the crates above it.
#[test]
fn the_core_crate_links_no_cloud_sdk_http_stack_or_database_driver() {
    let packages = locked_packages();
    let mut seen = BTreeSet::new();
    let mut queue = vec!["ebb-core".to_string()];
    while let Some(name) = queue.pop() {
        if seen.insert(name.clone()) {
            queue.extend(packages.get(&name).into_iter().flatten().cloned());
        }
    }
    assert!(
        seen.contains("chrono") && seen.contains("serde_yaml"),
        "{seen:?}"
    );
    let forbidden = [
        "sqlx",
        "reqwest",
        "hyper",
        "axum",
        "tokio",
        "ebb-cloud",
        "ebb",
    ];
    let linked: Vec<&String> = seen
        .iter()
        .filter(|p| p.starts_with("aws-") || forbidden.contains(&p.as_str()))
        .collect();
    assert!(linked.is_empty(), "ebb-core links {linked:?}");
}
