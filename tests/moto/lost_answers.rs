//! A stop whose answer is lost is unknown, not failed. A proxy between ebb and moto
//! ([`common::ec2_proxy`]) forwards the evening's StopInstances, which moto carries out, and
//! loses the answer: the connection closes, a 500 comes in its place, or nothing comes until the
//! SDK's attempt times out. The tick writes no
//! outcome and does not send the call again; the intent stays open through the in-flight window,
//! and the first tick past it resolves it from the instance's state as `succeeded`, which the
//! report credits and after which the morning's `start_at_open: stopped-by-ebb` starts the box.
//! A refusal (403) that proves nothing was done is still `failed` at once.
//!
//! RELIABILITY.md reports the figures this prints.

use crate::common;

use crate::faults::provider;
use chrono::{Duration, NaiveDate};
use common::ec2_proxy::{Ec2Proxy, Fault, Hold, Injection, Trap};
use common::moto::{states, Fixture, G5};
use common::{a_past_monday, next_weekday, t};
use ebb::cloud::aws::Timeouts;
use ebb::reconcile::{Options, PolicySource, Reconciler, TickReport};
use ebb::report::{compute, Window};
use ebb::store::{AuditFilter, Leadership, Outcome, Store, Verification};
use sqlx::PgPool;
use std::sync::Arc;

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

/// How long after its intent a call may still be in flight, as `ebb serve` works it out from
/// its deadline and the cloud's call limit.
const IN_FLIGHT: i64 = 5;

/// How the stop's answer is lost.
#[derive(Debug, Clone, Copy)]
enum Loss {
    /// An injected fault that forwards the call first.
    Fault(Fault),
    /// The call forwarded, its answer held until the SDK's attempt time limit passes.
    Stall,
}

/// One research box, ebb ticking in this process through the proxy.
struct Evening {
    f: Fixture,
    proxy: Arc<Ec2Proxy>,
    store: Store,
    ebb: Reconciler<ebb::cloud::aws::AwsProvider>,
    leader: Leadership,
    id: String,
    day: NaiveDate,
    _policies: tempfile::TempDir,
}

impl Evening {
    async fn new(pool: PgPool, region: &'static str, timeouts: Timeouts) -> Evening {
        let f = Fixture::new(region).await;
        let (proxy, endpoint) = Ec2Proxy::start(&std::env::var("AWS_ENDPOINT_URL").unwrap()).await;
        let store = Store::from_pool(pool);
        store.migrate().await.unwrap();
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("research.yaml"), POLICY).unwrap();
        let options = Options {
            in_flight_for: Duration::minutes(IN_FLIGHT),
            ..Options::default()
        };
        let ebb = Reconciler::new(
            provider(&f, &endpoint, timeouts).await,
            store.clone(),
            Arc::new(PolicySource::new(vec![dir.path().to_path_buf()])),
            options,
        );
        let leader = store.try_lead("lost-answers").await.unwrap().unwrap();
        let id = f.launch(G5).await;
        Evening {
            f,
            proxy,
            store,
            ebb,
            leader,
            id,
            day: a_past_monday(),
            _policies: dir,
        }
    }

    async fn tick(&mut self, date: NaiveDate, hm: &str) -> TickReport {
        let at = t(&format!("{date}T{hm}:00Z"));
        self.ebb.tick(at, &mut self.leader).await.unwrap()
    }

    async fn state(&self) -> String {
        let now = states(&self.f.ec2, std::slice::from_ref(&self.id)).await;
        now[&self.id].as_str().to_string()
    }

    async fn rows(&self, outcome: Outcome) -> usize {
        let filter = AuditFilter {
            instance: Some(self.id.clone()),
            outcome: Some(outcome),
            ..AuditFilter::default()
        };
        self.store.audit(&filter).await.unwrap().len()
    }

    /// The evening with the stop's answer lost as `loss` says, the resolution, the report and
    /// the next morning, checked at each step.
    async fn lose_the_stop_answer(mut self, loss: Loss) {
        let name = format!("{loss:?}");
        let (fire, mut fired) = tokio::sync::oneshot::channel();
        match loss {
            Loss::Fault(fault) => self.proxy.inject(Injection {
                action: "StopInstances",
                fault,
                times: 1,
            }),
            Loss::Stall => self.proxy.trap(Trap {
                action: "StopInstances",
                through: true,
                fire,
                hold: Hold::Forever,
            }),
        }
        let day = self.day;
        let lost = self.tick(day, "19:01").await;
        let fired = match loss {
            Loss::Fault(_) => self.proxy.retire().len() == 1,
            Loss::Stall => fired.try_recv().is_ok(),
        };
        assert!(fired, "{name}: the fault never fired");
        assert_eq!(lost.actions.len(), 1, "{name}: {:?}", lost.actions);
        assert_eq!(
            lost.actions[0].label(),
            "unknown",
            "{name}: {:?}",
            lost.actions
        );
        assert_eq!(lost.summary().unknown, 1);
        assert_eq!(lost.summary().failed, 0);
        assert_eq!(
            self.rows(Outcome::Failed).await,
            0,
            "{name}: recorded failed"
        );
        assert_eq!(self.store.pending_intents().await.unwrap().len(), 1);
        // The call landed once, and was not sent again after its answer was lost.
        assert_eq!(self.proxy.calls("StopInstances", &self.id), 1, "{name}");
        assert_eq!(self.proxy.requests("StopInstances"), 1, "{name}: retried");
        assert_eq!(self.state().await, "stopped", "{name}");

        // Inside the in-flight window: still open, the box left alone.
        let waiting = self.tick(day, "19:03").await;
        assert_eq!(waiting.awaiting, 1, "{name}");
        assert!(waiting.resolved.is_empty(), "{name}");
        assert_eq!(self.proxy.requests("StopInstances"), 1, "{name}");

        // Past it: resolved from the instance's state, once.
        let resolving = self.tick(day, "19:10").await;
        assert_eq!(
            resolving.resolved.len(),
            1,
            "{name}: {:?}",
            resolving.resolved
        );
        let resolved = &resolving.resolved[0].entry;
        assert_eq!(resolved.outcome, Outcome::Succeeded, "{name}: {resolved:?}");
        assert_eq!(resolved.action, "stop");
        assert!(self.store.pending_intents().await.unwrap().is_empty());
        let after = self.tick(day, "19:20").await;
        assert!(after.resolved.is_empty(), "{name}: resolved twice");
        assert_eq!(self.rows(Outcome::Succeeded).await, 1, "{name}");
        assert_eq!(self.rows(Outcome::Failed).await, 0, "{name}");

        // The next morning, the box ebb stopped is started.
        let next = next_weekday(day);
        let morning = self.tick(next, "09:05").await;
        assert_eq!(self.proxy.calls("StartInstances", &self.id), 1, "{name}");
        assert_eq!(
            morning.summary().succeeded,
            1,
            "{name}: {:?}",
            morning.actions
        );
        assert_eq!(self.state().await, "running", "{name}");
        let noon = t(&format!("{next}T12:00:00Z"));
        self.tick(next, "12:00").await;

        // The stop is credited: its stopped stretch, evening to morning, is in the report.
        let window = Window {
            since: t(&format!("{day}T18:00:00Z")),
            until: noon,
        };
        let history = self
            .store
            .report_history(window.since, window.until, &Default::default())
            .await
            .unwrap();
        let report = compute(&history, window, None, &Default::default());
        assert_eq!(report.total.stops, 1, "{name}: {:?}", report.total);
        assert!(
            report.total.stopped_hours > 13.0,
            "{name}: {:?}",
            report.total
        );
        assert!(matches!(
            self.store.verify_audit().await.unwrap(),
            Verification::Intact { .. }
        ));
        eprintln!(
            "lost answers, {name}: 1 StopInstances tried, 1 carried out, 1 answer lost, requests {}, \
             outcomes: unknown then succeeded at the first tick past the window, failed 0, \
             stopped hours credited {:.1}",
            self.proxy.requests("StopInstances"),
            report.total.stopped_hours
        );
    }
}

