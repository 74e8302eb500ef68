//! The console in a real browser: `ebb serve` on the simulated demo fleet, as `scripts/run`
//! starts it (faster), and headless Chromium reading each page. The test checks the DOM
//! Chromium rendered for the demo's instances, reasons, chart and spot move, and writes a
//! screenshot of each page under the target directory (`target/console-*.png`) for people to
//! look at.
//!
//! Chromium is Debian's `chromium` package; `scripts/test` installs it. Without it this test
//! fails and says so: it never passes by skipping.

mod common;

use serde_json::Value;
use sqlx::PgPool;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// `scripts/run`'s start: Monday 10:00 UTC, 18:00 in Shanghai.
const START: &str = "2026-11-30T10:00:00Z";
/// Simulated seconds per real second: the research boxes' evening stops (12:00 UTC) come
/// after about three seconds.
const SPEED: &str = "3000";
/// How long the demo may take to reach them on a slow, busy machine.
const PATIENCE: Duration = Duration::from_secs(180);

/// `ebb serve`, killed when dropped.
struct Serve(Child);

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The Chromium binary, or a failure that says how to get it.
fn chromium() -> PathBuf {
    for name in ["chromium", "chromium-browser"] {
        let found = Command::new("sh")
            .args(["-c", &format!("command -v {name}")])
            .output()
            .unwrap();
        if found.status.success() {
            return PathBuf::from(String::from_utf8(found.stdout).unwrap().trim());
        }
    }
    panic!(
        "chromium is not installed: this test opens the console in headless Chromium. \
         scripts/test installs it (need_chromium); by hand: apt-get install -y chromium"
    );
}

/// Headless Chromium with a profile of its own and nothing fetched in the background.
fn browser(chromium: &Path, profile: &Path) -> Command {
    let mut c = Command::new(chromium);
    c.args([
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--hide-scrollbars",
    ])
    .arg(format!("--user-data-dir={}", profile.display()))
    .stdin(Stdio::null());
    c
}

/// The DOM Chromium rendered for `url`.
fn dom(chromium: &Path, profile: &Path, url: &str) -> String {
    let out = browser(chromium, profile)
        .args(["--dump-dom", url])
        .stderr(Stdio::null())
        .output()
        .unwrap();
    assert!(out.status.success(), "chromium --dump-dom {url} failed");
    let html = String::from_utf8(out.stdout).unwrap();
    assert!(html.contains("</html>"), "{url}: no page rendered: {html}");
    // Nothing is loaded from elsewhere, and no script runs.
    assert!(!html.contains("<script"), "{url}: {html}");
    for attribute in ["src=\"http", "href=\"http"] {
        assert!(!html.contains(attribute), "{url} links out: {html}");
    }
    html
}

