//! The demo path end to end: `ebb serve` on the simulated demo fleet (`deploy/demo-fleet.yaml`)
//! with the example policies (`policies/`), as `scripts/run` starts it, through a simulated day
//! at 3000 times real speed; then the audit log is checked.
//!
//! The control plane runs in this process on paused tokio time (see [`common::time`]), and the
//! test moves the clock one tick interval at a time, only once the tick before has finished. So
//! every tick decides at an exact five-minute instant of the simulated day and the simulated
//! fleet's clock stands still while it runs: the outcome does not depend on how fast the machine
//! is, and the day takes seconds.

use crate::common;

use chrono::{DateTime, Utc};
use common::replica::Replica;
use common::t;
use common::time::{on_paused_time, watchdog};
use ebb::advise::reservations::reservation_use;
use ebb::advise::Period;
use ebb::api::Tokens;
use ebb::clock::Clock;
use ebb::cloud::sim::SimProvider;
use ebb::fleet::Capacity;
use ebb::reconcile::{Options, PolicySource, Reconciler};
use ebb::store::{AuditEntry, AuditFilter, InstanceRecord, Outcome, Store, Verification};
use ebb::{snapshot, spot};
use sqlx::PgPool;
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

/// Monday 10:00 UTC: 18:00 in Shanghai, 11:00 in Berlin, 05:00 in New York.
const START: &str = "2026-11-30T10:00:00Z";
/// The simulated day ends on Tuesday 13:00 UTC, after New York's morning.
const END: &str = "2026-12-01T13:00:00Z";
const SPEED: f64 = 3000.0;
/// `scripts/run`'s tick interval, in simulated time.
const TICK: Duration = Duration::from_secs(5 * 60);

/// The succeeded actions `action` on `instance`, by when.
fn done<'a>(rows: &'a [AuditEntry], instance: &str, action: &str) -> Vec<&'a AuditEntry> {
    rows.iter()
        .filter(|r| {
            r.entry.instance.as_deref() == Some(instance)
                && r.entry.action == action
                && r.entry.outcome == Outcome::Succeeded
        })
        .collect()
}

fn between(rows: &[&AuditEntry], from: &str, to: &str) -> usize {
    rows.iter()
        .filter(|r| t(from) <= r.entry.at && r.entry.at < t(to))
        .count()
}

