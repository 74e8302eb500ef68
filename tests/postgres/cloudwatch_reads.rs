//! Incremental CloudWatch reads through the real reconciler, the real AWS provider and
//! Postgres, with `aws-smithy-mocks` answering for EC2 and CloudWatch (moto has no CloudWatch
//! in the SDK's protocol). Every GetMetricData call is logged with its metrics (queries) and
//! window, over ticks a minute apart on explicit time: CloudWatch bills metrics requested, so
//! these counts are the bill (BENCHMARKS.md turns them into dollars).

use crate::common;

use aws_sdk_cloudwatch::operation::get_metric_data::{
    GetMetricDataError, GetMetricDataInput, GetMetricDataOutput,
};
use aws_sdk_cloudwatch::primitives::DateTime as SmithyTime;
use aws_sdk_cloudwatch::types::{MetricDataResult, StatusCode};
use aws_sdk_ec2::config::retry::RetryConfig;
use aws_sdk_ec2::config::{BehaviorVersion, Credentials, Region};
use aws_smithy_mocks::{
    create_mock_http_client, mock, MockResponse, MockResponseInterceptor, Rule, RuleMode,
};
use chrono::{DateTime, Duration, Utc};
use common::t;
use ebb::cloud::aws::{AwsProvider, Scope, Settings};
use ebb::cloud::SpotMoves;
use ebb::reconcile::{Options, PolicySource, Reconciler, TickReport};
use ebb::store::{Leadership, Store};
use sqlx::PgPool;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

const REGION: &str = "us-east-1";

/// Stop a box whose GPUs stayed below 5 % for 30 minutes.
const POLICY: &str = r#"
policies:
  - name: idle-boxes
    match: {tags: {team: research}}
    idle: {gpu_below: 5, for: 30m}
"#;

/// One GetMetricData call as CloudWatch saw it.
#[derive(Debug, Clone, PartialEq)]
struct Call {
    metrics: usize,
    start: DateTime<Utc>,
    end: DateTime<Utc>,
}

/// A mocked CloudWatch: for every query, a reading at each five-minute period from the call's
/// start to its end (the last one the open period's), of 2 % unless `values` says otherwise
/// for that period; every call logged; every call refused while `failing`; every query
/// answered with `query_status` and no readings while it is set (an HTTP 200 whose queries
/// failed one by one).
#[derive(Default)]
struct CloudWatch {
    calls: Mutex<Vec<Call>>,
    values: Mutex<BTreeMap<DateTime<Utc>, f64>>,
    silent: Mutex<Vec<DateTime<Utc>>>,
    failing: AtomicBool,
    query_status: Mutex<Option<StatusCode>>,
}

impl CloudWatch {
    /// The calls since the last time asked.
    fn take(&self) -> Vec<Call> {
        std::mem::take(&mut *self.calls.lock().unwrap())
    }

    fn answer(
        &self,
        input: &GetMetricDataInput,
    ) -> MockResponse<GetMetricDataOutput, GetMetricDataError> {
        let time = |t: Option<&SmithyTime>| {
            DateTime::from_timestamp(t.unwrap().secs(), 0).expect("a time CloudWatch takes")
        };
        let (start, end) = (time(input.start_time()), time(input.end_time()));
        self.calls.lock().unwrap().push(Call {
            metrics: input.metric_data_queries().len(),
            start,
            end,
        });
        if self.failing.load(Ordering::SeqCst) {
            return MockResponse::Error(GetMetricDataError::InvalidNextToken(
                aws_sdk_cloudwatch::types::error::InvalidNextToken::builder()
                    .message("refused by the test")
                    .build(),
            ));
        }
        let values = self.values.lock().unwrap();
        let silent = self.silent.lock().unwrap();
        let mut output = GetMetricDataOutput::builder();
        if let Some(status) = self.query_status.lock().unwrap().clone() {
            for query in input.metric_data_queries() {
                let result = MetricDataResult::builder()
                    .id(query.id().unwrap())
                    .status_code(status.clone())
                    .build();
                output = output.metric_data_results(result);
            }
            return MockResponse::Output(output.build());
        }
        for query in input.metric_data_queries() {
            let mut result = MetricDataResult::builder()
                .id(query.id().unwrap())
                .status_code(StatusCode::Complete);
            let mut period = start;
            while period <= end {
                if !silent.contains(&period) {
                    let value = values.get(&period).copied().unwrap_or(2.0);
                    result = result
                        .timestamps(SmithyTime::from_secs(period.timestamp()))
                        .values(value);
                }
                period += Duration::minutes(5);
            }
            output = output.metric_data_results(result.build());
        }
        MockResponse::Output(output.build())
    }
}

