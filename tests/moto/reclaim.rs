//! Reclaiming boxes stopped for long, against moto's EC2 server and a real Postgres, tick by
//! tick: the notice, the image of all the box's volumes proven before the termination, `ebb
//! restore`, what keeps a box, and a tick killed before and after each call. The test layer
//! over the AWS provider gives each image's snapshots the volumes EC2 would record (moto
//! snapshots a scratch volume), and holds a call for the kill.

use crate::common;

use chrono::{DateTime, Duration, Utc};
use common::intercept::{Intercept, Method};
use common::moto::{self, source_volumes, Fixture};
use ebb::cloud::aws::AwsProvider;
use ebb::cloud::SpotMoves;
use ebb::fleet::money::Volume;
use ebb::reconcile::{Options, PolicySource, Reconciler};
use ebb::store::{
    AuditEntry, AuditFilter, Leadership, Outcome, ReclaimRecord, ReclaimState, Store, Verification,
};
use sqlx::PgPool;
use std::sync::{Arc, Mutex};

const REGION: &str = "us-west-2";

/// Boxes of team research are reclaimed 30 minutes after they stop, with a notice 10 minutes
/// ahead.
const POLICY: &str = r#"
policies:
  - name: research
    match: {tags: {team: research}}
    notify: {before: 10m}
    stopped: {reclaim_after: 30m, reclaim: image}
"#;

/// Where a tick is killed: right before or right after a call of this method.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kill {
    Before(Method),
    After(Method),
}

#[derive(Default)]
struct Killer {
    armed: Mutex<Option<Kill>>,
    killed: tokio::sync::Notify,
}

impl Killer {
    /// Hangs (the tick is then dropped, as if the process died) when `at` is armed.
    async fn at(&self, at: Kill) {
        let hit = {
            let mut armed = self.armed.lock().unwrap();
            let hit = *armed == Some(at);
            if hit {
                *armed = None;
            }
            hit
        };
        if hit {
            self.killed.notify_one();
            std::future::pending::<()>().await;
        }
    }
}

struct Setup {
    f: Fixture,
    store: Store,
    leader: Leadership,
    reconciler: Reconciler<Intercept<AwsProvider>>,
    killer: Arc<Killer>,
    /// Right before the box is stopped.
    t0: DateTime<Utc>,
    _dir: tempfile::TempDir,
}

impl Setup {
    async fn new(pool: PgPool) -> Setup {
        Setup::with(pool, Options::default()).await
    }

    /// A setup whose reconciler has `options`.
    async fn with(pool: PgPool, options: Options) -> Setup {
        Setup::under(pool, options, POLICY).await
    }

