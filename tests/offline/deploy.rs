//! The deployment files (deploy/Dockerfile, deploy/compose.yaml, deploy/k8s/) checked against
//! the binary they deploy. No Docker engine or Kubernetes cluster runs on these machines, so
//! instead of starting containers this reads the files and asks the built `ebb` whether it
//! accepts what they ask of it:
//!
//! - every environment variable set for ebb is one it reads (a misspelt name is silently
//!   ignored by a running container, so only a test catches it);
//! - every command run (`serve`, the health check's `ready`) is a subcommand of ebb;
//! - the Kubernetes probes ask `/healthz` and `/readyz` on the port ebb listens on;
//! - the image is a release build with default features, holds CA certificates and time zones,
//!   and runs ebb as a non-root user;
//! - the image's binary has no line tables, and a stage keeps them for crash reports;
//! - the policies in the ConfigMap pass `ebb validate`, and the policies are mounted read-only
//!   where ebb looks for them;
//! - Kubernetes runs two replicas, and what the manifests refer to exists;
//! - a NetworkPolicy admits to ebb's pods only the ingress controller and Prometheus, on the
//!   port ebb listens on;
//! - the schema is migrated by a step of its own (compose's one-shot service, an init container)
//!   as the owner, which grants the runtime role that `serve` then runs as.

use crate::common::ebb;
use serde::Deserialize;
use serde_yaml::Value;
use std::path::{Path, PathBuf};
use std::process::Output;

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// A path in the repository.
fn repo(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(path)
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The YAML documents of a file (a manifest may hold several, separated by `---`).
fn documents(path: &Path) -> Vec<Value> {
    let text = read(path);
    serde_yaml::Deserializer::from_str(&text)
        .map(|doc| Value::deserialize(doc).unwrap_or_else(|e| panic!("{}: {e}", path.display())))
        .filter(|doc| !doc.is_null())
        .collect()
}

/// The value at a path of keys, if every key is there.
fn at<'a>(value: &'a Value, keys: &[&str]) -> Option<&'a Value> {
    keys.iter().try_fold(value, |v, key| v.get(*key))
}

