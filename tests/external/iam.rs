//! The IAM policy templates in deploy/ checked against the code that needs them, and linted:
//!
//! - `deploy/iam-policy.json` (ebb's role) grants every AWS call the code makes and nothing
//!   else but the permissions those calls need besides their own (`iam:PassRole`). The calls
//!   are found in the source itself (src/ and crates/ebb-cloud/src/): every fluent call
//!   `.operation()` of an AWS SDK client (the operations are read from the SDK crates Cargo
//!   built ebb with), and the AssumeRole of
//!   `aws_config::sts::AssumeRoleProvider`, so a new call fails this test until the policy
//!   grants it;
//! - `deploy/iam-policy-audit-reader.json` grants what `ebb audit verify --checkpoints s3://...`
//!   reads, and ebb's role none of it;
//! - the limits issue 17 asked for: PassRole only to EC2 and for roles on the workloads' path,
//!   tag writes on managed instances only with ebb's own keys (never `ebb:managed`, never no
//!   key), snapshots tagged only by the CreateImage that makes them, checkpoints written once,
//!   no grant in an account the template does not name;
//! - `deploy/scp-ebb-tags.json` keeps the tags ebb writes to ebb's role, the tags that hand an
//!   instance to ebb to ebb and the fleet's admins, and other `ebb:*` tags to them and the
//!   workloads;
//! - parliament (`need_parliament` in scripts/lib.sh), with its community auditors, finds in
//!   each policy nothing but the findings allowed below, each explained in docs/aws.md's "IAM".

use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use wildmatch::WildMatch;

/// ebb's role.
const RUNTIME: &str = "deploy/iam-policy.json";
/// Whoever runs `ebb audit verify` on S3 checkpoints.
const READER: &str = "deploy/iam-policy-audit-reader.json";
/// The example service control policy.
const SCP: &str = "deploy/scp-ebb-tags.json";

/// The SDK crates ebb reaches AWS through, with their services' IAM prefixes.
const SERVICES: &[(&str, &str)] = &[
    ("aws-sdk-ec2", "ec2"),
    ("aws-sdk-cloudwatch", "cloudwatch"),
    ("aws-sdk-autoscaling", "autoscaling"),
    ("aws-sdk-eks", "eks"),
    ("aws-sdk-sqs", "sqs"),
    ("aws-sdk-s3", "s3"),
];

/// Operations whose IAM action has another name (AWS's Service Authorization Reference).
const IAM_NAME_OF: &[(&str, &str)] = &[
    ("s3:ListObjectsV2", "s3:ListBucket"),
    ("s3:ListObjects", "s3:ListBucket"),
    ("s3:HeadObject", "s3:GetObject"),
    ("s3:HeadBucket", "s3:ListBucket"),
];

/// Actions ebb's role is granted that are no call of their own.
const NOT_CALLS: &[(&str, &str)] = &[(
    "iam:PassRole",
    "RunInstances gives a replacement its original's instance profile",
)];

/// The functions whose calls `ebb audit verify` makes, with the reader's credentials.
const VERIFIER: &[(&str, &str)] = &[("src/checkpoint/sink.rs", "read_objects")];

/// What the placeholders of the templates stand for when they are linted.
const EXAMPLE: &[(&str, &str)] = &[
    ("ACCOUNT_ID", "111111111111"),
    ("MEMBER_ACCOUNT_ID", "222222222222"),
    ("CHECKPOINT_ACCOUNT_ID", "333333333333"),
    ("QUEUE_NAME", "ebb-spot-interruptions"),
    ("CHECKPOINT_BUCKET", "example-ebb-audit"),
    ("CHECKPOINT_PREFIX", "ebb/"),
    ("FLEET_ADMIN_ROLE", "fleet-admin"),
];

/// The findings parliament may report, by file: `ISSUE` and the statement's Sid, or the
/// actions when parliament names no statement. docs/aws.md's "IAM" says why each stays.
const ALLOWED_FINDINGS: &[(&str, &str)] = &[
    // Replacements need their original's instance profile: RunInstances with PassRole.
    (
        RUNTIME,
        "PRIVILEGE_ESCALATION iam:passrole+ec2:runinstances",
    ),
    (RUNTIME, "PERMISSIONS_MANAGEMENT_ACTIONS iam:passrole"),
    // The roles in other accounts (EBB_ROLE_ARNS).
    (RUNTIME, "CREDENTIALS_EXPOSURE sts:assumerole"),
    // One call's resources split over statements, each with the condition for its resources:
    // parliament checks each statement alone.
    (
        RUNTIME,
        "RESOURCE_MISMATCH ImageAndTerminateManagedInstances",
    ),
    (RUNTIME, "RESOURCE_MISMATCH MakeImagesTaggedAsEbbs"),
    (RUNTIME, "RESOURCE_MISMATCH LaunchReplacementsTaggedAsSuch"),
    (
        RUNTIME,
        "RESOURCE_MISMATCH RestoreReclaimedInstancesTaggedAsSuch",
    ),
    (RUNTIME, "RESOURCE_MISMATCH LaunchOnlyFromImagesEbbMade"),
    (RUNTIME, "RESOURCE_MISMATCH LaunchIntoTheOriginalsNetwork"),
    (
        RUNTIME,
        "RESOURCE_MISMATCH TargetAndCancelOnlyReservationsEbbMade",
    ),
];

