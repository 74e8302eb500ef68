//! `ebb serve` replicas against moto's EC2 server and a real Postgres: exactly one acts, and
//! when it dies another takes over; and a replica that ticks when its policies change or the API
//! asks.

use crate::common;

use aws_sdk_ec2::types::InstanceStateName;
use common::moto::{states, Fixture, Launch, G5};
use common::replica::Replica as InProcess;
use common::time::{on_paused_time, watchdog};
use ebb::api::Tokens;
use ebb::clock::Clock;
use ebb::reconcile::{Options, PolicySource, Reconciler};
use ebb::store::Store;
use serde_json::Value;
use sqlx::PgPool;
use sqlx::{Connection, PgConnection};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

/// Research boxes have no work hours (every date is skipped): any that runs is stopped at once.
/// Not by an idle rule: moto has no CloudWatch, and an instance whose GPU cannot be read is
/// never stopped for idleness.
const POLICY: &str = r#"
calendars:
  every-day: {dates: ["2000-01-01..2999-12-31"]}
policies:
  - name: closed-research
    match: {tags: {team: research}}
    work_hours:
      timezone: UTC
      periods: [{days: mon-sun, start: "09:00", stop: "10:00"}]
      skip: [every-day]
      busy_defers_stop: false
"#;

const TICK: Duration = Duration::from_secs(2);

/// A running `ebb serve`, its JSON log in a file; killed when dropped.
struct Replica {
    child: Child,
    log: PathBuf,
    /// The API's base URL.
    api: String,
}

impl Replica {
    fn start(
        name: &'static str,
        dir: &Path,
        url: &str,
        f: &Fixture,
        tick: Duration,
        env: &[(&str, &str)],
    ) -> Replica {
        let log = dir.join(format!("{name}.log"));
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let child = Command::new(env!("CARGO_BIN_EXE_ebb"))
            .arg("serve")
            .env("DATABASE_URL", url)
            .env("EBB_POLICIES", dir.join("policies"))
            .env("EBB_REGIONS", f.region)
            .env("EBB_MANAGED_TAG", format!("ebb:managed={}", f.managed))
            .env("EBB_TICK", format!("{}s", tick.as_secs()))
            .env("EBB_REPLICA", name)
            .env("EBB_LISTEN", format!("127.0.0.1:{port}"))
            // The test reads the API without a token, as the demo does.
            .env("EBB_API_PUBLIC_READS", "true")
            .envs(env.iter().copied())
            .stdout(std::fs::File::create(&log).unwrap())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        Replica {
            child,
            log,
            api: format!("http://127.0.0.1:{port}"),
        }
    }

    /// `GET /readyz`, parsed; `Null` while the API is not up.
    async fn readiness(&self) -> Value {
        match reqwest::get(format!("{}/readyz", self.api)).await {
            Ok(r) => r.json().await.unwrap_or(Value::Null),
            Err(_) => Value::Null,
        }
    }

