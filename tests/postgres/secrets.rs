//! Secrets out of readers' sight: a Prometheus URL's credentials, quoted by the error of a
//! failed read, reach neither the tick's report, the decision reasons `/v1/instances` shows,
//! nor the audit rows of a `max_defer` stop, which keep the reason for ever.

use crate::common;

use common::world::SimWorld;
use ebb::clock::Clock;
use ebb::cloud::prometheus::{Prometheus, PrometheusSettings};
use ebb::reconcile::Options;
use ebb::store::{AuditFilter, Outcome, Store};
use sqlx::PgPool;

/// Closed at 09:00 UTC, a busy box deferred for an hour at most: at 14:00 an unreadable box
/// is stopped, its reason quoting the read's error.
const POLICY: &str = r#"
policies:
  - name: office
    match: {tags: {team: research}}
    work_hours:
      timezone: UTC
      periods:
        - {days: mon-fri, start: "08:00", stop: "09:00"}
      outside_hours: stop
      busy_defers_stop: true
      max_defer: 1h
"#;

const FLEET: &str = r#"
instances:
  - {id: i-1, region: us-east-1, type: g5.xlarge, state: running, tags: {team: research}}
"#;

const NOW: &str = "2026-11-30T14:00:00Z";

#[sqlx::test(migrations = false)]
async fn a_prometheus_urls_credentials_reach_no_reader(pool: PgPool) {
    // A port nothing listens on: every read fails, and its error quotes the URL.
    let unused = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = unused.local_addr().unwrap().port();
    drop(unused);
    let url = format!("http://ebb:s3cr3t-pw@127.0.0.1:{port}");
    let options = Options {
        prometheus: Some(Prometheus::new(PrometheusSettings::new(&url)).unwrap()),
        ..Options::default()
    };
    let mut world = SimWorld::plan(FLEET)
        .policy("office.yaml", POLICY)
        .clock(Clock::Fixed(common::t(NOW)))
        .options(options)
        .start(Store::from_pool(pool.clone()))
        .await;
    let report = world.tick(NOW).await;

    let failure = &report.gpu_read_failures[0].error;
    assert!(
        failure.contains("cannot reach http://***@127.0.0.1"),
        "{failure}"
    );
    let stop = &report.actions[0];
    assert_eq!(stop.outcome, Outcome::Succeeded, "{}", report.headline());
    assert!(
        stop.decision.reason.contains("could not be read"),
        "{}",
        stop.decision.reason
    );

    let instances = serde_json::to_string(
        &world
            .store
            .instances(true, &ebb::store::Page::first(10_000))
            .await
            .unwrap(),
    )
    .unwrap();
    let audit = world.store.audit(&AuditFilter::default()).await.unwrap();
    let reasons: Vec<&str> = audit.iter().map(|r| r.entry.reason.as_str()).collect();
    assert!(
        reasons.iter().any(|r| r.contains("http://***@127.0.0.1")),
        "{reasons:?}"
    );
    for (place, text) in [
        ("the report", format!("{report:?}")),
        ("/v1/instances", instances),
        ("the audit log", format!("{audit:?}")),
    ] {
        assert!(!text.contains("s3cr3t-pw"), "{place}: {text}");
    }
}