fn repo(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(path)
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn policy(file: &str) -> Value {
    serde_json::from_str(&read(&repo(file))).unwrap_or_else(|e| panic!("{file}: {e}"))
}

fn statements(policy: &Value) -> &Vec<Value> {
    policy["Statement"].as_array().expect("Statement is a list")
}

/// A string or a list of strings, as IAM takes either.
fn strings(value: &Value) -> Vec<String> {
    match value {
        Value::String(s) => vec![s.clone()],
        Value::Array(items) => items
            .iter()
            .map(|i| i.as_str().expect("a string").to_string())
            .collect(),
        Value::Null => Vec::new(),
        other => panic!("{other} is neither a string nor a list"),
    }
}

fn actions(statement: &Value) -> Vec<String> {
    assert!(statement.get("NotAction").is_none(), "{statement}");
    strings(&statement["Action"])
}

fn resources(statement: &Value) -> Vec<String> {
    assert!(statement.get("NotResource").is_none(), "{statement}");
    strings(&statement["Resource"])
}

/// Whether an IAM pattern (`*` and `?`, case-insensitive for actions) matches `name`.
fn matches(pattern: &str, name: &str) -> bool {
    WildMatch::new(&pattern.to_lowercase()).matches(&name.to_lowercase())
}

/// The Allow statements of `policy` that grant `action`, conditions aside.
fn granting<'a>(policy: &'a Value, action: &str) -> Vec<&'a Value> {
    statements(policy)
        .iter()
        .filter(|s| s["Effect"] == "Allow" && actions(s).iter().any(|a| matches(a, action)))
        .collect()
}

/// Every action a policy's Allow statements name.
fn granted(policy: &Value) -> BTreeSet<String> {
    statements(policy)
        .iter()
        .filter(|s| s["Effect"] == "Allow")
        .flat_map(actions)
        .collect()
}

// ---------------------------------------------------------------------------------------------
// The calls the code makes

/// The sources of `krate` at the version Cargo.lock gives, in Cargo's registry.
fn crate_source(krate: &str) -> PathBuf {
    let lock = read(&repo("Cargo.lock"));
    let version = lock
        .split("[[package]]")
        .find(|p| p.contains(&format!("\nname = \"{krate}\"\n")))
        .and_then(|p| p.lines().find_map(|l| l.strip_prefix("version = \"")))
        .and_then(|v| v.strip_suffix('"'))
        .unwrap_or_else(|| panic!("{krate} is not in Cargo.lock"));
    let home = std::env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(&std::env::var_os("HOME").expect("HOME")).join(".cargo"));
    let registries = home.join("registry").join("src");
    std::fs::read_dir(&registries)
        .unwrap_or_else(|e| panic!("{registries:?}: {e}"))
        .map(|r| r.unwrap().path().join(format!("{krate}-{version}")))
        .find(|dir| dir.is_dir())
        .unwrap_or_else(|| panic!("no sources of {krate} {version} in {registries:?}"))
}

/// The operations of each SDK crate by its fluent method's name (`describe_instances`), with
/// the operation's name (`DescribeInstances`), from the sources ebb is built with.
fn sdk_operations() -> BTreeMap<&'static str, BTreeMap<String, String>> {
    SERVICES
        .iter()
        .map(|(krate, prefix)| {
            let dir = crate_source(krate).join("src").join("operation");
            let mut operations = BTreeMap::new();
            for entry in std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{dir:?}: {e}")) {
                let path = entry.unwrap().path();
                if path.extension().is_some_and(|e| e == "rs") {
                    let method = path.file_stem().unwrap().to_string_lossy().into_owned();
                    let name = read(&path)
                        .lines()
                        .find_map(|l| l.strip_prefix("pub struct ")?.strip_suffix(';'))
                        .map(str::to_string);
                    if let Some(name) = name {
                        operations.insert(method, name);
                    }
                }
            }
            assert!(operations.len() > 10, "no operations in {dir:?}");
            (*prefix, operations)
        })
        .collect()
}

/// One AWS call in src/.
#[derive(Debug, Clone)]
struct Call {
    /// `crates/ebb-cloud/src/cloud/aws/ec2.rs:368`.
    place: String,
    /// The file, from the repository.
    file: String,
    /// The function it is in.
    function: String,
    /// The IAM action it needs (`ec2:StopInstances`).
    action: String,
}

fn rust_files(dir: &Path, files: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, files);
        } else if path.extension().is_some_and(|e| e == "rs") {
            files.push(path);
        }
    }
}

