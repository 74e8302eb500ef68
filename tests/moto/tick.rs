//! `ebb tick` end to end: the built binary against moto's EC2 server and a real Postgres.

use crate::common;

use aws_sdk_ec2::types::InstanceStateName;
use common::moto::{states, Fixture, Launch, G5};
use common::Ebb;
use serde_json::Value;
use sqlx::PgPool;

/// Research boxes run 09:00–19:00 London time on weekdays; ebb starts in the morning only what
/// it stopped. Their stops do not wait for a busy GPU: moto has no CloudWatch, and a stop that
/// waits while busy also waits while the GPU cannot be read.
pub(crate) const POLICY: &str = r#"
policies:
  - name: research-hours
    match:
      tags: {team: research}
    work_hours:
      timezone: Europe/London
      periods:
        - {days: mon-fri, start: "09:00", stop: "19:00"}
      outside_hours: stop
      start_at_open: stopped-by-ebb
      busy_defers_stop: false
"#;

/// Monday evening and Tuesday morning (London is on UTC in winter).
pub(crate) const EVENING: &str = "2026-11-30T20:00:00Z";
pub(crate) const LATER: &str = "2026-11-30T20:05:00Z";
pub(crate) const MORNING: &str = "2026-12-01T09:05:00Z";

pub(crate) struct Setup {
    pub(crate) f: Fixture,
    /// The test database as the runtime role (`ebb migrate --grant-runtime`), which every
    /// command of these tests runs as.
    url: String,
    pub(crate) policies: tempfile::TempDir,
}

impl Setup {
    pub(crate) async fn new(pool: &PgPool, region: &'static str) -> Setup {
        let policies = tempfile::tempdir().unwrap();
        std::fs::write(policies.path().join("research.yaml"), POLICY).unwrap();
        Setup {
            f: Fixture::new(region).await,
            url: common::migrated_for_runtime(pool).await,
            policies,
        }
    }

    /// `ebb` with this setup's database, region and management tag.
    pub(crate) fn ebb(&self) -> Ebb {
        Ebb::on(&self.url)
            .env("EBB_POLICIES", self.policies.path())
            .env("EBB_REGIONS", self.f.region)
            .env("EBB_MANAGED_TAG", format!("ebb:managed={}", self.f.managed))
            .env(
                "EBB_PRICES",
                concat!(env!("CARGO_MANIFEST_DIR"), "/deploy/prices.yaml"),
            )
    }

    pub(crate) fn tick(&self, at: &str, extra: &[&str]) -> String {
        let mut args = vec!["tick", "--at", at];
        args.extend_from_slice(extra);
        let out = self.ebb().run(&args);
        assert!(out.status.success(), "tick at {at} failed: {out:?}");
        String::from_utf8(out.stdout).unwrap()
    }

    /// The audit rows about `instance` with `action`, as JSON objects.
    pub(crate) fn audit(&self, instance: &str, action: &str) -> Vec<Value> {
        let out = self.ebb().run(&[
            "audit",
            "--instance",
            instance,
            "--action",
            action,
            "--format",
            "json",
        ]);
        assert!(out.status.success(), "{out:?}");
        serde_json::from_slice(&out.stdout).unwrap()
    }

    pub(crate) async fn state(&self, id: &str) -> InstanceStateName {
        states(&self.f.ec2, &[id.to_string()]).await[id].clone()
    }
}

fn outcomes(rows: &[Value]) -> Vec<(&str, bool)> {
    rows.iter()
        .map(|r| {
            (
                r["outcome"].as_str().unwrap(),
                r["dry_run"].as_bool().unwrap(),
            )
        })
        .collect()
}

