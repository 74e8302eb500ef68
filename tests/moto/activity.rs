//! A heartbeat keeps a GPU-idle box, through the `ebb` binary: `ebb tick` against moto for EC2
//! and the CloudWatch fake reading every GPU at 0 %. Each box says it is in use with its own
//! `ebb:active-at` tag, as a box does with a role limited to that tag key. A fresh heartbeat
//! keeps its box (`in_use`), a stale one does not, one that is not a time keeps its box
//! (`activity_unreadable`), and the kept box is stopped once its heartbeat has gone stale. A
//! box's Jupyter Server, a heartbeat posted to `ebb serve`'s API, and a CloudWatch metric of
//! the policy's own keep their boxes too.

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

/// `ebb tick --at at`: its summary.
fn tick(ebb: &Ebb, at: DateTime<Utc>) -> String {
    let at = at.to_rfc3339();
    let out = ebb.run(&["tick", "--at", &at]);
    assert!(out.status.success(), "tick at {at}: {out:?}");
    String::from_utf8(out.stdout).unwrap()
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
    let ebb = ebb_on_moto(&url, &f, policies.path(), &cloudwatch);

    tick(&ebb, at);
    assert!(cloudwatch.asked(&fresh) > 0, "the GPU was read");
    let (action, code, reason) = decided(&url, &fresh).await;
    assert_eq!(
        (action.as_str(), code.as_str()),
        ("none", "in_use"),
        "{reason}"
    );
    assert!(reason.contains("heartbeat heard at"), "{reason}");
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

/// A listener on 127.0.0.1 that answers every request with `answer` (raw HTTP), or, without
/// one, accepts and never answers: the faults a real Jupyter Server does not make. On a thread
/// of its own, since the test waits for `ebb` without yielding.
fn stub(answer: Option<&'static str>) -> String {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for mut socket in listener.incoming().flatten() {
            let mut buf = [0u8; 4096];
            let _ = socket.read(&mut buf);
            match answer {
                Some(text) => {
                    let _ = socket.write_all(text.as_bytes());
                }
                None => held.push(socket),
            }
        }
    });
    url
}

