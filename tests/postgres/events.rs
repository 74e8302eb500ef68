//! Events (`EBB_EVENTS_URL`): every outcome of the audit log reaches a local receiver as a
//! CloudEvent that fits `deploy/events.schema.json`, at least once (a redelivery with the same
//! `id`), in `seq` order for each instance: across a SIGKILL of `ebb serve` with events
//! pending, and across a receiver that fails and then recovers.

use crate::common;

use common::events::{schema_problems, Answer, Receiver};
use common::time::{on_paused_time, watchdog};
use common::Ebb;
use ebb::control::Control;
use ebb::serve::{
    BackgroundTask, EventSender, EventsConfig, EventsError, EventsStatus, FIRST_BACKOFF,
    MAX_BACKOFF,
};
use ebb::store::{verify_rows, AuditEntry, AuditFilter, NewAuditEntry, Outcome, Store};
use serde_json::Value;
use sqlx::PgPool;
use std::collections::{BTreeMap, BTreeSet};
use std::process::{Child, Stdio};
use std::sync::Arc;
use std::time::Duration;

/// How long another process (`ebb serve`) may take to do what a step waits for.
const BOUND: Duration = Duration::from_secs(90);

/// A running `ebb serve`; killed when dropped.
struct Serve(Child);

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `ebb serve` on the demo's simulated fleet at 3000 times real speed (a 5-minute tick every
/// 0.1 s), posting events to `receiver`.
fn serve(url: &str, receiver: &Receiver) -> Serve {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let child = Ebb::on(url)
        .env("EBB_CLOUD", "sim:deploy/demo-fleet.yaml")
        .env("EBB_POLICIES", "policies")
        .env("EBB_PRICES", "deploy/prices.yaml")
        .env("EBB_CLOCK_START", "2026-11-30T10:00:00Z")
        .env("EBB_CLOCK_SPEED", "3000")
        .env("EBB_TICK", "5m")
        .env("EBB_LISTEN", format!("127.0.0.1:{port}"))
        .env("EBB_EVENTS_URL", &receiver.url)
        .env("EBB_EVENTS_SOURCE", "urn:ebb:test")
        .env_remove("EBB_WEBHOOK_URL")
        .env_remove("EBB_AUDIT_KEY_FILE")
        .env_remove("EBB_AUDIT_CHECKPOINTS")
        .command(&["serve"])
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    Serve(child)
}

/// The rows that are events: outcomes of things done (no intent, no dry run).
fn outcomes(rows: &[AuditEntry]) -> Vec<&AuditEntry> {
    rows.iter()
        .filter(|r| r.entry.outcome != Outcome::Intent && !r.entry.dry_run)
        .collect()
}

fn seq(event: &Value) -> i64 {
    event["data"]["seq"].as_i64().unwrap()
}

/// Checks what `receiver` got against the audit log's `rows`: each event fits the schema and
/// is its row's; a row posted twice carries the same `id` and content; each instance's events
/// arrive in `seq` order. Returns the `seq`s delivered (answered 200) and the ids posted more
/// than once.
fn check(receiver: &Receiver, rows: &[AuditEntry]) -> (BTreeSet<i64>, BTreeSet<String>) {
    let by_seq: BTreeMap<i64, &AuditEntry> = rows.iter().map(|r| (r.seq, r)).collect();
    let mut first: BTreeMap<String, Value> = BTreeMap::new();
    let mut repeated = BTreeSet::new();
    let mut last_of: BTreeMap<String, i64> = BTreeMap::new();
    for post in receiver.posts() {
        let (event, content_type) = (post.event, post.content_type);
        assert!(
            content_type.starts_with("application/cloudevents+json"),
            "{content_type}"
        );
        if let Some(problem) = schema_problems(&event) {
            panic!("{event:#}\ndoes not fit deploy/events.schema.json: {problem}");
        }
        assert_eq!(event["source"], "urn:ebb:test");
        let row = by_seq
            .get(&seq(&event))
            .unwrap_or_else(|| panic!("no audit row for {event:#}"));
        assert_eq!(event["id"], ebb::store::hex(&row.hash), "{event:#}");
        assert_eq!(event["data"]["hash"], event["id"]);
        assert_eq!(event["data"]["action"], row.entry.action);
        assert_ne!(row.entry.outcome, Outcome::Intent, "{event:#}");
        let id = event["id"].as_str().unwrap().to_string();
        match first.get(&id) {
            // A redelivery: the same event again, nothing else.
            Some(earlier) => {
                assert_eq!(*earlier, event, "two events share the id {id}");
                repeated.insert(id);
            }
            None => {
                first.insert(id, event.clone());
            }
        }
        let subject = event["subject"].as_str().unwrap_or("").to_string();
        let last = last_of.entry(subject.clone()).or_insert(0);
        assert!(
            seq(&event) >= *last,
            "{subject}: row {} arrived after row {last}",
            seq(&event)
        );
        *last = seq(&event);
    }
    let delivered = receiver.taken().iter().map(seq).collect();
    // The events' data is the log's rows: its chain verifies where rows are consecutive.
    let exported: Vec<AuditEntry> = {
        let items: Vec<&Value> = first.values().map(|e| &e["data"]).collect();
        let mut entries =
            ebb::output::parse_audit_export(&serde_json::to_string(&items).unwrap()).unwrap();
        entries.sort_by_key(|e| e.seq);
        entries
    };
    assert!(
        matches!(
            verify_rows(&exported),
            ebb::store::Verification::Intact { .. }
        ),
        "{:?}",
        verify_rows(&exported)
    );
    (delivered, repeated)
}

