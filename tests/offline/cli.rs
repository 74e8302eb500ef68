//! The `ebb` binary as users and CI run it: `validate`, `plan`, `explain`, `schema`.

use crate::common::ebb;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// A directory with the given policy files.
fn dir(files: &[(&str, &str)]) -> tempfile::TempDir {
    let d = tempfile::tempdir().unwrap();
    for (name, text) in files {
        std::fs::write(d.path().join(name), text).unwrap();
    }
    d
}

/// `ebb COMMAND... --policies POLICIES --fleet FLEET --at AT`: the offline commands.
fn offline(command: &[&str], policies: &str, fleet: &Path, at: &str) -> Output {
    let fleet = fleet.to_str().unwrap();
    let mut args = command.to_vec();
    args.extend(["--policies", policies, "--fleet", fleet, "--at", at]);
    ebb(&args)
}

fn validate(d: &Path) -> Output {
    ebb(&["validate", d.to_str().unwrap()])
}

#[test]
fn the_example_policies_are_valid() {
    let o = ebb(&["validate", "policies"]);
    assert!(o.status.success(), "{}{}", stdout(&o), stderr(&o));
    assert!(stdout(&o).starts_with("ok: "), "{}", stdout(&o));
}

/// One valid policy with `line` replaced, for single-problem files.
const GOOD: &str = "\
calendars:
  holidays:
    dates: [\"2026-12-25\"]
policies:
  - name: dev
    match: {tags: {env: dev}}
    work_hours:
      timezone: Asia/Shanghai
      periods:
        - {days: mon-fri, start: \"08:30\", stop: \"20:00\"}
      skip: [holidays]
    spot:
      min_savings: 40%
      checkpoint_max_age: 30m
";

/// Each bad policy of the issue gives a non-zero exit and the problem at its position.
#[test]
fn each_kind_of_bad_policy_is_reported_at_its_line_and_column() {
    let cases = [
        (
            "      timezone: Asia/Shanghai",
            "      timezon: Asia/Shanghai",
            "8:7: unknown key \"timezon\" (did you mean \"timezone\"?)",
        ),
        (
            "      timezone: Asia/Shanghai",
            "      timezone: Asia/Shangai",
            "8:17: unknown time zone \"Asia/Shangai\" (did you mean \"Asia/Shanghai\"?)",
        ),
        // A name people write for China's zone, nearest in spelling to Brunei's.
        (
            "      timezone: Asia/Shanghai",
            "      timezone: Asia/Beijing",
            "8:17: unknown time zone \"Asia/Beijing\" (did you mean \"Asia/Shanghai\", China's zone?)",
        ),
        (
            "      timezone: Asia/Shanghai",
            "      timezone: CST",
            "8:17: unknown time zone \"CST\" (did you mean \"Asia/Shanghai\" (China Standard Time) or \"America/Chicago\" (US Central)?)",
        ),
        (
            "start: \"08:30\"",
            "start: \"25:00\"",
            "10:34: \"25:00\" is not a time of day (HH:MM, 00:00-24:00)",
        ),
        (
            "days: mon-fri,",
            "days: mon-fry,",
            "10:18: \"mon-fry\": unknown day \"fry\"",
        ),
        (
            "        - {days: mon-fri, start: \"08:30\", stop: \"20:00\"}",
            "      cron: {start: \"61 8 * * mon-fri\", stop: \"0 20 * * mon-fri\"}",
            "9:21: invalid cron expression \"61 8 * * mon-fri\": minute field \"61\"",
        ),
        (
            "min_savings: 40%",
            "min_savings: 140%",
            "13:20: min_savings must be between 0% and 100%",
        ),
        (
            "skip: [holidays]",
            "skip: [holidayz]",
            "11:14: unknown calendar \"holidayz\" (did you mean \"holidays\"?)",
        ),
        (
            "checkpoint_max_age: 30m",
            "checkpoint_max_age: 30 minutes please",
            "14:27: \"30 minutes please\" is not a duration",
        ),
    ];
    for (from, to, want) in cases {
        assert!(GOOD.contains(from), "{from}");
        let mut text = GOOD.replace(from, to);
        if to.starts_with("      cron:") {
            text = text.replace("      periods:\n", "");
        }
        let d = dir(&[("team.yaml", &text)]);
        let o = validate(d.path());
        assert_eq!(o.status.code(), Some(1), "{to}: {}", stdout(&o));
        let out = stdout(&o);
        let file = d.path().join("team.yaml");
        let want = format!("{}:{want}", file.display());
        assert!(
            out.lines().any(|l| l.starts_with(&want)),
            "want {want}\ngot:\n{out}"
        );
        assert_eq!(out.lines().count(), 1, "one problem, one line:\n{out}");
    }
    let d = dir(&[("team.yaml", GOOD)]);
    assert!(validate(d.path()).status.success());
}

#[test]
fn every_problem_is_reported_not_just_the_first() {
    let text = GOOD
        .replace("timezone: Asia/Shanghai", "timezone: Mars/Olympus")
        .replace("\"25:00\"", "x")
        .replace("stop: \"20:00\"", "stop: \"20:61\"")
        .replace("min_savings: 40%", "min_savings: -1%")
        .replace("name: dev", "name: dev\n    colour: blue");
    let d = dir(&[("team.yaml", &text)]);
    let o = validate(d.path());
    assert_eq!(o.status.code(), Some(1));
    let out = stdout(&o);
    for needle in [
        "Mars/Olympus",
        "\"20:61\"",
        "min_savings",
        "unknown key \"colour\"",
    ] {
        assert!(out.contains(needle), "{needle} missing from:\n{out}");
    }
    assert_eq!(out.lines().count(), 4, "{out}");
}

#[test]
fn duplicate_names_across_files_name_both_places() {
    let d = dir(&[
        ("a.yaml", GOOD),
        ("b.yml", "policies:\n  - name: dev\n    match: {}\n"),
    ]);
    let o = validate(d.path());
    assert_eq!(o.status.code(), Some(1));
    let out = stdout(&o);
    let (a, b) = (d.path().join("a.yaml"), d.path().join("b.yml"));
    let want = format!(
        "{}:2:11: duplicate policy name \"dev\" (also defined at {}:5:11)",
        b.display(),
        a.display()
    );
    assert!(out.contains(&want), "want {want}\ngot {out}");
}

#[test]
fn calendars_are_shared_across_files_and_unknown_ones_are_errors() {
    let policy = GOOD.replace("calendars:\n  holidays:\n    dates: [\"2026-12-25\"]\n", "");
    let shared = dir(&[
        (
            "cal.yaml",
            "calendars:\n  holidays:\n    dates: [\"2026-12-25\"]\n",
        ),
        ("p.yaml", &policy),
    ]);
    assert!(validate(shared.path()).status.success());
    let alone = dir(&[("p.yaml", &policy)]);
    let o = validate(alone.path());
    assert!(
        stdout(&o).contains("unknown calendar \"holidays\""),
        "{}",
        stdout(&o)
    );
}

#[test]
fn yaml_syntax_errors_and_odd_inputs_are_reported_without_panicking() {
    let cases: [(&str, &str); 6] = [
        ("a: [1, 2\nb: 3\n", "not valid YAML"),
        ("", "the file is empty"),
        ("- 1\n- 2\n", "expected a policy file, found a list"),
        ("policies: {}\n", "expected a list of policies"),
        ("policies:\n  - 42\n", "expected a policy, found a number"),
        (
            "policies:\n  - name: x\n    match: {tags: {a: [1]}}\n",
            "expected a tag value",
        ),
    ];
    for (text, want) in cases {
        let d = dir(&[("p.yaml", text)]);
        let o = validate(d.path());
        assert_eq!(o.status.code(), Some(1), "{text:?}");
        assert!(stdout(&o).contains(want), "{text:?}: {}", stdout(&o));
        assert!(!stderr(&o).contains("panicked"));
    }
}

#[test]
fn missing_directories_and_empty_ones_are_clear_errors() {
    let o = ebb(&["validate", "/nonexistent/policies"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("cannot read /nonexistent/policies"),
        "{}",
        stderr(&o)
    );
    let empty = tempfile::tempdir().unwrap();
    let o = validate(empty.path());
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("no policy files"), "{}", stderr(&o));
}

fn fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/fleet.yaml")
}

const AT: &str = "2026-11-30T12:10:00Z";

#[test]
fn plan_json_is_the_documented_contract() {
    let f = fixture();
    let o = offline(&["plan", "--format", "json"], "policies", &f, AT);
    assert!(o.status.success(), "{}", stderr(&o));
    let items: Vec<serde_json::Map<String, serde_json::Value>> =
        serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(items.len(), 8);
    let actions = [
        "none",
        "start",
        "stop",
        "hibernate",
        "notify",
        "migrate_to_spot",
        "relaunch_spot",
        "fallback_on_demand",
    ];
    for item in &items {
        // Sorted: whether serde_json keeps key order depends on features other crates enable.
        let mut keys: Vec<&str> = item.keys().map(String::as_str).collect();
        keys.sort();
        assert_eq!(
            keys,
            ["action", "code", "instance", "owner", "policy", "reason"]
        );
        assert!(actions.contains(&item["action"].as_str().unwrap()));
        assert!(item["policy"].is_string() || item["policy"].is_null());
    }
    let by_id = |id: &str| items.iter().find(|i| i["instance"] == id).unwrap();
    assert_eq!(by_id("i-0orphan")["policy"], serde_json::Value::Null);
    assert_eq!(by_id("i-0orphan")["code"], "no_policy");
    assert_eq!(by_id("i-0research1")["action"], "notify");
    assert_eq!(by_id("i-0research2")["code"], "busy_deferred");
    assert_eq!(by_id("i-0platform1")["action"], "start");
    assert_eq!(by_id("i-0notebook1")["action"], "stop");
    assert_eq!(by_id("i-0train1")["action"], "migrate_to_spot");
}

#[test]
fn plan_reads_json_fleets_and_prints_a_table() {
    let d = tempfile::tempdir().unwrap();
    let fleet = d.path().join("fleet.json");
    std::fs::write(
        &fleet,
        r#"{"instances": [{"id": "i-1", "region": "us-east-1", "type": "g5.xlarge", "state": "running",
            "tags": {"team": "research", "env": "dev"}}]}"#,
    )
    .unwrap();
    let o = offline(&["plan"], "policies", &fleet, AT);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    let mut lines = out.lines();
    assert!(
        lines
            .next()
            .unwrap()
            .starts_with("INSTANCE  ACTION  POLICY"),
        "{out}"
    );
    assert!(
        lines
            .next()
            .unwrap()
            .starts_with("i-1       notify  research-dev-hours  notice_late"),
        "{out}"
    );
}

