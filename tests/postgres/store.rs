//! The Postgres store against a real server: `#[sqlx::test]` gives each test a fresh database
//! (scripts/test starts a throwaway cluster when DATABASE_URL is unset).

use crate::common;

use chrono::Duration;
use common::{instance, t};
use ebb::engine::{Action, Code, Decision};
use ebb::fleet::{Instance, InstanceState};
use ebb::store::{AuditFilter, NewAuditEntry, Outcome, Store, StoreError, Verification};
use sqlx::PgPool;

fn fleet(n: usize) -> Vec<Instance> {
    (0..n)
        .map(|i| instance(&format!("i-{i:05}"), &[("team", "research")]))
        .collect()
}

fn regions() -> Vec<String> {
    vec!["us-east-1".to_string()]
}

#[sqlx::test(migrations = false)]
async fn migrations_apply_to_an_empty_database_and_again_without_change(pool: PgPool) {
    let store = Store::from_pool(pool.clone());
    assert_eq!(store.migrate().await.unwrap(), 46);
    let tables: Vec<String> = sqlx::query_scalar(
        "SELECT table_name::text FROM information_schema.tables WHERE table_schema = 'public' ORDER BY 1",
    )
    .fetch_all(&pool)
    .await
    .unwrap();
    for want in [
        "audit_log",
        "instance_events",
        "instances",
        "open_intents",
        "overrides",
        "region_syncs",
        "scaling_group_sizes",
        "scaling_groups",
        "spot_migrations",
    ] {
        assert!(
            tables.contains(&want.to_string()),
            "{want} missing from {tables:?}"
        );
    }
    assert_eq!(store.migrate().await.unwrap(), 0);
}

#[sqlx::test(migrations = false)]
async fn a_schema_newer_than_the_binary_is_refused(pool: PgPool) {
    let store = Store::from_pool(pool.clone());
    store.migrate().await.unwrap();
    sqlx::query(
        "INSERT INTO _sqlx_migrations (version, description, success, checksum, execution_time)
         VALUES (99990101000000, 'from the future', true, '\\x00', 0)",
    )
    .execute(&pool)
    .await
    .unwrap();
    let err = store.migrate().await.unwrap_err();
    assert!(
        matches!(
            err,
            StoreError::SchemaTooNew {
                found: 99990101000000,
                known: 50
            }
        ),
        "{err}"
    );
    assert!(err.to_string().contains("run a newer ebb"));
}