#[sqlx::test(migrations = false)]
async fn events_pending_when_serve_is_killed_are_delivered_once_after_its_restart(pool: PgPool) {
    let store = Store::from_pool(pool.clone());
    store.migrate().await.unwrap();
    let url = common::database_url(&pool);
    let receiver = Receiver::start(Answer::Take).await;
    let all_rows = async || store.audit(&AuditFilter::default()).await.unwrap();

    let first = serve(&url, &receiver);
    let taken = common::eventually(BOUND, Duration::from_millis(50), async || {
        (receiver.events().len() >= 5).then_some(())
    })
    .await;
    assert!(taken.is_some(), "no events from ebb serve");
    // The receiver stops answering: one post hangs, and the outcomes after it wait.
    let hung = receiver.answer(Answer::Hang) + 1;
    let pending = common::eventually(BOUND, Duration::from_millis(50), async || {
        let waiting = outcomes(&all_rows().await).len();
        (receiver.events().len() >= hung && waiting >= hung + 5).then_some(())
    })
    .await;
    assert!(pending.is_some(), "no events pending");
    drop(first);
    let rows = all_rows().await;
    let received_before = receiver.events().len();
    let cursor = store.event_cursor().await.unwrap().unwrap();
    let waiting: Vec<i64> = outcomes(&rows)
        .iter()
        .map(|r| r.seq)
        .filter(|s| *s > cursor)
        .collect();
    assert!(waiting.len() >= 5, "pending at the kill: {waiting:?}");
    let hung_seq = seq(&receiver.events()[hung - 1]);
    assert_eq!(
        waiting[0], hung_seq,
        "the hung event is the first not delivered"
    );
    let head_at_kill = rows.last().unwrap().seq;

    let _ = receiver.answer(Answer::Take);
    let second = serve(&url, &receiver);
    // The restarted replica acts too: wait until it has, then for every outcome so far.
    let more = common::eventually(BOUND, Duration::from_millis(50), async || {
        (all_rows().await.last().unwrap().seq > head_at_kill + 20).then_some(())
    })
    .await;
    assert!(more.is_some(), "the restarted ebb serve did nothing");
    let rows = all_rows().await;
    let due: BTreeSet<i64> = outcomes(&rows).iter().map(|r| r.seq).collect();
    // Delivered: answered 200. The hung post was received but never answered, so it counts
    // only if it is posted again.
    let caught_up = common::eventually(BOUND, Duration::from_millis(50), async || {
        let got: BTreeSet<i64> = receiver.taken().iter().map(seq).collect();
        due.is_subset(&got).then_some(())
    })
    .await;
    drop(second);
    let rows = all_rows().await;
    let (delivered, repeated) = check(&receiver, &rows);
    assert!(
        caught_up.is_some(),
        "not delivered: {:?}",
        due.difference(&delivered)
    );
    // Nothing but outcomes, and only the post in flight at the kill came twice.
    let outcome_seqs: BTreeSet<i64> = outcomes(&rows).iter().map(|r| r.seq).collect();
    assert!(delivered.is_subset(&outcome_seqs));
    let hung_id = receiver.events()[hung - 1]["id"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        repeated.iter().all(|id| *id == hung_id),
        "delivered twice: {repeated:?}"
    );
    let types: BTreeSet<String> = receiver
        .events()
        .iter()
        .map(|e| e["type"].as_str().unwrap().to_string())
        .collect();
    // Which of the demo's actions fall in the run depends on how fast the machine runs it:
    // a stop or a hibernation at least.
    assert!(
        types.contains("dev.ebb.instance.stopped") || types.contains("dev.ebb.instance.hibernated"),
        "{types:?}"
    );
    println!(
        "{} events received before the kill, {} pending then (from row {hung_seq}); after the \
         restart every one of {} outcomes delivered, {} twice (the hung post); types {types:?}",
        received_before,
        waiting.len(),
        due.len(),
        repeated.len()
    );
}

