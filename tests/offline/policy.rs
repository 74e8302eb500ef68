//! Loading policy sets: versions, directories, defaults.

use ebb::policy::{self, IdleWhen, MissingMetrics, OutsideHours, StartAtOpen, TagMatch};
use std::path::Path;
use std::process::Command;

const ONE: &str = "policies:\n  - name: a\n    match: {tags: {team: \"*\", env: dev}}\n";

fn write(dir: &Path, name: &str, text: &str) {
    std::fs::write(dir.join(name), text).unwrap();
}

#[test]
fn the_version_hashes_file_names_and_contents() {
    let d = tempfile::tempdir().unwrap();
    write(d.path(), "a.yaml", ONE);
    let load = || policy::load(&[d.path().to_path_buf()]).unwrap().version;
    let first = load();
    assert_eq!(first.content_hash.len(), 64);
    assert_eq!(load(), first, "same files, same version");
    write(d.path(), "a.yaml", &ONE.replace("dev", "prod"));
    let changed = load();
    assert_ne!(changed.content_hash, first.content_hash);
    std::fs::rename(d.path().join("a.yaml"), d.path().join("b.yaml")).unwrap();
    assert_ne!(
        load().content_hash,
        changed.content_hash,
        "a rename is a new version"
    );
    write(d.path(), "notes.txt", "not a policy");
    std::fs::rename(d.path().join("b.yaml"), d.path().join("a.yaml")).unwrap();
    assert_eq!(
        load().content_hash,
        changed.content_hash,
        "other files don't count"
    );
}

#[test]
fn the_version_names_the_git_commit_inside_a_work_tree() {
    let d = tempfile::tempdir().unwrap();
    write(d.path(), "a.yaml", ONE);
    assert_eq!(
        policy::load(&[d.path().to_path_buf()])
            .unwrap()
            .version
            .git_commit,
        None
    );
    let git = |args: &[&str]| {
        let ok = Command::new("git")
            .args(["-c", "user.name=t", "-c", "user.email=t@example.com"])
            .args(args)
            .current_dir(d.path())
            .output()
            .unwrap()
            .status
            .success();
        assert!(ok, "git {args:?}");
    };
    git(&["init", "-q"]);
    git(&["add", "a.yaml"]);
    git(&["commit", "-q", "-m", "policies"]);
    let head = Command::new("git")
        .args(["rev-parse", "HEAD"])
        .current_dir(d.path())
        .output()
        .unwrap();
    let head = String::from_utf8(head.stdout).unwrap().trim().to_string();
    let version = policy::load(&[d.path().to_path_buf()]).unwrap().version;
    assert_eq!(version.git_commit.as_deref(), Some(head.as_str()));
    assert!(version
        .to_string()
        .contains(&format!("(git {})", &head[..12])));
}

#[test]
fn several_directories_and_single_files_load_together() {
    let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    write(a.path(), "a.yml", ONE);
    write(b.path(), "b.yaml", &ONE.replace("name: a", "name: b"));
    let set = policy::load(&[a.path().to_path_buf(), b.path().join("b.yaml")]).unwrap();
    let names: Vec<&str> = set.policies.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names, ["a", "b"]);
    assert_eq!(set.policies[1].source.file, b.path().join("b.yaml"));
    assert_eq!(set.policies[1].source.line, 2);
}

#[test]
fn defaults_are_the_documented_ones() {
    let d = tempfile::tempdir().unwrap();
    write(
        d.path(),
        "p.yaml",
        r#"
policies:
  - name: p
    match: {tags: {team: "*", interruptible: true}}
    work_hours: {timezone: UTC, periods: [{days: [sat, sun], start: "10:00", stop: "16:00"}]}
    idle: {gpu_below: "7.5%", for: 1h30m}
    spot: {min_savings: 40, checkpoint_max_age: 30m}
"#,
    );
    let set = policy::load(&[d.path().to_path_buf()]).unwrap();
    let p = &set.policies[0];
    assert_eq!(p.priority, 0);
    assert!(!p.dry_run);
    assert_eq!(p.matcher.tags["team"], TagMatch::Present);
    assert_eq!(
        p.matcher.tags["interruptible"],
        TagMatch::Equals("true".into())
    );
    let wh = p.work_hours.as_ref().unwrap();
    assert_eq!(wh.outside_hours, OutsideHours::Stop);
    assert_eq!(wh.start_at_open, StartAtOpen::StoppedByEbb);
    assert!(wh.busy_defers_stop);
    assert_eq!(wh.max_defer, None);
    assert_eq!(wh.start_ahead, chrono::Duration::zero());
    let idle = p.idle.as_ref().unwrap();
    assert_eq!(idle.gpu_below, 7.5);
    assert_eq!(idle.window, chrono::Duration::minutes(90));
    assert_eq!(idle.grace_after_start, chrono::Duration::zero());
    assert_eq!(idle.missing_metrics, MissingMetrics::Busy);
    assert_eq!(idle.when, IdleWhen::Always);
    assert_eq!(p.busy_threshold(), 7.5);
    let spot = p.spot.as_ref().unwrap();
    assert_eq!(spot.min_savings, 0.4);
    assert_eq!(spot.max_interruptions, 3);
    assert_eq!(spot.keep_original_for, chrono::Duration::hours(6));
    assert_eq!(spot.back_to_spot_after, chrono::Duration::hours(24));
    assert!(spot.instance_types.is_empty());
}

