//! The AWS provider against answers moto cannot give: throttling, access denied, capacity
//! errors, and CloudWatch (whose current protocol moto lacks). The clients are the real SDK
//! clients with `aws-smithy-mocks` answering in place of the network; EC2 errors are the XML
//! bodies and HTTP statuses EC2 sends.

use aws_sdk_cloudwatch::operation::get_metric_data::{GetMetricDataInput, GetMetricDataOutput};
use aws_sdk_cloudwatch::primitives::DateTime as SmithyTime;
use aws_sdk_cloudwatch::types::{MetricDataResult, StatusCode};
use aws_sdk_ec2::config::retry::RetryConfig;
use aws_sdk_ec2::config::{BehaviorVersion, Credentials, Region};
use aws_smithy_mocks::{create_mock_http_client, mock, MockResponseInterceptor, Rule, RuleMode};
use aws_smithy_runtime_api::http::{Response, StatusCode as HttpStatus};
use aws_smithy_types::body::SdkBody;
use chrono::{DateTime, Utc};
use ebb::cloud::aws::{AwsProvider, Scope, Settings};
use ebb::cloud::{ErrorKind, Provider, StopKind};
use std::time::Duration;

pub(crate) const REGION: &str = "us-east-1";

type HttpResponse = Response<SdkBody>;

fn retry() -> RetryConfig {
    RetryConfig::standard()
        .with_max_attempts(3)
        .with_initial_backoff(Duration::from_millis(1))
        .with_max_backoff(Duration::from_millis(5))
}

fn interceptor(mode: RuleMode, rules: &[&Rule]) -> MockResponseInterceptor {
    rules
        .iter()
        .fold(MockResponseInterceptor::new().rule_mode(mode), |i, r| {
            i.with_rule(r)
        })
}

/// A provider whose EC2 answers with `ec2` rules and CloudWatch with `cloudwatch` rules.
pub(crate) fn provider(mode: RuleMode, ec2: &[&Rule], cloudwatch: &[&Rule]) -> AwsProvider {
    let credentials = Credentials::new("AKIDEXAMPLE", "secret", None, None, "test");
    let ec2 = aws_sdk_ec2::Client::from_conf(
        aws_sdk_ec2::Config::builder()
            .behavior_version(BehaviorVersion::latest())
            .region(Region::new(REGION))
            .credentials_provider(credentials.clone())
            .http_client(create_mock_http_client())
            .interceptor(interceptor(mode, ec2))
            .retry_config(retry())
            .build(),
    );
    let cloudwatch = aws_sdk_cloudwatch::Client::from_conf(
        aws_sdk_cloudwatch::Config::builder()
            .behavior_version(aws_sdk_cloudwatch::config::BehaviorVersion::latest())
            .region(aws_sdk_cloudwatch::config::Region::new(REGION))
            .credentials_provider(credentials)
            .http_client(create_mock_http_client())
            .interceptor(interceptor(mode, cloudwatch))
            .retry_config(retry())
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
            eks: crate::common::unused_eks(),
        }],
    )
}

/// An EC2 answer: `status`, `body`, and the request id header EC2 sends with every answer.
fn ec2_answer(status: u16, body: String, request_id: &'static str) -> HttpResponse {
    let mut answer = HttpResponse::new(HttpStatus::try_from(status).unwrap(), SdkBody::from(body));
    answer.headers_mut().insert("x-amzn-requestid", request_id);
    answer
}

/// An EC2 error answer.
fn ec2_error(
    status: u16,
    code: &str,
    message: &str,
) -> impl Fn() -> HttpResponse + Send + Sync + 'static {
    let body = format!(
        r#"<?xml version="1.0" encoding="UTF-8"?>
<Response><Errors><Error><Code>{code}</Code><Message>{message}</Message></Error></Errors><RequestID>7a62c49f-347e-4fc4-9331-6e8eEXAMPLE</RequestID></Response>"#
    );
    move || ec2_answer(status, body.clone(), "7a62c49f-347e-4fc4-9331-6e8eEXAMPLE")
}

