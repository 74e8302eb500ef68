//! The console in a real browser: `ebb serve` on the simulated demo fleet, as `scripts/run`
//! starts it (faster), and headless Chromium reading each page. The test checks the DOM
//! Chromium rendered for the demo's instances, reasons, chart and spot move, and writes a
//! screenshot of each page under the target directory (`target/console-*.png`) for people to
//! look at.
//!
//! Then a person's use of the forms, in the same browser driven over the DevTools protocol
//! (`--remote-debugging-pipe`, so no WebSocket): logging in, making an override and revoking it
//! by typing and by the keyboard alone (Tab to the button, Enter), checking the cookie Chromium
//! kept and what the API then shows. The pages themselves run no script.
//!
//! Chromium is Debian's `chromium` package; `scripts/test` installs it. Without it this test
//! fails and says so: it never passes by skipping.

use crate::common;

use base64::Engine as _;
use serde_json::{json, Value};
use sqlx::PgPool;
use std::collections::VecDeque;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

/// The demo's token: it may read and make overrides, as `scripts/run`'s.
const TOKEN: &str = "mei:browser-token-0123456789:read+override";

/// `scripts/run`'s start: Monday 10:00 UTC, 18:00 in Shanghai.
const START: &str = "2026-11-30T10:00:00Z";
/// Simulated seconds per real second: the research boxes' evening stops (12:00 UTC) come after
/// about twelve seconds. The training box's checkpoint (09:55) is fresh enough for a move for
/// [`CHECKPOINT_MAX_AGE`].
const SPEED: &str = "600";
/// The training policy's `checkpoint_max_age` here, for `policies/training.yaml`'s 30m: at
/// [`SPEED`] those 30 minutes end 2.5 s after the start, and a busy machine's slow start of
/// `serve` let them pass before its first tick (the move never came, and the test waited
/// [`PATIENCE`] for it). Two hours end at 11:55, about 11.5 s after the start.
const CHECKPOINT_MAX_AGE: &str = "2h";
/// How long the demo may take to reach them on a slow, busy machine.
const PATIENCE: Duration = Duration::from_secs(600);