#[sqlx::test]
async fn sync_inserts_updates_and_marks_gone(pool: PgPool) {
    let store = Store::from_pool(pool.clone());
    let now = t("2026-11-30T12:00:00Z");
    let mut instances = fleet(5);
    let r = store
        .sync_inventory(&regions(), &instances, now)
        .await
        .unwrap();
    assert_eq!((r.inserted, r.updated, r.unchanged, r.gone), (5, 0, 0, 0));

    instances[0].state = InstanceState::Stopped;
    instances[1].tags.insert("owner".into(), "mei".into());
    instances.remove(4);
    let later = now + Duration::minutes(1);
    let r = store
        .sync_inventory(&regions(), &instances, later)
        .await
        .unwrap();
    assert_eq!((r.inserted, r.updated, r.unchanged, r.gone), (0, 2, 2, 1));

    let rows = store
        .instances(true, &ebb::store::Page::first(10_000))
        .await
        .unwrap();
    assert_eq!(rows.len(), 5, "gone instances are kept");
    assert_eq!(
        store
            .instances(false, &ebb::store::Page::first(10_000))
            .await
            .unwrap()
            .len(),
        4,
        "and listed apart"
    );
    let row = |id: &str| rows.iter().find(|r| r.id == id).unwrap().clone();
    assert_eq!(row("i-00000").state, "stopped");
    assert_eq!(row("i-00000").state_since, later);
    assert_eq!(
        row("i-00001").tags.0.get("owner").map(String::as_str),
        Some("mei")
    );
    assert_eq!(
        row("i-00001").state_since,
        now,
        "a tag change is not a state change"
    );
    assert_eq!(row("i-00004").gone_at, Some(later));
    assert_eq!(row("i-00002").last_seen_at, later);
    assert_eq!(row("i-00002").first_seen_at, now);

    let events: Vec<(String, String, String, String)> =
        sqlx::query_as("SELECT instance, from_state, to_state, cause FROM instance_events WHERE at = $1 ORDER BY instance")
            .bind(later)
            .fetch_all(&pool)
            .await
            .unwrap();
    assert_eq!(
        events,
        [
            (
                "i-00000".into(),
                "running".into(),
                "stopped".into(),
                "observed".into()
            ),
            (
                "i-00004".into(),
                "running".into(),
                "gone".into(),
                "gone".into()
            ),
        ]
    );

    // It comes back, and the others return to how they were.
    let r = store
        .sync_inventory(&regions(), &fleet(5), later + Duration::minutes(1))
        .await
        .unwrap();
    assert_eq!((r.inserted, r.updated, r.gone), (0, 3, 0));
    let rows = store
        .instances(true, &ebb::store::Page::first(10_000))
        .await
        .unwrap();
    assert!(rows.iter().all(|r| r.gone_at.is_none()));
    let first_sync: i64 = sqlx::query_scalar("SELECT count(*) FROM instance_events WHERE at = $1")
        .bind(now)
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(
        first_sync, 0,
        "new instances need no event: their row says it"
    );
}

#[sqlx::test]
async fn unchanged_rows_are_not_rewritten(pool: PgPool) {
    let store = Store::from_pool(pool.clone());
    let instances = fleet(50);
    store
        .sync_inventory(&regions(), &instances, t("2026-11-30T12:00:00Z"))
        .await
        .unwrap();
    let versions = || async {
        let v: Vec<(String, String)> =
            sqlx::query_as("SELECT id, xmin::text FROM instances ORDER BY id")
                .fetch_all(&pool)
                .await
                .unwrap();
        v
    };
    let before = versions().await;
    let r = store
        .sync_inventory(&regions(), &instances, t("2026-11-30T12:01:00Z"))
        .await
        .unwrap();
    assert_eq!(r.unchanged, 50);
    assert_eq!(versions().await, before, "no row got a new version");
}

/// Large fleets are written in statements of 10k rows, in one transaction.
#[sqlx::test]
async fn a_fleet_larger_than_one_statement_is_synced_and_decided_whole(pool: PgPool) {
    let store = Store::from_pool(pool.clone());
    let now = t("2026-11-30T12:00:00Z");
    let n = 25_001;
    let mut instances = fleet(n);
    let r = store
        .sync_inventory(&regions(), &instances, now)
        .await
        .unwrap();
    assert_eq!((r.inserted, r.updated, r.unchanged, r.gone), (n, 0, 0, 0));
    for i in [0, n - 1] {
        instances[i].state = InstanceState::Stopped;
    }
    let r = store
        .sync_inventory(&regions(), &instances, now + Duration::minutes(1))
        .await
        .unwrap();
    assert_eq!((r.inserted, r.updated, r.unchanged), (0, 2, n - 2));
    let stopped: Vec<String> =
        sqlx::query_scalar("SELECT id FROM instances WHERE state = 'stopped' ORDER BY id")
            .fetch_all(&pool)
            .await
            .unwrap();
    assert_eq!(stopped, ["i-00000", "i-25000"]);

    let decisions: Vec<Decision> = instances
        .iter()
        .map(|i| Decision {
            instance: i.id.clone(),
            region: i.region.clone(),
            action: Action::None,
            policy: Some("office".to_string()),
            code: Code::InHours,
            reason: "inside work hours".to_string(),
            dry_run: false,
            stop_at: None,
        })
        .collect();
    let written = store.record_decisions(&decisions, now).await.unwrap();
    assert_eq!(written, n as u64);
    assert_eq!(
        store
            .plan(&ebb::store::Page::first(n as i64))
            .await
            .unwrap()
            .len(),
        n
    );
}

