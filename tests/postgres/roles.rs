//! The database roles against a real Postgres: `ebb migrate` as the owner, then `serve`/`tick`
//! as a runtime role that cannot rewrite or silence the audit log, a reader role that can only
//! read it, the refusal of every other command to run on a schema that is not current, and the
//! audit checkpoints that expose rows the owner deleted.
//!
//! `#[sqlx::test]` connects as the server's superuser (the owner here); the roles are made per
//! test, named after the test's database because role names are global to the server.

use crate::common;

use chrono::{Duration, Utc};
use common::{ebb_migrate, login_role, migrated_for_runtime, Ebb};
use ebb::store::{NewAuditEntry, Store, RUNTIME_PRIVILEGES};
use sqlx::{Connection, PgConnection, PgPool};
use std::path::Path;
use std::process::Output;

/// `ebb` on the database at `url` with the demo's simulated fleet and example policies, as
/// `scripts/run` serves them.
fn demo(url: &str) -> Ebb {
    Ebb::on(url)
        .env("EBB_CLOUD", "sim:deploy/demo-fleet.yaml")
        .env("EBB_POLICIES", "policies")
        .env("EBB_ACTOR", "mei")
        .env_remove("EBB_AUDIT_KEY_FILE")
        .env_remove("EBB_AUDIT_CHECKPOINTS")
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn ok(o: &Output) -> String {
    assert!(o.status.success(), "exit {:?}: {}", o.status, stderr(o));
    stdout(o)
}

/// The error `sql` gets when run as the role of `url`; panics when it succeeds.
async fn refused(url: &str, sql: &'static str) -> String {
    let mut conn = PgConnection::connect(url).await.unwrap();
    match sqlx::query(sql).execute(&mut conn).await {
        Ok(_) => panic!("{sql} succeeded"),
        Err(e) => e.to_string(),
    }
}

fn audit_row(at: &str) -> NewAuditEntry {
    NewAuditEntry::event(common::t(at), "mei", "note", "a row of the test".into())
}

#[sqlx::test]
async fn every_table_the_migrations_make_has_its_runtime_privileges(pool: PgPool) {
    let tables: Vec<String> = sqlx::query_scalar(
        "SELECT tablename::text FROM pg_tables WHERE schemaname = current_schema() ORDER BY 1",
    )
    .fetch_all(&pool)
    .await
    .unwrap();
    let mut granted: Vec<String> = RUNTIME_PRIVILEGES
        .iter()
        .map(|(t, _)| t.to_string())
        .collect();
    granted.sort();
    assert_eq!(
        tables, granted,
        "a table a migration adds needs its row in RUNTIME_PRIVILEGES (src/store/roles.rs)"
    );
}

#[sqlx::test]
async fn the_runtime_role_can_neither_rewrite_nor_silence_the_audit_log(pool: PgPool) {
    let url = migrated_for_runtime(&pool).await;
    let runtime = Store::connect(&url).await.unwrap();
    runtime
        .append_audit(&[audit_row("2026-11-30T10:00:00Z")])
        .await
        .unwrap();
    for (sql, says) in [
        (
            "ALTER TABLE audit_log DISABLE TRIGGER ALL",
            "must be owner of table audit_log",
        ),
        (
            "ALTER TABLE audit_log DISABLE TRIGGER audit_log_no_update_delete",
            "must be owner of table audit_log",
        ),
        (
            "DROP TRIGGER audit_log_no_update_delete ON audit_log",
            "must be owner of relation audit_log",
        ),
        (
            "UPDATE audit_log SET reason = 'nothing happened'",
            "permission denied for table audit_log",
        ),
        (
            "DELETE FROM audit_log",
            "permission denied for table audit_log",
        ),
        (
            "TRUNCATE audit_log",
            "permission denied for table audit_log",
        ),
        (
            "UPDATE overrides SET until = now() + interval '10 years'",
            "permission denied for table overrides",
        ),
        (
            "DELETE FROM overrides",
            "permission denied for table overrides",
        ),
        (
            "DELETE FROM instances",
            "permission denied for table instances",
        ),
        (
            "DELETE FROM _sqlx_migrations",
            "permission denied for table _sqlx_migrations",
        ),
    ] {
        let err = refused(&url, sql).await;
        assert!(err.contains(says), "{sql}: {err}");
    }
    // The owner is stopped by the trigger alone, which it may switch off (see the last test).
    let err = sqlx::query("DELETE FROM audit_log")
        .execute(&pool)
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("append-only"), "{err}");
    assert!(runtime.verify_audit().await.is_ok());
}

