//! Time limits: a database statement that waits on a lock, or runs on, fails at its limit
//! instead of holding a tick; an AWS call to an endpoint that never answers fails at the SDK's
//! timeouts.

mod common;

use aws_config::{BehaviorVersion, Region};
use common::time::watchdog;
use ebb::cloud::aws::{self, AwsProvider, Settings};
use ebb::cloud::{ErrorKind, Provider};
use ebb::store::{NewAuditEntry, Store, StoreError, Timeouts};
use sqlx::{Connection, PgConnection, PgPool};
use std::time::Duration;

/// A guard against a hang: far longer than any limit the tests set, never reached when they pass.
const HANG: Duration = Duration::from_secs(60);

/// Limits short enough for a test; set through the same [`Timeouts`] `EBB_DB_*` fill in.
fn short() -> Timeouts {
    Timeouts {
        statement: Duration::from_secs(2),
        lock: Duration::from_millis(200),
        ..Timeouts::default()
    }
}

/// The SQLSTATE of a database error.
fn code(err: &StoreError) -> Option<String> {
    match err {
        StoreError::Db(sqlx::Error::Database(db)) => db.code().map(|c| c.to_string()),
        _ => None,
    }
}

#[sqlx::test(migrations = false)]
async fn a_store_call_waiting_on_a_lock_fails_at_the_lock_timeout(pool: PgPool) {
    let url = common::database_url(&pool);
    let store = Store::connect_with(&url, short()).await.unwrap();
    store.migrate().await.unwrap();
    let mut leader = store.try_lead("test").await.unwrap().expect("no one else leads");
    // The test's own session holds the audit log's append lock in a transaction left open.
    let mut holder = PgConnection::connect(&url).await.unwrap();
    sqlx::query("BEGIN").execute(&mut holder).await.unwrap();
    sqlx::query("SELECT pg_advisory_xact_lock(hashtext('ebb.audit'))")
        .execute(&mut holder)
        .await
        .unwrap();

    let now = chrono::Utc::now();
    let until = now + chrono::Duration::hours(1);
    let blocked = store.create_override("i-0abc", until, "demo", "ops", now);
    let err = watchdog(HANG, "an override behind a held lock", blocked)
        .await
        .unwrap_err();
    assert_eq!(code(&err).as_deref(), Some("55P03"), "{err}");
    // The leader's own session has the same limits.
    let entry = NewAuditEntry::event(now, "test", "note", "behind a held lock".to_string());
    let blocked = leader.append_intents(std::slice::from_ref(&entry));
    let err = watchdog(HANG, "an intent behind a held lock", blocked)
        .await
        .unwrap_err();
    assert_eq!(code(&err).as_deref(), Some("55P03"), "{err}");

    // Once the lock is free, both work again on the same connections.
    sqlx::query("ROLLBACK").execute(&mut holder).await.unwrap();
    store
        .create_override("i-0abc", until, "demo", "ops", now)
        .await
        .unwrap();
    assert!(leader.held().await);
    leader.append_intents(&[entry]).await.unwrap();
}

#[sqlx::test(migrations = false)]
async fn a_statement_that_runs_on_fails_at_the_statement_timeout(pool: PgPool) {
    let url = common::database_url(&pool);
    let store = Store::connect_with(&url, short()).await.unwrap();
    let slow = sqlx::query("SELECT pg_sleep(30)").execute(store.pool());
    let err = watchdog(HANG, "a 30 s statement", slow).await.unwrap_err();
    let StoreError::Db(sqlx::Error::Database(db)) = StoreError::from(err) else {
        panic!("not a database error");
    };
    assert_eq!(db.code().as_deref(), Some("57014"), "{db}");
    // Every connection gets the limits and the server-side keepalives.
    let settings: Vec<String> = sqlx::query_scalar(
        "SELECT setting FROM pg_settings WHERE name IN ('lock_timeout', \
         'idle_in_transaction_session_timeout', 'tcp_keepalives_idle') ORDER BY name",
    )
    .fetch_all(store.pool())
    .await
    .unwrap();
    assert_eq!(settings, ["60000", "200", "60"]);
}

#[sqlx::test(migrations = false)]
async fn migrations_run_without_the_statement_and_lock_limits(pool: PgPool) {
    let url = common::database_url(&pool);
    let store = Store::connect_with(&url, short()).await.unwrap();
    // Another session holds a lock the migrations need, for longer than the lock timeout: a
    // replica starting beside one that migrates waits for it rather than failing.
    let mut holder = PgConnection::connect(&url).await.unwrap();
    sqlx::query("BEGIN").execute(&mut holder).await.unwrap();
    sqlx::query("CREATE TABLE _sqlx_migrations (version BIGINT)")
        .execute(&mut holder)
        .await
        .unwrap();
    let mut watcher = PgConnection::connect(&url).await.unwrap();
    let release = async {
        // Once the migrations wait on the lock, past the lock timeout, let go.
        loop {
            let waiting: i64 = sqlx::query_scalar(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() \
                 AND wait_event_type = 'Lock'",
            )
            .fetch_one(&mut watcher)
            .await
            .unwrap();
            if waiting > 0 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        sqlx::query("SELECT pg_sleep(1)")
            .execute(&mut holder)
            .await
            .unwrap();
        sqlx::query("ROLLBACK").execute(&mut holder).await.unwrap();
    };
    let (migrated, ()) = watchdog(HANG, "migrations behind a lock", async {
        tokio::join!(store.migrate(), release)
    })
    .await;
    assert!(migrated.unwrap() > 0);
}

/// An endpoint that takes connections and never answers: a network partition as the client
/// sees it once its request is sent.
#[tokio::test(start_paused = true)]
async fn an_aws_call_to_an_endpoint_that_never_answers_fails_at_the_operation_timeout() {
    // The kernel completes the handshake from the listen backlog; nothing ever reads.
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let endpoint = format!("http://{}", silent.local_addr().unwrap());
    // On paused time, tokio moves the clock to the SDK's next timer whenever the call waits on
    // the socket (the auto-advance that `on_paused_time` holds back), so the limits pass at
    // once and exactly.
    {
        let timeouts = aws::Timeouts::default();
        let settings = Settings {
            regions: vec!["eu-north-1".to_string()],
            ..Settings::default()
        };
        let loader = aws_config::defaults(BehaviorVersion::latest())
            .region(Region::new("eu-north-1"))
            .endpoint_url(&endpoint);
        let provider = AwsProvider::connect_from(settings, loader).await.unwrap();
        let started = tokio::time::Instant::now();
        let inventory = watchdog(HANG, "a call nobody answers", provider.instances()).await;
        let waited = started.elapsed();
        assert_eq!(inventory.failures.len(), 1, "{:?}", inventory.failures);
        let error = &inventory.failures[0].error;
        assert_eq!(error.kind, ErrorKind::Unavailable, "{error}");
        assert!(error.to_string().contains("timeout"), "{error}");
        // Every attempt ran to its own limit, and the call ended at the operation's.
        assert!(waited >= timeouts.attempt, "{waited:?}");
        assert!(waited <= timeouts.operation, "{waited:?}");
    }
    drop(silent);
}
