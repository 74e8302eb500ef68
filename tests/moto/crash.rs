//! Crash safety: `ebb tick` is killed with SIGKILL at many points inside ticks (at timed
//! delays, at the moment a given EC2 call is on the wire, and while ebb writes down a stop it
//! made), then run again. A proxy between ebb and moto's EC2 server counts every call that
//! reaches the cloud: each instance is stopped (or started) exactly once per evening (or
//! morning), and every intent ends with an outcome.

use crate::common;

use common::ec2_proxy::{Ec2Proxy, Hold, Trap};
use common::moto::{states, Fixture, Launch, G5};
use common::{a_past_monday, next_weekday};
use ebb::store::{Store, Verification};
use sqlx::PgPool;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::oneshot;

/// Stops that do not wait for a busy GPU: moto has no CloudWatch, and a stop that waits while
/// busy also waits while the GPU cannot be read.
const POLICY: &str = r#"
policies:
  - name: research-hours
    match: {tags: {team: research}}
    work_hours:
      timezone: UTC
      periods:
        - {days: mon-fri, start: "09:00", stop: "19:00"}
      outside_hours: stop
      start_at_open: stopped-by-ebb
      busy_defers_stop: false
"#;

/// Where a run of `ebb tick` is killed.
#[derive(Debug, Clone, Copy)]
enum Kill {
    /// This long after it starts.
    After(u64),
    /// When this EC2 action reaches the proxy; `true`: after the cloud carried it out,
    /// `false`: before.
    On(&'static str, bool),
    /// While ebb writes down that it stopped an instance (`stopped_by_ebb_at`), after the
    /// stop's outcome: a trigger the test installs holds that write until the kill.
    Remembering,
}

/// Holds, inside a trigger, any write of `stopped_by_ebb_at` for [`Kill::Remembering`].
const HOLD_REMEMBERING: &str = "
CREATE FUNCTION hold_for_the_kill() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN PERFORM pg_sleep(600); RETURN NEW; END $$;
CREATE TRIGGER hold_for_the_kill BEFORE UPDATE ON instances FOR EACH ROW
WHEN (NEW.stopped_by_ebb_at IS NOT NULL
      AND NEW.stopped_by_ebb_at IS DISTINCT FROM OLD.stopped_by_ebb_at)
EXECUTE FUNCTION hold_for_the_kill();";

struct Setup {
    pool: PgPool,
    f: Fixture,
    url: String,
    proxy: Arc<Ec2Proxy>,
    endpoint: String,
    policies: tempfile::TempDir,
}

impl Setup {
    /// Runs `ebb tick --at AT` through the proxy, killing it at `kill`; returns whether it was
    /// killed before it ended.
    async fn tick(&self, at: &str, kill: Option<Kill>) -> bool {
        let (fired, on_fire) = oneshot::channel();
        let mut on_fire = Some(on_fire);
        if let Some(Kill::On(action, through)) = kill {
            self.proxy.trap(Trap {
                action,
                through,
                fire: fired,
                hold: Hold::Forever,
            });
        }
        if let Some(Kill::Remembering) = kill {
            sqlx::raw_sql(HOLD_REMEMBERING)
                .execute(&self.pool)
                .await
                .unwrap();
        }
        let mut child = Command::new(env!("CARGO_BIN_EXE_ebb"))
            .args(["tick", "--at", at])
            .env("DATABASE_URL", &self.url)
            .env("AWS_ENDPOINT_URL", &self.endpoint)
            .env("EBB_POLICIES", self.policies.path())
            .env("EBB_REGIONS", self.f.region)
            .env("EBB_MANAGED_TAG", format!("ebb:managed={}", self.f.managed))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let started = std::time::Instant::now();
        let every = Duration::from_millis(2);
        let ended = common::eventually(Duration::from_secs(60), every, async || {
            if let Some(status) = child.try_wait().unwrap() {
                assert!(
                    !matches!(kill, Some(Kill::Remembering)),
                    "tick at {at} ended ({status}) without remembering a stop"
                );
                let unfired = matches!(kill, Some(Kill::On(..)));
                assert!(
                    status.success() || unfired,
                    "tick at {at} failed without being killed: {status}"
                );
                return Some(false);
            }
            let due = match kill {
                Some(Kill::After(ms)) => started.elapsed() >= Duration::from_millis(ms),
                Some(Kill::On(..)) => on_fire.as_mut().is_some_and(|r| r.try_recv().is_ok()),
                Some(Kill::Remembering) => self.held().await.is_some(),
                None => false,
            };
            if due {
                child.kill().unwrap();
                child.wait().unwrap();
                if let Some(Kill::Remembering) = kill {
                    self.release().await;
                }
                return Some(true);
            }
            None
        });
        let killed = ended.await.unwrap_or_else(|| panic!("tick at {at} hangs"));
        self.proxy.disarm();
        on_fire.take();
        killed
    }

    /// The database session the trigger of [`Kill::Remembering`] holds, if one waits there.
    async fn held(&self) -> Option<i32> {
        sqlx::query_scalar(
            "SELECT pid FROM pg_stat_activity
             WHERE datname = current_database() AND wait_event = 'PgSleep'",
        )
        .fetch_optional(&self.pool)
        .await
        .unwrap()
    }

