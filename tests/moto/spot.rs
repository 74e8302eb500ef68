//! Spot migration against moto's EC2 server and a real Postgres: the reconciler in process,
//! tick by tick. The test layer over the AWS provider injects what moto cannot do: a crash right
//! after a cloud call, a launch refused for lack of capacity, a spot reclaim's state reason,
//! and spot prices that no longer save enough.

use crate::common;

use aws_sdk_ec2::types::{Filter, Tag};
use chrono::{DateTime, Duration, SecondsFormat, SubsecRound, Utc};
use common::ec2_proxy::{Ec2Proxy, Fault, Injection};
use common::intercept::{Answer, Call, Intercept, Method};
use common::moto::{self, source_volumes, Fixture};
use ebb::cloud::aws::warnings::{Accepted, InterruptionQueue, Signal};
use ebb::cloud::aws::{AwsProvider, Timeouts};
use ebb::cloud::{CloudError, ErrorKind, SpotMoves, SPOT_TERMINATION};
use ebb::fleet::PoolEventKind;
use ebb::reconcile::{Options, PolicySource, Reconciler};
use ebb::spot::State;
use ebb::store::{
    AuditFilter, Leadership, MigrationRecord, NewAuditEntry, Outcome, QueuedPoolEvent, Store,
    StoreError, Verification,
};
use sqlx::PgPool;
use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

const REGION: &str = "us-east-1";

const POLICY: &str = r#"
policies:
  - name: to-spot
    match: {tags: {workload: training}}
    spot:
      min_savings: 40%
      checkpoint_max_age: 30m
      instance_types: [g5.xlarge, g5.2xlarge]
      max_interruptions: 2
      keep_original_for: 6h
"#;

/// What moto cannot produce, as a test sets it: hooks on the test layer over the AWS provider
/// ([`faulty`]) read it.
#[derive(Default)]
struct Faults {
    /// After this call succeeds, the tick hangs as if the process died (the test drops it).
    crash_after: Mutex<Option<&'static str>>,
    /// Told when the tick hangs there.
    crashed: tokio::sync::Notify,
    /// Instances whose termination EC2 reports as a spot reclaim.
    reclaimed: Mutex<HashSet<String>>,
    /// Launches still to refuse for lack of capacity.
    launch_failures: Mutex<u32>,
    /// Starts still to refuse for lack of capacity.
    start_failures: Mutex<u32>,
    /// Instances EC2 no longer knows (terminated long ago): absent from every answer.
    vanished: Mutex<HashSet<String>>,
    /// Replaces every spot price.
    spot_price: Mutex<Option<f64>>,
    /// Replaces the spot price of one type.
    type_price: Mutex<HashMap<String, f64>>,
    /// Look-ups by tag still to answer "none" (EC2's listing lags behind a launch).
    tag_lag: Mutex<u32>,
    /// EC2's idempotency, which moto lacks: each client token's type, subnet and instance.
    tokens: Mutex<HashMap<String, (String, String, String)>>,
}

/// The AWS provider behind the test layer, with `faults` and EC2's idempotency.
fn faulty(
    inner: AwsProvider,
    ec2: aws_sdk_ec2::Client,
    faults: &Arc<Faults>,
) -> Intercept<AwsProvider> {
    let cloud = Intercept::new(inner);
    let (f, aws) = (faults.clone(), cloud.inner.clone());
    cloud.before_async(Method::Launch, move |call| {
        let (f, aws) = (f.clone(), aws.clone());
        async move { f.launched_before(&aws, call).await }
    });
    let f = faults.clone();
    cloud.before(Method::Launch, move |call| {
        take_one(&f.launch_failures).then(|| call.fail(CloudError::no_capacity("RunInstances")))
    });
    let f = faults.clone();
    cloud.before(Method::Start, move |call| {
        take_one(&f.start_failures).then(|| call.fail(CloudError::no_capacity("StartInstances")))
    });
    let f = faults.clone();
    cloud.before(Method::FindTagged, move |_| {
        take_one(&f.tag_lag).then_some(Answer::Found(Ok(None)))
    });
    let f = faults.clone();
    cloud.after(Method::ALL, move |call, answer| f.amend(call, answer));
    cloud.after_async(Method::Image, move |_, mut answer| {
        let ec2 = ec2.clone();
        async move {
            if let Answer::Image(Ok(Some(found))) = &mut answer {
                found.snapshot_volumes = source_volumes(&ec2, &found.snapshots).await;
            }
            answer
        }
    });
    let crash_points = [
        Method::Stop,
        Method::Start,
        Method::Tag,
        Method::CreateImage,
        Method::Launch,
        Method::Terminate,
        Method::DeregisterImage,
        Method::DeleteSnapshot,
    ];
    let f = faults.clone();
    cloud.after_async(crash_points, move |call, answer| {
        let f = f.clone();
        async move {
            f.crash_point(call.method().name()).await;
            answer
        }
    });
    cloud
}

impl Faults {
    /// As EC2 does: the same request again answers with its instance; other settings under
    /// the same token are refused.
    async fn launched_before(&self, aws: &AwsProvider, call: Call) -> Option<Answer> {
        let Call::Launch { region, launch } = call else {
            return None;
        };
        let seen = self
            .tokens
            .lock()
            .unwrap()
            .get(&launch.client_token)
            .cloned();
        let (instance_type, subnet, id) = seen?;
        if (instance_type, subnet) != (launch.instance_type.clone(), launch.subnet.clone()) {
            let message = "the client token was used for a request with other parameters";
            let code = "IdempotentParameterMismatch";
            let e = CloudError::coded(ErrorKind::Other, "RunInstances", code, message);
            return Some(Answer::Launched(Err(e)));
        }
        let found = aws.describe(&region, std::slice::from_ref(&id)).await;
        Some(found.map(|found| found.into_iter().next().unwrap()).into())
    }

    /// What moto answered, as EC2 would have answered it.
    fn amend(&self, call: &Call, answer: &mut Answer) {
        match (call, answer) {
            (Call::Prices { .. }, Answer::Prices(Ok(prices))) => {
                if let Some(p) = *self.spot_price.lock().unwrap() {
                    for t in prices.iter_mut() {
                        t.spot_by_zone.values_mut().for_each(|v| *v = p);
                    }
                }
                for t in prices.iter_mut() {
                    if let Some(p) = self.type_price.lock().unwrap().get(&t.instance_type) {
                        t.spot_by_zone.values_mut().for_each(|v| *v = *p);
                    }
                }
            }
            (Call::Describe { .. }, Answer::Statuses(Ok(found))) => {
                found.retain(|s| !self.vanished.lock().unwrap().contains(&s.id));
                let reclaimed = self.reclaimed.lock().unwrap();
                for s in found.iter_mut() {
                    if reclaimed.contains(&s.id) {
                        s.state_reason = Some(SPOT_TERMINATION.to_string());
                    }
                }
            }
            (Call::Launch { launch, .. }, Answer::Launched(Ok(made))) => {
                self.tokens.lock().unwrap().insert(
                    launch.client_token.clone(),
                    (
                        launch.instance_type.clone(),
                        launch.subnet.clone(),
                        made.id.clone(),
                    ),
                );
            }
            _ => {}
        }
    }

    async fn crash_point(&self, call: &str) {
        let hit = {
            let mut crash = self.crash_after.lock().unwrap();
            let hit = *crash == Some(call);
            if hit {
                *crash = None;
            }
            hit
        };
        if hit {
            self.crashed.notify_one();
            std::future::pending::<()>().await;
        }
    }
}

/// Whether a fault is still to inject; counts it down.
fn take_one(faults: &Mutex<u32>) -> bool {
    let mut left = faults.lock().unwrap();
    let hit = *left > 0;
    *left = left.saturating_sub(1);
    hit
}

struct Setup {
    f: Fixture,
    store: Store,
    leader: Leadership,
    reconciler: Reconciler<Intercept<AwsProvider>>,
    faults: Arc<Faults>,
    /// The first tick's time; the checkpoint tags are set relative to it.
    t0: DateTime<Utc>,
    _dir: tempfile::TempDir,
}

impl Setup {
    async fn new(pool: PgPool) -> Setup {
        Setup::with(pool, Options::default()).await
    }

    /// A setup whose reconciler has `options`.
    async fn with(pool: PgPool, options: Options) -> Setup {
        Setup::reaching(pool, options, None).await
    }

    /// A setup whose reconciler has `options` and reaches moto through a proxy that can lose
    /// EC2's answers ([`Ec2Proxy`]), with the SDK's retries as `ebb tick` has them.
    async fn through_proxy(pool: PgPool, options: Options) -> (Setup, Arc<Ec2Proxy>) {
        let (proxy, endpoint) = Ec2Proxy::start(&std::env::var("AWS_ENDPOINT_URL").unwrap()).await;
        (Setup::reaching(pool, options, Some(&endpoint)).await, proxy)
    }