#[sqlx::test(migrations = false)]
async fn evening_stops_what_matches_and_morning_starts_only_what_ebb_stopped(pool: PgPool) {
    let s = Setup::new(&pool, "eu-west-3").await;
    let research = s.f.launch(G5).await;
    let skipped =
        s.f.launch(Launch {
            tags: &[("team", "research"), ("ebb:skip", "true")],
            ..G5
        })
        .await;
    let other =
        s.f.launch(Launch {
            tags: &[("team", "other")],
            ..G5
        })
        .await;
    let stopped_by_hand = s.f.launch(G5).await;
    s.f.ec2
        .stop_instances()
        .instance_ids(&stopped_by_hand)
        .send()
        .await
        .unwrap();

    let evening = s.tick(EVENING, &[]);
    assert!(evening.contains("1 actions (1 succeeded"), "{evening}");
    assert_eq!(s.state(&research).await, InstanceStateName::Stopped);
    assert_eq!(s.state(&skipped).await, InstanceStateName::Running);
    assert_eq!(s.state(&other).await, InstanceStateName::Running);
    let stops = s.audit(&research, "stop");
    assert_eq!(outcomes(&stops), [("intent", false), ("succeeded", false)]);
    assert_eq!(stops[1]["policy"], "research-hours");
    assert!(stops[1]["request_id"].is_string(), "{stops:?}");
    // Its public IPv4 address is from Amazon's pool, which a stop gives up.
    let reason = stops[1]["reason"].as_str().unwrap();
    assert!(reason.contains("use an Elastic IP to keep one"), "{reason}");

    let later = s.tick(LATER, &[]);
    assert!(later.contains(": 4 instances, 0 actions"), "{later}");
    assert_eq!(s.audit(&research, "stop").len(), 2, "no second stop");

    let morning = s.tick(MORNING, &[]);
    assert!(morning.contains("1 actions (1 succeeded"), "{morning}");
    assert_eq!(s.state(&research).await, InstanceStateName::Running);
    assert_eq!(
        s.state(&stopped_by_hand).await,
        InstanceStateName::Stopped,
        "a person stopped it: ebb leaves it"
    );
    assert_eq!(
        outcomes(&s.audit(&research, "start")),
        [("intent", false), ("succeeded", false)]
    );
    assert!(s.audit(&stopped_by_hand, "start").is_empty());
    assert!(s.ebb().run(&["audit", "verify"]).status.success());
}

/// A group of two GPU instances whose propagated tags opt it in and match the policy is scaled
/// through the group: min and desired 0 after the close (max kept), no member ever stopped
/// (the group would replace a stopped member), and min, desired and max as before at the
/// opening; an opted-in box beside it nobody owns is stopped and started as ever. The audit log
/// holds each change's intent and outcome, and verifies. The inventory names the members' group.
#[sqlx::test(migrations = false)]
async fn an_auto_scaling_group_is_scaled_to_zero_at_the_close_and_back_at_the_opening(
    pool: PgPool,
) {
    let s = Setup::new(&pool, "ap-south-2").await;
    let managed = s.f.managed.clone();
    let group = format!("inference-{managed}");
    let members =
        s.f.auto_scaling_group(
            &group,
            2,
            &[("team", "research"), ("ebb:managed", &managed)],
        )
        .await;
    assert_eq!(members.len(), 2, "moto launched the group's members");
    let plain = s.f.launch(G5).await;
    let autoscaling = aws_sdk_autoscaling::Client::new(&common::moto::emulator(s.f.region).await);
    let capacity = || async {
        let out = autoscaling
            .describe_auto_scaling_groups()
            .auto_scaling_group_names(&group)
            .send()
            .await
            .unwrap();
        let g = &out.auto_scaling_groups()[0];
        (
            g.min_size().unwrap(),
            g.desired_capacity().unwrap(),
            g.max_size().unwrap(),
        )
    };
    assert_eq!(capacity().await, (2, 2, 2));

    // The inventory names the members' group.
    let out = s.ebb().run(&["inventory", "--format", "json"]);
    assert!(out.status.success(), "{out:?}");
    let listed: Value = serde_json::from_slice(&out.stdout).unwrap();
    let owner_of = |id: &str| {
        let all = listed["instances"].as_array().unwrap();
        all.iter().find(|i| i["id"] == id).unwrap()["owner"].clone()
    };
    assert_eq!(owner_of(&members[0])["kind"], "asg");
    assert_eq!(owner_of(&members[0])["group"], group.as_str());
    assert_eq!(owner_of(&plain), Value::Null);

    let evening = s.tick(EVENING, &[]);
    assert!(
        evening.contains(": 3 instances, 1 actions (1 succeeded"),
        "{evening}"
    );
    assert_eq!(s.state(&plain).await, InstanceStateName::Stopped);
    assert_eq!(capacity().await, (0, 0, 2), "min and desired 0, max kept");
    for member in &members {
        let state = s.state(member).await;
        assert!(
            !matches!(
                state,
                InstanceStateName::Stopping | InstanceStateName::Stopped
            ),
            "{member} was {state:?}: the group scales in, ebb never stops a member"
        );
        assert!(s.audit(member, "stop").is_empty(), "no intent for {member}");
    }
    let downs = group_audit(&s, "scale_down_group");
    assert_eq!(outcomes(&downs), [("intent", false), ("succeeded", false)]);
    assert!(
        downs[0]["reason"].as_str().unwrap().contains(&group),
        "{downs:?}"
    );

    let later = s.tick(LATER, &[]);
    assert!(later.contains(" 0 actions"), "{later}");
    assert_eq!(
        group_audit(&s, "scale_down_group").len(),
        2,
        "one scale-down"
    );

    let morning = s.tick(MORNING, &[]);
    assert!(morning.contains("1 actions (1 succeeded"), "{morning}");
    assert_eq!(s.state(&plain).await, InstanceStateName::Running);
    assert_eq!(
        capacity().await,
        (2, 2, 2),
        "the capacity found is restored"
    );
    let ups = group_audit(&s, "restore_group");
    assert_eq!(outcomes(&ups), [("intent", false), ("succeeded", false)]);
    assert!(s.ebb().run(&["audit", "verify"]).status.success());
}