/// A GPU-idle box whose Jupyter kernel ran code within the idle rule's `for` is kept; once the
/// server shows no activity for `for` it is stopped, naming the signal. A busy kernel keeps its
/// box however long ago it started. A server that refuses the connection, refuses the token
/// (Jupyter answers 403), sends
/// JSON that is not Jupyter's, or does not answer keeps its box too (`activity_unreadable`), and
/// so does a box without the `ebb:jupyter` tag.
#[sqlx::test(migrations = false)]
async fn a_box_whose_jupyter_kernel_ran_code_within_the_window_is_kept(pool: PgPool) {
    use common::jupyter::Server;
    let f = Fixture::new("eu-north-1").await;
    let url = common::migrated_for_runtime(&pool).await;
    let policies = tempfile::tempdir().unwrap();
    let policy = POLICY.replace("[{heartbeat: {max_age: 10m}}]", "[{jupyter: {}}]");
    std::fs::write(policies.path().join("research.yaml"), policy).unwrap();
    let token = policies.path().join("jupyter-token");
    std::fs::write(&token, "t0ken\n").unwrap();

    let (used, busy, other) = tokio::join!(
        Server::start("t0ken"),
        Server::start("t0ken"),
        Server::start("another-token")
    );
    let kernel = used.kernel().await;
    used.run(&kernel, "1 + 1", false);
    let last = used.kernel_in(&kernel, "idle").await;
    let sleeping = busy.kernel().await;
    busy.run(&sleeping, "import time; time.sleep(600)", true);
    busy.kernel_in(&sleeping, "busy").await;
    let refused = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        format!("http://{}", l.local_addr().unwrap())
    };
    let malformed = stub(Some(
        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 14\r\nconnection: close\r\n\r\n{\"kernels\": 1}",
    ));
    let silent = stub(None);

    let cloudwatch = CloudWatchFake::start();
    let mut boxes = Vec::new();
    for tag in [
        Some(used.url.as_str()),
        Some(busy.url.as_str()),
        Some(other.url.as_str()),
        Some(refused.as_str()),
        Some(malformed.as_str()),
        Some(silent.as_str()),
        None,
    ] {
        let id = f.launch(G5).await;
        cloudwatch.set(&id, Reading::Value(0.0));
        if let Some(url) = tag {
            let tag = Tag::builder().key("ebb:jupyter").value(url).build();
            f.ec2
                .create_tags()
                .resources(&id)
                .tags(tag)
                .send()
                .await
                .unwrap();
        }
        boxes.push(id);
    }
    let ebb = Ebb::on(&url)
        .env("EBB_POLICIES", policies.path())
        .env("EBB_REGIONS", f.region)
        .env("EBB_MANAGED_TAG", format!("ebb:managed={}", f.managed))
        .env("AWS_ENDPOINT_URL_CLOUDWATCH", &cloudwatch.url)
        .env("EBB_JUPYTER_TOKEN_FILE", &token)
        .env(
            "EBB_PRICES",
            concat!(env!("CARGO_MANIFEST_DIR"), "/deploy/prices.yaml"),
        );

    // Five minutes after the kernel's last activity: within the 30-minute window.
    let summary = tick(&ebb, last + Duration::minutes(5));
    let unread = "5 instances kept because an activity signal could not be read";
    assert!(summary.contains(unread), "{summary}");
    let (action, code, reason) = decided(&url, &boxes[0]).await;
    assert_eq!(
        (action.as_str(), code.as_str()),
        ("none", "in_use"),
        "{reason}"
    );
    assert!(reason.contains("jupyter showed activity at"), "{reason}");
    assert_eq!(decided(&url, &boxes[1]).await.1, "in_use");
    for (id, says) in [
        (&boxes[2], "refused ebb (403 Forbidden)"),
        (&boxes[3], "Connection refused"),
        (&boxes[4], "not Jupyter's JSON"),
        (&boxes[5], "did not answer within 5s"),
        (&boxes[6], "no ebb:jupyter tag"),
    ] {
        let (action, code, reason) = decided(&url, id).await;
        assert_eq!(
            (action.as_str(), code.as_str()),
            ("none", "activity_unreadable"),
            "{reason}"
        );
        assert!(reason.contains(says), "{reason}");
        assert!(!reason.contains("t0ken"), "{reason}");
    }

    // 35 minutes after it, nothing more ran: stopped, naming the signal. The busy kernel
    // still keeps its box.
    tick(&ebb, last + Duration::minutes(35));
    let (action, code, reason) = decided(&url, &boxes[0]).await;
    assert_eq!(
        (action.as_str(), code.as_str()),
        ("stop", "idle"),
        "{reason}"
    );
    assert!(
        reason.contains("no use in the window shown by jupyter: last use"),
        "{reason}"
    );
    assert_ne!(state(&f, &boxes[0]).await, InstanceStateName::Running);
    assert_eq!(decided(&url, &boxes[1]).await.1, "in_use");
    for id in &boxes[1..] {
        assert_eq!(state(&f, id).await, InstanceStateName::Running, "{id}");
    }
}