#[sqlx::test]
async fn a_tick_an_override_and_the_pruner_work_as_the_runtime_role(pool: PgPool) {
    let url = migrated_for_runtime(&pool).await;
    // Monday 10:00 UTC, 18:00 in Shanghai: the demo's research boxes there close.
    let tick = ok(&demo(&url).run(&["tick", "--at", "2026-11-30T10:00:00Z"]));
    assert!(tick.contains("stop"), "{tick}");
    let later = ok(&demo(&url).run(&["tick", "--at", "2026-11-30T10:05:00Z"]));
    assert!(!later.is_empty());

    let store = Store::connect(&url).await.unwrap();
    let now = Utc::now();
    let request = store
        .override_request(
            "i-0research01",
            now + Duration::hours(4),
            "demo",
            now,
            Duration::days(7),
        )
        .await
        .unwrap()
        .unwrap();
    let made = store
        .create_override(&request.instance, request.until, "demo", "mei", now)
        .await
        .unwrap();
    store
        .revoke_override(made.id, "mei", now, false)
        .await
        .unwrap();
    let overrides = ok(&demo(&url).run(&["override", "--list", "--all"]));
    assert!(overrides.contains("i-0research01"), "{overrides}");
    store
        .prune(now + Duration::days(365), now + Duration::days(365))
        .await
        .unwrap();
    let verified = ok(&demo(&url).run(&["audit", "verify"]));
    assert!(verified.starts_with("ok: "), "{verified}");
    let spot: i64 = sqlx::query_scalar("SELECT count(*) FROM spot_migrations")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(spot, 1, "the tick planned i-0train01's move to spot");
}