/// A file's code without its test module (tests reach the emulator, not AWS).
fn production_code(text: &str) -> &str {
    text.find("#[cfg(test)]\nmod ")
        .map_or(text, |at| &text[..at])
}

/// The methods called with no arguments on a line: `x.describe_instances()` gives
/// `describe_instances`. Not those called on `self`: ebb's own (`self.create_image()`), since
/// an SDK call is made on a client.
fn empty_calls(line: &str) -> Vec<&str> {
    let mut found = Vec::new();
    for (at, _) in line.match_indices('.') {
        let before = line[..at].trim_end_matches(|c: char| c.is_ascii_alphanumeric() || c == '_');
        if &line[before.len()..at] == "self" {
            continue;
        }
        let rest = &line[at + 1..];
        let len = rest
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(rest.len());
        if len > 0 && rest[len..].starts_with("()") {
            found.push(&rest[..len]);
        }
    }
    found
}

/// The function a line declares, if it does.
fn declared_function(line: &str) -> Option<&str> {
    let at = line.find("fn ")?;
    if at > 0 && !line[..at].ends_with(' ') {
        return None;
    }
    let rest = &line[at + 3..];
    let len = rest.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))?;
    (len > 0).then(|| &rest[..len])
}

/// Every AWS call in src/ and crates/ebb-cloud/src/, with the IAM action it needs.
fn calls() -> Vec<Call> {
    let operations = sdk_operations();
    let renamed: BTreeMap<&str, &str> = IAM_NAME_OF.iter().copied().collect();
    let mut files = Vec::new();
    // The application's own calls (the checkpoints' S3) and the providers'.
    rust_files(&repo("src"), &mut files);
    rust_files(&repo("crates/ebb-cloud/src"), &mut files);
    files.sort();
    let mut calls = Vec::new();
    for path in files {
        let file = path
            .strip_prefix(env!("CARGO_MANIFEST_DIR"))
            .unwrap()
            .to_string_lossy()
            .into_owned();
        let text = read(&path);
        let code = production_code(&text);
        // The services whose crate the file names, to tell apart an operation two have.
        let named: Vec<&str> = SERVICES
            .iter()
            .filter(|(krate, _)| code.contains(&krate.replace('-', "_")))
            .map(|(_, prefix)| *prefix)
            .collect();
        let mut function = String::new();
        for (n, line) in code.lines().enumerate() {
            let line = line.split("//").next().unwrap_or_default();
            if let Some(f) = declared_function(line) {
                function = f.to_string();
            }
            let mut actions = Vec::new();
            if line.contains("AssumeRoleProvider::builder(") {
                actions.push("sts:AssumeRole".to_string());
            }
            for method in empty_calls(line) {
                let of: Vec<&str> = operations
                    .iter()
                    .filter(|(_, ops)| ops.contains_key(method))
                    .map(|(prefix, _)| *prefix)
                    .collect();
                let of_named: Vec<&str> =
                    of.iter().copied().filter(|p| named.contains(p)).collect();
                let prefix = match (of.as_slice(), of_named.as_slice()) {
                    ([], _) => continue,
                    (_, [one]) | ([one], _) => *one,
                    _ => panic!("{file}:{}: .{method}() is an operation of {of:?}", n + 1),
                };
                let action = format!("{prefix}:{}", operations[prefix][method]);
                actions.push(
                    renamed
                        .get(action.as_str())
                        .map_or(action, |a| a.to_string()),
                );
            }
            for action in actions {
                calls.push(Call {
                    place: format!("{file}:{}", n + 1),
                    file: file.clone(),
                    function: function.clone(),
                    action,
                });
            }
        }
    }
    calls
}

fn by_verifier(call: &Call) -> bool {
    VERIFIER
        .iter()
        .any(|(file, function)| call.file == *file && call.function == *function)
}

