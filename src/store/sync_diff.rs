//! One inventory sync's writes: the listing compared with the rows the store has for its
//! regions (new, changed, unchanged and gone instances, and the state changes among them,
//! a person's start between two listings after ebb's stop included), then written in batches.

use super::Result;
use crate::fleet::{BillingModel, Instance, Owner, Tags};
use chrono::{DateTime, Utc};
use serde::Serialize;
use sha2::{Digest, Sha256};
use sqlx::types::Json;
use sqlx::PgConnection;
use std::collections::{HashMap, HashSet};

/// What one sync changed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct SyncReport {
    /// Instances seen for the first time.
    pub inserted: usize,
    /// Instances whose facts changed (or that came back after being gone).
    pub updated: usize,
    /// Instances whose rows were left as they were.
    pub unchanged: usize,
    /// Instances no longer listed, now marked gone.
    pub gone: usize,
}

/// Postgres keeps microseconds; instants are cut to that before they are stored or hashed, so
/// what is read back equals what was written.
pub(super) fn micros(t: DateTime<Utc>) -> DateTime<Utc> {
    DateTime::from_timestamp_micros(t.timestamp_micros()).unwrap_or(t)
}

/// A short hash of the cloud facts, so an unchanged instance costs no write.
fn fingerprint(i: &Instance) -> i64 {
    let mut h = Sha256::new();
    for part in [
        i.region.as_str(),
        i.instance_type.as_str(),
        i.state.as_str(),
        lifecycle(i),
        &i.launched_at
            .map(|t| micros(t).to_rfc3339())
            .unwrap_or_default(),
        i.billing.cloud.as_str(),
        i.billing.charge.as_str(),
        match i.billing.stop_saving {
            crate::fleet::StopSaving::KeepsCharging { family } => family,
            _ => "",
        },
    ] {
        h.update(part.as_bytes());
        h.update([0]);
    }
    for (k, v) in &i.tags {
        h.update(k.as_bytes());
        h.update([1]);
        h.update(v.as_bytes());
        h.update([0]);
    }
    let digest = h.finalize();
    let mut first = [0u8; 8];
    first.copy_from_slice(&digest[..8]);
    i64::from_be_bytes(first)
}

fn lifecycle(i: &Instance) -> &'static str {
    match i.lifecycle {
        crate::fleet::Lifecycle::OnDemand => "on-demand",
        crate::fleet::Lifecycle::Spot => "spot",
    }
}

/// How many instances one statement writes when a sync or a tick's decisions are written.
/// Postgres takes a 100k-row `UNNEST` in one statement, but its encoded arguments (30 to 50 MB
/// at 100k) were the largest allocations of a large fleet's tick; chunks of 10k cost a tenth
/// of that, and no measurable time.
pub(super) const ROWS_PER_STATEMENT: usize = 10_000;

/// Column arrays for a batch of instances, bound to `UNNEST` statements. They borrow from the
/// listing: only the encoded arguments copy its text.
#[derive(Default)]
struct Batch<'a> {
    id: Vec<&'a str>,
    region: Vec<&'a str>,
    instance_type: Vec<&'a str>,
    state: Vec<&'static str>,
    lifecycle: Vec<&'static str>,
    launched_at: Vec<Option<DateTime<Utc>>>,
    tags: Vec<Json<&'a Tags>>,
    fingerprint: Vec<i64>,
    owner: Vec<Option<Json<Owner>>>,
    billing: Vec<Json<BillingModel>>,
}

impl<'a> Batch<'a> {
    /// Runs `sql` with the batch's columns as `$1`..`$10` (in field order) and `now` as `$11`,
    /// [`ROWS_PER_STATEMENT`] rows at a time.
    async fn write(
        &self,
        conn: &mut PgConnection,
        now: DateTime<Utc>,
        sql: &'static str,
    ) -> Result<()> {
        for start in (0..self.id.len()).step_by(ROWS_PER_STATEMENT) {
            let rows = start..self.id.len().min(start + ROWS_PER_STATEMENT);
            sqlx::query(sql)
                .bind(&self.id[rows.clone()])
                .bind(&self.region[rows.clone()])
                .bind(&self.instance_type[rows.clone()])
                .bind(&self.state[rows.clone()])
                .bind(&self.lifecycle[rows.clone()])
                .bind(&self.launched_at[rows.clone()])
                .bind(&self.tags[rows.clone()])
                .bind(&self.fingerprint[rows.clone()])
                .bind(&self.owner[rows.clone()])
                .bind(&self.billing[rows])
                .bind(now)
                .execute(&mut *conn)
                .await?;
        }
        Ok(())
    }