    /// A setup whose reconciler has `options` and reaches moto at `endpoint`, when given.
    async fn reaching(pool: PgPool, options: Options, endpoint: Option<&str>) -> Setup {
        let store = Store::from_pool(pool);
        store.migrate().await.unwrap();
        let f = Fixture::new(REGION).await;
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("spot.yaml"), POLICY).unwrap();
        let policies = Arc::new(PolicySource::new(vec![dir.path().to_path_buf()]));
        let faults = Arc::new(Faults::default());
        let inner = match endpoint {
            Some(endpoint) => crate::faults::provider(&f, endpoint, Timeouts::default()).await,
            None => f.provider().await,
        };
        let provider = faulty(inner, f.ec2.clone(), &faults);
        let reconciler = Reconciler::new(provider, store.clone(), policies, options);
        let leader = store.try_lead("test").await.unwrap().unwrap();
        Setup {
            f,
            store,
            leader,
            reconciler,
            faults,
            t0: Utc::now(),
            _dir: dir,
        }
    }

    fn faults(&self) -> &Faults {
        &self.faults
    }

    /// Every call that changed something in EC2, in order: each must have an intent of its
    /// own in the audit log.
    fn changes(&self) -> Vec<&'static str> {
        let calls = self.reconciler.provider().calls();
        let changes = calls.into_iter().filter(|c| c.method.changes());
        changes.map(|c| c.method.name()).collect()
    }

    /// A running on-demand g5.xlarge of a training job that checkpointed five minutes before
    /// the tick `minutes` after the first.
    async fn trainer(&self, minutes: i64) -> String {
        self.trainer_hibernating(minutes, false).await
    }

    /// [`Setup::trainer`], launched with hibernation enabled or not.
    async fn trainer_hibernating(&self, minutes: i64, hibernation: bool) -> String {
        let checkpoint =
            (self.t0 + Duration::minutes(minutes - 5)).to_rfc3339_opts(SecondsFormat::Secs, true);
        self.f
            .launch(moto::Launch {
                instance_type: "g5.xlarge",
                managed: true,
                spot: false,
                hibernation,
                tags: &[
                    ("workload", "training"),
                    ("ebb:interruptible", "true"),
                    ("ebb:checkpoint-at", &checkpoint),
                ],
            })
            .await
    }

    /// [`Setup::trainer`], launched with `user_data` (base64).
    async fn trainer_with_user_data(&self, user_data: &str) -> String {
        let checkpoint =
            (self.t0 - Duration::minutes(5)).to_rfc3339_opts(SecondsFormat::Secs, true);
        let tags = [
            ("workload", "training"),
            ("ebb:interruptible", "true"),
            ("ebb:checkpoint-at", checkpoint.as_str()),
            ("ebb:managed", self.f.managed.as_str()),
        ];
        let mut spec = aws_sdk_ec2::types::TagSpecification::builder()
            .resource_type(aws_sdk_ec2::types::ResourceType::Instance);
        for (key, value) in tags {
            spec = spec.tags(Tag::builder().key(key).value(value).build());
        }
        let out = self
            .f
            .ec2
            .run_instances()
            .image_id(&self.f.image)
            .instance_type(aws_sdk_ec2::types::InstanceType::G5Xlarge)
            .min_count(1)
            .max_count(1)
            .user_data(user_data)
            .tag_specifications(spec.build())
            .send()
            .await
            .unwrap();
        out.instances()[0].instance_id().unwrap().to_string()
    }

    /// A tick `minutes` after the first; `false` when it hung at an injected crash.
    async fn tick(&mut self, minutes: i64) -> bool {
        let at = self.t0 + Duration::minutes(minutes);
        let crashed = self.faults.crashed.notified();
        tokio::select! {
            report = self.reconciler.tick(at, &mut self.leader) => {
                report.unwrap();
                true
            }
            () = crashed => false,
        }
    }

    async fn migration(&self, original: &str) -> MigrationRecord {
        let all = self.store.migrations().await.unwrap();
        let mut of: Vec<MigrationRecord> =
            all.into_iter().filter(|m| m.original == original).collect();
        assert_eq!(of.len(), 1, "one migration of {original}");
        of.remove(0)
    }

    /// Ticks a minute apart from `from` until the migration of `original` is in `state`.
    async fn until(&mut self, original: &str, from: i64, state: State) -> i64 {
        for minute in from..from + 12 {
            assert!(self.tick(minute).await, "tick at +{minute} min hung");
            if self.migration(original).await.state() == state {
                return minute;
            }
        }
        panic!(
            "{original} never reached {state:?}: {:#?}",
            self.migration(original).await
        );
    }

    /// EC2 takes the spot capacity of `id` back: terminated, with the spot reason.
    async fn reclaim(&self, id: &str) {
        self.f
            .ec2
            .terminate_instances()
            .instance_ids(id)
            .send()
            .await
            .unwrap();
        self.faults()
            .reclaimed
            .lock()
            .unwrap()
            .insert(id.to_string());
    }

    async fn ec2(&self, id: &str) -> aws_sdk_ec2::types::Instance {
        let out = self
            .f
            .ec2
            .describe_instances()
            .instance_ids(id)
            .send()
            .await
            .unwrap();
        out.reservations()[0].instances()[0].clone()
    }

    /// Every instance launched to replace `original`, terminated ones included.
    async fn replacements(&self, original: &str) -> Vec<aws_sdk_ec2::types::Instance> {
        let out = self
            .f
            .ec2
            .describe_instances()
            .filters(
                Filter::builder()
                    .name("tag:ebb:migrated-from")
                    .values(original)
                    .build(),
            )
            .send()
            .await
            .unwrap();
        out.reservations()
            .iter()
            .flat_map(|r| r.instances())
            .cloned()
            .collect()
    }

    async fn image_exists(&self, image: &str) -> bool {
        let out = self
            .f
            .ec2
            .describe_images()
            .filters(Filter::builder().name("image-id").values(image).build())
            .send()
            .await
            .unwrap();
        !out.images().is_empty()
    }

    /// Snapshots tagged as made by ebb from `original`.
    async fn marked_snapshots(&self, original: &str) -> Vec<String> {
        let out = self
            .f
            .ec2
            .describe_snapshots()
            .filters(
                Filter::builder()
                    .name("tag:ebb:image-of")
                    .values(original)
                    .build(),
            )
            .send()
            .await
            .unwrap();
        out.snapshots()
            .iter()
            .filter_map(|s| s.snapshot_id().map(str::to_string))
            .collect()
    }

    /// The one intent without an outcome.
    async fn open_intent(&self) -> ebb::store::AuditEntry {
        let mut open = self.store.pending_intents().await.unwrap();
        assert_eq!(open.len(), 1, "{open:#?}");
        open.remove(0)
    }

    /// The outcome of intent `seq`.
    async fn outcome_of(&self, seq: i64) -> NewAuditEntry {
        let rows = self.store.audit(&AuditFilter::default()).await.unwrap();
        let mut of = rows.into_iter().filter(|e| e.entry.intent_seq == Some(seq));
        of.next().expect("an outcome").entry
    }

    async fn audit_codes(&self, original: &str) -> Vec<(String, Outcome)> {
        let filter = AuditFilter {
            instance: Some(original.to_string()),
            ..AuditFilter::default()
        };
        self.store
            .audit(&filter)
            .await
            .unwrap()
            .into_iter()
            .map(|e| (e.entry.code.unwrap_or_default(), e.entry.outcome))
            .collect()
    }
}

fn state(i: &aws_sdk_ec2::types::Instance) -> &str {
    i.state().unwrap().name().unwrap().as_str()
}

fn tag<'a>(i: &'a aws_sdk_ec2::types::Instance, key: &str) -> Option<&'a str> {
    i.tags()
        .iter()
        .find(|t| t.key() == Some(key))
        .and_then(|t| t.value())
}

#[sqlx::test(migrations = false)]
async fn a_migration_moves_to_spot_alike_keeps_the_original_then_cleans_up(pool: PgPool) {
    let mut s = Setup::new(pool).await;
    let original = s.trainer(0).await;
    let before = s.ec2(&original).await;

    assert!(s.tick(0).await);
    assert_eq!(s.migration(&original).await.state(), State::Planned);
    assert_eq!(
        state(&s.ec2(&original).await),
        "running",
        "planning changes nothing"
    );
    let done = s.until(&original, 1, State::Done).await;

    let m = s.migration(&original).await;
    let spot_id = m.current.clone().unwrap();
    let spot = s.ec2(&spot_id).await;
    assert_eq!(state(&spot), "running");
    assert_eq!(spot.instance_lifecycle().map(|l| l.as_str()), Some("spot"));
    assert_eq!(spot.subnet_id(), before.subnet_id());
    let groups = |i: &aws_sdk_ec2::types::Instance| -> Vec<String> {
        i.security_groups()
            .iter()
            .map(|g| g.group_id().unwrap().to_string())
            .collect()
    };
    assert_eq!(groups(&spot), groups(&before));
    for key in ["workload", "ebb:interruptible", "ebb:managed"] {
        assert_eq!(tag(&spot, key), tag(&before, key), "{key}");
    }
    assert_eq!(tag(&spot, "ebb:migrated-from"), Some(original.as_str()));
    assert_eq!(spot.image_id(), m.image.as_deref());
    assert_eq!(m.market.as_str(), "spot");
    assert_eq!(s.replacements(&original).await.len(), 1);
    // The image's snapshots are marked as ebb's, for the IAM policy's delete condition.
    assert!(!s.marked_snapshots(&original).await.is_empty());

    // The original is kept, stopped and marked, and the rules leave it alone.
    let kept = s.ec2(&original).await;
    assert_eq!(state(&kept), "stopped");
    assert_eq!(tag(&kept, "ebb:migrating"), Some(m.id.to_string().as_str()));
    assert!(s.tick(done + 60).await);
    assert_eq!(state(&s.ec2(&original).await), "stopped");
    assert!(s
        .migration(&original)
        .await
        .original_terminated_at
        .is_none());

    // After keep_original_for it is terminated; the replacement keeps running.
    assert!(s.tick(done + 6 * 60).await);
    assert_eq!(state(&s.ec2(&original).await), "terminated");
    assert_eq!(state(&s.ec2(&spot_id).await), "running");
    let m = s.migration(&original).await;
    assert!(m.original_terminated_at.is_some());
    assert!(ebb::spot::savings(&m, s.t0 + Duration::minutes(done + 6 * 60)) > 0.0);

    let codes = s.audit_codes(&original).await;
    for (code, outcome) in [
        ("spot_savings", Outcome::Succeeded),
        ("spot_stop", Outcome::Intent),
        ("spot_stop", Outcome::Succeeded),
        ("spot_image", Outcome::Succeeded),
        ("spot_launch", Outcome::Succeeded),
        ("spot_running", Outcome::Succeeded),
        ("spot_verified", Outcome::Succeeded),
        ("spot_cleanup", Outcome::Succeeded),
    ] {
        assert!(
            codes.contains(&(code.to_string(), outcome)),
            "{code} {outcome:?} in {codes:?}"
        );
    }
    assert!(matches!(
        s.store.verify_audit().await.unwrap(),
        Verification::Intact { .. }
    ));
}

#[sqlx::test(migrations = false)]
async fn a_crash_after_any_step_resumes_without_a_second_replacement(pool: PgPool) {
    let mut s = Setup::new(pool).await;
    for call in ["tag", "stop", "create_image", "launch", "terminate"] {
        // Each scenario's ticks start well after the last one's ended.
        let start = s.store.migrations().await.unwrap().len() as i64 * 600;
        let original = s.trainer(start).await;
        assert!(s.tick(start).await);
        *s.faults().crash_after.lock().unwrap() = Some(call);
        let mut minute = start + 1;
        let mut crashed = false;
        // Ticks until done; the cleanup crash needs keep_original_for to pass.
        for _ in 0..12 {
            crashed |= !s.tick(minute).await;
            if s.migration(&original).await.state() == State::Done {
                break;
            }
            minute += 1;
        }
        if call == "terminate" {
            assert!(!crashed);
            crashed = !s.tick(minute + 6 * 60).await;
            assert!(s.tick(minute + 6 * 60 + 1).await);
            assert_eq!(state(&s.ec2(&original).await), "terminated");
            assert!(s
                .migration(&original)
                .await
                .original_terminated_at
                .is_some());
        }
        assert!(crashed, "{call}: the crash was never reached");
        let m = s.migration(&original).await;
        assert_eq!(m.state(), State::Done, "{call}: {m:#?}");
        let replacements = s.replacements(&original).await;
        assert_eq!(replacements.len(), 1, "{call}: one replacement");
        let images =
            s.f.ec2
                .describe_images()
                .owners("self")
                .filters(
                    Filter::builder()
                        .name("name")
                        .values(format!("ebb-{original}-*"))
                        .build(),
                )
                .send()
                .await
                .unwrap();
        assert_eq!(images.images().len(), 1, "{call}: one image");
        assert_eq!(state(&replacements[0]), "running", "{call}");
        // Every intent has an outcome.
        assert!(
            s.store.pending_intents().await.unwrap().is_empty(),
            "{call}"
        );
    }
}