/// A StopInstances or StartInstances success answer for `ids`.
fn ec2_changed(operation: &str, ids: &[&str]) -> impl Fn() -> HttpResponse + Send + Sync + 'static {
    let items: String = ids
        .iter()
        .map(|id| {
            format!(
                "<item><instanceId>{id}</instanceId><currentState><code>64</code><name>stopping</name></currentState><previousState><code>16</code><name>running</name></previousState></item>"
            )
        })
        .collect();
    let body = format!(
        r#"<{operation}Response xmlns="http://ec2.amazonaws.com/doc/2016-11-15/"><requestId>req-{operation}</requestId><instancesSet>{items}</instancesSet></{operation}Response>"#
    );
    move || ec2_answer(200, body.clone(), "req-ok")
}

fn ids(names: &[&str]) -> Vec<String> {
    names.iter().map(|s| s.to_string()).collect()
}

#[tokio::test]
async fn throttling_is_retried_until_it_succeeds() {
    let stop = mock!(aws_sdk_ec2::Client::stop_instances)
        .sequence()
        .http_response(ec2_error(
            503,
            "RequestLimitExceeded",
            "Request limit exceeded.",
        ))
        .times(2)
        .http_response(ec2_changed("StopInstances", &["i-1", "i-2"]))
        .build();
    let provider = provider(RuleMode::Sequential, &[&stop], &[]);
    let report = provider
        .stop(REGION, &ids(&["i-1", "i-2"]), StopKind::Stop)
        .await;
    assert!(report.failed.is_empty(), "{:?}", report.failed);
    assert_eq!(report.done.len(), 2);
    assert_eq!(report.done[0].request_id.as_deref(), Some("req-ok"));
    assert_eq!(
        stop.num_calls(),
        3,
        "two throttled attempts, then the one that worked"
    );
    assert_eq!(provider.calls()["StopInstances"], 1);
}

// Paused: ebb's pacing waits for tokens at a halved rate before each call it makes again.
#[tokio::test(start_paused = true)]
async fn throttling_that_outlasts_the_retries_fails_the_rest_without_more_calls() {
    let stop = mock!(aws_sdk_ec2::Client::stop_instances)
        .sequence()
        .http_response(ec2_error(
            503,
            "RequestLimitExceeded",
            "Request limit exceeded.",
        ))
        .repeatedly()
        .build();
    let provider = provider(RuleMode::Sequential, &[&stop], &[]);
    let many: Vec<String> = (0..250).map(|n| format!("i-{n}")).collect();
    let report = provider.stop(REGION, &many, StopKind::Stop).await;
    assert_eq!(report.failed.len(), 250);
    assert!(report
        .failed
        .iter()
        .all(|f| f.error.kind == ErrorKind::Throttled));
    assert_eq!(
        report.failed[0].error.code.as_deref(),
        Some("RequestLimitExceeded")
    );
    assert_eq!(
        stop.num_calls(),
        9,
        "one batch, three SDK attempts each time ebb's pacing makes it (three times), no bisecting"
    );
    assert_eq!(provider.pacer().counts().throttles, 3);
}

/// A 500 may come after EC2 carried the call out: a call that changes something is not sent
/// again, and its error says the outcome is unknown (resolved from the instance's state later).
#[tokio::test]
async fn a_server_error_on_a_change_is_not_sent_again_and_is_unknown() {
    let start = mock!(aws_sdk_ec2::Client::start_instances)
        .sequence()
        .http_response(ec2_error(
            500,
            "InternalError",
            "An internal error has occurred.",
        ))
        .http_response(ec2_changed("StartInstances", &["i-1"]))
        .build();
    let provider = provider(RuleMode::Sequential, &[&start], &[]);
    let report = provider.start(REGION, &ids(&["i-1"])).await;
    assert!(report.done.is_empty(), "{:?}", report.done);
    assert_eq!(report.failed.len(), 1);
    assert_eq!(report.failed[0].error.kind, ErrorKind::Unanswered);
    assert!(report.failed[0].error.kind.may_have_landed());
    assert_eq!(start.num_calls(), 1);
}