/// A scalar as text (YAML reads `true`, `8080` and `60s` as different types).
fn text(value: &Value) -> Option<String> {
    match value {
        Value::String(s) => Some(s.clone()),
        Value::Bool(b) => Some(b.to_string()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

/// A command line: a list of words, or a string split at spaces.
fn words(value: Option<&Value>) -> Vec<String> {
    match value {
        Some(Value::Sequence(items)) => items.iter().filter_map(text).collect(),
        Some(Value::String(s)) => s.split_whitespace().map(String::from).collect(),
        _ => Vec::new(),
    }
}

/// The port of a listen address such as `0.0.0.0:8080`.
fn port_of(listen: &str) -> u16 {
    listen
        .rsplit_once(':')
        .and_then(|(_, port)| port.parse().ok())
        .unwrap_or_else(|| panic!("{listen:?} is not HOST:PORT"))
}

// ---------------------------------------------------------------------------------------------
// What the binary accepts

/// The AWS SDK's standard variables a deployment may set.
const AWS_VARIABLES: &[&str] = &[
    "AWS_REGION",
    "AWS_DEFAULT_REGION",
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AWS_PROFILE",
    "AWS_ROLE_ARN",
    "AWS_WEB_IDENTITY_TOKEN_FILE",
    "AWS_ENDPOINT_URL",
    "AWS_EC2_METADATA_DISABLED",
];

/// The variables `ebb serve` reads through its flags, as its help lists them: clap prints
/// `[env: NAME=value]`, or `[env: NAME]` when the value is hidden.
fn serve_variables() -> Vec<String> {
    let o = ebb(&["serve", "--help"]);
    assert!(o.status.success(), "ebb serve --help: {}", stderr(&o));
    // Joined into one line, in case the help is wrapped inside a bracket.
    let help = stdout(&o).split_whitespace().collect::<Vec<_>>().join(" ");
    let names: Vec<String> = help
        .split("[env: ")
        .skip(1)
        .map(|rest| {
            rest.chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect()
        })
        .collect();
    assert!(
        names.iter().any(|n| n == "EBB_POLICIES"),
        "no [env: ...] in ebb serve --help:\n{help}"
    );
    names
}

/// Asserts that ebb reads every variable of `names`, set at `place`.
fn assert_read_by_ebb(place: &str, names: &[String], serve: &[String]) {
    let unknown: Vec<&String> = names
        .iter()
        .filter(|name| {
            if name.starts_with("AWS_") {
                !AWS_VARIABLES.contains(&name.as_str())
            } else {
                !serve.contains(*name)
            }
        })
        .collect();
    assert!(
        unknown.is_empty(),
        "{place} sets variables ebb does not read: {unknown:?}\n\
         (ebb serve reads {serve:?} and the AWS SDK's {AWS_VARIABLES:?})"
    );
}

/// Asserts that `ebb SUBCOMMAND --help` succeeds, i.e. that ebb has that subcommand.
fn assert_subcommand(place: &str, argv: &[String]) {
    let sub = argv
        .first()
        .unwrap_or_else(|| panic!("{place}: no subcommand given to ebb"));
    let o = ebb(&[sub.as_str(), "--help"]);
    assert!(
        o.status.success(),
        "{place} runs `ebb {}`, which ebb does not accept: {}",
        argv.join(" "),
        stderr(&o)
    );
}

/// The arguments after the program of a command line that runs ebb.
fn after_ebb(place: &str, argv: &[String]) -> Vec<String> {
    match argv.split_first() {
        Some((program, rest)) if program == "ebb" || program == "/usr/local/bin/ebb" => {
            rest.to_vec()
        }
        _ => panic!("{place} runs {argv:?}, not ebb"),
    }
}

// ---------------------------------------------------------------------------------------------
// deploy/compose.yaml

fn compose_service(name: &str) -> Value {
    let path = repo("deploy/compose.yaml");
    let compose = documents(&path).remove(0);
    at(&compose, &["services", name])
        .unwrap_or_else(|| panic!("{}: no service {name}", path.display()))
        .clone()
}

/// A compose service's environment as (name, value), from either form compose takes: a
/// mapping, or a list of NAME=VALUE. A name without a value passes on the shell's.
fn compose_env(service: &Value) -> Vec<(String, Option<String>)> {
    match service.get("environment") {
        Some(Value::Mapping(map)) => map
            .iter()
            .map(|(k, v)| (text(k).expect("a variable name"), text(v)))
            .collect(),
        Some(Value::Sequence(items)) => items
            .iter()
            .filter_map(text)
            .map(|item| match item.split_once('=') {
                Some((name, value)) => (name.to_string(), Some(value.to_string())),
                None => (item, None),
            })
            .collect(),
        _ => Vec::new(),
    }
}

fn compose_value(service: &Value, name: &str) -> String {
    compose_env(service)
        .into_iter()
        .find(|(n, _)| n == name)
        .and_then(|(_, value)| value)
        .unwrap_or_else(|| panic!("compose.yaml: the ebb service does not set {name}"))
}

// ---------------------------------------------------------------------------------------------
// deploy/k8s/

/// Every manifest under deploy/k8s, the git-sync alternative included, with its file.
fn manifests() -> Vec<(PathBuf, Value)> {
    fn yaml_files(dir: &Path, files: &mut Vec<PathBuf>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                yaml_files(&path, files);
            } else if path.extension().is_some_and(|e| e == "yaml" || e == "yml") {
                files.push(path);
            }
        }
    }
    let mut files = Vec::new();
    yaml_files(&repo("deploy/k8s"), &mut files);
    files.sort();
    assert!(!files.is_empty(), "no manifests in deploy/k8s");
    files
        .into_iter()
        .flat_map(|file| {
            documents(&file)
                .into_iter()
                .map(move |doc| (file.clone(), doc))
        })
        .collect()
}

fn kind(doc: &Value) -> &str {
    doc.get("kind").and_then(Value::as_str).unwrap_or("")
}

fn name(doc: &Value) -> &str {
    at(doc, &["metadata", "name"])
        .and_then(Value::as_str)
        .unwrap_or("")
}

/// The one manifest of a kind and name (not for Deployments: the git-sync alternative holds a
/// second `ebb`).
fn manifest(wanted_kind: &str, wanted_name: &str) -> Value {
    let mut found: Vec<Value> = manifests()
        .into_iter()
        .map(|(_, doc)| doc)
        .filter(|doc| kind(doc) == wanted_kind && name(doc) == wanted_name)
        .collect();
    assert_eq!(found.len(), 1, "{wanted_kind} {wanted_name} in deploy/k8s");
    found.remove(0)
}

/// An ebb container of a pod template, with its pod and where it is, for messages.
struct Container {
    place: String,
    spec: Value,
    pod: Value,
    /// An init container (the migrate step), not the one that serves.
    init: bool,
}

/// The pod specs of a manifest: the mappings that hold `containers`, wherever its kind puts
/// them (a Deployment's spec.template.spec, a CronJob's deeper down).
fn pod_specs(value: &Value) -> Vec<&Value> {
    let mut found = Vec::new();
    match value {
        Value::Mapping(map) => {
            if value.get("containers").is_some() {
                found.push(value);
            }
            for (_, v) in map {
                found.extend(pod_specs(v));
            }
        }
        Value::Sequence(items) => {
            for v in items {
                found.extend(pod_specs(v));
            }
        }
        _ => {}
    }
    found
}

/// The git-sync sidecar's image: its GITSYNC_* settings are git-sync's, not ebb's.
const GIT_SYNC_IMAGE: &str = "registry.k8s.io/git-sync/git-sync:";

/// Every ebb container (and init container) of every manifest in deploy/k8s.
fn ebb_containers() -> Vec<Container> {
    let mut found = Vec::new();
    for (file, doc) in manifests() {
        for pod in pod_specs(&doc) {
            for list in ["containers", "initContainers"] {
                for spec in pod
                    .get(list)
                    .and_then(Value::as_sequence)
                    .into_iter()
                    .flatten()
                {
                    let image = spec.get("image").and_then(Value::as_str).unwrap_or("");
                    if image.starts_with(GIT_SYNC_IMAGE) {
                        continue;
                    }
                    let container = spec.get("name").and_then(Value::as_str).unwrap_or("?");
                    found.push(Container {
                        place: format!(
                            "{}: {} {}, container {container}",
                            file.strip_prefix(repo(""))
                                .unwrap_or(file.as_path())
                                .display(),
                            kind(&doc),
                            name(&doc)
                        ),
                        spec: spec.clone(),
                        pod: pod.clone(),
                        init: list == "initContainers",
                    });
                }
            }
        }
    }
    assert!(
        found.len() >= 2,
        "the Deployment and its git-sync alternative each run ebb"
    );
    found
}

/// The names of a container's `env` entries.
fn k8s_env_names(c: &Container) -> Vec<String> {
    assert!(
        c.spec.get("envFrom").is_none(),
        "{}: envFrom hides the variable names from this test; list them under env",
        c.place
    );
    c.spec
        .get("env")
        .and_then(Value::as_sequence)
        .into_iter()
        .flatten()
        .filter_map(|e| e.get("name").and_then(text))
        .collect()
}

/// The containers that run `ebb serve` (every ebb container but the init containers).
fn serving_containers() -> Vec<Container> {
    ebb_containers().into_iter().filter(|c| !c.init).collect()
}

/// The user of a `postgres://USER:PASSWORD@HOST/DB` URL.
fn url_user(url: &str) -> &str {
    let rest = url.split_once("://").map_or(url, |(_, rest)| rest);
    let userinfo = rest.split_once('@').map_or("", |(userinfo, _)| userinfo);
    userinfo.split(':').next().unwrap_or("")
}

/// The Secret and key a container's variable `name` comes from.
fn k8s_env_secret(c: &Container, name: &str) -> (String, String) {
    let reference = c
        .spec
        .get("env")
        .and_then(Value::as_sequence)
        .into_iter()
        .flatten()
        .find(|e| e.get("name").and_then(Value::as_str) == Some(name))
        .and_then(|e| at(e, &["valueFrom", "secretKeyRef"]))
        .unwrap_or_else(|| panic!("{}: {name} is not from a Secret", c.place));
    let field = |f: &str| {
        reference
            .get(f)
            .and_then(Value::as_str)
            .unwrap()
            .to_string()
    };
    (field("name"), field("key"))
}

/// The literal value of a container's variable `name`.
fn k8s_env_value(c: &Container, name: &str) -> String {
    c.spec
        .get("env")
        .and_then(Value::as_sequence)
        .into_iter()
        .flatten()
        .find(|e| e.get("name").and_then(Value::as_str) == Some(name))
        .and_then(|e| e.get("value"))
        .and_then(text)
        .unwrap_or_else(|| panic!("{}: no value for {name}", c.place))
}

// ---------------------------------------------------------------------------------------------
// deploy/Dockerfile

/// A Dockerfile instruction: its keyword in upper case and the rest of its logical line.
struct Instruction {
    keyword: String,
    args: String,
}

/// The stages of deploy/Dockerfile (from each FROM to the next), with continuation lines
/// joined and comments dropped.
fn dockerfile_stages() -> Vec<Vec<Instruction>> {
    let text = read(&repo("deploy/Dockerfile"));
    let mut stages: Vec<Vec<Instruction>> = Vec::new();
    let mut line = String::new();
    for raw in text.lines() {
        let raw = raw.trim();
        if raw.is_empty() || raw.starts_with('#') {
            continue;
        }
        if let Some(head) = raw.strip_suffix('\\') {
            line.push_str(head);
            line.push(' ');
            continue;
        }
        line.push_str(raw);
        let (keyword, args) = line.split_once(' ').unwrap_or((line.as_str(), ""));
        let instruction = Instruction {
            keyword: keyword.to_ascii_uppercase(),
            args: args.trim().to_string(),
        };
        line.clear();
        if instruction.keyword == "FROM" {
            stages.push(Vec::new());
        }
        if let Some(stage) = stages.last_mut() {
            stage.push(instruction);
        }
    }
    assert!(
        stages.len() >= 2,
        "deploy/Dockerfile: a build and a runtime stage"
    );
    stages
}

/// The arguments of a stage's last `keyword` instruction.
fn last<'a>(stage: &'a [Instruction], keyword: &str) -> &'a str {
    stage
        .iter()
        .rev()
        .find(|i| i.keyword == keyword)
        .map(|i| i.args.as_str())
        .unwrap_or_else(|| panic!("deploy/Dockerfile: the runtime stage has no {keyword}"))
}