/// DescribeInstances listing `n` running instances tagged `team: research`.
fn listing(n: usize) -> Rule {
    use aws_sdk_ec2::operation::describe_instances::DescribeInstancesOutput;
    use aws_sdk_ec2::types::{
        Instance, InstanceState, InstanceStateName, InstanceType, Reservation, Tag,
    };
    mock!(aws_sdk_ec2::Client::describe_instances).then_output(move || {
        let mut reservation = Reservation::builder();
        for k in 0..n {
            reservation = reservation.instances(
                Instance::builder()
                    .instance_id(format!("i-{k:05}"))
                    .instance_type(InstanceType::G5Xlarge)
                    .state(
                        InstanceState::builder()
                            .name(InstanceStateName::Running)
                            .build(),
                    )
                    .tags(Tag::builder().key("team").value("research").build())
                    .build(),
            );
        }
        DescribeInstancesOutput::builder()
            .reservations(reservation.build())
            .build()
    })
}

fn interceptor(rules: &[&Rule]) -> MockResponseInterceptor {
    rules.iter().fold(
        MockResponseInterceptor::new().rule_mode(RuleMode::MatchAny),
        |i, r| i.with_rule(r),
    )
}

/// The AWS provider over `n` listed instances, CloudWatch answered by `cloudwatch`.
fn provider(n: usize, cloudwatch: &Arc<CloudWatch>) -> AwsProvider {
    let credentials = Credentials::new("AKIDEXAMPLE", "secret", None, None, "test");
    let retry = RetryConfig::standard()
        .with_max_attempts(3)
        .with_initial_backoff(std::time::Duration::from_millis(1))
        .with_max_backoff(std::time::Duration::from_millis(5));
    // The listing also reads the instances' volumes and Elastic IPs: none here.
    let volumes = mock!(aws_sdk_ec2::Client::describe_volumes).then_output(|| {
        aws_sdk_ec2::operation::describe_volumes::DescribeVolumesOutput::builder().build()
    });
    let addresses = mock!(aws_sdk_ec2::Client::describe_addresses).then_output(|| {
        aws_sdk_ec2::operation::describe_addresses::DescribeAddressesOutput::builder().build()
    });
    let types = mock!(aws_sdk_ec2::Client::describe_instance_types).then_output(|| {
        aws_sdk_ec2::operation::describe_instance_types::DescribeInstanceTypesOutput::builder()
            .build()
    });
    let ec2 = aws_sdk_ec2::Client::from_conf(
        aws_sdk_ec2::Config::builder()
            .behavior_version(BehaviorVersion::latest())
            .region(Region::new(REGION))
            .credentials_provider(credentials.clone())
            .http_client(create_mock_http_client())
            .interceptor(interceptor(&[&listing(n), &types, &volumes, &addresses]))
            .retry_config(retry.clone())
            .build(),
    );
    let answers = cloudwatch.clone();
    let metric_data = mock!(aws_sdk_cloudwatch::Client::get_metric_data)
        .then_compute_response(move |input| answers.answer(input));
    let cloudwatch = aws_sdk_cloudwatch::Client::from_conf(
        aws_sdk_cloudwatch::Config::builder()
            .behavior_version(aws_sdk_cloudwatch::config::BehaviorVersion::latest())
            .region(aws_sdk_cloudwatch::config::Region::new(REGION))
            .credentials_provider(credentials)
            .http_client(create_mock_http_client())
            .interceptor(interceptor(&[&metric_data]))
            .retry_config(retry)
            .build(),
    );
    AwsProvider::from_scopes(
        Settings {
            regions: vec![REGION.to_string()],
            managed_tag: None,
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

/// A leader's reconciler over `n` instances, deciding without acting (the decisions say
/// what it would do). A second one on the same store is a restarted or new leader: what it
/// remembers is in the reconciler, so both lead through the same session.
struct Plane {
    reconciler: Reconciler<AwsProvider>,
    leader: tokio::sync::Mutex<Leadership>,
    _dir: tempfile::TempDir,
}

impl Plane {
    async fn new(
        store: &Store,
        leader: Leadership,
        n: usize,
        cloudwatch: &Arc<CloudWatch>,
    ) -> Plane {
        Plane::with_policy(store, leader, n, cloudwatch, POLICY).await
    }

    /// The same, under `policy` instead of [`POLICY`].
    async fn with_policy(
        store: &Store,
        leader: Leadership,
        n: usize,
        cloudwatch: &Arc<CloudWatch>,
        policy: &str,
    ) -> Plane {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("policy.yaml"), policy).unwrap();
        let policies = Arc::new(PolicySource::new(vec![dir.path().to_path_buf()]));
        let options = Options {
            dry_run: true,
            ..Options::default()
        };
        let reconciler = Reconciler::new(provider(n, cloudwatch), store.clone(), policies, options);
        Plane {
            reconciler,
            leader: tokio::sync::Mutex::new(leader),
            _dir: dir,
        }
    }

    async fn tick(&self, at: &str) -> TickReport {
        let mut leader = self.leader.lock().await;
        self.reconciler.tick(t(at), &mut leader).await.unwrap()
    }

    /// Its session, for the next leader.
    fn hand_over(self) -> Leadership {
        self.leader.into_inner()
    }
}

async fn store(pool: PgPool) -> (Store, Leadership) {
    let store = Store::from_pool(pool);
    store.migrate().await.unwrap();
    let leader = store.try_lead("test").await.unwrap().unwrap();
    (store, leader)
}

/// How many instances got a decision with `code`.
fn decided(report: &TickReport, code: &str) -> usize {
    report
        .decided
        .iter()
        .filter(|((_, c), _)| *c == code)
        .map(|(_, n)| n)
        .sum()
}

fn metrics(calls: &[Call]) -> usize {
    calls.iter().map(|c| c.metrics).sum()
}

#[sqlx::test(migrations = false)]
async fn each_instance_is_asked_once_a_period_from_what_postgres_holds(pool: PgPool) {
    let (store, leader) = store(pool).await;
    let cloudwatch = Arc::new(CloudWatch::default());
    let plane = Plane::new(&store, leader, 1_200, &cloudwatch).await;

    // The first tick has nothing kept: it reads the window (30 minutes, and 10 more so that
    // its start is covered) from its five-minute period on.
    let first = plane.tick("2026-11-30T11:00:30Z").await;
    let calls = cloudwatch.take();
    // Two metrics an instance (the busiest GPU and the memory; their GPUs are not listed, so
    // none one by one): ⌈2400/500⌉ calls.
    assert_eq!(calls.len(), 5, "⌈2400/500⌉ calls: {calls:?}");
    assert_eq!(metrics(&calls), 2_400);
    assert!(calls.iter().all(|c| c.start == t("2026-11-30T10:20:00Z")));
    assert!(calls.iter().all(|c| c.end == t("2026-11-30T11:00:30Z")));
    assert_eq!(decided(&first, "idle"), 1_200, "{}", first.headline());

    // Ticks a minute apart in the same period ask for nothing, and still see the whole
    // window, from Postgres: every instance is still idle, not short of data.
    for at in ["11:01:30", "11:02:30", "11:03:30", "11:04:59"] {
        let report = plane.tick(&format!("2026-11-30T{at}Z")).await;
        assert_eq!(cloudwatch.take(), [], "at {at}");
        assert_eq!(
            decided(&report, "idle"),
            1_200,
            "at {at}: {}",
            report.headline()
        );
    }

    // The next period: two metrics per instance again, from the newest period kept (11:00,
    // asked again: it was still open when read), in the same five calls.
    let next = plane.tick("2026-11-30T11:05:30Z").await;
    let calls = cloudwatch.take();
    assert_eq!(calls.len(), 5);
    assert_eq!(metrics(&calls), 2_400);
    assert!(calls.iter().all(|c| c.start == t("2026-11-30T11:00:00Z")));
    assert_eq!(decided(&next, "idle"), 1_200);
    assert_eq!(plane.reconciler.provider().calls()["GetMetricData"], 10);

    // A new leader (a restart, a failover) holds nothing in memory: it asks each instance
    // once, from the newest period Postgres holds, then nothing more in that period.
    let successor = Plane::new(&store, plane.hand_over(), 1_200, &cloudwatch).await;
    let report = successor.tick("2026-11-30T11:06:30Z").await;
    let calls = cloudwatch.take();
    assert_eq!(metrics(&calls), 2_400);
    assert!(calls.iter().all(|c| c.start == t("2026-11-30T11:05:00Z")));
    assert_eq!(decided(&report, "idle"), 1_200);
    successor.tick("2026-11-30T11:07:30Z").await;
    assert_eq!(cloudwatch.take(), []);
}

#[sqlx::test(migrations = false)]
async fn a_failed_read_leaves_the_instances_unread_and_is_asked_again(pool: PgPool) {
    let (store, leader) = store(pool).await;
    let cloudwatch = Arc::new(CloudWatch::default());
    let plane = Plane::new(&store, leader, 3, &cloudwatch).await;
    let first = plane.tick("2026-11-30T11:00:30Z").await;
    assert_eq!(decided(&first, "idle"), 3);
    cloudwatch.take();

    // CloudWatch refuses: Postgres still holds an idle window of each, but the newest
    // period could not be read, so idle is unknown: no stop.
    cloudwatch.failing.store(true, Ordering::SeqCst);
    let failed = plane.tick("2026-11-30T11:05:30Z").await;
    assert_eq!(metrics(&cloudwatch.take()), 6);
    assert_eq!(
        decided(&failed, "metrics_unreadable"),
        3,
        "{}",
        failed.headline()
    );
    assert_eq!(decided(&failed, "idle"), 0);
    assert!(
        failed.decided.keys().all(|(action, _)| *action == "none"),
        "{:?}",
        failed.decided
    );
    assert_eq!(failed.gpu_read_failures.len(), 1);
    assert_eq!(failed.gpu_read_failures[0].instances, 3);

    // Not read in this period, so the next tick of the same period asks again (and does not
    // take "nothing asked" for "nothing new").
    cloudwatch.failing.store(false, Ordering::SeqCst);
    let again = plane.tick("2026-11-30T11:06:30Z").await;
    let calls = cloudwatch.take();
    assert_eq!(metrics(&calls), 6);
    assert!(calls.iter().all(|c| c.start == t("2026-11-30T11:00:00Z")));
    assert_eq!(decided(&again, "idle"), 3);
    plane.tick("2026-11-30T11:07:30Z").await;
    assert_eq!(cloudwatch.take(), []);
}

#[sqlx::test(migrations = false)]
async fn the_last_period_is_read_again_for_its_late_datapoints(pool: PgPool) {
    let (store, leader) = store(pool).await;
    let cloudwatch = Arc::new(CloudWatch::default());
    let plane = Plane::new(&store, leader, 2, &cloudwatch).await;
    plane.tick("2026-11-30T11:00:30Z").await;
    cloudwatch.take();

    // The 11:00 period was open when first read; its busy minutes arrived after: asked again,
    // the late datapoint replaces what was kept, and the instances are busy, not idle.
    cloudwatch
        .values
        .lock()
        .unwrap()
        .insert(t("2026-11-30T11:00:00Z"), 90.0);
    let late = plane.tick("2026-11-30T11:05:30Z").await;
    assert_eq!(cloudwatch.take().len(), 1);
    assert_eq!(decided(&late, "not_idle"), 2, "{}", late.headline());
    // And Postgres keeps the corrected reading: a tick of the same period, reading nothing,
    // sees it too.
    let kept = plane.tick("2026-11-30T11:06:30Z").await;
    assert_eq!(cloudwatch.take(), []);
    assert_eq!(decided(&kept, "not_idle"), 2);
}

#[sqlx::test(migrations = false)]
async fn a_gap_in_the_readings_is_missing_coverage_until_late_datapoints_fill_it(pool: PgPool) {
    let (store, leader) = store(pool).await;
    let cloudwatch = Arc::new(CloudWatch::default());
    let plane = Plane::new(&store, leader, 2, &cloudwatch).await;
    plane.tick("2026-11-30T11:00:30Z").await;
    // The agent sends nothing for 11:05 and 11:10: each period asks again from 11:00, the
    // newest kept, and the newest reading grows old, then a gap is left behind.
    *cloudwatch.silent.lock().unwrap() = ["11:05", "11:10"]
        .iter()
        .map(|hm| t(&format!("2026-11-30T{hm}:00Z")))
        .collect();
    plane.tick("2026-11-30T11:05:30Z").await;
    let stale = plane.tick("2026-11-30T11:10:31Z").await;
    let gap = plane.tick("2026-11-30T11:15:30Z").await;
    let calls = cloudwatch.take();
    assert_eq!(calls.len(), 4);
    assert!(calls[1..]
        .iter()
        .all(|c| c.start == t("2026-11-30T11:00:00Z")));
    for report in [&stale, &gap] {
        assert_eq!(decided(report, "idle"), 0, "{}", report.headline());
        assert_eq!(
            decided(report, "metrics_missing"),
            2,
            "{}",
            report.headline()
        );
    }

    // The agent's buffered datapoints reach CloudWatch late. With a gap in what is kept, the
    // next period asks for the whole window again (still two metrics an instance), the gap is
    // filled, and the instances are idle again.
    cloudwatch.silent.lock().unwrap().clear();
    let filled = plane.tick("2026-11-30T11:20:30Z").await;
    let calls = cloudwatch.take();
    assert_eq!(metrics(&calls), 4);
    assert!(
        calls.iter().all(|c| c.start == t("2026-11-30T10:40:00Z")),
        "{calls:?}"
    );
    assert_eq!(decided(&filled, "idle"), 2, "{}", filled.headline());
}

/// What the AWS provider's calls and a tick over it weigh as futures, whoever holds them: the
/// tick's phases are boxed, and so is every SDK request under a call (tens of kilobytes each
/// in a debug build, where held by value they overflowed 2 MiB thread stacks).
#[sqlx::test(migrations = false)]
async fn a_tick_and_the_aws_calls_are_small_futures(pool: PgPool) {
    use ebb::cloud::{Provider, StopKind};
    use std::mem::size_of_val;
    let (store, leader) = store(pool).await;
    let cloudwatch = Arc::new(CloudWatch::default());
    let plane = Plane::new(&store, leader, 1, &cloudwatch).await;
    let aws = plane.reconciler.provider();
    let (ids, at) = (vec!["i-0000".to_string()], t("2026-11-30T11:00:30Z"));
    let tags = BTreeMap::new();
    let sizes = [
        ("instances", size_of_val(&aws.instances())),
        ("reread", size_of_val(&aws.reread(REGION, &ids))),
        (
            "gpu_utilisation",
            size_of_val(&aws.gpu_utilisation(REGION, &ids, at, at)),
        ),
        ("prices", size_of_val(&aws.prices(REGION, &ids, at))),
        ("stop", size_of_val(&aws.stop(REGION, &ids, StopKind::Stop))),
        ("start", size_of_val(&aws.start(REGION, &ids))),
        ("tag", size_of_val(&aws.tag(REGION, &ids, &tags))),
        ("describe", size_of_val(&aws.describe(REGION, &ids))),
        (
            "create_image",
            size_of_val(&aws.create_image(REGION, "i-0000", "n", &tags)),
        ),
        ("image", size_of_val(&aws.image(REGION, "ami-0000"))),
        ("terminate", size_of_val(&aws.terminate(REGION, &ids))),
    ];
    let mut leader = plane.leader.lock().await;
    let tick = size_of_val(&plane.reconciler.tick(at, &mut leader));
    eprintln!("future sizes in bytes: tick {tick}, {sizes:?}");
    assert!(tick <= 512, "a tick is a future of {tick} bytes");
    for (call, size) in sizes {
        assert!(size <= 2048, "{call} is a future of {size} bytes");
    }
}

/// Work hours that close at 11:05 UTC every day; a busy GPU defers the stop.
const CLOSE_AT_11_05: &str = r#"
policies:
  - name: dev-hours
    match: {tags: {team: research}}
    work_hours:
      timezone: UTC
      periods:
        - {days: mon-sun, start: "08:00", stop: "11:05"}
      outside_hours: stop
      busy_defers_stop: true
"#;

/// An idle rule that takes a window without data for idle.
const IDLE_WHEN_MISSING: &str = r#"
policies:
  - name: idle-boxes
    match: {tags: {team: research}}
    idle: {gpu_below: 5, for: 30m, missing_metrics: idle}
"#;

/// How many instances a decision would stop, hibernate or otherwise change.
fn acted(report: &TickReport) -> usize {
    report
        .decided
        .iter()
        .filter(|((action, _), _)| *action != "none")
        .map(|(_, n)| n)
        .sum()
}

/// Busy boxes (90 %) read at 11:00:30, inside hours; after the 11:05 close CloudWatch answers
/// HTTP 200 but marks each box's query `status`, with no readings. The newest kept reading
/// (11:00, busy) is the one that period's read starts from: it must not be dropped, and the
/// boxes must not be taken for "read, not busy". Nothing is stopped; once CloudWatch answers
/// again, in the same period, they are asked again and the stop is deferred for busy.
async fn a_failed_query_at_the_close_stops_nothing(pool: PgPool, status: StatusCode) {
    let (store, leader) = store(pool).await;
    let cloudwatch = Arc::new(CloudWatch::default());
    *cloudwatch.values.lock().unwrap() = (0..12)
        .map(|k| (t("2026-11-30T10:10:00Z") + Duration::minutes(5 * k), 90.0))
        .collect();
    let plane = Plane::with_policy(&store, leader, 2, &cloudwatch, CLOSE_AT_11_05).await;
    let open = plane.tick("2026-11-30T11:00:30Z").await;
    assert_eq!(acted(&open), 0, "{}", open.headline());
    cloudwatch.take();

    *cloudwatch.query_status.lock().unwrap() = Some(status.clone());
    let closed = plane.tick("2026-11-30T11:05:30Z").await;
    assert_eq!(metrics(&cloudwatch.take()), 4);
    assert_eq!(acted(&closed), 0, "{status:?}: {:?}", closed.decided);
    assert_eq!(
        decided(&closed, "metrics_unreadable"),
        2,
        "{:?}",
        closed.decided
    );
    assert_eq!(closed.gpu_read_failures.len(), 1);
    assert_eq!(closed.gpu_read_failures[0].instances, 2);
    assert!(
        closed.gpu_read_failures[0].error.contains(status.as_str()),
        "{}",
        closed.gpu_read_failures[0].error
    );

    // Not read this period: the next tick asks again, from the kept 11:00 reading.
    *cloudwatch.query_status.lock().unwrap() = None;
    let again = plane.tick("2026-11-30T11:06:30Z").await;
    let calls = cloudwatch.take();
    assert_eq!(metrics(&calls), 4);
    assert!(calls.iter().all(|c| c.start == t("2026-11-30T11:00:00Z")));
    assert_eq!(decided(&again, "busy_deferred"), 2, "{:?}", again.decided);
    assert_eq!(acted(&again), 0);
}

#[sqlx::test(migrations = false)]
async fn an_internal_error_query_at_the_close_stops_nothing(pool: PgPool) {
    a_failed_query_at_the_close_stops_nothing(pool, StatusCode::InternalError).await;
}

#[sqlx::test(migrations = false)]
async fn a_forbidden_query_at_the_close_stops_nothing(pool: PgPool) {
    a_failed_query_at_the_close_stops_nothing(pool, StatusCode::Forbidden).await;
}

/// Busy boxes whose first read comes back with each query marked `status`: under
/// `missing_metrics: idle` a read that found nothing would stop them; a failed read is not
/// such a read, so nothing is stopped, and the next tick asks again and sees them busy.
async fn a_failed_query_is_not_missing_metrics(pool: PgPool, status: StatusCode) {
    let (store, leader) = store(pool).await;
    let cloudwatch = Arc::new(CloudWatch::default());
    *cloudwatch.values.lock().unwrap() = (0..12)
        .map(|k| (t("2026-11-30T10:20:00Z") + Duration::minutes(5 * k), 90.0))
        .collect();
    *cloudwatch.query_status.lock().unwrap() = Some(status.clone());
    let plane = Plane::with_policy(&store, leader, 2, &cloudwatch, IDLE_WHEN_MISSING).await;
    let failed = plane.tick("2026-11-30T11:00:30Z").await;
    assert_eq!(metrics(&cloudwatch.take()), 4);
    assert_eq!(acted(&failed), 0, "{status:?}: {:?}", failed.decided);
    assert_eq!(decided(&failed, "idle_metrics_missing"), 0);
    assert_eq!(
        decided(&failed, "metrics_unreadable"),
        2,
        "{:?}",
        failed.decided
    );

    *cloudwatch.query_status.lock().unwrap() = None;
    let again = plane.tick("2026-11-30T11:01:30Z").await;
    assert_eq!(metrics(&cloudwatch.take()), 4);
    assert_eq!(decided(&again, "not_idle"), 2, "{:?}", again.decided);
}

#[sqlx::test(migrations = false)]
async fn an_internal_error_query_is_not_missing_metrics(pool: PgPool) {
    a_failed_query_is_not_missing_metrics(pool, StatusCode::InternalError).await;
}

#[sqlx::test(migrations = false)]
async fn a_forbidden_query_is_not_missing_metrics(pool: PgPool) {
    a_failed_query_is_not_missing_metrics(pool, StatusCode::Forbidden).await;
}
