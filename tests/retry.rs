//! A failing action is tried again, not at every tick: after growing waits when the cloud
//! refuses it (access denied), and at every tick for a while when EC2 has no capacity for a
//! start, then every 5 minutes. In process, on the simulated fleet (where a start can fail for
//! lack of capacity), with a real Postgres; a wrapper around the simulated provider denies
//! starts, as a changed IAM policy would.

mod common;

use chrono::{DateTime, Utc};
use common::t;
use ebb::clock::Clock;
use ebb::cloud::sim::SimProvider;
use ebb::cloud::{
    ActionReport, CloudError, ErrorKind, Failed, Image, ImageMade, InstanceStatus, Inventory,
    Launch, LaunchSpec, Provider, StopKind, TypePrice,
};
use ebb::engine::Action;
use ebb::fleet::{Instance, Sample};
use ebb::reconcile::{Options, PolicySource, Reconciler};
use ebb::store::{AuditFilter, Leadership, Outcome, Store};
use sqlx::PgPool;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

const POLICY: &str = r#"
policies:
  - name: office
    match: {tags: {team: research}}
    work_hours:
      timezone: UTC
      periods:
        - {days: mon-fri, start: "09:00", stop: "19:00"}
      outside_hours: stop
      start_at_open: stopped-by-ebb
"#;

/// Never enough capacity for this box.
const FLEET: &str = r#"
instances:
  - id: i-0a
    region: us-east-1
    type: p5.48xlarge
    state: stopped
    tags: {team: research}
    sim: {usage: idle, start_failures: 1000}
"#;

/// The simulated fleet; with `deny_starts`, every start is refused with
/// `UnauthorizedOperation` instead.
struct Refusing {
    inner: SimProvider,
    deny_starts: bool,
}

impl Provider for Refusing {
    async fn instances(&self) -> Inventory {
        self.inner.instances().await
    }
    async fn reread(&self, region: &str, ids: &[String]) -> Result<Vec<Instance>, CloudError> {
        self.inner.reread(region, ids).await
    }
    async fn set_type(&self, region: &str, id: &str, instance_type: &str) -> ActionReport {
        self.inner.set_type(region, id, instance_type).await
    }
    async fn gpu_utilisation(
        &self,
        region: &str,
        instances: &[String],
        from: DateTime<Utc>,
        to: DateTime<Utc>,
    ) -> Result<HashMap<String, Vec<Sample>>, CloudError> {
        self.inner
            .gpu_utilisation(region, instances, from, to)
            .await
    }
    async fn prices(
        &self,
        region: &str,
        types: &[String],
        now: DateTime<Utc>,
    ) -> Result<Vec<TypePrice>, CloudError> {
        self.inner.prices(region, types, now).await
    }
    async fn stop(&self, region: &str, ids: &[String], kind: StopKind) -> ActionReport {
        self.inner.stop(region, ids, kind).await
    }
    async fn start(&self, region: &str, ids: &[String]) -> ActionReport {
        if !self.deny_starts {
            return self.inner.start(region, ids).await;
        }
        let failed = ids
            .iter()
            .map(|id| Failed {
                instance: id.clone(),
                error: CloudError {
                    kind: ErrorKind::AccessDenied,
                    operation: "StartInstances",
                    code: Some("UnauthorizedOperation".into()),
                    message: "You are not authorized to perform this operation.".into(),
                    request_id: None,
                },
            })
            .collect();
        ActionReport {
            failed,
            ..ActionReport::default()
        }
    }
    async fn tag(
        &self,
        region: &str,
        ids: &[String],
        tags: &BTreeMap<String, String>,
    ) -> ActionReport {
        self.inner.tag(region, ids, tags).await
    }
    async fn untag(&self, region: &str, ids: &[String], keys: &[String]) -> ActionReport {
        self.inner.untag(region, ids, keys).await
    }
    async fn launch_spec(&self, region: &str, id: &str) -> Result<LaunchSpec, CloudError> {
        self.inner.launch_spec(region, id).await
    }
    async fn describe(
        &self,
        region: &str,
        ids: &[String],
    ) -> Result<Vec<InstanceStatus>, CloudError> {
        self.inner.describe(region, ids).await
    }
    async fn find_tagged(
        &self,
        region: &str,
        key: &str,
        value: &str,
    ) -> Result<Option<InstanceStatus>, CloudError> {
        self.inner.find_tagged(region, key, value).await
    }
    async fn create_image(
        &self,
        region: &str,
        id: &str,
        name: &str,
        tags: &BTreeMap<String, String>,
    ) -> Result<ImageMade, CloudError> {
        self.inner.create_image(region, id, name, tags).await
    }
    async fn image(&self, region: &str, image: &str) -> Result<Option<Image>, CloudError> {
        self.inner.image(region, image).await
    }
    async fn launch(&self, region: &str, launch: &Launch) -> Result<InstanceStatus, CloudError> {
        self.inner.launch(region, launch).await
    }
    async fn terminate(&self, region: &str, ids: &[String]) -> ActionReport {
        self.inner.terminate(region, ids).await
    }
    async fn deregister_image(&self, region: &str, image: &str) -> Result<(), CloudError> {
        self.inner.deregister_image(region, image).await
    }
    async fn delete_snapshot(&self, region: &str, snapshot: &str) -> Result<(), CloudError> {
        self.inner.delete_snapshot(region, snapshot).await
    }
    async fn migration_artifacts(
        &self,
        region: &str,
    ) -> Result<Vec<ebb::cloud::Artifact>, CloudError> {
        self.inner.migration_artifacts(region).await
    }
}