    /// A setup whose reconciler has `options` and the policy file `policy`.
    async fn under(pool: PgPool, options: Options, policy: &str) -> Setup {
        let store = Store::from_pool(pool);
        store.migrate().await.unwrap();
        let f = Fixture::new(REGION).await;
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("p.yaml"), policy).unwrap();
        let policies = Arc::new(PolicySource::new(vec![dir.path().to_path_buf()]));
        let cloud = Intercept::new(f.provider().await);
        let ec2 = f.ec2.clone();
        cloud.after_async(Method::Image, move |_, mut answer| {
            let ec2 = ec2.clone();
            async move {
                if let common::intercept::Answer::Image(Ok(Some(found))) = &mut answer {
                    found.snapshot_volumes = source_volumes(&ec2, &found.snapshots).await;
                }
                answer
            }
        });
        let killer = Arc::new(Killer::default());
        let calls = [
            Method::CreateImage,
            Method::Terminate,
            Method::Launch,
            Method::DeregisterImage,
            Method::DeleteSnapshot,
        ];
        let k = killer.clone();
        cloud.before_async(calls, move |call| {
            let k = k.clone();
            async move {
                k.at(Kill::Before(call.method())).await;
                None
            }
        });
        let k = killer.clone();
        cloud.after_async(calls, move |call, answer| {
            let k = k.clone();
            async move {
                k.at(Kill::After(call.method())).await;
                answer
            }
        });
        let reconciler = Reconciler::new(cloud, store.clone(), policies, options);
        let leader = store.try_lead("test").await.unwrap().unwrap();
        Setup {
            f,
            store,
            leader,
            reconciler,
            killer,
            t0: Utc::now(),
            _dir: dir,
        }
    }

    /// A box of team research, stopped now.
    async fn stopped_box(&self) -> String {
        let id = self.f.launch(moto::G5).await;
        self.f
            .ec2
            .stop_instances()
            .instance_ids(&id)
            .send()
            .await
            .unwrap();
        id
    }

    /// A tick `minutes` after the box stopped; `false` when it was killed.
    async fn tick(&mut self, minutes: i64) -> bool {
        let at = self.t0 + Duration::minutes(minutes);
        let killed = self.killer.killed.notified();
        tokio::select! {
            report = self.reconciler.tick(at, &mut self.leader) => {
                report.unwrap();
                true
            }
            () = killed => false,
        }
    }

    async fn reclaim(&self, instance: &str) -> ReclaimRecord {
        let all = self.store.reclaims().await.unwrap();
        let mut of: Vec<ReclaimRecord> =
            all.into_iter().filter(|r| r.instance == instance).collect();
        assert_eq!(of.len(), 1, "one reclaim of {instance}: {of:#?}");
        of.remove(0)
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

    async fn state(&self, id: &str) -> String {
        let i = self.ec2(id).await;
        i.state().unwrap().name().unwrap().as_str().to_string()
    }

    /// The audit rows of `instance`, oldest first.
    async fn audit(&self, instance: &str) -> Vec<AuditEntry> {
        let filter = AuditFilter {
            instance: Some(instance.to_string()),
            ..AuditFilter::default()
        };
        let mut rows = self.store.audit(&filter).await.unwrap();
        rows.sort_by_key(|r| r.seq);
        rows
    }

    /// Every intent of `instance` has exactly one outcome, and the chain verifies.
    async fn assert_one_outcome_per_intent(&self, instance: &str) {
        let rows = self.audit(instance).await;
        for intent in rows.iter().filter(|r| r.entry.outcome == Outcome::Intent) {
            let outcomes = rows
                .iter()
                .filter(|r| r.entry.intent_seq == Some(intent.seq))
                .count();
            assert_eq!(outcomes, 1, "intent {}: {:#?}", intent.entry.reason, rows);
        }
        assert!(self.store.pending_intents().await.unwrap().is_empty());
        assert!(matches!(
            self.store.verify_audit().await.unwrap(),
            Verification::Intact { .. }
        ));
    }

    /// The intent of the call `kill` hit was settled from what EC2 showed: carried out when the
    /// kill came after the call, not when before.
    async fn assert_settled(&self, instance: &str, kill: Kill) {
        let (method, after) = match kill {
            Kill::Before(m) => (m, false),
            Kill::After(m) => (m, true),
        };
        let call = match method {
            Method::CreateImage => ": image ",
            Method::Terminate => ": terminate ",
            Method::Launch => ": launch ",
            Method::DeregisterImage => ": deregister image ",
            _ => ": delete snapshot ",
        };
        let rows = self.audit(instance).await;
        let first = rows
            .iter()
            .find(|r| r.entry.outcome == Outcome::Intent && r.entry.reason.contains(call))
            .unwrap();
        let settled = rows
            .iter()
            .find(|r| r.entry.intent_seq == Some(first.seq))
            .unwrap();
        let expected = if after {
            Outcome::Succeeded
        } else {
            Outcome::Failed
        };
        assert_eq!(settled.entry.outcome, expected, "{kill:?}: {settled:#?}");
    }

    /// Whether `image` is available, with a snapshot of each of `instance`'s `volumes`, made
    /// from it: what moto records of a snapshot's origin is the description it gives it,
    /// "Created by CreateImage(i-...) for ami-...", which names the instance even once it is
    /// terminated (and its volumes with it).
    async fn image_holds(&self, image: &str, instance: &str, volumes: &[String]) -> bool {
        let provider = &self.reconciler.provider().inner;
        let Some(found) = provider.image(REGION, image).await.unwrap() else {
            return false;
        };
        let made_from = format!("Created by CreateImage({instance})");
        let mut of_instance = 0;
        for snapshot in &found.snapshots {
            let out = self
                .f
                .ec2
                .describe_snapshots()
                .snapshot_ids(snapshot)
                .send()
                .await
                .unwrap();
            let description = out.snapshots()[0].description().unwrap_or_default();
            of_instance += usize::from(description.starts_with(&made_from));
        }
        found.state == ebb::cloud::ImageState::Available
            && found.snapshots.len() == of_instance
            && of_instance >= volumes.len()
    }
}