#[test]
fn the_policies_grant_every_call_the_code_makes_and_nothing_else() {
    let calls = calls();
    // The scan finds each kind of call ebb makes (or it would pass on finding none).
    for action in [
        "ec2:DescribeInstances",
        "ec2:DescribeVolumes",
        "ec2:DescribeAddresses",
        "ec2:StopInstances",
        "ec2:RunInstances",
        "cloudwatch:GetMetricData",
        "sqs:ReceiveMessage",
        "s3:PutObject",
        "s3:ListBucket",
        "sts:AssumeRole",
    ] {
        assert!(
            calls.iter().any(|c| c.action == action),
            "the scan of src/ found no {action}: {calls:#?}"
        );
    }
    let runtime = policy(RUNTIME);
    let reader = policy(READER);
    let mut ungranted = Vec::new();
    for call in &calls {
        let (file, policy) = match by_verifier(call) {
            true => (READER, &reader),
            false => (RUNTIME, &runtime),
        };
        if granting(policy, &call.action).is_empty() {
            ungranted.push(format!(
                "{} (in fn {}): {} is not in {file}",
                call.place, call.function, call.action
            ));
        }
    }
    assert!(ungranted.is_empty(), "{}", ungranted.join("\n"));

    let made = |verifier: bool| -> BTreeSet<String> {
        calls
            .iter()
            .filter(|c| by_verifier(c) == verifier)
            .map(|c| c.action.clone())
            .collect()
    };
    let not_calls: BTreeSet<String> = NOT_CALLS.iter().map(|(a, _)| a.to_string()).collect();
    let runtime_made = made(false);
    let uncalled: Vec<String> = granted(&runtime)
        .into_iter()
        .filter(|a| !runtime_made.iter().any(|m| matches(a, m)) && !not_calls.contains(a))
        .collect();
    assert!(
        uncalled.is_empty(),
        "{RUNTIME} grants {uncalled:?}, which no call in src/ needs"
    );
    let verifier_made = made(true);
    assert_eq!(granted(&reader), verifier_made, "{READER}");
    // What only the verifier reads, ebb's role cannot.
    for action in verifier_made.difference(&runtime_made) {
        assert!(granting(&runtime, action).is_empty(), "{RUNTIME}: {action}");
    }
    for (action, _) in NOT_CALLS {
        assert!(
            !granting(&runtime, action).is_empty(),
            "{RUNTIME}: {action}"
        );
    }
}

#[test]
fn the_scan_finds_a_call_wherever_it_is_and_skips_what_is_no_call() {
    assert_eq!(
        empty_calls("let out = scope.ec2.describe_instances().send().await"),
        ["describe_instances", "send"]
    );
    assert_eq!(empty_calls("            .put_object()"), ["put_object"]);
    assert!(empty_calls("self.start_instances(region, ids)").is_empty());
    assert!(empty_calls("Some(State::Stopped) => self.create_image().await,").is_empty());
    assert_eq!(
        empty_calls("self.sqs.receive_message()"),
        ["receive_message"]
    );
    assert_eq!(
        declared_function("    pub(super) async fn run("),
        Some("run")
    );
    assert_eq!(
        declared_function("    F: Fn(&'a Scope, Vec<String>) -> Fut,"),
        None
    );
    let text = "fn a() {}\n#[cfg(test)]\nmod tests {\n    fn b() { c.stop_instances(); }\n}\n";
    assert_eq!(production_code(text), "fn a() {}\n");
}

// ---------------------------------------------------------------------------------------------
// The limits

/// The value of condition `operator`'s `key` in `statement`, as strings.
fn condition(statement: &Value, operator: &str, key: &str) -> Vec<String> {
    strings(&statement["Condition"][operator][key])
}

#[test]
fn pass_role_is_only_for_the_workload_roles_and_only_to_ec2() {
    let runtime = policy(RUNTIME);
    let passing = granting(&runtime, "iam:PassRole");
    assert!(!passing.is_empty());
    for statement in passing {
        assert_eq!(actions(statement), ["iam:PassRole"], "{statement}");
        for resource in resources(statement) {
            assert!(
                resource.starts_with("arn:aws:iam::${ACCOUNT_ID}:role/ebb-workloads/"),
                "{resource}"
            );
        }
        assert_eq!(
            condition(statement, "StringEquals", "iam:PassedToService"),
            ["ec2.amazonaws.com"]
        );
    }
}

#[test]
fn changes_are_only_to_managed_instances() {
    let key = format!("aws:ResourceTag/{}", managed_key());
    let runtime = policy(RUNTIME);
    for action in [
        "ec2:StopInstances",
        "ec2:StartInstances",
        "ec2:ModifyInstanceAttribute",
        "ec2:ModifyInstanceCapacityReservationAttributes",
        "ec2:TerminateInstances",
        "ec2:DescribeInstanceAttribute",
        "ec2:CreateImage",
        "ec2:CreateTags",
        "ec2:DeleteTags",
    ] {
        for statement in granting(&runtime, action) {
            // Tags written as the call that makes a resource makes it (below).
            if statement["Condition"]["StringEquals"]
                .get("ec2:CreateAction")
                .is_some()
            {
                continue;
            }
            let on_instances = resources(statement)
                .iter()
                .any(|r| matches(r, "arn:aws:ec2:eu-west-1:111111111111:instance/i-1"));
            // What CreateImage makes, and the reservations an instance is made to start into,
            // have statements of their own (below).
            let beside = [
                "ec2:CreateImage",
                "ec2:ModifyInstanceCapacityReservationAttributes",
            ];
            if beside.contains(&action) && !on_instances {
                continue;
            }
            assert_eq!(
                resources(statement),
                ["arn:aws:ec2:*:${ACCOUNT_ID}:instance/*"],
                "{action}: {statement}"
            );
            assert_eq!(
                condition(statement, "StringEquals", &key),
                ["true"],
                "{statement}"
            );
        }
    }
}

