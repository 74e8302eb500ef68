//! Reclaims: one row per box reclaimed after a long stop, from its notice to its termination,
//! and its restore when someone asks (the top-level `reclaim` module drives them).

use super::audit::append_in;
use super::audit_entry::NewAuditEntry;
use super::inventory::micros;
use super::wake::wake_leader;
use super::{Result, Store, StoreError};
use crate::cloud::{redact_secrets, LaunchSpec};
use crate::fleet::money::Volume;
use chrono::{DateTime, Utc};
use serde::Serialize;
use sqlx::types::Json;

/// Where a reclaim is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ReclaimState {
    /// Its notice is out; nothing is done before `due_at`.
    Noticed,
    /// Its image is being made, or was asked for and its answer lost.
    Imaging,
    /// Its image is proven and the box terminated (or its termination asked for and its answer
    /// lost): it waits for `ebb restore`.
    Reclaimed,
    /// A restore was asked for: the box is being launched from its image.
    Restoring,
    /// The box is up again, as `restored_as`. Ended, once its image is deleted when its
    /// policy sets `keep_image_for`.
    Restored,
    /// Given up before the termination: something keeps the box. Ended.
    Held,
    /// Not reclaimed: something of the box would not be in its image, or its image failed or
    /// cannot be proven. Ended.
    Refused,
}

impl ReclaimState {
    const ALL: [ReclaimState; 7] = [
        ReclaimState::Noticed,
        ReclaimState::Imaging,
        ReclaimState::Reclaimed,
        ReclaimState::Restoring,
        ReclaimState::Restored,
        ReclaimState::Held,
        ReclaimState::Refused,
    ];

    /// The name stored and shown.
    pub fn as_str(self) -> &'static str {
        match self {
            ReclaimState::Noticed => "noticed",
            ReclaimState::Imaging => "imaging",
            ReclaimState::Reclaimed => "reclaimed",
            ReclaimState::Restoring => "restoring",
            ReclaimState::Restored => "restored",
            ReclaimState::Held => "held",
            ReclaimState::Refused => "refused",
        }
    }

    fn parse(s: &str) -> Option<ReclaimState> {
        Self::ALL.into_iter().find(|r| r.as_str() == s)
    }
}

/// One reclaim, as stored.
#[derive(Debug, Clone, Serialize)]
pub struct ReclaimRecord {
    /// Its id.
    pub id: i64,
    /// The box.
    pub instance: String,
    /// Its region.
    pub region: String,
    /// The policy whose `stopped` rule reclaims it.
    pub policy: String,
    /// Where the reclaim is.
    pub state: ReclaimState,
    /// When the box stopped, as its listing said when the reclaim was planned.
    pub stopped_since: DateTime<Utc>,
    /// The end of its notice: not before then is its image made.
    pub due_at: DateTime<Utc>,
    /// Its image, once asked for.
    pub image: Option<String>,
    /// The image's snapshots, once it is available.
    pub snapshots: Vec<String>,
    /// The volumes the image restores to, once proven: what the box paid for its disks.
    pub image_volumes: Option<Vec<Volume>>,
    /// How the box was launched (read before its image is made): what a restore launches with.
    #[serde(skip)]
    pub launch_spec: Option<Json<LaunchSpec>>,
    /// When its termination was seen done.
    pub terminated_at: Option<DateTime<Utc>>,
    /// When a restore was asked for, and by whom.
    pub restore_asked_at: Option<DateTime<Utc>>,
    /// Who asked for the restore.
    pub restore_asked_by: Option<String>,
    /// The box launched from the image.
    pub restored_as: Option<String>,
    /// When the image was deregistered, once the restored box had been up `keep_image_for`.
    pub image_deleted_at: Option<DateTime<Utc>>,
    /// Why it was held or refused.
    pub error: Option<String>,
    /// When it was planned.
    pub created_at: DateTime<Utc>,
    /// When its state last changed.
    pub state_since: DateTime<Utc>,
    /// When it ended (held, refused or restored).
    pub ended_at: Option<DateTime<Utc>>,
}

