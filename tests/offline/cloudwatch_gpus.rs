//! How many GPUs were busy, from CloudWatch: for a type with several GPUs (the count
//! DescribeInstanceTypes gave the listing), one `Maximum` query per GPU on the agent's
//! `InstanceId` and `index` aggregate, counted per period; a GPU query that does not end
//! `Complete` leaves the instance unread, as its utilisation query would. The clients are the
//! real SDK's with `aws-smithy-mocks` answering (tests/offline/aws_mocks.rs has the rest).

use crate::aws_mocks::{provider, result, REGION};
use aws_sdk_cloudwatch::operation::get_metric_data::{GetMetricDataInput, GetMetricDataOutput};
use aws_sdk_cloudwatch::types::StatusCode;
use aws_smithy_mocks::{mock, Rule, RuleMode};
use ebb::cloud::Provider;

/// DescribeInstances listing `i-quad` (a g5.12xlarge) and `i-one` (a g5.xlarge),
/// DescribeInstanceTypes giving them four GPUs and one, and no volumes nor Elastic IPs (the
/// listing reads those too).
fn listing() -> [Rule; 4] {
    use aws_sdk_ec2::operation::describe_instance_types::DescribeInstanceTypesOutput;
    use aws_sdk_ec2::operation::describe_instances::DescribeInstancesOutput;
    use aws_sdk_ec2::types::{
        GpuDeviceInfo, GpuInfo, Instance, InstanceState, InstanceStateName, InstanceType,
        InstanceTypeInfo, Reservation,
    };
    let instances = mock!(aws_sdk_ec2::Client::describe_instances).then_output(|| {
        let mut reservation = Reservation::builder();
        for (id, kind) in [
            ("i-quad", InstanceType::G512xlarge),
            ("i-one", InstanceType::G5Xlarge),
        ] {
            reservation = reservation.instances(
                Instance::builder()
                    .instance_id(id)
                    .instance_type(kind)
                    .state(
                        InstanceState::builder()
                            .name(InstanceStateName::Running)
                            .build(),
                    )
                    .build(),
            );
        }
        DescribeInstancesOutput::builder()
            .reservations(reservation.build())
            .build()
    });
    let types = mock!(aws_sdk_ec2::Client::describe_instance_types).then_output(|| {
        let info = |kind: InstanceType, count: i32| {
            InstanceTypeInfo::builder()
                .instance_type(kind)
                .gpu_info(
                    GpuInfo::builder()
                        .gpus(
                            GpuDeviceInfo::builder()
                                .count(count)
                                .manufacturer("NVIDIA")
                                .name("A10G")
                                .build(),
                        )
                        .build(),
                )
                .build()
        };
        DescribeInstanceTypesOutput::builder()
            .instance_types(info(InstanceType::G512xlarge, 4))
            .instance_types(info(InstanceType::G5Xlarge, 1))
            .build()
    });
    let volumes = mock!(aws_sdk_ec2::Client::describe_volumes).then_output(|| {
        aws_sdk_ec2::operation::describe_volumes::DescribeVolumesOutput::builder().build()
    });
    let addresses = mock!(aws_sdk_ec2::Client::describe_addresses).then_output(|| {
        aws_sdk_ec2::operation::describe_addresses::DescribeAddressesOutput::builder().build()
    });
    [instances, types, volumes, addresses]
}

/// Whether the call asks, for the first instance (the four-GPU box), each GPU by index, and
/// for the second only its aggregates.
fn asks_each_gpu_of_the_quad(input: &GetMetricDataInput) -> bool {
    let mut gpus: Vec<String> = Vec::new();
    for q in input.metric_data_queries() {
        let id = q.id().unwrap();
        let metric = q.metric_stat().unwrap().metric().unwrap();
        let dimension = |name: &str| {
            metric
                .dimensions()
                .iter()
                .find(|d| d.name() == Some(name))
                .and_then(|d| d.value())
        };
        if id.starts_with('g') {
            if metric.metric_name() != Some("nvidia_smi_utilization_gpu")
                || dimension("InstanceId") != Some("i-quad")
                || metric.dimensions().len() != 2
            {
                return false;
            }
            gpus.push(format!("{id}={}", dimension("index").unwrap_or("?")));
        }
    }
    gpus == ["g0_0=0", "g0_1=1", "g0_2=2", "g0_3=3"] && input.metric_data_queries().len() == 8
}

