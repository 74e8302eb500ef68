//! The instance page's "Why, now": `ebb explain` for one instance at the console's now, with
//! the loaded policies, from what ebb keeps in Postgres: the instance as last listed, what ebb
//! remembers of its actions, the overrides in force and the GPU readings kept.
//!
//! The console calls no cloud API: it has no prices (a spot rule finds none, so it moves
//! nothing), and an instance with an idle rule but no readings kept is explained as unread
//! (unknown, so no stop) rather than as a read that found nothing. Of the idle rule's
//! activity signals it has the heartbeats (the tag, and the last one posted) and what the last
//! tick read of the others (`activity_readings`), listed as read: a Jupyter Server's last use
//! explains as read when that tick was within the last 10 minutes; a Prometheus signal's newest
//! value alone cannot cover a window, so it explains as unread.

use crate::engine::{self, InstanceFacts, Override, Prior};
use crate::fleet::activity::SignalReading;
use crate::fleet::{Fleet, Instance, InstanceState, Lifecycle, Sample};
use crate::policy::{PolicySet, SignalSource};
use crate::store::{ActivityRecord, InstanceRecord, OverrideRecord};
use chrono::{DateTime, Utc};
use maud::{html, Markup};

/// What `engine::explain` decides on for `record` at `now`, from what the store keeps (its GPU
/// readings and last posted heartbeat); `None` when its state or lifecycle is one this ebb does
/// not know.
fn fleet_of(
    record: &InstanceRecord,
    kept: &Kept,
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
        gpu_util: kept.readings.to_vec(),
        via_role: None,
        billing: record.billing_in(state),
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
    if kept.readings.is_empty() && idle_rule {
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
        let read = kept.activity.iter().find(|r| r.signal == signal.name);
        let reading = match (&signal.source, read) {
            (SignalSource::Heartbeat { .. }, _) => SignalReading::LastUse(kept.posted),
            (_, None) => SignalReading::Unread("ebb has kept no reading of it".into()),
            (_, Some(r)) => kept_reading(r, now),
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
        busy_deferred_since: (record.decided_code.as_deref() == Some("busy_deferred"))
            .then_some(record.decided_since)
            .flatten(),
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

/// What the store keeps of an instance's readings: GPU, its last posted heartbeat, and what the
/// last tick read of its other activity signals.
pub(super) struct Kept<'a> {
    /// GPU readings.
    pub(super) readings: &'a [Sample],
    /// The last heartbeat posted through the API.
    pub(super) posted: Option<DateTime<Utc>>,
    /// The activity signals the last tick asked a server for.
    pub(super) activity: &'a [ActivityRecord],
}

/// `kept`, one signal's reading, as the engine takes it at `now`: a last use read within
/// [`engine::RECENT`]; anything else is unknown here.
fn kept_reading(kept: &ActivityRecord, now: DateTime<Utc>) -> SignalReading {
    if let Some(why) = &kept.unread {
        return SignalReading::Unread(why.as_str().into());
    }
    if kept.value.is_some() {
        return SignalReading::Unread(
            "ebb keeps only its newest value, which cannot cover the idle window".into(),
        );
    }
    match now - kept.read_at <= engine::RECENT {
        true => SignalReading::LastUse(kept.last_use),
        false => SignalReading::Unread(
            format!(
                "last read {} UTC, over 10 minutes ago",
                kept.read_at.format("%Y-%m-%d %H:%M:%S")
            )
            .into(),
        ),
    }
}

/// A line for each kept reading: what the last tick read of the signal, and when.
fn signal_lines(kept: &[ActivityRecord]) -> Markup {
    html! {
        @if !kept.is_empty() {
            p { "Activity signals, as the last tick read them:" }
            ul.signals {
                @for r in kept {
                    li {
                        code { (r.signal) } ": "
                        @if let Some(why) = &r.unread {
                            "could not be read (" (why) ")"
                        } @else if let (Some(value), Some(at)) = (r.value, r.value_at) {
                            (value) " at " (super::time(at))
                        } @else if let Some(last) = r.last_use {
                            "last used " (super::time(last))
                        } @else {
                            "no use seen"
                        }
                        ", read " (super::time(r.read_at))
                    }
                }
            }
        }
    }
}

/// The section: each step of the explanation and the decision it comes to, with where the
/// `budgets` over the instance stand.
pub(super) fn section(
    record: &InstanceRecord,
    kept: &Kept,
    set: Option<&PolicySet>,
    overrides: &[OverrideRecord],
    budgets: &[engine::BudgetStanding],
    now: DateTime<Utc>,
) -> Markup {
    let explanation = set.and_then(|set| {
        let (fleet, prior) = fleet_of(record, kept, set, overrides, now)?;
        let prior = prior.with_budgets(budgets.to_vec());
        engine::explain(now, set, &fleet, &prior, &record.id)
    });
    html! {
        section aria-labelledby="explain" {
            h2 #explain { "Why, now" }
            (signal_lines(kept.activity))
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