#[test]
fn plan_rejects_bad_input_with_a_message_and_no_decisions() {
    let f = fixture();
    let o = offline(&["plan"], "policies", &f, "tonight");
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("\"tonight\" is not an RFC 3339 time"),
        "{}",
        stderr(&o)
    );
    let d = tempfile::tempdir().unwrap();
    let bad = d.path().join("fleet.yaml");
    std::fs::write(&bad, "instances:\n  - id: i-1\n    state: runing\n").unwrap();
    let o = offline(&["plan"], "policies", &bad, AT);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("not a valid fleet snapshot"),
        "{}",
        stderr(&o)
    );
    assert!(o.stdout.is_empty());
    let broken = dir(&[("p.yaml", "policies:\n  - name: x\n")]);
    let o = offline(&["plan"], broken.path().to_str().unwrap(), &f, AT);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("policies are not valid"),
        "{}",
        stderr(&o)
    );
    assert!(o.stdout.is_empty());
}

#[test]
fn explain_shows_matches_the_governing_policy_and_each_verdict() {
    let f = fixture();
    let o = offline(&["explain", "i-0research2"], "policies", &f, AT);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    for needle in [
        "policy platform-dev-hours does not match: region ap-east-1 is not in us-east-1",
        "policy research-dev-hours matches (priority 10)",
        "governing policy: research-dev-hours",
        "work hours (Asia/Shanghai): closed since 20:00 Asia/Shanghai",
        "busy: 93% at 20:05 Asia/Shanghai",
        "decision: none [busy_deferred]",
    ] {
        assert!(out.contains(needle), "{needle} missing from:\n{out}");
    }
    let o = offline(&["explain", "i-nope"], "policies", &f, AT);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("no instance i-nope"));
}