    /// The log lines so far, parsed.
    fn lines(&self) -> Vec<Value> {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
            .collect()
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
    let every = Duration::from_millis(100);
    let done = common::eventually(limit, every, async || done().await.then_some(()));
    done.await.is_some()
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
    let url = common::database_url(&pool);
    on_paused_time(|| take_over(&url));
}

/// Two replicas in this process on paused time (see [`common::time`]): time moves a tick
/// interval at a time, and only once the tick it brought is done, so what each replica has done
/// by then does not depend on how fast the machine is.
async fn take_over(url: &str) {
    let f = Fixture::new("ap-south-1").await;
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("policies")).unwrap();
    std::fs::write(dir.path().join("policies/research.yaml"), POLICY).unwrap();
    // Migrate first, so that the replicas do not race to create the schema.
    Store::connect(url).await.unwrap().migrate().await.unwrap();
    let mut replicas = Vec::new();
    for name in ["a", "b"] {
        let reconciler = Reconciler::new(
            f.provider().await,
            Store::connect(url).await.unwrap(),
            Arc::new(PolicySource::new(vec![dir.path().join("policies")])),
            Options::default(),
        );
        replicas.push(InProcess::start(
            name,
            reconciler,
            TICK,
            Clock::System,
            Tokens::default(),
        ));
    }
    watchdog(Duration::from_secs(600), "the takeover", async {
        // Both try to lead at once; the one that wins ticks, the other waits.
        let (mut a, mut b) = (replicas[0].ticks(), replicas[1].ticks());
        let leader = tokio::select! {
            _ = a.wait_for(Option::is_some) => 0,
            _ = b.wait_for(Option::is_some) => 1,
        };
        let follower = 1 - leader;
        assert!(replicas[leader].control.is_leader());

        let first = f.launch(G5).await;
        next_tick(&replicas[leader]).await;
        assert_eq!(
            states(&f.ec2, std::slice::from_ref(&first)).await[&first],
            InstanceStateName::Stopped,
            "the leader did not stop {first}"
        );
        assert_eq!(stop_intents(url, &first), 1);
        assert!(!replicas[follower].control.is_leader());
        assert_eq!(
            replicas[follower].control.last_tick(),
            None,
            "only the leader ticks"
        );
        assert_eq!(replicas[leader].get("/readyz").await["role"], "leader");
        let follower_view = replicas[follower].get("/readyz").await;
        assert_eq!(follower_view["role"], "follower", "{follower_view}");
        assert_eq!(follower_view["ready"], true, "followers serve the API");

        // Killed, the leader's session ends, and the lock with it.
        let survivor = replicas.remove(follower);
        replicas.remove(0).kill().await;
        let second = f.launch(G5).await;
        // Postgres ends the dead session in its own time: wait for that, not for the clock.
        let mut probe = PgConnection::connect(url).await.unwrap();
        for statement in [
            "SELECT pg_advisory_lock(hashtext('ebb.leader'))",
            "SELECT pg_advisory_unlock(hashtext('ebb.leader'))",
        ] {
            sqlx::query(statement).execute(&mut probe).await.unwrap();
        }
        probe.close().await.unwrap();
        // At its next tick, the survivor takes over and acts.
        next_tick(&survivor).await;
        assert!(survivor.control.is_leader(), "no takeover at the next tick");
        assert_eq!(survivor.get("/readyz").await["role"], "leader");
        assert_eq!(
            states(&f.ec2, std::slice::from_ref(&second)).await[&second],
            InstanceStateName::Stopped,
            "the new leader did not stop {second}"
        );
        assert_eq!(stop_intents(url, &second), 1);
        assert_eq!(stop_intents(url, &first), 1, "nothing acted twice");

        // Asked to stop (SIGTERM), the survivor finishes what it is doing and returns cleanly.
        survivor.stop().await;
    })
    .await;
}

/// Moves time on by a tick interval and waits until `replica` has ticked.
async fn next_tick(replica: &InProcess) {
    let mut ticks = replica.ticks();
    ticks.mark_unchanged();
    tokio::time::advance(TICK).await;
    ticks.changed().await.unwrap();
}

/// The last `tick` log line of `replica`.
fn last_tick(replica: &Replica) -> Option<Value> {
    replica
        .lines()
        .into_iter()
        .rev()
        .find(|l| l["fields"]["message"] == "tick")
}

async fn is_stopped(f: &Fixture, id: &str) -> bool {
    states(&f.ec2, &[id.to_string()]).await[id] == InstanceStateName::Stopped
}

