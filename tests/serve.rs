//! `ebb serve` replicas against moto's EC2 server and a real Postgres: exactly one acts, and
//! when it dies another takes over.

mod common;

use aws_sdk_ec2::types::InstanceStateName;
use common::moto::{states, Fixture, G5};
use serde_json::Value;
use sqlx::PgPool;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Any research box without GPU readings (moto has no CloudWatch) is idle: stopped at once.
const POLICY: &str = r#"
policies:
  - name: idle-research
    match: {tags: {team: research}}
    idle: {gpu_below: 5, for: 1m, missing_metrics: idle, when: always, action: stop}
"#;

const TICK: Duration = Duration::from_secs(2);

/// A running `ebb serve`, its JSON log in a file; killed when dropped.
struct Replica {
    name: &'static str,
    child: Child,
    log: PathBuf,
}

impl Replica {
    fn start(name: &'static str, dir: &Path, url: &str, f: &Fixture) -> Replica {
        let log = dir.join(format!("{name}.log"));
        let child = Command::new(env!("CARGO_BIN_EXE_ebb"))
            .arg("serve")
            .env("DATABASE_URL", url)
            .env("EBB_POLICIES", dir.join("policies"))
            .env("EBB_REGIONS", f.region)
            .env("EBB_MANAGED_TAG", format!("ebb:managed={}", f.managed))
            .env("EBB_TICK", format!("{}s", TICK.as_secs()))
            .env("EBB_REPLICA", name)
            .stdout(std::fs::File::create(&log).unwrap())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        Replica { name, child, log }
    }

    /// The log lines so far, parsed.
    fn lines(&self) -> Vec<Value> {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
            .collect()
    }

    fn said(&self, message: &str) -> bool {
        self.lines()
            .iter()
            .any(|l| l["fields"]["message"] == message)
    }

    fn ticks(&self) -> usize {
        self.lines()
            .iter()
            .filter(|l| l["fields"]["message"] == "tick")
            .count()
    }
}

impl Drop for Replica {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Waits up to `limit` for `done`, checking every 100 ms.
async fn within(limit: Duration, mut done: impl AsyncFnMut() -> bool) -> bool {
    let start = Instant::now();
    while start.elapsed() < limit {
        if done().await {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    false
}

fn stop_intents(url: &str, instance: &str) -> usize {
    let out = Command::new(env!("CARGO_BIN_EXE_ebb"))
        .args(["audit", "--instance", instance, "--action", "stop"])
        .args(["--outcome", "intent", "--format", "json"])
        .env("DATABASE_URL", url)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    serde_json::from_slice::<Vec<Value>>(&out.stdout)
        .unwrap()
        .len()
}

#[sqlx::test(migrations = false)]
async fn one_replica_acts_and_another_takes_over_when_it_dies(pool: PgPool) {
    let f = Fixture::new("ap-south-1").await;
    let url = common::database_url(&pool);
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("policies")).unwrap();
    std::fs::write(dir.path().join("policies/idle.yaml"), POLICY).unwrap();
    // Migrate first, so that the replicas do not race to create the schema.
    ebb::store::Store::connect(&url)
        .await
        .unwrap()
        .migrate()
        .await
        .unwrap();

    let mut replicas = [
        Replica::start("a", dir.path(), &url, &f),
        Replica::start("b", dir.path(), &url, &f),
    ];
    assert!(
        within(Duration::from_secs(20), async || replicas
            .iter()
            .any(|r| r.said("became the leader")))
        .await,
        "no replica became the leader"
    );
    let leader = replicas
        .iter()
        .position(|r| r.said("became the leader"))
        .unwrap();
    let follower = 1 - leader;

    let first = f.launch(G5).await;
    assert!(
        within(Duration::from_secs(20), async || states(
            &f.ec2,
            std::slice::from_ref(&first)
        )
        .await[&first]
            == InstanceStateName::Stopped)
        .await,
        "the leader did not stop {first}"
    );
    assert_eq!(stop_intents(&url, &first), 1);
    assert!(!replicas[follower].said("became the leader"));
    assert_eq!(replicas[follower].ticks(), 0, "only the leader ticks");

    // SIGKILL the leader: Postgres ends its session, and the lock with it.
    replicas[leader].child.kill().unwrap();
    replicas[leader].child.wait().unwrap();
    let killed = Instant::now();
    let second = f.launch(G5).await;
    let took_over = within(2 * TICK + Duration::from_secs(1), async || {
        replicas[follower].said("became the leader")
    })
    .await;
    assert!(
        took_over,
        "{} did not take over within two tick intervals",
        replicas[follower].name
    );
    assert!(killed.elapsed() <= 2 * TICK + Duration::from_secs(1));
    assert!(
        within(Duration::from_secs(20), async || states(
            &f.ec2,
            std::slice::from_ref(&second)
        )
        .await[&second]
            == InstanceStateName::Stopped)
        .await,
        "the new leader did not stop {second}"
    );
    assert_eq!(stop_intents(&url, &second), 1);
    assert_eq!(stop_intents(&url, &first), 1, "nothing acted twice");

    // SIGTERM: the survivor finishes what it is doing and exits cleanly.
    let pid = replicas[follower].child.id().to_string();
    assert!(Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .unwrap()
        .success());
    let status = replicas[follower].child.wait().unwrap();
    assert!(status.success(), "{status:?}");
    assert!(replicas[follower].said("shut down"));
}
