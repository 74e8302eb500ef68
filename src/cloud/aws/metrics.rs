//! GPU utilisation from CloudWatch: the CloudWatch agent's `nvidia_smi_utilization_gpu`,
//! published per GPU and aggregated on `InstanceId` (see `deploy/cloudwatch-agent.json`).
//! The `Maximum` statistic of the aggregate over a period is the busiest GPU's reading, so
//! one query per instance gives the maximum over its GPUs, and 500 instances fit in a call.

use super::{cloud_error, to_chrono, to_smithy, AwsProvider, GpuMetric};
use crate::cloud::{CloudError, GpuReadings};
use crate::fleet::Sample;
use aws_sdk_cloudwatch::types::{
    Dimension, Metric, MetricDataQuery, MetricDataResult, MetricStat, ScanBy, StatusCode,
};
use chrono::{DateTime, Utc};
use futures_util::FutureExt as _;
use std::collections::BTreeMap;

/// Queries per GetMetricData call (the API's limit).
pub(super) const QUERIES_PER_CALL: usize = 500;

impl AwsProvider {
    /// Runs `queries` (query `i<n>` reads `chunk[n]`) over every page of the window, and adds
    /// what they found of each instance of `chunk` to `readings`: its samples (sorted, one per
    /// time) when its query ended `Complete`, otherwise the instance as unread.
    pub(super) async fn read_metric_pages(
        &self,
        cloudwatch: &aws_sdk_cloudwatch::Client,
        queries: Vec<MetricDataQuery>,
        chunk: &[String],
        (from, to): (DateTime<Utc>, DateTime<Utc>),
        readings: &mut GpuReadings,
    ) -> Result<(), CloudError> {
        // A long window can need several pages; each page carries more points of the same
        // queries, and each query's status on its last page is its status.
        let mut answers: BTreeMap<usize, Answered> = BTreeMap::new();
        let mut token: Option<String> = None;
        loop {
            self.count("GetMetricData");
            let page = cloudwatch
                .get_metric_data()
                .set_metric_data_queries(Some(queries.clone()))
                .start_time(to_smithy(from))
                .end_time(to_smithy(to))
                .scan_by(ScanBy::TimestampAscending)
                .set_next_token(token.take())
                .send()
                .boxed()
                .await
                .map_err(|e| cloud_error("GetMetricData", e))?;
            for result in page.metric_data_results() {
                add_result(result, chunk, &mut answers);
            }
            match page.next_token() {
                Some(next) if !next.is_empty() => token = Some(next.to_string()),
                _ => break,
            }
        }
        for (n, id) in chunk.iter().enumerate() {
            match answers.remove(&n) {
                Some(Answered {
                    mut samples,
                    status: Some(StatusCode::Complete),
                    ..
                }) => {
                    // Pages and scan order are CloudWatch's business: the engine wants oldest
                    // first, one reading per time.
                    samples.sort_by_key(|s| s.at);
                    samples.dedup_by_key(|s| s.at);
                    readings.samples.insert(id.clone(), samples);
                }
                Some(answered) => {
                    let why = answered.failure();
                    tracing::warn!(instance = %id, error = %why, "cannot read GPU utilisation");
                    readings.unread.insert(id.clone(), why);
                }
                None => {
                    let why =
                        "CloudWatch's GetMetricData answer has no result for this instance's query"
                            .to_string();
                    tracing::warn!(instance = %id, error = %why, "cannot read GPU utilisation");
                    readings.unread.insert(id.clone(), why);
                }
            }
        }
        Ok(())
    }
}

/// What the pages of a GetMetricData call said of one query.
#[derive(Debug, Default)]
struct Answered {
    /// Its finite readings, in the order CloudWatch gave them.
    samples: Vec<Sample>,
    /// Its status on the last page that had it.
    status: Option<StatusCode>,
    /// The messages CloudWatch gave with it.
    messages: Vec<String>,
}

impl Answered {
    /// Why a query that did not end `Complete` is a failed read.
    fn failure(&self) -> String {
        let status = self.status.as_ref().map_or("no status", |s| s.as_str());
        let said = if self.messages.is_empty() {
            String::new()
        } else {
            format!(": {}", self.messages.join("; "))
        };
        let partial = if self.status == Some(StatusCode::PartialData) {
            " (its last page still said more data was to come)"
        } else {
            ""
        };
        format!(
            "CloudWatch answered {status} for this instance's GetMetricData query{partial}{said}"
        )
    }
}

/// One `Maximum` query per instance of `chunk`, with id `i<n>` for `chunk[n]`.
pub(super) fn gpu_queries(
    metric: &GpuMetric,
    period: i32,
    chunk: &[String],
) -> Vec<MetricDataQuery> {
    chunk
        .iter()
        .enumerate()
        .map(|(n, id)| {
            let dimension = Dimension::builder().name("InstanceId").value(id).build();
            let gpu = Metric::builder()
                .namespace(&metric.namespace)
                .metric_name(&metric.name)
                .dimensions(dimension)
                .build();
            MetricDataQuery::builder()
                .id(format!("i{n}"))
                .metric_stat(
                    MetricStat::builder()
                        .metric(gpu)
                        .period(period)
                        .stat("Maximum")
                        .build(),
                )
                .return_data(true)
                .build()
        })
        .collect()
}

/// Adds one query's `result` to `answers`, under its query number; results that name no
/// query of `chunk` are skipped.
fn add_result(
    result: &MetricDataResult,
    chunk: &[String],
    answers: &mut BTreeMap<usize, Answered>,
) {
    let Some(n) = result
        .id()
        .and_then(|id| id.strip_prefix('i'))
        .and_then(|n| n.parse::<usize>().ok())
        .filter(|n| *n < chunk.len())
    else {
        return;
    };
    let answered = answers.entry(n).or_default();
    answered.status = result.status_code().cloned();
    answered.messages.extend(result.messages().iter().map(|m| {
        format!("{} {}", m.code().unwrap_or(""), m.value().unwrap_or(""))
            .trim()
            .to_string()
    }));
    answered.samples.extend(
        result
            .timestamps()
            .iter()
            .zip(result.values())
            .filter(|(_, v)| v.is_finite())
            .filter_map(|(at, percent)| Some(Sample::new(to_chrono(at)?, *percent))),
    );
}
