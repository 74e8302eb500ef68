//! The demo path end to end: `ebb serve` on the simulated demo fleet (`deploy/demo-fleet.yaml`)
//! with the example policies (`policies/`), as `scripts/run` starts it, through a simulated day
//! at 3000 times real speed; then the audit log is checked.

mod common;

use chrono::{DateTime, Utc};
use common::t;
use ebb::spot;
use ebb::store::{AuditEntry, AuditFilter, Outcome, Store, Verification};
use sqlx::PgPool;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Monday 10:00 UTC: 18:00 in Shanghai, 11:00 in Berlin, 05:00 in New York.
const START: &str = "2026-11-30T10:00:00Z";
/// The simulated day ends on Tuesday 13:00 UTC, after New York's morning.
const END: &str = "2026-12-01T13:00:00Z";
const SPEED: f64 = 3000.0;

/// The succeeded actions `action` on `instance`, by when.
fn done<'a>(rows: &'a [AuditEntry], instance: &str, action: &str) -> Vec<&'a AuditEntry> {
    rows.iter()
        .filter(|r| {
            r.entry.instance.as_deref() == Some(instance)
                && r.entry.action == action
                && r.entry.outcome == Outcome::Succeeded
        })
        .collect()
}

fn between(rows: &[&AuditEntry], from: &str, to: &str) -> usize {
    rows.iter()
        .filter(|r| t(from) <= r.entry.at && r.entry.at < t(to))
        .count()
}

#[sqlx::test(migrations = false)]
async fn a_simulated_day_of_the_demo_fleet(pool: PgPool) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let url = common::database_url(&pool);
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut serve = Serve(
        Command::new(env!("CARGO_BIN_EXE_ebb"))
            .args(["serve", "--tick", "5m", "--clock-start", START])
            .args(["--clock-speed", &SPEED.to_string()])
            .env("DATABASE_URL", &url)
            .env(
                "EBB_CLOUD",
                format!("sim:{}", root.join("deploy/demo-fleet.yaml").display()),
            )
            .env("EBB_POLICIES", root.join("policies"))
            .env("EBB_LISTEN", format!("127.0.0.1:{port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap(),
    );
    let started = Instant::now();
    let day = (t(END) - t(START)).to_std().unwrap().div_f64(SPEED);
    tokio::time::sleep(day).await;
    // The plan through the API, while it runs.
    let plan: serde_json::Value = reqwest::get(format!("http://127.0.0.1:{port}/v1/plan"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    // The demo fleet's 32 instances, and the spot instance the checkpointing job moved to.
    assert_eq!(plan.as_array().unwrap().len(), 33, "{plan}");
    assert!(Command::new("kill")
        .args(["-TERM", &serve.0.id().to_string()])
        .status()
        .unwrap()
        .success());
    assert!(serve.0.wait().unwrap().success());
    assert!(started.elapsed() < day + Duration::from_secs(30));

    let store = Store::connect(&url).await.unwrap();
    let rows = store.audit(&AuditFilter::default()).await.unwrap();
    let last: DateTime<Utc> = rows.iter().map(|r| r.entry.at).max().unwrap();
    assert!(
        last >= t("2026-12-01T12:00:00Z"),
        "the day was not simulated to its end: {last}"
    );
    let research: Vec<String> = (1..=8).map(|n| format!("i-0research0{n}")).collect();

    // Evening in Shanghai (20:00 = 12:00 UTC): notice, then stop, of every research dev box.
    for id in &research[..7] {
        let stops = done(&rows, id, "stop");
        assert_eq!(
            between(&stops, "2026-11-30T11:59:00Z", "2026-11-30T12:30:00Z"),
            1,
            "{id}"
        );
        assert_eq!(
            between(
                &done(&rows, id, "notify"),
                "2026-11-30T11:44:00Z",
                "2026-11-30T12:00:00Z"
            ),
            1,
            "{id}"
        );
    }
    // Still training at the close: its stop waits until the run ends (14:00 UTC).
    let busy = done(&rows, "i-0research08", "stop");
    assert_eq!(
        between(&busy, "2026-11-30T11:59:00Z", "2026-11-30T14:00:00Z"),
        0,
        "{busy:?}"
    );
    assert_eq!(
        between(&busy, "2026-11-30T14:00:00Z", "2026-11-30T14:30:00Z"),
        1,
        "{busy:?}"
    );

    // Morning in Shanghai (08:30 = 00:30 UTC): exactly what ebb stopped starts again.
    let started: Vec<&str> = rows
        .iter()
        .filter(|r| {
            r.entry.action == "start"
                && r.entry.outcome == Outcome::Succeeded
                && t("2026-12-01T00:29:00Z") <= r.entry.at
                && r.entry.at < t("2026-12-01T01:00:00Z")
        })
        .filter_map(|r| r.entry.instance.as_deref())
        .collect();
    assert_eq!(started, research);

    // Boxes forgotten after lunch in Los Angeles are stopped by the idle rule.
    for id in ["i-0notebook01", "i-0notebook02", "i-0notebook03"] {
        let idle = done(&rows, id, "stop");
        let afternoon = idle
            .iter()
            .find(|r| {
                t("2026-11-30T20:30:00Z") <= r.entry.at && r.entry.at < t("2026-12-01T00:00:00Z")
            })
            .unwrap_or_else(|| panic!("{id} was not stopped in the afternoon: {idle:?}"));
        assert_eq!(afternoon.entry.policy.as_deref(), Some("notebooks-idle"));
        assert_eq!(afternoon.entry.code.as_deref(), Some("idle"));
    }

    // A start refused for lack of capacity is tried again at the next tick.
    let platform3: Vec<(Outcome, DateTime<Utc>)> = rows
        .iter()
        .filter(|r| {
            r.entry.instance.as_deref() == Some("i-0platform03") && r.entry.action == "start"
        })
        .filter(|r| r.entry.outcome != Outcome::Intent)
        .map(|r| (r.entry.outcome, r.entry.at))
        .collect();
    assert_eq!(platform3[0].0, Outcome::Failed, "{platform3:?}");
    assert_eq!(platform3[1].0, Outcome::Succeeded, "{platform3:?}");
    assert!(rows.iter().any(|r| r
        .entry
        .error
        .as_deref()
        .is_some_and(|e| e.contains("InsufficientInstanceCapacity"))));

    // The checkpointing training job moves to spot, step by step, on the first morning.
    let migrations = store.migrations().await.unwrap();
    assert_eq!(migrations.len(), 1, "{migrations:#?}");
    let m = &migrations[0];
    assert_eq!(
        (m.original.as_str(), m.state.as_str()),
        ("i-0train01", "done"),
        "{m:#?}"
    );
    assert_eq!(m.market.as_str(), "spot");
    assert!(spot::savings(m, last) > 0.0);

    // Protected, unmatched and person-stopped instances are never touched.
    for id in [
        "i-0research09",
        "i-0research10",
        "i-0notebook07",
        "i-0notebook08",
        "i-0infra01",
        "i-0infra02",
    ] {
        let touched: Vec<&AuditEntry> = rows
            .iter()
            .filter(|r| {
                r.entry.instance.as_deref() == Some(id) && r.entry.outcome != Outcome::Intent
            })
            .collect();
        assert!(touched.is_empty(), "{id}: {touched:?}");
    }
    assert!(store.pending_intents().await.unwrap().is_empty());
    assert!(matches!(
        store.verify_audit().await.unwrap(),
        Verification::Intact { .. }
    ));
}

/// The `ebb serve` under test, killed if the test fails before it stops it.
struct Serve(std::process::Child);

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}