    /// Ends the session of the killed process that the trigger held (Postgres would notice the
    /// closed socket only when the sleep ends), then removes the trigger.
    async fn release(&self) {
        while let Some(pid) = self.held().await {
            sqlx::query("SELECT pg_terminate_backend($1)")
                .bind(pid)
                .execute(&self.pool)
                .await
                .unwrap();
        }
        sqlx::raw_sql(
            "DROP TRIGGER hold_for_the_kill ON instances; DROP FUNCTION hold_for_the_kill();",
        )
        .execute(&self.pool)
        .await
        .unwrap();
    }

    fn calls(&self, action: &str, id: &str) -> usize {
        self.proxy.calls(action, id)
    }
}

#[sqlx::test(migrations = false)]
async fn killed_ticks_never_repeat_an_action_and_every_intent_gets_an_outcome(pool: PgPool) {
    let f = Fixture::new("us-west-2").await;
    let (proxy, endpoint) = Ec2Proxy::start(&std::env::var("AWS_ENDPOINT_URL").unwrap()).await;
    let policies = tempfile::tempdir().unwrap();
    std::fs::write(policies.path().join("research.yaml"), POLICY).unwrap();
    let s = Setup {
        pool: pool.clone(),
        // The ticks run as the runtime role, which may only append to the audit log.
        url: common::migrated_for_runtime(&pool).await,
        f,
        proxy,
        endpoint,
        policies,
    };
    let store = Store::connect(&s.url).await.unwrap();

    let mut research = Vec::new();
    for _ in 0..4 {
        research.push(s.f.launch(G5).await);
    }
    let skipped =
        s.f.launch(Launch {
            tags: &[("team", "research"), ("ebb:skip", "true")],
            ..G5
        })
        .await;

    let evenings = [
        Kill::Remembering,
        Kill::On("StopInstances", true),
        Kill::On("StopInstances", false),
        Kill::On("DescribeInstances", false),
        Kill::After(0),
        Kill::After(40),
        Kill::After(80),
        Kill::After(120),
        Kill::After(160),
        Kill::After(200),
        Kill::After(260),
        Kill::After(330),
        Kill::After(420),
        Kill::After(550),
        Kill::After(750),
    ];
    let mornings = [
        Kill::On("StartInstances", true),
        Kill::On("StartInstances", false),
        Kill::After(60),
        Kill::After(140),
        Kill::After(220),
        Kill::After(300),
        Kill::After(400),
        Kill::After(520),
        Kill::After(700),
    ];
    let mut day = a_past_monday();
    let mut killed = 0;
    for round in 0..evenings.len() {
        let next = next_weekday(day);
        let stops_before: Vec<usize> = research
            .iter()
            .map(|id| s.calls("StopInstances", id))
            .collect();
        let evening = format!("{day}T20:00:00Z");
        killed += usize::from(s.tick(&evening, Some(evenings[round])).await);
        assert!(!s.tick(&format!("{day}T20:10:00Z"), None).await);
        for (id, before) in research.iter().zip(&stops_before) {
            assert_eq!(
                s.calls("StopInstances", id),
                before + 1,
                "{id}: one stop on the evening of {day}, killed at {:?}",
                evenings[round]
            );
        }
        let stopped = states(&s.f.ec2, &research).await;
        assert!(
            stopped.values().all(|s| s.as_str() == "stopped"),
            "{stopped:?} after {:?}",
            evenings[round]
        );

        let kill = mornings[round % mornings.len()];
        let starts_before: Vec<usize> = research
            .iter()
            .map(|id| s.calls("StartInstances", id))
            .collect();
        killed += usize::from(s.tick(&format!("{next}T09:05:00Z"), Some(kill)).await);
        assert!(!s.tick(&format!("{next}T09:15:00Z"), None).await);
        for (id, before) in research.iter().zip(&starts_before) {
            assert_eq!(
                s.calls("StartInstances", id),
                before + 1,
                "{id}: one start on the morning of {next}, killed at {kill:?}: \
                 ebb remembered its stop through the crash"
            );
        }
        assert!(
            store.pending_intents().await.unwrap().is_empty(),
            "round {round}"
        );
        day = next;
    }
    eprintln!(
        "{killed} of {} runs were killed before they ended",
        2 * evenings.len()
    );
    assert!(
        killed >= 15,
        "only {killed} runs were killed before they ended"
    );
    assert_eq!(s.calls("StopInstances", &skipped), 0);
    assert!(matches!(
        store.verify_audit().await.unwrap(),
        Verification::Intact { .. }
    ));
    // Every intent has exactly one outcome (a unique index forbids two).
    let (intents, outcomes): (i64, i64) = sqlx::query_as(
        "SELECT count(*) FILTER (WHERE outcome = 'intent'),
                count(*) FILTER (WHERE intent_seq IS NOT NULL)
         FROM audit_log WHERE action IN ('stop', 'start')",
    )
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!(intents, outcomes);
}