/// A row of `reclaims`, its state as text.
#[derive(sqlx::FromRow)]
struct ReclaimRow {
    id: i64,
    instance: String,
    region: String,
    policy: String,
    state: String,
    stopped_since: DateTime<Utc>,
    due_at: DateTime<Utc>,
    image: Option<String>,
    snapshots: Vec<String>,
    image_volumes: Option<Json<Vec<Volume>>>,
    launch_spec: Option<Json<LaunchSpec>>,
    terminated_at: Option<DateTime<Utc>>,
    restore_asked_at: Option<DateTime<Utc>>,
    restore_asked_by: Option<String>,
    restored_as: Option<String>,
    image_deleted_at: Option<DateTime<Utc>>,
    error: Option<String>,
    created_at: DateTime<Utc>,
    state_since: DateTime<Utc>,
    ended_at: Option<DateTime<Utc>>,
}

impl ReclaimRow {
    /// The record; a state this ebb does not know is an error naming the row.
    fn decode(self) -> Result<ReclaimRecord> {
        let state =
            ReclaimState::parse(&self.state).ok_or_else(|| StoreError::UnknownReclaimState {
                id: self.id,
                value: self.state.clone(),
            })?;
        Ok(ReclaimRecord {
            id: self.id,
            instance: self.instance,
            region: self.region,
            policy: self.policy,
            state,
            stopped_since: self.stopped_since,
            due_at: self.due_at,
            image: self.image,
            snapshots: self.snapshots,
            image_volumes: self.image_volumes.map(|v| v.0),
            launch_spec: self.launch_spec,
            terminated_at: self.terminated_at,
            restore_asked_at: self.restore_asked_at,
            restore_asked_by: self.restore_asked_by,
            restored_as: self.restored_as,
            image_deleted_at: self.image_deleted_at,
            error: self.error,
            created_at: self.created_at,
            state_since: self.state_since,
            ended_at: self.ended_at,
        })
    }
}

/// The columns of `reclaims`, in the order of [`ReclaimRecord`].
macro_rules! columns {
    () => {
        "id, instance, region, policy, state, stopped_since, due_at, image, snapshots,
         image_volumes, launch_spec, terminated_at, restore_asked_at, restore_asked_by, restored_as,
         image_deleted_at, error, created_at, state_since, ended_at"
    };
}

fn decode_all(rows: Vec<ReclaimRow>) -> Result<Vec<ReclaimRecord>> {
    rows.into_iter().map(ReclaimRow::decode).collect()
}

