//! The audit log: one row per intent and one per outcome, chained by hashes so that an edited,
//! removed or inserted row is detected by [`Store::verify_audit`].
//!
//! Each row stores `prev_hash` (the previous row's `hash`, zeros for the first) and
//! `hash = sha256(prev_hash ‖ canonical row)`, where the canonical row is the JSON array of
//! every other column in a fixed order. Appends take a transaction-scoped advisory lock, so
//! concurrent writers queue instead of forking the chain; a trigger refuses UPDATE, DELETE and
//! TRUNCATE.

use super::audit_entry::{AuditEntry, NewAuditEntry, Outcome};
use super::inventory::{micros, remember_in, ActionDone};
use super::{Result, Store};
use crate::cloud::redact_secrets;
use chrono::{DateTime, Utc};
use sha2::{Digest, Sha256};
use sqlx::{PgConnection, Postgres, QueryBuilder};
use std::collections::HashMap;

/// The hash of a row: sha256 of the previous hash and the canonical form of every column.
fn chain_hash(prev_hash: &[u8], seq: i64, e: &NewAuditEntry) -> Vec<u8> {
    let canonical = serde_json::json!([
        seq,
        e.at.format("%Y-%m-%dT%H:%M:%S%.6fZ").to_string(),
        e.actor,
        e.instance,
        e.region,
        e.action,
        e.outcome.as_str(),
        e.policy,
        e.policy_version,
        e.code,
        e.reason,
        e.dry_run,
        e.request_id,
        e.error,
        e.intent_seq,
    ]);
    let mut h = Sha256::new();
    h.update(prev_hash);
    h.update(canonical.to_string().as_bytes());
    h.finalize().to_vec()
}

/// Filters for reading the log; all given ones must hold.
#[derive(Debug, Clone, Default)]
pub struct AuditFilter {
    /// At or after.
    pub since: Option<DateTime<Utc>>,
    /// Before.
    pub until: Option<DateTime<Utc>>,
    /// This instance.
    pub instance: Option<String>,
    /// This policy.
    pub policy: Option<String>,
    /// This action.
    pub action: Option<String>,
    /// This outcome.
    pub outcome: Option<Outcome>,
    /// Only the newest this many rows (still returned oldest first); with `after`, the first
    /// this many after it.
    pub limit: Option<i64>,
    /// Only rows after this `seq`: a cursor for reading the log in pages.
    pub after: Option<i64>,
}

/// The result of recomputing the chain.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verification {
    /// Every row matches.
    Intact {
        /// Rows checked.
        rows: u64,
        /// The last row's hash, hex (empty when the log is empty).
        head: String,
    },
    /// The first row that does not match, and how.
    Broken {
        /// Its `seq`.
        seq: i64,
        /// What does not match.
        problem: String,
    },
}

/// How far a reader found the audit chain intact (its row count and head hash): where its next
/// verification starts, so that a page view checks the rows appended since, not the whole log.
#[derive(Debug, Default)]
pub struct VerifiedHead(std::sync::Mutex<Option<(u64, Vec<u8>)>>);

/// A row as read from `audit_log`.
#[derive(sqlx::FromRow)]
pub(super) struct Row {
    seq: i64,
    at: DateTime<Utc>,
    actor: String,
    instance: Option<String>,
    region: Option<String>,
    action: String,
    outcome: String,
    policy: Option<String>,
    policy_version: Option<String>,
    code: Option<String>,
    reason: String,
    dry_run: bool,
    request_id: Option<String>,
    error: Option<String>,
    intent_seq: Option<i64>,
    prev_hash: Vec<u8>,
    hash: Vec<u8>,
}

/// The columns of `audit_log`, in the order of [`Row`].
macro_rules! columns {
    () => {
        "seq, at, actor, instance, region, action, outcome, policy, policy_version, code, \
         reason, dry_run, request_id, error, intent_seq, prev_hash, hash"
    };
}

