//! The database roles ebb runs as, and the schema check of every command but `ebb migrate`.
//!
//! The owner of the tables (who runs `ebb migrate`) is the only role that can change the schema
//! or switch off the audit log's append-only trigger. `ebb migrate --grant-runtime ROLE` gives a
//! role what `serve`, `tick` and `ebb override` do, table by table, taken from the statements of
//! `src/store/`: on the audit log only SELECT and INSERT. `--grant-reader ROLE` gives SELECT
//! alone, for people who run `ebb audit` and `ebb audit verify`. Grants are made afresh (every
//! earlier privilege of the role on ebb's tables revoked first), so re-running `ebb migrate
//! --grant-runtime` after an upgrade gives exactly what that version needs, new tables included.

use super::{Result, Store, StoreError, MIGRATOR};

/// What a role is granted by `ebb migrate`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Grant {
    /// What `serve`, `tick` and `ebb override` do: reads, appends to the audit log, and the
    /// writes of the other tables ([`RUNTIME_PRIVILEGES`]).
    Runtime,
    /// SELECT on every table: `ebb audit`, `ebb audit verify`, `ebb spot-moves`,
    /// `ebb override --list`, `ebb metrics export`.
    Reader,
}

impl Grant {
    /// `runtime` or `reader`, for messages.
    pub fn as_str(self) -> &'static str {
        match self {
            Grant::Runtime => "runtime",
            Grant::Reader => "reader",
        }
    }
}

/// The runtime role's privileges on each of ebb's tables: what the statements of `src/store/`
/// do to it, no more. `ON CONFLICT DO UPDATE` needs UPDATE; the pruner (`retention.rs`) deletes
/// old state changes, spot warnings and readings; an override's only update is its revocation.
/// Every table the migrations create is listed (`tests/postgres/roles.rs` checks it), and the sequences
/// behind their `bigserial` ids get USAGE.
pub const RUNTIME_PRIVILEGES: &[(&str, &str)] = &[
    ("_sqlx_migrations", "SELECT"),
    ("audit_log", "SELECT, INSERT"),
    (
        "open_intents",
        "SELECT, INSERT, DELETE, UPDATE (accepted_reason, accepted_request_id)",
    ),
    ("instances", "SELECT, INSERT, UPDATE"),
    ("region_syncs", "SELECT, INSERT, UPDATE"),
    ("instance_events", "SELECT, INSERT, DELETE"),
    (
        "overrides",
        "SELECT, INSERT, UPDATE (revoked_at, revoked_by)",
    ),
    ("spot_migrations", "SELECT, INSERT, UPDATE"),
    ("reclaims", "SELECT, INSERT, UPDATE"),
    ("spot_warnings", "SELECT, INSERT, UPDATE, DELETE"),
    ("spot_rebalances", "SELECT, INSERT, UPDATE, DELETE"),
    ("gpu_readings", "SELECT, INSERT, UPDATE, DELETE"),
    ("console_sessions", "SELECT, INSERT, DELETE"),
    ("scaling_groups", "SELECT, INSERT, UPDATE"),
    ("scaling_group_changes", "SELECT, INSERT"),
    ("scaling_group_sizes", "SELECT, INSERT"),
    ("event_cursor", "SELECT, INSERT, UPDATE"),
    ("snooze_key", "SELECT, INSERT"),
    ("snooze_links_used", "SELECT, INSERT, DELETE"),
    ("instance_types", "SELECT, INSERT, UPDATE"),
    ("report_days", "SELECT, INSERT"),
    ("report_rollup", "SELECT, INSERT, UPDATE"),
    ("report_hours", "SELECT, INSERT"),
    ("report_days_uncounted", "SELECT, INSERT"),
    ("state_changes_pruned", "SELECT, INSERT, UPDATE"),
    ("capacity_reservations", "SELECT, INSERT, UPDATE"),
    ("pool_events", "SELECT, INSERT, DELETE"),
    ("heartbeats", "SELECT, INSERT, UPDATE, DELETE"),
    ("activity_readings", "SELECT, INSERT, UPDATE, DELETE"),
    ("activity_uses", "SELECT, INSERT, UPDATE, DELETE"),
    ("budget_notices", "SELECT, INSERT"),
    ("calendar_notices", "SELECT, INSERT"),
    ("serve_clock", "SELECT, INSERT, UPDATE"),
    ("calendar_copies", "SELECT, INSERT, UPDATE"),
    ("capacity_reads", "SELECT, INSERT, UPDATE, DELETE"),
    ("budget_raises", "SELECT, INSERT"),
    ("price_quotes", "SELECT, INSERT, UPDATE"),
];

