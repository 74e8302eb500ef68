//! The cloud call each action makes, and the decisions of a tick grouped into calls.

use super::Reconciler;
use crate::cloud::{ActionReport, Provider, StopKind};
use crate::engine::{Action, Decision};
use crate::names::STOP_AT_TAG;
use chrono::{DateTime, SecondsFormat, Utc};
use std::collections::BTreeMap;

/// The cloud call that carries out an action of this phase. [`CloudCall::of`] maps every
/// action the engine decides to one call or to none, without a catch-all: a new action does
/// not compile until it says what it calls.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum CloudCall {
    /// StartInstances.
    Start,
    /// StopInstances, plain or hibernating.
    Stop(StopKind),
    /// CreateTags of `ebb:stop-at`: the notice of a coming stop.
    Notice,
    /// DeleteTags of `ebb:stop-at`: a notice taken back.
    Withdraw,
}

impl CloudCall {
    /// The call `action` makes in this phase; `None` for the actions carried out elsewhere or
    /// not at all.
    pub(super) fn of(action: Action) -> Option<CloudCall> {
        match action {
            Action::Start => Some(CloudCall::Start),
            Action::Stop => Some(CloudCall::Stop(StopKind::Stop)),
            Action::Hibernate => Some(CloudCall::Stop(StopKind::Hibernate)),
            Action::Notify => Some(CloudCall::Notice),
            Action::WithdrawNotice => Some(CloudCall::Withdraw),
            // Spot moves and relaunches are the migrations' (a dry run of a move is audited
            // here), a resize is a refused start's fallback's, a reservation step a start's
            // (`reserve.rs`) or the reservations phase's, a reclaim's or restore's the reclaims
            // phase's, and nothing calls nothing.
            Action::MigrateToSpot
            | Action::RelaunchSpot
            | Action::FallbackOnDemand
            | Action::Resize
            | Action::ReserveCapacity
            | Action::TargetReservation
            | Action::CancelReservation
            | Action::Reclaim
            | Action::Restore
            | Action::None => None,
        }
    }

    /// The EC2 API whose token buckets it waits for.
    pub(super) fn api(self) -> &'static str {
        match self {
            CloudCall::Start => "StartInstances",
            CloudCall::Stop(_) => "StopInstances",
            CloudCall::Notice => "CreateTags",
            CloudCall::Withdraw => "DeleteTags",
        }
    }

    /// Whether it stops the instances or announces that it will: they are read again right
    /// before it.
    pub(super) fn stops(self) -> bool {
        match self {
            CloudCall::Stop(_) | CloudCall::Notice => true,
            CloudCall::Start | CloudCall::Withdraw => false,
        }
    }

    /// Its rank in the order calls are made: starts first (people are waiting for them), then
    /// notices, then stops.
    fn rank(self) -> u8 {
        match self {
            CloudCall::Start => 0,
            CloudCall::Notice | CloudCall::Withdraw => 1,
            CloudCall::Stop(_) => 2,
        }
    }
}

impl<P: Provider> Reconciler<P> {
    /// Makes `call` for `group`: one action in one region.
    pub(super) async fn call(
        &self,
        call: CloudCall,
        group: &[&Decision],
        now: DateTime<Utc>,
    ) -> ActionReport {
        let region = group[0].region.as_str();
        let ids: Vec<String> = group.iter().map(|d| d.instance.clone()).collect();
        match call {
            CloudCall::Start => self.provider.start(region, &ids).await,
            CloudCall::Stop(kind) => self.provider.stop(region, &ids, kind).await,
            CloudCall::Notice => {
                let at = group[0]
                    .stop_at
                    .unwrap_or(now)
                    .to_rfc3339_opts(SecondsFormat::Secs, true);
                let tags = BTreeMap::from([(STOP_AT_TAG.to_string(), at)]);
                self.provider.tag(region, &ids, &tags).await
            }
            CloudCall::Withdraw => {
                self.provider
                    .untag(region, &ids, &[STOP_AT_TAG.to_string()])
                    .await
            }
        }
    }
}

/// The order `action` is carried out in: its call's rank.
pub(super) fn order(action: Action) -> u8 {
    match CloudCall::of(action) {
        Some(call) => call.rank(),
        // A dry run of a spot move, only audited, goes with the stops.
        None => CloudCall::Stop(StopKind::Stop).rank(),
    }
}

/// Decisions grouped into cloud calls: by action, region and (for notices) the announced
/// time, in the order [`order`] gives. A decision without a call is left out: only dry runs
/// have none, and they are audited apart.
pub(super) fn groups(decisions: &[Decision]) -> Vec<(CloudCall, Vec<&Decision>)> {
    let mut groups: BTreeMap<_, (CloudCall, Vec<&Decision>)> = BTreeMap::new();
    for d in decisions {
        let Some(call) = CloudCall::of(d.action) else {
            continue;
        };
        let key = (call.rank(), d.action.as_str(), d.stop_at, d.region.as_str());
        groups.entry(key).or_insert((call, Vec::new())).1.push(d);
    }
    groups.into_values().collect()
}
