//! A stop the cloud accepted before its instance had stopped. Alibaba Cloud and Tencent Cloud
//! say how a stopped instance is billed only once it has stopped (ECS's `StoppedMode`, CVM's
//! `StopChargingMode`, both "not applicable" while it is stopping), so the outcome of such a
//! stop waits: its intent stays open, marked accepted (`store/accepted.rs`), and the first
//! tick whose listing shows the instance stopped writes the outcome with the mode that listing
//! reads. A stop is never counted as billing unknown merely because it was still stopping.

use super::act::{add_note, stopped_note};
use crate::engine::Code;
use crate::fleet::{Instance, InstanceState, StoppedMode};
use crate::store::{AcceptedStop, AuditEntry, NewAuditEntry, Outcome};
use chrono::{DateTime, Utc};

/// The outcome of `accepted`, the stop of `intent`, from its instance as listed now (`listed`,
/// `None` when it is not, in a region listed completely or not as `region_listed` says):
/// `None` while it is still stopping or its region could not be listed.
pub(super) fn finished(
    intent: &AuditEntry,
    accepted: &AcceptedStop,
    listed: Option<&Instance>,
    region_listed: bool,
    now: DateTime<Utc>,
) -> Option<NewAuditEntry> {
    let unread = |what: String| {
        Some((
            Some(Code::StoppedBillingUnknown),
            format!("{what} before how its cloud bills it stopped could be read, so this stop counts no saving"),
        ))
    };
    let note = match listed {
        None if !region_listed => return None,
        None => unread("no longer listed".to_string()),
        Some(i) if i.state == InstanceState::Stopping => return None,
        Some(i) if i.state == InstanceState::Stopped => {
            let mode = i.billing.stopped_mode.unwrap_or(StoppedMode::Unknown);
            stopped_note(mode, Some(&i.billing))
        }
        Some(i) => unread(format!("found {}", i.state.as_str())),
    };
    let mut outcome = NewAuditEntry {
        at: now,
        outcome: Outcome::Succeeded,
        reason: accepted.reason.clone(),
        request_id: accepted.request_id.clone(),
        error: None,
        intent_seq: Some(intent.seq),
        ..intent.entry.clone()
    };
    add_note(&mut outcome, note);
    Some(outcome)
}