fn volumes_of(i: &aws_sdk_ec2::types::Instance) -> Vec<String> {
    i.block_device_mappings()
        .iter()
        .filter_map(|m| m.ebs()?.volume_id().map(str::to_string))
        .collect()
}

fn tag<'a>(i: &'a aws_sdk_ec2::types::Instance, key: &str) -> Option<&'a str> {
    i.tags()
        .iter()
        .find(|t| t.key() == Some(key))
        .and_then(|t| t.value())
}

#[sqlx::test(migrations = false)]
async fn a_box_stopped_past_reclaim_after_is_noticed_imaged_proven_terminated_then_restored(
    pool: PgPool,
) {
    let url_pool = pool.clone();
    let (hook, notices) = common::webhook::receiver().await;
    let (webhook, _poster) =
        ebb::webhook::Webhook::start(hook.parse().unwrap(), ebb::control::Tasks::default());
    let options = Options {
        webhook: Some(webhook),
        public_url: Some("https://ebb.example.com".parse().unwrap()),
        ..Options::default()
    };
    let mut s = Setup::with(pool, options).await;
    let id = s.stopped_box().await;
    let before = s.ec2(&id).await;
    let volumes = volumes_of(&before);
    assert!(!volumes.is_empty());

    // Not within its notice yet: nothing.
    assert!(s.tick(5).await);
    assert!(s.store.reclaims().await.unwrap().is_empty());
    // Within its notice: planned, nothing done to the box.
    assert!(s.tick(21).await);
    let r = s.reclaim(&id).await;
    assert_eq!(r.state, ReclaimState::Noticed);
    assert!(r.due_at >= s.t0 + Duration::minutes(30), "{r:#?}");
    // The notice, with its snooze links.
    let got = common::eventually(
        std::time::Duration::from_secs(10),
        std::time::Duration::from_millis(20),
        async || notices.lock().unwrap().first().cloned(),
    )
    .await
    .expect("a notice");
    assert!(
        got.starts_with(&format!("ebb will image and then terminate {id}")),
        "{got}"
    );
    assert!(got.contains("https://ebb.example.com/snooze/"), "{got}");
    assert!(s.tick(25).await);
    assert_eq!(s.reclaim(&id).await.state, ReclaimState::Noticed);
    assert_eq!(s.state(&id).await, "stopped");
    assert!(s
        .reconciler
        .provider()
        .ids_of(Method::CreateImage)
        .is_empty());

    // Due: imaged; then, the image proven, terminated.
    assert!(s.tick(31).await);
    let r = s.reclaim(&id).await;
    assert_eq!(r.state, ReclaimState::Imaging, "{r:#?}");
    assert_eq!(s.state(&id).await, "stopped");
    let image = r.image.clone().unwrap();
    assert!(s.tick(32).await);
    let r = s.reclaim(&id).await;
    assert_eq!(r.state, ReclaimState::Reclaimed, "{r:#?}");
    assert_eq!(s.state(&id).await, "terminated");
    assert!(
        s.image_holds(&image, &id, &volumes).await,
        "the image keeps every volume"
    );
    assert!(!r.snapshots.is_empty());
    // What the image restores to, kept for the report: its block device mappings' volumes.
    let described = s.f.ec2.describe_images().image_ids(&image).send().await;
    let mapped: Vec<Volume> = described.unwrap().images()[0]
        .block_device_mappings()
        .iter()
        .filter_map(|m| m.ebs())
        .map(|e| Volume {
            volume_type: e.volume_type().unwrap().as_str().to_string(),
            size_gib: u64::try_from(e.volume_size().unwrap()).unwrap(),
        })
        .collect();
    assert!(!mapped.is_empty());
    assert_eq!(r.image_volumes, Some(mapped));
    // The termination came after the image, and once.
    let changes: Vec<&str> = s
        .reconciler
        .provider()
        .calls()
        .into_iter()
        .filter(|c| c.method.changes())
        .map(|c| c.method.name())
        .collect();
    assert_eq!(changes, ["create_image", "terminate"]);

    // Nothing more until someone asks for it back.
    assert!(s.tick(40).await);
    assert_eq!(s.reclaim(&id).await.state, ReclaimState::Reclaimed);
    // As a person does it, by command.
    let url = common::database_url(&url_pool);
    let listed = common::ebb_on(&url, &["reclaims", "--format", "json"]);
    let listed: serde_json::Value = serde_json::from_slice(&listed.stdout).unwrap();
    assert_eq!(listed[0]["state"], "reclaimed", "{listed}");
    assert_eq!(listed[0]["image"].as_str(), Some(image.as_str()));
    let asked = common::ebb_on(&url, &["restore", &id, "--actor", "mei"]);
    let out = String::from_utf8_lossy(&asked.stdout);
    assert!(
        asked.status.success(),
        "{out}{}",
        String::from_utf8_lossy(&asked.stderr)
    );
    assert!(out.contains(&image), "{out}");
    let again = common::ebb_on(&url, &["restore", &id, "--actor", "mei"]);
    assert_eq!(again.status.code(), Some(2));
    let err = String::from_utf8_lossy(&again.stderr);
    assert!(err.contains("asked for already by mei"), "{err}");
    assert!(s.tick(42).await);
    let r = s.reclaim(&id).await;
    let restored = r.restored_as.clone().expect("launched");
    assert!(s.tick(43).await);
    let r = s.reclaim(&id).await;
    assert_eq!(r.state, ReclaimState::Restored, "{r:#?}");
    let back = s.ec2(&restored).await;
    assert_eq!(back.state().unwrap().name().unwrap().as_str(), "running");
    assert_eq!(back.image_id(), Some(image.as_str()));
    assert_eq!(back.instance_type(), before.instance_type());
    assert_eq!(back.subnet_id(), before.subnet_id());
    let groups = |i: &aws_sdk_ec2::types::Instance| -> Vec<String> {
        i.security_groups()
            .iter()
            .filter_map(|g| g.group_id().map(str::to_string))
            .collect()
    };
    assert_eq!(groups(&back), groups(&before));
    for key in ["team", "ebb:managed"] {
        assert_eq!(tag(&back, key), tag(&before, key), "{key}");
    }
    assert_eq!(tag(&back, "ebb:restored-from"), Some(id.as_str()));
    assert!(before.private_ip_address().is_some());
    assert_eq!(back.private_ip_address(), before.private_ip_address());
    // The image is kept: ebb never deletes the last copy on its own.
    assert!(s.image_holds(&image, &id, &volumes).await);

    let codes: Vec<String> = s
        .audit(&id)
        .await
        .into_iter()
        .filter_map(|r| r.entry.code)
        .collect();
    for code in ["reclaim_notice", "reclaim_image", "reclaimed", "restored"] {
        assert!(codes.iter().any(|c| c == code), "{code} in {codes:?}");
    }
    s.assert_one_outcome_per_intent(&id).await;
}

