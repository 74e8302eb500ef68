//! Capacity reservations on the simulated fleet: one is made at once (active) and always has
//! capacity; a start into an active reservation of the instance's type succeeds even while the
//! type has none (`no_capacity_for`, `start_failures`). A repeated request with the same token
//! is the same reservation, as EC2's client token makes it.

use super::calls::wrong_state;
use super::{SimProvider, Simulated};
use crate::cloud::CapacityReservations;
use crate::cloud::{ActionReport, CloudError, Reservation, ReservationRequest, ReservationState};
use crate::fleet::{HeldCapacity, InstanceState};
use std::collections::HashMap;

/// The error of a reservation the fleet does not have.
fn no_such(operation: &'static str, id: &str) -> CloudError {
    let message = format!("The capacity reservation '{id}' does not exist");
    CloudError::not_found(operation, "InvalidCapacityReservationId.NotFound", message)
}

impl SimProvider {
    /// CreateCapacityReservation for `request.instance`'s type and zone.
    pub(super) fn sim_reserve(
        &self,
        region: &str,
        request: &ReservationRequest,
    ) -> Result<Reservation, CloudError> {
        const OP: &str = "CreateCapacityReservation";
        let mut fleet = self.fleet();
        let token = Some(request.token.clone());
        if let Some(made) = fleet.reservations.iter().find(|r| r.token == token) {
            return Ok(made.clone());
        }
        let instance = fleet
            .by_id
            .get(&request.instance)
            .map(|&i| &fleet.instances[i].instance)
            .filter(|i| i.region == region)
            .ok_or_else(|| {
                let message = format!("The instance ID '{}' does not exist", request.instance);
                CloudError::not_found(OP, "InvalidInstanceID.NotFound", message)
            })?;
        let made = Reservation {
            id: format!("cr-{:017x}", fleet.reservations.len() + 1),
            instance_type: instance.instance_type.clone(),
            zone: format!("{region}a"),
            state: ReservationState::Active,
            token,
        };
        fleet.reservations.push(made.clone());
        Ok(made)
    }

    /// DescribeCapacityReservations: those tagged with `token`.
    pub(super) fn sim_reservations(&self, token: &str) -> Vec<Reservation> {
        self.fleet()
            .reservations
            .iter()
            .filter(|r| r.token.as_deref() == Some(token))
            .cloned()
            .collect()
    }

    /// CancelCapacityReservation.
    pub(super) fn sim_cancel(&self, id: &str) -> Result<(), CloudError> {
        let mut fleet = self.fleet();
        let found = fleet.reservations.iter_mut().find(|r| r.id == id);
        let found = found.ok_or_else(|| no_such("CancelCapacityReservation", id))?;
        found.state = ReservationState::Ended("cancelled".to_string());
        Ok(())
    }

    /// ModifyInstanceCapacityReservationAttributes of a stopped instance.
    pub(super) async fn sim_target(
        &self,
        region: &str,
        instance: &str,
        target: Option<&str>,
    ) -> ActionReport {
        const OP: &str = "ModifyInstanceCapacityReservationAttributes";
        let ids = [instance.to_string()];
        if let Some(id) = target.filter(|id| !self.fleet().reservations.iter().any(|r| r.id == *id))
        {
            return ActionReport::all_failed(&ids, &no_such(OP, id));
        }
        self.act(OP, region, &ids, |sim, _| match sim.instance.state {
            InstanceState::Stopped => {
                sim.reservation = target.map(str::to_string);
                Ok(())
            }
            _ => Err(wrong_state(sim)),
        })
        .await
    }

    /// The reservation `instance` starts into.
    pub(super) fn sim_target_of(&self, instance: &str) -> Result<Option<String>, CloudError> {
        let fleet = self.fleet();
        let found = fleet.by_id.get(instance).map(|&i| &fleet.instances[i]);
        let found = found.ok_or_else(|| {
            let message = format!("The instance ID '{instance}' does not exist");
            CloudError::not_found("DescribeInstances", "InvalidInstanceID.NotFound", message)
        })?;
        Ok(found.reservation.clone())
    }

    /// The active reservations, id → instance type: what a start may use.
    pub(super) fn held(&self) -> HashMap<String, String> {
        self.fleet()
            .reservations
            .iter()
            .filter(|r| r.state == ReservationState::Active)
            .map(|r| (r.id.clone(), r.instance_type.clone()))
            .collect()
    }
}

impl Simulated {
    /// Whether it starts into an active reservation of its type, by `held`.
    pub(super) fn reserved(&self, held: &HashMap<String, String>) -> bool {
        self.reservation
            .as_ref()
            .and_then(|r| held.get(r))
            .is_some_and(|ty| *ty == self.instance.instance_type)
    }
}

impl CapacityReservations for SimProvider {
    async fn reserve_capacity(
        &self,
        region: &str,
        request: &ReservationRequest,
    ) -> Result<Reservation, CloudError> {
        self.admit(region, "CreateCapacityReservation", 1)?;
        self.sim_reserve(region, request)
    }

    async fn reservations(
        &self,
        _region: &str,
        _instance: &str,
        token: &str,
    ) -> Result<Vec<Reservation>, CloudError> {
        Ok(self.sim_reservations(token))
    }

    async fn target_reservation(
        &self,
        region: &str,
        instance: &str,
        reservation: Option<&str>,
    ) -> ActionReport {
        self.sim_target(region, instance, reservation).await
    }

    async fn reservation_target(
        &self,
        _region: &str,
        instance: &str,
    ) -> Result<Option<String>, CloudError> {
        self.sim_target_of(instance)
    }

    async fn cancel_reservation(
        &self,
        region: &str,
        _instance: &str,
        reservation: &str,
    ) -> Result<(), CloudError> {
        self.admit(region, "CancelCapacityReservation", 1)?;
        self.sim_cancel(reservation)
    }

    /// The simulated fleet's reservations are all ebb's own: none is held outside it.
    async fn held_capacity(&self, _region: &str) -> Result<Vec<HeldCapacity>, CloudError> {
        Ok(Vec::new())
    }
}
