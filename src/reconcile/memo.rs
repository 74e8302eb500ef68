//! What the reconciler remembers in memory between ticks, none of it in Postgres: each is an
//! economy (calls or writes not made again) or a message not told twice, so a restart or a new
//! leader that starts without it only does or tells once more what it would have skipped.

use super::read;
use crate::fleet::money::Attached;
use chrono::{DateTime, Utc};
use std::collections::{HashMap, HashSet};
use std::sync::Mutex;

/// The reconciler's memory between ticks.
#[derive(Default)]
pub(super) struct Memo {
    /// When it last looked for replacements ebb launched and lost track of: the sweep lists
    /// every region's tagged artifacts, so it runs once per `spot::orphans::SWEEP_EVERY`.
    pub(super) orphans_swept: Mutex<Option<DateTime<Utc>>>,
    /// Instances whose start the cloud refused for lack of capacity, told to the webhook since
    /// their last start: one message per refusal streak, not one per tick.
    pub(super) capacity_told: Mutex<HashSet<String>>,
    /// Instances whose stop went through but still charges, told to the webhook since a stop
    /// of theirs last saved: one message per such stop, not one per tick.
    pub(super) charging_told: Mutex<HashSet<String>>,
    /// Spot migrations' alerts told to the webhook, by migration, while they last.
    pub(super) alerts_told: Mutex<HashSet<(i64, crate::spot::Alert)>>,
    /// The instances whose GPU utilisation was read in the current five-minute period: a read
    /// is billed per metric, and a period is read once.
    pub(super) gpu_asked: read::Asked,
    /// The CloudWatch activity signals read in the current five-minute period: billed per
    /// metric too, and read once a period.
    pub(super) metrics_read: read::MetricsRead,
    /// The latest use of each instance's activity signal kept in Postgres, by instance and
    /// signal: only newer ones are written.
    pub(super) uses_kept: Mutex<HashMap<(String, String), DateTime<Utc>>>,
    /// When the kept instance catalogue's age was last looked at: at most once an hour.
    pub(super) catalogue_looked: Mutex<Option<DateTime<Utc>>>,
    /// When the kept price quotes' ages were last looked at: at most once an hour.
    pub(super) quotes_looked: Mutex<Option<DateTime<Utc>>>,
    /// When each region's held capacity reservations were last read: at most once an hour.
    pub(super) capacity_read: Mutex<HashMap<String, DateTime<Utc>>>,
    /// The volumes and Elastic IPs last kept in Postgres, by instance: only changes are
    /// written.
    pub(super) attached_kept: Mutex<HashMap<String, Attached>>,
}