#[test]
fn group_capacity_changes_are_only_to_groups_tagged_for_ebb() {
    let key = format!("autoscaling:ResourceTag/{}", managed_key());
    let runtime = policy(RUNTIME);
    let grants = granting(&runtime, "autoscaling:UpdateAutoScalingGroup");
    assert!(!grants.is_empty(), "UpdateAutoScalingGroup is granted");
    for statement in grants {
        assert_eq!(
            resources(statement),
            ["arn:aws:autoscaling:*:${ACCOUNT_ID}:autoScalingGroup:*:autoScalingGroupName/*"],
            "{statement}"
        );
        assert_eq!(
            condition(statement, "StringEquals", &key),
            ["true"],
            "{statement}"
        );
    }
}

#[test]
fn node_group_changes_are_only_to_node_groups_tagged_for_ebb() {
    let key = format!("aws:ResourceTag/{}", managed_key());
    let runtime = policy(RUNTIME);
    let grants = granting(&runtime, "eks:UpdateNodegroupConfig");
    assert!(!grants.is_empty(), "UpdateNodegroupConfig is granted");
    for statement in grants {
        assert_eq!(
            resources(statement),
            ["arn:aws:eks:*:${ACCOUNT_ID}:nodegroup/*/*/*"],
            "{statement}"
        );
        assert_eq!(
            condition(statement, "StringEquals", &key),
            ["true"],
            "{statement}"
        );
    }
    // The reads that follow a change name EKS's resources, never "*".
    for action in ["eks:DescribeNodegroup", "eks:DescribeUpdate"] {
        for statement in granting(&runtime, action) {
            for resource in resources(statement) {
                assert!(resource.starts_with("arn:aws:eks:"), "{statement}");
            }
        }
    }
}

/// The tag that hands an instance to ebb (`EBB_MANAGED_TAG`'s default), which the policy names.
fn managed_key() -> String {
    let (key, _) = ebb::cloud::aws::Settings::default()
        .managed_tag
        .expect("a management tag by default");
    key
}

#[test]
fn tags_written_after_a_launch_are_ebbs_own_keys_named_and_never_the_management_tag() {
    let runtime = policy(RUNTIME);
    // The keys ebb sets and removes on instances: a notice's stop time
    // (src/reconcile/act/calls.rs) and the mark of an original being moved
    // (src/spot/drive/stop.rs, undo.rs).
    let written = BTreeSet::from([
        ebb::names::STOP_AT_TAG.to_string(),
        ebb::names::MIGRATING_TAG.to_string(),
    ]);
    for action in ["ec2:CreateTags", "ec2:DeleteTags"] {
        let after = granting(&runtime, action)
            .into_iter()
            .filter(|s| {
                s["Condition"]["StringEquals"]
                    .get("ec2:CreateAction")
                    .is_none()
            })
            .collect::<Vec<_>>();
        assert!(!after.is_empty(), "{action}");
        for statement in after {
            let keys: BTreeSet<String> =
                condition(statement, "ForAllValues:StringEquals", "aws:TagKeys")
                    .into_iter()
                    .collect();
            assert_eq!(keys, written, "{statement}");
            assert!(!keys.contains(&managed_key()));
            // ForAllValues holds for no keys at all, and DeleteTags with no keys deletes all.
            assert_eq!(condition(statement, "Null", "aws:TagKeys"), ["false"]);
            assert!(statement["Condition"]
                .as_object()
                .unwrap()
                .keys()
                .all(|op| !op.starts_with("ForAnyValue")));
        }
    }
}

#[test]
fn snapshots_are_tagged_only_by_the_create_image_call_that_makes_them() {
    let runtime = policy(RUNTIME);
    let snapshot = "arn:aws:ec2:eu-west-1::snapshot/snap-1";
    let image = "arn:aws:ec2:eu-west-1::image/ami-1";
    let tagging = granting(&runtime, "ec2:CreateTags");
    for statement in tagging {
        if resources(statement)
            .iter()
            .any(|r| matches(r, snapshot) || matches(r, image))
        {
            assert_eq!(
                condition(statement, "StringEquals", "ec2:CreateAction"),
                ["CreateImage"],
                "{statement}"
            );
            let keys = condition(statement, "ForAllValues:StringEquals", "aws:TagKeys");
            assert_eq!(
                keys,
                [
                    ebb::names::IMAGE_OF_TAG,
                    ebb::names::MIGRATION_TAG,
                    ebb::names::RECLAIM_TAG
                ],
                "{statement}"
            );
        }
    }
    // And CreateImage makes only images and snapshots that carry ebb's tag, which is what lets
    // ebb delete them.
    for statement in granting(&runtime, "ec2:CreateImage") {
        if resources(statement).iter().any(|r| matches(r, snapshot)) {
            let key = format!("aws:RequestTag/{}", ebb::names::IMAGE_OF_TAG);
            assert_eq!(condition(statement, "Null", &key), ["false"]);
        }
    }
    for action in ["ec2:DeregisterImage", "ec2:DeleteSnapshot"] {
        for statement in granting(&runtime, action) {
            let key = format!("aws:ResourceTag/{}", ebb::names::IMAGE_OF_TAG);
            assert_eq!(condition(statement, "Null", &key), ["false"]);
        }
    }
    // The code tags the snapshots in that call.
    let spot = read(&repo("crates/ebb-cloud/src/cloud/aws/spot.rs"));
    assert!(spot.contains(".tag_specifications(tagged(ResourceType::Snapshot))"));
}

