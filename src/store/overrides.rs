//! Overrides: a person keeps an instance from being stopped until a time. Each one is audited
//! when made and when revoked, and expires by itself.

use super::audit::append_in;
use super::audit_entry::NewAuditEntry;
use super::inventory::micros;
use super::wake::wake_leader;
use super::{Result, Store, StoreError};
use chrono::{DateTime, Utc};
use serde::Serialize;
use sqlx::PgConnection;

/// A stored override.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, sqlx::FromRow)]
pub struct OverrideRecord {
    /// Its id, for `--revoke`.
    pub id: i64,
    /// The protected instance.
    pub instance: String,
    /// When the protection ends.
    pub until: DateTime<Utc>,
    /// Why.
    pub reason: String,
    /// Who made it.
    pub created_by: String,
    /// When.
    pub created_at: DateTime<Utc>,
    /// When it was revoked, if it was.
    pub revoked_at: Option<DateTime<Utc>>,
    /// Who revoked it.
    pub revoked_by: Option<String>,
}

/// A request to keep an instance, checked the same way for the CLI and the API.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OverrideRequest {
    /// The instance to keep, trimmed.
    pub instance: String,
    /// Until when; later than the time of the request.
    pub until: DateTime<Utc>,
    /// Why, trimmed; never empty.
    pub reason: String,
}

/// Why an override request is refused; each message names the field and what to give.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OverrideRefused {
    /// No instance named.
    #[error("instance: must name an instance (an id like i-0abc)")]
    NoInstance,
    /// The end is not in the future.
    #[error("until: {0} is in the past; give a later time or a duration like 4h")]
    Past(String),
    /// No reason given.
    #[error("reason: must say why (it is recorded in the audit log)")]
    NoReason,
    /// The reason is longer than [`MAX_REASON`].
    #[error("reason: {0} characters is too long; say why in at most {MAX_REASON}")]
    ReasonTooLong(usize),
    /// The end is further off than the longest override allowed.
    #[error("until: {until} is more than {max} from now; the longest override is {max} (EBB_MAX_OVERRIDE)")]
    TooLong {
        /// The end asked for.
        until: String,
        /// The longest override, as people write it.
        max: String,
    },
    /// No live instance of that id is known.
    #[error("instance: ebb knows no live instance {0} (see ebb inventory or GET /v1/instances)")]
    UnknownInstance(String),
}

/// The longest reason an override may give, in characters.
pub const MAX_REASON: usize = 500;

impl OverrideRequest {
    /// Checks a request made at `now`: an instance, an end after `now` and at most `max` from
    /// it, and a reason of at most [`MAX_REASON`] characters. [`Store::override_request`]
    /// also checks that ebb knows the instance.
    pub fn new(
        instance: &str,
        until: DateTime<Utc>,
        reason: &str,
        now: DateTime<Utc>,
        max: chrono::Duration,
    ) -> std::result::Result<Self, OverrideRefused> {
        let (instance, reason) = (instance.trim(), reason.trim());
        if instance.is_empty() {
            return Err(OverrideRefused::NoInstance);
        }
        if until <= now {
            return Err(OverrideRefused::Past(until.to_rfc3339()));
        }
        if until - now > max {
            return Err(OverrideRefused::TooLong {
                until: until.to_rfc3339(),
                max: humantime::format_duration(max.to_std().unwrap_or_default()).to_string(),
            });
        }
        if reason.is_empty() {
            return Err(OverrideRefused::NoReason);
        }
        let length = reason.chars().count();
        if length > MAX_REASON {
            return Err(OverrideRefused::ReasonTooLong(length));
        }
        Ok(OverrideRequest {
            instance: instance.to_string(),
            until,
            reason: reason.to_string(),
        })
    }
}

/// The columns of `overrides`, in the order of [`OverrideRecord`].
macro_rules! columns {
    () => {
        "id, instance, until, reason, created_by, created_at, revoked_at, revoked_by"
    };
}

/// The overrides that protect any of `instances` at `now`, longest first, read inside the
/// caller's transaction.
pub(super) async fn protecting_in(
    conn: &mut PgConnection,
    instances: &[String],
    now: DateTime<Utc>,
) -> Result<Vec<OverrideRecord>> {
    Ok(sqlx::query_as(concat!(
        "SELECT ",
        columns!(),
        " FROM overrides WHERE revoked_at IS NULL AND until > $1 AND instance = ANY($2)
          ORDER BY until DESC, id"
    ))
    .bind(now)
    .bind(instances)
    .fetch_all(conn)
    .await?)
}

impl Store {
    /// The checks of [`OverrideRequest::new`], and that `instance` is one ebb lists now: the
    /// one validation the CLI and the API share.
    pub async fn override_request(
        &self,
        instance: &str,
        until: DateTime<Utc>,
        reason: &str,
        now: DateTime<Utc>,
        max: chrono::Duration,
    ) -> Result<std::result::Result<OverrideRequest, OverrideRefused>> {
        let request = match OverrideRequest::new(instance, until, reason, now, max) {
            Ok(request) => request,
            Err(refused) => return Ok(Err(refused)),
        };
        let known: bool = sqlx::query_scalar(
            "SELECT EXISTS (SELECT 1 FROM instances WHERE id = $1 AND gone_at IS NULL)",
        )
        .bind(&request.instance)
        .fetch_one(&self.pool)
        .await?;
        Ok(match known {
            true => Ok(request),
            false => Err(OverrideRefused::UnknownInstance(request.instance)),
        })
    }

