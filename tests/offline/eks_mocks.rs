//! The AWS provider's EKS calls against answers moto cannot give: DescribeUpdate, which moto
//! lacks (its route answers 404), with each status EKS reports, and a change whose answer is
//! lost. The clients are the real SDK clients with `aws-smithy-mocks` answering in place of the
//! network.

use aws_sdk_eks::operation::describe_nodegroup::DescribeNodegroupOutput;
use aws_sdk_eks::operation::describe_update::DescribeUpdateOutput;
use aws_sdk_eks::operation::update_nodegroup_config::UpdateNodegroupConfigOutput;
use aws_sdk_eks::types::{
    ErrorDetail, Nodegroup, NodegroupIssueCode, NodegroupScalingConfig, Update,
    UpdateStatus as EksStatus,
};
use aws_smithy_mocks::{create_mock_http_client, mock, MockResponseInterceptor, Rule, RuleMode};
use aws_smithy_runtime_api::http::{Response, StatusCode as HttpStatus};
use aws_smithy_types::body::SdkBody;
use ebb::cloud::aws::{AwsProvider, Scope, Settings};
use ebb::cloud::{ErrorKind, ScalingGroups, UpdateStatus};
use ebb::fleet::{Capacity, NodeGroup};

const REGION: &str = "us-east-1";

/// A provider whose EKS answers with `rules`, and whose other clients reach nothing.
fn provider(rules: &[&Rule]) -> AwsProvider {
    let interceptor = rules.iter().fold(
        MockResponseInterceptor::new().rule_mode(RuleMode::MatchAny),
        |i, r| i.with_rule(r),
    );
    let eks = aws_sdk_eks::Client::from_conf(
        aws_sdk_eks::Config::builder()
            .behavior_version(aws_sdk_eks::config::BehaviorVersion::latest())
            .region(aws_sdk_eks::config::Region::new(REGION))
            .credentials_provider(aws_sdk_eks::config::Credentials::new(
                "AKIDEXAMPLE",
                "secret",
                None,
                None,
                "test",
            ))
            .http_client(create_mock_http_client())
            .interceptor(interceptor)
            .retry_config(
                aws_sdk_eks::config::retry::RetryConfig::standard()
                    .with_max_attempts(3)
                    .with_initial_backoff(std::time::Duration::from_millis(1)),
            )
            .build(),
    );
    let ec2 = aws_sdk_ec2::Client::from_conf(
        aws_sdk_ec2::Config::builder()
            .behavior_version(aws_sdk_ec2::config::BehaviorVersion::latest())
            .region(aws_sdk_ec2::config::Region::new(REGION))
            .http_client(create_mock_http_client())
            .build(),
    );
    let cloudwatch = aws_sdk_cloudwatch::Client::from_conf(
        aws_sdk_cloudwatch::Config::builder()
            .behavior_version(aws_sdk_cloudwatch::config::BehaviorVersion::latest())
            .region(aws_sdk_cloudwatch::config::Region::new(REGION))
            .http_client(create_mock_http_client())
            .build(),
    );
    AwsProvider::from_scopes(
        Settings {
            regions: vec![REGION.to_string()],
            ..Settings::default()
        },
        vec![Scope {
            region: REGION.to_string(),
            account: None,
            ec2,
            cloudwatch,
            autoscaling: crate::common::unused_autoscaling(),
            eks,
        }],
    )
}

fn gpu() -> NodeGroup {
    NodeGroup {
        cluster: "prod".to_string(),
        name: "gpu".to_string(),
    }
}

/// The Auto Scaling group EKS made for node group `gpu`.
const GROUP: &str = "eks-gpu-1234";

/// DescribeUpdate's answer: update `u-1` with `status` and `errors`.
fn update(status: EksStatus, errors: Vec<ErrorDetail>) -> Rule {
    mock!(aws_sdk_eks::Client::describe_update)
        .match_requests(|r| {
            r.name() == Some("prod")
                && r.nodegroup_name() == Some("gpu")
                && r.update_id() == Some("u-1")
        })
        .then_output(move || {
            DescribeUpdateOutput::builder()
                .update(
                    Update::builder()
                        .id("u-1")
                        .status(status.clone())
                        .set_errors(Some(errors.clone()))
                        .build(),
                )
                .build()
        })
}

#[tokio::test]
async fn a_node_groups_capacity_is_set_through_update_nodegroup_config_with_its_update_id() {
    let set = mock!(aws_sdk_eks::Client::update_nodegroup_config)
        .match_requests(|r| {
            let s = r.scaling_config().unwrap();
            r.cluster_name() == Some("prod")
                && r.nodegroup_name() == Some("gpu")
                && (s.min_size(), s.desired_size(), s.max_size()) == (Some(0), Some(0), Some(1))
        })
        .then_output(|| {
            UpdateNodegroupConfigOutput::builder()
                .update(
                    Update::builder()
                        .id("u-1")
                        .status(EksStatus::InProgress)
                        .build(),
                )
                .build()
        });
    let provider = provider(&[&set]);
    let floor = Capacity {
        min: 0,
        desired: 0,
        max: 1,
    };
    let answer = provider
        .set_node_group_capacity(REGION, GROUP, &gpu(), floor)
        .await;
    assert_eq!(answer.unwrap().as_deref(), Some("u-1"));
    assert_eq!(set.num_calls(), 1);
    assert_eq!(provider.calls()["UpdateNodegroupConfig"], 1);
}