pub(super) fn from_row(r: Row) -> AuditEntry {
    AuditEntry {
        seq: r.seq,
        entry: NewAuditEntry {
            at: r.at,
            actor: r.actor,
            instance: r.instance,
            region: r.region,
            action: r.action,
            // The CHECK constraint admits only the four names.
            outcome: Outcome::parse(&r.outcome).unwrap_or(Outcome::Failed),
            policy: r.policy,
            policy_version: r.policy_version,
            code: r.code,
            reason: r.reason,
            dry_run: r.dry_run,
            request_id: r.request_id,
            error: r.error,
            intent_seq: r.intent_seq,
        },
        prev_hash: r.prev_hash,
        hash: r.hash,
    }
}

/// Appends `entries` in order inside the caller's transaction, after the newest row, and keeps
/// `open_intents` with them: an intent opens, an outcome closes its intent.
pub(super) async fn append_in(
    conn: &mut PgConnection,
    entries: &[NewAuditEntry],
) -> Result<Vec<AuditEntry>> {
    if entries.is_empty() {
        return Ok(Vec::new());
    }
    sqlx::query("SELECT pg_advisory_xact_lock(hashtext('ebb.audit'))")
        .execute(&mut *conn)
        .await?;
    let last: Option<(i64, Vec<u8>)> =
        sqlx::query_as("SELECT seq, hash FROM audit_log ORDER BY seq DESC LIMIT 1")
            .fetch_optional(&mut *conn)
            .await?;
    let (mut seq, mut prev) = last.unwrap_or((0, vec![0; 32]));
    let mut rows = Vec::with_capacity(entries.len());
    for e in entries {
        seq += 1;
        // The log is append-only and read by every reader: an error quoted in a reason, or
        // stored as the error, never keeps a key, token, signed URL or account id.
        let entry = NewAuditEntry {
            at: micros(e.at),
            reason: redact_secrets(&e.reason),
            error: e.error.as_deref().map(redact_secrets),
            ..e.clone()
        };
        let hash = chain_hash(&prev, seq, &entry);
        rows.push(AuditEntry {
            seq,
            entry,
            prev_hash: std::mem::replace(&mut prev, hash.clone()),
            hash,
        });
    }
    // Postgres allows 65535 bind parameters a statement; 17 a row.
    for chunk in rows.chunks(3000) {
        let mut insert = QueryBuilder::new(concat!("INSERT INTO audit_log (", columns!(), ") "));
        insert.push_values(chunk, |mut b, r| {
            let e = &r.entry;
            b.push_bind(r.seq)
                .push_bind(e.at)
                .push_bind(&e.actor)
                .push_bind(&e.instance)
                .push_bind(&e.region)
                .push_bind(&e.action)
                .push_bind(e.outcome.as_str())
                .push_bind(&e.policy)
                .push_bind(&e.policy_version)
                .push_bind(&e.code)
                .push_bind(&e.reason)
                .push_bind(e.dry_run)
                .push_bind(&e.request_id)
                .push_bind(&e.error)
                .push_bind(e.intent_seq)
                .push_bind(&r.prev_hash)
                .push_bind(&r.hash);
        });
        insert.build().execute(&mut *conn).await?;
    }
    let opened: Vec<i64> = rows
        .iter()
        .filter(|r| r.entry.outcome == Outcome::Intent)
        .map(|r| r.seq)
        .collect();
    let closed: Vec<i64> = rows.iter().filter_map(|r| r.entry.intent_seq).collect();
    if !opened.is_empty() {
        sqlx::query("INSERT INTO open_intents (seq) SELECT unnest($1::bigint[])")
            .bind(&opened)
            .execute(&mut *conn)
            .await?;
    }
    if !closed.is_empty() {
        sqlx::query("DELETE FROM open_intents WHERE seq = ANY($1)")
            .bind(&closed)
            .execute(&mut *conn)
            .await?;
    }
    super::summary::update_in(conn, &rows).await?;
    Ok(rows)
}