/// The audit rows of the groups' changes with `action`, as JSON objects.
pub(crate) fn group_audit(s: &Setup, action: &str) -> Vec<Value> {
    let out = s
        .ebb()
        .run(&["audit", "--action", action, "--format", "json"]);
    assert!(out.status.success(), "{out:?}");
    serde_json::from_slice(&out.stdout).unwrap()
}

/// Research boxes are stopped after 30 idle minutes, and counted idle when data is missing.
const IDLE_POLICY: &str = r#"
policies:
  - name: idle-research
    match: {tags: {team: research}}
    idle: {gpu_below: 5, for: 30m, missing_metrics: idle}
"#;

/// moto has no CloudWatch in the SDK's current protocol, so GetMetricData fails there as it does
/// when CloudWatch throttles, denies or is unreachable. A failed read is not a read that found no
/// data: `missing_metrics: idle` does not apply, nothing is stopped, and the tick says why.
#[sqlx::test(migrations = false)]
async fn a_failed_gpu_read_stops_nothing_even_with_missing_metrics_idle(pool: PgPool) {
    let s = Setup::new(&pool, "ap-southeast-3").await;
    std::fs::write(s.policies.path().join("research.yaml"), IDLE_POLICY).unwrap();
    let research = s.f.launch(G5).await;

    // After moto's launch time, so that the instance has run for the whole idle window.
    let at = (chrono::Utc::now() + chrono::Duration::hours(1)).to_rfc3339();
    let out = s.ebb().run(&["tick", "--at", &at]);
    assert_eq!(
        out.status.code(),
        Some(1),
        "a failed read is a problem: {out:?}"
    );
    let summary = String::from_utf8(out.stdout).unwrap();
    assert!(summary.contains(": 1 instances, 0 actions"), "{summary}");
    assert!(
        summary.contains("1 instances with GPU utilisation unread"),
        "{summary}"
    );
    assert!(
        summary.contains(&format!(
            "cannot read GPU utilisation in {} for 1 instances: ",
            s.f.region
        )) && summary.contains("none of them is stopped for idleness"),
        "{summary}"
    );
    assert_eq!(s.state(&research).await, InstanceStateName::Running);
    assert!(s.audit(&research, "stop").is_empty());

    let store = ebb::store::Store::connect(&s.url).await.unwrap();
    let recorded = store
        .instances(false, &ebb::store::Page::first(10_000))
        .await
        .unwrap();
    let record = recorded.iter().find(|r| r.id == research).unwrap();
    assert_eq!(record.decided_action.as_deref(), Some("none"));
    assert_eq!(record.decided_code.as_deref(), Some("metrics_unreadable"));
    let reason = record.decided_reason.as_deref().unwrap();
    assert!(
        reason.contains("GPU utilisation could not be read (") && reason.contains("no idle stop"),
        "{reason}"
    );
}

