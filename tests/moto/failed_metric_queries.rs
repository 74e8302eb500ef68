//! A CloudWatch query that fails inside an answer of HTTP 200 is a failed read, through the
//! `ebb` binary (issue 27): `ebb tick` against moto for EC2 and a fake CloudWatch
//! (`AWS_ENDPOINT_URL_CLOUDWATCH`, [`CloudWatchFake`]) that marks a busy box's query
//! `InternalError` and another's `Forbidden`. Neither is stopped, at the close (where a read
//! taken for "no busy sample" would stop it) nor under `missing_metrics: idle` (where a read
//! taken for "no data" would); a box read the way that stops it, in the same tick, is stopped,
//! so the binary did act on the fake's answers.

use crate::common;

use aws_sdk_ec2::types::InstanceStateName;
use chrono::{DateTime, Duration, DurationRound, Timelike, Utc};
use common::cloudwatch_fake::{CloudWatchFake, Reading};
use common::moto::{states, Fixture, G5};
use common::Ebb;
use sqlx::PgPool;

/// `ebb` on the test's database, moto's EC2 in `f`'s region and management tag, and the fake
/// CloudWatch.
fn ebb(url: &str, f: &Fixture, policies: &std::path::Path, cloudwatch: &CloudWatchFake) -> Ebb {
    Ebb::on(url)
        .env("EBB_POLICIES", policies)
        .env("EBB_REGIONS", f.region)
        .env("EBB_MANAGED_TAG", format!("ebb:managed={}", f.managed))
        .env("AWS_ENDPOINT_URL_CLOUDWATCH", &cloudwatch.url)
        .env(
            "EBB_PRICES",
            concat!(env!("CARGO_MANIFEST_DIR"), "/deploy/prices.yaml"),
        )
}

/// `ebb tick --at at`: its summary. A failed read makes the tick's exit status 1 (a problem),
/// so the status is not asserted; a tick that did not run says no summary.
fn tick(ebb: &Ebb, at: DateTime<Utc>) -> String {
    let at = at.to_rfc3339();
    let out = ebb.run(&["tick", "--at", &at]);
    let summary = String::from_utf8(out.stdout.clone()).unwrap();
    assert!(summary.contains(" instances, "), "tick at {at}: {out:?}");
    summary
}

/// What the tick decided for `id`: its action and code, as recorded.
async fn decided(url: &str, id: &str) -> (String, String) {
    let store = ebb::store::Store::connect(url).await.unwrap();
    let page = ebb::store::Page::first(10_000);
    let recorded = store.instances(false, &page).await.unwrap();
    let r = recorded.into_iter().find(|r| r.id == id).unwrap();
    (r.decided_action.unwrap(), r.decided_code.unwrap())
}

/// The audit rows of `id`'s stops.
fn stops(ebb: &Ebb, id: &str) -> Vec<serde_json::Value> {
    let args = [
        "audit",
        "--instance",
        id,
        "--action",
        "stop",
        "--format",
        "json",
    ];
    let out = ebb.run(&args);
    assert!(out.status.success(), "{out:?}");
    serde_json::from_slice(&out.stdout).unwrap()
}

async fn state(f: &Fixture, id: &str) -> InstanceStateName {
    states(&f.ec2, &[id.to_string()]).await[id].clone()
}

/// Three research boxes, idle when data is missing. Their first read (an hour after moto
/// launched them, so that each has run for the whole window) marks one box's queries
/// `InternalError`, another's `Forbidden`, and finds no data for the third: only the third is
/// stopped. Before the fix, the two failed queries were read as "no data" too, and all three
/// were stopped (`idle_metrics_missing`).
#[sqlx::test(migrations = false)]
async fn failed_queries_are_not_missing_metrics_through_the_binary(pool: PgPool) {
    let f = Fixture::new("ap-south-1").await;
    let url = common::migrated_for_runtime(&pool).await;
    let policies = tempfile::tempdir().unwrap();
    let policy = r#"
policies:
  - name: idle-research
    match: {tags: {team: research}}
    idle: {gpu_below: 5, for: 30m, missing_metrics: idle}
"#;
    std::fs::write(policies.path().join("research.yaml"), policy).unwrap();
    let cloudwatch = CloudWatchFake::start();
    let internal = f.launch(G5).await;
    let forbidden = f.launch(G5).await;
    let no_data = f.launch(G5).await;
    cloudwatch.set(&internal, Reading::Failed("InternalError"));
    cloudwatch.set(&forbidden, Reading::Failed("Forbidden"));
    cloudwatch.set(&no_data, Reading::NoData);
    let ebb = ebb(&url, &f, policies.path(), &cloudwatch);

    let at = Utc::now() + Duration::hours(1);
    let summary = tick(&ebb, at);
    assert!(summary.contains("1 actions (1 succeeded"), "{summary}");
    assert!(
        summary.contains("2 instances with GPU utilisation unread"),
        "{summary}"
    );
    for id in [&internal, &forbidden] {
        assert!(cloudwatch.asked(id) > 0, "{id} was never asked for");
        assert_eq!(state(&f, id).await, InstanceStateName::Running, "{id}");
        assert!(stops(&ebb, id).is_empty(), "{id}");
        let (action, code) = decided(&url, id).await;
        assert_eq!(
            (action.as_str(), code.as_str()),
            ("none", "metrics_unreadable")
        );
    }
    assert_ne!(state(&f, &no_data).await, InstanceStateName::Running);
    assert_eq!(
        decided(&url, &no_data).await,
        ("stop".to_string(), "idle_metrics_missing".to_string())
    );
    assert!(ebb.run(&["audit", "verify"]).status.success());
}