#[sqlx::test(migrations = false)]
async fn a_simulated_day_of_the_demo_fleet(pool: PgPool) {
    let url = common::database_url(&pool);
    on_paused_time(|| serve_the_day(&url));
    let store = Store::from_pool(pool);

    let rows = store.audit(&AuditFilter::default()).await.unwrap();
    let last: DateTime<Utc> = rows.iter().map(|r| r.entry.at).max().unwrap();
    assert!(
        last >= t("2026-12-01T12:00:00Z"),
        "the day was not simulated to its end: {last}"
    );
    let research: Vec<String> = (1..=8).map(|n| format!("i-0research0{n}")).collect();

    // Evening in Shanghai (20:00 = 12:00 UTC): notice, then stop, of every research dev box.
    for id in &research[..7] {
        let stops = done(&rows, id, "stop");
        assert_eq!(
            between(&stops, "2026-11-30T11:59:00Z", "2026-11-30T12:30:00Z"),
            1,
            "{id}"
        );
        assert_eq!(
            between(
                &done(&rows, id, "notify"),
                "2026-11-30T11:44:00Z",
                "2026-11-30T12:00:00Z"
            ),
            1,
            "{id}"
        );
    }
    // Still training at the close: its stop waits until the run ends (14:00 UTC).
    let busy = done(&rows, "i-0research08", "stop");
    assert_eq!(
        between(&busy, "2026-11-30T11:59:00Z", "2026-11-30T14:00:00Z"),
        0,
        "{busy:?}"
    );
    assert_eq!(
        between(&busy, "2026-11-30T14:00:00Z", "2026-11-30T14:30:00Z"),
        1,
        "{busy:?}"
    );

    // Morning in Shanghai (08:30 = 00:30 UTC): exactly what ebb stopped starts again.
    let started: Vec<&str> = rows
        .iter()
        .filter(|r| {
            r.entry.action == "start"
                && r.entry.outcome == Outcome::Succeeded
                && t("2026-12-01T00:29:00Z") <= r.entry.at
                && r.entry.at < t("2026-12-01T01:00:00Z")
        })
        .filter_map(|r| r.entry.instance.as_deref())
        .collect();
    assert_eq!(started, research);

    // Boxes forgotten after lunch in Los Angeles are stopped by the idle rule.
    for id in ["i-0notebook01", "i-0notebook02", "i-0notebook03"] {
        let idle = done(&rows, id, "stop");
        let afternoon = idle
            .iter()
            .find(|r| {
                t("2026-11-30T20:30:00Z") <= r.entry.at && r.entry.at < t("2026-12-01T00:00:00Z")
            })
            .unwrap_or_else(|| panic!("{id} was not stopped in the afternoon: {idle:?}"));
        assert_eq!(afternoon.entry.policy.as_deref(), Some("notebooks-idle"));
        assert_eq!(afternoon.entry.code.as_deref(), Some("idle"));
    }

    // A start refused for lack of capacity is tried again at the next tick.
    let platform3: Vec<(Outcome, DateTime<Utc>)> = rows
        .iter()
        .filter(|r| {
            r.entry.instance.as_deref() == Some("i-0platform03") && r.entry.action == "start"
        })
        .filter(|r| r.entry.outcome != Outcome::Intent)
        .map(|r| (r.entry.outcome, r.entry.at))
        .collect();
    assert_eq!(platform3[0].0, Outcome::Failed, "{platform3:?}");
    assert_eq!(platform3[1].0, Outcome::Succeeded, "{platform3:?}");
    assert!(rows.iter().any(|r| r
        .entry
        .error
        .as_deref()
        .is_some_and(|e| e.contains("InsufficientInstanceCapacity"))));

    // The checkpointing training job moves to spot, step by step, on the first morning.
    let migrations = store.migrations().await.unwrap();
    assert_eq!(migrations.len(), 1, "{migrations:#?}");
    let m = &migrations[0];
    assert_eq!(
        (m.original.as_str(), m.state.as_str()),
        ("i-0train01", "done"),
        "{m:#?}"
    );
    assert_eq!(m.market.as_str(), "spot");
    assert!(spot::savings(m, last) > 0.0);

    // Protected, unmatched and person-stopped instances are never touched.
    for id in [
        "i-0research09",
        "i-0research10",
        "i-0notebook07",
        "i-0notebook08",
        "i-0infra01",
        "i-0infra02",
    ] {
        let touched: Vec<&AuditEntry> = rows
            .iter()
            .filter(|r| {
                r.entry.instance.as_deref() == Some(id) && r.entry.outcome != Outcome::Intent
            })
            .collect();
        assert!(touched.is_empty(), "{id}: {touched:?}");
    }
    // The reservation someone holds for the platform team is read hourly; no box is made to
    // start into it, so both its places go unused the whole day, and the platform's running
    // g6.xlarge boxes could have used them.
    let day = Period {
        from: t("2026-11-30T10:00:00Z"),
        to: t("2026-12-01T10:00:00Z"),
    };
    let reads = store.capacity_reads(day.from, day.to).await.unwrap();
    let used = reservation_use(&reads, &day, &BTreeMap::new());
    let read = used.hours_read["us-east-1"];
    assert!(read > 23.9, "{read} hours of the day read");
    let held = used
        .idle
        .iter()
        .find(|r| r.last_read.id == "cr-0demo0platform01")
        .unwrap_or_else(|| panic!("{used:?}"));
    assert!((held.unused_hours - 2.0 * read).abs() < 1e-6, "{held:?}");
    assert!(
        held.could_use.contains(&"i-0platform01".to_string()),
        "{held:?}"
    );

    the_inference_group_slept_through_the_night(&store, &rows).await;
    assert!(store.pending_intents().await.unwrap().is_empty());
    assert!(matches!(
        store.verify_audit().await.unwrap(),
        Verification::Intact { .. }
    ));
}

