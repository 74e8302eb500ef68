//! The shape docs/ARCHITECTURE.md promises, checked on the source itself: the top-level modules
//! of `src/` import each other without cycles (judged by `crate::` paths), the pure core imports
//! only pure modules, `main.rs` stays thin, no source file grows past 650 lines outside its
//! test module, and every document the code and docs point at is in the repository.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// Every `.rs` file under `dir`.
fn rust_files(dir: &Path) -> Vec<PathBuf> {
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

/// The top-level module a file of `src/` belongs to (`None` for lib.rs and main.rs).
fn module_of(path: &Path) -> Option<String> {
    let relative = path.strip_prefix(root().join("src")).unwrap();
    let first = relative.components().next()?.as_os_str().to_str()?;
    match first {
        "lib.rs" | "main.rs" => None,
        file => Some(file.trim_end_matches(".rs").to_string()),
    }
}

/// The top-level modules `code` names through `crate::`, in paths and in `use crate::{..}`.
fn imports(code: &str) -> BTreeSet<String> {
    let mut found = BTreeSet::new();
    let mut rest = code;
    while let Some(at) = rest.find("crate::") {
        rest = &rest[at + "crate::".len()..];
        if let Some(group) = rest.strip_prefix('{') {
            let end = group.find('}').unwrap_or(group.len());
            for item in group[..end].split(',') {
                let name: String = item
                    .trim()
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect();
                if !name.is_empty() {
                    found.insert(name);
                }
            }
        } else {
            let name: String = rest
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            found.insert(name);
        }
    }
    found
}

/// The top-level module graph: module → the modules it imports.
fn module_graph() -> BTreeMap<String, BTreeSet<String>> {
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for file in rust_files(&root().join("src")) {
        let Some(module) = module_of(&file) else {
            continue;
        };
        let mut used = imports(&code(&file));
        used.remove(&module);
        graph.entry(module).or_default().extend(used);
    }
    graph
}

/// A cycle of `graph`, as the path that closes it, if there is one.
fn find_cycle(graph: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(
        node: &str,
        graph: &BTreeMap<String, BTreeSet<String>>,
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

#[test]
fn the_top_level_modules_import_each_other_without_cycles() {
    let graph = module_graph();
    assert!(graph.len() > 10, "{graph:?}");
    assert_eq!(find_cycle(&graph), None, "{graph:#?}");
}

#[test]
fn each_module_imports_only_those_above_it_in_the_architecture_map() {
    let map = std::fs::read_to_string(root().join("docs/ARCHITECTURE.md")).unwrap();
    // The module map's rows, lowest first: "| `name` | ... |".
    let order: Vec<&str> = map
        .lines()
        .filter_map(|l| {
            l.strip_prefix("| `")?
                .split_once("` |")
                .map(|(name, _)| name)
        })
        .collect();
    let graph = module_graph();
    for (module, imports) in &graph {
        let at = order
            .iter()
            .position(|m| m == module)
            .unwrap_or_else(|| panic!("docs/ARCHITECTURE.md's module map lacks {module}"));
        for import in imports {
            let above = order[..at].contains(&import.as_str());
            assert!(
                above,
                "{module} imports {import}, which is not above it in the map"
            );
        }
    }
}

#[test]
fn the_cycle_finder_finds_cycles() {
    let graph: BTreeMap<String, BTreeSet<String>> = [
        ("a", vec!["b"]),
        ("b", vec!["c"]),
        ("c", vec!["a"]),
        ("d", vec![]),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.into_iter().map(String::from).collect()))
    .collect();
    assert_eq!(
        find_cycle(&graph),
        Some(vec!["a".into(), "b".into(), "c".into(), "a".into()])
    );
    assert_eq!(
        imports("use crate::{engine, fleet::Instance};\nuse crate::store::Store;"),
        ["engine", "fleet", "store"]
            .into_iter()
            .map(String::from)
            .collect()
    );
}

#[test]
fn the_pure_core_imports_only_pure_modules() {
    // The decision core does no I/O and takes `now` as an argument: no cloud, store, clock,
    // simulator or control loop.
    let pure = ["policy", "schedule", "engine", "fleet", "names", "when"];
    let graph = module_graph();
    // `replay` runs the engine on virtual time, and is as pure.
    // `report` works out savings from the store's history, which it is handed.
    for module in ["policy", "schedule", "engine", "fleet", "replay", "report"] {
        let impure: Vec<&String> = graph[module]
            .iter()
            .filter(|m| !pure.contains(&m.as_str()))
            .collect();
        assert!(impure.is_empty(), "{module} imports {impure:?}");
    }
}

#[test]
fn main_is_thin_and_files_stay_small() {
    let main = std::fs::read_to_string(root().join("src/main.rs")).unwrap();
    assert!(main.lines().count() <= 300, "src/main.rs is too long");
    let mut too_long = Vec::new();
    for file in rust_files(&root().join("src")) {
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
    let mut files = rust_files(&root().join("src"));
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