/// An exec-form command, `["ebb", "ready"]`.
fn exec_form(args: &str) -> Vec<String> {
    serde_json::from_str(args)
        .unwrap_or_else(|_| panic!("deploy/Dockerfile: {args} is not in exec form ([\"...\"])"))
}

/// The commands of a RUN line that run `program`, word by word, up to the next shell operator.
fn commands(run: &str, program: &str) -> Vec<Vec<String>> {
    let words: Vec<&str> = run.split_whitespace().collect();
    let mut found = Vec::new();
    for (i, word) in words.iter().enumerate() {
        if *word == program {
            let command = words[i..]
                .iter()
                .take_while(|w| !matches!(**w, "&&" | "||" | ";" | "|"))
                .map(|w| w.to_string())
                .collect();
            found.push(command);
        }
    }
    found
}

/// Every command of every RUN instruction of the Dockerfile that runs `program`.
fn dockerfile_commands(stages: &[Vec<Instruction>], program: &str) -> Vec<Vec<String>> {
    stages
        .iter()
        .flatten()
        .filter(|i| i.keyword == "RUN")
        .flat_map(|i| commands(&i.args, program))
        .collect()
}

/// The `objcopy` command of the Dockerfile that writes `output` (objcopy's last argument).
fn objcopy_writing<'a>(objcopies: &'a [Vec<String>], output: &str) -> &'a [String] {
    objcopies
        .iter()
        .find(|c| c.last().map(String::as_str) == Some(output))
        .unwrap_or_else(|| panic!("deploy/Dockerfile: no objcopy writes {output}"))
}