/// A lost answer ends the call, but says nothing of the batches never sent: those are failed
/// (nothing was done to them), only the batch sent is unknown.
#[tokio::test]
async fn only_the_batch_whose_answer_was_lost_is_unknown() {
    let stop = mock!(aws_sdk_ec2::Client::stop_instances)
        .sequence()
        .http_response(ec2_error(
            500,
            "InternalError",
            "An internal error has occurred.",
        ))
        .repeatedly()
        .build();
    let provider = provider(RuleMode::Sequential, &[&stop], &[]);
    let many: Vec<String> = (0..250).map(|n| format!("i-{n}")).collect();
    let report = provider.stop(REGION, &many, StopKind::Stop).await;
    assert_eq!(stop.num_calls(), 1);
    assert_eq!(report.failed.len(), 250);
    let unknown = report
        .failed
        .iter()
        .filter(|f| f.error.kind.may_have_landed())
        .count();
    assert_eq!(unknown, 100, "the first batch of 100");
    assert!(
        report.failed[100..]
            .iter()
            .all(|f| f.error.kind == ErrorKind::Unavailable
                && f.error.message.starts_with("not sent"))
    );
}

#[tokio::test]
async fn access_denied_names_the_code_and_what_to_do() {
    let stop = mock!(aws_sdk_ec2::Client::stop_instances)
        .sequence()
        .http_response(ec2_error(
            403,
            "UnauthorizedOperation",
            "You are not authorized to perform this operation.",
        ))
        .repeatedly()
        .build();
    let provider = provider(RuleMode::Sequential, &[&stop], &[]);
    let report = provider.stop(REGION, &ids(&["i-1"]), StopKind::Stop).await;
    assert_eq!(report.failed.len(), 1);
    let error = &report.failed[0].error;
    assert_eq!(error.kind, ErrorKind::AccessDenied);
    assert_eq!(error.code.as_deref(), Some("UnauthorizedOperation"));
    assert_eq!(
        error.request_id.as_deref(),
        Some("7a62c49f-347e-4fc4-9331-6e8eEXAMPLE")
    );
    let text = error.to_string();
    assert!(text.contains("deploy/iam-policy.json"), "{text}");
    assert_eq!(stop.num_calls(), 1, "a refusal is not retried");
}

#[tokio::test]
async fn access_denied_for_one_instance_leaves_the_others_stopped() {
    // The IAM policy allows changes only on instances with the management tag: EC2 refuses
    // a whole call that names one without it.
    let denied = mock!(aws_sdk_ec2::Client::stop_instances)
        .match_requests(|r| r.instance_ids().iter().any(|id| id == "i-untagged"))
        .sequence()
        .http_response(ec2_error(
            403,
            "UnauthorizedOperation",
            "You are not authorized to perform this operation.",
        ))
        .repeatedly()
        .build();
    let allowed = mock!(aws_sdk_ec2::Client::stop_instances)
        .sequence()
        .http_response(ec2_changed("StopInstances", &[]))
        .repeatedly()
        .build();
    let provider = provider(RuleMode::MatchAny, &[&denied, &allowed], &[]);
    let report = provider
        .stop(
            REGION,
            &ids(&["i-1", "i-2", "i-untagged", "i-3"]),
            StopKind::Stop,
        )
        .await;
    let mut done: Vec<&str> = report.done.iter().map(|d| d.instance.as_str()).collect();
    done.sort();
    assert_eq!(done, ["i-1", "i-2", "i-3"]);
    assert_eq!(report.failed.len(), 1);
    assert_eq!(report.failed[0].instance, "i-untagged");
}

#[tokio::test]
async fn bad_credentials_fail_every_instance_after_one_call() {
    let stop = mock!(aws_sdk_ec2::Client::stop_instances)
        .sequence()
        .http_response(ec2_error(
            401,
            "AuthFailure",
            "AWS was not able to validate the provided access credentials",
        ))
        .repeatedly()
        .build();
    let provider = provider(RuleMode::Sequential, &[&stop], &[]);
    let report = provider
        .stop(REGION, &ids(&["i-1", "i-2", "i-3"]), StopKind::Stop)
        .await;
    assert_eq!(report.failed.len(), 3);
    assert_eq!(report.failed[0].error.kind, ErrorKind::Credentials);
    assert_eq!(stop.num_calls(), 1);
}