/// Tables the reader role gets no privilege on: what they hold is for the running service
/// alone (console logins, the key that signs snooze links).
const NOT_FOR_READERS: &[&str] = &["console_sessions", "snooze_key"];

/// `name` as a quoted SQL identifier: `"name"`, inner quotes doubled, so that any role name,
/// whatever it holds, stays one identifier.
fn quoted(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

impl Store {
    /// Refuses to go on unless the schema is exactly the one this binary knows: not migrated,
    /// behind, migrated by another build, or newer, each with what to run. What every command
    /// but `ebb migrate` checks; only `ebb migrate` changes the schema.
    pub async fn check_schema(&self) -> Result<()> {
        let Some(applied) = self.applied_migrations().await? else {
            return Err(StoreError::SchemaMissing);
        };
        let known = MIGRATOR.iter().map(|m| m.version).max().unwrap_or(0);
        if let Some(&(found, _)) = applied.iter().max().filter(|(v, _)| *v > known) {
            return Err(StoreError::SchemaTooNew { found, known });
        }
        for m in MIGRATOR.iter() {
            match applied.iter().find(|(v, _)| *v == m.version) {
                None => {
                    let found = applied.iter().map(|(v, _)| *v).max();
                    return Err(match found {
                        None => StoreError::SchemaMissing,
                        Some(found) => StoreError::SchemaBehind { found, known },
                    });
                }
                Some((_, checksum)) if *checksum != *m.checksum => {
                    return Err(StoreError::SchemaDiffers { version: m.version });
                }
                Some(_) => {}
            }
        }
        Ok(())
    }

    /// The migrations applied to the database (version, checksum), or `None` when it has none.
    pub(super) async fn applied_migrations(&self) -> Result<Option<Vec<(i64, Vec<u8>)>>> {
        match sqlx::query_as(
            "SELECT version, checksum FROM _sqlx_migrations WHERE success ORDER BY version",
        )
        .fetch_all(&self.pool)
        .await
        {
            Ok(v) => Ok(Some(v)),
            Err(sqlx::Error::Database(e)) if e.code().as_deref() == Some("42P01") => Ok(None),
            Err(sqlx::Error::Database(e)) if e.code().as_deref() == Some("42501") => {
                Err(StoreError::SchemaUnreadable)
            }
            Err(e) => Err(e.into()),
        }
    }

    /// Grants `role` (an existing role: not a superuser, without CREATEROLE, neither the
    /// tables' owner nor a member of it) the privileges of `grant` on ebb's tables, after
    /// revoking what it had on them. Run by the owner after [`Store::migrate`].
    pub async fn grant(&self, role: &str, grant: Grant) -> Result<()> {
        let mut tx = self.pool.begin().await?;
        // Replicas migrating at once: concurrent GRANTs on one table fail in Postgres
        // ("tuple concurrently updated"), so they queue here.
        sqlx::query("SELECT pg_advisory_xact_lock(hashtext('ebb.grants'))")
            .execute(&mut *tx)
            .await?;
        let (schema, owner): (String, Option<String>) = sqlx::query_as(
            "SELECT current_schema()::text, (SELECT tableowner::text FROM pg_tables
             WHERE schemaname = current_schema() AND tablename = 'audit_log')",
        )
        .fetch_one(&mut *tx)
        .await?;
        let owner = owner.ok_or(StoreError::SchemaMissing)?;
        let found: Option<(bool, bool, bool)> = sqlx::query_as(
            "SELECT rolsuper, rolcreaterole, pg_has_role(oid, $2::name, 'MEMBER')
             FROM pg_roles WHERE rolname = $1",
        )
        .bind(role)
        .bind(&owner)
        .fetch_optional(&mut *tx)
        .await?;
        let refused = |why: String| StoreError::GrantRefused {
            role: role.to_string(),
            why,
        };
        match found {
            None => return Err(StoreError::NoSuchRole(role.to_string())),
            Some((true, _, _)) => {
                return Err(refused(
                    "it is a superuser, which can switch off the audit log's trigger whatever \
                     it is granted"
                        .into(),
                ))
            }
            Some((_, true, _)) => {
                return Err(refused(
                    "it has CREATEROLE, with which it can make itself a member of the tables' \
                     owner"
                        .into(),
                ))
            }
            Some((_, _, true)) => {
                return Err(refused(format!(
                    "it is {owner}, the owner of ebb's tables, or a member of it, and an owner \
                     can switch off the audit log's trigger"
                )))
            }
            Some(_) => {}
        }
        let schema = quoted(&schema);
        let grantee = quoted(role);
        let sequences = sequences(&mut tx).await?;
        let statements = grant_statements(&schema, &grantee, grant, &sequences);
        for statement in statements {
            // Safe to run: every name in it is a constant of this file, or quoted ([`quoted`],
            // or by Postgres for the sequences).
            sqlx::query(sqlx::AssertSqlSafe(statement))
                .execute(&mut *tx)
                .await?;
        }
        tx.commit().await?;
        Ok(())
    }
}