/// `SELECT` of every column of the rows matching `filter` (its `limit` aside), for the caller
/// to add further conditions (`AND ...`), an order and a limit to.
pub(super) fn select_where(filter: &AuditFilter) -> QueryBuilder<Postgres> {
    let mut q = QueryBuilder::new(concat!("SELECT ", columns!(), " FROM audit_log WHERE true"));
    if let Some(t) = filter.since {
        q.push(" AND at >= ").push_bind(t);
    }
    if let Some(t) = filter.until {
        q.push(" AND at < ").push_bind(t);
    }
    if let Some(v) = &filter.instance {
        q.push(" AND instance = ").push_bind(v);
    }
    if let Some(v) = &filter.policy {
        q.push(" AND policy = ").push_bind(v);
    }
    if let Some(v) = &filter.action {
        q.push(" AND action = ").push_bind(v);
    }
    if let Some(v) = filter.outcome {
        q.push(" AND outcome = ").push_bind(v.as_str());
    }
    if let Some(seq) = filter.after {
        q.push(" AND seq > ").push_bind(seq);
    }
    q
}

impl Store {
    /// Appends `entries`, in order, as one transaction; returns them with their `seq` and hashes.
    pub async fn append_audit(&self, entries: &[NewAuditEntry]) -> Result<Vec<AuditEntry>> {
        let mut tx = self.pool.begin().await?;
        let rows = append_in(&mut tx, entries).await?;
        tx.commit().await?;
        Ok(rows)
    }

    /// Appends the outcomes of actions and remembers what the cloud carried out (`done`), as one
    /// transaction. Were they apart, a crash between the two would leave an instance ebb stopped
    /// looking stopped by a person (whose stop sticks), and the interrupted intent resolved, so
    /// no later tick would put it right.
    pub async fn append_outcomes(
        &self,
        outcomes: &[NewAuditEntry],
        done: &[ActionDone],
    ) -> Result<Vec<AuditEntry>> {
        let mut tx = self.pool.begin().await?;
        let rows = append_in(&mut tx, outcomes).await?;
        remember_in(&mut tx, done).await?;
        tx.commit().await?;
        Ok(rows)
    }

    /// Appends each intent of an action ebb only records (a dry run) with its `skipped`
    /// outcome, whose reason ends in `; {note}`, as one transaction: no crash leaves one of
    /// them open for crash resolution to mistake for an action.
    pub async fn append_dry_runs(&self, intents: &[NewAuditEntry], note: &str) -> Result<()> {
        let mut tx = self.pool.begin().await?;
        let written = append_in(&mut tx, intents).await?;
        let skipped: Vec<NewAuditEntry> = written
            .into_iter()
            .map(|intent| NewAuditEntry {
                outcome: Outcome::Skipped,
                reason: format!("{}; {note}", intent.entry.reason),
                intent_seq: Some(intent.seq),
                ..intent.entry
            })
            .collect();
        append_in(&mut tx, &skipped).await?;
        tx.commit().await?;
        Ok(())
    }

    /// Rows matching `filter`, oldest first.
    pub async fn audit(&self, filter: &AuditFilter) -> Result<Vec<AuditEntry>> {
        let mut q = select_where(filter);
        let rows: Vec<Row> = match filter.limit {
            Some(n) if filter.after.is_some() => {
                q.push(" ORDER BY seq LIMIT ").push_bind(n);
                q.build_query_as().fetch_all(&self.pool).await?
            }
            Some(n) => {
                q.push(" ORDER BY seq DESC LIMIT ").push_bind(n);
                let mut rows: Vec<Row> = q.build_query_as().fetch_all(&self.pool).await?;
                rows.reverse();
                rows
            }
            None => {
                q.push(" ORDER BY seq");
                q.build_query_as().fetch_all(&self.pool).await?
            }
        };
        Ok(rows.into_iter().map(from_row).collect())
    }

    /// Intents that have no outcome, oldest first: actions a crash (or a lost connection)
    /// interrupted between the intent and its outcome.
    pub async fn pending_intents(&self) -> Result<Vec<AuditEntry>> {
        let rows: Vec<Row> = sqlx::query_as(concat!(
            "SELECT ",
            columns!(),
            " FROM audit_log JOIN open_intents USING (seq) ORDER BY seq"
        ))
        .fetch_all(&self.pool)
        .await?;
        Ok(rows.into_iter().map(from_row).collect())
    }

