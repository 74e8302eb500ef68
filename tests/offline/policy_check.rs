//! deploy/github/policy-check.yml, the policy pull request check: its `run` steps, run as the
//! workflow runs them (bash, each in its working directory, the two checkouts side by side)
//! against the built binary, on the example policies and a generated week of the demo fleet.

use serde_yaml::Value;
use std::path::Path;
use std::process::Command;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn workflow() -> Value {
    let path = root().join("deploy/github/policy-check.yml");
    serde_yaml::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// Copies the files of `from` (not its directories) into a new directory `to`.
fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let path = entry.unwrap().path();
        if path.is_file() {
            std::fs::copy(&path, to.join(path.file_name().unwrap())).unwrap();
        }
    }
}

/// The workspace the checkouts make: `head/` with the policies, the fleet and a week of
/// utilisation; `base/` with the base branch's policies (work hours closing an hour later).
fn workspace(dir: &Path) {
    let head = dir.join("head");
    copy_dir(&root().join("policies"), &head.join("policies"));
    copy_dir(&root().join("policies"), &dir.join("base/policies"));
    let research = dir.join("base/policies/research-dev.yaml");
    let text = std::fs::read_to_string(&research).unwrap();
    assert!(
        text.contains("stop: \"20:00\""),
        "the example's close moved"
    );
    std::fs::write(
        &research,
        text.replace("stop: \"20:00\"", "stop: \"21:00\""),
    )
    .unwrap();
    let demo = root().join("deploy/demo-fleet.yaml");
    let (fleet, behaviours) = ebb::snapshot::load_simulation(&demo).unwrap();
    let from = ebb::when::parse_time("2026-11-30T00:00:00Z").unwrap();
    let mut csv = Vec::new();
    ebb::cloud::sim::write_utilisation(
        &fleet,
        &behaviours,
        from,
        from + chrono::Duration::days(7),
        &mut csv,
    )
    .unwrap();
    std::fs::write(head.join("util.csv"), csv).unwrap();
    // The snapshot as JSON with on-demand prices for every region (the image's EBB_PRICES
    // table has only the US ones).
    let mut snapshot: serde_json::Value =
        serde_yaml::from_str(&std::fs::read_to_string(&demo).unwrap()).unwrap();
    let table: serde_json::Value =
        serde_yaml::from_str(&std::fs::read_to_string(root().join("deploy/prices.yaml")).unwrap())
            .unwrap();
    for region in ["ap-east-1", "eu-central-1", "us-east-1", "us-west-2"] {
        let prices = snapshot["prices"][region]
            .as_object()
            .cloned()
            .unwrap_or_default();
        let mut merged: serde_json::Map<String, serde_json::Value> = table["prices"]["us-east-1"]
            .as_object()
            .unwrap()
            .iter()
            .map(|(t, p)| (t.clone(), serde_json::json!({"on_demand": p})))
            .collect();
        merged.extend(prices);
        snapshot["prices"][region] = merged.into();
    }
    std::fs::write(head.join("fleet.json"), snapshot.to_string()).unwrap();
}

#[test]
fn the_policy_check_workflow_validates_plans_and_replays_against_the_base_branch() {
    let wf = workflow();
    let job = &wf["jobs"]["policy-check"];
    let steps = job["steps"].as_sequence().unwrap();
    // The checkouts lay out the workspace as this test does.
    let checkout_paths: Vec<&str> = steps
        .iter()
        .filter(|s| {
            s["uses"]
                .as_str()
                .is_some_and(|u| u.starts_with("actions/checkout"))
        })
        .map(|s| s["with"]["path"].as_str().unwrap())
        .collect();
    assert_eq!(checkout_paths, ["head", "base"]);
    let dir = tempfile::tempdir().unwrap();
    workspace(dir.path());
    let bin = Path::new(env!("CARGO_BIN_EXE_ebb")).parent().unwrap();
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap());
    let mut ran = Vec::new();
    for step in steps {
        let Some(script) = step["run"].as_str() else {
            continue;
        };
        let name = step["name"].as_str().unwrap();
        let cwd = dir
            .path()
            .join(step["working-directory"].as_str().unwrap_or("."));
        let o = Command::new("bash")
            .args(["-e", "-c", script])
            .current_dir(cwd)
            .env("PATH", &path)
            .env("REPLAY_FROM", "2026-11-30T00:00:00Z")
            .env("REPLAY_TO", "2026-12-07T00:00:00Z")
            .env_remove("EBB_PRICES")
            .output()
            .unwrap();
        assert!(
            o.status.success(),
            "step {name}: {}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        );
        ran.push(name);
    }
    assert_eq!(ran, ["validate", "plan", "replay"]);
    let plan = std::fs::read_to_string(dir.path().join("plan.txt")).unwrap();
    assert!(plan.contains("i-0research01"), "{plan}");
    let md = std::fs::read_to_string(dir.path().join("replay.md")).unwrap();
    assert!(
        md.contains("| | baseline | policies | difference |"),
        "{md}"
    );
    // The base branch closes Shanghai's office an hour later: the research boxes cost more
    // under it, and they are the instances whose outcome changed.
    assert!(
        md.contains("#### Instances whose outcome changed most"),
        "{md}"
    );
    assert!(md.contains("| i-0research"), "{md}");
    // The comment step posts what the run steps wrote.
    let script = steps.last().unwrap()["with"]["script"].as_str().unwrap();
    assert!(script.contains("replay.md") && script.contains("plan.txt"));
}