/// Writes Chromium's screenshot of `url` at `width`×900 to `file`, a PNG.
fn screenshot(chromium: &Path, profile: &Path, url: &str, width: u32, file: &Path) {
    let _ = std::fs::remove_file(file);
    let out = browser(chromium, profile)
        .arg(format!("--screenshot={}", file.display()))
        .arg(format!("--window-size={width},900"))
        .arg(url)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .unwrap();
    assert!(out.success(), "chromium --screenshot {url} failed");
    let png = std::fs::read(file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
    assert!(
        png.starts_with(b"\x89PNG"),
        "{} is not a PNG",
        file.display()
    );
}

/// The JSON of the API's `path`.
async fn api(http: &reqwest::Client, base: &str, path: &str) -> Option<Value> {
    let r = http.get(format!("{base}{path}")).send().await.ok()?;
    r.json().await.ok()
}

#[sqlx::test(migrations = false)]
async fn the_console_in_chromium_on_the_demo_fleet(pool: PgPool) {
    let chromium = chromium();
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let base = format!("http://127.0.0.1:{port}");
    // Migrated by the migrate step; serve runs as the runtime role, as in scripts/run.
    let url = common::migrated_for_runtime(&pool).await;
    let _serve = Serve(
        Command::new(env!("CARGO_BIN_EXE_ebb"))
            .args(["serve", "--tick", "5m", "--clock-start", START])
            .args(["--clock-speed", SPEED])
            .current_dir(root)
            .env("DATABASE_URL", &url)
            .env("EBB_CLOUD", "sim:deploy/demo-fleet.yaml")
            .env("EBB_POLICIES", "policies")
            // As scripts/run: the price table prices the US boxes' stops on /savings.
            .env("EBB_PRICES", "deploy/prices.yaml")
            .env("EBB_LISTEN", format!("127.0.0.1:{port}"))
            .env_remove("EBB_API_TOKENS")
            // As scripts/run: the console is read without a token.
            .env("EBB_API_PUBLIC_READS", "true")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );

    // Until research01's evening stop is in the audit log and the training box's move to spot
    // has begun.
    let http = reqwest::Client::new();
    let stops = "/v1/audit?instance=i-0research01&action=stop&outcome=succeeded";
    let started = Instant::now();
    let stop = loop {
        let stop = api(&http, &base, stops)
            .await
            .and_then(|rows| rows.as_array().and_then(|rows| rows.first().cloned()));
        let moving = api(&http, &base, "/v1/migrations")
            .await
            .and_then(|m| m.as_array().map(|m| !m.is_empty()))
            .unwrap_or(false);
        if let (Some(stop), true) = (stop, moving) {
            break stop;
        }
        assert!(
            started.elapsed() < PATIENCE,
            "the demo did not stop i-0research01 and move i-0train01 within {PATIENCE:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let reason = stop["reason"].as_str().unwrap().to_string();
    let policy = stop["policy"].as_str().unwrap().to_string();

    let profile = tempfile::tempdir().unwrap();
    let target = Path::new(env!("CARGO_TARGET_TMPDIR")).parent().unwrap();
    let pages: [(&str, &str, &[&str]); 7] = [
        (
            "fleet",
            "/",
            &[
                "i-0research01",
                "i-0train01",
                "<th scope=\"col\">Reason</th>",
                "live instances",
            ],
        ),
        (
            "audit",
            "/audit",
            &[
                "Intact: verified rows 1 to",
                "<th scope=\"col\">Outcome</th>",
            ],
        ),
        (
            "audit-research01",
            "/audit?instance=i-0research01&action=stop",
            &["i-0research01", &reason, "succeeded"],
        ),
        (
            "instance",
            "/instances/i-0research01",
            &[
                "Instance i-0research01",
                "<svg",
                "State of i-0research01",
                "GPU utilisation of i-0research01",
                &reason,
                "Timeline",
            ],
        ),
        (
            "migrations",
            "/migrations",
            &["i-0train01", "spot", "Steps"],
        ),
        (
            // research01's stop under its policy; the Hong Kong boxes are not in the price
            // table, and the page says their hours count no dollars.
            "savings",
            "/savings?by=team",
            &[
                "Dollars saved per day by policy",
                "<svg",
                &format!("<th scope=\"row\">{policy}</th>"),
                "<th scope=\"col\">team</th>",
                "<th scope=\"row\">research</th>",
                "Not priced",
                "<option value=\"team\" selected=\"\">team</option>",
            ],
        ),
        (
            "policies",
            "/policies",
            &["interruptible-training", "in force"],
        ),
    ];
    for (name, path, shown) in pages {
        let url = format!("{base}{path}");
        let html = dom(&chromium, profile.path(), &url);
        for text in shown {
            assert!(html.contains(text), "{path} lacks {text:?}:\n{html}");
        }
        let file = target.join(format!("console-{name}.png"));
        screenshot(&chromium, profile.path(), &url, 1280, &file);
    }
    for (name, path) in [
        ("fleet-390", "/"),
        ("instance-390", "/instances/i-0research01"),
        ("savings-390", "/savings?by=team"),
    ] {
        let file = target.join(format!("console-{name}.png"));
        screenshot(
            &chromium,
            profile.path(),
            &format!("{base}{path}"),
            390,
            &file,
        );
    }
}