#[sqlx::test(migrations = false)]
async fn serve_keeps_the_last_good_policies_and_ticks_on_changes_and_api_calls(pool: PgPool) {
    const TOKEN: &str = "ops-token-0123456789";
    let f = Fixture::new("ap-northeast-3").await;
    // Migrated by the migrate step; serve runs as the runtime role.
    let url = common::migrated_for_runtime(&pool).await;
    let dir = tempfile::tempdir().unwrap();
    let policy_file = dir.path().join("policies/research.yaml");
    std::fs::create_dir(dir.path().join("policies")).unwrap();
    std::fs::write(&policy_file, POLICY).unwrap();
    let first = f.launch(G5).await;
    // Every tick and change checkpoints the audit chain's head into a directory.
    let key = dir.path().join("audit.key");
    let made = Command::new(env!("CARGO_BIN_EXE_ebb"))
        .args(["audit", "keygen", "--out", key.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(made.status.success(), "{made:?}");
    let checkpoints = dir.path().join("checkpoints");
    std::fs::create_dir(&checkpoints).unwrap();
    let dest = format!("file:{}", checkpoints.display());
    // A tick interval far longer than the test: every tick after the first is asked for.
    let replica = Replica::start(
        "solo",
        dir.path(),
        &url,
        &f,
        Duration::from_secs(3600),
        &[
            ("EBB_API_TOKENS", &format!("ops:{TOKEN}")),
            ("EBB_AUDIT_KEY_FILE", key.to_str().unwrap()),
            ("EBB_AUDIT_CHECKPOINTS", &dest),
        ],
    );
    assert!(
        within(Duration::from_secs(60), async || is_stopped(&f, &first)
            .await)
        .await,
        "the first tick did not stop {first}"
    );
    let ready = replica.readiness().await;
    assert_eq!(ready["role"], "leader", "{ready}");
    let version = ready["policies"]["version"].clone();

    // A policy file broken mid-run: reported, and the last good set keeps working.
    std::fs::write(
        &policy_file,
        "policies:\n  - name: closed-research\n    work_hours: [oops\n",
    )
    .unwrap();
    assert!(
        within(Duration::from_secs(60), async || last_tick(&replica)
            .is_some_and(|t| t["fields"]["policy_error"].is_string()))
        .await,
        "the change did not cause a tick that reports the error"
    );
    let ready = replica.readiness().await;
    assert_eq!(ready["policies"]["version"], version, "{ready}");
    assert!(ready["policies"]["error"].is_string(), "{ready}");
    let second = f.launch(G5).await;
    let http = reqwest::Client::new();
    let asked = http
        .post(format!("{}/v1/tick", replica.api))
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap();
    assert_eq!(asked.status(), reqwest::StatusCode::ACCEPTED);
    assert!(
        within(Duration::from_secs(60), async || is_stopped(&f, &second)
            .await)
        .await,
        "the last good set did not stop {second} on the API's tick"
    );
    // The box is stopped before its tick has counted the stop: the metrics are read until they
    // count it.
    let stops = "ebb_actions_total{action=\"stop\",outcome=\"succeeded\"} 2";
    let mut metrics = String::new();
    let counted = within(Duration::from_secs(60), async || {
        metrics = reqwest::get(format!("{}/metrics", replica.api))
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        metrics.contains(stops)
    })
    .await;
    assert!(counted, "{metrics}");
    assert!(metrics.contains("ebb_leader 1"), "{metrics}");
    assert!(
        !metrics.contains("ebb_policy_load_errors_total 0"),
        "{metrics}"
    );
    // Each background task says what it last did.
    let status: Value = reqwest::get(format!("{}/v1/status", replica.api))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let tasks = &status["tasks"];
    assert_eq!(status["role"], "leader", "{status}");
    assert!(
        tasks["tick_loop"]["activations"].as_u64() >= Some(2),
        "{status}"
    );
    assert_eq!(tasks["tick_loop"]["last"]["ok"], true, "{status}");
    assert!(
        tasks["tick_loop"]["last"]["detail"]
            .as_str()
            .is_some_and(|d| d.starts_with("tick at ")),
        "{status}"
    );
    // Each task's status is its own type, serialised.
    let ticked = &tasks["tick_loop"]["last"]["status"];
    assert_eq!(ticked["role"], "leader", "{status}");
    assert!(ticked["tick"]["instances"].as_u64() >= Some(1), "{status}");
    assert_eq!(tasks["policy_watcher"]["last"]["ok"], true, "{status}");
    assert!(
        tasks["policy_watcher"]["last"]["status"]["changed"].is_boolean(),
        "{status}"
    );
    // Listening for tick requests: each activation is a bounded wait, and says it listens;
    // the API's tick request reached it (every tick after the first is asked for).
    let listening = &tasks["tick_requests"]["last"];
    assert_eq!(listening["ok"], true, "{status}");
    assert_eq!(listening["status"]["listening"], true, "{status}");
    assert!(listening["status"]["since"].is_string(), "{status}");
    assert!(
        listening["status"]["requests"].as_u64() >= Some(1),
        "{status}"
    );
    // Every action line is logged inside its tick's span and its cloud call's.
    let lines = replica.lines();
    let stop = lines
        .iter()
        .find(|l| l["fields"]["message"] == "action" && l["fields"]["action"] == "stop")
        .expect("an action line");
    let spans: Vec<&str> = stop["spans"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().unwrap())
        .collect();
    assert_eq!(spans, ["tick", "action"], "{stop}");
    assert!(stop["spans"][0]["tick"].as_u64().is_some(), "{stop}");
    assert_eq!(stop["span"]["region"], f.region, "{stop}");

    let ml = Launch {
        tags: &[("team", "ml")],
        ..G5
    };
    // Overrides are for instances ebb lists: an ml box, ungoverned yet, is listed by a tick
    // asked for through the API.
    let kept = f.launch(ml).await;
    let ticks = replica.ticks();
    let asked = http
        .post(format!("{}/v1/tick", replica.api))
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap();
    assert_eq!(asked.status(), reqwest::StatusCode::ACCEPTED);
    assert!(within(Duration::from_secs(60), async || replica.ticks() > ticks).await);
    // An override through the API protects `kept`, and creating it wakes the leader.
    let ticks = replica.ticks();
    let created = http
        .post(format!("{}/v1/overrides", replica.api))
        .bearer_auth(TOKEN)
        .json(&serde_json::json!({"instance": kept, "until": "2h", "reason": "demo"}))
        .send()
        .await
        .unwrap();
    assert_eq!(created.status(), reqwest::StatusCode::CREATED);
    assert!(
        within(Duration::from_secs(60), async || replica.ticks() > ticks).await,
        "the override did not cause a tick"
    );

    // A fixed policy takes effect at once: it now governs team ml, not research.
    let ticks = replica.ticks();
    std::fs::write(&policy_file, POLICY.replace("team: research", "team: ml")).unwrap();
    assert!(
        within(Duration::from_secs(60), async || replica.ticks() > ticks).await,
        "the policy change did not cause a tick"
    );
    let third = f.launch(G5).await;
    // Once more, by editing the policy file: an ml box without an override is stopped.
    let ml_box = f.launch(ml).await;
    let touched = POLICY.replace("team: research", "team: ml") + "# reviewed\n";
    std::fs::write(&policy_file, touched).unwrap();
    assert!(
        within(Duration::from_secs(60), async || is_stopped(&f, &ml_box)
            .await)
        .await,
        "the policy change did not cause a tick that stops {ml_box}"
    );
    assert!(
        !is_stopped(&f, &kept).await,
        "the override kept {kept} running"
    );
    assert!(
        !is_stopped(&f, &third).await,
        "research is no longer governed"
    );
    let plan: Value = reqwest::get(format!("{}/v1/plan", replica.api))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let kept_plan = plan
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["instance"] == kept.as_str())
        .unwrap();
    assert_eq!(kept_plan["code"], "override", "{plan}");
    let overrides: Value = reqwest::get(format!("{}/v1/audit?instance={kept}", replica.api))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(overrides[0]["actor"], "ops", "{overrides}");

    // The head, whatever appended it last, has its checkpoint, and every checkpoint holds.
    let store = ebb::store::Store::from_pool(pool.clone());
    let (head, _) = store.audit_head().await.unwrap().unwrap();
    let newest = checkpoints.join(format!("checkpoint-{head:020}.json"));
    assert!(
        within(Duration::from_secs(60), async || newest.exists()).await,
        "no checkpoint of row {head}"
    );
    let verified = Command::new(env!("CARGO_BIN_EXE_ebb"))
        .args(["audit", "verify", "--checkpoints", &dest, "--public-key"])
        .arg(dir.path().join("audit.key.pub"))
        .env("DATABASE_URL", &url)
        .output()
        .unwrap();
    assert!(verified.status.success(), "{verified:?}");
}