/// A snapshot of a tick whose GPU read failed: `ebb explain` says so, and why nothing is stopped
/// for idleness although `missing_metrics` is idle.
#[test]
fn explain_says_a_failed_gpu_read_stops_nothing_for_idleness() {
    let d = dir(&[(
        "idle.yaml",
        "policies:\n  - name: notebooks\n    match: {}\n    idle: {gpu_below: 5, for: 30m, missing_metrics: idle}\n",
    )]);
    let fleet = d.path().join("fleet.yaml");
    let snapshot = "instances:\n  - {id: i-nb, region: us-east-1, type: g5.xlarge, state: running, gpu_read_error: \"GetMetricData: AccessDenied\"}\n";
    std::fs::write(&fleet, snapshot).unwrap();
    let policies = d.path().join("idle.yaml");
    let o = offline(&["explain", "i-nb"], policies.to_str().unwrap(), &fleet, AT);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    for needle in [
        "busy: unknown, GPU utilisation could not be read (GetMetricData: AccessDenied)",
        "idle rule (5% for 30m): GPU utilisation could not be read (GetMetricData: AccessDenied): idle or not is unknown, so no idle stop, whatever missing_metrics says",
        "decision: none [metrics_unreadable]",
    ] {
        assert!(out.contains(needle), "{needle} missing from:\n{out}");
    }
    // Without the failure, the same empty reading is missing data, counted idle.
    std::fs::write(
        &fleet,
        snapshot.replace(", gpu_read_error: \"GetMetricData: AccessDenied\"", ""),
    )
    .unwrap();
    let o = offline(&["explain", "i-nb"], policies.to_str().unwrap(), &fleet, AT);
    assert!(
        stdout(&o).contains("decision: stop [idle_metrics_missing]"),
        "{}",
        stdout(&o)
    );
}

