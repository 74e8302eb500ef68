//! What time it is for ebb: the system clock, a fixed instant (`ebb tick --at`), or a simulated
//! clock that starts at a given instant and runs faster than real time, so that a working week
//! of the simulated fleet passes in minutes.
//!
//! The simulated clock counts on tokio's clock, so a test that pauses tokio's time
//! (`tokio::time::pause`) holds simulated time still, and moves it only by
//! `tokio::time::advance`: the control loop's ticker, which waits [`Clock::real`] spans on the
//! same clock, then fires at exactly the simulated instants the test steps to.

use chrono::{DateTime, Utc};
use std::time::Duration;
use tokio::time::Instant;

/// A source of the current time.
#[derive(Debug, Clone, Copy)]
pub enum Clock {
    /// The system clock.
    System,
    /// Always the same instant.
    Fixed(DateTime<Utc>),
    /// `start` when the clock was made, then `speed` times faster than real time.
    Simulated {
        /// The simulated time at `origin`.
        start: DateTime<Utc>,
        /// Simulated seconds per real second.
        speed: f64,
        /// When the clock was made, on tokio's clock.
        origin: Instant,
    },
}

impl Clock {
    /// A simulated clock starting now (on tokio's clock) at `start`, running `speed` times
    /// faster than real time.
    pub fn simulated(start: DateTime<Utc>, speed: f64) -> Clock {
        Clock::Simulated {
            start,
            speed,
            origin: Instant::now(),
        }
    }

    /// The current time.
    pub fn now(&self) -> DateTime<Utc> {
        match *self {
            Clock::System => Utc::now(),
            Clock::Fixed(at) => at,
            Clock::Simulated {
                start,
                speed,
                origin,
            } => {
                // Rounded, not truncated: a whole number of ticks of real time is a whole
                // number of simulated microseconds, not one less through floating point.
                let micros = (origin.elapsed().as_secs_f64() * speed * 1e6).round();
                start + chrono::Duration::microseconds(micros as i64)
            }
        }
    }

    /// How much real time `span` of this clock's time takes.
    pub fn real(&self, span: Duration) -> Duration {
        match *self {
            Clock::Simulated { speed, .. } => span.div_f64(speed),
            Clock::System | Clock::Fixed(_) => span,
        }
    }
}