#[sqlx::test(migrations = false)]
async fn a_dry_run_changes_nothing_and_is_audited_as_one(pool: PgPool) {
    let s = Setup::new(&pool, "eu-south-2").await;
    let research = s.f.launch(G5).await;
    let out = s.tick(EVENING, &["--dry-run"]);
    assert!(out.contains("1 skipped or dry run"), "{out}");
    assert_eq!(s.state(&research).await, InstanceStateName::Running);
    assert_eq!(
        outcomes(&s.audit(&research, "stop")),
        [("intent", true), ("skipped", true)]
    );
    // The same decision at the next tick is shown, not written again.
    let again = s.tick(LATER, &["--dry-run"]);
    assert!(again.contains("1 skipped or dry run"), "{again}");
    assert!(again.contains("already in the audit log"), "{again}");
    assert_eq!(s.audit(&research, "stop").len(), 2);
}

#[sqlx::test(migrations = false)]
async fn an_override_blocks_the_stop(pool: PgPool) {
    let s = Setup::new(&pool, "il-central-1").await;
    let research = s.f.launch(G5).await;
    // Overrides are for instances ebb lists: a tick in working hours lists it, and stops nothing.
    let listed = s.tick("2026-11-30T12:00:00Z", &[]);
    assert!(listed.contains("0 actions"), "{listed}");
    // Far ahead, so that it covers EVENING whatever the date is now.
    let kept = s.ebb().run(&[
        "override",
        &research,
        "--until",
        "87600h",
        "--max-override",
        "87601h",
        "--reason",
        "training run until Friday",
        "--actor",
        "alice",
    ]);
    assert!(kept.status.success(), "{kept:?}");
    let out = s.tick(EVENING, &[]);
    assert!(out.contains("0 actions"), "{out}");
    assert_eq!(s.state(&research).await, InstanceStateName::Running);
    assert!(s.audit(&research, "stop").is_empty());
}

#[sqlx::test(migrations = false)]
async fn an_interrupted_stop_is_resolved_from_the_real_state_not_repeated(pool: PgPool) {
    let s = Setup::new(&pool, "me-central-1").await;
    let research = s.f.launch(G5).await;
    let store = ebb::store::Store::connect(&s.url).await.unwrap();
    // A previous process wrote the intent and EC2 stopped the instance, then the process died
    // before writing the outcome.
    let intent = ebb::store::NewAuditEntry {
        instance: Some(research.clone()),
        region: Some(s.f.region.to_string()),
        policy: Some("research-hours".into()),
        code: Some("outside_hours".into()),
        ..ebb::store::NewAuditEntry::event(
            common::t("2026-11-30T19:00:30Z"),
            "scheduler",
            "stop",
            "outside work hours".into(),
        )
    };
    let intent = ebb::store::NewAuditEntry {
        outcome: ebb::store::Outcome::Intent,
        ..intent
    };
    store.append_audit(&[intent]).await.unwrap();
    s.f.ec2
        .stop_instances()
        .instance_ids(&research)
        .send()
        .await
        .unwrap();

    let out = s.tick(EVENING, &[]);
    assert!(out.contains("1 interrupted actions resolved"), "{out}");
    assert!(
        out.contains("0 actions"),
        "stopped already: nothing to do again\n{out}"
    );
    let rows = s.audit(&research, "stop");
    assert_eq!(outcomes(&rows), [("intent", false), ("succeeded", false)]);
    assert!(rows[1]["reason"]
        .as_str()
        .unwrap()
        .contains("found stopped"));

    // The morning start knows the stop was ebb's.
    s.tick(MORNING, &[]);
    assert_eq!(s.state(&research).await, InstanceStateName::Running);
}

