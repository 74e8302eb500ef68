//! What the activity signals showed is kept (`activity_uses`), so a recording from Postgres
//! has them: `ebb metrics export` writes each signal's latest use by each row's time in its
//! `activity:NAME` column, and `ebb replay` from Postgres plays them and says what they
//! prevented, as it does from a file with those columns. A closed stdout ends the export
//! quietly.

use crate::common::{database_url, ebb_on, t, world::SimWorld, Ebb};
use ebb::clock::Clock;
use ebb::store::Store;
use sqlx::PgPool;

const POLICY: &str = r#"
policies:
  - name: notebooks
    match: {tags: {team: research}}
    idle:
      gpu_below: 5
      for: 30m
      activity: [{heartbeat: {max_age: 10m}}]
"#;

/// Two idle notebooks; one said it was in use at 09:52.
const FLEET: &str = r#"
instances:
  - {id: i-nb, region: us-east-1, type: g5.xlarge, state: running, launched_at: "2026-11-30T07:00:00Z", tags: {team: research, "ebb:active-at": "2026-11-30T09:52:00Z"}, sim: {usage: idle}}
  - {id: i-quiet, region: us-east-1, type: g5.xlarge, state: running, launched_at: "2026-11-30T07:00:00Z", tags: {team: research}, sim: {usage: idle}}
"#;

#[sqlx::test(migrations = false)]
async fn the_uses_a_signal_showed_are_exported_and_replayed_from_postgres(pool: PgPool) {
    let url = database_url(&pool);
    let store = Store::from_pool(pool);
    // The simulator's clock stands after every tick, so its readings reach each tick's time.
    let mut world = SimWorld::plan(FLEET)
        .policy("notebooks.yaml", POLICY)
        .clock(Clock::Fixed(t("2026-12-01T00:00:00Z")))
        .start(store.clone())
        .await;
    for at in ["2026-11-30T10:00:00Z", "2026-11-30T10:05:00Z"] {
        world.tick(at).await;
    }
    let far = t("2026-12-31T00:00:00Z");
    let ids = ["i-nb".to_string(), "i-quiet".to_string()];
    let kept = store.activity_uses_of(&ids, far).await.unwrap();
    assert_eq!(kept.len(), 1, "{kept:?}");
    assert_eq!(kept["i-nb"]["heartbeat"], [t("2026-11-30T09:52:00Z")]);

    let csv = out(ebb_on(
        &url,
        &["metrics", "export", "--since", "2026-11-30T09:00:00Z"],
    ));
    let mut lines = csv.lines();
    assert_eq!(
        lines.next(),
        Some("instance,time,gpu_util,gpu_mem_mib,gpus_busy,activity:heartbeat")
    );
    let rows: Vec<Vec<&str>> = lines.map(|l| l.split(',').collect()).collect();
    let notebook: Vec<(&str, &str)> = rows
        .iter()
        .filter(|r| r[0] == "i-nb")
        .map(|r| (r[1], r[5]))
        .collect();
    assert!(notebook.len() >= 4, "{csv}");
    for (time, used) in &notebook {
        let expected = match *time < "2026-11-30T09:52:00Z" {
            true => "",
            false => "2026-11-30T09:52:00Z",
        };
        assert_eq!(*used, expected, "{time}: {csv}");
    }
    assert!(notebook.iter().any(|(_, used)| used.is_empty()), "{csv}");
    assert!(notebook.iter().any(|(_, used)| !used.is_empty()), "{csv}");
    let quiet = rows.iter().filter(|r| r[0] == "i-quiet");
    assert!(
        quiet.clone().count() >= 4 && quiet.clone().all(|r| r[5].is_empty()),
        "{csv}"
    );

    // A reader that has gone (`ebb metrics export | head`) ends the export quietly: its
    // first write meets the pipe closed before ebb starts.
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    let closed = Ebb::on(&url)
        .command(&["metrics", "export", "--since", "2026-11-30T09:00:00Z"])
        .stdout(writer)
        .stderr(std::process::Stdio::piped())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&closed.stderr);
    assert_eq!(closed.status.code(), Some(0), "{stderr}");
    assert!(stderr.is_empty(), "{stderr}");

    let dir = world.dir.path().join("policies");
    let prices = concat!(env!("CARGO_MANIFEST_DIR"), "/deploy/prices.yaml");
    let replayed = ebb_on(
        &url,
        &[
            "replay",
            "--policies",
            dir.to_str().unwrap(),
            "--from",
            "2026-11-30T10:00:00Z",
            "--to",
            "2026-11-30T11:00:00Z",
            "--prices",
            prices,
            "--format",
            "json",
        ],
    );
    let stderr = String::from_utf8_lossy(&replayed.stderr).into_owned();
    assert!(
        !stderr.contains("no history of its activity signals"),
        "{stderr}"
    );
    let json: serde_json::Value = serde_json::from_str(&out(replayed)).unwrap();
    let scenarios = &json["scenarios"];
    assert!(scenarios["without_activity"].is_object(), "{json}");
}

fn out(o: std::process::Output) -> String {
    assert!(
        o.status.success(),
        "exit {:?}: {}",
        o.status,
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8(o.stdout).unwrap()
}