#[tokio::test]
async fn describe_update_tells_each_status_with_ekss_errors() {
    let failed = ErrorDetail::builder()
        .error_code(
            NodegroupIssueCode::AsgInstanceLaunchFailures
                .as_str()
                .into(),
        )
        .error_message("Could not launch On-Demand Instances")
        .build();
    for (status, errors, expected) in [
        (EksStatus::Successful, vec![], UpdateStatus::Successful),
        (EksStatus::InProgress, vec![], UpdateStatus::InProgress),
        (
            EksStatus::Failed,
            vec![failed.clone()],
            UpdateStatus::Failed,
        ),
        (EksStatus::Cancelled, vec![], UpdateStatus::Cancelled),
    ] {
        let rule = update(status, errors.clone());
        let read = provider(&[&rule])
            .node_group_update(REGION, GROUP, &gpu(), "u-1")
            .await
            .unwrap();
        assert_eq!(read.status, expected);
        if expected == UpdateStatus::Failed {
            assert_eq!(
                read.errors,
                ["AsgInstanceLaunchFailures: Could not launch On-Demand Instances"]
            );
        }
    }
}

#[tokio::test]
async fn an_update_that_cannot_be_read_is_an_error_never_a_success() {
    // moto has no DescribeUpdate: its server answers the route with a plain 404 page; EKS
    // answers an update it does not know with ResourceNotFoundException. Either is an error.
    let moto = mock!(aws_sdk_eks::Client::describe_update).then_http_response(|| {
        Response::new(
            HttpStatus::try_from(404).unwrap(),
            SdkBody::from("<!doctype html><title>404 Not Found</title>"),
        )
    });
    let read = provider(&[&moto])
        .node_group_update(REGION, GROUP, &gpu(), "u-1")
        .await;
    let err = read.expect_err("a 404 is no status");
    assert!(!err.kind.may_have_landed(), "{err}");

    let unknown = mock!(aws_sdk_eks::Client::describe_update).then_http_response(|| {
        let mut answer = Response::new(
            HttpStatus::try_from(404).unwrap(),
            SdkBody::from(r#"{"message":"No update found for ID: u-1."}"#),
        );
        answer
            .headers_mut()
            .insert("x-amzn-errortype", "ResourceNotFoundException");
        answer
    });
    let read = provider(&[&unknown])
        .node_group_update(REGION, GROUP, &gpu(), "u-1")
        .await;
    assert_eq!(
        read.unwrap_err().code.as_deref(),
        Some("ResourceNotFoundException")
    );

    // An answer without the update, or with a status ebb does not know, is no status either.
    let empty = mock!(aws_sdk_eks::Client::describe_update)
        .then_output(|| DescribeUpdateOutput::builder().build());
    let read = provider(&[&empty])
        .node_group_update(REGION, GROUP, &gpu(), "u-1")
        .await;
    assert!(read.is_err());
    let strange = update(EksStatus::from("Paused"), vec![]);
    let read = provider(&[&strange])
        .node_group_update(REGION, GROUP, &gpu(), "u-1")
        .await;
    assert!(read.is_err());
}

#[tokio::test]
async fn a_5xx_on_the_change_is_not_sent_again_and_may_have_landed() {
    let set = mock!(aws_sdk_eks::Client::update_nodegroup_config)
        .sequence()
        .http_status(
            503,
            Some(r#"{"message":"Service Unavailable"}"#.to_string()),
        )
        .times(3)
        .build();
    let provider = provider(&[&set]);
    let err = provider
        .set_node_group_capacity(
            REGION,
            GROUP,
            &gpu(),
            Capacity {
                min: 0,
                desired: 0,
                max: 1,
            },
        )
        .await
        .unwrap_err();
    assert_eq!(err.kind, ErrorKind::Unanswered, "{err}");
    assert_eq!(set.num_calls(), 1, "not sent again once it may have landed");
}

#[tokio::test]
async fn the_node_groups_scaling_config_is_read_whole_or_not_at_all() {
    let whole = mock!(aws_sdk_eks::Client::describe_nodegroup).then_output(|| {
        DescribeNodegroupOutput::builder()
            .nodegroup(
                Nodegroup::builder()
                    .scaling_config(
                        NodegroupScalingConfig::builder()
                            .min_size(0)
                            .desired_size(0)
                            .max_size(1)
                            .build(),
                    )
                    .build(),
            )
            .build()
    });
    let read = provider(&[&whole])
        .node_group_capacity(REGION, GROUP, &gpu())
        .await;
    assert_eq!(
        read.unwrap(),
        Capacity {
            min: 0,
            desired: 0,
            max: 1
        }
    );
    let partial = mock!(aws_sdk_eks::Client::describe_nodegroup).then_output(|| {
        DescribeNodegroupOutput::builder()
            .nodegroup(
                Nodegroup::builder()
                    .scaling_config(NodegroupScalingConfig::builder().max_size(1).build())
                    .build(),
            )
            .build()
    });
    let read = provider(&[&partial])
        .node_group_capacity(REGION, GROUP, &gpu())
        .await;
    assert!(read.is_err(), "unknown sizes are unknown, never 0");
}
