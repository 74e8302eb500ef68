//! Reclaiming boxes stopped for long (`stopped.reclaim_after`): when one is due, and what keeps
//! it. Pure: the listing, the policies and the overrides in, the verdict out; the steps (the
//! notice, the image and its proof, the termination) are the application's `src/reclaim/`.

use super::{governing_policy, tags_forbid_stop, Override};
use crate::fleet::{Instance, InstanceState};
use crate::names::MIGRATING_TAG;
use crate::policy::{Policy, PolicySet};
use chrono::{DateTime, SecondsFormat, Utc};

/// When `inst`, governed by `policy`, is due to be reclaimed: `stopped.reclaim_after` after it
/// stopped. `None` when the policy has no `stopped` rule, the box is not stopped, or when it
/// stopped is unknown (nothing is reclaimed for a time ebb does not know).
pub fn reclaim_due(policy: &Policy, inst: &Instance) -> Option<DateTime<Utc>> {
    let rule = policy.stopped?;
    if inst.state != InstanceState::Stopped {
        return None;
    }
    Some(inst.state_since? + rule.reclaim_after)
}

/// What this tick knows of what keeps a box from being reclaimed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReclaimHold {
    /// Nothing keeps it and its policy still reclaims it now.
    Free,
    /// Something keeps it: why. The reclaim is given up.
    Held(String),
    /// It was not listed this tick: its tags and state are unknown, and nothing is done.
    Unknown,
}

/// Whether the reclaim of `inst` (not listed: `None`), planned under policy `policy` for its
/// stop at `stopped_since`, may go on at `now`: not when it is no longer stopped or was
/// started and stopped again since, when a tag, an owner or `protection` (an override) keeps
/// it, when it is in another account (where a restore does not reach), when a spot migration
/// moves it, or when `policy` no longer governs it, has no `stopped`
/// rule, is a dry run, or does not find it due yet.
pub fn reclaim_hold(
    inst: Option<&Instance>,
    policies: &PolicySet,
    policy: &str,
    stopped_since: DateTime<Utc>,
    protection: Option<&Override>,
    now: DateTime<Utc>,
) -> ReclaimHold {
    let Some(inst) = inst else {
        return ReclaimHold::Unknown;
    };
    let why = held(inst, policies, policy, stopped_since, protection, now);
    why.map_or(ReclaimHold::Free, ReclaimHold::Held)
}

fn held(
    inst: &Instance,
    policies: &PolicySet,
    policy: &str,
    stopped_since: DateTime<Utc>,
    protection: Option<&Override>,
    now: DateTime<Utc>,
) -> Option<String> {
    if inst.state != InstanceState::Stopped {
        return Some(format!("it is {} now", inst.state.as_str()));
    }
    // To the second, as EC2 gives a state change's time.
    if inst.state_since.map(|t| t.timestamp()) != Some(stopped_since.timestamp()) {
        return Some("it was started and stopped again since the reclaim was planned".into());
    }
    if let Some(why) = tags_forbid_stop(inst, now) {
        return Some(why);
    }
    if let Some(o) = protection.filter(|o| o.until > now) {
        return Some(format!(
            "an override by {} until {} protects it: {}",
            if o.by.is_empty() { "someone" } else { &o.by },
            o.until.to_rfc3339_opts(SecondsFormat::Secs, true),
            o.reason
        ));
    }
    if inst.via_role.is_some() {
        // A restore launches in ebb's own account.
        return Some(
            "it is in another account (listed through a role), where ebb's restore does not reach"
                .into(),
        );
    }
    if let Some(m) = inst.tag(MIGRATING_TAG) {
        return Some(format!("spot migration {m} is moving it"));
    }
    match governing_policy(policies, inst) {
        None => Some(format!("policy {policy} no longer governs it")),
        Some(p) if p.name != policy => Some(format!("policy {} governs it now", p.name)),
        Some(p) if p.stopped.is_none() => {
            Some(format!("policy {policy} has no stopped rule any more"))
        }
        Some(p) if p.dry_run => Some(format!("policy {policy} is a dry run")),
        Some(p) => match reclaim_due(p, inst) {
            Some(due) if due <= now => None,
            _ => Some(format!("policy {policy} does not find it due any more")),
        },
    }
}
