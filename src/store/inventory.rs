//! Instances: syncing what the cloud lists, and the prior facts the engine reads back.

use super::{Result, Store};
use crate::engine::{Action, Decision, InstanceFacts, Override, Prior};
use crate::fleet::{Instance, Owner, Tags};
use chrono::{DateTime, Utc};
use serde::Serialize;
use sha2::{Digest, Sha256};
use sqlx::types::Json;
use sqlx::PgConnection;
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

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

/// One instance as the store knows it.
#[derive(Debug, Clone, PartialEq, Serialize, sqlx::FromRow)]
pub struct InstanceRecord {
    /// Instance id.
    pub id: String,
    /// Region.
    pub region: String,
    /// Instance type.
    pub instance_type: String,
    /// Last observed EC2 state.
    pub state: String,
    /// `on-demand` or `spot`.
    pub lifecycle: String,
    /// Last start, as the cloud reports it.
    pub launched_at: Option<DateTime<Utc>>,
    /// Tags.
    pub tags: Json<BTreeMap<String, String>>,
    /// What owns it besides ebb, derived from its tags when they were stored.
    pub owner: Option<Json<Owner>>,
    /// First sync that listed it.
    pub first_seen_at: DateTime<Utc>,
    /// Last sync that listed it.
    pub last_seen_at: DateTime<Utc>,
    /// When the cloud stopped listing it.
    pub gone_at: Option<DateTime<Utc>>,
    /// When ebb saw it enter its state.
    pub state_since: DateTime<Utc>,
    /// The policy that governed it at the last decision.
    pub policy: Option<String>,
    /// When ebb last stopped it (cleared when seen running again).
    pub stopped_by_ebb_at: Option<DateTime<Utc>>,
    /// When ebb last started it.
    pub started_by_ebb_at: Option<DateTime<Utc>>,
    /// When ebb last gave notice of a stop.
    pub notified_at: Option<DateTime<Utc>>,
    /// When a person started it, while it runs since (see [`InstanceFacts`]).
    pub started_by_person_at: Option<DateTime<Utc>>,
    /// The latest decision's action (`none` when nothing is to be done).
    pub decided_action: Option<String>,
    /// The latest decision's code.
    pub decided_code: Option<String>,
    /// The latest decision's reason.
    pub decided_reason: Option<String>,
    /// Since when the decision has been what it is.
    pub decided_since: Option<DateTime<Utc>>,
}

/// One instance's latest decision, in the shape of `ebb plan --format json`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, sqlx::FromRow)]
pub struct PlannedAction {
    /// Instance id.
    pub instance: String,
    /// What is to be done.
    pub action: String,
    /// The governing policy.
    pub policy: Option<String>,
    /// Stable machine code.
    pub code: String,
    /// For people.
    pub reason: String,
}

/// The `SELECT` of [`InstanceRecord`]s from `instances i`, without a `WHERE` or an order.
macro_rules! select_instances {
    () => {
        "SELECT i.id, i.region, i.instance_type, i.state, i.lifecycle, i.launched_at, i.tags,
                i.owner, i.first_seen_at,
                CASE WHEN i.gone_at IS NULL THEN coalesce(r.synced_at, i.changed_at)
                     ELSE i.gone_at END AS last_seen_at,
                i.gone_at, i.state_since, i.policy, i.stopped_by_ebb_at, i.started_by_ebb_at,
                i.notified_at, i.started_by_person_at, i.decided_action, i.decided_code, i.decided_reason,
                i.decided_since
         FROM instances i LEFT JOIN region_syncs r ON r.region = i.region"
    };
}
pub(super) use select_instances;

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
const ROWS_PER_STATEMENT: usize = 10_000;

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
}

impl<'a> Batch<'a> {
    /// Runs `sql` with the batch's columns as `$1`..`$9` (in field order) and `now` as `$10`,
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
                .bind(&self.owner[rows])
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
    }
}

/// State changes to record in `instance_events`.
#[derive(Default)]
struct Events {
    instance: Vec<String>,
    from_state: Vec<String>,
    to_state: Vec<String>,
    cause: Vec<&'static str>,
}

impl Events {
    fn push(&mut self, instance: &str, from: &str, to: &str, cause: &'static str) {
        self.instance.push(instance.to_string());
        self.from_state.push(from.to_string());
        self.to_state.push(to.to_string());
        self.cause.push(cause);
    }