/// The points of the quad's GPU `index`, or `None` to leave its result out of the answer.
type GpuPoints = fn(u32) -> Option<Vec<(&'static str, f64)>>;

/// An answer with the aggregates of both instances, the quad's GPUs as `gpu(index)` says and
/// the status `gpu_status`.
fn answer(gpu_status: StatusCode, gpu: GpuPoints) -> Rule {
    mock!(aws_sdk_cloudwatch::Client::get_metric_data)
        .match_requests(asks_each_gpu_of_the_quad)
        .then_output(move || {
            let (a, b) = ("2026-11-30T11:00:00Z", "2026-11-30T11:05:00Z");
            let mut out = GetMetricDataOutput::builder()
                .metric_data_results(result("i0", &[(a, 80.0), (b, 3.0)], StatusCode::Complete))
                .metric_data_results(result("m0", &[(a, 20_000.0)], StatusCode::Complete))
                .metric_data_results(result("i1", &[(a, 4.0), (b, 60.0)], StatusCode::Complete))
                .metric_data_results(result("m1", &[], StatusCode::Complete));
            for index in 0..4 {
                if let Some(points) = gpu(index) {
                    out = out.metric_data_results(result(
                        &format!("g0_{index}"),
                        &points,
                        gpu_status.clone(),
                    ));
                }
            }
            out.build()
        })
}

async fn read(cloudwatch: &Rule) -> ebb::cloud::GpuReadings {
    let [instances, types, volumes, addresses] = listing();
    let provider = provider(
        RuleMode::MatchAny,
        &[&instances, &types, &volumes, &addresses],
        &[cloudwatch],
    );
    let inventory = provider.instances().await;
    assert_eq!(inventory.instances.len(), 2);
    provider
        .gpu_utilisation(
            REGION,
            &["i-quad".to_string(), "i-one".to_string()],
            "2026-11-30T11:00:00Z".parse().unwrap(),
            "2026-11-30T11:10:00Z".parse().unwrap(),
        )
        .await
        .unwrap()
}

#[tokio::test]
async fn each_gpu_of_a_multi_gpu_box_is_read_and_the_busy_ones_counted() {
    // 11:00: GPUs at 80, 5, 4.9 and 0 %: two busy (5 % is busy). 11:05: all idle but GPU 3,
    // which the agent did not report then.
    let cloudwatch = answer(StatusCode::Complete, |index| {
        Some(match index {
            0 => vec![
                ("2026-11-30T11:00:00Z", 80.0),
                ("2026-11-30T11:05:00Z", 3.0),
            ],
            1 => vec![("2026-11-30T11:00:00Z", 5.0), ("2026-11-30T11:05:00Z", 1.0)],
            2 => vec![("2026-11-30T11:00:00Z", 4.9), ("2026-11-30T11:05:00Z", 0.0)],
            _ => vec![("2026-11-30T11:00:00Z", 0.0)],
        })
    });
    let readings = read(&cloudwatch).await;
    assert!(readings.unread.is_empty(), "{:?}", readings.unread);
    let quad: Vec<(f64, Option<u32>, Option<u16>)> = readings.samples["i-quad"]
        .iter()
        .map(|s| (s.percent, s.memory_mib, s.gpus_busy))
        .collect();
    assert_eq!(quad, [(80.0, Some(20_000), Some(2)), (3.0, None, Some(0))]);
    // One GPU: busy as its reading is, from the aggregate alone.
    let one: Vec<Option<u16>> = readings.samples["i-one"]
        .iter()
        .map(|s| s.gpus_busy)
        .collect();
    assert_eq!(one, [Some(0), Some(1)]);
    assert_eq!(cloudwatch.num_calls(), 1);
}

#[tokio::test]
async fn a_gpu_query_short_of_complete_leaves_its_instance_unread() {
    for (status, gpu) in [
        (
            StatusCode::InternalError,
            (|_| Some(vec![])) as fn(u32) -> _,
        ),
        (StatusCode::PartialData, |_| {
            Some(vec![("2026-11-30T11:00:00Z", 1.0)])
        }),
        // GPU 2's result missing from the answer.
        (StatusCode::Complete, |index| (index != 2).then(Vec::new)),
    ] {
        let cloudwatch = answer(status.clone(), gpu);
        let readings = read(&cloudwatch).await;
        assert!(
            readings.unread.contains_key("i-quad") && !readings.samples.contains_key("i-quad"),
            "{status:?}: {readings:?}"
        );
        // The other instance's queries were complete: it is read.
        assert_eq!(readings.samples["i-one"].len(), 2, "{status:?}");
    }
}