impl Store {
    /// Plans the reclaim of `instance`, stopped since `stopped_since`, due at `due_at`, with
    /// `audit` (its notice, or its plan) in the same transaction: `None` when one is under way,
    /// or one ended after `quiet_since` (a reclaim held or refused is not planned again at once).
    #[allow(clippy::too_many_arguments)]
    pub async fn plan_reclaim(
        &self,
        instance: &str,
        region: &str,
        policy: &str,
        stopped_since: DateTime<Utc>,
        due_at: DateTime<Utc>,
        quiet_since: DateTime<Utc>,
        audit: NewAuditEntry,
    ) -> Result<Option<ReclaimRecord>> {
        let mut tx = self.pool.begin().await?;
        let recent: Option<i64> = sqlx::query_scalar(
            "SELECT id FROM reclaims WHERE instance = $1 AND ended_at > $2 LIMIT 1",
        )
        .bind(instance)
        .bind(micros(quiet_since))
        .fetch_optional(&mut *tx)
        .await?;
        if recent.is_some() {
            return Ok(None);
        }
        let row: Option<ReclaimRow> = sqlx::query_as(concat!(
            "INSERT INTO reclaims (instance, region, policy, state, stopped_since, due_at,
                 created_at, state_since)
             VALUES ($1, $2, $3, 'noticed', $4, $5, $6, $6)
             ON CONFLICT DO NOTHING RETURNING ",
            columns!()
        ))
        .bind(instance)
        .bind(region)
        .bind(policy)
        .bind(micros(stopped_since))
        .bind(micros(due_at))
        .bind(micros(audit.at))
        .fetch_optional(&mut *tx)
        .await?;
        let Some(record) = row.map(ReclaimRow::decode).transpose()? else {
            return Ok(None);
        };
        append_in(&mut tx, &[audit]).await?;
        tx.commit().await?;
        Ok(Some(record))
    }

    /// Reclaims not ended: noticed, imaging, reclaimed (waiting for a restore) and restoring.
    pub async fn live_reclaims(&self) -> Result<Vec<ReclaimRecord>> {
        let rows = sqlx::query_as(concat!(
            "SELECT ",
            columns!(),
            " FROM reclaims WHERE ended_at IS NULL ORDER BY id"
        ))
        .fetch_all(&self.pool)
        .await?;
        decode_all(rows)
    }

    /// Every reclaim, newest first: what `ebb reclaims` lists.
    pub async fn reclaims(&self) -> Result<Vec<ReclaimRecord>> {
        let rows = sqlx::query_as(concat!(
            "SELECT ",
            columns!(),
            " FROM reclaims ORDER BY id DESC"
        ))
        .fetch_all(&self.pool)
        .await?;
        decode_all(rows)
    }

    /// Writes `r` back with the audit entries of the step that changed it, in one transaction.
    pub async fn save_reclaim(&self, r: &ReclaimRecord, audit: &[NewAuditEntry]) -> Result<()> {
        // Any reader may read the row: an error quoted in it keeps no secret.
        let error = r.error.as_deref().map(redact_secrets);
        let mut tx = self.pool.begin().await?;
        sqlx::query(
            "UPDATE reclaims SET state = $2, image = $3, snapshots = $4, launch_spec = $5,
                 terminated_at = $6, restored_as = $7, error = $8, state_since = $9,
                 ended_at = $10, restore_asked_at = $11, restore_asked_by = $12,
                 image_deleted_at = $13, image_volumes = $14
             WHERE id = $1",
        )
        .bind(r.id)
        .bind(r.state.as_str())
        .bind(&r.image)
        .bind(&r.snapshots)
        .bind(&r.launch_spec)
        .bind(r.terminated_at.map(micros))
        .bind(&r.restored_as)
        .bind(&error)
        .bind(micros(r.state_since))
        .bind(r.ended_at.map(micros))
        .bind(r.restore_asked_at.map(micros))
        .bind(&r.restore_asked_by)
        .bind(r.image_deleted_at.map(micros))
        .bind(r.image_volumes.as_ref().map(Json))
        .execute(&mut *tx)
        .await?;
        append_in(&mut tx, audit).await?;
        tx.commit().await?;
        Ok(())
    }

    /// Someone (`by`) asks for reclaimed box `instance` back (`ebb restore`): the leader
    /// launches it from its image at its next tick, which this wakes. Audited in the same
    /// transaction. `Err` with why not when no reclaim of it waits for a restore.
    pub async fn ask_restore(
        &self,
        instance: &str,
        by: &str,
        now: DateTime<Utc>,
    ) -> Result<std::result::Result<ReclaimRecord, String>> {
        let mut tx = self.pool.begin().await?;
        let row: Option<ReclaimRow> = sqlx::query_as(concat!(
            "UPDATE reclaims SET restore_asked_at = $2, restore_asked_by = $3
             WHERE instance = $1 AND state = 'reclaimed' AND ended_at IS NULL
               AND restore_asked_at IS NULL
             RETURNING ",
            columns!()
        ))
        .bind(instance)
        .bind(micros(now))
        .bind(by)
        .fetch_optional(&mut *tx)
        .await?;
        let Some(r) = row.map(ReclaimRow::decode).transpose()? else {
            let why = match self.reclaim_of(instance).await? {
                Some(r) if r.restore_asked_at.is_some() && r.ended_at.is_none() => format!(
                    "its restore was asked for already by {} (reclaim {}, {})",
                    r.restore_asked_by.as_deref().unwrap_or("someone"),
                    r.id,
                    r.state.as_str()
                ),
                Some(r) => format!(
                    "its last reclaim ({}) is {}, not waiting for a restore",
                    r.id,
                    r.state.as_str()
                ),
                None => "ebb has not reclaimed it".to_string(),
            };
            return Ok(Err(why));
        };
        let mut entry = NewAuditEntry::event(
            now,
            by,
            "restore_asked",
            format!(
                "reclaim {}: {by} asks for {instance} back from image {}",
                r.id,
                r.image.as_deref().unwrap_or("-")
            ),
        );
        entry.instance = Some(r.instance.clone());
        entry.region = Some(r.region.clone());
        entry.policy = Some(r.policy.clone());
        append_in(&mut tx, &[entry]).await?;
        wake_leader(&mut tx).await?;
        tx.commit().await?;
        Ok(Ok(r))
    }

    /// The newest reclaim of `instance`, if any.
    pub async fn reclaim_of(&self, instance: &str) -> Result<Option<ReclaimRecord>> {
        let row: Option<ReclaimRow> = sqlx::query_as(concat!(
            "SELECT ",
            columns!(),
            " FROM reclaims WHERE instance = $1 ORDER BY id DESC LIMIT 1"
        ))
        .bind(instance)
        .fetch_optional(&self.pool)
        .await?;
        row.map(ReclaimRow::decode).transpose()
    }
}