/// An instance the snapshot says another account's role listed: the spot rule would move it,
/// but the plan refuses with a code of its own.
#[test]
fn plan_refuses_to_move_another_accounts_instance_to_spot() {
    let d = tempfile::tempdir().unwrap();
    let fleet = d.path().join("fleet.yaml");
    let text = std::fs::read_to_string(fixture()).unwrap().replace(
        "  - id: i-0train1\n",
        "  - id: i-0train1\n    via_role: arn:aws:iam::111111111111:role/ebb\n",
    );
    std::fs::write(&fleet, text).unwrap();
    let plan = |fleet: &Path| {
        let o = offline(&["plan", "--format", "json"], "policies", fleet, AT);
        assert!(o.status.success(), "{}", stderr(&o));
        let items: Vec<serde_json::Value> = serde_json::from_slice(&o.stdout).unwrap();
        let d = items.into_iter().find(|i| i["instance"] == "i-0train1");
        let d = d.unwrap();
        (
            d["action"].as_str().unwrap().to_string(),
            d["code"].as_str().unwrap().to_string(),
        )
    };
    assert_eq!(
        plan(&fixture()),
        ("migrate_to_spot".into(), "spot_savings".into())
    );
    assert_eq!(plan(&fleet), ("none".into(), "spot_other_account".into()));
}

#[test]
fn explain_shows_spot_numbers() {
    let f = fixture();
    let o = offline(&["explain", "i-0train1"], "policies", &f, AT);
    let out = stdout(&o);
    assert!(out.contains("spot: eligible: spot p4d.24xlarge $12.410/h vs on-demand p4d.24xlarge $32.770/h saves 62% (min 40%)"), "{out}");
}

