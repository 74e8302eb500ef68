//! GPU utilisation from CloudWatch: the CloudWatch agent's `nvidia_smi_utilization_gpu`,
//! published per GPU and aggregated on `InstanceId` (see `deploy/cloudwatch-agent.json`).
//! The `Maximum` statistic of the aggregate over a period is the busiest GPU's reading, so
//! one query per instance gives the maximum over its GPUs, and 500 instances fit in a call.

use super::{cloud_error, to_chrono, to_smithy, AwsProvider, GpuMetric};
use crate::cloud::CloudError;
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
    /// Runs `queries` (query `i<n>` reads `chunk[n]`) over every page of the window; the
    /// samples by query number, in the order CloudWatch gave them.
    pub(super) async fn read_metric_pages(
        &self,
        cloudwatch: &aws_sdk_cloudwatch::Client,
        queries: Vec<MetricDataQuery>,
        chunk: &[String],
        from: DateTime<Utc>,
        to: DateTime<Utc>,
    ) -> Result<BTreeMap<usize, Vec<Sample>>, CloudError> {
        // A long window can need several pages; each page carries more points of the same
        // queries.
        let mut points: BTreeMap<usize, Vec<Sample>> = BTreeMap::new();
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
                add_samples(result, chunk, &mut points);
            }
            match page.next_token() {
                Some(next) if !next.is_empty() => token = Some(next.to_string()),
                _ => break,
            }
        }
        Ok(points)
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

/// Adds the finite readings of one query's `result` to `points`, under its query number;
/// results that name no query of `chunk` are skipped.
fn add_samples(
    result: &MetricDataResult,
    chunk: &[String],
    points: &mut BTreeMap<usize, Vec<Sample>>,
) {
    let Some(n) = result
        .id()
        .and_then(|id| id.strip_prefix('i'))
        .and_then(|n| n.parse::<usize>().ok())
        .filter(|n| *n < chunk.len())
    else {
        return;
    };
    if let Some(StatusCode::InternalError | StatusCode::Forbidden) = result.status_code() {
        tracing::warn!(
            instance = %chunk[n],
            messages = ?result.messages(),
            "CloudWatch returned no GPU data"
        );
    }
    let samples = points.entry(n).or_default();
    samples.extend(
        result
            .timestamps()
            .iter()
            .zip(result.values())
            .filter(|(_, v)| v.is_finite())
            .filter_map(|(at, percent)| {
                Some(Sample {
                    at: to_chrono(at)?,
                    percent: *percent,
                })
            }),
    );
}
