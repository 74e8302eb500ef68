//! Spot migrations: one row per move of an instance to spot, with its state and every step.
//! The leader advances each live one a step per tick (see `crate::spot`).

use super::audit::{append_in, NewAuditEntry};
use super::inventory::micros;
use super::leader::wake_leader;
use super::{Result, Store};
use crate::cloud::LaunchSpec;
use crate::spot::{Interruption, State, Step};
use chrono::{DateTime, Utc};
use serde::Serialize;
use sqlx::types::Json;

/// A stored migration.
#[derive(Debug, Clone, PartialEq, Serialize, sqlx::FromRow)]
pub struct MigrationRecord {
    /// Its id.
    pub id: i64,
    /// The on-demand instance that was moved.
    pub original: String,
    /// Its region.
    pub region: String,
    /// The policy whose spot rule moved it.
    pub policy: String,
    /// Where the migration is (`planned` ... `done`, `rolled_back`, `failed`).
    pub state: String,
    /// The instance running the workload now, once launched.
    pub current: Option<String>,
    /// `spot`, or `on-demand` after a fallback.
    pub market: String,
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
}

fn inner<T: Serialize, S: serde::Serializer>(
    v: &Json<T>,
    s: S,
) -> std::result::Result<S::Ok, S::Error> {
    v.0.serialize(s)
}

impl MigrationRecord {
    /// Its state, parsed.
    pub fn state(&self) -> State {
        State::parse(&self.state).unwrap_or(State::Failed)
    }

    /// Whether the stopped original is still ebb's to roll back to or terminate.
    pub fn holds_original(&self) -> bool {
        self.original_terminated_at.is_none() && self.original_returned_at.is_none()
    }
}

/// The columns of `spot_migrations`, in the order of [`MigrationRecord`].
macro_rules! columns {
    () => {
        "id, original, region, policy, state, current, market, image, instance_type, zone, subnet,
         on_demand_price, price, launches, saved_before, interruptions, steps, launch_spec, error,
         created_at, state_since, running_since, original_terminated_at, original_returned_at,
         ended_at"
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
        }]);
        let record: Option<MigrationRecord> = sqlx::query_as(concat!(
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
        let mut tx = self.pool.begin().await?;
        sqlx::query(
            "UPDATE spot_migrations SET state = $2, current = $3, market = $4, image = $5,
                 instance_type = $6, zone = $7, subnet = $8, on_demand_price = $9, price = $10,
                 launches = $11, saved_before = $12, interruptions = $13, steps = $14,
                 launch_spec = $15, error = $16, state_since = $17, running_since = $18,
                 original_terminated_at = $19, original_returned_at = $20, ended_at = $21
             WHERE id = $1",
        )
        .bind(migration.id)
        .bind(&migration.state)
        .bind(&migration.current)
        .bind(&migration.market)
        .bind(&migration.image)
        .bind(&migration.instance_type)
        .bind(&migration.zone)
        .bind(&migration.subnet)
        .bind(migration.on_demand_price)
        .bind(migration.price)
        .bind(migration.launches)
        .bind(migration.saved_before)
        .bind(&migration.interruptions)
        .bind(&migration.steps)
        .bind(&migration.launch_spec)
        .bind(&migration.error)
        .bind(micros(migration.state_since))
        .bind(migration.running_since.map(micros))
        .bind(migration.original_terminated_at.map(micros))
        .bind(migration.original_returned_at.map(micros))
        .bind(migration.ended_at.map(micros))
        .execute(&mut *tx)
        .await?;
        append_in(&mut tx, audit).await?;
        tx.commit().await?;
        Ok(())
    }

    /// Migrations the leader still works on: not rolled back, failed or ended.
    pub async fn live_migrations(&self) -> Result<Vec<MigrationRecord>> {
        Ok(sqlx::query_as(concat!(
            "SELECT ",
            columns!(),
            " FROM spot_migrations
             WHERE state NOT IN ('rolled_back', 'failed') AND ended_at IS NULL ORDER BY id"
        ))
        .fetch_all(&self.pool)
        .await?)
    }

    /// Records spot interruption warnings (instance, when) and wakes the leader, so that the
    /// migrations of those instances act now.
    pub async fn record_spot_warnings(&self, warnings: &[(String, DateTime<Utc>)]) -> Result<()> {
        let mut tx = self.pool.begin().await?;
        for (instance, at) in warnings {
            sqlx::query(
                "INSERT INTO spot_warnings (instance, warned_at) VALUES ($1, $2)
                 ON CONFLICT (instance) DO UPDATE SET warned_at = EXCLUDED.warned_at",
            )
            .bind(instance)
            .bind(micros(*at))
            .execute(&mut *tx)
            .await?;
        }
        wake_leader(&mut tx).await?;
        tx.commit().await?;
        Ok(())
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

    /// Every migration, oldest first.
    pub async fn migrations(&self) -> Result<Vec<MigrationRecord>> {
        Ok(sqlx::query_as(concat!(
            "SELECT ",
            columns!(),
            " FROM spot_migrations ORDER BY id"
        ))
        .fetch_all(&self.pool)
        .await?)
    }
}