/// A lost answer to a step of a migration is unknown, not failed (issue 27), through the AWS
/// adapter: a proxy in front of moto forwards the original's StopInstances, then the spot
/// RunInstances, and drops each answer (the launch's retries answered 500, as EC2 may). Each
/// intent stays open and nothing is done to the move within the in-flight window; the first
/// tick past it resolves the intent `succeeded` from what EC2 shows (the original stopped, the
/// instance carrying the launch's `ebb:launch` tag, recorded as the replacement), and the move
/// completes with one replacement, the stop and the launch each made once.
#[sqlx::test(migrations = false)]
async fn a_stop_and_a_launch_whose_answers_are_lost_are_resolved_from_ec2_after_the_window(
    pool: PgPool,
) {
    const IN_FLIGHT: i64 = 5;
    let options = Options {
        in_flight_for: Duration::minutes(IN_FLIGHT),
        ..Options::default()
    };
    let (mut s, proxy) = Setup::through_proxy(pool, options).await;
    // moto stamps a stop with the real time: the ticks run before it.
    s.t0 = (Utc::now() - Duration::hours(1)).trunc_subsecs(0);
    let original = s.trainer(0).await;
    assert!(s.tick(0).await);
    assert_eq!(s.migration(&original).await.state(), State::Planned);

    // The stop is carried out, its answer dropped: unknown, its intent open.
    proxy.inject(Injection {
        action: "StopInstances",
        fault: Fault::AnswerDropped,
        times: 1,
    });
    assert!(s.tick(1).await);
    assert_eq!(
        proxy.retire().len(),
        1,
        "the stop's answer was never dropped"
    );
    assert_eq!(proxy.calls("StopInstances", &original), 1);
    assert_eq!(state(&s.ec2(&original).await), "stopped");
    let stop = s.open_intent().await;
    assert!(stop.entry.reason.contains("stop "), "{stop:?}");
    // Inside the window: nothing is done to the move.
    for minute in [2, 4, 5] {
        assert!(s.tick(minute).await);
        assert_eq!(s.open_intent().await.seq, stop.seq, "+{minute} min");
        assert_eq!(s.migration(&original).await.state(), State::Planned);
    }
    assert_eq!(proxy.requests("StopInstances"), 1);
    assert_eq!(proxy.requests("CreateImage"), 0);
    // Past it: resolved from the original's state, and the move goes on to its image.
    assert!(s.tick(6).await);
    let resolved = s.outcome_of(stop.seq).await;
    assert_eq!(resolved.outcome, Outcome::Succeeded, "{resolved:?}");
    assert_eq!(resolved.at, s.t0 + Duration::minutes(6));
    assert_ne!(s.migration(&original).await.state(), State::Planned);
    assert_eq!(proxy.requests("StopInstances"), 1, "stopped again");

    // The launch is carried out, its answer dropped, and its retries answered 500.
    proxy.inject(Injection {
        action: "RunInstances",
        fault: Fault::AnswerDropped,
        times: 1,
    });
    proxy.inject(Injection {
        action: "RunInstances",
        fault: Fault::ServerError,
        times: usize::MAX,
    });
    let mut minute = 7;
    while proxy.requests("RunInstances") == 0 {
        assert!(minute < 20, "never launched");
        assert!(s.tick(minute).await);
        minute += 1;
    }
    proxy.clear();
    let attempts = proxy.requests("RunInstances");
    let made = s.replacements(&original).await;
    assert_eq!(made.len(), 1, "moto made one instance");
    let launch = s.open_intent().await;
    assert!(launch.entry.reason.contains("launch spot"), "{launch:?}");
    let launched_at = minute - 1;
    for minute in launched_at + 1..launched_at + IN_FLIGHT {
        assert!(s.tick(minute).await);
        assert_eq!(s.open_intent().await.seq, launch.seq, "+{minute} min");
        assert_eq!(s.migration(&original).await.current, None);
    }
    // Past it: the instance carrying the launch's tag is the replacement.
    assert!(s.tick(launched_at + IN_FLIGHT).await);
    let resolved = s.outcome_of(launch.seq).await;
    assert_eq!(resolved.outcome, Outcome::Succeeded, "{resolved:?}");
    let replacement = made[0].instance_id().unwrap().to_string();
    let m = s.migration(&original).await;
    assert_eq!(m.current.as_deref(), Some(replacement.as_str()));
    s.until(&original, launched_at + IN_FLIGHT + 1, State::Done)
        .await;

    let m = s.migration(&original).await;
    assert_eq!(m.current.as_deref(), Some(replacement.as_str()));
    assert_eq!(s.replacements(&original).await.len(), 1, "one replacement");
    assert_eq!(proxy.requests("RunInstances"), attempts, "launched again");
    assert_eq!(proxy.requests("StopInstances"), 1);
    assert!(s.store.pending_intents().await.unwrap().is_empty());
    let failed = AuditFilter {
        outcome: Some(Outcome::Failed),
        ..AuditFilter::default()
    };
    assert!(s.store.audit(&failed).await.unwrap().is_empty());
    assert!(matches!(
        s.store.verify_audit().await.unwrap(),
        Verification::Intact { .. }
    ));
    eprintln!(
        "spot lost answers: StopInstances 1 request, 1 carried out; RunInstances {attempts} request(s), 1 carried out; \
         each intent open through the {IN_FLIGHT}-minute window, then succeeded; 1 replacement, failed 0"
    );
}

/// Every call that changes EC2 has an intent of its own and exactly one outcome: the tag and
/// the stop of the original are two actions, and so are the image's deregistration and the
/// deletion of each of its snapshots.
async fn assert_one_intent_per_call(s: &Setup, original: &str) {
    let filter = AuditFilter {
        instance: Some(original.to_string()),
        ..AuditFilter::default()
    };
    let rows = s.store.audit(&filter).await.unwrap();
    let intents: Vec<&ebb::store::AuditEntry> = rows
        .iter()
        .filter(|e| e.entry.outcome == Outcome::Intent)
        .collect();
    let calls = s.changes();
    let reasons: Vec<&str> = intents.iter().map(|e| e.entry.reason.as_str()).collect();
    assert_eq!(
        intents.len(),
        calls.len(),
        "calls {calls:?}, intents {reasons:#?}"
    );
    for intent in intents {
        let outcomes = rows
            .iter()
            .filter(|e| e.entry.intent_seq == Some(intent.seq))
            .count();
        assert_eq!(outcomes, 1, "{}", intent.entry.reason);
    }
}

#[sqlx::test(migrations = false)]
async fn every_migration_call_is_an_action_of_its_own(pool: PgPool) {
    let mut s = Setup::new(pool).await;
    let original = s.trainer(0).await;
    *s.faults().launch_failures.lock().unwrap() = 1;
    assert!(s.tick(0).await);
    s.until(&original, 1, State::RolledBack).await;
    let calls = s.changes();
    assert_eq!(&calls[..2], ["tag", "stop"], "{calls:?}");
    for call in ["deregister_image", "delete_snapshot", "untag", "start"] {
        assert!(calls.contains(&call), "{call} in {calls:?}");
    }
    assert_one_intent_per_call(&s, &original).await;
    let m = s.migration(&original).await;
    assert!(m.image.is_none() && m.snapshots.is_empty(), "{m:#?}");
    assert!(s.marked_snapshots(&original).await.is_empty());
}

/// A crash right after the image is deregistered, or after a snapshot is deleted, leaves no
/// snapshot behind: the row keeps the ones not deleted yet, and the next tick goes on.
#[sqlx::test(migrations = false)]
async fn a_crash_between_deregistering_and_deleting_the_snapshots_leaks_none(pool: PgPool) {
    let mut s = Setup::new(pool).await;
    for call in ["deregister_image", "delete_snapshot"] {
        let start = s.store.migrations().await.unwrap().len() as i64 * 600;
        let original = s.trainer(start).await;
        *s.faults().launch_failures.lock().unwrap() = 1;
        *s.faults().crash_after.lock().unwrap() = Some(call);
        let mut crashed = false;
        let mut minute = start;
        while s.store.migrations().await.unwrap().len() as i64 * 600 <= start
            || s.migration(&original).await.state() != State::RolledBack
        {
            assert!(minute < start + 12, "{call}: never rolled back");
            crashed |= !s.tick(minute).await;
            minute += 1;
        }
        assert!(crashed, "{call}: the crash was never reached");
        let m = s.migration(&original).await;
        assert!(
            m.image.is_none() && m.snapshots.is_empty(),
            "{call}: {m:#?}"
        );
        assert!(
            s.marked_snapshots(&original).await.is_empty(),
            "{call}: every snapshot is deleted"
        );
        assert_eq!(state(&s.ec2(&original).await), "running", "{call}");
    }
}

/// The first launch's answer is lost; at the next try EC2's listing does not show it yet and a
/// cheaper offer changed the type, so EC2 refuses the same client token with other settings.
/// The launch made first is looked for again and adopted as it was launched: one replacement,
/// tracked, and the move goes on.
#[sqlx::test(migrations = false)]
async fn an_ambiguous_launch_is_found_and_adopted_never_left_untracked(pool: PgPool) {
    let mut s = Setup::new(pool).await;
    let original = s.trainer(0).await;
    assert!(s.tick(0).await);
    *s.faults().crash_after.lock().unwrap() = Some("launch");
    let mut minute = 1;
    while s.tick(minute).await {
        minute += 1;
        assert!(minute < 12, "the launch never happened");
    }
    let made = s.replacements(&original).await;
    assert_eq!(made.len(), 1);
    let first = made[0].instance_id().unwrap().to_string();
    let first_type = made[0].instance_type().unwrap().as_str().to_string();
    let m = s.migration(&original).await;
    assert_eq!(m.current, None, "its answer was lost");

    // The other type of the rule is the cheapest now, and EC2's listing lags behind the launch
    // at both look-ups by tag: the lost answer's resolution, and the step's.
    *s.faults().tag_lag.lock().unwrap() = 2;
    let other = if first_type == "g5.xlarge" {
        "g5.2xlarge"
    } else {
        "g5.xlarge"
    };
    let prices = [(first_type.clone(), 1000.0), (other.to_string(), 0.01)];
    *s.faults().type_price.lock().unwrap() = prices.into_iter().collect();
    assert!(s.tick(minute + 1).await);
    let m = s.migration(&original).await;
    assert_eq!(m.state(), State::Imaging, "not rolled back: {m:#?}");
    assert!(m
        .steps
        .0
        .last()
        .unwrap()
        .detail
        .contains("IdempotentParameterMismatch"));
    s.until(&original, minute + 2, State::Done).await;

    let m = s.migration(&original).await;
    assert_eq!(m.current.as_deref(), Some(first.as_str()));
    assert_eq!(
        m.instance_type.as_deref(),
        Some(first_type.as_str()),
        "as launched"
    );
    assert_eq!(
        s.replacements(&original).await.len(),
        1,
        "never launched twice"
    );
    assert_eq!(state(&s.ec2(&first).await), "running");
    assert!(s.store.pending_intents().await.unwrap().is_empty());
}