#[tokio::test]
async fn insufficient_capacity_on_start_is_its_own_kind_and_isolated() {
    let short = mock!(aws_sdk_ec2::Client::start_instances)
        .match_requests(|r| r.instance_ids().iter().any(|id| id == "i-p4d"))
        .sequence()
        .http_response(ec2_error(500,
                "InsufficientInstanceCapacity",
                "We currently do not have sufficient p4d.24xlarge capacity in the Availability Zone you requested (us-east-1a).",
            ),
        )
        .repeatedly()
        .build();
    let fine = mock!(aws_sdk_ec2::Client::start_instances)
        .sequence()
        .http_response(ec2_changed("StartInstances", &[]))
        .repeatedly()
        .build();
    let provider = provider(RuleMode::MatchAny, &[&short, &fine], &[]);
    let report = provider.start(REGION, &ids(&["i-g5", "i-p4d"])).await;
    assert_eq!(report.done.len(), 1);
    assert_eq!(report.done[0].instance, "i-g5");
    assert_eq!(report.failed.len(), 1);
    let error = &report.failed[0].error;
    assert_eq!(report.failed[0].instance, "i-p4d");
    assert_eq!(error.kind, ErrorKind::InsufficientCapacity);
    assert!(error.message.contains("p4d.24xlarge capacity"), "{error}");
}

/// DescribeInstances listing running g5.xlarge instances: `(id, hibernation configured)`.
fn listing(instances: &'static [(&'static str, bool)]) -> Rule {
    use aws_sdk_ec2::operation::describe_instances::DescribeInstancesOutput;
    use aws_sdk_ec2::types::{
        HibernationOptions, Instance, InstanceState, InstanceStateName, InstanceType, Reservation,
    };
    mock!(aws_sdk_ec2::Client::describe_instances).then_output(move || {
        let mut reservation = Reservation::builder();
        for (id, hibernation) in instances {
            reservation = reservation.instances(
                Instance::builder()
                    .instance_id(*id)
                    .instance_type(InstanceType::G5Xlarge)
                    .state(
                        InstanceState::builder()
                            .name(InstanceStateName::Running)
                            .build(),
                    )
                    .hibernation_options(
                        HibernationOptions::builder()
                            .configured(*hibernation)
                            .build(),
                    )
                    .build(),
            );
        }
        DescribeInstancesOutput::builder()
            .reservations(reservation.build())
            .build()
    })
}

/// DescribeVolumes and DescribeAddresses, which the listing also calls, answering nothing.
fn no_attachments() -> [Rule; 2] {
    [
        mock!(aws_sdk_ec2::Client::describe_volumes).then_output(|| {
            aws_sdk_ec2::operation::describe_volumes::DescribeVolumesOutput::builder().build()
        }),
        mock!(aws_sdk_ec2::Client::describe_addresses).then_output(|| {
            aws_sdk_ec2::operation::describe_addresses::DescribeAddressesOutput::builder().build()
        }),
    ]
}

#[tokio::test]
async fn a_failed_volume_read_leaves_the_volumes_unknown_and_the_instances_listed() {
    let listed = listing(&[("i-1", false)]);
    let types = mock!(aws_sdk_ec2::Client::describe_instance_types).then_output(|| {
        aws_sdk_ec2::operation::describe_instance_types::DescribeInstanceTypesOutput::builder()
            .build()
    });
    let volumes = mock!(aws_sdk_ec2::Client::describe_volumes)
        .sequence()
        .http_response(ec2_error(
            403,
            "UnauthorizedOperation",
            "You are not authorized to perform this operation.",
        ))
        .repeatedly()
        .build();
    let addresses = mock!(aws_sdk_ec2::Client::describe_addresses).then_output(|| {
        aws_sdk_ec2::operation::describe_addresses::DescribeAddressesOutput::builder()
            .addresses(
                aws_sdk_ec2::types::Address::builder()
                    .instance_id("i-1")
                    .build(),
            )
            .build()
    });
    let provider = provider(
        RuleMode::MatchAny,
        &[&listed, &types, &volumes, &addresses],
        &[],
    );
    let inventory = provider.instances().await;
    assert!(inventory.failures.is_empty(), "{:?}", inventory.failures);
    assert_eq!(inventory.instances.len(), 1);
    // Unread, not "no volumes": a report then says the stopped box's cost is unknown.
    let attached = &inventory.attached["i-1"];
    assert_eq!(attached.volumes, None);
    assert_eq!(attached.elastic_ips, Some(1));
}

