//! What a pass read of the activity signals (`idle.activity`) that are not in the listing.
//! A heartbeat is in the listing (the instance's `ebb:active-at` tag); Jupyter and Prometheus
//! signals are read by the tick.

use chrono::{DateTime, Utc};
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

/// One signal's readings of one instance.
#[derive(Debug, Clone, PartialEq)]
pub enum SignalReading {
    /// Its values, oldest first.
    Points(Vec<(DateTime<Utc>, f64)>),
    /// When a person last used the instance, by a source that says so itself (Jupyter), if
    /// ever.
    LastUse(Option<DateTime<Utc>>),
    /// Why it could not be read: then whether the instance is in use is unknown.
    Unread(Arc<str>),
}

/// Readings by instance id, then by signal name. A signal a policy lists that has no entry
/// here was not read.
pub type ActivityReadings = HashMap<String, BTreeMap<String, SignalReading>>;

/// When each activity signal showed an instance in use, oldest first, by signal name: what ebb
/// keeps of the signals for `ebb metrics export` and replays.
pub type SignalUses = BTreeMap<String, Vec<DateTime<Utc>>>;