#[test]
fn schema_is_printed_written_to_deploy_and_referenced_by_the_examples() {
    let o = ebb(&["schema"]);
    assert!(o.status.success());
    let file = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy/policy.schema.json"),
    )
    .unwrap();
    assert_eq!(
        stdout(&o),
        file,
        "deploy/policy.schema.json is stale: run `ebb schema > deploy/policy.schema.json`"
    );
    for entry in std::fs::read_dir(Path::new(env!("CARGO_MANIFEST_DIR")).join("policies")).unwrap()
    {
        let text = std::fs::read_to_string(entry.unwrap().path()).unwrap();
        assert!(text.starts_with("# yaml-language-server: $schema=../deploy/policy.schema.json\n"));
    }
}

#[test]
fn settings_for_a_real_cloud_are_refused_with_the_simulated_fleet_and_back() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let fleet = format!("sim:{}", root.join("deploy/demo-fleet.yaml").display());
    let policies = root.join("policies");
    let policies = policies.to_str().unwrap();
    let o = ebb(&[
        "serve",
        "--cloud",
        &fleet,
        "--policies",
        policies,
        "--interruption-queue",
        "https://sqs.us-east-1.amazonaws.com/123456789012/ebb-spot-interruptions",
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("--interruption-queue needs EBB_CLOUD=aws"),
        "{}",
        stderr(&o)
    );
    let o = ebb(&["serve", "--policies", policies, "--clock-speed", "60"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("need EBB_CLOUD=sim:FLEET_FILE"),
        "{}",
        stderr(&o)
    );
}

/// `ebb tick --at` acts as if it were then: against the real EC2 only as a dry run. The refusal
/// comes first, before the database or the cloud is reached; an emulator on this machine (moto,
/// as the tests run it) may be ticked at any time.
#[test]
fn tick_at_another_time_against_aws_needs_a_dry_run() {
    let tick = |extra: &[&str], endpoint: Option<&str>| {
        let mut args = vec![
            "tick",
            "--policies",
            "policies",
            "--at",
            "2030-01-07T09:00:00Z",
        ];
        args.extend(extra);
        let mut ebb = crate::common::Ebb::on("postgres://nobody@127.0.0.1:9/none")
            .env("EBB_CLOUD", "aws")
            .env("EBB_DB_CONNECT_TIMEOUT", "2s")
            .env_remove("AWS_ENDPOINT_URL_EC2")
            .env_remove("AWS_ENDPOINT_URL");
        if let Some(url) = endpoint {
            ebb = ebb.env("AWS_ENDPOINT_URL", url);
        }
        ebb.run(&args)
    };
    let refused = "--at acts on AWS as if it were then";
    let o = tick(&[], None);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains(refused), "{}", stderr(&o));
    assert!(stderr(&o).contains("add --dry-run"), "{}", stderr(&o));
    let o = tick(&[], Some("https://ec2.us-east-1.amazonaws.com"));
    assert!(stderr(&o).contains(refused), "{}", stderr(&o));
    // Past the check, each goes on to the database, which is not there.
    for o in [
        tick(&["--dry-run"], None),
        tick(&[], Some("http://127.0.0.1:5000")),
        tick(&[], Some("http://[::1]:5000")),
    ] {
        assert_eq!(o.status.code(), Some(2));
        assert!(!stderr(&o).contains(refused), "{}", stderr(&o));
        assert!(
            stderr(&o).contains("cannot connect to the database"),
            "{}",
            stderr(&o)
        );
    }
}

/// The binary's allocator returns freed memory at once (`ebb serve`'s resident memory in
/// BENCHMARKS.md depends on it), and the environment can still override that.
#[test]
fn the_allocator_returns_freed_memory_at_once() {
    let settings = |env: &[(&str, &str)]| {
        let o = Command::new(env!("CARGO_BIN_EXE_ebb"))
            .arg("--version")
            .env("_RJEM_MALLOC_CONF", "stats_print:true")
            .envs(env.iter().copied())
            .output()
            .expect("run ebb");
        assert!(o.status.success(), "{}", stderr(&o));
        stderr(&o)
    };
    let built_in = settings(&[]);
    assert!(
        built_in.contains("opt.dirty_decay_ms: 0 ") && built_in.contains("opt.muzzy_decay_ms: 0 "),
        "{built_in}"
    );
    let overridden = settings(&[("_RJEM_MALLOC_CONF", "stats_print:true,dirty_decay_ms:5000")]);
    assert!(
        overridden.contains("opt.dirty_decay_ms: 5000 "),
        "{overridden}"
    );
}

