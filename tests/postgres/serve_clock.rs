//! The commands that work on the store count to the simulated clock that an `ebb serve` on a
//! simulated fleet (the demo of `scripts/run`) publishes in the same database, so that the
//! tour's `ebb override --until 24h` and `ebb audit --since 1h` mean the demo's day, not the
//! system clock's; once the serve has stopped publishing, they count to the system clock again.

use crate::common::{self, t};
use ebb::store::Store;
use serde_json::Value;
use sqlx::PgPool;
use std::process::{Command, Output};

/// `ebb ARGS` against `url`, as mei.
fn ebb(url: &str, args: &[&str]) -> Output {
    let out = Command::new(env!("CARGO_BIN_EXE_ebb"))
        .args(args)
        .env("DATABASE_URL", url)
        .env("EBB_ACTOR", "mei")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "ebb {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

const NOTE: &str = "counting to the simulated clock of the ebb serve on this database";

#[sqlx::test]
async fn commands_count_to_a_published_simulated_clock_until_it_stops(pool: PgPool) {
    let store = Store::from_pool(pool.clone());
    let url = common::database_url(&pool);
    let demo = t("2020-01-06T10:00:00Z");
    store
        .sync_inventory(
            &["us-east-1".to_string()],
            &[common::instance("i-1", &[])],
            demo,
        )
        .await
        .unwrap();
    store.publish_serve_clock(demo, 1.0).await.unwrap();

    let made = ebb(
        &url,
        &[
            "override",
            "i-1",
            "--until",
            "24h",
            "--reason",
            "demo tomorrow",
        ],
    );
    assert!(String::from_utf8_lossy(&made.stderr).contains(NOTE));
    let overrides = store.active_overrides(demo).await.unwrap();
    let until = overrides[0].until;
    // A day after the demo's time (and the seconds the command took at 1x), not the system's.
    let late = until - (demo + chrono::Duration::hours(24));
    assert!(
        late >= chrono::Duration::zero() && late < chrono::Duration::minutes(1),
        "kept until {until}"
    );

    // The override's audit row is within the demo's last hour.
    let audit = |url: &str| -> (Vec<Value>, String) {
        let out = ebb(url, &["audit", "--since", "1h", "--format", "json"]);
        let rows = serde_json::from_slice(&out.stdout).unwrap();
        (rows, String::from_utf8_lossy(&out.stderr).into_owned())
    };
    let (rows, said) = audit(&url);
    assert!(said.contains(NOTE), "{said}");
    assert_eq!(rows.len(), 1, "{rows:?}");
    assert_eq!(rows[0]["action"], "override");

    // The serve stopped two minutes ago: the system's clock again, years after that hour.
    sqlx::query("UPDATE serve_clock SET published_at = now() - interval '2 minutes'")
        .execute(&pool)
        .await
        .unwrap();
    let (rows, said) = audit(&url);
    assert!(!said.contains(NOTE), "{said}");
    assert!(rows.is_empty(), "{rows:?}");
}
