//! The Chinese quick start (`docs/zh-CN/quickstart.md`) is run, not written: its policy is
//! the one the page shows, written where the page says, and each `ebb` command of a `sh`
//! block that a `text` block follows is run with the shipped sample fleet; the command's
//! output must be that block (only the policy version's hash is left out).

use crate::common::Ebb;

const PAGE: &str = include_str!("../../docs/zh-CN/quickstart.md");

/// The page's fenced blocks, in order: (info string, body).
fn blocks() -> Vec<(&'static str, &'static str)> {
    let mut found = Vec::new();
    let mut rest = PAGE;
    while let Some(open) = rest.find("\n```") {
        let after = &rest[open + 4..];
        let Some(line_end) = after.find('\n') else {
            break;
        };
        let info = &after[..line_end];
        let body_and_rest = &after[line_end + 1..];
        let close = body_and_rest.find("```").expect("a closed fence");
        found.push((info.trim(), &body_and_rest[..close]));
        rest = &body_and_rest[close + 3..];
    }
    found
}

/// `text` with the policy version's hash left out, and trailing spaces trimmed.
fn comparable(text: &str) -> String {
    text.lines()
        .map(|l| match l.split_once("sha256:") {
            Some((head, tail)) => {
                let rest = tail.trim_start_matches(|c: char| c.is_ascii_hexdigit() || c == '…');
                format!("{head}sha256:…{rest}")
            }
            None => l.to_string(),
        })
        .map(|l| l.trim_end().to_string())
        .collect::<Vec<_>>()
        .join("\n")
        .trim_end()
        .to_string()
}

#[test]
fn the_chinese_quick_starts_commands_print_what_it_shows() {
    let root = env!("CARGO_MANIFEST_DIR");
    let dir = tempfile::tempdir().unwrap();
    // What the page asks the reader to do in the repository's root.
    assert!(PAGE.contains("mkdir -p my-policies && cp policies/calendars.yaml my-policies/"));
    let policy = blocks()
        .into_iter()
        .find(|(info, body)| *info == "yaml" && body.contains("name: vision-gpu-dev"))
        .expect("the page's policy")
        .1;
    std::fs::create_dir_all(dir.path().join("my-policies")).unwrap();
    std::fs::write(dir.path().join("my-policies/vision-gpu-dev.yaml"), policy).unwrap();
    std::fs::copy(
        format!("{root}/policies/calendars.yaml"),
        dir.path().join("my-policies/calendars.yaml"),
    )
    .unwrap();
    std::fs::create_dir_all(dir.path().join("docs/zh-CN")).unwrap();
    for sample in ["fleet.yaml", "hangzhou.yaml"] {
        std::fs::copy(
            format!("{root}/docs/zh-CN/{sample}"),
            dir.path().join("docs/zh-CN").join(sample),
        )
        .unwrap();
    }
    // The advice's price table and GPU readings (a header alone), as the page asks.
    assert!(PAGE.contains("echo instance,time,gpu_util > utilisation.csv"));
    std::fs::write(
        dir.path().join("utilisation.csv"),
        "instance,time,gpu_util\n",
    )
    .unwrap();
    let prices = blocks()
        .into_iter()
        .find(|(info, body)| *info == "yaml" && body.contains("subscription:"))
        .expect("the page's price table with subscriptions")
        .1;
    std::fs::write(dir.path().join("prices.yaml"), prices).unwrap();

    let all = blocks();
    let mut checked = 0;
    for pair in all.windows(2) {
        let [(sh, commands), (text, shown)] = pair else {
            unreachable!()
        };
        if *sh != "sh" || *text != "text" {
            continue;
        }
        let mut printed = String::new();
        for line in commands.lines().filter(|l| l.starts_with("ebb ")) {
            let args: Vec<&str> = line.split_whitespace().skip(1).collect();
            let out = Ebb::new()
                .command(&args)
                .current_dir(dir.path())
                .output()
                .unwrap();
            assert!(out.status.success(), "{line}: {out:?}");
            printed.push_str(&String::from_utf8(out.stdout).unwrap());
        }
        assert_eq!(comparable(&printed), comparable(shown), "{commands}");
        checked += 1;
    }
    assert_eq!(
        checked, 5,
        "validate, two plans, an explain and the subscription advice"
    );
}