/// `ebb plan` and `ebb explain` with `start_ahead: 15m`: the start from 15 minutes before the
/// opening and not earlier, a running box left alone in that lead time, the close unchanged.
#[test]
fn plan_starts_ahead_of_the_opening_and_explain_says_so() {
    let d = dir(&[(
        "berlin.yaml",
        "policies:\n  - name: berlin\n    match: {}\n    work_hours:\n      timezone: Europe/Berlin\n      start_ahead: 15m\n      periods: [{days: mon-fri, start: \"09:00\", stop: \"18:00\"}]\n",
    )]);
    let fleet = d.path().join("fleet.yaml");
    std::fs::write(
        &fleet,
        "instances:\n  - {id: i-stopped, region: eu-central-1, type: g5.xlarge, state: stopped, stopped_by_ebb_at: 2026-11-27T17:00:00Z}\n  - {id: i-running, region: eu-central-1, type: g5.xlarge, state: running}\n",
    )
    .unwrap();
    let policies = d.path().join("berlin.yaml");
    let policies = policies.to_str().unwrap();
    let plan = |at: &str| {
        let o = offline(&["plan", "--format", "json"], policies, &fleet, at);
        assert!(o.status.success(), "{}", stderr(&o));
        let items: Vec<serde_json::Value> = serde_json::from_slice(&o.stdout).unwrap();
        items
            .iter()
            .map(|i| {
                let s = |k: &str| i[k].as_str().unwrap().to_string();
                (s("action"), s("code"))
            })
            .collect::<Vec<_>>()
    };
    let pair = |a: &str, c: &str| (a.to_string(), c.to_string());
    assert_eq!(
        plan("2026-11-30T07:44:00Z"),
        [
            pair("none", "stopped_outside_hours"),
            pair("stop", "outside_hours")
        ]
    );
    assert_eq!(
        plan("2026-11-30T07:45:00Z"),
        [
            pair("start", "start_ahead"),
            pair("none", "start_ahead_kept")
        ]
    );
    assert_eq!(
        plan("2026-11-30T17:00:00Z"),
        [
            pair("none", "stopped_outside_hours"),
            pair("stop", "outside_hours")
        ]
    );
    let o = offline(
        &["explain", "i-stopped"],
        policies,
        &fleet,
        "2026-11-30T07:45:00Z",
    );
    let out = stdout(&o);
    for needle in [
        "starting 15m ahead of 09:00 Europe/Berlin: stopped instances start",
        "decision: start [start_ahead] by berlin: starting 15m ahead of 09:00 Europe/Berlin",
    ] {
        assert!(out.contains(needle), "{needle} missing from:\n{out}");
    }
}

/// Offline commands end quietly too when stdout's reader has gone (`ebb schema | head`).
#[test]
fn a_closed_stdout_ends_an_offline_command_quietly() {
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    let o = crate::common::Ebb::new()
        .command(&["schema"])
        .stdout(writer)
        .stderr(std::process::Stdio::piped())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{stderr}");
    assert!(stderr.is_empty(), "{stderr}");
}

/// An error says its cause once: "cannot read x: No such file or directory", not twice.
#[test]
fn an_error_says_its_cause_once() {
    let o = ebb(&["validate", "/nonexistent-policies"]);
    assert_eq!(o.status.code(), Some(2), "{o:?}");
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(
        stderr.matches("No such file or directory").count(),
        1,
        "{stderr}"
    );
    assert!(
        stderr.starts_with("error: cannot read /nonexistent-policies"),
        "{stderr}"
    );
}

