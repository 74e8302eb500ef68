//! Spot migrations: one row per move of an instance to spot, with its state and every step.
//! The leader advances each live one a step per tick (see the top-level `spot` module).
//!
//! The persisted types of a migration (its [`State`], [`Step`]s and [`Interruption`]s) live
//! here, so that the `spot` module builds on the store and the store needs nothing from it.

use super::audit::append_in;
use super::audit_entry::NewAuditEntry;
use super::inventory::micros;
use super::wake::wake_leader;
use super::{Page, Result, Store, StoreError};
use crate::cloud::{redact_secrets, LaunchSpec, Market};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use sqlx::types::Json;

/// Where a migration is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum State {
    /// Decided; nothing changed yet. The next tick checks eligibility again and stops it.
    Planned,
    /// The original is stopping (its guest gets a normal shutdown, so the job can checkpoint).
    Stopping,
    /// An image of the stopped original, with all its volumes, is being made.
    Imaging,
    /// A replacement was launched; waiting for it to run.
    Launching,
    /// The replacement runs; checked once more before the move counts as done.
    Verifying,
    /// The replacement serves the workload; ebb watches it for reclaims, and terminates the
    /// original after `keep_original_for`.
    Done,
    /// Being undone: a roll-back that could not finish yet (the original's start found no
    /// capacity) is tried again, with a growing wait, until the original runs.
    RollingBack,
    /// Undone: the original runs again and no replacement is left.
    RolledBack,
    /// Stopped half-way in a state ebb could not undo; the error says what to do.
    Failed,
}

impl State {
    /// The name stored and shown.
    pub fn as_str(self) -> &'static str {
        match self {
            State::Planned => "planned",
            State::Stopping => "stopping",
            State::Imaging => "imaging",
            State::Launching => "launching",
            State::Verifying => "verifying",
            State::Done => "done",
            State::RollingBack => "rolling_back",
            State::RolledBack => "rolled_back",
            State::Failed => "failed",
        }
    }

    /// The state named `s`.
    pub fn parse(s: &str) -> Option<State> {
        [
            State::Planned,
            State::Stopping,
            State::Imaging,
            State::Launching,
            State::Verifying,
            State::Done,
            State::RollingBack,
            State::RolledBack,
            State::Failed,
        ]
        .into_iter()
        .find(|state| state.as_str() == s)
    }
}

/// One step of a migration, as its history keeps it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Step {
    /// When.
    pub at: DateTime<Utc>,
    /// The state it led to.
    pub state: State,
    /// What was done, for people.
    pub detail: String,
    /// How many times the same step (same state and detail) came again right after it: a
    /// step that repeats (a clean-up failing at every try) updates this count instead of
    /// growing the history.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub repeated: u32,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

/// A replacement that spot capacity was reclaimed from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Interruption {
    /// When ebb saw it.
    pub at: DateTime<Utc>,
    /// The reclaimed instance.
    pub instance: String,
    /// Its type.
    pub instance_type: String,
    /// Its zone.
    pub zone: String,
}

/// The replacement an early move replaces (see `spot::early`): it keeps running until the new
/// one is verified, and its facts are kept so that a new one that does not come up hands the
/// workload back to it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Outgoing {
    /// The replacement being replaced.
    pub instance: String,
    /// Its market.
    pub market: Market,
    /// Its type.
    pub instance_type: Option<String>,
    /// Its zone.
    pub zone: Option<String>,
    /// Its subnet.
    pub subnet: Option<String>,
    /// Its $/hour when launched.
    pub price: Option<f64>,
    /// Since when it runs.
    pub running_since: Option<DateTime<Utc>>,
    /// Why it is replaced, for people.
    pub why: String,
}

