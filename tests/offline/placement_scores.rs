//! EC2's Spot Placement Scores through the AWS provider, answered by `aws-smithy-mocks` (moto
//! has no GetSpotPlacementScores): one call per type, the zone ids EC2 answers with turned
//! into the account's zone names, and a denial that is an error, never an empty answer.

use crate::aws_mocks::{provider, REGION};
use aws_sdk_ec2::operation::describe_availability_zones::DescribeAvailabilityZonesOutput;
use aws_sdk_ec2::operation::get_spot_placement_scores::GetSpotPlacementScoresOutput;
use aws_sdk_ec2::types::{AvailabilityZone, SpotPlacementScore};
use aws_smithy_mocks::{mock, RuleMode};
use aws_smithy_runtime_api::http::{Response, StatusCode};
use aws_smithy_types::body::SdkBody;
use ebb::cloud::{ErrorKind, SpotMoves};

fn zone(id: &str, name: &str) -> AvailabilityZone {
    AvailabilityZone::builder()
        .zone_id(id)
        .zone_name(name)
        .build()
}

fn score(zone_id: &str, score: i32) -> SpotPlacementScore {
    SpotPlacementScore::builder()
        .region(REGION)
        .availability_zone_id(zone_id)
        .score(score)
        .build()
}

#[tokio::test]
async fn placement_scores_are_read_per_type_and_named_by_zone() {
    let zones = mock!(aws_sdk_ec2::Client::describe_availability_zones).then_output(|| {
        DescribeAvailabilityZonesOutput::builder()
            .availability_zones(zone("use1-az4", "us-east-1a"))
            .availability_zones(zone("use1-az6", "us-east-1b"))
            .build()
    });
    let g5 = mock!(aws_sdk_ec2::Client::get_spot_placement_scores)
        .match_requests(|r| {
            r.instance_types() == ["g5.xlarge".to_string()]
                && r.target_capacity() == Some(1)
                && r.single_availability_zone() == Some(true)
                && r.region_names() == [REGION.to_string()]
        })
        .then_output(|| {
            GetSpotPlacementScoresOutput::builder()
                .spot_placement_scores(score("use1-az4", 9))
                .spot_placement_scores(score("use1-az6", 2))
                .build()
        });
    let p4d = mock!(aws_sdk_ec2::Client::get_spot_placement_scores)
        .match_requests(|r| r.instance_types() == ["p4d.24xlarge".to_string()])
        .then_output(|| {
            GetSpotPlacementScoresOutput::builder()
                .spot_placement_scores(score("use1-az6", 7))
                // A zone the account does not see: no name, left out.
                .spot_placement_scores(score("use1-az9", 10))
                .build()
        });
    let provider = provider(RuleMode::MatchAny, &[&zones, &g5, &p4d], &[]);
    let types = ["g5.xlarge".to_string(), "p4d.24xlarge".to_string()];
    let scores = provider.placement_scores(REGION, &types).await.unwrap();
    let key = |t: &str, z: &str| (t.to_string(), z.to_string());
    assert_eq!(
        scores.into_iter().collect::<Vec<_>>(),
        [
            (key("g5.xlarge", "us-east-1a"), 9),
            (key("g5.xlarge", "us-east-1b"), 2),
            (key("p4d.24xlarge", "us-east-1b"), 7),
        ]
    );
    assert_eq!((g5.num_calls(), p4d.num_calls()), (1, 1));
}

#[tokio::test]
async fn a_denied_placement_score_call_is_an_error_not_an_empty_answer() {
    let zones = mock!(aws_sdk_ec2::Client::describe_availability_zones).then_output(|| {
        DescribeAvailabilityZonesOutput::builder()
            .availability_zones(zone("use1-az4", "us-east-1a"))
            .build()
    });
    let denied = mock!(aws_sdk_ec2::Client::get_spot_placement_scores).then_http_response(|| {
        let body = r#"<?xml version="1.0" encoding="UTF-8"?>
<Response><Errors><Error><Code>UnauthorizedOperation</Code><Message>You are not authorized to perform this operation.</Message></Error></Errors><RequestID>req-denied</RequestID></Response>"#;
        Response::new(StatusCode::try_from(403).unwrap(), SdkBody::from(body))
    });
    let provider = provider(RuleMode::MatchAny, &[&zones, &denied], &[]);
    let error = provider
        .placement_scores(REGION, &["g5.xlarge".to_string()])
        .await
        .unwrap_err();
    assert_eq!(error.kind, ErrorKind::AccessDenied);
    assert!(
        error.to_string().contains("GetSpotPlacementScores"),
        "{error}"
    );
}