/// A calendar that names no date of the next year, from 1 November, or of this year, is
/// warned of: the shipped China calendars hold 2026 only, so in December 2026 validate says
/// so (and still exits 0); in June it says nothing.
#[test]
fn a_calendar_that_runs_out_is_warned_of() {
    let policies = Path::new(env!("CARGO_MANIFEST_DIR")).join("policies");
    let policies = policies.to_str().unwrap();
    let o = ebb(&["validate", policies, "--at", "2026-12-06T00:00:00Z"]);
    assert_eq!(o.status.code(), Some(0), "{o:?}");
    let stderr = String::from_utf8_lossy(&o.stderr);
    for name in ["cn-holidays", "cn-workdays"] {
        assert!(
            stderr.contains(&format!(
                "warning: calendar {name} names no date in 2027 yet"
            )),
            "{stderr}"
        );
    }
    assert!(
        !stderr.contains("us-holidays"),
        "it has 2027-01-01: {stderr}"
    );
    let o = ebb(&["validate", policies, "--at", "2026-06-01T00:00:00Z"]);
    assert_eq!(o.status.code(), Some(0), "{o:?}");
    assert!(
        o.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    // A year with none of its dates at all.
    let o = ebb(&["validate", policies, "--at", "2027-03-01T00:00:00Z"]);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(
        stderr
            .contains("warning: calendar cn-holidays names no date in 2027: add this year's dates"),
        "{stderr}"
    );
}

/// Each flag of `ebb COMMAND --help`, by the heading it is listed under.
fn flags_by_heading(command: &str) -> Vec<(String, Vec<String>)> {
    let o = ebb(&[command, "--help"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let mut groups: Vec<(String, Vec<String>)> = Vec::new();
    for line in stdout(&o).lines() {
        if line.ends_with(':') && !line.starts_with(' ') {
            groups.push((line.trim_end_matches(':').to_string(), Vec::new()));
        } else if let Some(flag) = line
            .split_whitespace()
            // A flag's line (`--x`, or `-x, --x`), not a description that names one.
            .take(2)
            .find(|w| w.starts_with("--"))
            .filter(|_| line.trim_start().starts_with('-'))
        {
            if let Some((_, flags)) = groups.last_mut() {
                flags.push(flag.trim_end_matches(',').to_string());
            }
        }
    }
    groups
}

/// `serve` and `tick` have over 50 flags: each is listed under a heading that says what it is
/// about, and no heading leaks onto the flags after it.
#[test]
fn serve_and_tick_list_their_flags_under_headings() {
    let serve = flags_by_heading("serve");
    let heading_of = |flag: &str| {
        serve
            .iter()
            .find(|(_, flags)| flags.iter().any(|f| f == flag))
            .map(|(h, _)| h.as_str())
            .unwrap_or_else(|| panic!("{flag} is not listed: {serve:?}"))
    };
    for (flag, heading) in [
        ("--policies", "Options"),
        ("--tick", "Serving"),
        ("--listen", "API and console"),
        ("--api-tokens", "API and console"),
        ("--heartbeat-key-file", "API and console"),
        ("--max-override", "Overrides"),
        ("--clock-speed", "Simulated fleet"),
        ("--regions", "Cloud"),
        ("--alibaba-ram-role", "Cloud"),
        ("--interruption-queue", "Cloud"),
        ("--events-url", "Events"),
        ("--dry-run", "Acting"),
        ("--webhook-url", "Notices"),
        ("--public-url", "Notices"),
        ("--jupyter-token-file", "GPU metrics and activity signals"),
        ("--database-url", "Database"),
        ("--audit-checkpoints", "Audit checkpoints"),
    ] {
        assert_eq!(heading_of(flag), heading, "{flag}");
    }
    let headings: Vec<&str> = serve.iter().map(|(h, _)| h.as_str()).collect();
    let mut unique = headings.clone();
    unique.dedup();
    assert_eq!(
        unique.len(),
        headings.len(),
        "one group per heading: {headings:?}"
    );
    let tick = flags_by_heading("tick");
    let tick_heading = |flag: &str| {
        tick.iter()
            .find(|(_, f)| f.iter().any(|x| x == flag))
            .map(|(h, _)| h.clone())
    };
    assert_eq!(tick_heading("--webhook-url").as_deref(), Some("Notices"));
    assert_eq!(tick_heading("--database-url").as_deref(), Some("Database"));
    // The offline commands' own flags stay under Options.
    let plan = flags_by_heading("plan");
    assert_eq!(plan.len(), 1, "{plan:?}");
}