#[tokio::test]
async fn hibernation_falls_back_to_a_stop_and_says_why() {
    let listed = listing(&[("i-configured", true), ("i-plain", false)]);
    let types = mock!(aws_sdk_ec2::Client::describe_instance_types).then_output(|| {
        aws_sdk_ec2::operation::describe_instance_types::DescribeInstanceTypesOutput::builder()
            .build()
    });
    let refused = mock!(aws_sdk_ec2::Client::stop_instances)
        .match_requests(|r| r.hibernate() == Some(true))
        .sequence()
        .http_response(ec2_error(
            400,
            "UnsupportedHibernationConfiguration",
            "The instance cannot hibernate: its root volume is not encrypted.",
        ))
        .repeatedly()
        .build();
    let stopped = mock!(aws_sdk_ec2::Client::stop_instances)
        .match_requests(|r| r.hibernate() != Some(true))
        .sequence()
        .http_response(ec2_changed("StopInstances", &[]))
        .repeatedly()
        .build();
    let [volumes, addresses] = no_attachments();
    let provider = provider(
        RuleMode::MatchAny,
        &[&listed, &types, &refused, &stopped, &volumes, &addresses],
        &[],
    );
    provider.instances().await;
    let report = provider
        .stop(
            REGION,
            &ids(&["i-configured", "i-plain"]),
            StopKind::Hibernate,
        )
        .await;
    assert!(report.failed.is_empty(), "{:?}", report.failed);
    let fallback = |id: &str| {
        report
            .done
            .iter()
            .find(|d| d.instance == id)
            .and_then(|d| d.fallback.clone())
            .unwrap()
    };
    // Not configured at launch: not even tried.
    assert!(fallback("i-plain").contains("hibernation is not configured"));
    // Configured, but EC2 refused: its reason is kept.
    assert!(fallback("i-configured").contains("root volume is not encrypted"));
    assert_eq!(refused.num_calls(), 1);
    assert_eq!(stopped.num_calls(), 2);
}

#[tokio::test]
async fn a_failed_gpu_fact_lookup_does_not_hide_the_instances() {
    let listed = listing(&[("i-1", false)]);
    let types = mock!(aws_sdk_ec2::Client::describe_instance_types)
        .sequence()
        .http_response(ec2_error(
            400,
            "InvalidInstanceType",
            "The following supplied instance types do not exist: [g5.xlarge]",
        ))
        .repeatedly()
        .build();
    let [volumes, addresses] = no_attachments();
    let provider = provider(
        RuleMode::MatchAny,
        &[&listed, &types, &volumes, &addresses],
        &[],
    );
    let inventory = provider.instances().await;
    assert!(inventory.failures.is_empty(), "{:?}", inventory.failures);
    assert_eq!(inventory.complete_regions, [REGION]);
    assert_eq!(inventory.instances.len(), 1);
    assert_eq!(inventory.instances[0].gpus, None);
    // Not cached: the next listing asks again.
    provider.instances().await;
    assert_eq!(types.num_calls(), 2);
}

/// A CloudWatch time.
fn at(text: &str) -> SmithyTime {
    let t: DateTime<Utc> = text.parse().unwrap();
    SmithyTime::from_secs(t.timestamp())
}

