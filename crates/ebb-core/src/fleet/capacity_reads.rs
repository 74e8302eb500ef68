//! The capacity reservations held outside ebb in a region, as one read of the region found
//! them: what the account pays for whether an instance runs in it or not, and how much of it
//! was in use. `ebb serve` reads them hourly and keeps each read; `ebb advise` counts the
//! reserved hours no instance used from the reads ([`crate::advise::reservations`]).

use super::ReservationKind;
use chrono::{DateTime, Duration, Utc};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// How often the leader reads a region's reservations.
pub const READ_EVERY: Duration = Duration::hours(1);

/// How long one read stands for: until the region's next read, but never longer than this.
/// Time no read stands for is unread, and counted as neither used nor unused.
pub const READ_STANDS_FOR: Duration = Duration::hours(2);

/// One reservation held outside ebb, as a read found it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HeldCapacity {
    /// Its id (`cr-…`).
    pub id: String,
    /// The instance type it holds room for.
    pub instance_type: String,
    /// The zone it holds the room in: only instances there can use it.
    pub zone: String,
    /// Its platform (`Linux/UNIX`), which an instance must match.
    pub platform: String,
    /// What kind of reservation it is.
    pub kind: ReservationKind,
    /// How many instances it holds room for (EC2's `TotalInstanceCount`).
    pub total: u32,
    /// Of those, how many no instance ran in when read (`AvailableInstanceCount`).
    pub available: u32,
    /// Whether only instances made to start into it use it (`InstanceMatchCriteria`
    /// `targeted`); an open one takes any running instance that matches it.
    pub targeted: bool,
    /// When it ends; `None` for one held until it is cancelled.
    pub end: Option<DateTime<Utc>>,
}

/// One successful read of the held reservations of a region.
#[derive(Debug, Clone, PartialEq)]
pub struct CapacityRead {
    /// The region.
    pub region: String,
    /// When it was read.
    pub at: DateTime<Utc>,
    /// Every active reservation held outside ebb there, in every account ebb watches.
    pub reservations: Vec<HeldCapacity>,
    /// By each type those reservations hold, the instances of it the same tick listed running
    /// on demand, paid by the hour, in no reservation: the boxes that could have used one.
    pub ran_outside: BTreeMap<String, Vec<String>>,
}

impl CapacityRead {
    /// What `instances` (a region's listing) ran outside any reservation, by each type
    /// `reservations` hold.
    pub fn outside<'a>(
        reservations: &[HeldCapacity],
        instances: impl IntoIterator<Item = &'a super::Instance>,
    ) -> BTreeMap<String, Vec<String>> {
        let mut outside: BTreeMap<String, Vec<String>> = reservations
            .iter()
            .map(|r| (r.instance_type.clone(), Vec::new()))
            .collect();
        for i in instances {
            let could = i.state == super::InstanceState::Running
                && i.lifecycle == super::Lifecycle::OnDemand
                && i.billing.charge == super::Charge::PayAsYouGo
                && i.billing.reservation.is_none();
            if let Some(ids) = outside.get_mut(&i.instance_type).filter(|_| could) {
                ids.push(i.id.clone());
            }
        }
        for ids in outside.values_mut() {
            ids.sort();
        }
        outside
    }
}
