//! Capacity reservations held outside ebb that listed instances run in (On-Demand Capacity
//! Reservations and Capacity Blocks, paid whether an instance runs in them or not). Which one
//! comes from the instance's own listing (`CapacityReservationId`), so a decision needs no other
//! call; what it is and when it ends comes from DescribeCapacityReservations of those ids. A
//! failed or partial read leaves the terms unknown, which still keeps the box from being
//! stopped; ebb's own reservations (`start.reserve_capacity`, tagged with its token) and those
//! no longer active are not held. Every one of a region, with its size and how much of it is
//! in use, is what `ebb advise` counts unused reserved hours from.

use super::{tag_map, to_chrono, AwsProvider, Scope};
use crate::cloud::{CloudError, ErrorKind};
use crate::fleet::{HeldCapacity, Instance, ReservationKind, ReservationTerms};
use crate::names::RESERVATION_TAG;
use aws_sdk_ec2::types::{
    CapacityReservation, CapacityReservationState, CapacityReservationType, EndDateType,
    InstanceMatchCriteria,
};
use std::collections::{BTreeSet, HashMap};

/// Reservation ids per DescribeCapacityReservations call.
const IDS_PER_CALL: usize = 100;

/// What a reservation the cloud answered for is to ebb: `None` when it is not held outside ebb
/// (ebb's own, or no longer active); otherwise its terms.
fn held_terms(r: &CapacityReservation) -> Option<ReservationTerms> {
    let ebbs = tag_map(r.tags()).contains_key(RESERVATION_TAG);
    if ebbs || r.state() != Some(&CapacityReservationState::Active) {
        return None;
    }
    let kind = match r.reservation_type() {
        Some(CapacityReservationType::CapacityBlock) => ReservationKind::CapacityBlock,
        _ => ReservationKind::CapacityReservation,
    };
    // A Capacity Block always ends; an unlimited reservation has no end.
    let ends =
        kind == ReservationKind::CapacityBlock || r.end_date_type() == Some(&EndDateType::Limited);
    Some(ReservationTerms {
        kind,
        end: ends.then(|| r.end_date().and_then(to_chrono)).flatten(),
    })
}

/// A held reservation's size and use, from an answer that gives them all; `None` for one
/// that is not held outside ebb.
fn held_capacity(r: &CapacityReservation) -> Result<Option<HeldCapacity>, String> {
    let Some(terms) = held_terms(r) else {
        return Ok(None);
    };
    let id = r
        .capacity_reservation_id()
        .ok_or("a reservation without its id")?;
    let given = |what: &str, v: Option<&str>| {
        v.map(str::to_string)
            .ok_or_else(|| format!("reservation {id} without its {what}"))
    };
    let count = |what: &str, v: Option<i32>| {
        v.and_then(|n| u32::try_from(n).ok())
            .ok_or_else(|| format!("reservation {id} without its {what}"))
    };
    Ok(Some(HeldCapacity {
        id: id.to_string(),
        instance_type: given("instance type", r.instance_type())?,
        zone: given("zone", r.availability_zone())?,
        platform: given("platform", r.instance_platform().map(|p| p.as_str()))?,
        kind: terms.kind,
        total: count("total instance count", r.total_instance_count())?,
        available: count("available instance count", r.available_instance_count())?,
        targeted: r.instance_match_criteria() == Some(&InstanceMatchCriteria::Targeted),
        end: terms.end,
    }))
}

impl AwsProvider {
    /// Every active reservation held outside ebb in `region`, in every account ebb watches
    /// there (DescribeCapacityReservations, every page). A failed call in any account, or an
    /// answer without a reservation's size, is the `Err`: a reservation not read is unknown.
    pub(super) async fn held_capacity_in(
        &self,
        region: &str,
    ) -> Result<Vec<HeldCapacity>, CloudError> {
        let mut held = Vec::new();
        for (_, scope) in self.scopes_in(region) {
            for r in self.describe_reservations(scope, None).await? {
                let read = held_capacity(&r).map_err(|why| {
                    CloudError::new(ErrorKind::Other, "DescribeCapacityReservations", why)
                })?;
                held.extend(read);
            }
        }
        Ok(held)
    }

    /// Fills in the terms of the reservations `listed` instances (of `scope`) run in, and
    /// forgets those that are not held outside ebb. A read that fails is logged and leaves
    /// every term unknown.
    pub(super) async fn read_held_reservations(&self, scope: &Scope, listed: &mut [&mut Instance]) {
        let ids: BTreeSet<String> = listed
            .iter()
            .filter_map(|i| Some(i.billing.reservation.as_ref()?.id.clone()))
            .collect();
        if ids.is_empty() {
            return;
        }
        let answered = match self.reservation_terms(scope, ids).await {
            Ok(answered) => answered,
            Err(error) => {
                tracing::warn!(
                    region = %scope.region,
                    %error,
                    "could not read the capacity reservations instances run in: their ends are unknown, and the boxes in them are not stopped"
                );
                return;
            }
        };
        for instance in listed {
            let Some(held) = &mut instance.billing.reservation else {
                continue;
            };
            match answered.get(&held.id) {
                Some(Some(terms)) => held.terms = Some(*terms),
                Some(None) => instance.billing.reservation = None,
                // Not in the answer: unknown, so still held.
                None => {}
            }
        }
    }

    /// DescribeCapacityReservations of `ids`, every page: for each reservation answered, its
    /// terms when it is held outside ebb.
    async fn reservation_terms(
        &self,
        scope: &Scope,
        ids: BTreeSet<String>,
    ) -> Result<HashMap<String, Option<ReservationTerms>>, CloudError> {
        let ids: Vec<String> = ids.into_iter().collect();
        let mut answered = HashMap::new();
        for batch in ids.chunks(IDS_PER_CALL) {
            for r in self.describe_reservations(scope, Some(batch)).await? {
                if let Some(id) = r.capacity_reservation_id() {
                    answered.insert(id.to_string(), held_terms(&r));
                }
            }
        }
        Ok(answered)
    }
}