/// Whether `input` asks what ebb's adapter should of instances whose GPUs it does not know: per
/// instance, the aggregate of the agent's utilisation (`i<n>`) and of its memory (`m<n>`), each
/// its `Maximum` over five minutes (the busiest GPU, not the average of them; the fullest).
pub(crate) fn asks_for_the_busiest_gpu(input: &GetMetricDataInput) -> bool {
    input.metric_data_queries().iter().all(|q| {
        let Some(stat) = q.metric_stat() else {
            return false;
        };
        let metric = stat.metric().unwrap();
        let name = match &q.id().unwrap()[..1] {
            "i" => "nvidia_smi_utilization_gpu",
            "m" => "nvidia_smi_memory_used",
            _ => return false,
        };
        stat.stat() == Some("Maximum")
            && stat.period() == Some(300)
            && metric.namespace() == Some("CWAgent")
            && metric.metric_name() == Some(name)
            && metric.dimensions().len() == 1
            && metric.dimensions()[0].name() == Some("InstanceId")
    })
}

pub(crate) fn result(id: &str, points: &[(&str, f64)], status: StatusCode) -> MetricDataResult {
    let mut r = MetricDataResult::builder()
        .id(id)
        .label("nvidia_smi_utilization_gpu")
        .status_code(status);
    for (t, v) in points {
        r = r.timestamps(at(t)).values(*v);
    }
    r.build()
}

#[tokio::test]
async fn gpu_readings_keep_gaps_merge_pages_and_take_the_busiest_gpu() {
    // i-a has four GPUs, one of them busy: the aggregate's Maximum is that GPU. Its readings
    // come over two pages, with a gap at 11:10 where the agent sent nothing. i-b has no data.
    let pages = mock!(aws_sdk_cloudwatch::Client::get_metric_data)
        .match_requests(asks_for_the_busiest_gpu)
        .sequence()
        .output(|| {
            GetMetricDataOutput::builder()
                .metric_data_results(result(
                    "i0",
                    &[
                        ("2026-11-30T11:00:00Z", 97.0),
                        ("2026-11-30T11:05:00Z", 95.0),
                    ],
                    StatusCode::PartialData,
                ))
                .metric_data_results(result("i1", &[], StatusCode::Complete))
                .metric_data_results(result(
                    "m0",
                    &[("2026-11-30T11:05:00Z", 30_000.0)],
                    StatusCode::Complete,
                ))
                .metric_data_results(result("m1", &[], StatusCode::Complete))
                .next_token("page-2")
                .build()
        })
        .output(|| {
            GetMetricDataOutput::builder()
                .metric_data_results(result(
                    "i0",
                    &[
                        ("2026-11-30T11:20:00Z", 3.0),
                        ("2026-11-30T11:15:00Z", 96.0),
                    ],
                    StatusCode::Complete,
                ))
                .metric_data_results(result(
                    "m0",
                    &[("2026-11-30T11:20:00Z", 512.0)],
                    StatusCode::Complete,
                ))
                .build()
        })
        .build();
    let provider = provider(RuleMode::Sequential, &[], &[&pages]);
    let readings = provider
        .gpu_utilisation(
            REGION,
            &ids(&["i-a", "i-b"]),
            "2026-11-30T11:00:00Z".parse().unwrap(),
            "2026-11-30T11:25:00Z".parse().unwrap(),
        )
        .await
        .unwrap();
    assert!(readings.unread.is_empty(), "{:?}", readings.unread);
    let a: Vec<(String, f64)> = readings.samples["i-a"]
        .iter()
        .map(|s| (s.at.format("%H:%M").to_string(), s.percent))
        .collect();
    assert_eq!(
        a,
        [
            ("11:00".to_string(), 97.0),
            ("11:05".to_string(), 95.0),
            ("11:15".to_string(), 96.0),
            ("11:20".to_string(), 3.0)
        ]
    );
    assert!(readings.samples.get("i-b").is_none_or(Vec::is_empty));
    assert_eq!(pages.num_calls(), 2);
    // The memory of the fullest GPU joins by time, over pages; GPUs never listed: no count.
    let memory: Vec<Option<u32>> = readings.samples["i-a"]
        .iter()
        .map(|s| s.memory_mib)
        .collect();
    assert_eq!(memory, [None, Some(30_000), None, Some(512)]);
    assert!(readings.samples["i-a"]
        .iter()
        .all(|s| s.gpus_busy.is_none()));
}