/// The box ebb stopped last night, about to be started at 09:00 and refused every time.
async fn setup(pool: PgPool, deny_starts: bool) -> (Store, Reconciler<Refusing>, Leadership) {
    let store = Store::from_pool(pool);
    store.migrate().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("policies")).unwrap();
    std::fs::write(dir.path().join("policies/office.yaml"), POLICY).unwrap();
    std::fs::write(dir.path().join("fleet.yaml"), FLEET).unwrap();
    let (fleet, behaviours) =
        ebb::snapshot::load_simulation(&dir.path().join("fleet.yaml")).unwrap();
    let inner = SimProvider::new(fleet, behaviours, Clock::Fixed(t("2026-11-30T08:00:00Z")));
    let provider = Refusing { inner, deny_starts };
    let policies = Arc::new(PolicySource::new(vec![dir.path().join("policies")]));
    let reconciler = Reconciler::new(provider, store.clone(), policies, Options::default());
    let mut leader = store.try_lead("test").await.unwrap().unwrap();
    let before = reconciler
        .tick(t("2026-11-30T08:00:00Z"), &mut leader)
        .await
        .unwrap();
    assert!(before.actions.is_empty());
    // As if ebb had stopped it last night.
    store
        .record_action(
            &["i-0a".to_string()],
            Action::Stop,
            t("2026-11-29T19:00:00Z"),
        )
        .await
        .unwrap();
    (store, reconciler, leader)
}

/// Ticks at each `(time, tried)`: the start is tried, and fails with `error`, or is held back.
/// Returns the failed outcome rows.
async fn ticks(
    store: &Store,
    reconciler: &Reconciler<Refusing>,
    leader: &mut Leadership,
    ticks: &[(&str, bool)],
    error: &str,
) -> Vec<ebb::store::AuditEntry> {
    for (time, tried) in ticks {
        let report = reconciler
            .tick(t(&format!("2026-11-30T{time}Z")), leader)
            .await
            .unwrap();
        if *tried {
            assert_eq!(report.actions.len(), 1, "{time}: {report:?}");
            assert_eq!(report.actions[0].outcome, Outcome::Failed);
            assert!(
                report.actions[0].detail.contains(error),
                "{time}: {report:?}"
            );
            assert_eq!(report.held_back, 0, "{time}");
        } else {
            assert!(report.actions.is_empty(), "{time}: {report:?}");
            assert_eq!(report.held_back, 1, "{time}");
        }
    }
    store
        .audit(&AuditFilter {
            instance: Some("i-0a".into()),
            outcome: Some(Outcome::Failed),
            ..AuditFilter::default()
        })
        .await
        .unwrap()
}

#[sqlx::test(migrations = false)]
async fn a_start_that_keeps_being_denied_is_retried_after_doubling_waits(pool: PgPool) {
    let (store, reconciler, mut leader) = setup(pool, true).await;
    // Waits of 1, 2, 4 and 8 minutes after the first four failures.
    let plan = [
        ("09:00:00", true),
        ("09:00:30", false),
        ("09:01:00", true),
        ("09:02:00", false),
        ("09:03:00", true),
        ("09:06:00", false),
        ("09:07:00", true),
        ("09:14:00", false),
        ("09:15:00", true),
    ];
    let failed = ticks(
        &store,
        &reconciler,
        &mut leader,
        &plan,
        "UnauthorizedOperation",
    )
    .await;
    assert_eq!(failed.len(), 5, "one row per attempt, none while waiting");
    assert!(failed
        .iter()
        .all(|row| row.entry.code.as_deref() == Some("start_at_open")));
}

#[sqlx::test(migrations = false)]
async fn a_start_refused_for_capacity_is_retried_at_every_tick_then_every_five_minutes(
    pool: PgPool,
) {
    let (store, reconciler, mut leader) = setup(pool, false).await;
    // Ten attempts a minute apart, then one every 5 minutes.
    let mut plan: Vec<(String, bool)> = (0..10).map(|m| (format!("09:{m:02}:00"), true)).collect();
    plan.extend([
        ("09:10:00".to_string(), false),
        ("09:13:59".to_string(), false),
        ("09:14:00".to_string(), true),
        ("09:18:00".to_string(), false),
        ("09:19:00".to_string(), true),
    ]);
    let plan: Vec<(&str, bool)> = plan.iter().map(|(s, b)| (s.as_str(), *b)).collect();
    let failed = ticks(
        &store,
        &reconciler,
        &mut leader,
        &plan,
        "InsufficientInstanceCapacity",
    )
    .await;
    assert_eq!(failed.len(), 12);
    for row in &failed {
        assert_eq!(
            row.entry.code.as_deref(),
            Some("insufficient_capacity"),
            "{row:?}"
        );
        assert!(
            row.entry
                .reason
                .contains("EC2 has no capacity for it now: tried again at every tick"),
            "{}",
            row.entry.reason
        );
    }
}