#[sqlx::test]
async fn other_regions_are_not_marked_gone(pool: PgPool) {
    let store = Store::from_pool(pool);
    let mut west = instance("i-west", &[]);
    west.region = "us-west-2".into();
    store
        .sync_inventory(&["us-west-2".into()], &[west], t("2026-11-30T12:00:00Z"))
        .await
        .unwrap();
    let r = store
        .sync_inventory(&regions(), &fleet(1), t("2026-11-30T12:01:00Z"))
        .await
        .unwrap();
    assert_eq!(r.gone, 0);
}

#[sqlx::test]
async fn prior_facts_come_back_and_a_running_instance_is_no_longer_stopped_by_ebb(pool: PgPool) {
    let store = Store::from_pool(pool);
    let now = t("2026-11-30T20:00:00Z");
    let mut instances = fleet(2);
    store
        .sync_inventory(&regions(), &instances, now)
        .await
        .unwrap();
    store
        .record_action(&["i-00000".to_string()], Action::Stop, now)
        .await
        .unwrap();
    store
        .record_action(&["i-00001".to_string()], Action::Notify, now)
        .await
        .unwrap();
    let prior = store.prior(now).await.unwrap();
    assert_eq!(prior.facts("i-00000").stopped_by_ebb_at, Some(now));
    assert_eq!(prior.facts("i-00001").notified_at, Some(now));

    instances[0].state = InstanceState::Stopped;
    store
        .sync_inventory(&regions(), &instances, now + Duration::minutes(1))
        .await
        .unwrap();
    assert_eq!(
        store
            .prior(now)
            .await
            .unwrap()
            .facts("i-00000")
            .stopped_by_ebb_at,
        Some(now)
    );
    // A person starts it: ebb's stop is no longer the last one.
    instances[0].state = InstanceState::Running;
    store
        .sync_inventory(&regions(), &instances, now + Duration::minutes(2))
        .await
        .unwrap();
    assert_eq!(
        store
            .prior(now)
            .await
            .unwrap()
            .facts("i-00000")
            .stopped_by_ebb_at,
        None
    );

    store
        .record_action(&["i-00000".to_string()], Action::Start, now)
        .await
        .unwrap();
    assert_eq!(
        store
            .prior(now)
            .await
            .unwrap()
            .facts("i-00000")
            .started_by_ebb_at,
        Some(now)
    );
    let decision = |id: &str, policy: Option<&str>, action: Action| Decision {
        instance: id.to_string(),
        region: "us-east-1".to_string(),
        action,
        policy: policy.map(str::to_string),
        code: Code::OutsideHours,
        reason: "outside work hours".to_string(),
        dry_run: false,
        stop_at: None,
    };
    let decisions = vec![
        decision("i-00000", Some("office"), Action::Stop),
        decision("i-00001", None, Action::None),
    ];
    assert_eq!(store.record_decisions(&decisions, now).await.unwrap(), 2);
    let later = now + Duration::minutes(1);
    assert_eq!(
        store.record_decisions(&decisions, later).await.unwrap(),
        0,
        "unchanged decisions are not rewritten"
    );
    let rows = store
        .instances(false, &ebb::store::Page::first(10_000))
        .await
        .unwrap();
    assert_eq!(
        rows[0].decided_since,
        Some(now),
        "since the decision was first made"
    );
    assert_eq!(rows[0].policy.as_deref(), Some("office"));
    assert_eq!(
        store.plan(&ebb::store::Page::first(10_000)).await.unwrap()[0].action,
        "stop"
    );
    let changed = vec![decision("i-00000", Some("office"), Action::None)];
    assert_eq!(store.record_decisions(&changed, later).await.unwrap(), 1);
    assert_eq!(
        store
            .instances(false, &ebb::store::Page::first(10_000))
            .await
            .unwrap()[0]
            .decided_since,
        Some(later)
    );
    // A new reason for the same decision: written for an action, not for doing nothing.
    let reworded = |d: Decision, reason: &str| Decision {
        reason: reason.to_string(),
        ..d
    };
    let none = decision("i-00000", Some("office"), Action::None);
    let none = vec![reworded(none, "GPU at 41% at 20:05")];
    assert_eq!(store.record_decisions(&none, later).await.unwrap(), 0);
    let stop = decision("i-00001", None, Action::Stop);
    store
        .record_decisions(&[reworded(stop.clone(), "GPU at 2% at 20:05")], later)
        .await
        .unwrap();
    let again = vec![reworded(stop, "GPU at 1% at 20:10")];
    assert_eq!(store.record_decisions(&again, later).await.unwrap(), 1);
}