// ---------------------------------------------------------------------------------------------
// The checks

#[test]
fn every_variable_the_deployments_set_is_one_ebb_reads() {
    let serve = serve_variables();
    let compose: Vec<String> = compose_env(&compose_service("ebb"))
        .into_iter()
        .map(|(name, _)| name)
        .collect();
    assert!(compose.iter().any(|n| n == "DATABASE_URL"));
    assert_read_by_ebb("deploy/compose.yaml, service ebb", &compose, &serve);
    let migrate: Vec<String> = compose_env(&compose_service("migrate"))
        .into_iter()
        .map(|(name, _)| name)
        .collect();
    assert_eq!(migrate, ["DATABASE_URL"], "compose.yaml, service migrate");
    for c in ebb_containers() {
        let names = k8s_env_names(&c);
        assert!(names.iter().any(|n| n == "DATABASE_URL"), "{}", c.place);
        assert_read_by_ebb(&c.place, &names, &serve);
    }
}

#[test]
fn every_command_the_deployments_run_is_an_ebb_subcommand() {
    let service = compose_service("ebb");
    assert_subcommand("compose.yaml command", &words(service.get("command")));
    let migrate = words(compose_service("migrate").get("command"));
    assert_subcommand("compose.yaml migrate command", &migrate);
    let test = words(at(&service, &["healthcheck", "test"]));
    assert_eq!(test.first().map(String::as_str), Some("CMD"), "{test:?}");
    let place = "compose.yaml healthcheck";
    assert_subcommand(place, &after_ebb(place, &test[1..]));

    for c in ebb_containers() {
        let command = words(c.spec.get("command"));
        let mut argv = if command.is_empty() {
            Vec::new() // the image's ENTRYPOINT, ebb
        } else {
            after_ebb(&c.place, &command)
        };
        argv.extend(words(c.spec.get("args")));
        assert_subcommand(&c.place, &argv);
    }

    let stages = dockerfile_stages();
    let runtime = stages.last().unwrap();
    assert_subcommand("Dockerfile CMD", &exec_form(last(runtime, "CMD")));
    let healthcheck = last(runtime, "HEALTHCHECK");
    let (_, command) = healthcheck
        .split_once("CMD ")
        .unwrap_or_else(|| panic!("HEALTHCHECK {healthcheck}: no CMD"));
    let place = "Dockerfile HEALTHCHECK";
    assert_subcommand(place, &after_ebb(place, &exec_form(command.trim())));
}

#[test]
fn kubernetes_probes_ask_the_health_routes_on_the_port_ebb_listens_on() {
    for c in serving_containers() {
        let listen = k8s_env_value(&c, "EBB_LISTEN");
        // The kubelet probes from outside the pod's loopback.
        assert!(listen.starts_with("0.0.0.0:"), "{}: {listen}", c.place);
        let port = port_of(&listen);
        for (probe, paths) in [
            ("readinessProbe", &["/readyz"][..]),
            // Not /readyz: a replica without its database would be restarted for nothing.
            ("livenessProbe", &["/healthz"][..]),
            ("startupProbe", &["/healthz", "/readyz"][..]),
        ] {
            let Some(get) = at(&c.spec, &[probe, "httpGet"]) else {
                assert!(probe == "startupProbe", "{}: no {probe}.httpGet", c.place);
                continue;
            };
            let path = get.get("path").and_then(Value::as_str).unwrap_or("");
            assert!(paths.contains(&path), "{}: {probe} asks {path:?}", c.place);
            let probe_port = match get.get("port") {
                Some(Value::Number(n)) => n.as_u64(),
                // A named port: look it up among the container's ports.
                Some(Value::String(named)) => c
                    .spec
                    .get("ports")
                    .and_then(Value::as_sequence)
                    .into_iter()
                    .flatten()
                    .find(|p| p.get("name").and_then(Value::as_str) == Some(named.as_str()))
                    .and_then(|p| p.get("containerPort"))
                    .and_then(Value::as_u64),
                _ => None,
            };
            assert_eq!(
                probe_port,
                Some(u64::from(port)),
                "{}: {probe} port, EBB_LISTEN={listen}",
                c.place
            );
        }
    }
}