    /// When each of the open intents `seqs` was committed, on the database's clock (an
    /// intent closed since is absent): what an intent's in-flight window is measured from
    /// when the replicas' own clocks may disagree ([`crate::reconcile::Timers::Database`]).
    pub async fn intents_recorded(&self, seqs: &[i64]) -> Result<HashMap<i64, DateTime<Utc>>> {
        if seqs.is_empty() {
            return Ok(HashMap::new());
        }
        let rows: Vec<(i64, DateTime<Utc>)> =
            sqlx::query_as("SELECT seq, recorded_at FROM open_intents WHERE seq = ANY($1)")
                .bind(seqs)
                .fetch_all(&self.pool)
                .await?;
        Ok(rows.into_iter().collect())
    }

    /// The database's clock: one clock for every replica, whatever their hosts' say.
    pub async fn database_now(&self) -> Result<DateTime<Utc>> {
        Ok(sqlx::query_scalar("SELECT now()")
            .fetch_one(&self.pool)
            .await?)
    }

    /// Recomputes the whole chain, in pages, and reports the first row that does not match.
    pub async fn verify_audit(&self) -> Result<Verification> {
        self.verify_audit_after(0, vec![0u8; 32]).await
    }

    /// Verifies the rows appended since `known` was last found intact, after checking that
    /// its last row still has the hash it had then, and moves `known` to the new head. Rows
    /// before that one are not read again: `ebb audit verify` and the signed checkpoints
    /// cover them.
    pub async fn verify_audit_since(&self, known: &VerifiedHead) -> Result<Verification> {
        let start = known.0.lock().unwrap_or_else(|e| e.into_inner()).clone();
        let verification = match start {
            None => self.verify_audit().await?,
            Some((rows, hash)) => {
                let head: Option<Row> = sqlx::query_as(concat!(
                    "SELECT ",
                    columns!(),
                    " FROM audit_log WHERE seq = $1"
                ))
                .bind(rows as i64)
                .fetch_optional(&self.pool)
                .await?;
                // The head must still hash to what it did: its content recomputed, not only
                // its stored hash, which an edit could leave alone.
                let intact = head.map(from_row).is_some_and(|r| {
                    r.hash == hash && chain_hash(&r.prev_hash, r.seq, &r.entry) == hash
                });
                if !intact {
                    return Ok(Verification::Broken {
                        seq: rows as i64,
                        problem: "the row no longer matches the hash it had when it was \
                                  verified: it was changed or removed"
                            .into(),
                    });
                }
                self.verify_audit_after(rows, hash).await?
            }
        };
        if let Verification::Intact { rows, head } = &verification {
            if *rows > 0 {
                let hash = unhex(head).unwrap_or_default();
                *known.0.lock().unwrap_or_else(|e| e.into_inner()) = Some((*rows, hash));
            }
        }
        Ok(verification)
    }

    /// Verifies the rows after the first `rows`, the last of which has hash `prev`.
    async fn verify_audit_after(&self, rows: u64, prev: Vec<u8>) -> Result<Verification> {
        const PAGE: i64 = 10_000;
        let (mut expected_seq, mut prev, mut rows) = (rows as i64 + 1, prev, rows);
        loop {
            let page: Vec<Row> = sqlx::query_as(concat!(
                "SELECT ",
                columns!(),
                " FROM audit_log WHERE seq >= $1 ORDER BY seq LIMIT $2"
            ))
            .bind(expected_seq)
            .bind(PAGE)
            .fetch_all(&self.pool)
            .await?;
            let done = (page.len() as i64) < PAGE;
            for row in page {
                let r = from_row(row);
                let broken = |problem: String| {
                    Ok(Verification::Broken {
                        seq: r.seq,
                        problem,
                    })
                };
                if r.seq != expected_seq {
                    return broken(format!(
                        "expected row {expected_seq} next: rows are missing"
                    ));
                }
                if r.prev_hash != prev {
                    return broken("prev_hash is not the previous row's hash".into());
                }
                if chain_hash(&prev, r.seq, &r.entry) != r.hash {
                    return broken(
                        "the row's content does not match its hash: it was changed".into(),
                    );
                }
                prev = r.hash;
                expected_seq += 1;
                rows += 1;
            }
            if done {
                break;
            }
        }
        let head = if rows == 0 { String::new() } else { hex(&prev) };
        Ok(Verification::Intact { rows, head })
    }

