//! What a report is worked out from: the store's records of what happened, as the store
//! reads them for a window (`Store::report_history`).

use chrono::{DateTime, Utc};
use std::collections::{BTreeMap, BTreeSet, HashMap};

/// What ebb did that starts or ends a stretch of stopped time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EbbAction {
    /// A stop.
    Stop,
    /// A hibernation.
    Hibernate,
    /// A start.
    Start,
}

/// One succeeded action of ebb on an instance.
#[derive(Debug, Clone, PartialEq)]
pub struct ActionRecord {
    /// The instance.
    pub instance: String,
    /// When its outcome was recorded.
    pub at: DateTime<Utc>,
    /// What ebb did.
    pub action: EbbAction,
    /// The policy it did it for.
    pub policy: Option<String>,
    /// For a stop or hibernation, what its stopped hours come to, from its outcome's code.
    pub saved: StopSaved,
}

/// What a stop's stopped hours come to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopSaved {
    /// They end the instance's compute charges: saved.
    Saved,
    /// The cloud still bills the stopped instance, or did not say how it bills it (outcome
    /// codes `stopped_still_charging`, `stopped_billing_unknown`): no dollars at all.
    Charging,
    /// A capacity reservation held outside ebb that the box ran in is paid for them (outcome
    /// code `stopped_in_reservation`): at on-demand prices in the gross, and taken off the net
    /// as `reserved_covered_usd`.
    Reserved,
}

impl StopSaved {
    /// What the outcome code of a succeeded stop says its hours come to.
    pub fn of_code(code: Option<&str>) -> StopSaved {
        match code {
            Some("stopped_still_charging" | "stopped_billing_unknown") => StopSaved::Charging,
            Some("stopped_in_reservation") => StopSaved::Reserved,
            _ => StopSaved::Saved,
        }
    }
}

/// A state the instance was seen entering.
#[derive(Debug, Clone, PartialEq)]
pub struct StateChange {
    /// The instance.
    pub instance: String,
    /// When it was seen.
    pub at: DateTime<Utc>,
    /// An EC2 state, or `gone`.
    pub to_state: String,
}

/// What the store knows of an instance: where it runs, what it is, its tags and policy.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct InstanceInfo {
    /// Its region.
    pub region: String,
    /// Its type.
    pub instance_type: String,
    /// Its tags, as last listed.
    pub tags: BTreeMap<String, String>,
    /// The policy of its last decision.
    pub policy: Option<String>,
    /// Its volumes and Elastic IPs as last read: what it pays while stopped.
    pub attached: crate::fleet::money::Attached,
    /// Spot or preemptible capacity, as last listed: its hour costs a price that moves, which
    /// no table gives, so its stopped hours are counted but not priced (never at on-demand).
    pub interruptible: bool,
}

/// A spot migration, as far as its savings go.
#[derive(Debug, Clone, PartialEq)]
pub struct SpotMove {
    /// The on-demand instance moved.
    pub original: String,
    /// The policy whose spot rule moved it.
    pub policy: String,
    /// When it was planned.
    pub created_at: DateTime<Utc>,
    /// The current replacement runs on spot.
    pub on_spot: bool,
    /// When the current replacement was found running.
    pub running_since: Option<DateTime<Utc>>,
    /// When ebb stopped following the migration.
    pub ended_at: Option<DateTime<Utc>>,
    /// The original's on-demand $/hour.
    pub on_demand_price: Option<f64>,
    /// The current replacement's $/hour.
    pub price: Option<f64>,
    /// Dollars earlier replacements saved.
    pub saved_before: f64,
    /// When the last earlier replacement ended (its reclaim, or the migration's end).
    pub earlier_until: Option<DateTime<Utc>>,
}

/// An override, as far as its time in force goes.
#[derive(Debug, Clone, PartialEq)]
pub struct OverrideSpan {
    /// The instance kept.
    pub instance: String,
    /// When it was made.
    pub created_at: DateTime<Utc>,
    /// When it stopped being in force: its end, or its revocation.
    pub ends_at: DateTime<Utc>,
}