    /// Writes the changes at `now`.
    async fn write(&self, conn: &mut PgConnection, now: DateTime<Utc>) -> Result<()> {
        if self.instance.is_empty() {
            return Ok(());
        }
        sqlx::query(
            "INSERT INTO instance_events (instance, at, from_state, to_state, cause)
             SELECT n.instance, $5, n.from_state, n.to_state, n.cause
             FROM UNNEST($1::text[], $2::text[], $3::text[], $4::text[])
                  AS n(instance, from_state, to_state, cause)",
        )
        .bind(&self.instance)
        .bind(&self.from_state)
        .bind(&self.to_state)
        .bind(&self.cause)
        .bind(now)
        .execute(conn)
        .await?;
        Ok(())
    }
}

/// What a sync writes: the listing compared with the rows the store has for its regions.
#[derive(Default)]
struct SyncDiff<'a> {
    /// Instances seen for the first time.
    new: Batch<'a>,
    /// Instances whose facts changed, or that came back after being gone.
    changed: Batch<'a>,
    /// Ids no longer listed.
    gone: Vec<String>,
    /// The state changes among them.
    events: Events,
    /// Instances whose rows stay as they are.
    unchanged: usize,
}

impl<'a> SyncDiff<'a> {
    /// Compares `instances` (the first of each id counts) with the stored `rows` of their
    /// regions: (id, fingerprint, state, gone).
    fn new(instances: &'a [Instance], rows: &[(String, i64, String, bool)]) -> Self {
        let known: HashMap<&str, (i64, &str, bool)> = rows
            .iter()
            .map(|(id, fp, state, gone)| (id.as_str(), (*fp, state.as_str(), *gone)))
            .collect();
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
                Some(&(old_fp, old_state, gone)) if old_fp != fp || gone => {
                    diff.changed.push(i, fp);
                    if gone {
                        diff.events.push(&i.id, "gone", state, "reappeared");
                    } else if old_state != state {
                        diff.events.push(&i.id, old_state, state, "observed");
                    }
                }
                Some(_) => diff.unchanged += 1,
            }
        }
        for (id, _, state, was_gone) in rows {
            if !was_gone && !seen.contains(id.as_str()) {
                diff.gone.push(id.clone());
                diff.events.push(id, state, "gone", "gone");
            }
        }
        diff
    }

    /// What the sync changed.
    fn report(&self) -> SyncReport {
        SyncReport {
            inserted: self.new.id.len(),
            updated: self.changed.id.len(),
            unchanged: self.unchanged,
            gone: self.gone.len(),
        }
    }

    /// Writes the new, changed and gone rows and the events, at `now`.
    async fn write(&self, conn: &mut PgConnection, now: DateTime<Utc>) -> Result<()> {
        if !self.new.id.is_empty() {
            self.new
                .write(
                    conn,
                    now,
                    "INSERT INTO instances (id, region, instance_type, state, lifecycle, launched_at, tags,
                     fingerprint, owner, first_seen_at, changed_at, state_since)
                 SELECT n.*, $10, $10, $10
                 FROM UNNEST($1::text[], $2::text[], $3::text[], $4::text[], $5::text[],
                             $6::timestamptz[], $7::jsonb[], $8::bigint[], $9::jsonb[]) AS n",
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
                     owner = n.owner, changed_at = $10, gone_at = NULL,
                     state_since = CASE WHEN i.state <> n.state OR i.gone_at IS NOT NULL
                                        THEN $10 ELSE i.state_since END,
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
                         WHEN n.launched_at BETWEEN i.state_since AND $10 THEN n.launched_at
                         ELSE $10
                     END,
                     state = n.state
                 FROM UNNEST($1::text[], $2::text[], $3::text[], $4::text[], $5::text[],
                             $6::timestamptz[], $7::jsonb[], $8::bigint[], $9::jsonb[])
                      AS n(id, region, instance_type, state, lifecycle, launched_at, tags, fingerprint,
                           owner)
                 WHERE i.id = n.id",
                )
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

/// An action the cloud carried out, as ebb remembers it for its next decisions
/// (`stopped_by_ebb_at`, `started_by_ebb_at`, `notified_at`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ActionDone {
    /// The instance acted on.
    pub instance: String,
    /// What was done; only stops, hibernations, starts, notices and their withdrawals are
    /// remembered.
    pub action: Action,
    /// When.
    pub at: DateTime<Utc>,
}

