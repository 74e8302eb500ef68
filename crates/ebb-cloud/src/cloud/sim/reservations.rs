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

    /// Sets the capacity reservations someone else holds (`held_reservations:`), by region.
    pub fn with_held_reservations(mut self, held: Vec<(String, HeldCapacity)>) -> Self {
        self.held = held;
        self
    }

    /// The held reservations of `region`, with the room its running instances take.
    fn sim_held(&self, region: &str) -> Vec<HeldCapacity> {
        let fleet = self.fleet();
        let taking = |id: &str| {
            let running_in = fleet.instances.iter().filter(|s| {
                s.instance.state == InstanceState::Running
                    && s.instance
                        .billing
                        .reservation
                        .as_ref()
                        .is_some_and(|r| r.id == id)
            });
            u32::try_from(running_in.count()).unwrap_or(u32::MAX)
        };
        self.held
            .iter()
            .filter(|(r, _)| r == region)
            .map(|(_, held)| HeldCapacity {
                available: held.total.saturating_sub(taking(&held.id)),
                ..held.clone()
            })
            .collect()
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

    /// Those of `held_reservations:` in `region`, less the room its running instances that
    /// name them take.
    async fn held_capacity(&self, region: &str) -> Result<Vec<HeldCapacity>, CloudError> {
        Ok(self.sim_held(region))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::Clock;
    use crate::fleet::{Fleet, HeldReservation, Instance, ReservationKind};

    fn instance(id: &str, state: InstanceState, reservation: Option<&str>) -> Instance {
        let mut i = Instance {
            id: id.to_string(),
            region: "us-east-1".to_string(),
            instance_type: "g6.xlarge".to_string(),
            state,
            state_since: None,
            lifecycle: crate::fleet::Lifecycle::OnDemand,
            launched_at: None,
            tags: Default::default(),
            gpus: None,
            gpu_util: Vec::new(),
            via_role: None,
            billing: crate::fleet::Billing::EC2,
            private_ip: None,
        };
        i.billing.reservation = reservation.map(|id| {
            Box::new(HeldReservation {
                id: id.to_string(),
                terms: None,
            })
        });
        i
    }

    #[tokio::test]
    async fn a_held_reservation_has_the_room_its_running_instances_do_not_take() {
        let fleet = Fleet {
            instances: vec![
                instance("i-in", InstanceState::Running, Some("cr-1")),
                instance("i-stopped-in", InstanceState::Stopped, Some("cr-1")),
                instance("i-out", InstanceState::Running, None),
            ],
            ..Fleet::default()
        };
        let held = HeldCapacity {
            id: "cr-1".to_string(),
            instance_type: "g6.xlarge".to_string(),
            zone: "us-east-1a".to_string(),
            platform: "Linux/UNIX".to_string(),
            kind: ReservationKind::CapacityReservation,
            total: 3,
            available: 3,
            targeted: true,
            end: None,
        };
        let sim = SimProvider::new(fleet, HashMap::new(), Clock::System)
            .with_held_reservations(vec![("us-east-1".to_string(), held)]);
        let read = sim.held_capacity("us-east-1").await.unwrap();
        assert_eq!((read[0].total, read[0].available), (3, 2));
        assert!(sim.held_capacity("eu-central-1").await.unwrap().is_empty());
    }
}