#[sqlx::test(migrations = false)]
async fn an_override_made_after_the_notice_keeps_the_box(pool: PgPool) {
    let mut s = Setup::new(pool).await;
    let id = s.stopped_box().await;
    assert!(s.tick(21).await);
    assert_eq!(s.reclaim(&id).await.state, ReclaimState::Noticed);
    // What a notice's snooze link makes.
    let until = s.t0 + Duration::days(1);
    let at = s.t0 + Duration::minutes(22);
    s.store
        .create_override(&id, until, "thesis data on it", "mei", at)
        .await
        .unwrap();
    assert!(s.tick(31).await);
    let r = s.reclaim(&id).await;
    assert_eq!(r.state, ReclaimState::Held, "{r:#?}");
    assert!(r.error.unwrap().contains("thesis data on it"));
    assert!(s.tick(35).await);
    assert_eq!(s.state(&id).await, "stopped");
    assert!(s
        .reconciler
        .provider()
        .ids_of(Method::CreateImage)
        .is_empty());
    assert!(s.reconciler.provider().ids_of(Method::Terminate).is_empty());
    s.assert_one_outcome_per_intent(&id).await;
}

#[sqlx::test(migrations = false)]
async fn a_box_with_a_volume_that_outlives_its_termination_is_refused(pool: PgPool) {
    let mut s = Setup::new(pool).await;
    let kept = aws_sdk_ec2::types::BlockDeviceMapping::builder()
        .device_name("/dev/sdf")
        .ebs(
            aws_sdk_ec2::types::EbsBlockDevice::builder()
                .volume_size(100)
                .delete_on_termination(false)
                .build(),
        )
        .build();
    let tags = aws_sdk_ec2::types::TagSpecification::builder()
        .resource_type(aws_sdk_ec2::types::ResourceType::Instance)
        .tags(
            aws_sdk_ec2::types::Tag::builder()
                .key("team")
                .value("research")
                .build(),
        )
        .tags(
            aws_sdk_ec2::types::Tag::builder()
                .key("ebb:managed")
                .value(&s.f.managed)
                .build(),
        )
        .build();
    let out =
        s.f.ec2
            .run_instances()
            .image_id(&s.f.image)
            .instance_type(aws_sdk_ec2::types::InstanceType::G5Xlarge)
            .min_count(1)
            .max_count(1)
            .block_device_mappings(kept)
            .tag_specifications(tags)
            .send()
            .await
            .unwrap();
    let id = out.instances()[0].instance_id().unwrap().to_string();
    refused_before_any_image(&mut s, &id, "not deleted at termination").await;
    // Not planned again at once.
    assert!(s.tick(40).await);
    assert_eq!(s.store.reclaims().await.unwrap().len(), 1);
}

