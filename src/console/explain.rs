//! The instance page's "Why, now": `ebb explain` for one instance at the console's now, with
//! the loaded policies, from what ebb keeps in Postgres: the instance as last listed, what ebb
//! remembers of its actions, the overrides in force and the GPU readings kept.
//!
//! The console calls no cloud API: it has no prices (a spot rule finds none, so it moves
//! nothing), and an instance with an idle rule but no readings kept is explained as unread
//! (unknown, so no stop) rather than as a read that found nothing. Of the idle rule's
//! activity signals it has the heartbeats: the tag, and the last one posted; the others
//! (Jupyter, Prometheus) are not kept, so they are unread here.

use crate::engine::{self, InstanceFacts, Override, Prior};
use crate::fleet::activity::SignalReading;
use crate::fleet::{Billing, Fleet, Instance, InstanceState, Lifecycle, Sample};
use crate::policy::{PolicySet, SignalSource};
use crate::store::{InstanceRecord, OverrideRecord};
use chrono::{DateTime, Utc};
use maud::{html, Markup};

/// What `engine::explain` decides on for `record` at `now`, from what the store keeps (its GPU
/// readings and last posted heartbeat); `None` when its state or lifecycle is one this ebb does
/// not know.
fn fleet_of(
    record: &InstanceRecord,
    (readings, posted): (&[Sample], Option<DateTime<Utc>>),
    set: &PolicySet,
    overrides: &[OverrideRecord],
    now: DateTime<Utc>,
) -> Option<(Fleet, Prior)> {
    let state: InstanceState = serde_json::from_value(record.state.clone().into()).ok()?;
    let lifecycle: Lifecycle = serde_json::from_value(record.lifecycle.clone().into()).ok()?;
    let instance = Instance {
        id: record.id.clone(),
        region: record.region.clone(),
        instance_type: record.instance_type.clone(),
        state,
        state_since: Some(record.state_since),
        lifecycle,
        launched_at: record.launched_at,
        tags: record
            .tags
            .0
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect(),
        gpus: None,
        gpu_util: readings.to_vec(),
        via_role: None,
        billing: Billing::ec2(state == InstanceState::Stopped),
        private_ip: None,
    };
    let mut fleet = Fleet {
        levers: crate::cloud::levers(),
        ..Fleet::default()
    };
    let idle_rule = set
        .policies
        .iter()
        .any(|p| p.idle.is_some() && record.policy.as_ref() == Some(&p.name));
    if readings.is_empty() && idle_rule {
        fleet.gpu_unread.insert(
            record.id.clone(),
            "ebb kept no GPU readings of it for the console".into(),
        );
    }
    let governing = set
        .policies
        .iter()
        .find(|p| record.policy.as_ref() == Some(&p.name));
    for signal in governing
        .iter()
        .flat_map(|p| p.idle.iter().flat_map(|i| &i.activity))
    {
        let reading = match signal.source {
            SignalSource::Heartbeat { .. } => SignalReading::LastUse(posted),
            _ => SignalReading::Unread("ebb keeps no readings of it for the console".into()),
        };
        let readings = fleet.activity.entry(record.id.clone()).or_default();
        readings.insert(signal.name.clone(), reading);
    }
    fleet.instances.push(instance);
    let facts = InstanceFacts {
        stopped_by_ebb_at: record.stopped_by_ebb_at,
        started_by_ebb_at: record.started_by_ebb_at,
        notified_at: record.notified_at,
        started_by_person_at: record.started_by_person_at,
    };
    let in_force = overrides
        .iter()
        .filter(|o| o.revoked_at.is_none() && o.until > now)
        .map(|o| Override {
            instance: o.instance.clone(),
            until: o.until,
            reason: o.reason.clone(),
            by: o.created_by.clone(),
        })
        .collect();
    let prior = Prior::new([(record.id.clone(), facts)].into(), in_force);
    Some((fleet, prior))
}

/// The section: each step of the explanation and the decision it comes to.
pub(super) fn section(
    record: &InstanceRecord,
    readings: (&[Sample], Option<DateTime<Utc>>),
    set: Option<&PolicySet>,
    overrides: &[OverrideRecord],
    now: DateTime<Utc>,
) -> Markup {
    let explanation = set.and_then(|set| {
        let (fleet, prior) = fleet_of(record, readings, set, overrides, now)?;
        engine::explain(now, set, &fleet, &prior, &record.id)
    });
    html! {
        section aria-labelledby="explain" {
            h2 #explain { "Why, now" }
            @match (&explanation, set) {
                (Some(e), _) => {
                    p.note {
                        "What ebb explain says at " (super::time(now))
                        " with the loaded policies, from what ebb last stored of this instance. \
                         The console has no prices, so spot rules move nothing here."
                    }
                    ol.steps { @for step in &e.steps { li { (step) } } }
                    p {
                        strong { "Decision: " }
                        (e.decision.action) " "
                        code { (e.decision.code) }
                        " by " (e.decision.policy.as_deref().unwrap_or("no policy")) ": "
                        (e.decision.reason)
                        @if e.decision.dry_run { " (dry run)" }
                    }
                }
                (None, None) => {
                    p.problem { "No valid policy set is loaded, so there is nothing to explain with: see Policies." }
                }
                (None, Some(_)) => {
                    p.problem {
                        "ebb cannot explain it: its stored state " code { (record.state) }
                        " or lifecycle " code { (record.lifecycle) } " is not one this ebb knows."
                    }
                }
            }
        }
    }
}