/// A stored migration.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MigrationRecord {
    /// Its id.
    pub id: i64,
    /// The on-demand instance that was moved.
    pub original: String,
    /// Its region.
    pub region: String,
    /// The policy whose spot rule moved it.
    pub policy: String,
    /// Where the migration is.
    pub state: State,
    /// The instance running the workload now, once launched.
    pub current: Option<String>,
    /// Spot, or on-demand after a fallback.
    pub market: Market,
    /// The image replacements are launched from.
    pub image: Option<String>,
    /// The replacement's instance type.
    pub instance_type: Option<String>,
    /// The replacement's zone.
    pub zone: Option<String>,
    /// The replacement's subnet.
    pub subnet: Option<String>,
    /// The original's on-demand $/hour.
    pub on_demand_price: Option<f64>,
    /// The replacement's $/hour when launched.
    pub price: Option<f64>,
    /// Launches so far.
    pub launches: i32,
    /// Dollars saved by earlier replacements (the current one's are added on reading).
    pub saved_before: f64,
    /// Spot reclaims.
    #[serde(serialize_with = "inner")]
    pub interruptions: Json<Vec<Interruption>>,
    /// Every step taken.
    #[serde(serialize_with = "inner")]
    pub steps: Json<Vec<Step>>,
    /// How the original was launched (what replacements copy).
    #[serde(skip)]
    pub launch_spec: Option<Json<LaunchSpec>>,
    /// Why it was rolled back or failed.
    pub error: Option<String>,
    /// When it was planned.
    pub created_at: DateTime<Utc>,
    /// When its state last changed.
    pub state_since: DateTime<Utc>,
    /// When the current replacement was found running.
    pub running_since: Option<DateTime<Utc>>,
    /// When the stopped original was terminated.
    pub original_terminated_at: Option<DateTime<Utc>>,
    /// When the original was found running again (someone started it) and left to people.
    pub original_returned_at: Option<DateTime<Utc>>,
    /// When ebb stopped following it.
    pub ended_at: Option<DateTime<Utc>>,
    /// Failed attempts in a row of the step under way (a roll-back, the clean-up of the
    /// original).
    pub failures: i32,
    /// When that step may be tried again.
    pub retry_at: Option<DateTime<Utc>>,
    /// Until when the image is kept after the migration ended, as the only copy of the
    /// workload's disks.
    pub image_kept_until: Option<DateTime<Utc>>,
    /// The EBS snapshots of the image, recorded once it is available; after the image is
    /// deregistered, those not deleted yet.
    pub snapshots: Vec<String>,
    /// During an early move, the replacement being replaced: it runs until `current` is
    /// verified.
    #[serde(serialize_with = "inner_option")]
    pub outgoing: Option<Json<Outgoing>>,
}

fn inner_option<T: Serialize, S: serde::Serializer>(
    v: &Option<Json<T>>,
    s: S,
) -> std::result::Result<S::Ok, S::Error> {
    v.as_ref().map(|v| &v.0).serialize(s)
}

fn inner<T: Serialize, S: serde::Serializer>(
    v: &Json<T>,
    s: S,
) -> std::result::Result<S::Ok, S::Error> {
    v.0.serialize(s)
}

impl MigrationRecord {
    /// Where the migration is.
    pub fn state(&self) -> State {
        self.state
    }

    /// Whether the stopped original is still ebb's to roll back to or terminate.
    pub fn holds_original(&self) -> bool {
        self.original_terminated_at.is_none() && self.original_returned_at.is_none()
    }
}

/// A row of `spot_migrations` as stored: state and market as text, decoded by
/// [`MigrationRow::decode`] so that a value this ebb does not know is an error naming the
/// migration, never a silent default.
#[derive(sqlx::FromRow)]
struct MigrationRow {
    id: i64,
    original: String,
    region: String,
    policy: String,
    state: String,
    current: Option<String>,
    market: String,
    image: Option<String>,
    instance_type: Option<String>,
    zone: Option<String>,
    subnet: Option<String>,
    on_demand_price: Option<f64>,
    price: Option<f64>,
    launches: i32,
    saved_before: f64,
    interruptions: Json<Vec<Interruption>>,
    steps: Json<Vec<Step>>,
    launch_spec: Option<Json<LaunchSpec>>,
    error: Option<String>,
    created_at: DateTime<Utc>,
    state_since: DateTime<Utc>,
    running_since: Option<DateTime<Utc>>,
    original_terminated_at: Option<DateTime<Utc>>,
    original_returned_at: Option<DateTime<Utc>>,
    ended_at: Option<DateTime<Utc>>,
    failures: i32,
    retry_at: Option<DateTime<Utc>>,
    image_kept_until: Option<DateTime<Utc>>,
    snapshots: Vec<String>,
    outgoing: Option<Json<Outgoing>>,
}

