//! The AWS provider's capacity reservation calls (`start.reserve_capacity`) against the real
//! SDK client answered by `aws-smithy-mocks`: the request carries ebb's token as client token
//! and tag, the instance's type, zone and platform, one targeted instance and an end date; a
//! lost answer is unknown; only reservations carrying the token are ebb's; the instance is
//! made to start into a reservation, or back into open capacity; a cancellation names it.

use crate::aws_mocks::{provider, REGION};
use aws_sdk_ec2::operation::cancel_capacity_reservation::CancelCapacityReservationOutput;
use aws_sdk_ec2::operation::create_capacity_reservation::CreateCapacityReservationOutput;
use aws_sdk_ec2::operation::describe_capacity_reservations::DescribeCapacityReservationsOutput;
use aws_sdk_ec2::operation::describe_instances::DescribeInstancesOutput;
use aws_sdk_ec2::operation::modify_instance_capacity_reservation_attributes::ModifyInstanceCapacityReservationAttributesOutput;
use aws_sdk_ec2::types::{
    CapacityReservation, CapacityReservationPreference, CapacityReservationState, EndDateType,
    Instance, InstanceMatchCriteria, InstanceType, Placement, Reservation, ResourceType, Tag,
};
use aws_smithy_mocks::{mock, RuleMode};
use aws_smithy_runtime_api::http::{Response, StatusCode};
use aws_smithy_types::body::SdkBody;
use chrono::{DateTime, Utc};
use ebb::cloud::{CapacityReservations, ErrorKind, ReservationRequest, ReservationState};

const TOKEN: &str = "ebb-i-0a-1796201100";

fn ends() -> DateTime<Utc> {
    "2026-12-02T09:45:00Z".parse().unwrap()
}

/// DescribeInstances of the stopped g5.2xlarge `i-0a` in us-east-1b.
fn the_instance() -> aws_smithy_mocks::Rule {
    mock!(aws_sdk_ec2::Client::describe_instances).then_output(|| {
        let instance = Instance::builder()
            .instance_id("i-0a")
            .instance_type(InstanceType::G52xlarge)
            .platform_details("Linux/UNIX")
            .placement(Placement::builder().availability_zone("us-east-1b").build())
            .build();
        DescribeInstancesOutput::builder()
            .reservations(Reservation::builder().instances(instance).build())
            .build()
    })
}

fn tag(key: &str, value: &str) -> Tag {
    Tag::builder().key(key).value(value).build()
}

fn made(id: &str, token: Option<&str>) -> CapacityReservation {
    let r = CapacityReservation::builder()
        .capacity_reservation_id(id)
        .instance_type("g5.2xlarge")
        .availability_zone("us-east-1b")
        .state(CapacityReservationState::Active);
    match token {
        Some(token) => r.tags(tag("ebb:reservation", token)).build(),
        None => r.build(),
    }
}

#[tokio::test]
async fn a_reservation_is_asked_for_the_instances_type_zone_and_platform_tagged_in_the_call() {
    let create = mock!(aws_sdk_ec2::Client::create_capacity_reservation)
        .match_requests(|r| {
            let spec = &r.tag_specifications()[0];
            let tags: Vec<(&str, &str)> = spec
                .tags()
                .iter()
                .map(|t| (t.key().unwrap(), t.value().unwrap()))
                .collect();
            r.client_token() == Some(TOKEN)
                && r.instance_type() == Some("g5.2xlarge")
                && r.availability_zone() == Some("us-east-1b")
                && r.instance_platform().map(|p| p.as_str()) == Some("Linux/UNIX")
                && r.instance_count() == Some(1)
                && r.instance_match_criteria() == Some(&InstanceMatchCriteria::Targeted)
                && r.end_date_type() == Some(&EndDateType::Limited)
                && r.end_date().map(|d| d.secs()) == Some(ends().timestamp())
                && spec.resource_type() == Some(&ResourceType::CapacityReservation)
                && tags == [("ebb:reservation", TOKEN), ("ebb:reserved-for", "i-0a")]
        })
        .then_output(|| {
            CreateCapacityReservationOutput::builder()
                .capacity_reservation(made("cr-1", Some(TOKEN)))
                .build()
        });
    let provider = provider(RuleMode::MatchAny, &[&the_instance(), &create], &[]);
    let request = ReservationRequest {
        instance: "i-0a".into(),
        token: TOKEN.into(),
        ends_at: ends(),
    };
    let made = provider.reserve_capacity(REGION, &request).await.unwrap();
    assert_eq!(made.id, "cr-1");
    assert_eq!(made.token.as_deref(), Some(TOKEN));
    assert_eq!(made.state, ReservationState::Active);
    assert_eq!(
        (made.instance_type.as_str(), made.zone.as_str()),
        ("g5.2xlarge", "us-east-1b")
    );
}