#[test]
fn back_to_spot_after_is_read_and_must_be_longer_than_zero() {
    let d = tempfile::tempdir().unwrap();
    let spot = |after: &str| {
        format!("policies:\n  - name: p\n    match: {{}}\n    spot: {{min_savings: 40%, checkpoint_max_age: 30m, back_to_spot_after: {after}}}\n")
    };
    write(d.path(), "p.yaml", &spot("6h"));
    let set = policy::load(&[d.path().to_path_buf()]).unwrap();
    let rule = set.policies[0].spot.as_ref().unwrap();
    assert_eq!(rule.back_to_spot_after, chrono::Duration::hours(6));
    write(d.path(), "p.yaml", &spot("0m"));
    let Err(policy::LoadError::Invalid { problems }) = policy::load(&[d.path().to_path_buf()])
    else {
        panic!("back_to_spot_after: 0m must not load");
    };
    assert!(
        problems[0]
            .message
            .contains("back_to_spot_after must be longer than zero"),
        "{problems:?}"
    );
}

#[test]
fn a_misspelt_required_key_is_reported_once() {
    let d = tempfile::tempdir().unwrap();
    write(
        d.path(),
        "p.yaml",
        "policies:\n  - name: p\n    mach: {}\n    idle: {gpu_blow: 5, for: 1h}\n",
    );
    let Err(policy::LoadError::Invalid { problems }) = policy::load(&[d.path().to_path_buf()])
    else {
        panic!("invalid policies must not load");
    };
    let lines: Vec<String> = problems.iter().map(|p| p.message.clone()).collect();
    assert_eq!(
        lines,
        [
            "unknown key \"mach\" (did you mean \"match\"?)",
            "unknown key \"gpu_blow\" (did you mean \"gpu_below\"?)"
        ]
    );
}

#[test]
fn idle_outside_hours_needs_work_hours_and_empty_windows_are_refused() {
    let d = tempfile::tempdir().unwrap();
    write(
        d.path(),
        "p.yaml",
        r#"
policies:
  - name: p
    match: {}
    idle: {gpu_below: 5, for: 1h, when: outside_hours}
  - name: q
    match: {}
    work_hours: {timezone: UTC, periods: [{days: mon, start: "09:00", stop: "09:00"}]}
"#,
    );
    let err = policy::load(&[d.path().to_path_buf()])
        .unwrap_err()
        .to_string();
    assert!(
        err.contains(":5:11: idle.when: outside_hours needs work_hours"),
        "{err}"
    );
    assert!(
        err.contains(":8:43: start and stop are both 09:00"),
        "{err}"
    );
}

#[test]
fn start_ahead_is_a_duration_of_at_most_twelve_hours() {
    let d = tempfile::tempdir().unwrap();
    let policy = |lead: &str| {
        format!(
            "policies:\n  - name: p\n    match: {{}}\n    work_hours: {{timezone: UTC, start_ahead: {lead}, periods: [{{days: mon, start: \"09:00\", stop: \"18:00\"}}]}}\n"
        )
    };
    write(d.path(), "p.yaml", &policy("20m"));
    let set = policy::load(&[d.path().to_path_buf()]).unwrap();
    let wh = set.policies[0].work_hours.as_ref().unwrap();
    assert_eq!(wh.start_ahead, chrono::Duration::minutes(20));
    for (lead, message) in [
        ("13h", ":4:46: start_ahead is at most 12h"),
        ("soon", ":4:46: \"soon\" is not a duration"),
        ("0s", ":4:46: start_ahead must be longer than zero"),
    ] {
        write(d.path(), "p.yaml", &policy(lead));
        let err = policy::load(&[d.path().to_path_buf()])
            .unwrap_err()
            .to_string();
        assert!(err.contains(message), "{lead}: {err}");
    }
}

#[test]
fn start_fallback_types_are_instance_types() {
    let d = tempfile::tempdir().unwrap();
    let policy = |types: &str| {
        format!("policies:\n  - name: p\n    match: {{}}\n    start: {{fallback_types: {types}}}\n")
    };
    write(d.path(), "p.yaml", &policy("[g6.2xlarge, g5.2xlarge]"));
    let set = policy::load(&[d.path().to_path_buf()]).unwrap();
    let start = set.policies[0].start.as_ref().unwrap();
    assert_eq!(start.fallback_types, ["g6.2xlarge", "g5.2xlarge"]);
    for (types, message) in [
        (
            "[g6.*]",
            ":4:29: \"g6.*\" is not an instance type (like \"g6.2xlarge\")",
        ),
        ("g6.2xlarge", ":4:29: expected a list of instance types"),
    ] {
        write(d.path(), "p.yaml", &policy(types));
        let err = policy::load(&[d.path().to_path_buf()])
            .unwrap_err()
            .to_string();
        assert!(err.contains(message), "{types}: {err}");
    }
}

#[test]
fn start_restore_type_is_off_unless_set_true() {
    let d = tempfile::tempdir().unwrap();
    let policy = |start: &str| {
        format!("policies:\n  - name: p\n    match: {{}}\n    start: {{fallback_types: [g6.2xlarge]{start}}}\n")
    };
    let restores = |text: &str| {
        write(d.path(), "p.yaml", text);
        let set = policy::load(&[d.path().to_path_buf()]).map_err(|e| e.to_string())?;
        Ok::<bool, String>(set.policies[0].start.as_ref().unwrap().restore_type)
    };
    assert_eq!(restores(&policy("")), Ok(false));
    assert_eq!(restores(&policy(", restore_type: true")), Ok(true));
    let err = restores(&policy(", restore_type: yes please")).unwrap_err();
    assert!(err.contains(":4:57: expected true or false"), "{err}");
}