/// A launch whose answer was lost, then a protection that rolls the move back before the
/// launch is found: the replacement runs, and no migration tracks it. `migration_artifacts`
/// and `spot::orphans::orphans` list it as ebb's lost launch (its launch id and ebb's client
/// token), and list an instance and an image forged with the migration's tags as orphans that
/// ebb cannot prove it made.
#[sqlx::test(migrations = false)]
async fn orphans_list_ebbs_lost_launch_and_report_forgeries(pool: PgPool) {
    let mut s = Setup::new(pool).await;
    let original = s.trainer(0).await;
    assert!(s.tick(0).await);
    *s.faults().crash_after.lock().unwrap() = Some("launch");
    let mut minute = 1;
    while s.tick(minute).await {
        minute += 1;
        assert!(minute < 12, "the launch never happened");
    }
    let lost = s.replacements(&original).await[0]
        .instance_id()
        .unwrap()
        .to_string();
    s.f.ec2
        .create_tags()
        .resources(&original)
        .tags(Tag::builder().key("ebb:skip").value("true").build())
        .send()
        .await
        .unwrap();
    s.until(&original, minute + 1, State::RolledBack).await;
    let m = s.migration(&original).await;
    assert_eq!(m.current, None);
    assert_eq!(
        state(&s.ec2(&lost).await),
        "running",
        "left running: {m:#?}"
    );

    let launch = format!("{original}-{}-1", m.id);
    let forged = moto::launch_with(
        &s.f.ec2,
        &s.f.image,
        &s.f.managed,
        moto::Launch {
            instance_type: "g5.xlarge",
            managed: true,
            spot: false,
            hibernation: false,
            tags: &[
                ("ebb:launch", &launch),
                ("ebb:migration", &m.id.to_string()),
                ("ebb:migrated-from", &original),
            ],
        },
    )
    .await;
    let image =
        s.f.ec2
            .create_image()
            .instance_id(&forged)
            .name(format!("forged-{original}"))
            .tag_specifications(
                aws_sdk_ec2::types::TagSpecification::builder()
                    .resource_type(aws_sdk_ec2::types::ResourceType::Image)
                    .tags(Tag::builder().key("ebb:migration").value("999999").build())
                    .build(),
            )
            .send()
            .await
            .unwrap()
            .image_id()
            .unwrap()
            .to_string();

    let found = s
        .reconciler
        .provider()
        .migration_artifacts(REGION)
        .await
        .unwrap();
    let migrations = s.store.migrations().await.unwrap();
    let orphans = ebb::spot::orphans::orphans(found, &migrations, Utc::now());
    let of = |id: &str| orphans.iter().find(|o| o.artifact.id == id);
    let l = of(&lost).expect("the lost launch is listed");
    assert!(l.lost, "{l:?}");
    assert!(l.why.contains(&launch), "{}", l.why);
    let f = of(&forged).expect("the forged instance is listed");
    assert!(!f.lost, "never ebb's to act on: {f:?}");
    assert!(f.why.contains("client token"), "{}", f.why);
    let i = of(&image).expect("the forged image is listed");
    assert!(!i.lost);
    assert!(of(&original).is_none(), "the original is no launch");

    // The leader's next sweep (hourly) terminates ebb's lost launch, as an action, and leaves
    // the forged instance alone.
    let at = s.t0 + Duration::minutes(minute + 61);
    let report = s.reconciler.tick(at, &mut s.leader).await.unwrap();
    let counted = report.orphans.as_ref().expect("the sweep ran");
    assert!(
        counted["instance"] >= 2 && counted["image"] >= 1,
        "{counted:?}"
    );
    let metrics = ebb::metrics::Metrics::default();
    report.record(&metrics, std::time::Duration::ZERO);
    let text = metrics.encode();
    assert!(
        text.contains("ebb_spot_orphans{kind=\"snapshot\"}"),
        "{text}"
    );
    assert_eq!(state(&s.ec2(&lost).await), "terminated");
    assert_eq!(state(&s.ec2(&forged).await), "running");
    let codes = s.audit_codes(&original).await;
    for outcome in [Outcome::Intent, Outcome::Succeeded] {
        assert!(
            codes.contains(&("spot_orphan".to_string(), outcome)),
            "{codes:?}"
        );
    }
    assert!(s.store.pending_intents().await.unwrap().is_empty());
    let m = s.migration(&original).await;
    assert!(m.steps.0.last().unwrap().detail.contains(&lost), "{m:#?}");
}

/// `ebb spot-moves --orphans`, the built binary against moto and Postgres: an image tagged as a
/// migration's that no migration keeps is listed, not ebb's to act on, and the command exits 1.
#[sqlx::test(migrations = false)]
async fn ebb_migrations_orphans_lists_what_no_migration_tracks(pool: PgPool) {
    let store = Store::from_pool(pool.clone());
    store.migrate().await.unwrap();
    let f = Fixture::new("me-south-1").await;
    let source = f
        .launch(moto::Launch {
            instance_type: "g5.xlarge",
            managed: true,
            spot: false,
            hibernation: false,
            tags: &[],
        })
        .await;
    let image = f
        .ec2
        .create_image()
        .instance_id(&source)
        .name(format!("stray-{source}"))
        .tag_specifications(
            aws_sdk_ec2::types::TagSpecification::builder()
                .resource_type(aws_sdk_ec2::types::ResourceType::Image)
                .tags(Tag::builder().key("ebb:migration").value("7").build())
                .build(),
        )
        .send()
        .await
        .unwrap()
        .image_id()
        .unwrap()
        .to_string();
    let base = std::env::var("DATABASE_URL").expect("scripts/test sets DATABASE_URL");
    let (server, _) = base.rsplit_once('/').unwrap();
    let url = format!(
        "{server}/{}",
        pool.connect_options().get_database().unwrap()
    );
    let run = |format: &str| {
        std::process::Command::new(env!("CARGO_BIN_EXE_ebb"))
            .args(["spot-moves", "--orphans", "--format", format])
            .env("DATABASE_URL", &url)
            .env("EBB_REGIONS", f.region)
            .output()
            .unwrap()
    };
    let o = run("json");
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{stderr}");
    let listed: Vec<serde_json::Value> = serde_json::from_slice(&o.stdout).unwrap();
    let it = listed
        .iter()
        .find(|o| o["id"] == image.as_str())
        .unwrap_or_else(|| panic!("{image} not in {listed:#?}"));
    assert_eq!(it["kind"], "image");
    assert_eq!(it["lost"], false);
    assert_eq!(it["tags"]["ebb:migration"], "7");
    let table = String::from_utf8_lossy(&run("table").stdout).to_string();
    assert!(
        table.contains(&image) && table.contains("no migration keeps this image"),
        "{table}"
    );
}

#[sqlx::test(migrations = false)]
async fn a_failed_launch_rolls_back_and_the_original_runs_again(pool: PgPool) {
    let mut s = Setup::new(pool).await;
    let original = s.trainer(0).await;
    *s.faults().launch_failures.lock().unwrap() = 1;
    assert!(s.tick(0).await);
    s.until(&original, 1, State::RolledBack).await;

    let m = s.migration(&original).await;
    assert!(
        m.error
            .as_deref()
            .unwrap()
            .contains("InsufficientInstanceCapacity"),
        "{m:#?}"
    );
    let back = s.ec2(&original).await;
    assert_eq!(state(&back), "running");
    assert_eq!(tag(&back, "ebb:migrating"), None);
    assert!(s.replacements(&original).await.is_empty());
    assert!(m.image.is_none());
    let image = m
        .steps
        .0
        .iter()
        .find(|st| st.state == State::Imaging)
        .unwrap();
    let image_id = image.detail.rsplit(' ').next().unwrap();
    assert!(
        !s.image_exists(image_id).await,
        "the image {image_id} is deleted"
    );
    assert!(
        s.marked_snapshots(&original).await.is_empty(),
        "its snapshots are deleted"
    );
    assert!(s
        .audit_codes(&original)
        .await
        .contains(&("spot_rollback".to_string(), Outcome::Succeeded)));
    // Not planned again at once.
    assert!(s.tick(30).await);
    assert_eq!(s.store.migrations().await.unwrap().len(), 1);
}

#[sqlx::test(migrations = false)]
async fn a_migration_that_no_longer_saves_enough_when_it_starts_changes_nothing(pool: PgPool) {
    let mut s = Setup::new(pool).await;
    let original = s.trainer(0).await;
    assert!(s.tick(0).await);
    assert_eq!(s.migration(&original).await.state(), State::Planned);
    // Spot now costs 90 % of on-demand (g5.xlarge: $1.006/h).
    *s.faults().spot_price.lock().unwrap() = Some(0.905);
    assert!(s.tick(1).await);
    ended_having_changed_nothing(&s, &original, "below min_savings").await;
}

#[sqlx::test(migrations = false)]
async fn an_original_launched_with_hibernation_enabled_is_never_imaged(pool: PgPool) {
    let mut s = Setup::new(pool).await;
    let original = s.trainer_hibernating(0, true).await;
    assert!(s.tick(0).await);
    assert_eq!(s.migration(&original).await.state(), State::Planned);
    assert!(s.tick(1).await);
    ended_having_changed_nothing(&s, &original, "hibernation enabled").await;
}