/// The base images are build arguments with Docker Hub's images as defaults, so that a team
/// that cannot reach Docker Hub builds from a mirror; every stage but `scratch` starts from one.
#[test]
fn the_base_images_are_build_arguments_for_a_mirror() {
    let text = read(&repo("deploy/Dockerfile"));
    let head = &text[..text.find("\nFROM ").expect("a FROM")];
    for arg in [
        "ARG RUST_IMAGE=rust:1.95-bookworm",
        "ARG RUNTIME_IMAGE=debian:bookworm-slim",
    ] {
        assert!(
            head.lines().any(|l| l.trim() == arg),
            "deploy/Dockerfile: {arg} before the first FROM"
        );
    }
    let bases: Vec<String> = dockerfile_stages()
        .iter()
        .map(|stage| stage[0].args.split_whitespace().next().unwrap().to_string())
        .collect();
    assert_eq!(bases, ["${RUST_IMAGE}", "scratch", "${RUNTIME_IMAGE}"]);
}

#[test]
fn the_image_is_a_release_build_run_by_a_non_root_user() {
    let text = read(&repo("deploy/Dockerfile"));
    for flag in ["--features", "--no-default-features"] {
        assert!(
            !text.contains(flag),
            "deploy/Dockerfile: the image is built with {flag}"
        );
    }
    let stages = dockerfile_stages();
    let builds: Vec<Vec<String>> = dockerfile_commands(&stages, "cargo")
        .into_iter()
        .filter(|c| c.get(1).map(String::as_str) == Some("build"))
        .collect();
    assert_eq!(
        builds,
        [["cargo", "build", "--release", "--locked", "--bin", "ebb"]],
        "deploy/Dockerfile: the release profile, the locked dependencies, default features"
    );

    // Whatever the build stage copies must not be left out of the context by .dockerignore.
    let dockerignore = read(&repo(".dockerignore"));
    let ignored: Vec<&str> = dockerignore
        .lines()
        .map(|l| l.trim().trim_matches('/'))
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .collect();
    for copy in stages.iter().flatten().filter(|i| i.keyword == "COPY") {
        if copy.args.starts_with("--from") {
            continue;
        }
        let mut sources: Vec<&str> = copy.args.split_whitespace().collect();
        sources.pop(); // the destination
        for source in sources {
            let top = source.trim_end_matches('/').split('/').next().unwrap();
            assert!(!ignored.contains(&top), ".dockerignore leaves out {source}");
        }
    }

    let runtime = stages.last().unwrap();
    let apt: Vec<&str> = runtime
        .iter()
        .filter(|i| i.keyword == "RUN" && i.args.contains("apt-get install"))
        .flat_map(|i| i.args.split_whitespace())
        .collect();
    for package in ["ca-certificates", "tzdata"] {
        assert!(
            apt.contains(&package),
            "the runtime stage installs {package}"
        );
    }

    // Numeric, so that Kubernetes' runAsNonRoot can tell it is not root.
    let user = last(runtime, "USER");
    let uid: u32 = user
        .split(':')
        .next()
        .and_then(|uid| uid.parse().ok())
        .unwrap_or_else(|| panic!("USER {user}: not a numeric uid"));
    assert_ne!(uid, 0, "the image runs as root");

    let entrypoint = exec_form(last(runtime, "ENTRYPOINT"));
    assert!(
        after_ebb("ENTRYPOINT", &entrypoint).is_empty(),
        "{entrypoint:?}"
    );
    assert!(
        runtime.iter().any(|i| i.keyword == "COPY"
            && i.args.starts_with("--from=")
            && i.args.ends_with(" /usr/local/bin/ebb")),
        "the runtime stage copies the binary to /usr/local/bin/ebb"
    );

    let listen = runtime
        .iter()
        .filter(|i| i.keyword == "ENV")
        .flat_map(|i| i.args.split_whitespace())
        .find_map(|kv| kv.strip_prefix("EBB_LISTEN="))
        .expect("ENV EBB_LISTEN=0.0.0.0:PORT");
    assert!(listen.starts_with("0.0.0.0:"), "EBB_LISTEN={listen}");
    assert_eq!(last(runtime, "EXPOSE"), port_of(listen).to_string());
}

