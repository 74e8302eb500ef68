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

/// A cloud's error text as EC2 may word it: the caller's ARN with its account, an access key,
/// a session token and a presigned URL.
const LEAKY: &str = "User: arn:aws:sts::123456789012:assumed-role/ebb/worker is not authorized \
    (key AKIAIOSFODNN7EXAMPLE, token IQoJb3JpZ2luX2VjEJr//////////wEaCXVzLWVhc3QtMSJHMEUCIQD6m7oRw0, \
    see https://bucket.s3.amazonaws.com/report?X-Amz-Credential=AKIAIOSFODNN7EXAMPLE&X-Amz-Signature=9f8e7d)";

/// A failed call's outcome keeps a stable code (the error's kind) and a summary of the error
/// with every secret-looking word taken out, never the cloud's text as it came: the audit log
/// is append-only and every reader reads it.
#[sqlx::test(migrations = false)]
async fn a_failed_calls_stored_error_is_a_code_and_a_redacted_summary(pool: PgPool) {
    let mut world = SimWorld::plan(FLEET)
        .policy("office.yaml", POLICY)
        .clock(Clock::Fixed(common::t(NOW)))
        .start(Store::from_pool(pool))
        .await;
    let denied = ebb::cloud::CloudError::coded(
        ebb::cloud::ErrorKind::AccessDenied,
        "StopInstances",
        "UnauthorizedOperation",
        LEAKY,
    );
    world
        .reconciler
        .provider()
        .refuse(common::intercept::Method::Stop, denied);
    let report = world.tick(NOW).await;
    assert_eq!(
        report.actions[0].outcome,
        Outcome::Failed,
        "{}",
        report.headline()
    );

    let audit = world.store.audit(&AuditFilter::default()).await.unwrap();
    let failed = audit
        .iter()
        .find(|r| r.entry.outcome == Outcome::Failed)
        .expect("the failed stop's outcome");
    let error = failed.entry.error.as_deref().unwrap();
    assert!(
        error.starts_with("access_denied: StopInstances failed: UnauthorizedOperation: User: arn:aws:sts::***:assumed-role/ebb/worker is not authorized"),
        "{error}"
    );
    for secret in [
        "123456789012",
        "AKIAIOSFODNN7EXAMPLE",
        "IQoJb3JpZ2luX2VjEJr",
        "X-Amz-Signature",
        "9f8e7d",
    ] {
        assert!(
            !format!("{audit:?}").contains(secret),
            "{secret}: {audit:?}"
        );
        assert!(
            !format!("{report:?}").contains(secret),
            "{secret}: {report:?}"
        );
    }
}