/// `ebb serve`, killed when dropped.
struct Serve(Child);

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The Chromium binary, or a failure that says how to get it.
pub(crate) fn chromium() -> PathBuf {
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

/// A copy of the demo's policies (`policies/`) with the training policy's checkpoint age
/// [`CHECKPOINT_MAX_AGE`].
fn demo_policies(root: &Path) -> tempfile::TempDir {
    let copy = tempfile::tempdir().unwrap();
    for file in std::fs::read_dir(root.join("policies")).unwrap() {
        let path = file.unwrap().path();
        let mut text = std::fs::read_to_string(&path).unwrap();
        if path.ends_with("training.yaml") {
            let age = "checkpoint_max_age: 30m";
            assert!(text.contains(age), "{}: no `{age}`", path.display());
            text = text.replace(age, &format!("checkpoint_max_age: {CHECKPOINT_MAX_AGE}"));
        }
        std::fs::write(copy.path().join(path.file_name().unwrap()), text).unwrap();
    }
    copy
}

/// The JSON of the API's `path`.
async fn api(http: &reqwest::Client, base: &str, path: &str) -> Option<Value> {
    let r = http.get(format!("{base}{path}")).send().await.ok()?;
    r.json().await.ok()
}

/// `path`'s answer, asked again until there is one: on a loaded machine a read can miss the
/// API's route timeout.
async fn answer(http: &reqwest::Client, base: &str, path: &str) -> Value {
    common::eventually(PATIENCE, Duration::from_millis(200), async || {
        api(http, base, path).await
    })
    .await
    .unwrap_or_else(|| panic!("no answer from {path} within {PATIENCE:?}"))
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
    let policies = demo_policies(root);
    let _serve = Serve(
        Command::new(env!("CARGO_BIN_EXE_ebb"))
            .args(["serve", "--tick", "5m", "--clock-start", START])
            .args(["--clock-speed", SPEED])
            .current_dir(root)
            .env("DATABASE_URL", &url)
            .env("EBB_CLOUD", "sim:deploy/demo-fleet.yaml")
            .env("EBB_POLICIES", policies.path())
            // As scripts/run: the price table prices the US boxes' stops on /savings.
            .env("EBB_PRICES", "deploy/prices.yaml")
            .env("EBB_LISTEN", format!("127.0.0.1:{port}"))
            .env("EBB_API_TOKENS", TOKEN)
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
    let stop = common::eventually(PATIENCE, Duration::from_millis(200), async || {
        let stop = api(&http, &base, stops)
            .await
            .and_then(|rows| rows.as_array().and_then(|rows| rows.first().cloned()));
        let moving = api(&http, &base, "/v1/migrations")
            .await
            .and_then(|m| m.as_array().map(|m| !m.is_empty()))
            .unwrap_or(false);
        stop.filter(|_| moving)
    })
    .await
    .unwrap_or_else(|| {
        panic!("the demo did not stop i-0research01 and move i-0train01 within {PATIENCE:?}")
    });
    let reason = stop["reason"].as_str().unwrap().to_string();
    let policy = stop["policy"].as_str().unwrap().to_string();
    the_tour_counts_to_the_demo_clock(&http, &base, &url, root).await;

    let profile = tempfile::tempdir().unwrap();
    let target = Path::new(env!("CARGO_TARGET_TMPDIR")).parent().unwrap();
    let pages: [(&str, &str, &[&str]); 8] = [
        (
            "fleet",
            "/",
            &[
                "i-0research01",
                "i-0train01",
                "Decision and reason",
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
                "Why, now",
                "governing policy: research-dev-hours",
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
                // The chart's scale, from zero.
                "<div class=\"scale\" aria-hidden=\"true\"><span class=\"tick-0\">$0</span>",
            ],
        ),
        (
            "policies",
            "/policies",
            &["interruptible-training", "in force"],
        ),
        (
            // The demo's platform-daily budget (policies/budgets.yaml): its burn-down.
            "budgets",
            "/budgets",
            &[
                "<h2 id=\"budget-platform-daily\">platform-daily</h2>",
                "Burn-down of platform-daily",
                "<polyline class=\"spend\"",
                "<line class=\"amount\"",
                "<div class=\"scale\" aria-hidden=\"true\"><span class=\"tick-0\">$0</span>",
                "spent (",
                "At the limit: <code>notify</code>",
            ],
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
    fits(&chromium, &base, target);
    forms(&chromium, &base, &http, target).await;
}

/// `ebb ARGS` against the demo's database, as the tour runs it: its standard output as JSON,
/// after checking it said on stderr that it counts to the demo's clock.
fn tour_command(url: &str, root: &Path, args: &[&str]) -> Value {
    let out = Command::new(env!("CARGO_BIN_EXE_ebb"))
        .args(args)
        .current_dir(root)
        .env("DATABASE_URL", url)
        .env("EBB_CLOUD", "sim:deploy/demo-fleet.yaml")
        .env("EBB_PRICES", "deploy/prices.yaml")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "ebb {args:?}: {stderr}");
    assert!(
        stderr.contains("counting to the simulated clock of the ebb serve on this database"),
        "ebb {args:?}: {stderr}"
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// The tour's commands count to the demo's simulated clock (which `serve` publishes in
/// Postgres), not to the system's a week later: between two reads of the console's figures
/// (which only grow as the demo's time runs), the command's are neither below the first nor
/// above the second, for the spot move's dollars and the savings report's.
async fn the_tour_counts_to_the_demo_clock(
    http: &reqwest::Client,
    base: &str,
    url: &str,
    root: &Path,
) {
    let saved = |moves: &Value| moves[0]["savings_so_far"].as_f64().unwrap();
    let first = common::eventually(PATIENCE, Duration::from_millis(200), async || {
        let moves = api(http, base, "/v1/migrations").await?;
        (saved(&moves) > 0.0).then_some(moves)
    })
    .await
    .unwrap_or_else(|| panic!("the spot move saved nothing within {PATIENCE:?}"));
    let report = answer(http, base, "/v1/report?since=30d").await;
    let command = tour_command(url, root, &["spot-moves", "--format", "json"]);
    let command_report = tour_command(url, root, &["report", "--since", "30d", "--format", "json"]);
    let after = answer(http, base, "/v1/migrations").await;
    let report_after = answer(http, base, "/v1/report?since=30d").await;
    assert!(
        saved(&first) <= saved(&command) && saved(&command) <= saved(&after),
        "ebb spot-moves says {} saved, the console {} then {}",
        saved(&command),
        saved(&first),
        saved(&after)
    );
    let net = |r: &Value| r["total"]["net_saved_usd"].as_f64().unwrap();
    assert!(
        net(&report) <= net(&command_report) && net(&command_report) <= net(&report_after),
        "ebb report says a net of {}, the console {} then {}",
        net(&command_report),
        net(&report),
        net(&report_after)
    );
}

/// What of the page's layout goes past the screen's right edge: the page's and each table
/// region's width beyond what shows, and the table cells that start or end past the edge.
const OVERFLOW: &str = r#"(() => {
  const over = [];
  const page = document.documentElement;
  if (page.scrollWidth > innerWidth) over.push(`the page is ${page.scrollWidth} px wide`);
  for (const region of document.querySelectorAll('main .scroll')) {
    if (region.scrollWidth > region.clientWidth)
      over.push(`${region.getAttribute('aria-label')}: ${region.scrollWidth} px in ${region.clientWidth}`);
  }
  for (const cell of document.querySelectorAll('main table th, main table td')) {
    const box = cell.getBoundingClientRect();
    if (box.width > 0 && box.right > innerWidth + 0.5)
      over.push(`a cell ends at ${Math.round(box.right)} px: ${cell.textContent.trim().slice(0, 40)}`);
  }
  return over;
})()"#;

/// The fleet, the audit log and the savings at a phone's width, a laptop's and a wide
/// screen's: every column shows without scrolling sideways (on a phone each row is a card of
/// labelled cells), with a screenshot of each for people to look at.
fn fits(chromium: &Path, base: &str, target: &Path) {
    let mut d = Devtools::start(chromium);
    for (name, path) in [
        ("fleet", "/"),
        ("audit", "/audit"),
        ("savings", "/savings?by=team"),
    ] {
        d.open(&format!("{base}{path}"));
        for width in [390, 1280, 1920] {
            d.width(width);
            let over = d.evaluate(OVERFLOW);
            assert_eq!(over, json!([]), "{path} at {width} px does not fit");
            d.screenshot(width, &target.join(format!("console-{name}-{width}.png")));
        }
    }
    // On a phone the fleet's rows are cards: each cell says what it is.
    d.open(&format!("{base}/"));
    d.width(390);
    let labels = d.evaluate(
        "[...document.querySelectorAll('[aria-label=Instances] tbody tr:first-child td')]\
         .map(td => getComputedStyle(td, '::before').content)",
    );
    assert_eq!(
        labels,
        json!([
            "\"Type: \"",
            "\"State: \"",
            "\"Policy: \"",
            "\"Decision: \"",
            "\"Next: \"",
            "\"Protections: \""
        ]),
        "the fleet's cells at 390 px"
    );
}

/// Chromium driven over the DevTools protocol on a pipe: JSON messages ending in a NUL byte,
/// written to its fd 3 and read from its fd 4 (here its stdin and stdout, swapped in by `sh`).
pub(crate) struct Devtools {
    browser: Child,
    to: ChildStdin,
    from: mpsc::Receiver<Value>,
    /// Events not yet waited for.
    events: VecDeque<Value>,
    next_id: u64,
    /// The page's session.
    session: Option<String>,
    _profile: tempfile::TempDir,
}

impl Drop for Devtools {
    fn drop(&mut self) {
        let _ = self.browser.kill();
        let _ = self.browser.wait();
    }
}

/// How long one DevTools answer or event may take on a busy machine.
const DEVTOOLS_PATIENCE: Duration = Duration::from_secs(60);

impl Devtools {
    pub(crate) fn start(chromium: &Path) -> Devtools {
        let profile = tempfile::tempdir().unwrap();
        let mut browser = Command::new("sh")
            .arg("-c")
            .arg(r#"exec "$0" "$@" 3<&0 4>&1 0</dev/null 1>/dev/null"#)
            .arg(chromium)
            .args([
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--no-first-run",
            ])
            .args([
                "--disable-background-networking",
                "--disable-component-update",
            ])
            .args(["--hide-scrollbars", "--remote-debugging-pipe"])
            .arg(format!("--user-data-dir={}", profile.path().display()))
            .arg("about:blank")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let to = browser.stdin.take().unwrap();
        let mut out = browser.stdout.take().unwrap();
        let (send, from) = mpsc::channel();
        std::thread::spawn(move || {
            let (mut buffer, mut chunk) = (Vec::new(), [0u8; 65536]);
            while let Ok(n @ 1..) = out.read(&mut chunk) {
                buffer.extend_from_slice(&chunk[..n]);
                while let Some(end) = buffer.iter().position(|b| *b == 0) {
                    let message: Value = serde_json::from_slice(&buffer[..end]).unwrap();
                    buffer.drain(..=end);
                    if send.send(message).is_err() {
                        return;
                    }
                }
            }
        });
        let mut devtools = Devtools {
            browser,
            to,
            from,
            events: VecDeque::new(),
            next_id: 0,
            session: None,
            _profile: profile,
        };
        let target = devtools.call("Target.createTarget", json!({"url": "about:blank"}));
        let attached = devtools.call(
            "Target.attachToTarget",
            json!({"targetId": target["targetId"], "flatten": true}),
        );
        devtools.session = Some(attached["sessionId"].as_str().unwrap().to_string());
        devtools.call("Page.enable", json!({}));
        devtools.call("Network.enable", json!({}));
        devtools
    }

    fn receive(&mut self) -> Value {
        self.from
            .recv_timeout(DEVTOOLS_PATIENCE)
            .expect("Chromium did not answer over the DevTools pipe")
    }

    /// The result of `method` with `params`, on the page once it is attached.
    fn call(&mut self, method: &str, params: Value) -> Value {
        self.next_id += 1;
        let id = self.next_id;
        let mut message = json!({"id": id, "method": method, "params": params});
        if let Some(session) = &self.session {
            message["sessionId"] = json!(session);
        }
        let mut bytes = serde_json::to_vec(&message).unwrap();
        bytes.push(0);
        self.to.write_all(&bytes).unwrap();
        loop {
            let message = self.receive();
            if message["id"] == json!(id) {
                assert!(message.get("error").is_none(), "{method}: {message}");
                return message["result"].clone();
            }
            self.events.push_back(message);
        }
    }

    /// Runs `act`, then waits until the page it leads to has loaded.
    pub(crate) fn loads(&mut self, act: impl FnOnce(&mut Devtools)) {
        self.events.clear();
        act(self);
        let loaded = |m: &Value| m["method"] == "Page.loadEventFired";
        if let Some(at) = self.events.iter().position(loaded) {
            self.events.drain(..=at);
            return;
        }
        while !loaded(&self.receive()) {}
    }

    pub(crate) fn open(&mut self, url: &str) {
        self.loads(|d| {
            d.call("Page.navigate", json!({"url": url}));
        });
    }

    /// The page's DOM, as Chromium holds it now.
    pub(crate) fn dom(&mut self) -> String {
        let root = self.call("DOM.getDocument", json!({"depth": 0}))["root"]["nodeId"].clone();
        let html = self.call("DOM.getOuterHTML", json!({"nodeId": root}));
        html["outerHTML"].as_str().unwrap().to_string()
    }

    /// Moves the keyboard's focus to the element `selector` finds, as a click would.
    pub(crate) fn focus(&mut self, selector: &str) {
        let root = self.call("DOM.getDocument", json!({"depth": 0}))["root"]["nodeId"].clone();
        let found = self.call(
            "DOM.querySelector",
            json!({"nodeId": root, "selector": selector}),
        );
        assert_ne!(found["nodeId"], json!(0), "no {selector} on the page");
        self.call("DOM.focus", json!({"nodeId": found["nodeId"]}));
    }

    /// Types `text` where the focus is.
    fn type_text(&mut self, text: &str) {
        self.call("Input.insertText", json!({"text": text}));
    }

    /// Presses and releases `key` (`Tab` or `Enter`).
    pub(crate) fn press(&mut self, key: &str) {
        let (code, text) = match key {
            "Enter" => (13, "\r"),
            "Tab" => (9, ""),
            _ => panic!("no key {key}"),
        };
        let down = if text.is_empty() {
            "rawKeyDown"
        } else {
            "keyDown"
        };
        for kind in [down, "keyUp"] {
            let mut event = json!({"type": kind, "key": key, "code": key,
                "windowsVirtualKeyCode": code, "nativeVirtualKeyCode": code});
            if kind != "keyUp" && !text.is_empty() {
                event["text"] = json!(text);
            }
            self.call("Input.dispatchKeyEvent", event);
        }
    }

    /// Lays the page out as a screen `width` px wide shows it (a phone's below 600 px).
    fn width(&mut self, width: u32) {
        self.call(
            "Emulation.setDeviceMetricsOverride",
            json!({"width": width, "height": 900, "deviceScaleFactor": 1, "mobile": width < 600}),
        );
    }

    /// The value of the JavaScript `expression`, run in the page by the test (the console's
    /// pages run no script of their own).
    fn evaluate(&mut self, expression: &str) -> Value {
        let result = self.call(
            "Runtime.evaluate",
            json!({"expression": expression, "returnByValue": true}),
        );
        assert!(result.get("exceptionDetails").is_none(), "{result}");
        result["result"]["value"].clone()
    }

    /// Writes a PNG of the page at `width` px to `file`.
    fn screenshot(&mut self, width: u32, file: &Path) {
        self.width(width);
        let shot = self.call("Page.captureScreenshot", json!({"format": "png"}));
        let png = base64::engine::general_purpose::STANDARD
            .decode(shot["data"].as_str().unwrap())
            .unwrap();
        assert!(png.starts_with(b"\x89PNG"));
        std::fs::write(file, png).unwrap();
    }
}

/// Logging in, making an override and revoking it in Chromium, by typing and the keyboard.
async fn forms(chromium: &Path, base: &str, http: &reqwest::Client, target: &Path) {
    let page = format!("{base}/instances/i-0research01");
    let mut d = Devtools::start(chromium);
    d.open(&page);
    let html = d.dom();
    assert!(
        html.contains("with a token that has the override scope"),
        "{html}"
    );

    // The login form, by keyboard: the token, then Enter; back to the instance's page.
    d.open(&format!("{base}/login?next=%2Finstances%2Fi-0research01"));
    d.focus("#token");
    d.type_text(TOKEN.split(':').nth(1).unwrap());
    d.loads(|d| d.press("Enter"));
    let html = d.dom();
    assert!(html.contains("Logged in as <strong>mei</strong>"), "{html}");
    let cookies = d.call("Network.getCookies", json!({"urls": [base]}));
    let cookie = cookies["cookies"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "ebb_session")
        .unwrap_or_else(|| panic!("Chromium kept no login cookie: {cookies}"))
        .clone();
    assert_eq!(cookie["httpOnly"], json!(true), "{cookie}");
    assert_eq!(cookie["sameSite"], json!("Strict"), "{cookie}");
    assert_eq!(cookie["path"], json!("/"), "{cookie}");

    // An override: until, Tab, the reason, Tab to the button, Enter.
    d.focus("#until");
    d.type_text("4h");
    d.press("Tab");
    d.type_text("demo at 9, please keep it");
    d.press("Tab");
    d.loads(|d| d.press("Enter"));
    let html = d.dom();
    assert!(
        html.contains("made: ebb keeps the instance from being stopped until"),
        "{html}"
    );
    assert!(html.contains("demo at 9, please keep it"), "{html}");
    d.screenshot(1280, &target.join("console-override.png"));
    d.screenshot(390, &target.join("console-override-390.png"));
    // Read until it answers: on a loaded machine a read can miss the API's route timeout.
    let research01 = async || {
        api(http, base, "/v1/overrides")
            .await?
            .as_array()?
            .iter()
            .find(|o| o["instance"] == "i-0research01")
            .cloned()
    };
    let made = common::eventually(PATIENCE, Duration::from_millis(200), research01)
        .await
        .unwrap_or_else(|| panic!("no override for i-0research01 through the API"));
    assert_eq!(made["created_by"], json!("mei"), "{made}");
    assert_eq!(made["reason"], json!("demo at 9, please keep it"), "{made}");

    // Its revoke button, by keyboard.
    d.focus(&format!(
        "button[aria-label=\"Revoke override {}\"]",
        made["id"]
    ));
    d.loads(|d| d.press("Enter"));
    let html = d.dom();
    assert!(
        html.contains(&format!("Override {} revoked.", made["id"])),
        "{html}"
    );
    let overrides = answer(http, base, "/v1/overrides").await;
    assert!(
        !overrides
            .as_array()
            .unwrap()
            .iter()
            .any(|o| o["id"] == made["id"]),
        "{overrides}"
    );
    let revoked = answer(
        http,
        base,
        "/v1/audit?instance=i-0research01&action=override_revoked",
    )
    .await;
    assert_eq!(revoked[0]["actor"], json!("mei"), "{revoked}");

    // Logging out: the cookie is gone and the page offers the login again.
    d.focus("form[action=\"/logout\"] button");
    d.loads(|d| d.press("Enter"));
    let cookies = d.call("Network.getCookies", json!({"urls": [base]}));
    assert!(
        !cookies["cookies"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c["name"] == "ebb_session"),
        "{cookies}"
    );
}
