//! `ebb audit`, `ebb audit verify`, `ebb override` and `ebb migrate` as users run them, against
//! a real Postgres database made fresh for each test.

use crate::common;

use chrono::{Duration, Utc};
use common::{database_url, t, Ebb};
use ebb::store::{NewAuditEntry, Outcome, Store};
use sqlx::PgPool;
use std::process::Output;

/// `ebb` on the database at `url` as Mei, in Shanghai's time zone.
fn mei(url: &str) -> Ebb {
    Ebb::on(url)
        .env("TZ", "Asia/Shanghai")
        .env("EBB_ACTOR", "mei")
}

fn out(o: &Output) -> String {
    assert!(
        o.status.success(),
        "exit {:?}: {}",
        o.status,
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn row(instance: &str, action: &str, outcome: Outcome, policy: &str, at: &str) -> NewAuditEntry {
    NewAuditEntry {
        at: t(at),
        actor: "scheduler".into(),
        instance: Some(instance.into()),
        region: Some("ap-east-1".into()),
        action: action.into(),
        outcome,
        policy: Some(policy.into()),
        policy_version: Some("sha256:4172a170b61c".into()),
        code: Some("outside_hours".into()),
        reason: "outside work hours (closed 20:00 Asia/Shanghai)".into(),
        dry_run: false,
        request_id: (outcome != Outcome::Intent).then(|| "req-42".to_string()),
        error: (outcome == Outcome::Failed)
            .then(|| "IncorrectInstanceState: it is pending, try later".to_string()),
        intent_seq: None,
    }
}

async fn seeded(pool: &PgPool) -> String {
    let store = Store::from_pool(pool.clone());
    store
        .append_audit(&[
            row(
                "i-1",
                "stop",
                Outcome::Intent,
                "research-dev-hours",
                "2026-11-30T12:04:00Z",
            ),
            row(
                "i-1",
                "stop",
                Outcome::Succeeded,
                "research-dev-hours",
                "2026-11-30T12:04:01Z",
            ),
            row(
                "i-2",
                "stop",
                Outcome::Intent,
                "research-dev-hours",
                "2026-11-30T12:04:00Z",
            ),
            row(
                "i-2",
                "stop",
                Outcome::Failed,
                "research-dev-hours",
                "2026-11-30T12:04:02Z",
            ),
            row(
                "i-3",
                "start",
                Outcome::Intent,
                "platform-dev-hours",
                "2026-12-01T00:30:00Z",
            ),
            row(
                "i-3",
                "start",
                Outcome::Skipped,
                "platform-dev-hours",
                "2026-12-01T00:30:01Z",
            ),
        ])
        .await
        .unwrap();
    database_url(pool)
}

/// Makes ebb know `ids` as live instances (overrides are refused for others).
async fn known(pool: &PgPool, ids: &[&str]) {
    let fleet: Vec<_> = ids.iter().map(|id| common::instance(id, &[])).collect();
    Store::from_pool(pool.clone())
        .sync_inventory(&["us-east-1".to_string()], &fleet, Utc::now())
        .await
        .unwrap();
}

fn json(o: &Output) -> Vec<serde_json::Map<String, serde_json::Value>> {
    serde_json::from_str(&out(o)).unwrap()
}

#[sqlx::test]
async fn json_has_the_documented_fields_and_each_filter_narrows(pool: PgPool) {
    let url = seeded(&pool).await;
    let all = json(&mei(&url).run(&["audit", "--format", "json"]));
    assert_eq!(all.len(), 6);
    // Sorted: whether serde_json keeps key order depends on features other crates enable.
    let mut keys: Vec<&str> = all[0].keys().map(String::as_str).collect();
    keys.sort();
    let mut want = [
        "seq",
        "intent_seq",
        "prev_hash",
        "hash",
        "at",
        "actor",
        "instance",
        "region",
        "action",
        "outcome",
        "policy",
        "policy_version",
        "code",
        "reason",
        "dry_run",
        "request_id",
        "error",
    ];
    want.sort();
    assert_eq!(keys, want);
    assert_eq!(
        all[3]["error"],
        "IncorrectInstanceState: it is pending, try later"
    );
    assert_eq!(all[0]["at"], "2026-11-30T12:04:00.000000Z");
    assert_eq!(all[0]["seq"], 1);
    assert_eq!(all[0]["prev_hash"], "0".repeat(64));
    assert_eq!(all[1]["prev_hash"], all[0]["hash"]);

    let count = |args: &[&str]| {
        let mut full = vec!["audit", "--format", "json"];
        full.extend_from_slice(args);
        json(&mei(&url).run(&full)).len()
    };
    assert_eq!(count(&["--instance", "i-2"]), 2);
    assert_eq!(count(&["--policy", "platform-dev-hours"]), 2);
    assert_eq!(count(&["--action", "start"]), 2);
    assert_eq!(count(&["--outcome", "failed"]), 1);
    assert_eq!(count(&["--outcome", "intent", "--action", "stop"]), 2);
    assert_eq!(count(&["--since", "2026-12-01T00:00:00Z"]), 2);
    assert_eq!(count(&["--until", "2026-11-30T12:04:01Z"]), 2);
    assert_eq!(
        count(&[
            "--since",
            "2026-11-30T12:04:01+00:00",
            "--until",
            "2026-12-01T00:30:01Z"
        ]),
        3
    );
}

#[sqlx::test]
async fn since_a_duration_counts_back_from_now(pool: PgPool) {
    let store = Store::from_pool(pool.clone());
    let now = Utc::now();
    let mut recent = row("i-1", "stop", Outcome::Intent, "p", "2026-11-30T12:04:00Z");
    recent.at = now - Duration::hours(1);
    let mut old = recent.clone();
    old.at = now - Duration::hours(30);
    store.append_audit(&[old, recent]).await.unwrap();
    assert_eq!(
        json(&mei(&database_url(&pool)).run(&["audit", "--since", "24h", "--format", "json"]))
            .len(),
        1
    );
}

#[sqlx::test]
async fn the_table_is_aligned_in_local_time_newest_last(pool: PgPool) {
    let url = seeded(&pool).await;
    let text = out(&mei(&url).run(&["audit"]));
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 7);
    assert!(lines[0].starts_with("TIME"), "{text}");
    assert!(
        lines[1].starts_with("2026-11-30 20:04:00+08:00  scheduler  i-1"),
        "{text}"
    );
    assert!(
        lines[6].starts_with("2026-12-01 08:30:01+08:00"),
        "newest last:\n{text}"
    );
    assert!(lines[4].contains("error: IncorrectInstanceState"), "{text}");
    let col = lines[0].find("OUTCOME").unwrap();
    assert!(
        lines[1..]
            .iter()
            .all(|l| l[col..].starts_with(|c: char| c.is_ascii_lowercase())),
        "{text}"
    );
}

#[sqlx::test]
async fn csv_has_a_header_and_quotes_what_needs_it(pool: PgPool) {
    let url = seeded(&pool).await;
    let text = out(&mei(&url).run(&["audit", "--format", "csv", "--outcome", "failed"]));
    let mut lines = text.lines();
    assert_eq!(
        lines.next().unwrap(),
        "seq,at,actor,instance,region,action,outcome,policy,policy_version,code,reason,dry_run,request_id,error,\
         intent_seq,prev_hash,hash"
    );
    let row = lines.next().unwrap();
    assert!(
        row.starts_with(
            "4,2026-11-30T12:04:02.000000Z,scheduler,i-2,ap-east-1,stop,failed,research-dev-hours,sha256:4172a170b61c,\
             outside_hours,outside work hours (closed 20:00 Asia/Shanghai),false,req-42,\"IncorrectInstanceState: it is pending, try later\",,"
        ),
        "{row}"
    );
    let empty = out(&mei(&url).run(&["audit", "--format", "csv", "--instance", "i-none"]));
    assert_eq!(empty.lines().count(), 1, "a header even without rows");
}

#[sqlx::test]
async fn verify_passes_then_names_the_edited_row(pool: PgPool) {
    let url = seeded(&pool).await;
    let o = mei(&url).run(&["audit", "verify"]);
    let text = out(&o);
    assert!(
        text.starts_with("ok: 6 audit rows, hash chain intact, head "),
        "{text}"
    );
    assert_eq!(text.lines().count(), 1);
    let mut tx = pool.begin().await.unwrap();
    sqlx::query("ALTER TABLE audit_log DISABLE TRIGGER audit_log_no_update_delete")
        .execute(&mut *tx)
        .await
        .unwrap();
    sqlx::query("UPDATE audit_log SET outcome = 'succeeded' WHERE seq = 4")
        .execute(&mut *tx)
        .await
        .unwrap();
    sqlx::query("ALTER TABLE audit_log ENABLE TRIGGER audit_log_no_update_delete")
        .execute(&mut *tx)
        .await
        .unwrap();
    tx.commit().await.unwrap();
    let o = mei(&url).run(&["audit", "verify"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stdout).starts_with("audit row 4 does not match"));
}

#[sqlx::test]
async fn overrides_from_the_cli_are_listed_audited_and_revoked(pool: PgPool) {
    let url = database_url(&pool);
    known(&pool, &["i-0abc"]).await;
    let text = out(&mei(&url).run(&[
        "override",
        "i-0abc",
        "--until",
        "4h",
        "--reason",
        "demo tonight",
    ]));
    assert!(text.starts_with("override 1: i-0abc kept until "), "{text}");
    let list = out(&mei(&url).run(&["override", "--list"]));
    assert!(
        list.lines().nth(1).unwrap().starts_with("1   i-0abc"),
        "{list}"
    );
    assert!(
        list.contains("active") && list.contains("demo tonight") && list.contains("mei"),
        "{list}"
    );
    let audit = json(&mei(&url).run(&["audit", "--format", "json", "--action", "override"]));
    assert_eq!(audit.len(), 1);
    assert_eq!(audit[0]["actor"], "mei");
    assert_eq!(audit[0]["instance"], "i-0abc");

    assert!(out(&mei(&url).run(&["override", "--revoke", "1"]))
        .contains("revoked override 1 of i-0abc"));
    assert_eq!(
        out(&mei(&url).run(&["override", "--list"])).lines().count(),
        1,
        "only the header"
    );
    assert!(out(&mei(&url).run(&["override", "--list", "--all"])).contains("revoked"));
    let o = mei(&url).run(&["override", "--revoke", "1"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("no active override with id 1"));
}

#[sqlx::test]
async fn bad_override_requests_change_nothing(pool: PgPool) {
    let url = database_url(&pool);
    for args in [
        vec![
            "override",
            "i-0abc",
            "--until",
            "2020-01-01T00:00:00Z",
            "--reason",
            "late",
        ],
        vec!["override", "i-0abc", "--until", "4h", "--reason", "  "],
        vec!["override", "i-0abc", "--until", "soon", "--reason", "x"],
        vec!["override", "i-0abc", "--reason", "no until"],
        // The API's rule too: an instance must be named.
        vec!["override", "  ", "--until", "4h", "--reason", "x"],
    ] {
        let o = mei(&url).run(&args);
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        assert!(!String::from_utf8_lossy(&o.stderr).contains("panicked"));
    }
    // The API's limits, through the same check.
    known(&pool, &["i-0abc"]).await;
    let long = "x".repeat(501);
    for (args, says) in [
        (
            vec!["override", "i-0abc", "--until", "8d", "--reason", "x"],
            "the longest override is 7days",
        ),
        (
            vec!["override", "i-0abc", "--until", "4h", "--reason", &long],
            "501 characters is too long",
        ),
        (
            vec!["override", "i-0zzz", "--until", "4h", "--reason", "x"],
            "ebb knows no live instance i-0zzz",
        ),
    ] {
        let o = mei(&url).run(&args);
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert!(stderr.contains(says), "{stderr}");
    }
    let o = Ebb::on(&url)
        .env("EBB_MAX_OVERRIDE", "9d")
        .run(&["override", "i-0abc", "--until", "8d", "--reason", "x"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    sqlx::query("DELETE FROM overrides")
        .execute(&pool)
        .await
        .unwrap();
    let count: i64 = sqlx::query_scalar("SELECT count(*) FROM overrides")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(count, 0);
}

#[test]
fn an_unreachable_database_is_a_one_line_error() {
    for args in [
        vec!["audit"],
        vec!["audit", "verify"],
        vec!["override", "--list"],
        vec!["migrate"],
    ] {
        let o = mei("postgres://ebb@127.0.0.1:1/ebb").run(&args);
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&o.stderr).into_owned();
        assert!(
            err.starts_with("error: cannot connect to the database at 127.0.0.1:1/ebb"),
            "{err}"
        );
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(o.stdout.is_empty());
    }
    let o = Ebb::new().env_remove("DATABASE_URL").run(&["audit"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("DATABASE_URL is not set"));
}

#[sqlx::test(migrations = false)]
async fn migrate_applies_then_reports_current(pool: PgPool) {
    let url = database_url(&pool);
    assert!(out(&mei(&url).run(&["migrate"])).starts_with("ok: 46 migration(s) applied"));
    assert!(out(&mei(&url).run(&["migrate"])).starts_with("ok: 0 migration(s) applied"));
}

#[sqlx::test]
async fn migrations_are_listed_with_state_savings_and_steps(pool: PgPool) {
    let url = database_url(&pool);
    assert_eq!(out(&mei(&url).run(&["spot-moves"])), "no spot migrations\n");
    // The command's old name still works.
    assert_eq!(out(&mei(&url).run(&["migrations"])), "no spot migrations\n");
    assert_eq!(
        out(&mei(&url).run(&["migrations", "--format", "json"])),
        "[]\n"
    );
    let store = Store::from_pool(pool);
    let planned = NewAuditEntry {
        instance: Some("i-0train".into()),
        ..NewAuditEntry::event(
            t("2026-11-30T10:00:00Z"),
            "scheduler",
            "migrate_to_spot",
            "planned: spot saves 65%".into(),
        )
    };
    let m = store
        .plan_migration(
            "i-0train",
            "us-east-1",
            "training",
            Some(32.77),
            t("2026-11-30T04:00:00Z"),
            planned.clone(),
        )
        .await
        .unwrap()
        .unwrap();
    // A second plan for the same instance is refused while the first lives.
    assert!(store
        .plan_migration(
            "i-0train",
            "us-east-1",
            "training",
            Some(32.77),
            t("2026-11-30T04:00:00Z"),
            planned
        )
        .await
        .unwrap()
        .is_none());
    let table = out(&mei(&url).run(&["spot-moves"]));
    assert!(table.starts_with("ID"), "{table}");
    assert!(
        table.contains(&format!("{}   i-0train  planned", m.id)),
        "{table}"
    );
    assert!(table.contains("$0.00"), "{table}");
    let json: serde_json::Value =
        serde_json::from_str(&out(&mei(&url).run(&["spot-moves", "--format", "json"]))).unwrap();
    let item = &json[0];
    assert_eq!(item["state"], "planned");
    assert_eq!(item["original"], "i-0train");
    assert_eq!(item["savings_so_far"], 0.0);
    assert_eq!(item["interruptions"], serde_json::json!([]));
    assert_eq!(item["steps"][0]["detail"], "planned: spot saves 65%");
}

#[sqlx::test]
async fn metrics_export_writes_the_kept_readings_as_csv(pool: PgPool) {
    let url = database_url(&pool);
    let store = Store::from_pool(pool);
    let now = Utc::now();
    let recent = ebb::fleet::Sample {
        memory_mib: Some(12_288),
        gpus_busy: Some(3),
        ..ebb::fleet::Sample::new(now - Duration::hours(1), 87.5)
    };
    let older = ebb::fleet::Sample::new(now - Duration::minutes(30), 1.0);
    let old = ebb::fleet::Sample::new(now - Duration::days(40), 3.0);
    store
        .record_gpu_readings(&[("i-0a", &[old, recent, older])])
        .await
        .unwrap();

    let csv = out(&mei(&url).run(&["metrics", "export", "--since", "30d"]));
    let at = |s: ebb::fleet::Sample| {
        chrono::DurationRound::duration_trunc(s.at, Duration::minutes(5))
            .unwrap()
            .to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
    };
    // Memory and busy GPUs where the source gave them, empty where it did not.
    assert_eq!(
        csv,
        format!(
            "instance,time,gpu_util,gpu_mem_mib,gpus_busy\ni-0a,{},87.5,12288,3\ni-0a,{},1.0,,\n",
            at(recent),
            at(older)
        )
    );
    let bad = mei(&url).run(&["metrics", "export", "--since", "yesterday"]);
    assert_eq!(bad.status.code(), Some(2));
}

/// What the control plane kept, exported, is what `ebb replay` reads: an office box busy
/// 09:00-17:00 on a Monday, replayed under 08:00-18:00 hours, runs those ten hours.
#[sqlx::test]
async fn metrics_export_round_trips_into_replay(pool: PgPool) {
    let url = database_url(&pool);
    let store = Store::from_pool(pool);
    let day = t("2026-11-30T00:00:00Z");
    let readings: Vec<ebb::fleet::Sample> = (0..288)
        .map(|n| {
            let at = day + Duration::minutes(5 * n);
            let busy = (9..17).contains(&(n / 12));
            ebb::fleet::Sample::new(at, if busy { 60.0 } else { 1.0 })
        })
        .collect();
    store
        .record_gpu_readings(&[("i-office", &readings)])
        .await
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let csv = out(&mei(&url).run(&["metrics", "export", "--since", "2026-11-30T00:00:00Z"]));
    std::fs::write(dir.path().join("util.csv"), csv).unwrap();
    std::fs::write(
        dir.path().join("fleet.yaml"),
        "instances:
  - {id: i-office, region: us-east-1, type: g5.xlarge, state: stopped,
     state_since: 2026-11-27T18:00:00Z, stopped_by_ebb_at: 2026-11-27T18:00:00Z,
     tags: {team: office}}
prices:
  us-east-1: {g5.xlarge: {on_demand: 1.0}}
",
    )
    .unwrap();
    std::fs::write(
        dir.path().join("office.yaml"),
        "policies:
  - name: office
    match: {tags: {team: office}}
    work_hours:
      timezone: UTC
      periods: [{days: mon-fri, start: \"08:00\", stop: \"18:00\"}]
",
    )
    .unwrap();
    let p = |name: &str| dir.path().join(name).to_str().unwrap().to_string();
    let replayed = out(&mei(&url).run(&[
        "replay",
        "--policies",
        &p("office.yaml"),
        "--fleet",
        &p("fleet.yaml"),
        "--utilisation",
        &p("util.csv"),
        "--from",
        "2026-11-30T00:00:00Z",
        "--to",
        "2026-12-01T00:00:00Z",
        "--format",
        "json",
    ]));
    let r: serde_json::Value = serde_json::from_str(&replayed).unwrap();
    let policies = &r["scenarios"]["policies"];
    let hours = policies["running_hours"].as_f64().unwrap();
    assert!((hours - 10.0).abs() <= 5.0 / 60.0, "{policies}");
    assert_eq!(
        policies["unserved_busy_hours"].as_f64(),
        Some(0.0),
        "{policies}"
    );
    assert_eq!(
        r["scenarios"]["oracle"]["running_hours"].as_f64(),
        Some(8.0)
    );
}

/// `ebb` with audit checkpoints signed by `key` and kept at `dest`.
fn checkpointed(url: &str, key: &std::path::Path, dest: &str) -> Ebb {
    Ebb::on(url)
        .env("EBB_ACTOR", "mei")
        .env("EBB_AUDIT_KEY_FILE", key)
        .env("EBB_AUDIT_CHECKPOINTS", dest)
}

/// `ebb audit keygen` in a fresh directory: the directory and the private key's path.
fn keygen() -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let key = dir.path().join("audit.key");
    let text = out(&mei("unused").run(&["audit", "keygen", "--out", key.to_str().unwrap()]));
    assert!(text.starts_with("ok: private key "), "{text}");
    (dir, key)
}

/// Two overrides made through the binary, each publishing a checkpoint (rows 7 and 8).
async fn two_checkpointed_overrides(pool: &PgPool, key: &std::path::Path, dest: &str) {
    known(pool, &["i-0abc", "i-0def"]).await;
    let url = &database_url(pool);
    for instance in ["i-0abc", "i-0def"] {
        let o = checkpointed(url, key, dest)
            .run(&["override", instance, "--until", "4h", "--reason", "demo"]);
        assert!(
            o.status.success() && o.stderr.is_empty(),
            "{}",
            String::from_utf8_lossy(&o.stderr)
        );
    }
}

/// Runs `sql` as the superuser with the append-only trigger disabled, as someone holding the
/// owner's credentials could.
async fn tamper(pool: &PgPool, sql: &[&'static str]) {
    let mut tx = pool.begin().await.unwrap();
    sqlx::query("ALTER TABLE audit_log DISABLE TRIGGER audit_log_no_update_delete")
        .execute(&mut *tx)
        .await
        .unwrap();
    for statement in sql {
        sqlx::query(*statement).execute(&mut *tx).await.unwrap();
    }
    sqlx::query("ALTER TABLE audit_log ENABLE TRIGGER audit_log_no_update_delete")
        .execute(&mut *tx)
        .await
        .unwrap();
    tx.commit().await.unwrap();
}

#[test]
fn keygen_writes_a_private_key_only_its_owner_reads_and_never_over_one() {
    use std::os::unix::fs::PermissionsExt as _;
    let (dir, key) = keygen();
    let mode = std::fs::metadata(&key).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600);
    let private = std::fs::read_to_string(&key).unwrap();
    assert!(
        private.starts_with("-----BEGIN PRIVATE KEY-----"),
        "{private}"
    );
    let public = std::fs::read_to_string(dir.path().join("audit.key.pub")).unwrap();
    assert!(public.starts_with("-----BEGIN PUBLIC KEY-----"), "{public}");
    let again = mei("unused").run(&["audit", "keygen", "--out", key.to_str().unwrap()]);
    assert_eq!(again.status.code(), Some(2));
    assert_eq!(std::fs::read_to_string(&key).unwrap(), private);
}

#[sqlx::test]
async fn checkpoints_name_the_one_a_deleted_tail_contradicts(pool: PgPool) {
    let url = seeded(&pool).await;
    let (dir, key) = keygen();
    let stored = dir.path().join("checkpoints");
    std::fs::create_dir(&stored).unwrap();
    let dest = format!("file:{}", stored.display());
    two_checkpointed_overrides(&pool, &key, &dest).await;
    let public = dir.path().join("audit.key.pub");
    let verify = [
        "audit",
        "verify",
        "--checkpoints",
        &dest,
        "--public-key",
        public.to_str().unwrap(),
    ];
    let text = out(&mei(&url).run(&verify));
    assert!(
        text.starts_with("ok: 8 audit rows, hash chain intact")
            && text.contains("checkpoints hold up to row 8"),
        "{text}"
    );

    // The newest row and the override it records, deleted by the owner: the chain alone
    // still verifies.
    tamper(
        &pool,
        &[
            "DELETE FROM audit_log WHERE seq = 8",
            "DELETE FROM overrides WHERE id = 2",
        ],
    )
    .await;
    assert!(out(&mei(&url).run(&["audit", "verify"])).starts_with("ok: 7 audit rows"));
    let o = mei(&url).run(&verify);
    assert_eq!(o.status.code(), Some(1));
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(
        text.contains("checkpoint-00000000000000000008.json (row 8,")
            && text.contains("the log ends at row 7, so rows up to 8 were deleted"),
        "{text}"
    );
    assert_eq!(text.lines().count(), 1, "checkpoint 7 still holds: {text}");
}

#[sqlx::test]
async fn checkpoints_expose_rows_rewritten_with_a_recomputed_chain(pool: PgPool) {
    let url = seeded(&pool).await;
    let (dir, key) = keygen();
    let dest = format!("file:{}", dir.path().display());
    two_checkpointed_overrides(&pool, &key, &dest).await;
    // Rows 7 and 8 replaced by rows of the owner's choosing, hashed as ebb hashes them.
    tamper(
        &pool,
        &[
            "DELETE FROM audit_log WHERE seq >= 7",
            "DELETE FROM overrides",
        ],
    )
    .await;
    let store = Store::from_pool(pool.clone());
    let forged = row("i-9", "stop", Outcome::Intent, "p", "2026-12-01T01:00:00Z");
    store.append_audit(&[forged.clone(), forged]).await.unwrap();
    assert!(out(&mei(&url).run(&["audit", "verify"])).starts_with("ok: 8 audit rows"));
    let public = dir.path().join("audit.key.pub");
    let o = mei(&url).run(&[
        "audit",
        "verify",
        "--checkpoints",
        &dest,
        "--public-key",
        public.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(1));
    let text = String::from_utf8_lossy(&o.stdout);
    for seq in [7, 8] {
        assert!(
            text.contains(&format!("checkpoint-{seq:020}.json (row {seq},"))
                && text.contains("the chain recomputed"),
            "{text}"
        );
    }
}

#[sqlx::test]
async fn a_checkpoint_altered_or_signed_by_another_key_is_refused(pool: PgPool) {
    let url = seeded(&pool).await;
    let (dir, key) = keygen();
    let dest = format!("file:{}", dir.path().display());
    two_checkpointed_overrides(&pool, &key, &dest).await;
    let (other_dir, _) = keygen();
    let other = other_dir.path().join("audit.key.pub");
    let verify = |public: &std::path::Path| {
        mei(&url).run(&[
            "audit",
            "verify",
            "--checkpoints",
            &dest,
            "--public-key",
            public.to_str().unwrap(),
        ])
    };
    let o = verify(&other);
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stdout).contains("is not signed by the public key"));

    // Checkpoint 8 moved back to row 7's hash, as if the log had ended there.
    let file = dir.path().join(format!("checkpoint-{:020}.json", 8));
    let mut c: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    c["seq"] = 7.into();
    std::fs::remove_file(&file).unwrap();
    std::fs::write(&file, c.to_string()).unwrap();
    let o = verify(&dir.path().join("audit.key.pub"));
    assert_eq!(o.status.code(), Some(1));
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(
        text.contains("(row 7,") && text.contains("is not signed by the public key"),
        "{text}"
    );
}

#[sqlx::test]
async fn an_export_verifies_offline_and_an_edit_in_it_is_named(pool: PgPool) {
    let url = seeded(&pool).await;
    let dir = tempfile::tempdir().unwrap();
    for format in ["json", "csv"] {
        let export = out(&mei(&url).run(&["audit", "--format", format]));
        let file = dir.path().join(format!("audit.{format}"));
        std::fs::write(&file, &export).unwrap();
        let text = out(&mei("unused").run(&["audit", "verify", "--file", file.to_str().unwrap()]));
        assert!(
            text.starts_with("ok: 6 exported audit rows"),
            "{format}: {text}"
        );
        std::fs::write(&file, export.replacen("IncorrectInstanceState", "Other", 1)).unwrap();
        let o = mei("unused").run(&["audit", "verify", "--file", file.to_str().unwrap()]);
        assert_eq!(o.status.code(), Some(1), "{format}");
        assert!(
            String::from_utf8_lossy(&o.stdout)
                .starts_with("exported audit row 4 does not match: the row's content"),
            "{format}: {}",
            String::from_utf8_lossy(&o.stdout)
        );
    }
    // A filtered export (rows 2 and 4) still verifies row by row.
    let part = out(&mei(&url).run(&["audit", "--format", "json", "--outcome", "failed"]));
    std::fs::write(dir.path().join("part.json"), part).unwrap();
    let path = dir.path().join("part.json");
    assert!(
        out(&mei("unused").run(&["audit", "verify", "--file", path.to_str().unwrap()]))
            .starts_with("ok: 1 exported audit rows")
    );
}

#[sqlx::test]
async fn verify_names_an_override_written_without_its_audit_row(pool: PgPool) {
    let url = seeded(&pool).await;
    sqlx::query(
        "INSERT INTO overrides (instance, until, reason, created_by, created_at)
         VALUES ('i-0abc', now() + interval '1 day', 'quiet', 'eve', now())",
    )
    .execute(&pool)
    .await
    .unwrap();
    let o = mei(&url).run(&["audit", "verify"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&o.stdout)
            .starts_with("override 1 of i-0abc (by eve) has no audit row of its making"),
        "{}",
        String::from_utf8_lossy(&o.stdout)
    );

    // One made through ebb, then revoked behind its back.
    known(&pool, &["i-0def"]).await;
    out(&mei(&url).run(&["override", "i-0def", "--until", "4h", "--reason", "x"]));
    sqlx::query("UPDATE overrides SET revoked_at = now(), revoked_by = 'eve' WHERE id = 2")
        .execute(&pool)
        .await
        .unwrap();
    let text = String::from_utf8_lossy(&mei(&url).run(&["audit", "verify"]).stdout).into_owned();
    assert_eq!(text.lines().count(), 2, "{text}");
    assert!(
        text.contains("override 2 of i-0def (by mei) has no audit row of its revoking"),
        "{text}"
    );
}

/// An S3 client on moto's emulator (`AWS_ENDPOINT_URL`), path-style as ebb's.
async fn moto_s3() -> aws_sdk_s3::Client {
    let config = aws_config::defaults(aws_config::BehaviorVersion::latest())
        .load()
        .await;
    assert!(config
        .endpoint_url()
        .is_some_and(|e| e.starts_with("http://127.0.0.1:")));
    let s3 = aws_sdk_s3::config::Builder::from(&config)
        .force_path_style(true)
        .build();
    aws_sdk_s3::Client::from_conf(s3)
}

#[sqlx::test]
async fn checkpoints_in_s3_are_write_once_and_verified(pool: PgPool) {
    use ebb::checkpoint::{Sink, Written};
    let url = seeded(&pool).await;
    // One bucket per test database: moto lives as long as the test run.
    let database = pool.connect_options().get_database().unwrap().to_string();
    let digits: String = database.chars().filter(char::is_ascii_digit).collect();
    let bucket = format!("ebb-audit-{digits}");
    moto_s3()
        .await
        .create_bucket()
        .bucket(&bucket)
        .send()
        .await
        .unwrap();
    let (dir, key) = keygen();
    let dest = format!("s3://{bucket}/prod/audit");
    two_checkpointed_overrides(&pool, &key, &dest).await;
    let public = dir.path().join("audit.key.pub");
    let verify = [
        "audit",
        "verify",
        "--checkpoints",
        &dest,
        "--public-key",
        public.to_str().unwrap(),
    ];
    assert!(out(&mei(&url).run(&verify)).contains("checkpoints hold up to row 8"));

    let sink = Sink::open(&dest).await.unwrap();
    let stored = sink.read_all().await.unwrap();
    assert_eq!(stored.len(), 2);
    assert!(stored[1]
        .0
        .ends_with("/prod/audit/checkpoint-00000000000000000008.json"));
    let mut rewritten = stored[1].1.clone();
    rewritten.hash = "00".repeat(32);
    assert_eq!(sink.write(&rewritten).await.unwrap(), Written::AlreadyThere);
    assert_eq!(
        sink.read_all().await.unwrap(),
        stored,
        "the first one is kept"
    );

    tamper(
        &pool,
        &[
            "DELETE FROM audit_log WHERE seq = 8",
            "DELETE FROM overrides WHERE id = 2",
        ],
    )
    .await;
    let o = mei(&url).run(&verify);
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stdout).contains(&format!(
        "checkpoint s3://{bucket}/prod/audit/checkpoint-00000000000000000008.json (row 8,"
    )));
}

#[sqlx::test]
async fn a_checkpoint_that_cannot_be_stored_never_fails_the_change(pool: PgPool) {
    let url = database_url(&pool);
    known(&pool, &["i-0abc"]).await;
    let (_dir, key) = keygen();
    let o = checkpointed(&url, &key, "s3://no-such-bucket-for-ebb/audit")
        .run(&["override", "i-0abc", "--until", "4h", "--reason", "demo"]);
    assert!(o.status.success());
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(
        stderr.contains("warning: audit checkpoint not published: checkpoint of row 1: s3://no-such-bucket-for-ebb/"),
        "{stderr}"
    );
    assert_eq!(
        json(&mei(&url).run(&["audit", "--format", "json"])).len(),
        1
    );
}

#[sqlx::test]
async fn each_tick_that_appends_rows_publishes_a_checkpoint_of_the_head(pool: PgPool) {
    let url = database_url(&pool);
    let (dir, key) = keygen();
    let dest = format!("file:{}", dir.path().display());
    let tick = |at: &str| {
        let o = Ebb::on(&url)
            .env("EBB_CLOUD", "sim:deploy/demo-fleet.yaml")
            .env("EBB_POLICIES", "policies")
            .env("EBB_AUDIT_KEY_FILE", &key)
            .env("EBB_AUDIT_CHECKPOINTS", &dest)
            .run(&["tick", "--at", at]);
        assert!(
            !String::from_utf8_lossy(&o.stderr).contains("checkpoint"),
            "{}",
            String::from_utf8_lossy(&o.stderr)
        );
    };
    let checkpoints = || {
        let mut names: Vec<String> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .filter(|n| n.starts_with("checkpoint-"))
            .collect();
        names.sort();
        names
    };
    let store = Store::from_pool(pool.clone());
    tick("2026-11-30T20:30:00Z");
    let (head, _) = store
        .audit_head()
        .await
        .unwrap()
        .expect("the tick appended rows");
    assert_eq!(checkpoints(), [format!("checkpoint-{head:020}.json")]);
    tick("2026-12-01T09:30:00Z");
    let (later, _) = store.audit_head().await.unwrap().unwrap();
    assert!(later > head);
    assert_eq!(
        checkpoints().last().unwrap(),
        &format!("checkpoint-{later:020}.json")
    );
    let public = dir.path().join("audit.key.pub");
    let text = out(&mei(&url).run(&[
        "audit",
        "verify",
        "--checkpoints",
        &dest,
        "--public-key",
        public.to_str().unwrap(),
    ]));
    assert!(
        text.contains(&format!("checkpoints hold up to row {later}")),
        "{text}"
    );
}

/// A reader that has gone (`ebb audit --format csv | head -1`) ends the command quietly: exit
/// 0, nothing on stderr, no panic. The pipe's reading end is closed before ebb starts, so its
/// first write meets a closed pipe, whatever the timing.
#[sqlx::test]
async fn a_closed_stdout_ends_the_audit_export_quietly(pool: PgPool) {
    let url = database_url(&pool);
    known(&pool, &["i-0abc"]).await;
    out(&mei(&url).run(&["override", "i-0abc", "--until", "4h", "--reason", "demo"]));
    for format in ["csv", "json", "table"] {
        let (reader, writer) = std::io::pipe().unwrap();
        drop(reader);
        let o = mei(&url)
            .command(&["audit", "--format", format])
            .stdout(writer)
            .stderr(std::process::Stdio::piped())
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(0), "{format}: {stderr}");
        assert!(stderr.is_empty(), "{format}: {stderr}");
    }
}

/// `--limit N`: the newest N rows the filters select, oldest first.
#[sqlx::test]
async fn audit_limit_gives_the_newest_rows(pool: PgPool) {
    let url = database_url(&pool);
    known(&pool, &["i-0abc"]).await;
    for reason in ["first", "second", "third"] {
        out(&mei(&url).run(&["override", "i-0abc", "--until", "4h", "--reason", reason]));
    }
    let rows: serde_json::Value = serde_json::from_str(&out(&mei(&url).run(&[
        "audit", "--action", "override", "--limit", "2", "--format", "json",
    ])))
    .unwrap();
    let reasons: Vec<&str> = rows
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["reason"].as_str().unwrap())
        .collect();
    assert_eq!(reasons.len(), 2, "{rows:#}");
    assert!(
        reasons[0].contains("second") && reasons[1].contains("third"),
        "{reasons:?}"
    );
    let bad = mei(&url).run(&["audit", "--limit", "0"]);
    assert_eq!(bad.status.code(), Some(2));
}