#[sqlx::test(migrations = false)]
async fn a_box_launched_with_hibernation_enabled_is_refused(pool: PgPool) {
    let mut s = Setup::new(pool).await;
    let what = moto::Launch {
        hibernation: true,
        ..moto::G5
    };
    let id = s.f.launch(what).await;
    refused_before_any_image(&mut s, &id, "hibernation enabled").await;
}

/// Stops box `id`, ticks past its notice, and checks that its reclaim was refused, saying
/// `why`, with the box left stopped and no image asked for.
async fn refused_before_any_image(s: &mut Setup, id: &str, why: &str) {
    s.f.ec2
        .stop_instances()
        .instance_ids(id)
        .send()
        .await
        .unwrap();
    for minute in [21, 31, 32] {
        assert!(s.tick(minute).await);
    }
    let r = s.reclaim(id).await;
    assert_eq!(r.state, ReclaimState::Refused, "{r:#?}");
    assert!(r.error.as_deref().unwrap().contains(why), "{r:#?}");
    assert_eq!(s.state(id).await, "stopped");
    assert!(s
        .reconciler
        .provider()
        .ids_of(Method::CreateImage)
        .is_empty());
}

#[sqlx::test(migrations = false)]
async fn a_box_tagged_to_be_kept_is_not_reclaimed(pool: PgPool) {
    let mut s = Setup::new(pool).await;
    let id = s.stopped_box().await;
    s.f.ec2
        .create_tags()
        .resources(&id)
        .tags(
            aws_sdk_ec2::types::Tag::builder()
                .key("ebb:skip")
                .value("true")
                .build(),
        )
        .send()
        .await
        .unwrap();
    for minute in [21, 31, 32] {
        assert!(s.tick(minute).await);
    }
    assert!(s.store.reclaims().await.unwrap().is_empty());
    assert_eq!(s.state(&id).await, "stopped");
}