/// A change of an Auto Scaling group's capacity that ebb made and that succeeded.
#[derive(Debug, Clone, PartialEq)]
pub struct GroupChange {
    /// The group's region.
    pub region: String,
    /// The group's name.
    pub group: String,
    /// When its outcome was recorded.
    pub at: DateTime<Utc>,
    /// A scale-down to the floor; otherwise the restoring of the up capacity.
    pub scale_down: bool,
    /// The desired capacity of the group while up.
    pub up_desired: i32,
    /// The desired capacity the change set.
    pub to_desired: i32,
    /// The members' instance type, when known.
    pub instance_type: Option<String>,
    /// The policy it was done for.
    pub policy: Option<String>,
}

impl GroupChange {
    /// The members a scale-down removed (none for a restore).
    pub fn members_removed(&self) -> i32 {
        if self.scale_down {
            (self.up_desired - self.to_desired).max(0)
        } else {
            0
        }
    }
}

/// A stretch of time an instance ran (was seen pending or running), inside the window: the
/// usage commitments apply to before the stopped hours.
#[derive(Debug, Clone, PartialEq)]
pub struct RunningSpan {
    /// Its region.
    pub region: String,
    /// Its type.
    pub instance_type: String,
    /// From.
    pub from: DateTime<Utc>,
    /// To.
    pub to: DateTime<Utc>,
}

/// A capacity reservation ebb made for a start (`start.reserve_capacity`): billed at the
/// on-demand rate of its type from its making to its cancellation.
#[derive(Debug, Clone, PartialEq)]
pub struct ReservationSpan {
    /// The instance it was made for.
    pub instance: String,
    /// Its region.
    pub region: String,
    /// The type it held.
    pub instance_type: String,
    /// When ebb learnt it was made.
    pub from: DateTime<Utc>,
    /// When ebb learnt it was cancelled; `None` while it is held.
    pub to: Option<DateTime<Utc>>,
}

/// A box ebb reclaimed after a long stop (`stopped.reclaim_after`), as far as its money goes:
/// the disks it no longer paid while terminated, and what its image stored meanwhile.
#[derive(Debug, Clone, PartialEq)]
pub struct ReclaimSpan {
    /// The box.
    pub instance: String,
    /// The policy whose `stopped` rule reclaimed it.
    pub policy: String,
    /// Its region.
    pub region: String,
    /// The volumes its image restores to (size and type), once proven; `None` when not
    /// recorded, which leaves its dollars unknown, never zero.
    pub volumes: Option<Vec<crate::fleet::money::Volume>>,
    /// Not before then was its image made: the image's storage counts from here.
    pub imaged_from: DateTime<Utc>,
    /// When its termination was seen done; `None` if it never was.
    pub terminated_at: Option<DateTime<Utc>>,
    /// When its restore was asked for: its disks are paid again from about then.
    pub restore_asked_at: Option<DateTime<Utc>>,
    /// When its image was deregistered; `None` while it is kept.
    pub image_deleted_at: Option<DateTime<Utc>>,
}

/// Everything a report is worked out from.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct History {
    /// ebb's stops, hibernations and starts in the window, and each instance's last one before
    /// it, in any order.
    pub actions: Vec<ActionRecord>,
    /// The observed state changes of those instances from their first action on.
    pub changes: Vec<StateChange>,
    /// The instances named by the actions, overrides and migrations.
    pub instances: HashMap<String, InstanceInfo>,
    /// Spot migrations in progress at some time in the window.
    pub migrations: Vec<SpotMove>,
    /// Overrides in force at some time in the window.
    pub overrides: Vec<OverrideSpan>,
    /// The groups' changes in the window, and each group's last one before it when that was a
    /// scale-down, in any order.
    pub groups: Vec<GroupChange>,
    /// What ran in the window, in the regions and of the types the commitments held may
    /// cover (read only when some are held).
    pub running: Vec<RunningSpan>,
    /// The capacity reservations ebb held at some time in the window.
    pub reservations: Vec<ReservationSpan>,
    /// The reclaims whose image was kept, or whose box was terminated, at some time in the
    /// window.
    pub reclaims: Vec<ReclaimSpan>,
}

impl History {
    /// The tag keys of the instances in it (leaving out ebb's own), for choosing a `by`.
    pub fn tag_keys(&self) -> Vec<String> {
        let keys: BTreeSet<&String> = self
            .instances
            .values()
            .flat_map(|i| i.tags.keys())
            .filter(|k| !k.starts_with("ebb:"))
            .collect();
        keys.into_iter().cloned().collect()
    }
}
