//! Capacity held for the boxes that fail to start (`start.reserve_capacity`), in a start's
//! call: for each start `engine::reservations` picks, a targeted capacity reservation is made
//! (CreateCapacityReservation, tagged with ebb's token in the call), the instance is made to
//! start into it (ModifyInstanceCapacityReservationAttributes), then the start goes with the
//! others. An instance whose reservation ebb cancelled earlier is put back on open capacity
//! before its next start. Each call is an action of its own, fenced (leadership, and the
//! instance read again right before: still stopped, not skipped, not owned); its later steps
//! (the cancellation, lost answers) are `reconcile/reservations.rs`'s.

use super::{Reconciler, TickContext};
use crate::cloud::{
    ActionReport, CapacityReservations, CloudError, Done, Provider, Reservation, ReservationRequest,
};
use crate::engine::{self, Action, Code, Decision, Prior, Reserve};
use crate::fleet::InstanceState;
use crate::names::SKIP_TAG;
use crate::store::{ReservationRow, ReservationStep, StoreError};
use std::collections::{HashMap, HashSet};

/// A call's answer as one instance's report: what `one_call` audits.
pub(in crate::reconcile) fn as_report<T>(
    instance: &str,
    answer: &Result<T, CloudError>,
) -> ActionReport {
    match answer {
        Ok(_) => ActionReport {
            done: vec![Done {
                instance: instance.to_string(),
                request_id: None,
                fallback: None,
                already: false,
                read_back: None,
            }],
            failed: Vec::new(),
        },
        Err(error) => ActionReport::all_failed(&[instance.to_string()], error),
    }
}

impl<P: Provider> Reconciler<P> {
    /// The reservation steps due before the starts of `group` (one region): made and
    /// targeted for the starts that reserve, released for those whose reservation ebb
    /// cancelled. Returns the instances whose start waits for a later tick: a step's answer
    /// was lost, or it failed in a way that leaves the reservation half made.
    pub(super) async fn reserve_for(
        &self,
        group: &[&Decision],
        tick: &mut TickContext<'_>,
    ) -> Result<HashSet<String>, StoreError> {
        let mut waiting = HashSet::new();
        let Some(reserver) = self.provider.capacity_reservations() else {
            // A cloud without reservations starts each instance on open capacity.
            return Ok(waiting);
        };
        let owned: Vec<Decision> = group.iter().map(|d| (*d).clone()).collect();
        let refused = self.store.refused_starts(tick.now).await?;
        let prior = Prior::default().with_refused_starts(refused);
        let planned: HashMap<String, Reserve> =
            engine::reservations(tick.now, tick.set, &owned, &prior)
                .into_iter()
                .map(|r| (r.instance.clone(), r))
                .collect();
        let rows: HashMap<String, ReservationRow> = self
            .store
            .live_reservations()
            .await?
            .into_iter()
            .map(|r| (r.instance.clone(), r))
            .collect();
        let concerned: Vec<String> = group
            .iter()
            .filter(|d| planned.contains_key(&d.instance) || rows.contains_key(&d.instance))
            .map(|d| d.instance.clone())
            .collect();
        if concerned.is_empty() {
            return Ok(waiting);
        }
        let region = group[0].region.as_str();
        // Right before the calls: still stopped, not skipped, not owned.
        let fresh = match self.provider.reread(region, &concerned).await {
            Ok(fresh) => fresh,
            Err(err) => {
                tracing::warn!(error = %err, "no capacity reserved: the instances could not be read again");
                return Ok(waiting);
            }
        };
        let may = |id: &str| {
            fresh.iter().any(|i| {
                i.id == id
                    && i.state == InstanceState::Stopped
                    && i.tag(SKIP_TAG) != Some("true")
                    && i.owner().is_none()
            })
        };
        for d in group.iter().filter(|d| concerned.contains(&d.instance)) {
            if !may(&d.instance) {
                waiting.insert(d.instance.clone());
                continue;
            }
            let row = rows.get(&d.instance);
            let plan = planned.get(&d.instance);
            let ready = match (row, plan) {
                (Some(row), plan) => {
                    let released = row.step == Some(ReservationStep::Cancelled);
                    let ready = self.step_before_start(reserver, d, row, tick).await?;
                    match plan {
                        // Back on open capacity: a new reservation for this start.
                        Some(plan) if released && ready => {
                            self.reserve(reserver, d, plan, tick).await?
                        }
                        _ => ready,
                    }
                }
                (None, Some(plan)) => self.reserve(reserver, d, plan, tick).await?,
                (None, None) => true,
            };
            if !ready {
                waiting.insert(d.instance.clone());
            }
        }
        Ok(waiting)
    }

    /// A new reservation for `d`'s start: the row, then the reservation, then the target.
    /// Whether the start may go now.
    async fn reserve(
        &self,
        reserver: &P::CapacityReservations,
        d: &Decision,
        plan: &Reserve,
        tick: &mut TickContext<'_>,
    ) -> Result<bool, StoreError> {
        let row = ReservationRow {
            token: format!("ebb-{}-{}", d.instance, tick.now.timestamp()),
            instance: d.instance.clone(),
            region: d.region.clone(),
            policy: d.policy.clone(),
            step: Some(ReservationStep::Reserving),
            reservation_id: None,
            instance_type: None,
            ends_at: plan.ends_at,
            created_at: tick.now,
            made_at: None,
            cancelled_at: None,
        };
        self.store.insert_reservation(&row).await?;
        self.make(reserver, d, row, plan.reason.clone(), tick).await
    }

