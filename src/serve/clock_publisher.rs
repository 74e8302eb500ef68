//! Publishes a simulated clock in the database (`serve_clock`) at every activation, so that
//! the commands run against the same database (`ebb spot-moves`, `ebb report`, `ebb override`,
//! `ebb audit --since 24h`, ...) count to the demo's time rather than the system's. Registered
//! only when serve runs on a simulated clock; every replica publishes (the demo has one).

use super::driver::BackgroundTask;
use crate::clock::Clock;
use crate::store::{Store, StoreError};
use chrono::{DateTime, Utc};
use serde::Serialize;

/// Writes the simulated clock's time and speed at each activation.
pub struct ClockPublisher {
    store: Store,
    clock: Clock,
    speed: f64,
}

impl ClockPublisher {
    /// A publisher of `clock` to `store`; none for a clock that is not simulated.
    pub fn new(store: Store, clock: Clock) -> Option<Self> {
        match clock {
            Clock::Simulated { speed, .. } => Some(ClockPublisher {
                store,
                clock,
                speed,
            }),
            Clock::System | Clock::Fixed(_) => None,
        }
    }
}

/// What an activation published.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct ClockPublished {
    /// The simulated time written.
    pub simulated_at: DateTime<Utc>,
    /// Simulated seconds per real second.
    pub speed: f64,
}

impl std::fmt::Display for ClockPublished {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "published the simulated clock at {} ({}x real time)",
            self.simulated_at.format("%Y-%m-%d %H:%M:%S UTC"),
            self.speed
        )
    }
}

/// Why the clock could not be published.
#[derive(Debug, thiserror::Error)]
#[error("cannot publish the simulated clock: {0}")]
pub struct ClockPublishError(#[from] StoreError);

impl BackgroundTask for ClockPublisher {
    const NAME: &'static str = "clock_publisher";
    const DESCRIPTION: &'static str =
        "publishes the simulated clock in the database, for the commands run against it";

    type Status = ClockPublished;
    type Error = ClockPublishError;

    async fn activate(&mut self) -> Result<ClockPublished, ClockPublishError> {
        let simulated_at = self.clock.now();
        self.store
            .publish_serve_clock(simulated_at, self.speed)
            .await?;
        Ok(ClockPublished {
            simulated_at,
            speed: self.speed,
        })
    }
}