/// Checks that the move of `original` ended `rolled_back`, saying `why`, having changed
/// nothing: the original runs, untagged, never stopped and never imaged.
async fn ended_having_changed_nothing(s: &Setup, original: &str, why: &str) {
    let m = s.migration(original).await;
    assert_eq!(m.state(), State::RolledBack);
    assert!(m.error.as_deref().unwrap().contains(why), "{m:#?}");
    let untouched = s.ec2(original).await;
    assert_eq!(state(&untouched), "running");
    assert_eq!(tag(&untouched, "ebb:migrating"), None);
    assert!(!s
        .audit_codes(original)
        .await
        .iter()
        .any(|(code, _)| code == "spot_stop"));
    assert!(s
        .reconciler
        .provider()
        .ids_of(Method::CreateImage)
        .is_empty());
}

#[sqlx::test(migrations = false)]
async fn reclaims_relaunch_on_spot_elsewhere_then_fall_back_to_on_demand(pool: PgPool) {
    let mut s = Setup::new(pool).await;
    let original = s.trainer(0).await;
    assert!(s.tick(0).await);
    let mut minute = s.until(&original, 1, State::Done).await;
    let first = s.migration(&original).await;
    let first_id = first.current.clone().unwrap();

    // EC2 reclaims the spot instance.
    s.reclaim(&first_id).await;
    minute = s.until(&original, minute + 1, State::Launching).await;
    let m = s.migration(&original).await;
    assert_eq!(m.interruptions.0.len(), 1);
    let second_id = m.current.clone().unwrap();
    assert_ne!(second_id, first_id);
    // Not the reclaimed type in the reclaimed zone.
    assert_ne!(
        (m.instance_type.clone(), m.zone.clone()),
        (first.instance_type.clone(), first.zone.clone())
    );
    assert_eq!(m.market.as_str(), "spot");
    minute = s.until(&original, minute + 1, State::Done).await;
    let second = s.ec2(&second_id).await;
    assert_eq!(
        second.instance_lifecycle().map(|l| l.as_str()),
        Some("spot")
    );
    assert_eq!(second.image_id(), first.image.as_deref());

    // A second reclaim within 24 h reaches max_interruptions: on-demand from now on.
    s.reclaim(&second_id).await;
    minute = s.until(&original, minute + 1, State::Launching).await;
    s.until(&original, minute + 1, State::Done).await;
    let m = s.migration(&original).await;
    assert_eq!(m.market.as_str(), "on-demand");
    assert_eq!(m.interruptions.0.len(), 2);
    let third = s.ec2(m.current.as_deref().unwrap()).await;
    assert_eq!(state(&third), "running");
    assert_eq!(third.instance_lifecycle(), None, "on-demand");
    assert_eq!(third.instance_type().unwrap().as_str(), "g5.xlarge");
    assert_eq!(s.replacements(&original).await.len(), 3);
    let codes = s.audit_codes(&original).await;
    for code in ["spot_interrupted", "spot_relaunch", "spot_fallback"] {
        assert!(codes.iter().any(|(c, _)| c == code), "{code} in {codes:?}");
    }
}

#[sqlx::test(migrations = false)]
async fn a_pool_reclaimed_within_avoid_reclaimed_for_is_skipped_and_the_launch_says_why(
    pool: PgPool,
) {
    let mut s = Setup::new(pool).await;
    let original = s.trainer(0).await;
    let before = s.ec2(&original).await;
    let zone = before
        .placement()
        .and_then(|p| p.availability_zone())
        .unwrap()
        .to_string();
    // Without history the move goes to g5.xlarge in the original's zone (every moto spot price
    // is the same; see the first test). The queue told ebb that EC2 reclaimed a g5.xlarge
    // there ten minutes ago: within avoid_reclaimed_for (1 h by default).
    sqlx::query(
        "INSERT INTO pool_events (at, kind, account, region, zone, instance_type, instance)
         VALUES ($1, 'interruption', '', $2, $3, 'g5.xlarge', 'i-0someone')",
    )
    .bind(s.t0 - Duration::minutes(10))
    .bind(REGION)
    .bind(&zone)
    .execute(s.store.pool())
    .await
    .unwrap();
    assert!(s.tick(0).await);
    s.until(&original, 1, State::Done).await;
    let m = s.migration(&original).await;
    assert_ne!(
        (m.instance_type.as_deref(), m.zone.as_deref()),
        (Some("g5.xlarge"), Some(zone.as_str())),
        "the reclaimed pool is skipped"
    );
    let reason: String = sqlx::query_scalar(
        "SELECT reason FROM audit_log
         WHERE action = 'migrate_to_spot' AND outcome = 'intent' AND reason LIKE '%: launch spot%'",
    )
    .fetch_one(s.store.pool())
    .await
    .unwrap();
    assert!(reason.contains("ranked by expected cost: "), "{reason}");
    assert!(reason.contains("/h expected"), "{reason}");
    assert!(
        reason.contains(&format!("g5.xlarge in {zone} reclaimed 1")),
        "{reason}"
    );
}

#[sqlx::test(migrations = false)]
async fn with_placement_scores_a_well_scored_zone_wins_over_the_original_one(pool: PgPool) {
    let mut s = Setup::new(pool).await;
    std::fs::write(
        s._dir.path().join("spot.yaml"),
        format!("{POLICY}      placement_scores: true\n"),
    )
    .unwrap();
    let original = s.trainer(0).await;
    let own = s
        .ec2(&original)
        .await
        .placement()
        .and_then(|p| p.availability_zone())
        .unwrap()
        .to_string();
    let other = if own == "us-east-1b" {
        "us-east-1c"
    } else {
        "us-east-1b"
    };
    // Every moto spot price is the same, and no pool has a history: EC2 scores every pool 1
    // but g5.xlarge in `other`, which it scores 10 (moto has no GetSpotPlacementScores).
    let asked = Arc::new(Mutex::new(0));
    let count = asked.clone();
    let best = other.to_string();
    s.reconciler
        .provider()
        .before(Method::PlacementScores, move |call| {
            *count.lock().unwrap() += 1;
            let Call::PlacementScores { types, .. } = call else {
                return None;
            };
            let zones = ["us-east-1a", "us-east-1b", "us-east-1c", "us-east-1d"];
            let scores = types
                .iter()
                .flat_map(|t| zones.iter().map(move |z| (t.clone(), z.to_string())))
                .map(|(t, z)| {
                    let score = if t == "g5.xlarge" && z == best { 10 } else { 1 };
                    ((t, z), score)
                })
                .collect();
            Some(Answer::Scores(Ok(scores)))
        });
    assert!(s.tick(0).await);
    s.until(&original, 1, State::Done).await;
    let m = s.migration(&original).await;
    assert!(*asked.lock().unwrap() >= 1, "the scores were asked for");
    assert_eq!(
        (m.instance_type.as_deref(), m.zone.as_deref()),
        (Some("g5.xlarge"), Some(other))
    );
}

#[sqlx::test(migrations = false)]
async fn a_rebalance_recommendation_from_the_queue_is_kept_in_its_pools_history(pool: PgPool) {
    let mut s = Setup::new(pool).await;
    let original = s.trainer(0).await;
    assert!(s.tick(0).await);
    s.until(&original, 1, State::Done).await;
    let m = s.migration(&original).await;
    let current = m.current.clone().unwrap();

    let sqs = aws_sdk_sqs::Client::new(&moto::emulator(REGION).await);
    let name = format!("ebb-spot-rebalance-{}", s.f.managed);
    let url = sqs
        .create_queue()
        .queue_name(&name)
        .send()
        .await
        .unwrap()
        .queue_url()
        .unwrap()
        .to_string();
    let event = serde_json::json!({
        "version": "0",
        "id": "6a7e8feb-0000-0000-0000-000000000000",
        "detail-type": "EC2 Instance Rebalance Recommendation",
        "source": "aws.ec2",
        "account": "123456789012",
        "time": s.t0.to_rfc3339_opts(SecondsFormat::Secs, true),
        "region": REGION,
        "resources": [format!("arn:aws:ec2:{REGION}a:instance/{current}")],
        "detail": {"instance-id": current}
    });
    let mut forged = event.clone();
    forged["source"] = "my.app".into();
    for body in [event.to_string(), forged.to_string()] {
        sqs.send_message()
            .queue_url(&url)
            .message_body(body)
            .send()
            .await
            .unwrap();
    }
    let accepted = Accepted::new(vec![REGION.to_string()], &url, &[]);
    let queue = InterruptionQueue::new(sqs.clone(), url.clone(), accepted);
    let batch = queue.receive().await.unwrap();
    assert_eq!(batch.warnings.len(), 1, "the forged message is dropped");
    let w = &batch.warnings[0];
    assert_eq!(w.signal, Signal::Rebalance);
    assert_eq!(queue.account(), Some(w.account.as_str()), "moto's account");
    // As serve keeps it: ebb's own account is empty.
    let kept = s
        .store
        .record_pool_events(&[QueuedPoolEvent {
            kind: PoolEventKind::Rebalance,
            instance: w.instance.clone(),
            region: w.region.clone(),
            account: String::new(),
            at: w.at,
        }])
        .await
        .unwrap();
    assert_eq!(kept, 1);
    // Not a warning: the migration does not relaunch for it.
    assert!(s
        .store
        .spot_warnings(std::slice::from_ref(&current))
        .await
        .unwrap()
        .is_empty());
    let pools = s.store.pool_history(s.t0).await.unwrap().summaries(s.t0);
    let pool = pools
        .iter()
        .find(|p| p.rebalances.day == 1)
        .unwrap_or_else(|| panic!("{pools:#?}"));
    assert_eq!(Some(&pool.pool.zone), m.zone.as_ref());
    assert_eq!(Some(&pool.pool.instance_type), m.instance_type.as_ref());
}

#[sqlx::test(migrations = false)]
async fn a_replacement_terminated_by_a_person_ends_the_migration(pool: PgPool) {
    let mut s = Setup::new(pool).await;
    let original = s.trainer(0).await;
    assert!(s.tick(0).await);
    let minute = s.until(&original, 1, State::Done).await;
    let m = s.migration(&original).await;
    s.f.ec2
        .terminate_instances()
        .instance_ids(m.current.as_deref().unwrap())
        .send()
        .await
        .unwrap();
    assert!(s.tick(minute + 1).await);
    let m = s.migration(&original).await;
    assert!(m.ended_at.is_some(), "{m:#?}");
    assert_eq!(
        s.replacements(&original).await.len(),
        1,
        "nothing relaunched"
    );
    // The original is the rules' again: stopped, no longer marked.
    let kept = s.ec2(&original).await;
    assert_eq!(state(&kept), "stopped");
    assert_eq!(tag(&kept, "ebb:migrating"), None);
}

