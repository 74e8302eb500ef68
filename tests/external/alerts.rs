//! The Prometheus alerting rules shipped in `deploy/prometheus/alerts.yaml`: valid for
//! Prometheus (`promtool check rules`), firing when they should and not before (their unit
//! tests, `promtool test rules alerts_test.yaml`), and naming only metrics ebb exports.

use std::path::Path;
use std::process::Command;

fn deploy() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy/prometheus")
}

fn promtool(args: &[&str]) -> String {
    let out = Command::new("promtool")
        .args(args)
        .current_dir(deploy())
        .output()
        .expect("promtool (scripts/test installs Debian's prometheus)");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "promtool {args:?}:\n{text}");
    text
}

#[test]
fn the_alert_rules_are_valid_and_fire_as_their_tests_say() {
    let checked = promtool(&["check", "rules", "alerts.yaml"]);
    assert!(checked.contains("SUCCESS: 10 rules found"), "{checked}");
    let tested = promtool(&["test", "rules", "alerts_test.yaml"]);
    assert!(tested.contains("SUCCESS"), "{tested}");
}

#[test]
fn the_alert_rules_name_only_metrics_ebb_exports() {
    let rules = std::fs::read_to_string(deploy().join("alerts.yaml")).unwrap();
    // The names `src/metrics.rs` registers, each under the registry's prefix `ebb`: a family
    // without samples yet (a budget's) is not in the encoded text, so the registrations are
    // read instead.
    let source =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("src/metrics.rs"))
            .unwrap();
    let registered: Vec<String> = source
        .split("registry.register(")
        .skip(1)
        .filter_map(|call| call.split('"').nth(1))
        .map(|name| format!("ebb_{name}"))
        .collect();
    assert!(
        registered.contains(&"ebb_leader".to_string()),
        "{registered:?}"
    );
    let mut named = Vec::new();
    for (at, _) in rules.match_indices("ebb_") {
        let name: String = rules[at..]
            .chars()
            .take_while(|c| c.is_ascii_lowercase() || *c == '_')
            .collect();
        named.push(name);
    }
    named.sort();
    named.dedup();
    assert!(named.len() >= 9, "{named:?}");
    for name in named {
        // A counter's samples carry `_total`, its registration does not.
        let family = name.strip_suffix("_total").unwrap_or(&name);
        assert!(
            registered.iter().any(|r| r == family),
            "{name} is not a metric ebb exports: {registered:?}"
        );
    }
}
