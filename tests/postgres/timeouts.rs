//! Time limits: a database statement that waits on a lock, or runs on, fails at its limit
//! instead of holding a tick; an AWS call to an endpoint that never answers fails at the SDK's
//! timeouts.

use crate::common;

use aws_config::{BehaviorVersion, Region};
use aws_sdk_ec2::config::Credentials;
use common::replica::{http, Replica};
use common::time::{on_paused_time, watchdog};
use ebb::api::Tokens;
use ebb::clock::Clock;
use ebb::cloud::aws::{self, AwsProvider, Settings};
use ebb::cloud::{ErrorKind, Provider};
use ebb::reconcile::{Options, PolicySource, Reconciler};
use ebb::store::{NewAuditEntry, Store, StoreError, Timeouts};
use serde_json::Value;
use sqlx::{Connection, PgConnection, PgPool};
use std::sync::Arc;
use std::time::Duration;

/// Credentials of the test's own: nothing here reaches AWS, and the test needs no environment.
fn dummy_credentials() -> Credentials {
    Credentials::new("testing", "testing", None, None, "test")
}

/// An admin's token: `/v1/status` shows a failed task's error to admins only.
const ADMIN: &str = "admin-token-of-the-timeouts-tests";

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
    let mut leader = store
        .try_lead("test")
        .await
        .unwrap()
        .expect("no one else leads");
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
        let waiting = common::eventually(HANG, Duration::from_millis(20), async || {
            let waiting: i64 = sqlx::query_scalar(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() \
                 AND wait_event_type = 'Lock'",
            )
            .fetch_one(&mut watcher)
            .await
            .unwrap();
            (waiting > 0).then_some(())
        });
        waiting
            .await
            .expect("the migrations never waited on the lock");
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
            .credentials_provider(dummy_credentials())
            .endpoint_url(&endpoint);
        let provider = AwsProvider::connect_from(settings, loader).await.unwrap();
        let started = tokio::time::Instant::now();
        let inventory = watchdog(HANG, "a call nobody answers", provider.instances()).await;
        let waited = started.elapsed();
        assert_eq!(inventory.failures.len(), 1, "{:?}", inventory.failures);
        let error = &inventory.failures[0].error;
        // Sent and never answered: whatever it asked may have been done.
        assert_eq!(error.kind, ErrorKind::Unanswered, "{error}");
        assert!(error.to_string().contains("timeout"), "{error}");
        // Every attempt ran to its own limit, and the call ended at the operation's.
        assert!(waited >= timeouts.attempt, "{waited:?}");
        assert!(waited <= timeouts.operation, "{waited:?}");
    }
    drop(silent);
}

const POLICY: &str = r#"
policies:
  - name: idle-research
    match: {tags: {team: research}}
    idle: {gpu_below: 5, for: 1m, missing_metrics: idle, when: always, action: stop}
"#;

#[sqlx::test(migrations = false)]
async fn a_hung_tick_is_abandoned_and_a_leader_that_cannot_tick_is_unready_then_not_alive(
    pool: PgPool,
) {
    let url = common::database_url(&pool);
    on_paused_time(|| hung_leader(&url));
}

/// Two replicas in this process on paused time whose cloud never answers (AWS limits longer than
/// the test): the leader's ticks hang until their deadline; the follower does not tick.
async fn hung_leader(url: &str) {
    const TICK: Duration = Duration::from_secs(60);
    const DEADLINE: Duration = Duration::from_secs(300);
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let endpoint = format!("http://{}", silent.local_addr().unwrap());
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("idle.yaml"), POLICY).unwrap();
    Store::connect(url).await.unwrap().migrate().await.unwrap();
    let day = Duration::from_secs(86_400);
    let mut replicas = Vec::new();
    for name in ["leader", "follower"] {
        let settings = Settings {
            regions: vec!["eu-north-1".to_string()],
            timeouts: aws::Timeouts {
                connect: day,
                attempt: day,
                operation: day,
            },
            ..Settings::default()
        };
        let loader = aws_config::defaults(BehaviorVersion::latest())
            .region(Region::new("eu-north-1"))
            .credentials_provider(dummy_credentials())
            .endpoint_url(&endpoint);
        let reconciler = Reconciler::new(
            AwsProvider::connect_from(settings, loader).await.unwrap(),
            Store::connect(url).await.unwrap(),
            Arc::new(PolicySource::new(vec![dir.path().to_path_buf()])),
            Options::default(),
        );
        let replica = Replica::start_with_deadline(
            name,
            reconciler,
            TICK,
            Clock::System,
            Tokens::parse(&format!("root:{ADMIN}:admin")).unwrap(),
            DEADLINE,
        );
        // The first to start leads: wait until it has taken the lock.
        while name == "leader" && !replica.control.is_leader() {
            tokio::task::yield_now().await;
        }
        replicas.push(replica);
    }
    let (leader, follower) = (&replicas[0], &replicas[1]);
    watchdog(HANG, "the hung leader", async {
        // The follower has tried to lead once, and follows.
        while follower
            .control
            .tasks
            .statuses()
            .get("tick_loop")
            .is_none_or(|s| s.last.is_none())
        {
            tokio::task::yield_now().await;
        }
        assert!(!follower.control.is_leader());
        for replica in &replicas {
            assert_eq!(probe(replica, "/healthz").await.0, 200);
            assert_eq!(probe(replica, "/readyz").await.0, 200);
        }

        // Three intervals without a completed tick: the leader leaves the Service, alive still.
        tokio::time::advance(TICK * 3 + Duration::from_secs(1)).await;
        let (status, ready) = probe(leader, "/readyz").await;
        assert_eq!(status, 503, "{ready}");
        assert!(
            ready["ticks"]
                .as_str()
                .unwrap()
                .contains("no tick completed"),
            "{ready}"
        );
        assert_eq!(probe(leader, "/healthz").await.0, 200);
        assert_eq!(probe(follower, "/readyz").await.0, 200);

        // At the deadline, the tick is abandoned and says so; another begins.
        tokio::time::advance(DEADLINE - TICK * 3).await;
        let last = loop {
            let status: Value = leader.get_as("/v1/status", ADMIN).await;
            match &status["tasks"]["tick_loop"]["last"] {
                Value::Null => tokio::task::yield_now().await,
                last => break last.clone(),
            }
        };
        assert_eq!(last["ok"], false, "{last}");
        assert!(
            last["detail"].as_str().unwrap().contains("abandoned"),
            "{last}"
        );
        assert_eq!(
            probe(leader, "/healthz").await.0,
            200,
            "one abandoned tick is not stuck"
        );
        assert!(leader.control.is_leader());

        // Twice the deadline and an interval without a completed tick: stuck, restart it.
        tokio::time::advance(DEADLINE + TICK + Duration::from_secs(1)).await;
        let (status, body) = probe(leader, "/healthz").await;
        assert_eq!(status, 503, "{body}");
        assert!(body.as_str().unwrap().contains("stuck"), "{body}");
        // A follower does not tick, and is never stuck.
        assert_eq!(probe(follower, "/healthz").await.0, 200);
        assert_eq!(probe(follower, "/readyz").await.0, 200);
    })
    .await;
    for replica in replicas {
        replica.kill().await;
    }
    drop(silent);
}

/// `GET path`: the status, and the body as JSON (or as a string when it is not).
async fn probe(replica: &Replica, path: &str) -> (u16, Value) {
    let response = http()
        .get(format!("{}{path}", replica.api))
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    let text = response.text().await.unwrap();
    let body = serde_json::from_str(&text).unwrap_or(Value::String(text));
    (status, body)
}