/// Remembers `done` inside the caller's transaction, one statement per action and time.
pub(super) async fn remember_in(conn: &mut PgConnection, done: &[ActionDone]) -> Result<()> {
    // Each statement with the time it binds to $2, if it takes one.
    let mut statements: BTreeMap<(&str, Option<DateTime<Utc>>), Vec<String>> = BTreeMap::new();
    for d in done {
        let at = Some(micros(d.at));
        let key = match d.action {
            Action::Stop | Action::Hibernate => (
                "UPDATE instances SET stopped_by_ebb_at = $2 WHERE id = ANY($1)",
                at,
            ),
            Action::Start => (
                "UPDATE instances SET started_by_ebb_at = $2, stopped_by_ebb_at = NULL WHERE id = ANY($1)",
                at,
            ),
            Action::Notify => (
                "UPDATE instances SET notified_at = $2 WHERE id = ANY($1)",
                at,
            ),
            // A later stop needs a notice of its own.
            Action::WithdrawNotice => (
                "UPDATE instances SET notified_at = NULL WHERE id = ANY($1)",
                None,
            ),
            _ => continue,
        };
        statements.entry(key).or_default().push(d.instance.clone());
    }
    for ((sql, at), instances) in statements {
        let mut statement = sqlx::query(sql).bind(instances);
        if let Some(at) = at {
            statement = statement.bind(at);
        }
        statement.execute(&mut *conn).await?;
    }
    Ok(())
}

impl Store {
    /// Records what the cloud lists now in `regions` (and the regions of `instances`): new
    /// instances are inserted, changed ones updated, unchanged ones left as they are, and those
    /// no longer listed marked gone (never deleted). State changes become `instance_events`. An
    /// instance seen running again loses its `stopped_by_ebb_at`: its last stop is no longer
    /// ebb's.
    pub async fn sync_inventory(
        &self,
        regions: &[String],
        instances: &[Instance],
        now: DateTime<Utc>,
    ) -> Result<SyncReport> {
        let now = micros(now);
        let regions: Vec<String> = regions
            .iter()
            .cloned()
            .chain(instances.iter().map(|i| i.region.clone()))
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect();
        let mut tx = self.pool.begin().await?;
        // One sync at a time: two replicas syncing at once would both insert the same ids.
        sqlx::query("SELECT pg_advisory_xact_lock(hashtext('ebb.inventory'))")
            .execute(&mut *tx)
            .await?;
        // The live rows of the regions, then those of listed ids the store has only as gone
        // (back in the listing): gone rows, which only grow, are never loaded otherwise.
        let mut rows: Vec<(String, i64, String, bool)> = sqlx::query_as(
            "SELECT id, fingerprint, state, false FROM instances
             WHERE region = ANY($1) AND gone_at IS NULL",
        )
        .bind(&regions)
        .fetch_all(&mut *tx)
        .await?;
        let live: HashSet<&str> = rows.iter().map(|(id, ..)| id.as_str()).collect();
        let unseen: Vec<&str> = instances
            .iter()
            .map(|i| i.id.as_str())
            .filter(|id| !live.contains(id))
            .collect();
        if !unseen.is_empty() {
            let back: Vec<(String, i64, String, bool)> = sqlx::query_as(
                "SELECT id, fingerprint, state, true FROM instances
                 WHERE id = ANY($1) AND gone_at IS NOT NULL",
            )
            .bind(&unseen)
            .fetch_all(&mut *tx)
            .await?;
            rows.extend(back);
        }
        let diff = SyncDiff::new(instances, &rows);
        diff.write(&mut tx, now).await?;
        sqlx::query(
            "INSERT INTO region_syncs (region, synced_at) SELECT r, $2 FROM UNNEST($1::text[]) AS r
             ON CONFLICT (region) DO UPDATE SET synced_at = excluded.synced_at",
        )
        .bind(&regions)
        .bind(now)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(diff.report())
    }

    /// What `engine::decide` needs from before: ebb's last actions on each live instance, and
    /// the overrides active at `now`.
    pub async fn prior(&self, now: DateTime<Utc>) -> Result<Prior> {
        type FactsRow = (
            String,
            Option<DateTime<Utc>>,
            Option<DateTime<Utc>>,
            Option<DateTime<Utc>>,
            Option<DateTime<Utc>>,
        );
        let rows: Vec<FactsRow> = sqlx::query_as(
            "SELECT id, stopped_by_ebb_at, started_by_ebb_at, notified_at, started_by_person_at
             FROM instances
             WHERE gone_at IS NULL AND (stopped_by_ebb_at IS NOT NULL
                   OR started_by_ebb_at IS NOT NULL OR notified_at IS NOT NULL
                   OR started_by_person_at IS NOT NULL)",
        )
        .fetch_all(&self.pool)
        .await?;
        let facts = rows
            .into_iter()
            .map(
                |(id, stopped_by_ebb_at, started_by_ebb_at, notified_at, started_by_person_at)| {
                    let f = InstanceFacts {
                        stopped_by_ebb_at,
                        started_by_ebb_at,
                        notified_at,
                        started_by_person_at,
                    };
                    (id, f)
                },
            )
            .collect();
        let overrides = self.overrides_at(now).await?;
        let refused = self.capacity_failures(now).await?;
        let refused_starts = self.refused_starts(now).await?;
        Ok(Prior::new(facts, overrides)
            .with_capacity_failures(refused)
            .with_refused_starts(refused_starts))
    }