    /// Makes `row`'s reservation (again, after an answer lost: its token makes it the same),
    /// then makes `d`'s instance start into it; whether the start may go now.
    async fn make(
        &self,
        reserver: &P::CapacityReservations,
        d: &Decision,
        row: ReservationRow,
        reason: String,
        tick: &mut TickContext<'_>,
    ) -> Result<bool, StoreError> {
        let reserve = Decision {
            action: Action::ReserveCapacity,
            code: Code::CapacityReserved,
            reason,
            ..d.clone()
        };
        let request = ReservationRequest {
            instance: d.instance.clone(),
            token: row.token.clone(),
            ends_at: row.ends_at,
        };
        let mut made: Option<Result<Reservation, CloudError>> = None;
        let slot = &mut made;
        let call = move || async move {
            let answer = reserver.reserve_capacity(&d.region, &request).await;
            let report = as_report(&d.instance, &answer);
            *slot = Some(answer);
            report
        };
        let result = self.one_call(&reserve, tick, call).await?;
        match (result, made) {
            (Some(Ok(())), Some(Ok(r))) => {
                let made = Some((r.id.as_str(), r.instance_type.as_str()));
                self.store
                    .set_reservation_step(&row.token, ReservationStep::Targeting, made, tick.now)
                    .await?;
                let row = ReservationRow {
                    step: Some(ReservationStep::Targeting),
                    reservation_id: Some(r.id.clone()),
                    ..row
                };
                self.target(reserver, d, &row, tick).await
            }
            // Refused: the start goes on without a reservation.
            (Some(Err(kind)), _) if !kind.may_have_landed() => {
                self.store
                    .set_reservation_step(&row.token, ReservationStep::Refused, None, tick.now)
                    .await?;
                Ok(true)
            }
            // No intent, or the answer lost: the row's token finds it at a later tick.
            _ => Ok(false),
        }
    }

    /// The step of an existing reservation before `d`'s start; whether the start may go now.
    async fn step_before_start(
        &self,
        reserver: &P::CapacityReservations,
        d: &Decision,
        row: &ReservationRow,
        tick: &mut TickContext<'_>,
    ) -> Result<bool, StoreError> {
        match row.step {
            Some(ReservationStep::Reserving) => {
                let reason = format!(
                    "capacity reservation {} asked for again: no answer said it was made \
                     (the same token makes it the same reservation)",
                    row.token
                );
                self.make(reserver, d, row.clone(), reason, tick).await
            }
            Some(ReservationStep::Targeting) => self.target(reserver, d, row, tick).await,
            Some(ReservationStep::Targeted) => Ok(true),
            Some(ReservationStep::Cancelled) => self.release(reserver, d, row, tick).await,
            // Being cancelled, or a step this version does not know: the start waits;
            // `reservations.rs` settles it.
            _ => Ok(false),
        }
    }

    /// Makes `d`'s instance start into `row`'s reservation; whether the start may go now.
    async fn target(
        &self,
        reserver: &P::CapacityReservations,
        d: &Decision,
        row: &ReservationRow,
        tick: &mut TickContext<'_>,
    ) -> Result<bool, StoreError> {
        let Some(id) = row.reservation_id.as_deref() else {
            return Ok(false);
        };
        let target = Decision {
            action: Action::TargetReservation,
            code: Code::CapacityReserved,
            reason: format!("made to start into capacity reservation {id}, made for this start"),
            ..d.clone()
        };
        let call = || reserver.target_reservation(&d.region, &d.instance, Some(id));
        match self.one_call(&target, tick, call).await? {
            Some(Ok(())) => {}
            // Refused (denied, say): the start goes on without the reservation rather than
            // wait for a call that will never be allowed; the reservation is cancelled at
            // its deadline.
            Some(Err(kind)) if !kind.may_have_landed() => return Ok(true),
            _ => return Ok(false),
        }
        self.store
            .set_reservation_step(&row.token, ReservationStep::Targeted, None, tick.now)
            .await?;
        Ok(true)
    }

    /// Puts `d`'s instance, whose reservation ebb cancelled, back on open capacity; whether
    /// the start may go now.
    async fn release(
        &self,
        reserver: &P::CapacityReservations,
        d: &Decision,
        row: &ReservationRow,
        tick: &mut TickContext<'_>,
    ) -> Result<bool, StoreError> {
        let release = Decision {
            action: Action::TargetReservation,
            code: Code::ReservationReleased,
            reason: format!(
                "made to start into open capacity again: capacity reservation {} was cancelled",
                row.reservation_id.as_deref().unwrap_or("-")
            ),
            ..d.clone()
        };
        let call = || reserver.target_reservation(&d.region, &d.instance, None);
        match self.one_call(&release, tick, call).await? {
            Some(Ok(())) => {}
            // Refused: the start is tried as it is rather than held back for good.
            Some(Err(kind)) if !kind.may_have_landed() => return Ok(true),
            _ => return Ok(false),
        }
        self.store
            .set_reservation_step(&row.token, ReservationStep::Released, None, tick.now)
            .await?;
        Ok(true)
    }
}