/// A tick killed right before and right after each call of a reclaim and its restore: the
/// next ticks settle each intent once, from what EC2 shows, and the box is never terminated
/// without a proven image of its volumes.
#[sqlx::test(migrations = false)]
async fn a_kill_before_or_after_each_call_leaves_the_box_or_a_proven_image(pool: PgPool) {
    let mut s = Setup::new(pool).await;
    let kills = [
        Kill::Before(Method::CreateImage),
        Kill::After(Method::CreateImage),
        Kill::Before(Method::Terminate),
        Kill::After(Method::Terminate),
        Kill::Before(Method::Launch),
        Kill::After(Method::Launch),
    ];
    for kill in kills {
        let id = s.stopped_box().await;
        let volumes = volumes_of(&s.ec2(&id).await);
        // Each box's own clock: it stopped now.
        let start = (Utc::now() - s.t0).num_minutes();
        *s.killer.armed.lock().unwrap() = Some(kill);
        let mut killed = false;
        let mut asked = false;
        for minute in start + 21..start + 60 {
            killed |= !s.tick(minute).await;
            let r = s.reclaim(&id).await;
            // Never terminated without a proven image.
            if s.state(&id).await != "stopped" {
                let image = r.image.clone().expect("an image before the termination");
                assert!(
                    s.image_holds(&image, &id, &volumes).await,
                    "{kill:?}: {r:#?}"
                );
            }
            if r.state == ReclaimState::Reclaimed && !asked {
                let at = s.t0 + Duration::minutes(minute);
                s.store.ask_restore(&id, "mei", at).await.unwrap().unwrap();
                asked = true;
            }
            if r.state == ReclaimState::Restored {
                break;
            }
        }
        assert!(killed, "{kill:?} never happened");
        let r = s.reclaim(&id).await;
        assert_eq!(r.state, ReclaimState::Restored, "{kill:?}: {r:#?}");
        assert_eq!(s.state(&id).await, "terminated");
        s.assert_one_outcome_per_intent(&id).await;
        s.assert_settled(&id, kill).await;
        // One restored box, however often its launch was asked for.
        let restored =
            s.f.ec2
                .describe_instances()
                .filters(
                    aws_sdk_ec2::types::Filter::builder()
                        .name("tag:ebb:restored-from")
                        .values(&id)
                        .build(),
                )
                .send()
                .await
                .unwrap();
        let boxes: usize = restored
            .reservations()
            .iter()
            .map(|r| r.instances().len())
            .sum();
        assert_eq!(boxes, 1, "{kill:?}: one restored box");
    }
}

#[sqlx::test(migrations = false)]
async fn a_restore_whose_private_ip_was_taken_since_launches_with_another(pool: PgPool) {
    let mut s = Setup::new(pool).await;
    let id = s.stopped_box().await;
    let before = s.ec2(&id).await;
    let ip = before.private_ip_address().unwrap().to_string();
    for minute in [21, 31, 32] {
        assert!(s.tick(minute).await);
    }
    assert_eq!(s.reclaim(&id).await.state, ReclaimState::Reclaimed);
    // Another box takes the address the terminated one freed.
    let taken = s.f.ec2.run_instances().image_id(&s.f.image);
    let taken = taken
        .instance_type(aws_sdk_ec2::types::InstanceType::from(
            moto::G5.instance_type,
        ))
        .subnet_id(before.subnet_id().unwrap())
        .private_ip_address(&ip)
        .min_count(1)
        .max_count(1)
        .send()
        .await
        .unwrap();
    let other = taken.instances()[0].instance_id().unwrap().to_string();
    let at = s.t0 + Duration::minutes(40);
    s.store.ask_restore(&id, "mei", at).await.unwrap().unwrap();
    assert!(s.tick(41).await);
    let restored = s.reclaim(&id).await.restored_as.expect("launched");
    assert_ne!(restored, other);
    let back = s.ec2(&restored).await;
    assert!(
        back.private_ip_address().is_some_and(|a| a != ip),
        "{back:?}"
    );
    assert_eq!(back.subnet_id(), before.subnet_id());
    // One intent, one outcome, which says why the address differs.
    let outcomes: Vec<AuditEntry> = s
        .audit(&id)
        .await
        .into_iter()
        .filter(|r| r.entry.action == "restore" && r.entry.outcome != Outcome::Intent)
        .collect();
    assert_eq!(outcomes.len(), 1, "{outcomes:#?}");
    let reason = &outcomes[0].entry.reason;
    assert!(
        reason.contains(&format!(
            "its private IP {ip} was in use, so EC2 chose another"
        )),
        "{reason}"
    );
    s.assert_one_outcome_per_intent(&id).await;
}