fn entry(i: usize) -> NewAuditEntry {
    NewAuditEntry {
        at: t("2026-11-30T20:00:00.123456789Z") + Duration::seconds(i as i64),
        actor: "scheduler".into(),
        instance: Some(format!("i-{i:05}")),
        region: Some("us-east-1".into()),
        action: "stop".into(),
        outcome: Outcome::Intent,
        policy: Some("office".into()),
        policy_version: Some("sha256:abc".into()),
        code: Some("outside_hours".into()),
        reason: "outside work hours (closed 20:00 UTC)".into(),
        dry_run: false,
        request_id: None,
        error: None,
        intent_seq: None,
    }
}

#[sqlx::test]
async fn concurrent_appends_leave_one_unbroken_chain(pool: PgPool) {
    let store = Store::from_pool(pool);
    let tasks: Vec<_> = (0..8)
        .map(|task| {
            let store = store.clone();
            tokio::spawn(async move {
                for i in 0..25 {
                    store.append_audit(&[entry(task * 100 + i)]).await.unwrap();
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.unwrap();
    }
    let rows = store.audit(&AuditFilter::default()).await.unwrap();
    assert_eq!(rows.len(), 200);
    assert!(rows.iter().enumerate().all(|(i, r)| r.seq == i as i64 + 1));
    assert!(rows.windows(2).all(|w| w[1].prev_hash == w[0].hash));
    assert_eq!(
        store.verify_audit().await.unwrap(),
        Verification::Intact {
            rows: 200,
            head: rows[199].hash.iter().map(|b| format!("{b:02x}")).collect()
        }
    );
}

#[sqlx::test]
async fn stored_rows_read_back_exactly(pool: PgPool) {
    let store = Store::from_pool(pool);
    let written = store.append_audit(&[entry(1)]).await.unwrap();
    let mut outcome = entry(1);
    outcome.outcome = Outcome::Failed;
    outcome.intent_seq = Some(written[0].seq);
    outcome.error = Some("UnauthorizedOperation: not allowed".into());
    outcome.request_id = Some("req-1".into());
    let written2 = store.append_audit(&[outcome]).await.unwrap();
    let read = store.audit(&AuditFilter::default()).await.unwrap();
    assert_eq!(read, [written, written2].concat());
    assert_eq!(
        read[0].entry.at,
        t("2026-11-30T20:00:01.123456Z"),
        "stored to the microsecond"
    );
}

#[sqlx::test]
async fn update_delete_and_truncate_are_refused(pool: PgPool) {
    let store = Store::from_pool(pool.clone());
    store.append_audit(&[entry(1)]).await.unwrap();
    for sql in [
        "UPDATE audit_log SET reason = 'nothing happened'",
        "DELETE FROM audit_log",
        "TRUNCATE audit_log",
    ] {
        let err = sqlx::query(sql).execute(&pool).await.unwrap_err();
        assert!(
            err.to_string().contains("audit_log is append-only"),
            "{sql}: {err}"
        );
    }
    assert_eq!(store.audit(&AuditFilter::default()).await.unwrap().len(), 1);
}

#[sqlx::test]
async fn verify_names_the_first_row_that_was_edited_or_removed(pool: PgPool) {
    let store = Store::from_pool(pool.clone());
    let entries: Vec<NewAuditEntry> = (0..10).map(entry).collect();
    store.append_audit(&entries).await.unwrap();
    assert!(matches!(
        store.verify_audit().await.unwrap(),
        Verification::Intact { rows: 10, .. }
    ));

    let tamper = |sql: &'static str| {
        let pool = pool.clone();
        async move {
            let mut tx = pool.begin().await.unwrap();
            sqlx::query("ALTER TABLE audit_log DISABLE TRIGGER audit_log_no_update_delete")
                .execute(&mut *tx)
                .await
                .unwrap();
            sqlx::query(sql).execute(&mut *tx).await.unwrap();
            sqlx::query("ALTER TABLE audit_log ENABLE TRIGGER audit_log_no_update_delete")
                .execute(&mut *tx)
                .await
                .unwrap();
            tx.commit().await.unwrap();
        }
    };
    tamper("UPDATE audit_log SET reason = 'busy, left running' WHERE seq = 7").await;
    match store.verify_audit().await.unwrap() {
        Verification::Broken { seq, problem } => {
            assert_eq!(seq, 7);
            assert!(problem.contains("changed"), "{problem}");
        }
        v => panic!("edit not detected: {v:?}"),
    }
    tamper("UPDATE audit_log SET reason = 'outside work hours (closed 20:00 UTC)' WHERE seq = 7")
        .await;
    assert!(matches!(
        store.verify_audit().await.unwrap(),
        Verification::Intact { .. }
    ));
    tamper("DELETE FROM audit_log WHERE seq = 4").await;
    assert!(matches!(
        store.verify_audit().await.unwrap(),
        Verification::Broken { seq: 5, .. }
    ));
}

#[sqlx::test]
async fn a_policy_version_change_is_audited_once(pool: PgPool) {
    let store = Store::from_pool(pool);
    let at = t("2026-11-30T20:00:00Z");
    assert!(store
        .record_policy_version("sha256:aaa", "scheduler", at)
        .await
        .unwrap());
    assert!(!store
        .record_policy_version("sha256:aaa", "scheduler", at)
        .await
        .unwrap());
    assert!(store
        .record_policy_version("sha256:bbb", "scheduler", at)
        .await
        .unwrap());
    let rows = store
        .audit(&AuditFilter {
            action: Some("policy_version".into()),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(rows.len(), 2);
    assert_eq!(
        rows[1].entry.reason,
        "policy set changed from sha256:aaa to sha256:bbb"
    );
    assert_eq!(rows[1].entry.policy_version.as_deref(), Some("sha256:bbb"));
}

#[sqlx::test]
async fn an_instances_overrides_are_read_by_an_index(pool: PgPool) {
    let mut conn = pool.acquire().await.unwrap();
    // The table is small here, so the planner is told to use an index if there is one.
    sqlx::query("SET enable_seqscan = off")
        .execute(&mut *conn)
        .await
        .unwrap();
    let plan: Vec<String> = sqlx::query_scalar(
        "EXPLAIN SELECT * FROM overrides WHERE instance = 'i-1' ORDER BY id DESC",
    )
    .fetch_all(&mut *conn)
    .await
    .unwrap();
    let plan = plan.join("\n");
    assert!(plan.contains("overrides_by_instance"), "{plan}");
}

#[sqlx::test]
async fn overrides_are_audited_handed_to_the_engine_and_expire(pool: PgPool) {
    let store = Store::from_pool(pool);
    let now = t("2026-11-30T18:00:00Z");
    let o = store
        .create_override(
            "i-00001",
            now + Duration::hours(4),
            "demo tonight",
            "mei",
            now,
        )
        .await
        .unwrap();
    let prior = store.prior(now).await.unwrap();
    let active = prior.active_override("i-00001", now).unwrap();
    assert_eq!(
        (active.by.as_str(), active.reason.as_str()),
        ("mei", "demo tonight")
    );
    assert!(
        store
            .prior(now + Duration::hours(4))
            .await
            .unwrap()
            .active_override("i-00001", now)
            .is_none(),
        "expired"
    );
    assert!(store
        .active_overrides(now + Duration::hours(5))
        .await
        .unwrap()
        .is_empty());

    let second = store
        .create_override("i-00002", now + Duration::hours(1), "training", "li", now)
        .await
        .unwrap();
    let revoked = store
        .revoke_override(second.id, "ops", now + Duration::minutes(5), true)
        .await
        .unwrap();
    assert_eq!(revoked.revoked_by.as_deref(), Some("ops"));
    assert!(matches!(
        store.revoke_override(second.id, "ops", now, true).await,
        Err(StoreError::NoSuchOverride(_))
    ));
    let ids: Vec<i64> = store
        .active_overrides(now + Duration::minutes(6))
        .await
        .unwrap()
        .iter()
        .map(|o| o.id)
        .collect();
    assert_eq!(ids, [o.id]);

    let audit = store.audit(&AuditFilter::default()).await.unwrap();
    let actions: Vec<(&str, &str, Option<&str>)> = audit
        .iter()
        .map(|a| {
            (
                a.entry.action.as_str(),
                a.entry.actor.as_str(),
                a.entry.instance.as_deref(),
            )
        })
        .collect();
    assert_eq!(
        actions,
        [
            ("override", "mei", Some("i-00001")),
            ("override", "li", Some("i-00002")),
            ("override_revoked", "ops", Some("i-00002"))
        ]
    );

    // An instance's page reads its own overrides, revoked ones too, newest first.
    let third = store
        .create_override("i-00002", now + Duration::hours(2), "again", "li", now)
        .await
        .unwrap();
    let of_second: Vec<i64> = store
        .overrides_of("i-00002")
        .await
        .unwrap()
        .iter()
        .map(|o| o.id)
        .collect();
    assert_eq!(of_second, [third.id, second.id]);
}

#[tokio::test]
async fn unreachable_databases_and_refused_logins_are_clear_errors() {
    let err = Store::connect("postgres://ebb@127.0.0.1:1/ebb")
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::Unreachable { .. }), "{err}");
    assert!(
        err.to_string()
            .contains("cannot connect to the database at 127.0.0.1:1/ebb"),
        "{err}"
    );
    let err = Store::connect("postgres://ebb@127.0.0.1:99999999/ebb")
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::BadUrl(_)), "{err}");
    let url = std::env::var("DATABASE_URL").expect("scripts/test sets DATABASE_URL");
    let (base, _) = url.rsplit_once('/').unwrap();
    let err = Store::connect(&format!("{base}/no_such_database"))
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::Refused { .. }), "{err}");
    let wrong_user = base.replacen("postgres://postgres@", "postgres://nobody@", 1);
    let err = Store::connect(&format!("{wrong_user}/postgres"))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("refused the connection"), "{err}");
}