#[sqlx::test(migrations = false)]
async fn an_original_someone_started_again_is_not_terminated(pool: PgPool) {
    let mut s = Setup::new(pool).await;
    let original = s.trainer(0).await;
    assert!(s.tick(0).await);
    let done = s.until(&original, 1, State::Done).await;
    s.f.ec2
        .start_instances()
        .instance_ids(&original)
        .send()
        .await
        .unwrap();
    assert!(s.tick(done + 6 * 60).await);
    let back = s.ec2(&original).await;
    assert_eq!(state(&back), "running");
    assert_eq!(tag(&back, "ebb:migrating"), None);
    let m = s.migration(&original).await;
    assert!(m.original_returned_at.is_some(), "{m:#?}");
    assert!(m.original_terminated_at.is_none());
    // Later ticks leave it alone too.
    assert!(s.tick(done + 6 * 60 + 1).await);
    assert_eq!(state(&s.ec2(&original).await), "running");
}

#[sqlx::test(migrations = false)]
async fn an_override_made_after_the_plan_keeps_the_instance_where_it_is(pool: PgPool) {
    let mut s = Setup::new(pool).await;
    let original = s.trainer(0).await;
    assert!(s.tick(0).await);
    assert_eq!(s.migration(&original).await.state(), State::Planned);
    s.store
        .create_override(
            &original,
            s.t0 + Duration::hours(8),
            "final epoch, do not touch",
            "li",
            s.t0,
        )
        .await
        .unwrap();
    assert!(s.tick(1).await);
    let m = s.migration(&original).await;
    assert_eq!(m.state(), State::RolledBack);
    assert!(m.error.as_deref().unwrap().contains("override"), "{m:#?}");
    assert_eq!(state(&s.ec2(&original).await), "running");
    assert!(s.replacements(&original).await.is_empty());
}

#[sqlx::test(migrations = false)]
async fn a_warning_from_the_queue_relaunches_before_the_reclaim(pool: PgPool) {
    let mut s = Setup::new(pool).await;
    let original = s.trainer(0).await;
    assert!(s.tick(0).await);
    let minute = s.until(&original, 1, State::Done).await;
    let warned = s.migration(&original).await.current.unwrap();

    // EventBridge puts the warning on the queue; ebb reads and records it.
    let sqs = aws_sdk_sqs::Client::new(&moto::emulator(REGION).await);
    let name = format!("ebb-spot-interruptions-{}", s.f.managed);
    let url = sqs
        .create_queue()
        .queue_name(&name)
        .send()
        .await
        .unwrap()
        .queue_url()
        .unwrap()
        .to_string();
    let event = serde_json::json!({
        "version": "0",
        "id": "5f9f5a4c-0000-0000-0000-000000000000",
        "detail-type": "EC2 Spot Instance Interruption Warning",
        "source": "aws.ec2",
        "account": "123456789012",
        "time": s.t0.to_rfc3339_opts(SecondsFormat::Secs, true),
        "region": REGION,
        "resources": [format!("arn:aws:ec2:{REGION}a:instance/{warned}")],
        "detail": {"instance-id": warned, "instance-action": "terminate"}
    });
    // Anyone who can send to the queue can write what looks like a warning.
    let mut forged = event.clone();
    forged["source"] = "my.app".into();
    let mut elsewhere = event.clone();
    elsewhere["account"] = "999999999999".into();
    for body in [
        event.to_string(),
        "{\"detail-type\": \"something else\"}".to_string(),
        forged.to_string(),
        elsewhere.to_string(),
    ] {
        sqs.send_message()
            .queue_url(&url)
            .message_body(body)
            .send()
            .await
            .unwrap();
    }
    let accepted = Accepted::new(vec![REGION.to_string()], &url, &[]);
    let queue = InterruptionQueue::new(sqs.clone(), url.clone(), accepted);
    let batch = queue.receive().await.unwrap();
    assert_eq!(batch.warnings.len(), 1);
    assert_eq!(batch.warnings[0].instance, warned);
    let rows: Vec<_> = batch
        .warnings
        .iter()
        .map(|w| (w.instance.clone(), w.region.clone(), w.at))
        .collect();
    // A warning for the original (no live migration's replacement) is not ebb's to act on.
    let mut with_original = rows.clone();
    with_original.push((original.clone(), REGION.to_string(), s.t0));
    assert_eq!(
        s.store.record_spot_warnings(&with_original).await.unwrap(),
        vec![warned.clone()]
    );
    queue.delete(batch).await.unwrap();
    let left = sqs
        .receive_message()
        .queue_url(&url)
        .wait_time_seconds(0)
        .send()
        .await
        .unwrap();
    assert!(left.messages().is_empty(), "every message is deleted");

    // The message alone is not believed: EC2 (moto) has not marked the spot request.
    let answers = Arc::new(Mutex::new(Vec::new()));
    let seen = answers.clone();
    s.reconciler
        .provider()
        .after(Method::InterruptionConfirmed, move |_, answer| {
            if let Answer::Confirmed(a) = answer {
                seen.lock().unwrap().push(a.as_ref().ok().copied());
            }
        });
    assert!(s.tick(minute + 1).await);
    assert_eq!(*answers.lock().unwrap(), [Some(false)], "EC2 was asked");
    let m = s.migration(&original).await;
    assert!(m.interruptions.0.is_empty(), "{m:#?}");
    assert_eq!(m.current.as_deref(), Some(warned.as_str()));
    assert_eq!(s.replacements(&original).await.len(), 1);

    // EC2 marks it for termination (moto cannot: the test layer answers): the next tick
    // launches the next replacement while the warned one still runs.
    s.reconciler
        .provider()
        .before(Method::InterruptionConfirmed, |_| {
            Some(Answer::Confirmed(Ok(true)))
        });
    let minute = minute + 1;
    assert!(s.tick(minute + 1).await);
    let m = s.migration(&original).await;
    assert_eq!(m.interruptions.0.len(), 1, "{m:#?}");
    assert_eq!(m.interruptions.0[0].instance, warned);
    assert_ne!(m.current.as_deref(), Some(warned.as_str()));
    assert_eq!(m.state(), State::Launching);
    assert_eq!(state(&s.ec2(&warned).await), "running", "left to EC2");
    assert_eq!(s.replacements(&original).await.len(), 2);

    // EC2 never ends it: past its notice the hourly sweep counts it as untracked spend, and
    // leaves it running (its disks may be newer). moto is shared with the other tests: only
    // this one's instance is looked at.
    let past = s.t0 + Duration::minutes(minute + 62);
    let within = s.t0 + Duration::minutes(minute + 5);
    let found = s
        .reconciler
        .provider()
        .migration_artifacts(REGION)
        .await
        .unwrap();
    let migrations = s.store.migrations().await.unwrap();
    let listed = |now| {
        ebb::spot::orphans::orphans(found.clone(), &migrations, now)
            .into_iter()
            .find(|o| o.artifact.id == warned)
    };
    assert!(listed(within).is_none(), "left to EC2 within its notice");
    let o = listed(past).expect("not exempt for ever");
    assert!(!o.lost, "reported, never terminated: {o:?}");
    assert!(o.why.contains("still runs after its notice"), "{}", o.why);
    assert!(s.tick(minute + 62).await);
    assert_eq!(
        state(&s.ec2(&warned).await),
        "running",
        "reported, not terminated"
    );
}

/// Issue 31: a rebalance recommendation from the queue, for a replacement whose job checkpointed
/// recently, moves it to another spot pool before any warning; the old one runs until the new
/// one is verified.
#[sqlx::test(migrations = false)]
async fn a_rebalance_recommendation_from_the_queue_moves_the_replacement_to_another_pool_first(
    pool: PgPool,
) {
    let mut s = Setup::new(pool).await;
    let original = s.trainer(0).await;
    assert!(s.tick(0).await);
    let minute = s.until(&original, 1, State::Done).await;
    let first = s.migration(&original).await;
    let old = first.current.clone().unwrap();

    let sqs = aws_sdk_sqs::Client::new(&moto::emulator(REGION).await);
    let name = format!("ebb-spot-rebalance-{}", s.f.managed);
    let out = sqs.create_queue().queue_name(&name).send().await.unwrap();
    let url = out.queue_url().unwrap().to_string();
    let event = serde_json::json!({
        "version": "0",
        "id": "5f9f5a4c-0000-0000-0000-000000000001",
        "detail-type": "EC2 Instance Rebalance Recommendation",
        "source": "aws.ec2",
        "account": "123456789012",
        "time": s.t0.to_rfc3339_opts(SecondsFormat::Secs, true),
        "region": REGION,
        "resources": [format!("arn:aws:ec2:{REGION}a:instance/{old}")],
        "detail": {"instance-id": old}
    });
    let mut forged = event.clone();
    forged["source"] = "my.app".into();
    for body in [event.to_string(), forged.to_string()] {
        let send = sqs.send_message().queue_url(&url).message_body(body);
        send.send().await.unwrap();
    }
    let accepted = Accepted::new(vec![REGION.to_string()], &url, &[]);
    let queue = InterruptionQueue::new(sqs.clone(), url.clone(), accepted);
    let batch = queue.receive().await.unwrap();
    assert_eq!(batch.warnings.len(), 1, "the forged one is dropped");
    let rows: Vec<_> = batch
        .warnings
        .iter()
        .map(|w| (w.instance.clone(), w.region.clone(), w.at))
        .collect();
    // Kept only for a live migration's current replacement: not for the original.
    let mut with_original = rows.clone();
    with_original.push((original.clone(), REGION.to_string(), s.t0));
    let recorded = s.store.record_spot_rebalances(&with_original).await;
    assert_eq!(recorded.unwrap(), vec![old.clone()]);
    queue.delete(batch).await.unwrap();
    // No warning and no reclaim: nothing is counted as an interruption.
    assert!(s
        .store
        .spot_warnings(std::slice::from_ref(&old))
        .await
        .unwrap()
        .is_empty());

    // The job on the replacement checkpointed a minute ago.
    let checkpoint = (s.t0 + Duration::minutes(minute)).to_rfc3339_opts(SecondsFormat::Secs, true);
    let tag = Tag::builder()
        .key("ebb:checkpoint-at")
        .value(checkpoint)
        .build();
    s.f.ec2
        .create_tags()
        .resources(&old)
        .tags(tag)
        .send()
        .await
        .unwrap();
    let minute = s.until(&original, minute + 1, State::Launching).await;
    let m = s.migration(&original).await;
    let new = m.current.clone().unwrap();
    assert_ne!(new, old);
    assert_eq!(
        m.outgoing.as_ref().map(|o| o.instance.as_str()),
        Some(old.as_str())
    );
    assert_ne!(
        (m.instance_type.clone(), m.zone.clone()),
        (first.instance_type.clone(), first.zone.clone()),
        "another pool"
    );
    assert!(m.interruptions.0.is_empty());
    assert_eq!(
        state(&s.ec2(&old).await),
        "running",
        "kept until the new one is verified"
    );
    s.until(&original, minute + 1, State::Done).await;
    let m = s.migration(&original).await;
    assert_eq!(m.current.as_deref(), Some(new.as_str()));
    assert!(m.outgoing.is_none(), "{m:#?}");
    assert_eq!(state(&s.ec2(&new).await), "running");
    assert_eq!(state(&s.ec2(&old).await), "terminated");
    let codes = s.audit_codes(&original).await;
    assert!(
        codes.iter().any(|(c, _)| c == "spot_rebalance"),
        "{codes:?}"
    );
}