/// [`POLICY`], deleting the image once the restored box has been up an hour.
fn keeping_the_image_an_hour() -> String {
    format!("{POLICY}    stopped: {{reclaim_after: 30m, reclaim: image, keep_image_for: 1h}}\n")
        .replace("    stopped: {reclaim_after: 30m, reclaim: image}\n", "")
}

/// Reclaims the box stopped at the start and restores it; the minute its restore was up.
async fn reclaimed_and_restored(s: &mut Setup, id: &str) -> i64 {
    for minute in [21, 31, 32] {
        assert!(s.tick(minute).await);
    }
    assert_eq!(s.reclaim(id).await.state, ReclaimState::Reclaimed);
    let at = s.t0 + Duration::minutes(40);
    s.store.ask_restore(id, "mei", at).await.unwrap().unwrap();
    assert!(s.tick(41).await);
    assert!(s.tick(42).await);
    assert_eq!(s.reclaim(id).await.state, ReclaimState::Restored);
    42
}

async fn image_exists(s: &Setup, image: &str) -> bool {
    let out = s.f.ec2.describe_images().image_ids(image).send().await;
    out.is_ok_and(|o| !o.images().is_empty())
}

async fn snapshot_exists(s: &Setup, snapshot: &str) -> bool {
    let out =
        s.f.ec2
            .describe_snapshots()
            .snapshot_ids(snapshot)
            .send()
            .await;
    out.is_ok_and(|o| !o.snapshots().is_empty())
}

#[sqlx::test(migrations = false)]
async fn the_image_is_deleted_once_the_restored_box_has_been_up_keep_image_for(pool: PgPool) {
    let mut s = Setup::under(pool, Options::default(), &keeping_the_image_an_hour()).await;
    let id = s.stopped_box().await;
    let up = reclaimed_and_restored(&mut s, &id).await;
    let r = s.reclaim(&id).await;
    assert!(r.ended_at.is_none(), "{r:#?}");
    let image = r.image.clone().unwrap();
    let snapshots = r.snapshots.clone();
    assert!(!snapshots.is_empty());
    // Not before the hour.
    assert!(s.tick(up + 59).await);
    assert!(image_exists(&s, &image).await);
    assert!(s.tick(up + 61).await);
    let r = s.reclaim(&id).await;
    assert!(r.ended_at.is_some(), "{r:#?}");
    assert!(r.image_deleted_at.is_some());
    assert!(r.snapshots.is_empty());
    assert!(!image_exists(&s, &image).await);
    for snapshot in &snapshots {
        assert!(!snapshot_exists(&s, snapshot).await, "{snapshot}");
    }
    // The restored box runs on, from its own volumes.
    assert_eq!(s.state(r.restored_as.as_deref().unwrap()).await, "running");
    s.assert_one_outcome_per_intent(&id).await;
}

#[sqlx::test(migrations = false)]
async fn an_image_whose_restored_box_is_gone_is_kept_as_the_only_copy(pool: PgPool) {
    let mut s = Setup::under(pool, Options::default(), &keeping_the_image_an_hour()).await;
    let id = s.stopped_box().await;
    let up = reclaimed_and_restored(&mut s, &id).await;
    let r = s.reclaim(&id).await;
    let restored = r.restored_as.clone().unwrap();
    s.f.ec2
        .terminate_instances()
        .instance_ids(&restored)
        .send()
        .await
        .unwrap();
    assert!(s.tick(up + 61).await);
    let r = s.reclaim(&id).await;
    assert!(r.ended_at.is_some(), "{r:#?}");
    assert!(r.image_deleted_at.is_none());
    assert!(r.error.is_none());
    assert!(image_exists(&s, r.image.as_deref().unwrap()).await);
    assert!(s
        .reconciler
        .provider()
        .ids_of(Method::DeregisterImage)
        .is_empty());
    let rows = s.audit(&id).await;
    assert!(rows.iter().any(|r| r.entry.reason.contains("only copy")));
    s.assert_one_outcome_per_intent(&id).await;
}