#[test]
fn the_image_gets_the_binary_without_its_line_tables_which_a_stage_keeps() {
    let stages = dockerfile_stages();
    let runtime = stages.last().unwrap();
    let copy: Vec<&str> = runtime
        .iter()
        .find(|i| {
            i.keyword == "COPY"
                && i.args.starts_with("--from=")
                && i.args.ends_with(" /usr/local/bin/ebb")
        })
        .expect("the runtime stage copies the binary to /usr/local/bin/ebb")
        .args
        .split_whitespace()
        .collect();
    let shipped = copy[copy.len() - 2];

    // The release profile's line tables are ~300 MB of a ~330 MB binary.
    let objcopies = dockerfile_commands(&stages, "objcopy");
    let strip = objcopy_writing(&objcopies, shipped);
    assert!(
        strip
            .iter()
            .any(|w| w == "--strip-debug" || w == "--strip-all"),
        "the image gets {shipped}, which {strip:?} does not strip"
    );
    let debug = strip
        .iter()
        .find_map(|w| w.strip_prefix("--add-gnu-debuglink="))
        .unwrap_or_else(|| panic!("{strip:?}: no --add-gnu-debuglink= to the line tables"));
    let keep = objcopy_writing(&objcopies, debug);
    assert!(
        keep.iter().any(|w| w == "--only-keep-debug"),
        "{keep:?}: not --only-keep-debug"
    );
    let input = |command: &[String]| command[command.len() - 2].clone();
    assert_eq!(
        input(keep),
        input(strip),
        "the debug file and the shipped binary come from the same build"
    );

    // A stage other than the runtime one holds the debug file, to export for crash reports.
    let kept = stages[..stages.len() - 1].iter().flatten().any(|i| {
        i.keyword == "COPY"
            && i.args.starts_with("--from=")
            && i.args.split_whitespace().any(|w| w == debug)
    });
    assert!(
        kept,
        "deploy/Dockerfile: no stage copies {debug} out of the builder"
    );
}

#[test]
fn the_policies_in_the_config_map_are_valid() {
    let map = manifest("ConfigMap", "ebb-policies");
    let data = map
        .get("data")
        .and_then(Value::as_mapping)
        .expect("ebb-policies has data");
    let dir = tempfile::tempdir().unwrap();
    for (file, policy) in data {
        let file = file.as_str().expect("a file name");
        assert!(
            file.ends_with(".yaml") || file.ends_with(".yml"),
            "{file}: ebb reads only *.yaml and *.yml"
        );
        std::fs::write(dir.path().join(file), policy.as_str().expect("text")).unwrap();
    }
    let o = ebb(&["validate", dir.path().to_str().unwrap()]);
    assert!(o.status.success(), "{}{}", stdout(&o), stderr(&o));
}

#[test]
fn compose_mounts_the_policies_read_only_and_publishes_the_port_ebb_listens_on() {
    let service = compose_service("ebb");
    let policies = compose_value(&service, "EBB_POLICIES");
    let mount = words(service.get("volumes"))
        .into_iter()
        .find(|v| v.split(':').nth(1) == Some(policies.as_str()))
        .unwrap_or_else(|| panic!("compose.yaml: nothing mounted at {policies}"));
    let parts: Vec<&str> = mount.split(':').collect();
    assert_eq!(parts.get(2), Some(&"ro"), "{mount}: read-only");
    assert!(
        repo("deploy").join(parts[0]).is_dir(),
        "{mount}: {} is not a directory next to deploy/",
        parts[0]
    );

    let listen = compose_value(&service, "EBB_LISTEN");
    assert!(listen.starts_with("0.0.0.0:"), "EBB_LISTEN={listen}");
    let port = port_of(&listen).to_string();
    let published = words(service.get("ports"));
    assert!(
        published
            .iter()
            .any(|p| p.rsplit(':').next() == Some(port.as_str())),
        "compose.yaml publishes {published:?}, ebb listens on {listen}"
    );
}

#[test]
fn kubernetes_mounts_the_policies_read_only_and_runs_two_replicas() {
    for c in serving_containers() {
        let policies = k8s_env_value(&c, "EBB_POLICIES");
        let mount = c
            .spec
            .get("volumeMounts")
            .and_then(Value::as_sequence)
            .into_iter()
            .flatten()
            .find(|m| {
                let path = m.get("mountPath").and_then(Value::as_str).unwrap_or("");
                !path.is_empty() && Path::new(&policies).starts_with(path)
            })
            .unwrap_or_else(|| panic!("{}: nothing mounted at {policies}", c.place));
        assert_eq!(
            mount.get("readOnly").and_then(Value::as_bool),
            Some(true),
            "{}: the policies' mount",
            c.place
        );
        let volume = mount.get("name").and_then(Value::as_str).unwrap();
        let volumes = c.pod.get("volumes").and_then(Value::as_sequence);
        assert!(
            volumes
                .into_iter()
                .flatten()
                .any(|v| v.get("name").and_then(Value::as_str) == Some(volume)),
            "{}: no volume {volume}",
            c.place
        );
    }

    let deployments: Vec<(PathBuf, Value)> = manifests()
        .into_iter()
        .filter(|(_, doc)| kind(doc) == "Deployment")
        .collect();
    assert_eq!(
        deployments.len(),
        2,
        "deployment.yaml and git-sync/deployment.yaml"
    );
    for (file, deployment) in deployments {
        // One leads; the other serves reads and takes over within a tick.
        let replicas = at(&deployment, &["spec", "replicas"]).and_then(Value::as_u64);
        assert_eq!(replicas, Some(2), "{}: replicas", file.display());
    }
    let budget = manifest("PodDisruptionBudget", "ebb");
    let min_available = at(&budget, &["spec", "minAvailable"]).and_then(Value::as_u64);
    assert_eq!(min_available, Some(1));
}