#[sqlx::test(migrations = false)]
async fn a_stored_state_or_market_this_ebb_does_not_know_is_an_error_naming_the_migration(
    pool: PgPool,
) {
    let store = Store::from_pool(pool.clone());
    store.migrate().await.unwrap();
    let now = Utc::now();
    let audit = NewAuditEntry::event(now, "test", "migrate_to_spot", "planned".into());
    let m = store
        .plan_migration("i-1", REGION, "train", Some(1.0), now, audit)
        .await
        .unwrap()
        .unwrap();
    assert_eq!((m.state(), m.market.as_str()), (State::Planned, "spot"));

    sqlx::query("UPDATE spot_migrations SET market = 'reserved' WHERE id = $1")
        .bind(m.id)
        .execute(&pool)
        .await
        .unwrap();
    let err = store.migrations().await.unwrap_err();
    assert!(
        matches!(&err, StoreError::UnknownMigrationValue { id, column: "market", value }
            if *id == m.id && value == "reserved"),
        "{err:?}"
    );
    let text = err.to_string();
    assert!(
        text.contains(&format!("spot migration {}", m.id)) && text.contains("\"reserved\""),
        "{text}"
    );

    // The schema allows no other state today; a newer ebb's schema might.
    sqlx::query("ALTER TABLE spot_migrations DROP CONSTRAINT spot_migrations_state_check")
        .execute(&pool)
        .await
        .unwrap();
    sqlx::query("UPDATE spot_migrations SET market = 'spot', state = 'paused' WHERE id = $1")
        .bind(m.id)
        .execute(&pool)
        .await
        .unwrap();
    let err = store.live_migrations().await.unwrap_err();
    assert!(
        matches!(&err, StoreError::UnknownMigrationValue { id, column: "state", value }
            if *id == m.id && value == "paused"),
        "{err:?}"
    );
}

#[sqlx::test(migrations = false)]
async fn an_override_accepted_while_stopping_undoes_the_move_and_the_workload_runs_on_the_original(
    pool: PgPool,
) {
    let mut s = Setup::new(pool).await;
    let original = s.trainer(0).await;
    assert!(s.tick(0).await);
    s.until(&original, 1, State::Stopping).await;
    assert_eq!(state(&s.ec2(&original).await), "stopped");
    s.store
        .create_override(
            &original,
            s.t0 + Duration::hours(8),
            "final epoch, do not touch",
            "li",
            s.t0,
        )
        .await
        .unwrap();
    s.until(&original, 2, State::RolledBack).await;
    let m = s.migration(&original).await;
    assert!(m.error.as_deref().unwrap().contains("override"), "{m:#?}");
    assert!(
        m.image.is_none(),
        "the original runs: its image is no copy anyone needs"
    );
    let back = s.ec2(&original).await;
    assert_eq!(
        state(&back),
        "running",
        "the workload is back on the original"
    );
    assert_eq!(tag(&back, "ebb:migrating"), None);
    assert!(s.replacements(&original).await.is_empty());
    // Long after keep_original_for, nothing touches it.
    assert!(s.tick(8 * 60).await);
    assert_eq!(state(&s.ec2(&original).await), "running");
    let codes = s.audit_codes(&original).await;
    assert!(!codes.iter().any(|(c, _)| c == "spot_image"), "{codes:?}");
    assert!(!codes.iter().any(|(c, _)| c == "spot_cleanup"), "{codes:?}");
    assert!(s.store.pending_intents().await.unwrap().is_empty());
}

#[sqlx::test(migrations = false)]
async fn a_protection_at_any_step_before_done_rolls_the_move_back(pool: PgPool) {
    let mut s = Setup::new(pool).await;
    for (n, at) in [State::Imaging, State::Launching, State::Verifying]
        .into_iter()
        .enumerate()
    {
        let start = n as i64 * 600;
        let original = s.trainer(start).await;
        assert!(s.tick(start).await);
        let minute = s.until(&original, start + 1, at).await;
        // Imaging: the keep-until tag; then the policy's spot rule goes; then ebb:skip.
        let protect = |tag: (&str, String)| {
            s.f.ec2
                .create_tags()
                .resources(&original)
                .tags(
                    aws_sdk_ec2::types::Tag::builder()
                        .key(tag.0)
                        .value(tag.1)
                        .build(),
                )
                .send()
        };
        match at {
            State::Imaging => {
                let until = (s.t0 + Duration::days(2)).to_rfc3339_opts(SecondsFormat::Secs, true);
                protect(("ebb:keep-until", until)).await.unwrap();
            }
            State::Launching => {
                protect(("workload", "inference".to_string()))
                    .await
                    .unwrap();
            }
            _ => {
                protect(("ebb:skip", "true".to_string())).await.unwrap();
            }
        }
        s.until(&original, minute + 1, State::RolledBack).await;
        let m = s.migration(&original).await;
        assert_eq!(state(&s.ec2(&original).await), "running", "{at:?}: {m:#?}");
        for r in s.replacements(&original).await {
            assert_eq!(
                state(&r),
                "terminated",
                "{at:?}: the replacement is terminated"
            );
        }
        assert!(m.current.is_none() && m.image.is_none(), "{at:?}: {m:#?}");
    }
}

#[sqlx::test(migrations = false)]
async fn an_override_after_done_keeps_the_original_from_termination(pool: PgPool) {
    let mut s = Setup::new(pool).await;
    let original = s.trainer(0).await;
    assert!(s.tick(0).await);
    let done = s.until(&original, 1, State::Done).await;
    s.store
        .create_override(&original, s.t0 + Duration::hours(30), "keep it", "li", s.t0)
        .await
        .unwrap();
    for minute in [done + 6 * 60, done + 12 * 60, done + 24 * 60] {
        assert!(s.tick(minute).await);
        assert_eq!(state(&s.ec2(&original).await), "stopped", "+{minute} min");
    }
    let m = s.migration(&original).await;
    assert!(m.original_terminated_at.is_none(), "{m:#?}");
    assert!(!s
        .audit_codes(&original)
        .await
        .iter()
        .any(|(c, _)| c == "spot_cleanup"));
    // Once the override has expired, keep_original_for applies again.
    assert!(s.tick(31 * 60).await);
    assert_eq!(state(&s.ec2(&original).await), "terminated");
}

#[sqlx::test(migrations = false)]
async fn a_roll_back_whose_start_finds_no_capacity_is_tried_again_until_the_original_runs(
    pool: PgPool,
) {
    let mut s = Setup::new(pool).await;
    let original = s.trainer(0).await;
    *s.faults().launch_failures.lock().unwrap() = 1;
    *s.faults().start_failures.lock().unwrap() = 2;
    assert!(s.tick(0).await);
    let minute = s.until(&original, 1, State::RollingBack).await;
    let m = s.migration(&original).await;
    assert_eq!(state(&s.ec2(&original).await), "stopped");
    assert!(m.image.is_some(), "kept until the original runs: {m:#?}");
    assert_eq!(m.failures, 1);
    // Within the wait nothing is tried; then the second start fails too, and waits longer.
    assert!(s.tick(minute).await);
    assert_eq!(s.migration(&original).await.failures, 1);
    assert!(s.tick(minute + 1).await);
    let m = s.migration(&original).await;
    assert_eq!((m.state(), m.failures), (State::RollingBack, 2), "{m:#?}");
    assert!(s.tick(minute + 2).await);
    assert_eq!(s.migration(&original).await.state(), State::RollingBack);
    assert!(s.tick(minute + 3).await);
    let m = s.migration(&original).await;
    assert_eq!(m.state(), State::RolledBack, "{m:#?}");
    assert_eq!(state(&s.ec2(&original).await), "running");
    assert!(m.image.is_none());
    // The repeated failure is one step with a count, not one step per try.
    let rolling: Vec<_> = m
        .steps
        .0
        .iter()
        .filter(|st| st.state == State::RollingBack)
        .collect();
    assert!(rolling.len() <= 2, "{rolling:#?}");
    assert!(s.store.pending_intents().await.unwrap().is_empty());
}

#[sqlx::test(migrations = false)]
async fn a_replacement_ec2_no_longer_knows_leaves_the_image_kept_until_a_person_releases_it(
    pool: PgPool,
) {
    let url = common::database_url(&pool);
    let mut s = Setup::new(pool).await;
    let original = s.trainer(0).await;
    assert!(s.tick(0).await);
    let done = s.until(&original, 1, State::Done).await;
    assert!(s.tick(done + 6 * 60).await);
    assert_eq!(state(&s.ec2(&original).await), "terminated");
    let m = s.migration(&original).await;
    let (image, replacement) = (m.image.clone().unwrap(), m.current.clone().unwrap());
    let snapshots = s.marked_snapshots(&original).await;
    assert!(!snapshots.is_empty());

    // Hours later EC2 no longer lists the replacement: a reclaim or a person, nobody can tell.
    s.f.ec2
        .terminate_instances()
        .instance_ids(&replacement)
        .send()
        .await
        .unwrap();
    s.faults()
        .vanished
        .lock()
        .unwrap()
        .insert(replacement.clone());
    let gone = done + 9 * 60;
    let report = s
        .reconciler
        .tick(s.t0 + Duration::minutes(gone), &mut s.leader)
        .await
        .unwrap();
    assert_eq!(report.spot_alerts.get("image_only_copy"), Some(&1));
    let m = s.migration(&original).await;
    assert!(m.ended_at.is_some(), "{m:#?}");
    assert_eq!(m.image_kept_until, None, "no timer: {m:#?}");
    let last = &m.steps.0.last().unwrap().detail;
    assert!(
        last.contains(&format!("ebb spot-moves release {}", m.id)),
        "{last}"
    );
    assert_eq!(m.image.as_deref(), Some(image.as_str()));
    assert!(
        s.image_exists(&image).await,
        "the only copy of the disks is kept"
    );
    assert_eq!(s.marked_snapshots(&original).await, snapshots);
    assert_eq!(
        s.replacements(&original).await.len(),
        1,
        "nothing relaunched"
    );

    // Kept past keep_image_for (7 days by default) and counted at every tick, until a person
    // releases it; then deleted with its snapshots.
    let later = gone + 8 * 24 * 60;
    let report = s
        .reconciler
        .tick(s.t0 + Duration::minutes(later), &mut s.leader)
        .await
        .unwrap();
    assert_eq!(report.spot_alerts.get("image_only_copy"), Some(&1));
    assert!(s.image_exists(&image).await);
    assert_eq!(s.marked_snapshots(&original).await, snapshots);
    let released = common::ebb_on(&url, &["spot-moves", "release", &m.id.to_string()]);
    assert!(
        released.status.success(),
        "{}",
        String::from_utf8_lossy(&released.stderr)
    );
    let again = common::ebb_on(&url, &["spot-moves", "release", &m.id.to_string()]);
    assert_eq!(again.status.code(), Some(2), "released once only");
    assert!(s.tick(later + 1).await);
    assert!(!s.image_exists(&image).await);
    assert!(s.marked_snapshots(&original).await.is_empty());
    let m = s.migration(&original).await;
    assert!(m.image.is_none(), "{m:#?}");
    assert!(s.store.live_migrations().await.unwrap().is_empty());
    assert!(s.store.pending_intents().await.unwrap().is_empty());
}