    fn push(&mut self, i: &'a Instance, fp: i64) {
        self.id.push(&i.id);
        self.region.push(&i.region);
        self.instance_type.push(&i.instance_type);
        self.state.push(i.state.as_str());
        self.lifecycle.push(lifecycle(i));
        self.launched_at.push(i.launched_at.map(micros));
        self.tags.push(Json(&i.tags));
        self.fingerprint.push(fp);
        self.owner.push(i.owner().map(Json));
        self.billing.push(Json(i.billing.model()));
    }
}

/// State changes to record in `instance_events`.
#[derive(Default)]
struct Events {
    instance: Vec<String>,
    from_state: Vec<String>,
    to_state: Vec<String>,
    cause: Vec<&'static str>,
    /// When the change happened, when the cloud says; otherwise the sync's time.
    at: Vec<Option<DateTime<Utc>>>,
}

impl Events {
    fn push(&mut self, instance: &str, from: &str, to: &str, cause: &'static str) {
        self.push_at(instance, from, to, cause, None);
    }

    fn push_at(
        &mut self,
        instance: &str,
        from: &str,
        to: &str,
        cause: &'static str,
        at: Option<DateTime<Utc>>,
    ) {
        self.instance.push(instance.to_string());
        self.from_state.push(from.to_string());
        self.to_state.push(to.to_string());
        self.cause.push(cause);
        self.at.push(at.map(micros));
    }

    /// Writes the changes, at their own times or at `now`.
    async fn write(&self, conn: &mut PgConnection, now: DateTime<Utc>) -> Result<()> {
        if self.instance.is_empty() {
            return Ok(());
        }
        sqlx::query(
            "INSERT INTO instance_events (instance, at, from_state, to_state, cause)
             SELECT n.instance, coalesce(n.at, $5), n.from_state, n.to_state, n.cause
             FROM UNNEST($1::text[], $2::text[], $3::text[], $4::text[], $6::timestamptz[])
                  AS n(instance, from_state, to_state, cause, at)",
        )
        .bind(&self.instance)
        .bind(&self.from_state)
        .bind(&self.to_state)
        .bind(&self.cause)
        .bind(now)
        .bind(&self.at)
        .execute(conn)
        .await?;
        Ok(())
    }
}

/// A stored row as read: id, fingerprint, state, gone, `stopped_by_ebb_at`.
pub(super) type Row = (String, i64, String, bool, Option<DateTime<Utc>>);

/// A stored instance row, as a sync compares it with the listing.
pub(super) struct StoredRow {
    pub(super) id: String,
    pub(super) fingerprint: i64,
    pub(super) state: String,
    pub(super) gone: bool,
    /// When ebb's last stop of it succeeded, while it has not been seen up since.
    pub(super) stopped_by_ebb_at: Option<DateTime<Utc>>,
}

impl StoredRow {
    /// Whether `listed` was started again since ebb's stop, unseen stopped: ebb's stop
    /// succeeded since the stored state was recorded, and the listing shows it up again with
    /// no listing in between that saw it stopped (by the launch time, where the cloud gives
    /// one, later than the stop).
    fn restarted(&self, listed: &Instance) -> bool {
        let up = |state: &str| matches!(state, "pending" | "running");
        let Some(stopped) = self.stopped_by_ebb_at else {
            return false;
        };
        !self.gone
            && up(&self.state)
            && up(listed.state.as_str())
            && listed.launched_at.is_none_or(|t| micros(t) > stopped)
    }
}

/// What a sync writes: the listing compared with the rows the store has for its regions.
#[derive(Default)]
pub(super) struct SyncDiff<'a> {
    /// Instances seen for the first time.
    new: Batch<'a>,
    /// Instances whose facts changed, or that came back after being gone.
    changed: Batch<'a>,
    /// Of those, the ones started again since ebb's stop ([`StoredRow::restarted`]).
    restarted: Vec<&'a str>,
    /// Ids no longer listed.
    gone: Vec<String>,
    /// The state changes among them.
    events: Events,
    /// Instances whose rows stay as they are.
    unchanged: usize,
}

impl<'a> SyncDiff<'a> {
    /// Compares `instances` (the first of each id counts) with the stored `rows` of their
    /// regions, at `now`.
    pub(super) fn new(instances: &'a [Instance], rows: &[StoredRow], now: DateTime<Utc>) -> Self {
        let known: HashMap<&str, &StoredRow> = rows.iter().map(|r| (r.id.as_str(), r)).collect();
        let mut diff = SyncDiff::default();
        let mut seen = HashSet::with_capacity(instances.len());
        for i in instances {
            if !seen.insert(i.id.as_str()) {
                continue;
            }
            let fp = fingerprint(i);
            let state = i.state.as_str();
            match known.get(i.id.as_str()) {
                // A new instance's first state is in its row (first_seen_at, state_since); events
                // record changes, which keeps a first sync of a large fleet to one insert.
                None => diff.new.push(i, fp),
                // Stopped by ebb and started again before this listing saw it stopped: the
                // start is recorded, when it was (the launch time, where the cloud gives one).
                Some(row) if row.restarted(i) => {
                    diff.changed.push(i, fp);
                    diff.restarted.push(&i.id);
                    let at = i.launched_at.filter(|t| *t <= now);
                    diff.events.push_at(&i.id, "stopped", state, "observed", at);
                }
                Some(row) if row.fingerprint != fp || row.gone => {
                    diff.changed.push(i, fp);
                    if row.gone {
                        diff.events.push(&i.id, "gone", state, "reappeared");
                    } else if row.state != state {
                        diff.events.push(&i.id, &row.state, state, "observed");
                    }
                }
                Some(_) => diff.unchanged += 1,
            }
        }
        for row in rows {
            if !row.gone && !seen.contains(row.id.as_str()) {
                diff.gone.push(row.id.clone());
                diff.events.push(&row.id, &row.state, "gone", "gone");
            }
        }
        diff
    }