    /// The newest row's `seq` and hash (hex), if there is a row.
    pub async fn audit_head(&self) -> Result<Option<(i64, String)>> {
        let head: Option<(i64, Vec<u8>)> =
            sqlx::query_as("SELECT seq, hash FROM audit_log ORDER BY seq DESC LIMIT 1")
                .fetch_optional(&self.pool)
                .await?;
        Ok(head.map(|(seq, hash)| (seq, hex(&hash))))
    }

    /// The hashes (hex) of the rows numbered `seqs` that exist.
    pub async fn audit_hashes(&self, seqs: &[i64]) -> Result<Vec<(i64, String)>> {
        let rows: Vec<(i64, Vec<u8>)> =
            sqlx::query_as("SELECT seq, hash FROM audit_log WHERE seq = ANY($1) ORDER BY seq")
                .bind(seqs)
                .fetch_all(&self.pool)
                .await?;
        Ok(rows.into_iter().map(|(seq, h)| (seq, hex(&h))).collect())
    }

    /// Records a change of policy-set version as an audit row; does nothing when `version` is
    /// the one recorded last. Returns whether it recorded.
    pub async fn record_policy_version(
        &self,
        version: &str,
        actor: &str,
        at: DateTime<Utc>,
    ) -> Result<bool> {
        let mut tx = self.pool.begin().await?;
        sqlx::query("SELECT pg_advisory_xact_lock(hashtext('ebb.audit'))")
            .execute(&mut *tx)
            .await?;
        let last: Option<Option<String>> = sqlx::query_scalar(
            "SELECT policy_version FROM audit_log WHERE action = 'policy_version' ORDER BY seq DESC LIMIT 1",
        )
        .fetch_optional(&mut *tx)
        .await?;
        let last = last.flatten();
        if last.as_deref() == Some(version) {
            return Ok(false);
        }
        let reason = match &last {
            Some(old) => format!("policy set changed from {old} to {version}"),
            None => format!("policy set {version} loaded"),
        };
        let mut entry = NewAuditEntry::event(at, actor, "policy_version", reason);
        entry.policy_version = Some(version.to_string());
        append_in(&mut tx, &[entry]).await?;
        tx.commit().await?;
        Ok(true)
    }
}

/// Checks rows read back from an export, in `seq` order: each row's hash is that of its
/// content and `prev_hash`, each row follows the one before it when their `seq`s are
/// consecutive, and a first row of the log starts from zeros. A filtered export has gaps, which
/// are not errors; the rows around a gap are each still checked.
pub fn verify_rows(rows: &[AuditEntry]) -> Verification {
    let mut previous: Option<&AuditEntry> = None;
    for r in rows {
        let broken = |problem: &str| Verification::Broken {
            seq: r.seq,
            problem: problem.to_string(),
        };
        match previous {
            Some(p) if r.seq <= p.seq => return broken("rows are out of order or repeated"),
            Some(p) if r.seq == p.seq + 1 && r.prev_hash != p.hash => {
                return broken("prev_hash is not the previous row's hash")
            }
            None if r.seq == 1 && r.prev_hash != [0u8; 32] => {
                return broken("the first row's prev_hash is not zeros")
            }
            _ => {}
        }
        if chain_hash(&r.prev_hash, r.seq, &r.entry) != r.hash {
            return broken("the row's content does not match its hash: it was changed");
        }
        previous = Some(r);
    }
    Verification::Intact {
        rows: rows.len() as u64,
        head: previous.map(|r| hex(&r.hash)).unwrap_or_default(),
    }
}

/// Lower-case hex.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The bytes of lower-case or upper-case hex; `None` if it is not hex.
pub fn unhex(text: &str) -> Option<Vec<u8>> {
    if text.len() % 2 != 0 {
        return None;
    }
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(text.get(i..i + 2)?, 16).ok())
        .collect()
}