#[test]
fn capacity_reservations_are_made_tagged_as_ebbs_and_only_those_are_targeted_or_cancelled() {
    let runtime = policy(RUNTIME);
    let reservations = ["arn:aws:ec2:*:${ACCOUNT_ID}:capacity-reservation/*"];
    let made = granting(&runtime, "ec2:CreateCapacityReservation");
    assert_eq!(made.len(), 1);
    assert_eq!(resources(made[0]), reservations);
    let key = format!("aws:RequestTag/{}", ebb::names::RESERVATION_TAG);
    assert_eq!(condition(made[0], "Null", &key), ["false"], "{}", made[0]);
    // Its tags only in the call that makes it, and only ebb's.
    let tagged: Vec<&Value> = granting(&runtime, "ec2:CreateTags")
        .into_iter()
        .filter(|s| resources(s) == reservations)
        .collect();
    assert_eq!(tagged.len(), 1);
    assert_eq!(
        condition(tagged[0], "StringEquals", "ec2:CreateAction"),
        ["CreateCapacityReservation"]
    );
    assert_eq!(
        condition(tagged[0], "ForAllValues:StringEquals", "aws:TagKeys"),
        [ebb::names::RESERVATION_TAG, ebb::names::RESERVED_FOR_TAG]
    );
    // Targeted and cancelled: only reservations carrying ebb's tag.
    let key = format!("aws:ResourceTag/{}", ebb::names::RESERVATION_TAG);
    for action in [
        "ec2:CancelCapacityReservation",
        "ec2:ModifyInstanceCapacityReservationAttributes",
    ] {
        let on_reservations: Vec<&Value> = granting(&runtime, action)
            .into_iter()
            .filter(|s| resources(s) == reservations)
            .collect();
        assert_eq!(on_reservations.len(), 1, "{action}");
        assert_eq!(
            condition(on_reservations[0], "Null", &key),
            ["false"],
            "{action}"
        );
    }
    let cancels = granting(&runtime, "ec2:CancelCapacityReservation");
    assert!(cancels.iter().all(|s| resources(s) == reservations));
}

#[test]
fn replacements_launch_only_from_images_ebb_made_and_tagged_as_replacements() {
    let runtime = policy(RUNTIME);
    let mut launches = Vec::new();
    for statement in granting(&runtime, "ec2:RunInstances") {
        for resource in resources(statement) {
            if resource.contains(":instance/") {
                let key = format!("aws:RequestTag/{}", managed_key());
                assert_eq!(condition(statement, "StringEquals", &key), ["true"]);
                // A spot move's replacement, or a reclaimed box restored: tagged as which.
                let marked: Vec<&str> =
                    [ebb::names::MIGRATED_FROM_TAG, ebb::names::RESTORED_FROM_TAG]
                        .into_iter()
                        .filter(|tag| {
                            let key = format!("aws:RequestTag/{tag}");
                            condition(statement, "Null", &key) == ["false"]
                        })
                        .collect();
                assert_eq!(marked.len(), 1, "{statement}");
                launches.push(marked[0]);
            }
            if resource.contains(":image/") {
                let key = format!("aws:ResourceTag/{}", ebb::names::IMAGE_OF_TAG);
                assert_eq!(condition(statement, "Null", &key), ["false"]);
            }
            assert_ne!(resource, "*");
        }
    }
    launches.sort_unstable();
    assert_eq!(
        launches,
        [ebb::names::MIGRATED_FROM_TAG, ebb::names::RESTORED_FROM_TAG]
    );
}

#[test]
fn checkpoints_are_written_once_and_only_the_verifier_reads_them() {
    let runtime = policy(RUNTIME);
    let s3: BTreeSet<String> = granted(&runtime)
        .into_iter()
        .filter(|a| a.starts_with("s3:"))
        .collect();
    assert_eq!(s3, BTreeSet::from(["s3:PutObject".to_string()]));
    for statement in granting(&runtime, "s3:PutObject") {
        assert_eq!(condition(statement, "Null", "s3:if-none-match"), ["false"]);
        assert_eq!(
            resources(statement),
            ["arn:aws:s3:::${CHECKPOINT_BUCKET}/${CHECKPOINT_PREFIX}checkpoint-*.json"]
        );
        assert_eq!(
            condition(statement, "StringEquals", "s3:ResourceAccount"),
            ["${CHECKPOINT_ACCOUNT_ID}"]
        );
    }
    // The code writes with If-None-Match, which the condition requires.
    let sink = read(&repo("src/checkpoint/sink.rs"));
    let put = &sink[sink.find(".put_object()").unwrap()..];
    assert!(put[..put.find(".send()").unwrap()].contains(".if_none_match(\"*\")"));
    let reader = policy(READER);
    for statement in statements(&reader) {
        assert_eq!(
            condition(statement, "StringEquals", "s3:ResourceAccount"),
            ["${CHECKPOINT_ACCOUNT_ID}"]
        );
        for resource in resources(statement) {
            assert!(resource.starts_with("arn:aws:s3:::${CHECKPOINT_BUCKET}"));
        }
    }
}