/// Work hours that close at `close` (UTC) every day; a busy GPU defers the stop.
fn closing_at(close: DateTime<Utc>) -> String {
    format!(
        r#"
policies:
  - name: dev-hours
    match: {{tags: {{team: research}}}}
    work_hours:
      timezone: UTC
      periods:
        - {{days: mon-sun, start: "00:00", stop: "{:02}:{:02}"}}
      outside_hours: stop
      busy_defers_stop: true
"#,
        close.hour(),
        close.minute()
    )
}

/// Two busy boxes (90 %) and an idle one (2 %) read inside hours; after the close, CloudWatch
/// marks one busy box's queries `InternalError` and the other's `Forbidden`. The kept busy
/// reading is not dropped and the failed read is not "read, not busy": neither busy box is
/// stopped (`metrics_unreadable`), while the idle one, read as before, is stopped for the
/// close. Before the fix, the empty answers replaced the kept busy reading and both busy boxes
/// were stopped at the close (`outside_hours`).
#[sqlx::test(migrations = false)]
async fn failed_queries_at_the_close_stop_nothing_through_the_binary(pool: PgPool) {
    let f = Fixture::new("ap-northeast-3").await;
    let url = common::migrated_for_runtime(&pool).await;
    // An hour ahead (after moto's launch times), on a five-minute boundary, and late enough
    // in its day for a period from midnight to hold the first tick.
    let mut close = (Utc::now() + Duration::hours(1))
        .duration_trunc(Duration::minutes(5))
        .unwrap();
    if close.hour() == 0 && close.minute() < 15 {
        close += Duration::minutes(15);
    }
    let policies = tempfile::tempdir().unwrap();
    std::fs::write(policies.path().join("dev.yaml"), closing_at(close)).unwrap();
    let cloudwatch = CloudWatchFake::start();
    let internal = f.launch(G5).await;
    let forbidden = f.launch(G5).await;
    let idle = f.launch(G5).await;
    cloudwatch.set(&internal, Reading::Value(90.0));
    cloudwatch.set(&forbidden, Reading::Value(90.0));
    cloudwatch.set(&idle, Reading::Value(2.0));
    let ebb = ebb(&url, &f, policies.path(), &cloudwatch);

    let open = tick(&ebb, close - Duration::seconds(270));
    assert!(open.contains(": 3 instances, 0 actions"), "{open}");

    cloudwatch.set(&internal, Reading::Failed("InternalError"));
    cloudwatch.set(&forbidden, Reading::Failed("Forbidden"));
    let asked = cloudwatch.asked(&internal);
    let closed = tick(&ebb, close + Duration::seconds(30));
    assert!(closed.contains("1 actions (1 succeeded"), "{closed}");
    for id in [&internal, &forbidden] {
        assert!(cloudwatch.asked(id) > asked, "{id} was not asked again");
        assert_eq!(state(&f, id).await, InstanceStateName::Running, "{id}");
        assert!(stops(&ebb, id).is_empty(), "{id}");
        let (action, code) = decided(&url, id).await;
        assert_eq!(
            (action.as_str(), code.as_str()),
            ("none", "metrics_unreadable")
        );
    }
    assert_ne!(state(&f, &idle).await, InstanceStateName::Running);
    assert_eq!(
        decided(&url, &idle).await,
        ("stop".to_string(), "outside_hours".to_string())
    );
    assert!(ebb.run(&["audit", "verify"]).status.success());
}
