//! The capacity reservations ebb makes for starts (`start.reserve_capacity`), one row each
//! from before its first call to the instance's release from it (migration 0032), and the
//! refused starts by instance that decide which starts get one.

use super::{Result, Store};
use crate::engine::MAX_CAPACITY_MEMORY;
use chrono::{DateTime, Utc};
use std::collections::HashMap;

/// The step a reservation is at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReservationStep {
    /// To make, or made with the answer lost (its token tells).
    Reserving,
    /// Made; the instance is to be made to start into it.
    Targeting,
    /// The instance starts into it: its start is next.
    Targeted,
    /// The instance runs, or the deadline passed: to cancel.
    Cancelling,
    /// Cancelled; the instance still made to start into it.
    Cancelled,
    /// The instance is back on open capacity: the row is history.
    Released,
    /// EC2 made no reservation: the start went on without one.
    Refused,
}

impl ReservationStep {
    /// Its name in the table.
    pub fn as_str(self) -> &'static str {
        match self {
            ReservationStep::Reserving => "reserving",
            ReservationStep::Targeting => "targeting",
            ReservationStep::Targeted => "targeted",
            ReservationStep::Cancelling => "cancelling",
            ReservationStep::Cancelled => "cancelled",
            ReservationStep::Released => "released",
            ReservationStep::Refused => "refused",
        }
    }

    /// The step named `name`; an unknown name is `None` (its row is left alone).
    pub fn parse(name: &str) -> Option<ReservationStep> {
        [
            ReservationStep::Reserving,
            ReservationStep::Targeting,
            ReservationStep::Targeted,
            ReservationStep::Cancelling,
            ReservationStep::Cancelled,
            ReservationStep::Released,
            ReservationStep::Refused,
        ]
        .into_iter()
        .find(|s| s.as_str() == name)
    }
}

/// One reservation as ebb keeps it.
#[derive(Debug, Clone, PartialEq)]
pub struct ReservationRow {
    /// ebb's token: the call's client token and the `ebb:reservation` tag.
    pub token: String,
    /// The instance it is for.
    pub instance: String,
    /// Its region.
    pub region: String,
    /// The policy that asked for it.
    pub policy: Option<String>,
    /// Its step; `None` for a name this version does not know.
    pub step: Option<ReservationStep>,
    /// The reservation EC2 made, once known.
    pub reservation_id: Option<String>,
    /// The type it holds, once made.
    pub instance_type: Option<String>,
    /// When ebb cancels it at the latest.
    pub ends_at: DateTime<Utc>,
    /// When the row was made (before the first call).
    pub created_at: DateTime<Utc>,
    /// When ebb learnt it was made: from then it is billed.
    pub made_at: Option<DateTime<Utc>>,
    /// When ebb learnt it was cancelled: its billing ends.
    pub cancelled_at: Option<DateTime<Utc>>,
}

type Row = (
    String,
    String,
    String,
    Option<String>,
    String,
    Option<String>,
    Option<String>,
    DateTime<Utc>,
    DateTime<Utc>,
    Option<DateTime<Utc>>,
    Option<DateTime<Utc>>,
);

impl Store {
    /// Every reservation not yet released or refused.
    pub async fn live_reservations(&self) -> Result<Vec<ReservationRow>> {
        let rows: Vec<Row> = sqlx::query_as(
            "SELECT token, instance, region, policy, state, reservation_id, instance_type,
                    ends_at, created_at, made_at, cancelled_at
             FROM capacity_reservations WHERE state NOT IN ('released', 'refused')
             ORDER BY created_at, token",
        )
        .fetch_all(&self.pool)
        .await?;
        Ok(rows
            .into_iter()
            .map(|r| ReservationRow {
                token: r.0,
                instance: r.1,
                region: r.2,
                policy: r.3,
                step: ReservationStep::parse(&r.4),
                reservation_id: r.5,
                instance_type: r.6,
                ends_at: r.7,
                created_at: r.8,
                made_at: r.9,
                cancelled_at: r.10,
            })
            .collect())
    }

    /// Records a reservation about to be asked for, at step `reserving`.
    pub async fn insert_reservation(&self, row: &ReservationRow) -> Result<()> {
        sqlx::query(
            "INSERT INTO capacity_reservations
                 (token, instance, region, policy, state, ends_at, created_at, updated_at)
             VALUES ($1, $2, $3, $4, 'reserving', $5, $6, $6)",
        )
        .bind(&row.token)
        .bind(&row.instance)
        .bind(&row.region)
        .bind(&row.policy)
        .bind(row.ends_at)
        .bind(row.created_at)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    /// Moves reservation `token` to `step` at `at`: with the reservation EC2 made when it is
    /// learnt (and then when it was made), and when it was cancelled.
    pub async fn set_reservation_step(
        &self,
        token: &str,
        step: ReservationStep,
        made: Option<(&str, &str)>,
        at: DateTime<Utc>,
    ) -> Result<()> {
        sqlx::query(
            "UPDATE capacity_reservations
             SET state = $2, updated_at = $3,
                 reservation_id = COALESCE($4, reservation_id),
                 instance_type = COALESCE($5, instance_type),
                 made_at = CASE WHEN $4 IS NOT NULL THEN COALESCE(made_at, $3) ELSE made_at END,
                 cancelled_at = CASE WHEN $2 = 'cancelled' THEN COALESCE(cancelled_at, $3)
                                     ELSE cancelled_at END
             WHERE token = $1",
        )
        .bind(token)
        .bind(step.as_str())
        .bind(at)
        .bind(made.map(|m| m.0))
        .bind(made.map(|m| m.1))
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    /// The starts EC2 refused for lack of capacity in the [`MAX_CAPACITY_MEMORY`] before
    /// `now`, by instance, oldest first.
    pub async fn refused_starts(
        &self,
        now: DateTime<Utc>,
    ) -> Result<HashMap<String, Vec<DateTime<Utc>>>> {
        let rows: Vec<(String, DateTime<Utc>)> = sqlx::query_as(
            "SELECT instance, at FROM audit_log
             WHERE action = 'start' AND outcome = 'failed' AND code = 'insufficient_capacity'
               AND at > $1 AND at <= $2 AND instance IS NOT NULL
             ORDER BY at",
        )
        .bind(now - MAX_CAPACITY_MEMORY)
        .bind(now)
        .fetch_all(&self.pool)
        .await?;
        let mut by_instance: HashMap<String, Vec<DateTime<Utc>>> = HashMap::new();
        for (instance, at) in rows {
            by_instance.entry(instance).or_default().push(at);
        }
        Ok(by_instance)
    }
}