#[sqlx::test]
async fn the_reader_role_verifies_and_reads_but_writes_nothing(pool: PgPool) {
    let (reader, url) = login_role(&pool, "ebb_reader").await;
    ebb_migrate(&pool, &["--grant-reader", &reader]);
    Store::from_pool(pool.clone())
        .append_audit(&[audit_row("2026-11-30T10:00:00Z")])
        .await
        .unwrap();
    let verified = ok(&demo(&url).run(&["audit", "verify"]));
    assert!(verified.starts_with("ok: 1 audit rows"), "{verified}");
    assert!(ok(&demo(&url).run(&["audit"])).contains("a row of the test"));
    ok(&demo(&url).run(&["override", "--list"]));
    ok(&demo(&url).run(&["migrations"]));
    let o = demo(&url).run(&["migrations", "release", "1"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("permission denied for table spot_migrations"),
        "{}",
        stderr(&o)
    );

    let o = demo(&url).run(&["tick", "--at", "2026-11-30T10:00:00Z"]);
    assert_ne!(o.status.code(), Some(0));
    assert!(stderr(&o).contains("permission denied"), "{}", stderr(&o));
    let err = refused(
        &url,
        "INSERT INTO audit_log (seq, at, actor, action, outcome, reason, dry_run, prev_hash, hash)
         VALUES (2, now(), 'x', 'x', 'intent', 'x', false, '\\x00', '\\x00')",
    )
    .await;
    assert!(
        err.contains("permission denied for table audit_log"),
        "{err}"
    );
    let err = refused(&url, "INSERT INTO overrides (instance) VALUES ('i-1')").await;
    assert!(
        err.contains("permission denied for table overrides"),
        "{err}"
    );
    // The console's logins are the service's alone.
    let err = refused(&url, "SELECT id_hash FROM console_sessions").await;
    assert!(
        err.contains("permission denied for table console_sessions"),
        "{err}"
    );
}

#[sqlx::test(migrations = false)]
async fn commands_refuse_a_schema_that_is_not_current_and_never_migrate(pool: PgPool) {
    let url = common::database_url(&pool);
    for args in [
        vec!["audit"],
        vec!["audit", "verify"],
        vec!["override", "--list"],
        vec!["tick", "--at", "2026-11-30T10:00:00Z"],
    ] {
        let o = demo(&url).run(&args);
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        let err = stderr(&o);
        assert!(
            err.starts_with(
                "error: the database has no ebb schema: run `ebb migrate` as the owner"
            ),
            "{args:?}: {err}"
        );
        assert_eq!(err.lines().count(), 1, "{err}");
    }
    let tables: i64 =
        sqlx::query_scalar("SELECT count(*) FROM pg_tables WHERE schemaname = 'public'")
            .fetch_one(&pool)
            .await
            .unwrap();
    assert_eq!(tables, 0, "a command other than migrate migrated");

    ebb_migrate(&pool, &[]);
    ok(&demo(&url).run(&["audit"]));
    // As if this ebb's newest migration had not run yet.
    let newest: i64 = sqlx::query_scalar("SELECT max(version) FROM _sqlx_migrations")
        .fetch_one(&pool)
        .await
        .unwrap();
    sqlx::query("UPDATE _sqlx_migrations SET success = false WHERE version = $1")
        .bind(newest)
        .execute(&pool)
        .await
        .unwrap();
    let err = stderr(&demo(&url).run(&["audit"]));
    assert!(
        err.contains(&format!("behind this ebb's {newest}: run `ebb migrate`")),
        "{err}"
    );
    sqlx::query(
        "UPDATE _sqlx_migrations SET success = true, checksum = '\\x00' WHERE version = $1",
    )
    .bind(newest)
    .execute(&pool)
    .await
    .unwrap();
    let err = stderr(&demo(&url).run(&["audit"]));
    assert!(
        err.contains(&format!(
            "migration {newest} applied to the database differs"
        )),
        "{err}"
    );
}

#[sqlx::test]
async fn grants_go_only_to_existing_roles_that_own_nothing(pool: PgPool) {
    let url = common::database_url(&pool);
    let migrate = |args: &[&str]| {
        let mut all = vec!["migrate"];
        all.extend_from_slice(args);
        demo(&url).run(&all)
    };
    let o = migrate(&["--grant-runtime", "no_such_role_of_ebb"]);
    assert_eq!(o.status.code(), Some(2));
    let err = stderr(&o);
    assert!(
        err.contains("there is no database role \"no_such_role_of_ebb\": create it first")
            && err.contains("CREATE ROLE \"no_such_role_of_ebb\" LOGIN PASSWORD"),
        "{err}"
    );
    // A role never granted anything is told what to ask the owner for.
    let (ungranted, ungranted_url) = login_role(&pool, "ebb_ungranted").await;
    let o = demo(&ungranted_url).run(&["audit"]);
    assert_eq!(o.status.code(), Some(2), "{ungranted}");
    let err = stderr(&o);
    assert!(
        err.contains("may not read the schema version")
            && err.contains("ebb migrate --grant-runtime ROLE"),
        "{err}"
    );
    let superuser = pool.connect_options().get_username().to_string();
    let err = stderr(&migrate(&["--grant-runtime", &superuser]));
    assert!(err.contains("it is a superuser"), "{err}");
    let (member, _) = login_role(&pool, "ebb_owner_member").await;
    sqlx::query(sqlx::AssertSqlSafe(format!(
        "GRANT \"{superuser}\" TO \"{member}\""
    )))
    .execute(&pool)
    .await
    .unwrap();
    let err = stderr(&migrate(&["--grant-reader", &member]));
    assert!(
        err.contains("the owner of ebb's tables, or a member of it"),
        "{err}"
    );
    let (creator, _) = login_role(&pool, "ebb_creator").await;
    sqlx::query(sqlx::AssertSqlSafe(format!(
        "ALTER ROLE \"{creator}\" CREATEROLE"
    )))
    .execute(&pool)
    .await
    .unwrap();
    let err = stderr(&migrate(&["--grant-runtime", &creator]));
    assert!(err.contains("it has CREATEROLE"), "{err}");

    // A role name is one quoted identifier, whatever it holds.
    let db = pool.connect_options().get_database().unwrap().to_string();
    let odd = format!("x\"; DROP TABLE audit_log; --{}", &db[db.len() - 24..]);
    sqlx::query(sqlx::AssertSqlSafe(format!(
        "CREATE ROLE \"{}\"",
        odd.replace('"', "\"\"")
    )))
    .execute(&pool)
    .await
    .unwrap();
    let granted = ok(&migrate(&["--grant-runtime", &odd]));
    assert!(granted.contains("has the runtime privileges"), "{granted}");
    let privileges: Vec<String> = sqlx::query_scalar(
        "SELECT privilege_type::text FROM information_schema.role_table_grants
         WHERE grantee = $1 AND table_name = 'audit_log' ORDER BY 1",
    )
    .bind(&odd)
    .fetch_all(&pool)
    .await
    .unwrap();
    assert_eq!(privileges, ["INSERT", "SELECT"]);
    // Made a reader, it keeps SELECT alone: grants are made afresh.
    ok(&migrate(&["--grant-reader", &odd]));
    let privileges: Vec<String> = sqlx::query_scalar(
        "SELECT DISTINCT privilege_type::text FROM information_schema.role_table_grants
         WHERE grantee = $1",
    )
    .bind(&odd)
    .fetch_all(&pool)
    .await
    .unwrap();
    assert_eq!(privileges, ["SELECT"]);
}

/// Deletes the audit rows after `seq` as the owner can: the append-only trigger switched off
/// for the transaction, then on again.
async fn delete_tail(pool: &PgPool, seq: i64) {
    let mut tx = pool.begin().await.unwrap();
    sqlx::query("ALTER TABLE audit_log DISABLE TRIGGER audit_log_no_update_delete")
        .execute(&mut *tx)
        .await
        .unwrap();
    for sql in [
        "DELETE FROM open_intents WHERE seq > $1",
        "DELETE FROM audit_log WHERE seq > $1",
    ] {
        sqlx::query(sql).bind(seq).execute(&mut *tx).await.unwrap();
    }
    sqlx::query("ALTER TABLE audit_log ENABLE TRIGGER audit_log_no_update_delete")
        .execute(&mut *tx)
        .await
        .unwrap();
    tx.commit().await.unwrap();
}

/// Issue 17's "done means": ticks as the runtime role with checkpoints; verify holds; the owner
/// deletes the newest rows; verify exits 1 naming the checkpoint the log contradicts.
#[sqlx::test]
async fn checkpoints_expose_the_newest_rows_the_owner_deleted_after_runtime_ticks(pool: PgPool) {
    let url = migrated_for_runtime(&pool).await;
    let (reader, reader_url) = login_role(&pool, "ebb_reader").await;
    ebb_migrate(&pool, &["--grant-reader", &reader]);
    let dir = tempfile::tempdir().unwrap();
    let key = dir.path().join("audit.key");
    ok(&demo("unused").run(&["audit", "keygen", "--out", key.to_str().unwrap()]));
    let public = dir.path().join("audit.key.pub");
    let stored = dir.path().join("checkpoints");
    std::fs::create_dir(&stored).unwrap();
    let dest = format!("file:{}", stored.display());
    let checkpointed = [
        ("EBB_AUDIT_KEY_FILE", key.as_path()),
        ("EBB_AUDIT_CHECKPOINTS", Path::new(&dest)),
    ];
    // Shanghai's close, then Berlin's: each tick appends rows and checkpoints the head.
    for at in ["2026-11-30T10:00:00Z", "2026-11-30T18:00:00Z"] {
        let o = demo(&url).envs(checkpointed).run(&["tick", "--at", at]);
        ok(&o);
        assert!(!stderr(&o).contains("warning"), "{}", stderr(&o));
    }
    let mut names: Vec<String> = std::fs::read_dir(&stored)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(names.len(), 2, "one checkpoint a tick: {names:?}");
    let seq_of = |name: &str| -> i64 {
        name.trim_start_matches("checkpoint-")
            .trim_end_matches(".json")
            .parse()
            .unwrap()
    };
    let (first, head) = (seq_of(&names[0]), seq_of(&names[1]));
    let verify = [
        "audit",
        "verify",
        "--checkpoints",
        &dest,
        "--public-key",
        public.to_str().unwrap(),
    ];
    let text = ok(&demo(&reader_url).run(&verify));
    assert!(
        text.starts_with(&format!("ok: {head} audit rows, hash chain intact"))
            && text.ends_with(&format!("checkpoints hold up to row {head}\n")),
        "{text}"
    );

    // The second tick's rows, deleted by the owner: the chain alone still verifies.
    delete_tail(&pool, first).await;
    assert!(ok(&demo(&reader_url).run(&["audit", "verify"]))
        .starts_with(&format!("ok: {first} audit rows")));
    let o = demo(&reader_url).run(&verify);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let text = stdout(&o);
    assert!(
        text.contains(&format!("checkpoint-{head:020}.json (row {head},"))
            && text.contains(&format!(
                "the log ends at row {first}, so rows up to {head} were deleted"
            )),
        "{text}"
    );
    assert_eq!(
        text.lines().count(),
        1,
        "the first checkpoint holds: {text}"
    );
}
