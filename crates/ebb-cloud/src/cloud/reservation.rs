//! On-Demand Capacity Reservations as `start.reserve_capacity` uses them: a targeted
//! reservation of one instance's type, zone and platform, made ahead of its start, tagged with
//! ebb's token in the call that makes it, and cancelled once the instance runs.

use chrono::{DateTime, Utc};

/// A reservation ebb asks for: for instance `instance` (its type, zone and platform, read from
/// it right before the call), until `ends_at`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReservationRequest {
    /// The instance it is for.
    pub instance: String,
    /// ebb's token: the call's client token (a repeated call makes nothing new) and the value
    /// of the `ebb:reservation` tag the call puts on it.
    pub token: String,
    /// When EC2 ends it if ebb has not cancelled it by then.
    pub ends_at: DateTime<Utc>,
}

/// What the cloud says of one reservation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reservation {
    /// Its id (`cr-...`).
    pub id: String,
    /// The instance type it holds.
    pub instance_type: String,
    /// Its availability zone.
    pub zone: String,
    /// Its state.
    pub state: ReservationState,
    /// Its `ebb:reservation` tag: the token of the ebb request that made it, if any.
    pub token: Option<String>,
}

/// A reservation's state, as EC2 names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReservationState {
    /// `pending`: being made.
    Pending,
    /// `active`: the capacity is held, and billed.
    Active,
    /// `cancelled`, `expired` or `failed`: nothing is held, nothing billed.
    Ended(String),
    /// Any other state EC2 names (`payment-pending`, ...): held as far as ebb knows.
    Other(String),
}

impl ReservationState {
    /// The state EC2 names `name`.
    pub fn parse(name: &str) -> ReservationState {
        match name {
            "pending" => ReservationState::Pending,
            "active" => ReservationState::Active,
            "cancelled" | "expired" | "failed" => ReservationState::Ended(name.to_string()),
            other => ReservationState::Other(other.to_string()),
        }
    }

    /// Whether it holds (and bills) nothing any more.
    pub fn ended(&self) -> bool {
        matches!(self, ReservationState::Ended(_))
    }
}
