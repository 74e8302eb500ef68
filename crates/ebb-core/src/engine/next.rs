//! The next change an instance's work hours bring, as the web console shows it: when, in the
//! policy's zone, and what ebb then does. From the schedule alone: idle rules, busy deferral
//! and notices can move the stop, and the decision at that tick says why.

use crate::policy::{OutsideHours, Policy, StartAtOpen};
use chrono::{DateTime, Utc};
use chrono_tz::Tz;

/// The next scheduled change of work hours for one instance.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NextChange {
    /// When it happens (for a start ahead of the opening, when the start begins).
    pub at: DateTime<Utc>,
    /// The policy's time zone, in which its people read the time.
    pub zone: Tz,
    /// What ebb does then, for people.
    pub what: &'static str,
}

/// The next change `policy`'s work hours bring after `now` to an instance that is `running`
/// (or stopped); `None` without work hours or a transition within the schedule's horizon.
pub fn next_change(policy: &Policy, running: bool, now: DateTime<Utc>) -> Option<NextChange> {
    let wh = policy.work_hours.as_ref()?;
    let status = wh.schedule.status(now);
    let next = status.next?;
    let zone = wh.schedule.timezone;
    let (at, what) = match (status.in_hours, running) {
        (true, true) => (
            next,
            match wh.outside_hours {
                OutsideHours::Stop => "stops at the close",
                OutsideHours::Hibernate => "hibernates at the close",
                OutsideHours::None => "hours close; it keeps running",
            },
        ),
        (true, false) => (next, "hours close"),
        (false, false) => (
            // A start ahead of the opening begins that much earlier, unless that time passed.
            (next - wh.start_ahead).max(now),
            match wh.start_at_open {
                StartAtOpen::StoppedByEbb => "starts at the opening if ebb stopped it",
                StartAtOpen::All => "starts at the opening",
                StartAtOpen::Never => "hours open; not started (start_at_open: never)",
            },
        ),
        (false, true) => (next, "hours open"),
    };
    Some(NextChange { at, zone, what })
}

/// The next opening of `policy`'s work hours at or after `after`: the one after the close when
/// `after` is within hours (what a notice's "keep it until the next opening" keeps it until);
/// `None` without work hours or an opening within the schedule's horizon.
pub fn next_opening(policy: &Policy, after: DateTime<Utc>) -> Option<DateTime<Utc>> {
    let schedule = &policy.work_hours.as_ref()?.schedule;
    let status = schedule.status(after);
    if status.in_hours {
        schedule.status(status.next?).next
    } else {
        status.next
    }
}
