//! Capacity held for the boxes that fail to start (`start.reserve_capacity`): of a tick's
//! starts, those of instances whose start EC2 refused for lack of capacity within the capacity
//! memory get a targeted capacity reservation made right before the start (which begins at
//! `start_ahead` before the opening), kept until the instance runs or [`RESERVATION_LASTS`]
//! has passed. Pure: the reconciler makes the calls.

use super::{Action, Decision, Prior};
use crate::policy::{PolicySet, DEFAULT_CAPACITY_MEMORY};
use chrono::{DateTime, Duration, Utc};

/// How long a reservation made for a start is kept at most: the instance has started into it
/// well before then, and EC2 ends it then (within the hour after) if ebb could not cancel it.
pub const RESERVATION_LASTS: Duration = Duration::hours(1);

/// A reservation to make for one start.
#[derive(Debug, Clone, PartialEq)]
pub struct Reserve {
    /// The instance it is for.
    pub instance: String,
    /// When ebb cancels it at the latest, and EC2 ends it.
    pub ends_at: DateTime<Utc>,
    /// For people: why, with the refused starts.
    pub reason: String,
}

/// The reservations to make for `decisions`' starts at `now`: those of instances whose policy
/// sets `start.reserve_capacity` and whose start EC2 refused for lack of capacity within the
/// policy's capacity memory (`idle.capacity_memory`, by default 7 days). Dry runs reserve
/// nothing.
pub fn reservations(
    now: DateTime<Utc>,
    policies: &PolicySet,
    decisions: &[Decision],
    prior: &Prior,
) -> Vec<Reserve> {
    decisions
        .iter()
        .filter(|d| d.action == Action::Start && !d.dry_run)
        .filter_map(|d| {
            let policy = policies
                .policies
                .iter()
                .find(|p| d.policy.as_ref() == Some(&p.name))?;
            if !policy.start.as_ref().is_some_and(|s| s.reserve_capacity) {
                return None;
            }
            let memory = policy
                .idle
                .as_ref()
                .map_or(DEFAULT_CAPACITY_MEMORY, |i| i.capacity_memory);
            let refused: Vec<&DateTime<Utc>> = prior
                .refused_starts(&d.instance)
                .iter()
                .filter(|&&t| t > now - memory && t <= now)
                .collect();
            let last = **refused.last()?;
            let ends_at = now + RESERVATION_LASTS;
            let reason = format!(
                "EC2 refused its start for lack of capacity {} within {} (last at {}): a \
                 capacity reservation is made for it to start into, until {} at the latest \
                 (start.reserve_capacity)",
                times(refused.len()),
                days(memory),
                last.format("%Y-%m-%d %H:%M UTC"),
                ends_at.format("%Y-%m-%d %H:%M UTC"),
            );
            Some(Reserve {
                instance: d.instance.clone(),
                ends_at,
                reason,
            })
        })
        .collect()
}

/// `once`, `twice`, `3 times`.
fn times(n: usize) -> String {
    match n {
        1 => "once".to_string(),
        2 => "twice".to_string(),
        n => format!("{n} times"),
    }
}

/// A memory in words: `7d`, or hours below a day.
fn days(d: Duration) -> String {
    match d.num_days() {
        0 => format!("{}h", d.num_hours()),
        n => format!("{n}d"),
    }
}