#[test]
fn what_the_kubernetes_manifests_refer_to_exists() {
    let kustomization = documents(&repo("deploy/k8s/kustomization.yaml")).remove(0);
    let resources = words(kustomization.get("resources"));
    for resource in &resources {
        assert!(
            repo("deploy/k8s").join(resource).is_file(),
            "kustomization.yaml lists {resource}, which is not there"
        );
    }
    // Both define the Deployment ebb: only one may be applied.
    assert!(!resources.iter().any(|r| r.starts_with("git-sync")));

    for c in ebb_containers() {
        let env = c.spec.get("env").and_then(Value::as_sequence);
        for reference in env
            .into_iter()
            .flatten()
            .filter_map(|e| at(e, &["valueFrom", "secretKeyRef"]))
        {
            let name = reference.get("name").and_then(Value::as_str).unwrap();
            let secret = manifest("Secret", name);
            let key = reference.get("key").and_then(Value::as_str).unwrap();
            let held = ["stringData", "data"]
                .iter()
                .any(|data| at(&secret, &[*data, key]).is_some());
            assert!(held, "{}: the Secret {name} has no {key}", c.place);
        }
        let account = c.pod.get("serviceAccountName").and_then(Value::as_str);
        assert_eq!(account, Some("ebb"), "{}", c.place);
    }
    let account = manifest("ServiceAccount", "ebb");
    let role = at(
        &account,
        &["metadata", "annotations", "eks.amazonaws.com/role-arn"],
    );
    assert!(role
        .and_then(Value::as_str)
        .is_some_and(|r| r.starts_with("arn:aws:iam::")));
}

#[test]
fn a_network_policy_admits_only_the_ingress_controller_and_prometheus() {
    let kustomization = documents(&repo("deploy/k8s/kustomization.yaml")).remove(0);
    assert!(words(kustomization.get("resources")).contains(&"networkpolicy.yaml".to_string()));
    let policy = manifest("NetworkPolicy", "ebb");
    let selected = at(&policy, &["spec", "podSelector", "matchLabels"]);
    let deployment = documents(&repo("deploy/k8s/deployment.yaml"))
        .into_iter()
        .find(|doc| kind(doc) == "Deployment")
        .expect("deployment.yaml holds the Deployment");
    let pods = at(&deployment, &["spec", "template", "metadata", "labels"]);
    assert!(
        selected.is_some() && selected == pods,
        "it selects ebb's pods"
    );
    let types = words(at(&policy, &["spec", "policyTypes"]));
    assert!(types.contains(&"Ingress".to_string()), "{types:?}");

    // The named port of ebb's container: the only one a rule opens.
    let named_port = ebb_containers()
        .iter()
        .filter_map(|c| c.spec.get("ports").and_then(Value::as_sequence))
        .flatten()
        .find(|p| p.get("containerPort").and_then(Value::as_u64) == Some(8080))
        .and_then(|p| p.get("name").and_then(text))
        .expect("ebb's container names its port");
    let rules = at(&policy, &["spec", "ingress"])
        .and_then(Value::as_sequence)
        .expect("ingress rules");
    let mut sources = Vec::new();
    for rule in rules {
        let from = rule.get("from").and_then(Value::as_sequence);
        // A rule without `from` (or with an empty one) admits every source.
        let from = from
            .filter(|f| !f.is_empty())
            .expect("each rule names its sources");
        let ports = rule.get("ports").and_then(Value::as_sequence);
        let ports: Vec<String> = ports
            .expect("each rule names its ports")
            .iter()
            .filter_map(|p| p.get("port").and_then(text))
            .collect();
        assert!(
            ports.iter().all(|p| *p == named_port || *p == "8080") && !ports.is_empty(),
            "{ports:?}"
        );
        for source in from {
            assert!(
                source.get("ipBlock").is_none(),
                "no address ranges: {source:?}"
            );
            let namespace = at(
                source,
                &[
                    "namespaceSelector",
                    "matchLabels",
                    "kubernetes.io/metadata.name",
                ],
            )
            .and_then(text)
            .expect("each source is a namespace, by name");
            sources.push(namespace);
        }
    }
    sources.sort();
    assert_eq!(sources, ["ingress-nginx", "monitoring"]);
}

/// The role `ebb migrate --grant-runtime ROLE` grants in `argv` (which must run migrate so).
fn granted_runtime_role(place: &str, argv: &[String]) -> String {
    match argv {
        [migrate, grant, role] if migrate == "migrate" && grant == "--grant-runtime" => {
            role.clone()
        }
        _ => panic!("{place} runs ebb {argv:?}, not ebb migrate --grant-runtime ROLE"),
    }
}