    /// Protects `instance` until `until`, audits it in the same transaction, and wakes the
    /// leader.
    pub async fn create_override(
        &self,
        instance: &str,
        until: DateTime<Utc>,
        reason: &str,
        by: &str,
        now: DateTime<Utc>,
    ) -> Result<OverrideRecord> {
        let mut tx = self.pool.begin().await?;
        let record: OverrideRecord = sqlx::query_as(concat!(
            "INSERT INTO overrides (instance, until, reason, created_by, created_at)
             VALUES ($1, $2, $3, $4, $5) RETURNING ",
            columns!()
        ))
        .bind(instance)
        .bind(micros(until))
        .bind(reason)
        .bind(by)
        .bind(micros(now))
        .fetch_one(&mut *tx)
        .await?;
        let mut entry = NewAuditEntry::event(
            now,
            by,
            "override",
            format!(
                "override {} until {}: {reason}",
                record.id,
                until.to_rfc3339()
            ),
        );
        entry.instance = Some(instance.to_string());
        append_in(&mut tx, &[entry]).await?;
        // The leader decides again now rather than at its next tick.
        wake_leader(&mut tx).await?;
        tx.commit().await?;
        Ok(record)
    }

    /// Ends override `id` now, audits it, and wakes the leader. Unless `anyones`, only an
    /// override `by` made is revoked ([`StoreError::NotYours`] otherwise).
    pub async fn revoke_override(
        &self,
        id: i64,
        by: &str,
        now: DateTime<Utc>,
        anyones: bool,
    ) -> Result<OverrideRecord> {
        let mut tx = self.pool.begin().await?;
        let record: OverrideRecord = sqlx::query_as(concat!(
            "UPDATE overrides SET revoked_at = $2, revoked_by = $3
             WHERE id = $1 AND revoked_at IS NULL AND until > $2 RETURNING ",
            columns!()
        ))
        .bind(id)
        .bind(micros(now))
        .bind(by)
        .fetch_optional(&mut *tx)
        .await?
        .ok_or(StoreError::NoSuchOverride(id))?;
        if !anyones && record.created_by != by {
            // Dropping the transaction rolls the revocation back.
            return Err(StoreError::NotYours {
                id,
                owner: record.created_by,
            });
        }
        let mut entry = NewAuditEntry::event(
            now,
            by,
            "override_revoked",
            format!(
                "override {id} revoked (was until {})",
                record.until.to_rfc3339()
            ),
        );
        entry.instance = Some(record.instance.clone());
        append_in(&mut tx, &[entry]).await?;
        // The leader decides again now rather than at its next tick.
        wake_leader(&mut tx).await?;
        tx.commit().await?;
        Ok(record)
    }

    /// Overrides in force at `now`, soonest to expire first.
    pub async fn active_overrides(&self, now: DateTime<Utc>) -> Result<Vec<OverrideRecord>> {
        Ok(sqlx::query_as(concat!(
            "SELECT ",
            columns!(),
            " FROM overrides WHERE revoked_at IS NULL AND until > $1 ORDER BY until, id"
        ))
        .bind(now)
        .fetch_all(&self.pool)
        .await?)
    }

    /// Overrides whose making, or revoking, has no audit row (each with `making` or
    /// `revoking`): rows written to `overrides` other than through ebb, which would protect
    /// instances without a trace in the log.
    pub async fn unaudited_overrides(&self) -> Result<Vec<(OverrideRecord, &'static str)>> {
        let made = concat!(
            "SELECT ",
            columns!(),
            " FROM overrides o WHERE NOT EXISTS (SELECT 1 FROM audit_log a
              WHERE a.action = 'override' AND a.instance = o.instance
              AND a.reason LIKE 'override ' || o.id || ' until %') ORDER BY id"
        );
        let revoked = concat!(
            "SELECT ",
            columns!(),
            " FROM overrides o WHERE o.revoked_at IS NOT NULL AND NOT EXISTS (SELECT 1
              FROM audit_log a WHERE a.action = 'override_revoked' AND a.instance = o.instance
              AND a.reason LIKE 'override ' || o.id || ' revoked %') ORDER BY id"
        );
        let mut found = Vec::new();
        for (query, missing) in [(made, "making"), (revoked, "revoking")] {
            let rows: Vec<OverrideRecord> = sqlx::query_as(query).fetch_all(&self.pool).await?;
            found.extend(rows.into_iter().map(|o| (o, missing)));
        }
        Ok(found)
    }

    /// The overrides of `instance`, newest first: what its page shows, without reading every
    /// other instance's.
    pub async fn overrides_of(&self, instance: &str) -> Result<Vec<OverrideRecord>> {
        Ok(sqlx::query_as(concat!(
            "SELECT ",
            columns!(),
            " FROM overrides WHERE instance = $1 ORDER BY id DESC"
        ))
        .bind(instance)
        .fetch_all(&self.pool)
        .await?)
    }

    /// Every override ever made, newest last.
    pub async fn all_overrides(&self) -> Result<Vec<OverrideRecord>> {
        Ok(sqlx::query_as(concat!(
            "SELECT ",
            columns!(),
            " FROM overrides ORDER BY id"
        ))
        .fetch_all(&self.pool)
        .await?)
    }
}