/// A tick killed right before or after `kill`, a call of the image's deletion: the next ticks
/// settle its intent from what EC2 shows, and end with the image and its snapshots deleted.
async fn killed_while_deleting_the_image(pool: PgPool, kill: Kill) {
    let mut s = Setup::under(pool, Options::default(), &keeping_the_image_an_hour()).await;
    let id = s.stopped_box().await;
    let up = reclaimed_and_restored(&mut s, &id).await;
    let r = s.reclaim(&id).await;
    let (image, snapshots) = (r.image.clone().unwrap(), r.snapshots.clone());
    *s.killer.armed.lock().unwrap() = Some(kill);
    assert!(!s.tick(up + 61).await, "{kill:?} never happened");
    for minute in [up + 62, up + 63, up + 64] {
        assert!(s.tick(minute).await);
    }
    let r = s.reclaim(&id).await;
    assert!(r.ended_at.is_some(), "{kill:?}: {r:#?}");
    assert!(!image_exists(&s, &image).await);
    for snapshot in &snapshots {
        assert!(!snapshot_exists(&s, snapshot).await, "{snapshot}");
    }
    s.assert_one_outcome_per_intent(&id).await;
    s.assert_settled(&id, kill).await;
}

#[sqlx::test(migrations = false)]
async fn a_kill_before_deregistering_the_image_is_settled_and_the_deletion_done(pool: PgPool) {
    killed_while_deleting_the_image(pool, Kill::Before(Method::DeregisterImage)).await;
}

#[sqlx::test(migrations = false)]
async fn a_kill_after_deregistering_the_image_is_settled_and_the_deletion_done(pool: PgPool) {
    killed_while_deleting_the_image(pool, Kill::After(Method::DeregisterImage)).await;
}

#[sqlx::test(migrations = false)]
async fn a_kill_before_deleting_a_snapshot_is_settled_and_the_deletion_done(pool: PgPool) {
    killed_while_deleting_the_image(pool, Kill::Before(Method::DeleteSnapshot)).await;
}

#[sqlx::test(migrations = false)]
async fn a_kill_after_deleting_a_snapshot_is_settled_and_the_deletion_done(pool: PgPool) {
    killed_while_deleting_the_image(pool, Kill::After(Method::DeleteSnapshot)).await;
}

#[sqlx::test(migrations = false)]
async fn a_deregistration_ec2_refuses_keeps_the_image_and_is_not_tried_again(pool: PgPool) {
    let mut s = Setup::under(pool, Options::default(), &keeping_the_image_an_hour()).await;
    let id = s.stopped_box().await;
    let up = reclaimed_and_restored(&mut s, &id).await;
    let image = s.reclaim(&id).await.image.unwrap();
    s.reconciler
        .provider()
        .before(Method::DeregisterImage, |call| {
            Some(call.fail(ebb::cloud::CloudError::denied("DeregisterImage")))
        });
    assert!(s.tick(up + 61).await);
    assert!(s.tick(up + 62).await);
    let r = s.reclaim(&id).await;
    assert!(r.ended_at.is_some(), "{r:#?}");
    assert!(r.image_deleted_at.is_none());
    assert!(image_exists(&s, &image).await);
    assert_eq!(
        s.reconciler
            .provider()
            .ids_of(Method::DeregisterImage)
            .len(),
        1
    );
    let rows = s.audit(&id).await;
    assert!(rows
        .iter()
        .any(|r| r.entry.reason.contains("delete them by hand")));
    s.assert_one_outcome_per_intent(&id).await;
}