#[test]
fn the_migrate_step_runs_as_the_owner_and_serve_as_the_runtime_role_it_grants() {
    let help = stdout(&ebb(&["migrate", "--help"]));
    assert!(help.contains("--grant-runtime <ROLE>"), "{help}");

    // compose: a one-shot migrate service, which serve waits for.
    let migrate = compose_service("migrate");
    let role = granted_runtime_role("compose.yaml migrate", &words(migrate.get("command")));
    let serve = compose_service("ebb");
    assert_eq!(words(serve.get("command")), ["serve"]);
    let waits = at(&serve, &["depends_on", "migrate", "condition"]).and_then(Value::as_str);
    assert_eq!(waits, Some("service_completed_successfully"));
    let owner_url = compose_value(&migrate, "DATABASE_URL");
    let runtime_url = compose_value(&serve, "DATABASE_URL");
    assert_eq!(url_user(&runtime_url), role, "serve's DATABASE_URL");
    assert_ne!(
        url_user(&owner_url),
        role,
        "the migrate step runs as the owner"
    );
    assert!(!words(migrate.get("restart")).iter().any(|r| r != "no"));

    // Kubernetes: an init container migrates with the owner's Secret; ebb serves with another.
    for c in serving_containers() {
        assert_eq!(words(c.spec.get("args")), ["serve"], "{}", c.place);
        let inits: Vec<&Value> = c
            .pod
            .get("initContainers")
            .and_then(Value::as_sequence)
            .into_iter()
            .flatten()
            .collect();
        assert_eq!(
            inits.len(),
            1,
            "{}: one init container, the migrate step",
            c.place
        );
        let init = ebb_containers()
            .into_iter()
            .find(|i| i.init && i.pod == c.pod)
            .unwrap();
        assert_eq!(
            init.spec.get("image"),
            c.spec.get("image"),
            "{}",
            init.place
        );
        let role = granted_runtime_role(&init.place, &words(init.spec.get("args")));
        let (owner_secret, owner_key) = k8s_env_secret(&init, "DATABASE_URL");
        let (runtime_secret, runtime_key) = k8s_env_secret(&c, "DATABASE_URL");
        assert_ne!(
            owner_secret, runtime_secret,
            "{}: the owner's Secret is the init's own",
            c.place
        );
        let url_in = |secret: &str, key: &str| {
            text(at(&manifest("Secret", secret), &["stringData", key]).unwrap()).unwrap()
        };
        assert_eq!(
            url_user(&url_in(&runtime_secret, &runtime_key)),
            role,
            "{}",
            c.place
        );
        assert_ne!(
            url_user(&url_in(&owner_secret, &owner_key)),
            role,
            "{}",
            init.place
        );
    }
}

/// The build stage copies what `cargo build` reads: every crate of the workspace, and every
/// file the source embeds with `include_str!` or `include_bytes!`. A file left out fails the
/// image's build, which no other test runs.
#[test]
fn the_build_stage_copies_every_crate_and_embedded_file_the_build_reads() {
    let stages = dockerfile_stages();
    let copied: Vec<String> = stages[0]
        .iter()
        .filter(|i| i.keyword == "COPY" && !i.args.starts_with("--from"))
        .flat_map(|i| {
            let words: Vec<&str> = i.args.split_whitespace().collect();
            words[..words.len() - 1]
                .iter()
                .map(|w| w.to_string())
                .collect::<Vec<_>>()
        })
        .collect();
    let is_copied = |path: &str| {
        copied
            .iter()
            .any(|c| c == path || (c.ends_with('/') && path.starts_with(c.as_str())))
    };
    let crates = crate::structure::workspace_members();
    let mut read_by_build: Vec<String> = crates
        .iter()
        .filter(|m| *m != ".")
        .map(|m| format!("{m}/"))
        .collect();
    let root = repo("");
    for dir in crates.iter().map(|m| repo(m).join("src")) {
        for file in crate::structure::rust_files(&dir) {
            let text = read(&file);
            for embedded in text.split("include_").skip(1).filter_map(|rest| {
                let rest = rest
                    .strip_prefix("str!(\"")
                    .or(rest.strip_prefix("bytes!(\""))?;
                rest.split('"').next()
            }) {
                let path = file.parent().unwrap().join(embedded);
                let path = std::fs::canonicalize(&path)
                    .unwrap_or_else(|e| panic!("{}: {embedded}: {e}", file.display()));
                let relative = path
                    .strip_prefix(std::fs::canonicalize(&root).unwrap())
                    .unwrap();
                read_by_build.push(relative.to_string_lossy().to_string());
            }
        }
    }
    assert!(
        read_by_build
            .iter()
            .any(|p| p == "deploy/instance-types.yaml"),
        "{read_by_build:?}"
    );
    let missing: Vec<&String> = read_by_build.iter().filter(|p| !is_copied(p)).collect();
    assert!(
        missing.is_empty(),
        "the build stage does not copy {missing:?}"
    );
}
