//! On-Demand Capacity Reservations for `start.reserve_capacity`: one targeted reservation of an
//! instance's type, zone, platform and tenancy, tagged with ebb's token in the call that makes
//! it (the IAM policy allows the call only with that tag, and the cancellation only of what
//! carries it); the instance made to start into it; the reservation cancelled.

use super::ec2::Accepted;
use super::{cloud_error, once_sent, tag_map, AwsProvider, Scope};
use crate::cloud::pacing::Key;
use crate::cloud::{ActionReport, CloudError, Reservation, ReservationRequest, ReservationState};
use crate::names::{RESERVATION_TAG, RESERVED_FOR_TAG};
use aws_sdk_ec2::operation::RequestId;
use aws_sdk_ec2::primitives::DateTime as SmithyTime;
use aws_sdk_ec2::types::{
    CapacityReservation, CapacityReservationInstancePlatform, CapacityReservationPreference,
    CapacityReservationSpecification, CapacityReservationTarget, CapacityReservationTenancy,
    EndDateType, Filter, InstanceMatchCriteria, ResourceType, Tag, TagSpecification,
};
use futures_util::FutureExt as _;

/// A reservation as [`Reservation`] says it.
fn reservation(r: &CapacityReservation) -> Option<Reservation> {
    Some(Reservation {
        id: r.capacity_reservation_id()?.to_string(),
        instance_type: r.instance_type().unwrap_or_default().to_string(),
        zone: r.availability_zone().unwrap_or_default().to_string(),
        state: ReservationState::parse(r.state().map_or("", |s| s.as_str())),
        token: tag_map(r.tags()).remove(RESERVATION_TAG),
    })
}

impl AwsProvider {
    /// The pacing key of `api` in `scope`.
    fn key_of(scope: &Scope, api: &'static str) -> Key {
        Key {
            account: scope.account.clone(),
            region: scope.region.clone(),
            api,
        }
    }

    /// DescribeInstances of the instance (its type, zone, platform and tenancy), then
    /// CreateCapacityReservation with ebb's token as client token and tag.
    pub(super) async fn create_reservation(
        &self,
        region: &str,
        request: &ReservationRequest,
    ) -> Result<Reservation, CloudError> {
        const OP: &str = "CreateCapacityReservation";
        let scope = self.scope_of(region, &request.instance, OP)?;
        let filter = Filter::builder()
            .name("instance-id")
            .values(&request.instance)
            .build();
        let found = self.instances_where(scope, filter).await?;
        let Some(instance) = found.first() else {
            let message = format!("instance {} is not found", request.instance);
            return Err(CloudError::other(OP, message));
        };
        let ty = instance.instance_type().map(|t| t.as_str().to_string());
        let zone = instance
            .placement()
            .and_then(|p| p.availability_zone())
            .map(str::to_string);
        let (Some(ty), Some(zone)) = (ty, zone) else {
            let message = format!("instance {} has no type or zone", request.instance);
            return Err(CloudError::other(OP, message));
        };
        let platform = instance.platform_details().unwrap_or("Linux/UNIX");
        let tenancy = match instance.placement().and_then(|p| p.tenancy()) {
            Some(t) if t.as_str() == "dedicated" => CapacityReservationTenancy::Dedicated,
            _ => CapacityReservationTenancy::Default,
        };
        let tags = TagSpecification::builder()
            .resource_type(ResourceType::CapacityReservation)
            .tags(
                Tag::builder()
                    .key(RESERVATION_TAG)
                    .value(&request.token)
                    .build(),
            )
            .tags(
                Tag::builder()
                    .key(RESERVED_FOR_TAG)
                    .value(&request.instance)
                    .build(),
            )
            .build();
        let ends = SmithyTime::from_secs(request.ends_at.timestamp());
        let call = scope
            .ec2
            .create_capacity_reservation()
            .client_token(&request.token)
            .instance_type(&ty)
            .instance_platform(CapacityReservationInstancePlatform::from(platform))
            .availability_zone(&zone)
            .tenancy(tenancy)
            .instance_count(1)
            .instance_match_criteria(InstanceMatchCriteria::Targeted)
            .end_date_type(EndDateType::Limited)
            .end_date(ends)
            .tag_specifications(tags);
        // The client token makes a call made again after a throttle the same reservation.
        let send = || {
            self.count(OP);
            let call = call.clone();
            async move {
                call.customize()
                    .config_override(once_sent())
                    .send()
                    .boxed()
                    .await
                    .map_err(|e| cloud_error(OP, e))
            }
        };
        let out = self.pacer.call(&Self::key_of(scope, OP), 1, send).await?;
        out.capacity_reservation()
            .and_then(reservation)
            .ok_or_else(|| CloudError::other(OP, "EC2 answered without the reservation"))
    }