impl MigrationRow {
    /// The record, with its state and market decoded.
    fn decode(self) -> Result<MigrationRecord> {
        let unknown = |column: &'static str, value: &str| StoreError::UnknownMigrationValue {
            id: self.id,
            column,
            value: value.to_string(),
        };
        let state = State::parse(&self.state).ok_or_else(|| unknown("state", &self.state))?;
        let market = Market::parse(&self.market).ok_or_else(|| unknown("market", &self.market))?;
        Ok(MigrationRecord {
            id: self.id,
            original: self.original,
            region: self.region,
            policy: self.policy,
            state,
            current: self.current,
            market,
            image: self.image,
            instance_type: self.instance_type,
            zone: self.zone,
            subnet: self.subnet,
            on_demand_price: self.on_demand_price,
            price: self.price,
            launches: self.launches,
            saved_before: self.saved_before,
            interruptions: self.interruptions,
            steps: self.steps,
            launch_spec: self.launch_spec,
            error: self.error,
            created_at: self.created_at,
            state_since: self.state_since,
            running_since: self.running_since,
            original_terminated_at: self.original_terminated_at,
            original_returned_at: self.original_returned_at,
            ended_at: self.ended_at,
            failures: self.failures,
            retry_at: self.retry_at,
            image_kept_until: self.image_kept_until,
            snapshots: self.snapshots,
            outgoing: self.outgoing,
        })
    }
}

/// Decodes every row, failing on the first that names an unknown state or market.
fn decode_all(rows: Vec<MigrationRow>) -> Result<Vec<MigrationRecord>> {
    rows.into_iter().map(MigrationRow::decode).collect()
}

/// The columns of `spot_migrations`, in the order of [`MigrationRecord`].
macro_rules! columns {
    () => {
        "id, original, region, policy, state, current, market, image, instance_type, zone, subnet,
         on_demand_price, price, launches, saved_before, interruptions, steps, launch_spec, error,
         created_at, state_since, running_since, original_terminated_at, original_returned_at,
         ended_at, failures, retry_at, image_kept_until, snapshots, outgoing"
    };
}