/// The inference group (eu-central-1, Berlin's 08:00-19:00): scaled to zero through the group at
/// the close (18:00 UTC), its members ended by the group and never stopped one by one, and back
/// to the capacity ebb found at the opening (07:00 UTC), with new members; each change an intent
/// and one outcome.
async fn the_inference_group_slept_through_the_night(store: &Store, rows: &[AuditEntry]) {
    let changes: Vec<(&str, Outcome, DateTime<Utc>)> = rows
        .iter()
        .filter(|r| r.entry.action.ends_with("_group"))
        .map(|r| (r.entry.action.as_str(), r.entry.outcome, r.entry.at))
        .collect();
    let (close, open) = (t("2026-11-30T18:00:00Z"), t("2026-12-01T07:00:00Z"));
    assert_eq!(
        changes,
        [
            ("scale_down_group", Outcome::Intent, close),
            ("scale_down_group", Outcome::Succeeded, close),
            ("restore_group", Outcome::Intent, open),
            ("restore_group", Outcome::Succeeded, open),
        ]
    );
    let down = rows
        .iter()
        .find(|r| r.entry.action == "scale_down_group")
        .unwrap();
    assert_eq!(down.entry.policy.as_deref(), Some("inference-office-hours"));
    assert!(
        down.entry
            .reason
            .contains("min 2 desired 2 max 4 to min 0 desired 0 max 4"),
        "{down:?}"
    );
    let remembered = store.groups_of("eu-central-1").await.unwrap();
    let group = &remembered["inference-eu"];
    assert_eq!(group.memory.up, UP);
    assert_eq!(group.memory.down_since, None, "up again");

    // Its capacity over time, as the ticks listed it.
    let sizes: Vec<(DateTime<Utc>, Capacity)> = store
        .group_sizes("eu-central-1", "inference-eu", t(START), t(END))
        .await
        .unwrap()
        .into_iter()
        .map(|s| (s.at, s.capacity))
        .collect();
    let zero = Capacity {
        min: 0,
        desired: 0,
        max: 4,
    };
    let next = |at| at + chrono::Duration::minutes(5);
    assert_eq!(
        sizes,
        [(t(START), UP), (next(close), zero), (next(open), UP)]
    );

    // The members: the two of the evening ended by the group, two new ones in the morning, and
    // none of them ever stopping or stopped, or acted on alone.
    let members: Vec<InstanceRecord> = store
        .instances(true, &ebb::store::Page::first(10_000))
        .await
        .unwrap()
        .into_iter()
        .filter(|i| {
            i.tags
                .0
                .get("aws:autoscaling:groupName")
                .map(String::as_str)
                == Some("inference-eu")
        })
        .collect();
    let states: Vec<(&str, &str)> = members
        .iter()
        .map(|i| (i.id.as_str(), i.state.as_str()))
        .collect();
    assert_eq!(states.len(), 4, "{states:?}");
    for old in ["i-0infer01", "i-0infer02"] {
        assert!(states.contains(&(old, "terminated")), "{states:?}");
    }
    assert_eq!(
        states.iter().filter(|(_, s)| *s == "running").count(),
        2,
        "{states:?}"
    );
    for member in &members {
        let events = store.instance_events(&member.id, 100).await.unwrap();
        assert!(
            events
                .iter()
                .all(|e| e.to_state != "stopping" && e.to_state != "stopped"),
            "{}: {events:?}",
            member.id
        );
        let acted: Vec<&AuditEntry> = rows
            .iter()
            .filter(|r| r.entry.instance.as_deref() == Some(member.id.as_str()))
            .collect();
        assert!(acted.is_empty(), "{}: {acted:?}", member.id);
        assert_eq!(
            member.decided_code.as_deref(),
            Some("owned_by_asg"),
            "{member:?}"
        );
    }
}

/// The inference group's capacity in the demo fleet.
const UP: Capacity = Capacity {
    min: 2,
    desired: 2,
    max: 4,
};

/// Runs `ebb serve` as `scripts/run` does through the simulated day, one tick at a time, and
/// checks the plan through the API at its end.
async fn serve_the_day(url: &str) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    // What `ebb serve` builds for EBB_CLOUD=sim:deploy/demo-fleet.yaml, EBB_POLICIES=policies.
    let store = Store::connect(url).await.unwrap();
    store.migrate().await.unwrap();
    let clock = Clock::simulated(t(START), SPEED);
    let seed = snapshot::load_simulated(&root.join("deploy/demo-fleet.yaml")).unwrap();
    let reconciler = Reconciler::new(
        SimProvider::new(seed.fleet, seed.behaviours, clock)
            .with_groups(seed.groups)
            .with_held_reservations(seed.held),
        store,
        Arc::new(PolicySource::new(vec![root.join("policies")])),
        Options::default(),
    );
    let serve = Replica::start("demo", reconciler, TICK, clock, Tokens::default());

    // Each tick at its instant, the next one only once it is done.
    let mut ticks = serve.ticks();
    let (mut at, end) = (t(START), t(END));
    watchdog(Duration::from_secs(600), "the simulated day", async {
        loop {
            let ticked = *ticks
                .wait_for(|t| t.is_some_and(|t| t >= at))
                .await
                .unwrap();
            assert_eq!(ticked, Some(at), "a tick at the wrong instant");
            if at == end {
                break;
            }
            tokio::time::advance(clock.real(TICK)).await;
            at += TICK;
        }
    })
    .await;
    // The plan and the replica's state through the API, while it runs.
    let plan = serve.get("/v1/plan").await;
    // The demo fleet's 39 instances (the inference group's two evening members among them,
    // ended), the group's two morning members, and the spot instance the checkpointing job
    // moved to.
    assert_eq!(plan.as_array().unwrap().len(), 42, "{plan}");
    let ready = serve.get("/readyz").await;
    assert_eq!(ready["role"], "leader", "{ready}");
    assert_eq!(ready["last_tick"], "2026-12-01T13:00:00Z", "{ready}");
    serve.stop().await;
}