#[sqlx::test]
async fn pruning_deletes_old_state_changes_and_warnings_but_never_the_audit_log(pool: PgPool) {
    let store = Store::from_pool(pool.clone());
    let day = t("2026-09-01T12:00:00Z");
    store
        .sync_inventory(&regions(), &fleet(2), day)
        .await
        .unwrap();
    // Each day the first box stops or starts again: one state change a day for 60 days.
    let mut instances = fleet(2);
    for n in 1..=60 {
        instances[0].state = if n % 2 == 1 {
            InstanceState::Stopped
        } else {
            InstanceState::Running
        };
        store
            .sync_inventory(&regions(), &instances, day + Duration::days(n))
            .await
            .unwrap();
    }
    // Warnings as the queue reader records them for migrations' replacements.
    for (id, at) in [("i-00000", 10), ("i-00001", 50)] {
        sqlx::query("INSERT INTO spot_warnings (instance, warned_at) VALUES ($1, $2)")
            .bind(id)
            .bind(day + Duration::days(at))
            .execute(&pool)
            .await
            .unwrap();
    }
    let audit_rows = store.audit(&AuditFilter::default()).await.unwrap().len();

    let pruned = store
        .prune(day + Duration::days(30), day + Duration::days(30))
        .await
        .unwrap();

    assert_eq!((pruned.events, pruned.warnings), (29, 1));
    let left: i64 = sqlx::query_scalar("SELECT count(*) FROM instance_events")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(left, 31);
    assert_eq!(
        store
            .spot_warnings(&["i-00000".into(), "i-00001".into()])
            .await
            .unwrap(),
        ["i-00001"]
    );
    assert_eq!(
        store.audit(&AuditFilter::default()).await.unwrap().len(),
        audit_rows
    );
    assert_eq!(
        store
            .prune(day + Duration::days(30), day + Duration::days(30))
            .await
            .unwrap()
            .events,
        0,
        "idempotent"
    );
}