    /// The overrides active at `now`, as the engine takes them.
    pub async fn overrides_at(&self, now: DateTime<Utc>) -> Result<Vec<Override>> {
        Ok(self
            .active_overrides(now)
            .await?
            .into_iter()
            .map(|o| Override {
                instance: o.instance,
                until: o.until,
                reason: o.reason,
                by: o.created_by,
            })
            .collect())
    }

    /// The live instances a person started (see [`InstanceFacts::started_by_person_at`]): a
    /// tick reads their GPUs over the window that decides whether such a start has gone idle.
    pub async fn started_by_person(&self) -> Result<HashSet<String>> {
        let ids: Vec<String> = sqlx::query_scalar(
            "SELECT id FROM instances WHERE started_by_person_at IS NOT NULL AND gone_at IS NULL",
        )
        .fetch_all(&self.pool)
        .await?;
        Ok(ids.into_iter().collect())
    }

    /// Remembers that ebb did `action` to `instances` at `at` (after the cloud accepted it).
    pub async fn record_action(
        &self,
        instances: &[String],
        action: Action,
        at: DateTime<Utc>,
    ) -> Result<()> {
        let done: Vec<ActionDone> = instances
            .iter()
            .map(|instance| ActionDone {
                instance: instance.clone(),
                action,
                at,
            })
            .collect();
        remember_in(&mut *self.pool.acquire().await?, &done).await
    }

    /// Records each instance's decision (its policy, action, code and reason), writing only
    /// the rows where it changed; `decided_since` keeps when the decision last changed. The
    /// reason of a decision to do nothing is kept from when it was made: its numbers (a GPU
    /// reading, say) change at every tick, and rewriting half of a large fleet's rows at each
    /// tick would cost more than the rest of the tick. All or nothing, in statements of
    /// at most 10,000 decisions.
    pub async fn record_decisions(&self, decisions: &[Decision], at: DateTime<Utc>) -> Result<u64> {
        let mut tx = self.pool.begin().await?;
        let mut written = 0;
        for chunk in decisions.chunks(ROWS_PER_STATEMENT) {
            written += record_decisions_in(&mut tx, chunk, at).await?;
        }
        tx.commit().await?;
        Ok(written)
    }
}

/// Records `decisions` (see [`Store::record_decisions`]) in one statement.
async fn record_decisions_in(
    conn: &mut PgConnection,
    decisions: &[Decision],
    at: DateTime<Utc>,
) -> Result<u64> {
    let ids: Vec<&str> = decisions.iter().map(|d| d.instance.as_str()).collect();
    let policies: Vec<Option<&str>> = decisions.iter().map(|d| d.policy.as_deref()).collect();
    let actions: Vec<&str> = decisions.iter().map(|d| d.action.as_str()).collect();
    let codes: Vec<&str> = decisions.iter().map(|d| d.code.as_str()).collect();
    // A reason may quote a read's error: kept without anything secret-looking in it.
    let reasons: Vec<String> = decisions
        .iter()
        .map(|d| crate::cloud::redact_secrets(&d.reason))
        .collect();
    let done = sqlx::query(
        "UPDATE instances AS i SET policy = n.policy, decided_action = n.action,
                    decided_code = n.code, decided_reason = n.reason, decided_since = $6
             FROM UNNEST($1::text[], $2::text[], $3::text[], $4::text[], $5::text[])
                  AS n(id, policy, action, code, reason)
             WHERE i.id = n.id
               AND ((i.policy, i.decided_action, i.decided_code)
                        IS DISTINCT FROM (n.policy, n.action, n.code)
                    OR (n.action <> 'none' AND i.decided_reason IS DISTINCT FROM n.reason))",
    )
    .bind(&ids)
    .bind(&policies)
    .bind(&actions)
    .bind(&codes)
    .bind(&reasons)
    .bind(micros(at))
    .execute(conn)
    .await?;
    Ok(done.rows_affected())
}
