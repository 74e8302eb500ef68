//! A heartbeat keeps a GPU-idle box, through the `ebb` binary: `ebb tick` against moto for EC2
//! and the CloudWatch fake reading every GPU at 0 %. Each box says it is in use with its own
//! `ebb:active-at` tag, as a box does with a role limited to that tag key. A fresh heartbeat
//! keeps its box (`in_use`), a stale one does not, one that is not a time keeps its box
//! (`activity_unreadable`), and the kept box is stopped once its heartbeat has gone stale.

use crate::common;

use aws_sdk_ec2::types::{InstanceStateName, Tag};
use chrono::{DateTime, Duration, Utc};
use common::cloudwatch_fake::{CloudWatchFake, Reading};
use common::moto::{states, Fixture, G5};
use common::Ebb;
use sqlx::PgPool;

const POLICY: &str = r#"
policies:
  - name: idle-research
    match: {tags: {team: research}}
    idle:
      gpu_below: 5
      for: 30m
      activity: [{heartbeat: {max_age: 10m}}]
"#;

async fn heartbeat(f: &Fixture, id: &str, value: &str) {
    let tag = Tag::builder().key("ebb:active-at").value(value).build();
    f.ec2
        .create_tags()
        .resources(id)
        .tags(tag)
        .send()
        .await
        .unwrap();
}

/// What the last tick decided for `id`: its action, code and reason, as recorded.
async fn decided(url: &str, id: &str) -> (String, String, String) {
    let store = ebb::store::Store::connect(url).await.unwrap();
    let page = ebb::store::Page::first(10_000);
    let recorded = store.instances(false, &page).await.unwrap();
    let r = recorded.into_iter().find(|r| r.id == id).unwrap();
    (
        r.decided_action.unwrap(),
        r.decided_code.unwrap(),
        r.decided_reason.unwrap(),
    )
}

fn tick(ebb: &Ebb, at: DateTime<Utc>) {
    let at = at.to_rfc3339();
    let out = ebb.run(&["tick", "--at", &at]);
    assert!(out.status.success(), "tick at {at}: {out:?}");
}

async fn state(f: &Fixture, id: &str) -> InstanceStateName {
    states(&f.ec2, &[id.to_string()]).await[id].clone()
}

#[sqlx::test(migrations = false)]
async fn a_fresh_heartbeat_keeps_a_gpu_idle_box_until_it_goes_stale(pool: PgPool) {
    let f = Fixture::new("sa-east-1").await;
    let url = common::migrated_for_runtime(&pool).await;
    let policies = tempfile::tempdir().unwrap();
    std::fs::write(policies.path().join("research.yaml"), POLICY).unwrap();
    let cloudwatch = CloudWatchFake::start();
    let (fresh, stale, garbled) = (f.launch(G5).await, f.launch(G5).await, f.launch(G5).await);
    for id in [&fresh, &stale, &garbled] {
        cloudwatch.set(id, Reading::Value(0.0));
    }
    // An hour after moto launched them, so that each has run for the whole idle window.
    let at = Utc::now() + Duration::hours(1);
    let rfc = |t: DateTime<Utc>| t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    heartbeat(&f, &fresh, &rfc(at - Duration::minutes(3))).await;
    heartbeat(&f, &stale, &rfc(at - Duration::minutes(25))).await;
    heartbeat(&f, &garbled, "in a minute").await;
    let ebb = Ebb::on(&url)
        .env("EBB_POLICIES", policies.path())
        .env("EBB_REGIONS", f.region)
        .env("EBB_MANAGED_TAG", format!("ebb:managed={}", f.managed))
        .env("AWS_ENDPOINT_URL_CLOUDWATCH", &cloudwatch.url)
        .env(
            "EBB_PRICES",
            concat!(env!("CARGO_MANIFEST_DIR"), "/deploy/prices.yaml"),
        );

    tick(&ebb, at);
    assert!(cloudwatch.asked(&fresh) > 0, "the GPU was read");
    let (action, code, reason) = decided(&url, &fresh).await;
    assert_eq!(
        (action.as_str(), code.as_str()),
        ("none", "in_use"),
        "{reason}"
    );
    assert!(reason.contains("heartbeat says"), "{reason}");
    assert_eq!(state(&f, &fresh).await, InstanceStateName::Running);

    let (action, code, reason) = decided(&url, &stale).await;
    assert_eq!(
        (action.as_str(), code.as_str()),
        ("stop", "idle"),
        "{reason}"
    );
    assert!(
        reason.contains("no use in the window shown by heartbeat: last use"),
        "{reason}"
    );
    assert_ne!(state(&f, &stale).await, InstanceStateName::Running);

    let (action, code, reason) = decided(&url, &garbled).await;
    assert_eq!(
        (action.as_str(), code.as_str()),
        ("none", "activity_unreadable"),
        "{reason}"
    );
    assert!(reason.contains("not an RFC 3339 time"), "{reason}");
    assert_eq!(state(&f, &garbled).await, InstanceStateName::Running);

    // Fifteen minutes on, the box has said nothing more: its heartbeat is stale, it is stopped.
    tick(&ebb, at + Duration::minutes(15));
    let (action, code, reason) = decided(&url, &fresh).await;
    assert_eq!(
        (action.as_str(), code.as_str()),
        ("stop", "idle"),
        "{reason}"
    );
    assert_ne!(state(&f, &fresh).await, InstanceStateName::Running);
    assert_eq!(state(&f, &garbled).await, InstanceStateName::Running);
}