#[sqlx::test]
async fn readers_have_a_pool_of_their_own_with_a_shorter_statement_limit(pool: PgPool) {
    let store = Store::connect(&common::database_url(&pool)).await.unwrap();
    let readers = store.for_readers(2, std::time::Duration::from_secs(1));
    // Every reader connection busy: the control loop's pool still has its own.
    let _held = (
        readers.pool().acquire().await.unwrap(),
        readers.pool().acquire().await.unwrap(),
    );
    let mut own = store.pool().acquire().await.unwrap();
    let limit: String = sqlx::query_scalar("SHOW statement_timeout")
        .fetch_one(&mut *own)
        .await
        .unwrap();
    assert_ne!(limit, "1s");
    drop(_held);
    let limit: String = sqlx::query_scalar("SHOW statement_timeout")
        .fetch_one(readers.pool())
        .await
        .unwrap();
    assert_eq!(limit, "1s");
    let slow = sqlx::query("SELECT pg_sleep(5)")
        .execute(readers.pool())
        .await
        .unwrap_err();
    assert!(slow.to_string().contains("statement timeout"), "{slow}");
}

#[sqlx::test]
async fn gpu_readings_are_kept_by_hour_merged_read_back_and_pruned(pool: PgPool) {
    let store = Store::from_pool(pool.clone());
    let at = |m: i64| t("2026-11-30T10:00:00Z") + Duration::minutes(m);
    let reading = |m: i64, percent: f64| ebb::fleet::Sample::new(at(m), percent);
    // Two ticks: the second brings newer readings and one of the same five minutes again.
    let first = [reading(0, 10.0), reading(5, 20.0), reading(55, 30.0)];
    assert_eq!(
        store.record_gpu_readings(&[("i-1", &first)]).await.unwrap(),
        1
    );
    let second = [reading(55, 35.0), reading(60, 40.0)];
    assert_eq!(
        store
            .record_gpu_readings(&[("i-1", &second)])
            .await
            .unwrap(),
        2
    );
    let rows: i64 = sqlx::query_scalar("SELECT count(*) FROM gpu_readings")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(rows, 2, "one row an hour");

    let kept = store.gpu_readings("i-1", at(0), at(120)).await.unwrap();
    let points: Vec<(i64, f64)> = kept
        .iter()
        .map(|s| ((s.at - at(0)).num_minutes(), s.percent))
        .collect();
    assert_eq!(points, [(0, 10.0), (5, 20.0), (55, 35.0), (60, 40.0)]);
    assert_eq!(
        store
            .gpu_readings("i-1", at(5), at(56))
            .await
            .unwrap()
            .len(),
        2
    );
    assert!(store
        .gpu_readings("i-2", at(0), at(120))
        .await
        .unwrap()
        .is_empty());

    // What the export reads: the instances with readings since, then theirs.
    let ids = store.instances_with_readings(at(5)).await.unwrap();
    assert_eq!(ids, ["i-1"]);
    let exported = store.gpu_readings_of(&ids, at(5), at(600)).await.unwrap();
    assert_eq!(exported["i-1"].len(), 3);
    assert_eq!(exported["i-1"][0].percent, 20.0);

    // Readings of hours that ended before the cutoff go; the audit log is not touched.
    let pruned = store.prune(at(0), at(60)).await.unwrap();
    assert_eq!(pruned.readings, 1);
    let left = store.gpu_readings("i-1", at(0), at(120)).await.unwrap();
    assert_eq!(left.len(), 1);
}