/// The API heartbeat through the binaries: `ebb heartbeat-token` prints a box's token, and
/// `ebb serve` (with `EBB_HEARTBEAT_KEY_FILE`) keeps the heartbeat the box posts with it, which
/// keeps the GPU-idle box running at the next tick. The box matches the policy only once it
/// has posted, so that serve's first tick, which comes at once, does not stop it before.
#[sqlx::test(migrations = false)]
async fn ebb_serve_keeps_a_heartbeat_posted_with_the_box_s_own_token(pool: PgPool) {
    const TOKEN: &str = "ops-token-0123456789";
    let f = Fixture::new("eu-west-2").await;
    let url = common::migrated_for_runtime(&pool).await;
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("policies")).unwrap();
    std::fs::write(dir.path().join("policies/research.yaml"), POLICY).unwrap();
    let key = dir.path().join("heartbeat.key");
    std::fs::write(&key, "k3y-of-thirty-two-characters-or-more\n").unwrap();
    let cloudwatch = CloudWatchFake::start();
    let quiet = common::moto::Launch {
        tags: &[("team", "elsewhere")],
        ..G5
    };
    let id = f.launch(quiet).await;
    cloudwatch.set(&id, Reading::Value(0.0));

    let printed = Ebb::new().run(&[
        "heartbeat-token",
        &id,
        "--heartbeat-key-file",
        key.to_str().unwrap(),
    ]);
    assert!(printed.status.success(), "{printed:?}");
    let token = String::from_utf8(printed.stdout)
        .unwrap()
        .trim()
        .to_string();

    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let api = format!("http://127.0.0.1:{port}");
    let mut serve = std::process::Command::new(env!("CARGO_BIN_EXE_ebb"))
        .arg("serve")
        .env("DATABASE_URL", &url)
        .env("EBB_POLICIES", dir.path().join("policies"))
        .env("EBB_REGIONS", f.region)
        .env("EBB_MANAGED_TAG", format!("ebb:managed={}", f.managed))
        .env("AWS_ENDPOINT_URL_CLOUDWATCH", &cloudwatch.url)
        .env("EBB_TICK", "3600s")
        .env("EBB_LISTEN", format!("127.0.0.1:{port}"))
        .env("EBB_API_TOKENS", format!("ops:{TOKEN}"))
        .env("EBB_HEARTBEAT_KEY_FILE", &key)
        .env("EBB_LOG", "warn")
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let http = reqwest::Client::new();
    let posted = common::eventually(
        std::time::Duration::from_secs(60),
        std::time::Duration::from_millis(100),
        async || {
            let post = http.post(format!("{api}/v1/instances/{id}/activity"));
            let answer = post.bearer_auth(&token).send().await.ok()?;
            Some(answer.status())
        },
    )
    .await;
    assert_eq!(posted, Some(reqwest::StatusCode::NO_CONTENT));

    // Now it matches the policy: the tick asked for finds it GPU-idle but in use.
    let tag = Tag::builder().key("team").value("research").build();
    f.ec2
        .create_tags()
        .resources(&id)
        .tags(tag)
        .send()
        .await
        .unwrap();
    let asked = http
        .post(format!("{api}/v1/tick"))
        .bearer_auth(TOKEN)
        .send()
        .await;
    assert_eq!(asked.unwrap().status(), reqwest::StatusCode::ACCEPTED);
    let decided = common::eventually(
        std::time::Duration::from_secs(60),
        std::time::Duration::from_millis(200),
        async || {
            let (_, code, reason) = decided_if_any(&url, &id).await?;
            (code != "no_policy").then_some((code, reason))
        },
    )
    .await;
    let _ = serve.kill();
    let _ = serve.wait();
    let (code, reason) = decided.expect("no tick decided for the box");
    assert_eq!(code, "in_use", "{reason}");
    assert!(reason.contains("heartbeat heard at"), "{reason}");
    assert_eq!(state(&f, &id).await, InstanceStateName::Running);
}

/// What the last tick decided for `id`, once one has.
async fn decided_if_any(url: &str, id: &str) -> Option<(String, String, String)> {
    let store = ebb::store::Store::connect(url).await.ok()?;
    let page = ebb::store::Page::first(10_000);
    let recorded = store.instances(false, &page).await.ok()?;
    let r = recorded.into_iter().find(|r| r.id == id)?;
    Some((r.decided_action?, r.decided_code?, r.decided_reason?))
}