impl Store {
    /// Plans a migration of `original` at `audit.at`, with its audit entry, unless one is live
    /// already or one ended (rolled back or failed) after `retry_after`: `None` then.
    pub async fn plan_migration(
        &self,
        original: &str,
        region: &str,
        policy: &str,
        on_demand_price: Option<f64>,
        retry_after: DateTime<Utc>,
        audit: NewAuditEntry,
    ) -> Result<Option<MigrationRecord>> {
        let now = audit.at;
        let mut tx = self.pool.begin().await?;
        let recent: Option<i64> = sqlx::query_scalar(
            "SELECT id FROM spot_migrations
             WHERE original = $1 AND state IN ('rolled_back', 'failed') AND state_since > $2
             LIMIT 1",
        )
        .bind(original)
        .bind(micros(retry_after))
        .fetch_optional(&mut *tx)
        .await?;
        if recent.is_some() {
            return Ok(None);
        }
        let steps = Json(vec![Step {
            at: micros(now),
            state: State::Planned,
            detail: audit.reason.clone(),
            repeated: 0,
        }]);
        let row: Option<MigrationRow> = sqlx::query_as(concat!(
            "INSERT INTO spot_migrations (original, region, policy, state, on_demand_price, steps,
                 created_at, state_since)
             VALUES ($1, $2, $3, 'planned', $4, $5, $6, $6)
             ON CONFLICT DO NOTHING RETURNING ",
            columns!()
        ))
        .bind(original)
        .bind(region)
        .bind(policy)
        .bind(on_demand_price)
        .bind(steps)
        .bind(micros(now))
        .fetch_optional(&mut *tx)
        .await?;
        let record = row.map(MigrationRow::decode).transpose()?;
        if record.is_some() {
            append_in(&mut tx, &[audit]).await?;
        }
        tx.commit().await?;
        Ok(record)
    }

    /// Writes `migration` back (its state, facts and steps) with the audit entries of the step
    /// that changed it, in one transaction.
    pub async fn save_migration(
        &self,
        migration: &MigrationRecord,
        audit: &[NewAuditEntry],
    ) -> Result<()> {
        // Any reader may read the row: an error quoted in it keeps no secret.
        let error = migration.error.as_deref().map(redact_secrets);
        let steps: Vec<Step> = migration
            .steps
            .0
            .iter()
            .map(|s| Step {
                detail: redact_secrets(&s.detail),
                ..s.clone()
            })
            .collect();
        let mut tx = self.pool.begin().await?;
        sqlx::query(
            "UPDATE spot_migrations SET state = $2, current = $3, market = $4, image = $5,
                 instance_type = $6, zone = $7, subnet = $8, on_demand_price = $9, price = $10,
                 launches = $11, saved_before = $12, interruptions = $13, steps = $14,
                 launch_spec = $15, error = $16, state_since = $17, running_since = $18,
                 original_terminated_at = $19, original_returned_at = $20, ended_at = $21,
                 failures = $22, retry_at = $23, image_kept_until = $24, snapshots = $25,
                 outgoing = $26
             WHERE id = $1",
        )
        .bind(migration.id)
        .bind(migration.state.as_str())
        .bind(&migration.current)
        .bind(migration.market.as_str())
        .bind(&migration.image)
        .bind(&migration.instance_type)
        .bind(&migration.zone)
        .bind(&migration.subnet)
        .bind(migration.on_demand_price)
        .bind(migration.price)
        .bind(migration.launches)
        .bind(migration.saved_before)
        .bind(&migration.interruptions)
        .bind(Json(&steps))
        .bind(&migration.launch_spec)
        .bind(&error)
        .bind(micros(migration.state_since))
        .bind(migration.running_since.map(micros))
        .bind(migration.original_terminated_at.map(micros))
        .bind(migration.original_returned_at.map(micros))
        .bind(migration.ended_at.map(micros))
        .bind(migration.failures)
        .bind(migration.retry_at.map(micros))
        .bind(migration.image_kept_until.map(micros))
        .bind(&migration.snapshots)
        .bind(&migration.outgoing)
        .execute(&mut *tx)
        .await?;
        append_in(&mut tx, audit).await?;
        tx.commit().await?;
        Ok(())
    }

    /// Migrations the leader still works on: not rolled back or failed, and not ended, or
    /// ended but still keeping an image (the only copy of the workload's disks) or snapshots
    /// of one not deleted yet.
    pub async fn live_migrations(&self) -> Result<Vec<MigrationRecord>> {
        decode_all(
            sqlx::query_as(concat!(
                "SELECT ",
                columns!(),
                " FROM spot_migrations
             WHERE state NOT IN ('rolled_back', 'failed')
               AND (ended_at IS NULL OR image IS NOT NULL OR cardinality(snapshots) > 0)
             ORDER BY id"
            ))
            .fetch_all(&self.pool)
            .await?,
        )
    }

    /// A person lets go of the image that ended migration `id` keeps as the possible only copy
    /// of the workload's disks (`ebb spot-moves release`): the leader deletes it at its next
    /// tick. Audited as `by` in the same transaction; the leader is woken. `Ok(Err)` says why
    /// not when the migration keeps no image waiting for a release.
    pub async fn release_image(
        &self,
        id: i64,
        by: &str,
        now: DateTime<Utc>,
    ) -> Result<std::result::Result<MigrationRecord, String>> {
        let mut tx = self.pool.begin().await?;
        let row: Option<MigrationRow> = sqlx::query_as(concat!(
            "UPDATE spot_migrations SET image_kept_until = $2
             WHERE id = $1 AND ended_at IS NOT NULL AND image_kept_until IS NULL
               AND image IS NOT NULL
             RETURNING ",
            columns!()
        ))
        .bind(id)
        .bind(micros(now))
        .fetch_optional(&mut *tx)
        .await?;
        let Some(m) = row.map(MigrationRow::decode).transpose()? else {
            return Ok(Err(format!(
                "migration {id} keeps no image waiting for a release (see `ebb spot-moves`)"
            )));
        };
        let image = m.image.as_deref().unwrap_or_default();
        let mut entry = NewAuditEntry::event(
            now,
            by,
            "migrate_to_spot",
            format!(
                "migration {id}: image {image} released by {by}; the leader deletes it with its snapshots"
            ),
        );
        entry.instance = Some(m.original.clone());
        entry.region = Some(m.region.clone());
        entry.policy = Some(m.policy.clone());
        append_in(&mut tx, &[entry]).await?;
        wake_leader(&mut tx).await?;
        tx.commit().await?;
        Ok(Ok(m))
    }

    /// Records spot interruption warnings (instance, region, when) of instances that are a
    /// live migration's current replacement in that region, and wakes the leader, so that
    /// those migrations act now; returns the instances recorded. A warning for any other
    /// instance is not ebb's to act on (it could make ebb relaunch and lose track of a running
    /// replacement) and is left out.
    pub async fn record_spot_warnings(
        &self,
        warnings: &[(String, String, DateTime<Utc>)],
    ) -> Result<Vec<String>> {
        self.record_for_live_replacements(
            "INSERT INTO spot_warnings (instance, warned_at)
             SELECT $1, $2 WHERE EXISTS (
                 SELECT 1 FROM spot_migrations
                 WHERE current = $1 AND region = $3 AND ended_at IS NULL
                   AND state NOT IN ('rolling_back', 'rolled_back', 'failed'))
             ON CONFLICT (instance) DO UPDATE SET warned_at = EXCLUDED.warned_at",
            warnings,
        )
        .await
    }

    /// Runs `insert` (binding the instance, the time and the region, and inserting only for a
    /// live migration's replacement) for each of `rows` in one transaction, and wakes the
    /// leader when any was recorded; returns the instances recorded.
    pub(super) async fn record_for_live_replacements(
        &self,
        insert: &'static str,
        rows: &[(String, String, DateTime<Utc>)],
    ) -> Result<Vec<String>> {
        let mut tx = self.pool.begin().await?;
        let mut recorded = Vec::new();
        for (instance, region, at) in rows {
            let done = sqlx::query(insert)
                .bind(instance)
                .bind(micros(*at))
                .bind(region)
                .execute(&mut *tx)
                .await?;
            if done.rows_affected() > 0 {
                recorded.push(instance.clone());
            }
        }
        if !recorded.is_empty() {
            wake_leader(&mut tx).await?;
        }
        tx.commit().await?;
        Ok(recorded)
    }

    /// Which of `instances` were warned of a spot interruption.
    pub async fn spot_warnings(&self, instances: &[String]) -> Result<Vec<String>> {
        Ok(
            sqlx::query_scalar("SELECT instance FROM spot_warnings WHERE instance = ANY($1)")
                .bind(instances)
                .fetch_all(&self.pool)
                .await?,
        )
    }

    /// The migrations planned before `until` that had not ended by `since`, oldest first.
    pub(super) async fn migrations_overlapping(
        &self,
        since: DateTime<Utc>,
        until: DateTime<Utc>,
    ) -> Result<Vec<MigrationRecord>> {
        decode_all(
            sqlx::query_as(concat!(
                "SELECT ",
                columns!(),
                " FROM spot_migrations WHERE created_at < $2 AND (ended_at IS NULL OR ended_at >= $1)
                 ORDER BY id"
            ))
            .bind(since)
            .bind(until)
            .fetch_all(&self.pool)
            .await?,
        )
    }

    /// Every migration, oldest first.
    pub async fn migrations(&self) -> Result<Vec<MigrationRecord>> {
        decode_all(
            sqlx::query_as(concat!(
                "SELECT ",
                columns!(),
                " FROM spot_migrations ORDER BY id"
            ))
            .fetch_all(&self.pool)
            .await?,
        )
    }

    /// A page of the migrations, by id.
    pub async fn migrations_page(&self, page: &Page<i64>) -> Result<Vec<MigrationRecord>> {
        decode_all(
            sqlx::query_as(concat!(
                "SELECT ",
                columns!(),
                " FROM spot_migrations WHERE ($1::bigint IS NULL OR id > $1) ORDER BY id LIMIT $2"
            ))
            .bind(page.after)
            .bind(page.limit)
            .fetch_all(&self.pool)
            .await?,
        )
    }
}
