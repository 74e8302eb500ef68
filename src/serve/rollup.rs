//! Rolls up the report's past days (`report_days`): on the leader, every 15 minutes, each whole
//! day not rolled up yet that ended over an hour ago, oldest first and at most
//! [`DAYS_PER_ACTIVATION`] at a time (a day whose state changes were pruned first is refused,
//! not rolled from what is left), so that a first activation over a long history does not
//! hold the store for long. `/savings`, `GET /v1/report` and `ebb report` read those days from
//! their rollups and only the rest of the window from the audit log.

use super::driver::BackgroundTask;
use crate::clock::Clock;
use crate::control::Control;
use crate::store::{Store, StoreError};
use serde::Serialize;
use std::sync::Arc;

/// The most days one activation rolls up.
pub const DAYS_PER_ACTIVATION: u32 = 60;

/// Rolls up the report's past days at each activation, on the leader.
pub struct ReportRollup {
    store: Store,
    clock: Clock,
    control: Arc<Control>,
}

impl ReportRollup {
    /// A roll-up of `store`'s report days by `clock`'s time, when `control` says this replica
    /// leads.
    pub fn new(store: Store, clock: Clock, control: Arc<Control>) -> Self {
        ReportRollup {
            store,
            clock,
            control,
        }
    }
}

/// What an activation of the report roll-up did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(tag = "rolled", rename_all = "snake_case")]
pub enum RollupStatus {
    /// Nothing: only the leader rolls up.
    NotLeader,
    /// Days rolled up.
    Days {
        /// How many.
        days: u32,
        /// How many were refused, their state changes pruned before they were rolled up: the
        /// report does not count them.
        refused: u32,
    },
}

impl std::fmt::Display for RollupStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RollupStatus::NotLeader => write!(f, "not the leader, which rolls up"),
            RollupStatus::Days { days, refused: 0 } => {
                write!(f, "rolled up {days} days of the report")
            }
            RollupStatus::Days { days, refused } => write!(
                f,
                "rolled up {days} days of the report and refused {refused} whose state changes were pruned before they were rolled up (the report does not count them)"
            ),
        }
    }
}

/// Why the report roll-up failed.
#[derive(Debug, thiserror::Error)]
#[error("cannot roll up the report's days: {0}")]
pub struct RollupError(#[from] StoreError);

impl BackgroundTask for ReportRollup {
    const NAME: &'static str = "report_rollup";
    const DESCRIPTION: &'static str =
        "sums each past day's stopped stretches for the report (report_days), on the leader";

    type Status = RollupStatus;
    type Error = RollupError;

    async fn activate(&mut self) -> Result<RollupStatus, RollupError> {
        if !self.control.is_leader() {
            return Ok(RollupStatus::NotLeader);
        }
        let now = self.clock.now();
        let rolled = self
            .store
            .roll_up_report_days(now, DAYS_PER_ACTIVATION)
            .await?;
        Ok(RollupStatus::Days {
            days: rolled.days,
            refused: rolled.refused,
        })
    }
}