/// Every ARN a policy names, in its resources and conditions.
fn arns(policy: &Value) -> Vec<String> {
    fn walk(value: &Value, found: &mut Vec<String>) {
        match value {
            Value::String(s) if s.starts_with("arn:") => found.push(s.clone()),
            Value::Array(items) => items.iter().for_each(|i| walk(i, found)),
            Value::Object(map) => map.values().for_each(|v| walk(v, found)),
            _ => {}
        }
    }
    let mut found = Vec::new();
    walk(policy, &mut found);
    found
}

#[test]
fn the_templates_grant_nothing_in_an_account_they_do_not_name() {
    for file in [RUNTIME, READER, SCP] {
        let policy = policy(file);
        for arn in arns(&policy) {
            let parts: Vec<&str> = arn.splitn(6, ':').collect();
            let (service, account, resource) = (parts[2], parts[4], parts[5]);
            // S3 ARNs name no account (the statements' s3:ResourceAccount does), nor do EC2
            // images and snapshots (only their owner can change them).
            let no_account = service == "s3"
                || (service == "ec2"
                    && (resource.starts_with("image/") || resource.starts_with("snapshot/")));
            if no_account {
                assert_eq!(account, "", "{file}: {arn}");
            } else {
                assert!(
                    account.starts_with("${") && account.ends_with("_ACCOUNT_ID}")
                        || account == "${ACCOUNT_ID}",
                    "{file}: {arn} names no account placeholder"
                );
            }
            assert!(!account.contains('*'), "{file}: {arn}");
        }
    }
}

/// The `${NAME}` placeholders of a template.
fn placeholders(text: &str) -> BTreeSet<String> {
    text.split("${")
        .skip(1)
        .filter_map(|rest| rest.split_once('}').map(|(name, _)| name.to_string()))
        .collect()
}

/// The IAM section of docs/aws.md, with its subsections.
fn manual_iam_section() -> String {
    let page = read(&repo("docs/aws.md"));
    let start = page
        .find("\n## IAM\n")
        .expect("docs/aws.md has a section \"## IAM\"");
    let rest = &page[start + 1..];
    let end = ["\n## ", "\n# "]
        .iter()
        .filter_map(|heading| rest.find(heading))
        .min()
        .unwrap_or(rest.len());
    rest[..end].to_string()
}

#[test]
fn every_placeholder_is_documented_and_has_an_example() {
    let section = manual_iam_section();
    for file in [RUNTIME, READER, SCP] {
        for name in placeholders(&read(&repo(file))) {
            assert!(
                section.contains(&format!("`${{{name}}}`")),
                "docs/aws.md's \"IAM\" does not explain ${{{name}}} of {file}"
            );
            assert!(EXAMPLE.iter().any(|(n, _)| *n == name), "{name}");
        }
    }
}

/// The principals the example SCP lets write `key`: those every Deny statement that matches
/// the key exempts.
fn scp_writers(scp: &Value, key: &str) -> BTreeSet<String> {
    let mut writers: Option<BTreeSet<String>> = None;
    for s in statements(scp) {
        let keys = ["ForAnyValue:StringEquals", "ForAnyValue:StringLike"]
            .iter()
            .flat_map(|op| condition(s, op, "aws:TagKeys"))
            .collect::<Vec<_>>();
        let denies = s["Effect"] == "Deny"
            && ["ec2:CreateTags", "ec2:DeleteTags"]
                .iter()
                .all(|a| actions(s).iter().any(|p| matches(p, a)))
            && resources(s) == ["*"]
            && keys.iter().any(|p| WildMatch::new(p).matches(key));
        if denies {
            let exempt: BTreeSet<String> = condition(s, "ArnNotLike", "aws:PrincipalArn")
                .into_iter()
                .collect();
            writers = Some(match writers {
                None => exempt,
                Some(w) => w.intersection(&exempt).cloned().collect(),
            });
        }
    }
    writers.unwrap_or_else(|| panic!("the SCP lets anyone write {key}"))
}