    /// What the sync changed.
    pub(super) fn report(&self) -> SyncReport {
        SyncReport {
            inserted: self.new.id.len(),
            updated: self.changed.id.len(),
            unchanged: self.unchanged,
            gone: self.gone.len(),
        }
    }

    /// Writes the new, changed and gone rows and the events, at `now`.
    pub(super) async fn write(&self, conn: &mut PgConnection, now: DateTime<Utc>) -> Result<()> {
        if !self.new.id.is_empty() {
            self.new
                .write(
                    conn,
                    now,
                    "INSERT INTO instances (id, region, instance_type, state, lifecycle, launched_at, tags,
                     fingerprint, owner, billing, first_seen_at, changed_at, state_since)
                 SELECT n.*, $11, $11, $11
                 FROM UNNEST($1::text[], $2::text[], $3::text[], $4::text[], $5::text[],
                             $6::timestamptz[], $7::jsonb[], $8::bigint[], $9::jsonb[],
                             $10::jsonb[]) AS n",
                )
                .await?;
        }
        if !self.changed.id.is_empty() {
            self.changed
                .write(
                    conn,
                    now,
                    "UPDATE instances AS i SET
                     region = n.region, instance_type = n.instance_type, lifecycle = n.lifecycle,
                     launched_at = n.launched_at, tags = n.tags, fingerprint = n.fingerprint,
                     owner = n.owner, billing = n.billing, changed_at = $11, gone_at = NULL,
                     state_since = CASE WHEN i.state <> n.state OR i.gone_at IS NOT NULL
                                        THEN $11 ELSE i.state_since END,
                     stopped_by_ebb_at = CASE WHEN n.state = 'running' AND i.state <> 'running'
                                              THEN NULL ELSE i.stopped_by_ebb_at END,
                     started_by_person_at = CASE
                         WHEN n.state NOT IN ('pending', 'running') OR i.gone_at IS NOT NULL
                             THEN NULL
                         WHEN i.state NOT IN ('stopped', 'stopping')
                             THEN i.started_by_person_at
                         WHEN coalesce(i.started_by_ebb_at >= i.state_since, false)
                              OR EXISTS (SELECT 1 FROM open_intents o JOIN audit_log a USING (seq)
                                         WHERE a.instance = i.id AND a.action = 'start')
                             THEN NULL
                         WHEN n.launched_at BETWEEN i.state_since AND $11 THEN n.launched_at
                         ELSE $11
                     END,
                     state = n.state
                 FROM UNNEST($1::text[], $2::text[], $3::text[], $4::text[], $5::text[],
                             $6::timestamptz[], $7::jsonb[], $8::bigint[], $9::jsonb[],
                             $10::jsonb[])
                      AS n(id, region, instance_type, state, lifecycle, launched_at, tags, fingerprint,
                           owner, billing)
                 WHERE i.id = n.id",
                )
                .await?;
        }
        if !self.restarted.is_empty() {
            // Started again since ebb's stop, unseen stopped (their new launch time written
            // above): since the launch, by a person unless ebb's own start is in flight.
            sqlx::query(
                "UPDATE instances AS i SET
                     state_since = least(coalesce(i.launched_at, $2), $2),
                     stopped_by_ebb_at = NULL,
                     started_by_person_at = CASE
                         WHEN EXISTS (SELECT 1 FROM open_intents o JOIN audit_log a USING (seq)
                                      WHERE a.instance = i.id AND a.action = 'start')
                             THEN NULL
                         ELSE least(coalesce(i.launched_at, $2), $2) END
                 WHERE i.id = ANY($1)",
            )
            .bind(&self.restarted)
            .bind(now)
            .execute(&mut *conn)
            .await?;
        }
        if !self.gone.is_empty() {
            sqlx::query("UPDATE instances SET gone_at = $2, changed_at = $2 WHERE id = ANY($1)")
                .bind(&self.gone)
                .bind(now)
                .execute(&mut *conn)
                .await?;
        }
        self.events.write(conn, now).await
    }
}