/// An outcome of `action` on `instance` at minute `minute`.
fn outcome(instance: &str, action: &str, minute: i64) -> NewAuditEntry {
    let at = common::t("2026-11-30T20:00:00Z") + chrono::Duration::minutes(minute);
    NewAuditEntry {
        instance: Some(instance.to_string()),
        region: Some("us-east-1".to_string()),
        policy: Some("research".to_string()),
        ..NewAuditEntry::event(at, "scheduler", action, format!("{action} at {minute}"))
    }
}

#[sqlx::test(migrations = false)]
async fn a_receiver_failing_then_recovering_gets_every_event_in_order(pool: PgPool) {
    Store::from_pool(pool.clone()).migrate().await.unwrap();
    let url = common::database_url(&pool);
    on_paused_time(|| async {
        watchdog(
            BOUND,
            "events to a failing receiver",
            fail_then_recover(&url),
        )
        .await
    });
}

/// Outcomes of three instances, a receiver that answers 500 ten times and then 200, and the
/// event sender's activations as the driver would run them.
async fn fail_then_recover(url: &str) {
    let store = Store::connect(url).await.unwrap();
    // Made when serve starts: rows already in the log are history, not events.
    store
        .append_audit(&[outcome("i-old", "stop", 0)])
        .await
        .unwrap();
    assert_eq!(store.start_event_cursor().await.unwrap(), 1);
    let mut rows = Vec::new();
    for minute in 1..=12 {
        let instance = ["i-a", "i-b", "i-c"][minute as usize % 3];
        let action = ["stop", "start", "notify"][minute as usize % 3];
        let mut intent = outcome(instance, action, minute);
        intent.outcome = Outcome::Intent;
        let written = store.append_audit(&[intent]).await.unwrap();
        let mut done = outcome(instance, action, minute);
        done.intent_seq = Some(written[0].seq);
        done.outcome = if minute == 4 {
            Outcome::Failed
        } else {
            Outcome::Succeeded
        };
        rows.extend(store.append_audit(&[done]).await.unwrap());
    }
    let mut dry = outcome("i-a", "stop", 13);
    dry.dry_run = true;
    dry.outcome = Outcome::Skipped;
    store.append_audit(&[dry]).await.unwrap();

    let receiver = Receiver::start(Answer::Fail).await;
    let control = Arc::new(Control::default());
    let config = EventsConfig {
        url: receiver.url.parse().unwrap(),
        source: "urn:ebb:test".to_string(),
    };
    let mut sender = EventSender::new(store.clone(), control.clone(), config);
    // Only the leader sends.
    assert_eq!(sender.activate().await.unwrap(), EventsStatus::NotLeader);
    assert!(receiver.events().is_empty());
    control.set_leader(true);
    // Each failure retries the same first event, after a back-off that doubles to a cap.
    let mut waits = Vec::new();
    for _ in 0..10 {
        match sender.activate().await {
            Err(EventsError::NotDelivered { seq, last, .. }) => {
                assert_eq!(seq, rows[0].seq);
                assert_eq!(last, "HTTP 500 Internal Server Error");
            }
            other => panic!("{other:?}"),
        }
        waits.push(sender.retry_after_failure().unwrap());
    }
    assert_eq!(waits[0], FIRST_BACKOFF);
    assert_eq!(waits[1], FIRST_BACKOFF * 2);
    assert!(waits.windows(2).all(|w| w[1] >= w[0]), "{waits:?}");
    assert_eq!(*waits.last().unwrap(), MAX_BACKOFF);
    // Up to the first event's intent: handled, as no event.
    assert_eq!(store.event_cursor().await.unwrap(), Some(rows[0].seq - 1));

    let _ = receiver.answer(Answer::Take);
    let through = rows.last().unwrap().seq + 1;
    let status = sender.activate().await.unwrap();
    assert_eq!(status, EventsStatus::Delivered { sent: 12, through });
    assert_eq!(sender.retry_after_failure(), Some(FIRST_BACKOFF));
    // Nothing new: nothing sent again.
    let again = sender.activate().await.unwrap();
    assert_eq!(again, EventsStatus::Delivered { sent: 0, through });
    // The ten refused posts, then the twelve taken.
    assert_eq!(receiver.events().len(), 22);
    let taken = receiver.taken();
    let seqs: Vec<i64> = taken.iter().map(seq).collect();
    let expected: Vec<i64> = rows.iter().map(|r| r.seq).collect();
    assert_eq!(seqs, expected, "every outcome once, in order");
    for event in &taken {
        assert_eq!(schema_problems(event), None, "{event:#}");
    }
    let types: Vec<&str> = taken.iter().map(|e| e["type"].as_str().unwrap()).collect();
    assert_eq!(
        types[..4],
        [
            "dev.ebb.instance.started",
            "dev.ebb.instance.notified",
            "dev.ebb.instance.stopped",
            "dev.ebb.instance.start_failed"
        ]
    );
}