#[test]
fn the_example_scp_lets_only_ebb_write_its_tags() {
    let scp = policy(SCP);
    let roles = |name: &str| -> BTreeSet<String> {
        ["${ACCOUNT_ID}", "${MEMBER_ACCOUNT_ID}"]
            .iter()
            .map(|account| format!("arn:aws:iam::{account}:role/{name}"))
            .collect()
    };
    let ebb_roles = roles("ebb");
    // The roles ebb assumes in other accounts are ebb's there.
    let assumed: BTreeSet<String> = granting(&policy(RUNTIME), "sts:AssumeRole")
        .into_iter()
        .flat_map(resources)
        .collect();
    assert!(assumed.is_subset(&ebb_roles), "{assumed:?}");
    // What only ebb writes (its notices and migrations' marks): only ebb.
    for key in [
        ebb::names::STOP_AT_TAG,
        ebb::names::MIGRATING_TAG,
        ebb::names::MIGRATION_TAG,
        ebb::names::LAUNCH_TAG,
        ebb::names::MIGRATED_FROM_TAG,
        ebb::names::IMAGE_OF_TAG,
        ebb::names::RESERVATION_TAG,
        ebb::names::RESERVED_FOR_TAG,
    ] {
        assert_eq!(scp_writers(&scp, key), ebb_roles, "{key}");
    }
    // What hands an instance to ebb: ebb (on its replacements) and the fleet's admins.
    let admins: BTreeSet<String> = ebb_roles
        .union(&roles("${FLEET_ADMIN_ROLE}"))
        .cloned()
        .collect();
    for key in [managed_key().as_str(), ebb::names::INTERRUPTIBLE_TAG] {
        assert_eq!(scp_writers(&scp, key), admins, "{key}");
    }
    // Every other ebb:* tag (protections, a job's checkpoint time): also the workloads.
    let workloads: BTreeSet<String> = admins.union(&roles("ebb-workloads/*")).cloned().collect();
    for key in [
        ebb::names::SKIP_TAG,
        ebb::names::KEEP_UNTIL_TAG,
        ebb::names::CHECKPOINT_AT_TAG,
        "ebb:anything",
    ] {
        assert_eq!(scp_writers(&scp, key), workloads, "{key}");
    }
}

// ---------------------------------------------------------------------------------------------
// parliament

/// A template with the example values in its placeholders.
fn rendered(file: &str) -> String {
    let mut text = read(&repo(file));
    for (name, value) in EXAMPLE {
        text = text.replace(&format!("${{{name}}}"), value);
    }
    assert!(
        !text.contains("${"),
        "{file}: a placeholder without an example"
    );
    text
}

/// parliament's findings on `text`, as `ISSUE Sid` (or `ISSUE actions`).
fn parliament(text: &str) -> Vec<String> {
    let mut child = Command::new("python3")
        .args([
            "-m",
            "parliament.cli",
            "--include-community-auditors",
            "--json",
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run python3");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !stderr.contains("No module named parliament"),
        "parliament is not installed: run `. scripts/lib.sh; need_parliament`"
    );
    let lines: Vec<&str> = text.lines().collect();
    let sid_at = |line: usize| {
        lines[line.saturating_sub(1)..]
            .iter()
            .find_map(|l| l.trim().strip_prefix("\"Sid\": \""))
            .and_then(|rest| rest.split('"').next())
            .unwrap_or("?")
            .to_string()
    };
    let findings: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|line| {
            let f: Value = serde_json::from_str(line)
                .unwrap_or_else(|e| panic!("parliament printed {line:?} ({e}); {stderr}"));
            let issue = f["issue"].as_str().unwrap_or("?");
            let location = &f["location"];
            let what = match location["line"].as_u64() {
                Some(line) => sid_at(line as usize),
                None => strings(&location["actions"]).join("+"),
            };
            format!("{issue} {what}")
        })
        .collect();
    // parliament exits 1 when it finds something, 2 and more when it fails.
    assert!(
        out.status.code().is_some_and(|c| c <= 1),
        "parliament failed: {stderr}"
    );
    findings
}

#[test]
fn parliament_finds_nothing_but_the_findings_the_manual_explains() {
    let section = manual_iam_section();
    for file in [RUNTIME, READER, SCP] {
        let found: BTreeSet<String> = parliament(&rendered(file)).into_iter().collect();
        let allowed: BTreeSet<String> = ALLOWED_FINDINGS
            .iter()
            .filter(|(f, _)| *f == file)
            .map(|(_, finding)| finding.to_string())
            .collect();
        let new: Vec<&String> = found.difference(&allowed).collect();
        assert!(
            new.is_empty(),
            "parliament finds in {file}: {new:?}; fix them, or allow them in tests/external/iam.rs \
             and say why in docs/aws.md's \"IAM\""
        );
        let gone: Vec<&String> = allowed.difference(&found).collect();
        assert!(
            gone.is_empty(),
            "parliament no longer finds {gone:?} in {file}: take them off the allow-list"
        );
        for finding in &allowed {
            let (issue, what) = finding.split_once(' ').unwrap();
            assert!(
                section.contains(issue) && section.contains(what),
                "docs/aws.md's \"IAM\" does not explain {finding}"
            );
        }
    }
}

#[test]
fn parliament_reports_what_it_is_asked_to_find() {
    // The lint is live: a grant of everything is reported.
    let everything = r#"{"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}]}"#;
    assert!(!parliament(everything).is_empty());
}
