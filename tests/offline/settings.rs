//! docs/settings.md against the command line's definitions: every setting clap reads is in the
//! table with its flag and its default, the table holds nothing else but the variables read
//! outside ebb's code (the AWS SDK's, the allocator's), each setting means the same wherever a
//! command takes it, and secrets are hidden from `--help`.

use std::collections::BTreeMap;
use std::path::Path;

/// One setting as clap defines it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Defined {
    /// `--flag`.
    flag: String,
    /// The default, values joined by `,`; empty when none.
    default: String,
    /// The help text.
    help: String,
    /// Whether `--help` hides the variable's value.
    hidden: bool,
}

/// Every setting clap reads, by variable, with each command that takes it.
fn defined() -> BTreeMap<String, Vec<(String, Defined)>> {
    fn walk(
        command: &clap::Command,
        path: &str,
        found: &mut BTreeMap<String, Vec<(String, Defined)>>,
    ) {
        for arg in command.get_arguments() {
            let Some(env) = arg.get_env() else { continue };
            let default: Vec<String> = arg
                .get_default_values()
                .iter()
                .map(|v| v.to_string_lossy().into_owned())
                .collect();
            let setting = Defined {
                flag: arg.get_long().map(|l| format!("--{l}")).unwrap_or_default(),
                default: default.join(","),
                help: arg.get_help().map(|h| h.to_string()).unwrap_or_default(),
                hidden: arg.is_hide_env_values_set(),
            };
            found
                .entry(env.to_string_lossy().into_owned())
                .or_default()
                .push((path.to_string(), setting));
        }
        for sub in command.get_subcommands() {
            walk(sub, &format!("{path} {}", sub.get_name()), found);
        }
    }
    let mut command = ebb::cli::command();
    command.build();
    let mut found = BTreeMap::new();
    walk(&command, "ebb", &mut found);
    found
}

/// A row of the table: the flag cell and the default cell, by variable.
type Table = BTreeMap<String, (String, String)>;

/// The table of `text`: every row whose first cell is a variable in backticks.
fn table(text: &str) -> Table {
    let mut rows = Table::new();
    for line in text.lines().filter(|l| l.starts_with("| `")) {
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        let name = cells[1].trim_matches('`').to_string();
        rows.insert(name, (cells[2].to_string(), cells[3].to_string()));
    }
    rows
}

/// Variables in the table that ebb's code does not read: the AWS SDK reads `AWS_*`, jemalloc
/// reads its own.
fn read_elsewhere(name: &str) -> bool {
    name.starts_with("AWS_") || name == "_RJEM_MALLOC_CONF"
}

/// Where the table and clap disagree, described.
fn problems(table: &Table, defined: &BTreeMap<String, Defined>) -> Vec<String> {
    let mut problems = Vec::new();
    for (name, setting) in defined {
        let Some((flag, default)) = table.get(name) else {
            problems.push(format!("{name} is read by clap but not in the table"));
            continue;
        };
        if *flag != format!("`{}`", setting.flag) {
            problems.push(format!(
                "{name}: the table says flag {flag}, clap `{}`",
                setting.flag
            ));
        }
        let documented = match setting.default.is_empty() {
            true => !default.starts_with('`'),
            false => default.starts_with(&format!("`{}`", setting.default)),
        };
        if !documented {
            problems.push(format!(
                "{name}: the table's default is {default:?}, clap's {:?} (a default in \
                 backticks first, or words when clap has none)",
                setting.default
            ));
        }
    }
    for (name, (flag, _)) in table {
        if defined.contains_key(name) {
            continue;
        }
        if !read_elsewhere(name) {
            problems.push(format!(
                "{name} is in the table, but clap does not read it (define it in src/cli, or \
                 take it out of the table)"
            ));
        } else if flag != "—" {
            problems.push(format!(
                "{name} is not clap's, yet the table gives flag {flag}"
            ));
        }
    }
    problems
}

/// Each setting once: the same flag, default and help in every command that takes it.
fn settings() -> BTreeMap<String, Defined> {
    let mut settings = BTreeMap::new();
    let mut differing = Vec::new();
    for (name, uses) in defined() {
        let (first_command, first) = &uses[0];
        for (command, setting) in &uses[1..] {
            if setting != first {
                differing.push(format!(
                    "{name}: `{first_command}` has {first:?}, `{command}` {setting:?}"
                ));
            }
        }
        settings.insert(name, first.clone());
    }
    assert!(
        differing.is_empty(),
        "settings defined more than once, differently (define each once, in one clap::Args \
         struct the commands flatten): {differing:#?}"
    );
    settings
}

fn settings_page() -> String {
    std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/settings.md")).unwrap()
}

#[test]
fn the_settings_table_is_clap_s_definitions() {
    let settings = settings();
    assert!(
        settings.len() >= 30,
        "too few settings found: {settings:#?}"
    );
    let problems = problems(&table(&settings_page()), &settings);
    assert!(problems.is_empty(), "docs/settings.md: {problems:#?}");
}

#[test]
fn the_table_check_finds_each_kind_of_drift() {
    let settings = settings();
    let page = settings_page();
    let intact = table(&page);
    assert!(problems(&intact, &settings).is_empty());
    let mut missing = intact.clone();
    missing.remove("EBB_TICK");
    let mut wrong_default = intact.clone();
    wrong_default.get_mut("EBB_TICK").unwrap().1 = "`90s`".into();
    let mut wrong_flag = intact.clone();
    wrong_flag.get_mut("EBB_LISTEN").unwrap().0 = "`--address`".into();
    let mut extra = intact.clone();
    extra.insert("EBB_NOTHING".into(), ("—".into(), "none".into()));
    let mut default_claimed = intact.clone();
    default_claimed.get_mut("EBB_REPLICA").unwrap().1 = "`ebb`".into();
    for (drift, table) in [
        ("missing", missing),
        ("wrong default", wrong_default),
        ("wrong flag", wrong_flag),
        ("extra", extra),
        ("a default clap has not", default_claimed),
    ] {
        assert_eq!(problems(&table, &settings).len(), 1, "{drift}");
    }
}

#[test]
fn secrets_are_hidden_from_help() {
    let settings = settings();
    for secret in [
        "DATABASE_URL",
        "EBB_API_TOKENS",
        "EBB_WEBHOOK_URL",
        "EBB_EVENTS_URL",
        "TENCENTCLOUD_SECRET_KEY",
        "TENCENTCLOUD_SESSION_TOKEN",
    ] {
        assert!(
            settings[secret].hidden,
            "--help shows the value of {secret}"
        );
    }
    assert!(!settings["EBB_TICK"].hidden);
}