/// The sequences behind the ids of ebb's tables, as Postgres names them (qualified and quoted
/// where needed).
async fn sequences(tx: &mut sqlx::PgConnection) -> Result<Vec<String>> {
    let tables: Vec<&str> = RUNTIME_PRIVILEGES.iter().map(|(t, _)| *t).collect();
    Ok(sqlx::query_scalar(
        "SELECT seq.name FROM unnest($1::text[]) AS t(name), pg_attribute AS a,
                 LATERAL pg_get_serial_sequence(quote_ident(t.name), a.attname::text) AS seq(name)
             WHERE a.attrelid = quote_ident(t.name)::regclass AND a.attnum > 0
               AND NOT a.attisdropped AND seq.name IS NOT NULL
             ORDER BY 1",
    )
    .bind(&tables)
    .fetch_all(tx)
    .await?)
}

/// The statements that make `grantee`'s privileges on ebb's tables in `schema` those of
/// `grant`: revoke every earlier one, then grant.
fn grant_statements(
    schema: &str,
    grantee: &str,
    grant: Grant,
    sequences: &[String],
) -> Vec<String> {
    let mut statements = vec![format!("GRANT USAGE ON SCHEMA {schema} TO {grantee}")];
    for (name, runtime) in RUNTIME_PRIVILEGES {
        let table = format!("{schema}.{}", quoted(name));
        statements.push(format!("REVOKE ALL ON TABLE {table} FROM {grantee}"));
        let privileges = match grant {
            Grant::Runtime => runtime,
            Grant::Reader if NOT_FOR_READERS.contains(name) => continue,
            Grant::Reader => "SELECT",
        };
        statements.push(format!("GRANT {privileges} ON TABLE {table} TO {grantee}"));
    }
    for sequence in sequences {
        statements.push(format!("REVOKE ALL ON SEQUENCE {sequence} FROM {grantee}"));
        if grant == Grant::Runtime {
            statements.push(format!("GRANT USAGE ON SEQUENCE {sequence} TO {grantee}"));
        }
    }
    statements
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_role_name_stays_one_identifier() {
        assert_eq!(quoted("ebb_runtime"), "\"ebb_runtime\"");
        assert_eq!(
            quoted("x\"; DROP TABLE audit_log; --"),
            "\"x\"\"; DROP TABLE audit_log; --\""
        );
    }

    #[test]
    fn the_reader_gets_select_alone_and_no_sequence() {
        let s = grant_statements(
            "\"public\"",
            "\"r\"",
            Grant::Reader,
            &["overrides_id_seq".into()],
        );
        let grants: Vec<&String> = s.iter().filter(|s| s.starts_with("GRANT ")).collect();
        assert_eq!(
            grants.len(),
            RUNTIME_PRIVILEGES.len() + 1 - NOT_FOR_READERS.len()
        );
        assert!(grants[1..]
            .iter()
            .all(|g| g.starts_with("GRANT SELECT ON TABLE")));
        assert!(!s.iter().any(|s| s.contains("GRANT USAGE ON SEQUENCE")));
        // Console logins: revoked, never granted.
        assert!(
            s.contains(&"REVOKE ALL ON TABLE \"public\".\"console_sessions\" FROM \"r\"".into())
        );
        assert!(!grants.iter().any(|g| g.contains("console_sessions")));
    }
}