    /// DescribeCapacityReservations, every page, of the account of `instance`; those tagged
    /// `ebb:reservation=token`.
    pub(super) async fn tagged_reservations(
        &self,
        region: &str,
        instance: &str,
        token: &str,
    ) -> Result<Vec<Reservation>, CloudError> {
        let scope = self.scope_of(region, instance, "DescribeCapacityReservations")?;
        let answered = self.describe_reservations(scope, None).await?;
        Ok(answered
            .iter()
            .filter_map(reservation)
            .filter(|r| r.token.as_deref() == Some(token))
            .collect())
    }

    /// DescribeCapacityReservations in `scope` of `ids` (every reservation with `None`), every
    /// page.
    pub(super) async fn describe_reservations(
        &self,
        scope: &Scope,
        ids: Option<&[String]>,
    ) -> Result<Vec<CapacityReservation>, CloudError> {
        const OP: &str = "DescribeCapacityReservations";
        let mut answered = Vec::new();
        let mut next: Option<String> = None;
        loop {
            self.count(OP);
            let out = scope
                .ec2
                .describe_capacity_reservations()
                .set_capacity_reservation_ids(ids.map(<[String]>::to_vec))
                .set_next_token(next.take())
                .send()
                .boxed()
                .await
                .map_err(|e| cloud_error(OP, e))?;
            answered.extend(out.capacity_reservations().iter().cloned());
            match out.next_token() {
                Some(t) if !t.is_empty() => next = Some(t.to_string()),
                _ => return Ok(answered),
            }
        }
    }

    /// ModifyInstanceCapacityReservationAttributes: `instance` starts into `target`, or into
    /// open capacity with `None`.
    pub(super) async fn retarget(
        &self,
        region: &str,
        instance: &str,
        target: Option<&str>,
    ) -> ActionReport {
        const OP: &str = "ModifyInstanceCapacityReservationAttributes";
        let spec = match target {
            Some(id) => CapacityReservationSpecification::builder()
                .capacity_reservation_target(
                    CapacityReservationTarget::builder()
                        .capacity_reservation_id(id)
                        .build(),
                )
                .build(),
            None => CapacityReservationSpecification::builder()
                .capacity_reservation_preference(CapacityReservationPreference::Open)
                .build(),
        };
        let ids = [instance.to_string()];
        let spec = &spec;
        self.in_scopes(region, &ids, OP, |scope, batch| async move {
            self.count(OP);
            let out = scope
                .ec2
                .modify_instance_capacity_reservation_attributes()
                .set_instance_id(batch.into_iter().next())
                .capacity_reservation_specification(spec.clone())
                .customize()
                .config_override(once_sent())
                .send()
                .boxed()
                .await
                .map_err(|e| cloud_error(OP, e))?;
            Ok(Accepted::of(out.request_id()))
        })
        .await
    }

    /// DescribeInstances: the reservation `instance` is made to start into.
    pub(super) async fn target_of(
        &self,
        region: &str,
        instance: &str,
    ) -> Result<Option<String>, CloudError> {
        let scope = self.scope_of(region, instance, "DescribeInstances")?;
        let filter = Filter::builder()
            .name("instance-id")
            .values(instance)
            .build();
        let found = self.instances_where(scope, filter).await?;
        let Some(found) = found.first() else {
            let message = format!("instance {instance} is not found");
            return Err(CloudError::other("DescribeInstances", message));
        };
        Ok(found
            .capacity_reservation_specification()
            .and_then(|s| s.capacity_reservation_target())
            .and_then(|t| t.capacity_reservation_id())
            .map(str::to_string))
    }

    /// CancelCapacityReservation, in the account of `instance`.
    pub(super) async fn cancel(
        &self,
        region: &str,
        instance: &str,
        reservation: &str,
    ) -> Result<(), CloudError> {
        const OP: &str = "CancelCapacityReservation";
        let scope = self.scope_of(region, instance, OP)?;
        let send = || {
            self.count(OP);
            async move {
                scope
                    .ec2
                    .cancel_capacity_reservation()
                    .capacity_reservation_id(reservation)
                    .customize()
                    .config_override(once_sent())
                    .send()
                    .boxed()
                    .await
                    .map_err(|e| cloud_error(OP, e))
            }
        };
        self.pacer
            .call(&Self::key_of(scope, OP), 1, send)
            .await
            .map(|_| ())
    }
}