#[sqlx::test(migrations = false)]
async fn a_replacement_a_person_terminated_after_the_original_keeps_the_image(pool: PgPool) {
    let mut s = Setup::new(pool).await;
    let original = s.trainer(0).await;
    assert!(s.tick(0).await);
    let done = s.until(&original, 1, State::Done).await;
    assert!(s.tick(done + 6 * 60).await);
    let m = s.migration(&original).await;
    s.f.ec2
        .terminate_instances()
        .instance_ids(m.current.as_deref().unwrap())
        .send()
        .await
        .unwrap();
    assert!(s.tick(done + 6 * 60 + 1).await);
    let m = s.migration(&original).await;
    assert!(m.ended_at.is_some(), "{m:#?}");
    assert!(s.image_exists(m.image.as_deref().unwrap()).await);
    assert!(m.image_kept_until.is_none(), "kept until released: {m:#?}");
}

#[sqlx::test(migrations = false)]
async fn an_image_under_the_migrations_name_and_tags_that_ebb_did_not_make_is_refused(
    pool: PgPool,
) {
    let mut s = Setup::new(pool).await;
    let original = s.trainer(0).await;
    assert!(s.tick(0).await);
    let minute = s.until(&original, 1, State::Stopping).await;
    let m = s.migration(&original).await;
    // Someone who can read the migration id makes an image of their own instance under the
    // name and tags ebb would give its image.
    let theirs = s.trainer(minute).await;
    let forged =
        s.f.ec2
            .create_image()
            .instance_id(&theirs)
            .name(format!("ebb-{original}-{}", m.id))
            .tag_specifications(
                aws_sdk_ec2::types::TagSpecification::builder()
                    .resource_type(aws_sdk_ec2::types::ResourceType::Image)
                    .tags(Tag::builder().key("ebb:image-of").value(&original).build())
                    .tags(
                        Tag::builder()
                            .key("ebb:migration")
                            .value(m.id.to_string())
                            .build(),
                    )
                    .build(),
            )
            .send()
            .await
            .unwrap()
            .image_id()
            .unwrap()
            .to_string();
    s.until(&original, minute + 1, State::RolledBack).await;
    let m = s.migration(&original).await;
    assert!(
        m.error.as_deref().unwrap().contains("cannot prove"),
        "{m:#?}"
    );
    assert!(m.image.is_none());
    assert!(
        s.replacements(&original).await.is_empty(),
        "nothing launched from it"
    );
    assert!(s.image_exists(&forged).await, "not ebb's to delete either");
    assert_eq!(state(&s.ec2(&original).await), "running");
    assert!(s
        .audit_codes(&original)
        .await
        .contains(&("spot_refused".to_string(), Outcome::Succeeded)));
}

#[sqlx::test(migrations = false)]
async fn an_instance_carrying_the_launch_tag_that_ebb_did_not_launch_is_never_adopted(
    pool: PgPool,
) {
    let mut s = Setup::new(pool).await;
    let original = s.trainer(0).await;
    assert!(s.tick(0).await);
    let minute = s.until(&original, 1, State::Imaging).await;
    let m = s.migration(&original).await;
    let launch_tag = format!("{original}-{}-1", m.id);
    let fake =
        s.f.launch(moto::Launch {
            instance_type: "g5.xlarge",
            managed: false,
            spot: false,
            hibernation: false,
            tags: &[("workload", "inference")],
        })
        .await;
    s.f.ec2
        .create_tags()
        .resources(&fake)
        .tags(Tag::builder().key("ebb:launch").value(&launch_tag).build())
        .tags(
            Tag::builder()
                .key("ebb:migrated-from")
                .value(&original)
                .build(),
        )
        .send()
        .await
        .unwrap();
    let done = s.until(&original, minute + 1, State::Done).await;
    let m = s.migration(&original).await;
    let ours = m.current.clone().unwrap();
    assert_ne!(ours, fake);
    assert_eq!(s.ec2(&ours).await.image_id(), m.image.as_deref());
    assert!(s
        .audit_codes(&original)
        .await
        .contains(&("spot_refused".to_string(), Outcome::Succeeded)));
    // The original is cleaned up in favour of ebb's replacement; the fake is never touched.
    assert!(s.tick(done + 6 * 60).await);
    assert_eq!(state(&s.ec2(&original).await), "terminated");
    assert_eq!(state(&s.ec2(&fake).await), "running");
}

/// Before the original is terminated its image must still hold its disks: an account-wide AMI
/// clean-up, a lifecycle policy or a person may have deregistered the image, and a snapshot may
/// have failed. Then the original is kept stopped, tried again at every tick, and the tick counts
/// the alert (`ebb_spot_alerts{kind="image_missing"}`).
#[sqlx::test(migrations = false)]
async fn an_original_whose_image_is_gone_or_snapshot_failed_is_kept(pool: PgPool) {
    let (url, texts) = common::webhook::receiver().await;
    let (webhook, poster) =
        ebb::webhook::Webhook::start(url.parse().unwrap(), ebb::control::Tasks::default());
    let options = Options {
        webhook: Some(webhook),
        ..Options::default()
    };
    let mut s = Setup::with(pool, options).await;
    let deregistered = s.trainer(0).await;
    let unsnapshotted = s.trainer(0).await;
    assert!(s.tick(0).await);
    let done = s.until(&deregistered, 1, State::Done).await;
    let done = done.max(s.until(&unsnapshotted, done, State::Done).await);
    let m = s.migration(&deregistered).await;
    s.f.ec2
        .deregister_image()
        .image_id(m.image.as_deref().unwrap())
        .send()
        .await
        .unwrap();
    // EC2 refuses to delete a snapshot a registered image uses (moto too), but one can fail:
    // its state `error`, which moto cannot produce, so the test layer answers it.
    let m = s.migration(&unsnapshotted).await;
    let (image, snapshot) = (m.image.clone().unwrap(), m.snapshots[0].clone());
    s.reconciler
        .provider()
        .after([Method::Image], move |call, answer| {
            if let (Call::Image { image: asked, .. }, Answer::Image(Ok(Some(found)))) =
                (call, answer)
            {
                if *asked == image {
                    found.completed_snapshots.remove(&snapshot);
                }
            }
        });

    let at = s.t0 + Duration::minutes(done + 6 * 60);
    let report = s.reconciler.tick(at, &mut s.leader).await.unwrap();
    assert_eq!(
        report.spot_alerts.get("image_missing"),
        Some(&2),
        "{report:#?}"
    );
    for original in [&deregistered, &unsnapshotted] {
        assert_eq!(state(&s.ec2(original).await), "stopped", "{original} kept");
        let m = s.migration(original).await;
        assert!(m.original_terminated_at.is_none());
        let last = &m.steps.0.last().unwrap().detail;
        assert!(last.contains("is not terminated"), "{last}");
        assert!(
            !s.audit_codes(original)
                .await
                .contains(&("spot_cleanup".to_string(), Outcome::Intent)),
            "no termination was even intended"
        );
    }
    assert!(s.tick(done + 7 * 60).await);
    for original in [&deregistered, &unsnapshotted] {
        assert_eq!(state(&s.ec2(original).await), "stopped", "{original} kept");
    }
    // One notice per migration, not one per tick.
    drop(s);
    poster.finish(std::time::Duration::from_secs(30)).await;
    let texts = texts.lock().unwrap().clone();
    assert_eq!(texts.len(), 2, "{texts:#?}");
    assert!(texts.iter().any(|t| t.contains("is gone")), "{texts:#?}");
    assert!(
        texts.iter().any(|t| t.contains("not completed")),
        "{texts:#?}"
    );
}

/// An instance's user data often holds secrets, and every reader may read `spot_migrations`:
/// it is never stored with the launch settings, and is read again from the original right
/// before the launch, so the replacement still boots with it.
#[sqlx::test(migrations = false)]
async fn user_data_is_never_stored_yet_the_replacement_is_launched_with_it(pool: PgPool) {
    let mut s = Setup::new(pool.clone()).await;
    // "#!/bin/sh\nexport HF_TOKEN=hf_not_for_readers\n"
    let user_data = "IyEvYmluL3NoCmV4cG9ydCBIRl9UT0tFTj1oZl9ub3RfZm9yX3JlYWRlcnMK";
    let original = s.trainer_with_user_data(user_data).await;
    assert!(s.tick(0).await);
    assert!(s.tick(1).await);
    let stored = || async {
        let rows: Vec<String> = sqlx::query_scalar(
            "SELECT coalesce(launch_spec::text, '') || steps::text FROM spot_migrations",
        )
        .fetch_all(&pool)
        .await
        .unwrap();
        rows.concat()
    };
    let kept = stored().await;
    assert!(
        kept.contains("security_groups"),
        "the settings were read: {kept}"
    );
    assert!(
        !kept.contains(user_data) && !kept.contains("user_data"),
        "{kept}"
    );

    s.until(&original, 2, State::Done).await;
    let replacement = s.migration(&original).await.current.unwrap();
    let read =
        s.f.ec2
            .describe_instance_attribute()
            .instance_id(&replacement)
            .attribute(aws_sdk_ec2::types::InstanceAttributeName::UserData)
            .send()
            .await
            .unwrap();
    assert_eq!(read.user_data().and_then(|v| v.value()), Some(user_data));
    let kept = stored().await;
    assert!(
        !kept.contains(user_data) && !kept.contains("user_data"),
        "{kept}"
    );
}