#[sqlx::test(migrations = false)]
async fn a_stop_whose_connection_closes_before_the_answer_is_resolved_as_succeeded(pool: PgPool) {
    Evening::new(pool, "us-east-2", Timeouts::default())
        .await
        .lose_the_stop_answer(Loss::Fault(Fault::AnswerDropped))
        .await;
}

#[sqlx::test(migrations = false)]
async fn a_stop_answered_500_after_it_landed_is_resolved_as_succeeded(pool: PgPool) {
    Evening::new(pool, "ap-south-1", Timeouts::default())
        .await
        .lose_the_stop_answer(Loss::Fault(Fault::ServerErrorAfter))
        .await;
}

/// AWS limits under which the SDK gives up on a stalled answer within seconds, while moto's
/// other answers, slower on a loaded machine (a start took over 1 s in CI), still come in time.
const STALLING: Timeouts = Timeouts {
    connect: std::time::Duration::from_secs(5),
    attempt: std::time::Duration::from_secs(5),
    operation: std::time::Duration::from_secs(10),
};

/// The SDK gives up on the stalled answer at its attempt limit ([`STALLING`]).
#[sqlx::test(migrations = false)]
async fn a_stop_whose_answer_stalls_past_the_time_limit_is_resolved_as_succeeded(pool: PgPool) {
    Evening::new(pool, "eu-west-2", STALLING)
        .await
        .lose_the_stop_answer(Loss::Stall)
        .await;
}

#[sqlx::test(migrations = false)]
async fn a_refused_stop_is_failed_at_once(pool: PgPool) {
    let mut e = Evening::new(pool, "ca-central-1", Timeouts::default()).await;
    e.proxy.inject(Injection {
        action: "StopInstances",
        fault: Fault::AccessDenied,
        times: usize::MAX,
    });
    let day = e.day;
    let refused = e.tick(day, "19:01").await;
    assert_eq!(refused.summary().failed, 1, "{:?}", refused.actions);
    assert_eq!(refused.summary().unknown, 0);
    assert_eq!(e.rows(Outcome::Failed).await, 1);
    assert!(e.store.pending_intents().await.unwrap().is_empty());
    assert_eq!(e.proxy.calls("StopInstances", &e.id), 0);
    assert_eq!(e.state().await, "running");
}