#[tokio::test]
async fn a_lost_answer_to_the_reservation_is_unknown_and_not_sent_again() {
    let create = mock!(aws_sdk_ec2::Client::create_capacity_reservation)
        .sequence()
        .http_response(|| {
            Response::new(
                StatusCode::try_from(503).unwrap(),
                SdkBody::from("unavailable"),
            )
        })
        .times(1)
        .http_response(|| panic!("sent again after an answer was lost"))
        .build();
    let provider = provider(RuleMode::Sequential, &[&the_instance(), &create], &[]);
    let request = ReservationRequest {
        instance: "i-0a".into(),
        token: TOKEN.into(),
        ends_at: ends(),
    };
    let err = provider
        .reserve_capacity(REGION, &request)
        .await
        .unwrap_err();
    assert_eq!(err.kind, ErrorKind::Unanswered, "{err}");
}

#[tokio::test]
async fn only_reservations_carrying_the_token_are_ebbs() {
    let listed = mock!(aws_sdk_ec2::Client::describe_capacity_reservations).then_output(|| {
        DescribeCapacityReservationsOutput::builder()
            .capacity_reservations(made("cr-someone", None))
            .capacity_reservations(made("cr-other", Some("ebb-i-0b-1")))
            .capacity_reservations(made("cr-1", Some(TOKEN)))
            .build()
    });
    let provider = provider(RuleMode::MatchAny, &[&listed], &[]);
    let found = provider.reservations(REGION, "i-0a", TOKEN).await.unwrap();
    let ids: Vec<&str> = found.iter().map(|r| r.id.as_str()).collect();
    assert_eq!(ids, ["cr-1"]);
}

#[tokio::test]
async fn the_instance_is_made_to_start_into_it_then_into_open_capacity_and_it_is_cancelled() {
    let target = mock!(aws_sdk_ec2::Client::modify_instance_capacity_reservation_attributes)
        .match_requests(|r| {
            let spec = r.capacity_reservation_specification().unwrap();
            r.instance_id() == Some("i-0a")
                && spec
                    .capacity_reservation_target()
                    .and_then(|t| t.capacity_reservation_id())
                    == Some("cr-1")
        })
        .then_output(|| {
            ModifyInstanceCapacityReservationAttributesOutput::builder()
                .r#return(true)
                .build()
        });
    let open = mock!(aws_sdk_ec2::Client::modify_instance_capacity_reservation_attributes)
        .match_requests(|r| {
            let spec = r.capacity_reservation_specification().unwrap();
            spec.capacity_reservation_preference() == Some(&CapacityReservationPreference::Open)
                && spec.capacity_reservation_target().is_none()
        })
        .then_output(|| {
            ModifyInstanceCapacityReservationAttributesOutput::builder()
                .r#return(true)
                .build()
        });
    let cancel = mock!(aws_sdk_ec2::Client::cancel_capacity_reservation)
        .match_requests(|r| r.capacity_reservation_id() == Some("cr-1"))
        .then_output(|| {
            CancelCapacityReservationOutput::builder()
                .r#return(true)
                .build()
        });
    let provider = provider(RuleMode::MatchAny, &[&target, &open, &cancel], &[]);
    let into = provider
        .target_reservation(REGION, "i-0a", Some("cr-1"))
        .await;
    assert_eq!(into.done.len(), 1, "{:?}", into.failed);
    provider
        .cancel_reservation(REGION, "i-0a", "cr-1")
        .await
        .unwrap();
    let back = provider.target_reservation(REGION, "i-0a", None).await;
    assert_eq!(back.done.len(), 1, "{:?}", back.failed);
}