#[sqlx::test]
async fn gpu_readings_of_many_instances_keep_each_its_own_slots_across_statements(pool: PgPool) {
    let store = Store::from_pool(pool.clone());
    let at = |m: i64| t("2026-11-30T10:00:00Z") + Duration::minutes(m);
    let reading = |m: i64, percent: f64| ebb::fleet::Sample::new(at(m), percent);
    // More rows than one statement writes (10,000), each instance with readings of its own,
    // so that a row given another row's slots, or a statement's rows shifted, shows.
    let n = 10_050;
    let ids: Vec<String> = (0..n).map(|i| format!("i-{i:05}")).collect();
    let percent = |i: usize, slot: i64| (i % 97) as f64 + slot as f64 / 100.0;
    let first: Vec<Vec<_>> = (0..n)
        .map(|i| {
            vec![
                reading(0, percent(i, 0)),
                reading(5 * (1 + i as i64 % 11), 0.5),
            ]
        })
        .collect();
    let by_id: Vec<(&str, &[ebb::fleet::Sample])> = ids
        .iter()
        .zip(&first)
        .map(|(id, s)| (id.as_str(), s.as_slice()))
        .collect();
    assert_eq!(store.record_gpu_readings(&by_id).await.unwrap(), n);
    // A second tick: its slot of the 10:05-10:55 readings replaced, the next hour new, and
    // the 10:00 readings kept.
    let second: Vec<Vec<_>> = (0..n)
        .map(|i| {
            let slot = 1 + i as i64 % 11;
            vec![
                reading(5 * slot, percent(i, slot)),
                reading(60, percent(i, 12)),
            ]
        })
        .collect();
    let by_id: Vec<(&str, &[ebb::fleet::Sample])> = ids
        .iter()
        .zip(&second)
        .map(|(id, s)| (id.as_str(), s.as_slice()))
        .collect();
    assert_eq!(store.record_gpu_readings(&by_id).await.unwrap(), 2 * n);

    let kept = store.gpu_readings_of(&ids, at(0), at(60)).await.unwrap();
    assert_eq!(kept.len(), n);
    for (i, id) in ids.iter().enumerate() {
        let slot = 1 + i as i64 % 11;
        let points: Vec<(i64, f64)> = kept[id]
            .iter()
            .map(|s| ((s.at - at(0)).num_minutes(), s.percent))
            .collect();
        // Readings are kept as `real`: compare at its precision.
        let expected = [
            (0, percent(i, 0)),
            (5 * slot, percent(i, slot)),
            (60, percent(i, 12)),
        ];
        assert_eq!(points.len(), expected.len(), "{id}: {points:?}");
        for (got, want) in points.iter().zip(expected) {
            assert_eq!(got.0, want.0, "{id}: {points:?}");
            assert!((got.1 - want.1).abs() < 1e-4, "{id}: {points:?}");
        }
    }
}