/// `ebb` on `url`, acting on `f`'s instances under the policies in `policies`, its GPUs read
/// from `cloudwatch`.
fn ebb_on_moto(
    url: &str,
    f: &Fixture,
    policies: &std::path::Path,
    cloudwatch: &CloudWatchFake,
) -> Ebb {
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

/// Asserts that the last tick decided `want` (action, code) for `id`, for a reason that says
/// `says`.
async fn assert_decided(url: &str, id: &str, want: (&str, &str), says: &str) {
    let (action, code, reason) = decided(url, id).await;
    assert_eq!((action.as_str(), code.as_str()), want, "{reason}");
    assert!(reason.contains(says), "{reason}");
}

const CLOUDWATCH_POLICY: &str = r#"
policies:
  - name: idle-research
    match: {tags: {team: research}}
    idle:
      gpu_below: 5
      for: 30m
      activity:
        - cloudwatch:
            name: ssh
            namespace: CWAgent
            metric: procstat_lookup_pid_count
            dimensions: {pattern: "sshd: .*@", pid_finder: native}
"#;

/// A CloudWatch metric of the policy's own (the agent's process count of SSH sessions) keeps a
/// GPU-idle box while it showed use within `for`, then lets it be stopped, naming the signal;
/// a query CloudWatch failed, and a metric the box does not publish with the policy's
/// dimensions, keep their boxes (`activity_unreadable`).
#[sqlx::test(migrations = false)]
async fn a_cloudwatch_metric_keeps_a_gpu_idle_box_while_it_shows_use(pool: PgPool) {
    let f = Fixture::new("ap-south-1").await;
    let url = common::migrated_for_runtime(&pool).await;
    let policies = tempfile::tempdir().unwrap();
    std::fs::write(policies.path().join("research.yaml"), CLOUDWATCH_POLICY).unwrap();
    let cloudwatch = CloudWatchFake::start();
    let (used, quiet, failed, elsewhere) = (
        f.launch(G5).await,
        f.launch(G5).await,
        f.launch(G5).await,
        f.launch(G5).await,
    );
    let at = Utc::now() + Duration::hours(1);
    let sessions = ("CWAgent", "procstat_lookup_pid_count");
    let ours = [("pattern", "sshd: .*@"), ("pid_finder", "native")];
    // A session until ten minutes before the tick, none after.
    let ended = (at - Duration::minutes(10)).timestamp();
    let changed = Reading::Changed {
        before: 1.0,
        at: ended,
        after: 0.0,
    };
    cloudwatch.set_metric(&used, sessions, &ours, changed);
    cloudwatch.set_metric(&quiet, sessions, &ours, Reading::Value(0.0));
    cloudwatch.set_metric(&failed, sessions, &ours, Reading::Failed("InternalError"));
    let theirs = [("pattern", "jupyter-lab"), ("pid_finder", "native")];
    cloudwatch.set_metric(&elsewhere, sessions, &theirs, Reading::Value(3.0));
    for id in [&used, &quiet, &failed, &elsewhere] {
        cloudwatch.set(id, Reading::Value(0.0));
    }
    let ebb = ebb_on_moto(&url, &f, policies.path(), &cloudwatch);

    tick(&ebb, at);
    assert_decided(&url, &used, ("none", "in_use"), "in use: ssh above 0 at").await;
    assert_eq!(state(&f, &used).await, InstanceStateName::Running);

    assert_decided(&url, &quiet, ("stop", "idle"), "ssh: no use seen").await;
    assert_ne!(state(&f, &quiet).await, InstanceStateName::Running);

    assert_decided(
        &url,
        &failed,
        ("none", "activity_unreadable"),
        "InternalError",
    )
    .await;
    assert_decided(
        &url,
        &elsewhere,
        ("none", "activity_unreadable"),
        "readings incomplete",
    )
    .await;
    for id in [&failed, &elsewhere] {
        assert_eq!(state(&f, id).await, InstanceStateName::Running);
    }

    // Half an hour on, the last session ended 40 minutes ago: the box is stopped, and the
    // reason names the signal.
    tick(&ebb, at + Duration::minutes(30));
    assert_decided(
        &url,
        &used,
        ("stop", "idle"),
        "no use in the window shown by ssh",
    )
    .await;
    assert_ne!(state(&f, &used).await, InstanceStateName::Running);
    assert_eq!(state(&f, &failed).await, InstanceStateName::Running);
}
