//! Leadership behind a connection pooler: PgBouncer in transaction mode (Debian's `pgbouncer`,
//! which `scripts/test` installs) hands one server session to many clients, so a session-level
//! advisory lock taken through it would be "held" by every replica routed to that session.
//! ebb refuses to lead through it, saying why, and leaves no lock behind.

use crate::common::{self, Ebb};
use ebb::store::{Store, StoreError};
use sqlx::PgPool;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// A PgBouncer in front of the test's database, stopped when dropped.
struct Pooler {
    child: Child,
    /// The test database through the pooler.
    url: String,
    _dir: tempfile::TempDir,
}

impl Drop for Pooler {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// PgBouncer with `pool_mode = mode` and four server sessions (a leader and a second replica's
/// two connections in session mode), for the database of `pool`.
async fn pgbouncer(pool: &PgPool, mode: &str) -> Pooler {
    let options = pool.connect_options();
    let database = options.get_database().unwrap().to_string();
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    // PgBouncer refuses to run as root: as the cluster's user, as scripts/lib.sh runs Postgres.
    let root = running_as_root();
    if root {
        chown_postgres(dir.path());
    }
    let config = dir.path().join("pgbouncer.ini");
    std::fs::write(
        &config,
        format!(
            "[databases]\n{database} = host={host} port={server_port} dbname={database} user={user}\n\
             [pgbouncer]\nlisten_addr = 127.0.0.1\nlisten_port = {port}\nauth_type = any\n\
             pool_mode = {mode}\ndefault_pool_size = 4\nunix_socket_dir =\n\
             ignore_startup_parameters = extra_float_digits,options\n\
             logfile = {log}\npidfile = {pid}\n",
            host = options.get_host(),
            server_port = options.get_port(),
            user = options.get_username(),
            log = dir.path().join("log").display(),
            pid = dir.path().join("pid").display(),
        ),
    )
    .unwrap();
    if root {
        chown_postgres(&config);
    }
    // `-u` drops root itself; a wrapper such as runuser would outlive a kill and keep it running.
    let mut command = Command::new("pgbouncer");
    command.arg("-q");
    if root {
        command.args(["-u", "postgres"]);
    }
    let child = command
        .arg(&config)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("pgbouncer (scripts/test installs Debian's pgbouncer)");
    let url = format!(
        "postgres://{}@127.0.0.1:{port}/{database}",
        options.get_username()
    );
    let listening = common::eventually(
        Duration::from_secs(20),
        Duration::from_millis(50),
        async || {
            tokio::net::TcpStream::connect(("127.0.0.1", port))
                .await
                .ok()
        },
    )
    .await;
    assert!(
        listening.is_some(),
        "pgbouncer did not start on port {port}"
    );
    Pooler {
        child,
        url,
        _dir: dir,
    }
}

/// A port free on 127.0.0.1 now.
fn free_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().port()
}

fn running_as_root() -> bool {
    let out = Command::new("id").arg("-u").output().unwrap();
    String::from_utf8_lossy(&out.stdout).trim() == "0"
}

fn chown_postgres(path: &Path) {
    let status = Command::new("chown")
        .arg("postgres:")
        .arg(path)
        .status()
        .unwrap();
    assert!(status.success());
}

/// Advisory locks held in the test's database, through any session.
async fn advisory_locks(pool: &PgPool) -> i64 {
    sqlx::query_scalar(
        "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory'
         AND database = (SELECT oid FROM pg_database WHERE datname = current_database())",
    )
    .fetch_one(pool)
    .await
    .unwrap()
}

#[sqlx::test]
async fn a_transaction_pooler_is_refused_before_the_lock_is_taken(pool: PgPool) {
    let bouncer = pgbouncer(&pool, "transaction").await;
    let store = Store::connect(&bouncer.url).await.unwrap();
    let refused = store.try_lead("behind-pooler").await;
    let Err(err @ StoreError::SharedSession { .. }) = refused else {
        panic!(
            "led through a transaction pooler: {:?}",
            refused.map(|l| l.is_some())
        );
    };
    let message = err.to_string();
    assert!(
        message.contains("session mode") && message.contains("connect ebb directly"),
        "{message}"
    );
    assert_eq!(
        advisory_locks(&pool).await,
        0,
        "a refused replica left a lock"
    );
    // A direct connection leads as before.
    let direct = Store::connect(&common::database_url(&pool)).await.unwrap();
    let mut leader = direct
        .try_lead("direct")
        .await
        .unwrap()
        .expect("no one leads");
    assert!(leader.held().await);
}

#[sqlx::test]
async fn a_session_pooler_is_a_session_of_its_own_and_leads(pool: PgPool) {
    let bouncer = pgbouncer(&pool, "session").await;
    let store = Store::connect(&bouncer.url).await.unwrap();
    let mut leader = store
        .try_lead("session-pooled")
        .await
        .unwrap()
        .expect("no one leads");
    assert!(leader.held().await);
    assert!(store.try_lead("second").await.unwrap().is_none());
}

#[sqlx::test]
async fn ebb_tick_through_a_transaction_pooler_says_to_connect_directly(pool: PgPool) {
    let bouncer = pgbouncer(&pool, "transaction").await;
    let o = Ebb::on(&bouncer.url)
        .env("EBB_CLOUD", "sim:deploy/demo-fleet.yaml")
        .run(&["tick", "--policies", "policies"]);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("pooler in transaction or statement mode"),
        "{stderr}"
    );
    assert_eq!(advisory_locks(&pool).await, 0);
}