#[sqlx::test(migrations = false)]
async fn invalid_policies_and_no_earlier_valid_set_mean_no_action(pool: PgPool) {
    let s = Setup::new(&pool, "af-south-1").await;
    let research = s.f.launch(G5).await;
    std::fs::write(
        s.policies.path().join("broken.yaml"),
        "policies: [ {name: x, match: 3} ]\n",
    )
    .unwrap();
    let out = s.ebb().run(&["tick", "--at", EVENING]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(err.starts_with("error: policies are not valid"), "{err}");
    assert_eq!(s.state(&research).await, InstanceStateName::Running);
    assert!(s.audit(&research, "stop").is_empty());
}

/// A webhook receiver on 127.0.0.1 that answers 500 to the first request and 200 after;
/// returns its URL and the bodies it received.
async fn receiver() -> (String, std::sync::Arc<std::sync::Mutex<Vec<Value>>>) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/hook", listener.local_addr().unwrap());
    let bodies = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let seen = bodies.clone();
    tokio::spawn(async move {
        loop {
            let (mut socket, _) = listener.accept().await.unwrap();
            let mut request = Vec::new();
            let mut buf = [0u8; 4096];
            let body = loop {
                let n = socket.read(&mut buf).await.unwrap();
                if n == 0 {
                    break None;
                }
                request.extend_from_slice(&buf[..n]);
                let text = String::from_utf8_lossy(&request).to_string();
                if let Some((head, body)) = text.split_once("\r\n\r\n") {
                    let length: usize = head
                        .lines()
                        .find_map(|l| {
                            let (k, v) = l.split_once(':')?;
                            k.eq_ignore_ascii_case("content-length")
                                .then(|| v.trim().parse().ok())?
                        })
                        .unwrap_or(0);
                    if body.len() >= length {
                        break Some(body[..length].to_string());
                    }
                }
            };
            let Some(body) = body else { continue };
            let first = {
                let mut all = seen.lock().unwrap();
                all.push(serde_json::from_str::<Value>(&body).unwrap());
                all.len() == 1
            };
            let status = if first {
                "500 Internal Server Error"
            } else {
                "200 OK"
            };
            let answer =
                format!("HTTP/1.1 {status}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
            socket.write_all(answer.as_bytes()).await.unwrap();
        }
    });
    (url, bodies)
}

#[sqlx::test(migrations = false)]
async fn a_notice_tags_the_instance_and_reaches_the_webhook_despite_a_failure(pool: PgPool) {
    let s = Setup::new(&pool, "ap-southeast-2").await;
    std::fs::write(
        s.policies.path().join("research.yaml"),
        format!("{POLICY}    notify:\n      before: 15m\n"),
    )
    .unwrap();
    let research = s.f.launch(G5).await;
    let (url, bodies) = receiver().await;
    let mut tick = Ebb::on(&s.url)
        .env("EBB_POLICIES", s.policies.path())
        .env("EBB_REGIONS", s.f.region)
        .env("EBB_MANAGED_TAG", format!("ebb:managed={}", s.f.managed))
        .env("EBB_WEBHOOK_URL", &url)
        .command(&["tick", "--at", "2026-11-30T18:50:00Z"]);
    // Off the runtime's thread, so that the receiver keeps answering meanwhile.
    let out = tokio::task::spawn_blocking(move || tick.output().unwrap())
        .await
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    assert_eq!(s.state(&research).await, InstanceStateName::Running);
    let described =
        s.f.ec2
            .describe_instances()
            .instance_ids(&research)
            .send()
            .await
            .unwrap();
    let tags = described.reservations()[0].instances()[0].tags();
    let stop_at = tags
        .iter()
        .find(|t| t.key() == Some("ebb:stop-at"))
        .and_then(|t| t.value());
    assert_eq!(stop_at, Some("2026-11-30T19:00:00Z"));
    assert_eq!(
        outcomes(&s.audit(&research, "notify")),
        [("intent", false), ("succeeded", false)]
    );
    let bodies = bodies.lock().unwrap().clone();
    assert_eq!(bodies.len(), 2, "one failure, then the retry: {bodies:?}");
    let text = bodies[1]["text"].as_str().unwrap();
    assert!(text.contains(&research), "{text}");
    assert!(text.contains("2026-11-30T19:00:00Z"), "{text}");
    assert!(
        text.contains("When it stops, the public IP will change; use an Elastic IP to keep one"),
        "{text}"
    );
}

#[sqlx::test(migrations = false)]
async fn the_cap_leaves_the_rest_for_the_next_tick_in_id_order(pool: PgPool) {
    let s = Setup::new(&pool, "ap-northeast-2").await;
    let mut ids = Vec::new();
    for _ in 0..3 {
        ids.push(s.f.launch(G5).await);
    }
    ids.sort();
    let out = s.tick(EVENING, &["--max-actions", "2"]);
    assert!(out.contains("2 actions (2 succeeded"), "{out}");
    assert!(out.contains("1 deferred by the cap"), "{out}");
    assert_eq!(s.state(&ids[0]).await, InstanceStateName::Stopped);
    assert_eq!(s.state(&ids[1]).await, InstanceStateName::Stopped);
    assert_eq!(s.state(&ids[2]).await, InstanceStateName::Running);
    let out = s.tick(LATER, &["--max-actions", "2"]);
    assert!(out.contains("1 actions (1 succeeded"), "{out}");
    assert_eq!(s.state(&ids[2]).await, InstanceStateName::Stopped);
}

/// Training moves to spot when it saves 40% and checkpointed within 30 minutes.
const SPOT_POLICY: &str = r#"
policies:
  - name: to-spot
    match:
      tags: {workload: training}
    spot:
      min_savings: 40%
      checkpoint_max_age: 30m
      instance_types: [g5.xlarge, g5.2xlarge]
      keep_original_for: 6h
"#;

/// Issue 16's scenario with the built binary: an override accepted while the move is at
/// `stopping` undoes it; the original is never terminated and the workload runs on it again.
#[sqlx::test(migrations = false)]
async fn an_override_while_a_move_stops_puts_the_workload_back_on_the_original(pool: PgPool) {
    let s = Setup::new(&pool, "us-east-1").await;
    std::fs::write(s.policies.path().join("spot.yaml"), SPOT_POLICY).unwrap();
    let original =
        s.f.launch(Launch {
            tags: &[
                ("workload", "training"),
                ("ebb:interruptible", "true"),
                ("ebb:checkpoint-at", "2026-11-30T11:55:00Z"),
            ],
            ..G5
        })
        .await;
    let migration = || {
        let out = s.ebb().run(&["spot-moves", "--format", "json"]);
        assert!(out.status.success(), "{out:?}");
        let all: Vec<Value> = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(all.len(), 1, "{all:?}");
        all[0].clone()
    };
    s.tick("2026-11-30T12:00:00Z", &[]);
    assert_eq!(migration()["state"], "planned");
    s.tick("2026-11-30T12:01:00Z", &[]);
    assert_eq!(migration()["state"], "stopping");
    assert_eq!(s.state(&original).await, InstanceStateName::Stopped);

    let kept = s.ebb().run(&[
        "override",
        &original,
        "--until",
        "87600h",
        "--max-override",
        "87601h",
        "--reason",
        "final epoch",
        "--actor",
        "li",
    ]);
    assert!(kept.status.success(), "{kept:?}");
    s.tick("2026-11-30T12:02:00Z", &[]);
    let m = migration();
    assert_eq!(m["state"], "rolled_back", "{m:#}");
    assert_eq!(s.state(&original).await, InstanceStateName::Running);
    assert_eq!(m["current"], Value::Null, "no replacement: {m:#}");

    // Long past keep_original_for, the original still runs and was never terminated.
    s.tick("2026-11-30T19:00:00Z", &[]);
    assert_eq!(s.state(&original).await, InstanceStateName::Running);
    let steps = s.audit(&original, "migrate_to_spot");
    let codes: Vec<&str> = steps.iter().filter_map(|r| r["code"].as_str()).collect();
    assert!(codes.contains(&"spot_rollback"), "{codes:?}");
    assert!(!codes.contains(&"spot_cleanup"), "{codes:?}");
    let tags =
        s.f.ec2
            .describe_tags()
            .filters(
                aws_sdk_ec2::types::Filter::builder()
                    .name("resource-id")
                    .values(&original)
                    .build(),
            )
            .send()
            .await
            .unwrap();
    assert!(
        tags.tags().iter().all(|t| t.key() != Some("ebb:migrating")),
        "the rules govern it again"
    );
}