#[tokio::test]
async fn gpu_readings_for_n_instances_cost_one_call_per_500() {
    let each = mock!(aws_sdk_cloudwatch::Client::get_metric_data)
        .match_requests(|input| input.metric_data_queries().len() <= 500)
        .then_compute_output(|input| {
            let mut out = GetMetricDataOutput::builder();
            for q in input.metric_data_queries() {
                out = out.metric_data_results(result(
                    q.id().unwrap(),
                    &[("2026-11-30T11:00:00Z", 1.0)],
                    StatusCode::Complete,
                ));
            }
            out.build()
        });
    let provider = provider(RuleMode::MatchAny, &[], &[&each]);
    let many: Vec<String> = (0..1_200).map(|n| format!("i-{n:05}")).collect();
    let readings = provider
        .gpu_utilisation(
            REGION,
            &many,
            "2026-11-30T10:00:00Z".parse().unwrap(),
            "2026-11-30T11:30:00Z".parse().unwrap(),
        )
        .await
        .unwrap();
    assert_eq!(readings.samples.len(), 1_200);
    assert!(readings.unread.is_empty());
    assert!(readings.samples.values().all(|r| r.len() == 1));
    // Two queries an instance (utilisation and memory): ⌈2400/500⌉.
    assert_eq!(provider.calls()["GetMetricData"], 5);
    assert_eq!(each.num_calls(), 5);
}

/// The `cloudwatch` activity signals: 1,200 queries (two signals of 600 instances) in ⌈1200/500⌉
/// calls, each query answered in its place with its own dimensions beside the instance's; one
/// CloudWatch failed is an unread answer, the others still read.
#[tokio::test]
async fn instance_metrics_cost_one_call_per_500_queries_and_answer_each_in_order() {
    use ebb::cloud::{InstanceMetrics, MetricQuery};
    let each = mock!(aws_sdk_cloudwatch::Client::get_metric_data)
        .match_requests(|input| input.metric_data_queries().len() <= 500)
        .then_compute_output(|input| {
            let mut out = GetMetricDataOutput::builder();
            for q in input.metric_data_queries() {
                let metric = q.metric_stat().and_then(|s| s.metric()).unwrap();
                let dimension = |name: &str| {
                    let found = metric.dimensions().iter().find(|d| d.name() == Some(name));
                    found
                        .and_then(|d| d.value())
                        .unwrap_or_default()
                        .to_string()
                };
                let (instance, pattern) = (dimension("InstanceId"), dimension("pattern"));
                let status = match instance.as_str() {
                    "i-00007" => StatusCode::InternalError,
                    _ => StatusCode::Complete,
                };
                // The value says which query it answers: the instance's number, and the
                // pattern's length.
                let n: f64 = instance[2..].parse().unwrap();
                let value = n * 100.0 + pattern.len() as f64;
                let points = [("2026-11-30T11:00:00Z", value)];
                out = out.metric_data_results(result(q.id().unwrap(), &points, status));
            }
            out.build()
        });
    let provider = provider(RuleMode::MatchAny, &[], &[&each]);
    let query = |n: usize, pattern: &str| MetricQuery {
        instance: format!("i-{n:05}"),
        namespace: "CWAgent".into(),
        metric: "procstat_lookup_pid_count".into(),
        dimensions: [("pattern".to_string(), pattern.to_string())].into(),
    };
    let queries: Vec<MetricQuery> = (0..600)
        .flat_map(|n| [query(n, "sshd"), query(n, "jupyter-lab")])
        .collect();
    let answers = provider
        .metric_maxima(
            REGION,
            &queries,
            "2026-11-30T10:00:00Z".parse().unwrap(),
            "2026-11-30T11:30:00Z".parse().unwrap(),
        )
        .await
        .unwrap();
    assert_eq!(answers.len(), 1_200);
    for (k, answer) in answers.iter().enumerate() {
        let (n, pattern) = (k / 2, if k % 2 == 0 { "sshd" } else { "jupyter-lab" });
        match answer {
            Err(why) => {
                assert_eq!(n, 7, "{why}");
                assert!(why.contains("InternalError"), "{why}");
            }
            Ok(points) => {
                let value = (n * 100 + pattern.len()) as f64;
                assert_eq!(points.iter().map(|p| p.1).collect::<Vec<_>>(), [value]);
            }
        }
    }
    assert_eq!(answers.iter().filter(|a| a.is_err()).count(), 2);
    assert_eq!(provider.calls()["GetMetricData"], 3);
    assert_eq!(each.num_calls(), 3);
}

#[tokio::test]
async fn a_query_that_does_not_end_complete_leaves_its_instance_unread() {
    // One call for six instances, over two pages. CloudWatch answers HTTP 200 and marks
    // queries one by one: i-0 is complete; i-1 failed inside CloudWatch; i-2 is refused (a
    // cross-account permission); i-3 is partial on the first page and complete on the second;
    // i-4 has no result at all; i-5 is still partial when the pages end.
    let pages = mock!(aws_sdk_cloudwatch::Client::get_metric_data)
        .sequence()
        .output(|| {
            let failed = |id: &str, status: StatusCode, code: &str| {
                MetricDataResult::builder()
                    .id(id)
                    .status_code(status)
                    .messages(
                        aws_sdk_cloudwatch::types::MessageData::builder()
                            .code(code)
                            .value("said by the test")
                            .build(),
                    )
                    .build()
            };
            let mut out = GetMetricDataOutput::builder();
            // Their memory is complete: the utilisation's status alone decides.
            for n in 0..6 {
                out = out.metric_data_results(result(&format!("m{n}"), &[], StatusCode::Complete));
            }
            out.metric_data_results(result(
                "i0",
                &[("2026-11-30T11:00:00Z", 97.0)],
                StatusCode::Complete,
            ))
            .metric_data_results(failed("i1", StatusCode::InternalError, "InternalError"))
            .metric_data_results(failed("i2", StatusCode::Forbidden, "Forbidden"))
            .metric_data_results(result(
                "i3",
                &[("2026-11-30T11:00:00Z", 96.0)],
                StatusCode::PartialData,
            ))
            .metric_data_results(result(
                "i5",
                &[("2026-11-30T11:00:00Z", 95.0)],
                StatusCode::PartialData,
            ))
            .next_token("page-2")
            .build()
        })
        .output(|| {
            GetMetricDataOutput::builder()
                .metric_data_results(result(
                    "i3",
                    &[("2026-11-30T11:05:00Z", 94.0)],
                    StatusCode::Complete,
                ))
                .metric_data_results(result(
                    "i5",
                    &[("2026-11-30T11:05:00Z", 93.0)],
                    StatusCode::PartialData,
                ))
                .build()
        })
        .build();
    let provider = provider(RuleMode::Sequential, &[], &[&pages]);
    let readings = provider
        .gpu_utilisation(
            REGION,
            &ids(&["i-0", "i-1", "i-2", "i-3", "i-4", "i-5"]),
            "2026-11-30T11:00:00Z".parse().unwrap(),
            "2026-11-30T11:10:00Z".parse().unwrap(),
        )
        .await
        .unwrap();
    assert_eq!(pages.num_calls(), 2);
    let percents =
        |id: &str| -> Vec<f64> { readings.samples[id].iter().map(|s| s.percent).collect() };
    assert_eq!(percents("i-0"), [97.0]);
    assert_eq!(percents("i-3"), [96.0, 94.0]);
    let mut unread: Vec<&str> = readings.unread.keys().map(String::as_str).collect();
    unread.sort();
    assert_eq!(unread, ["i-1", "i-2", "i-4", "i-5"]);
    for (id, says) in [
        ("i-1", "InternalError"),
        ("i-2", "Forbidden"),
        ("i-4", "no result"),
        ("i-5", "PartialData"),
    ] {
        assert!(
            readings.unread[id].contains(says),
            "{id}: {}",
            readings.unread[id]
        );
        assert!(
            !readings.samples.contains_key(id),
            "{id} is not read, not empty"
        );
    }
    assert!(readings.unread["i-1"].contains("said by the test"));
}
