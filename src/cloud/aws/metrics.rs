//! GPU utilisation from CloudWatch: the CloudWatch agent's `nvidia_smi_utilization_gpu`,
//! published per GPU and aggregated on `InstanceId` (see `deploy/cloudwatch-agent.json`).
//! The `Maximum` statistic of the aggregate over a period is the busiest GPU's reading, so
//! one query per instance gives the maximum over its GPUs, and 500 instances fit in a call.

use super::{cloud_error, to_chrono, to_smithy, AwsProvider};
use crate::cloud::CloudError;
use crate::fleet::Sample;
use aws_sdk_cloudwatch::types::{
    Dimension, Metric, MetricDataQuery, MetricStat, ScanBy, StatusCode,
};
use chrono::{DateTime, Utc};
use std::collections::{BTreeMap, HashMap};

/// Queries per GetMetricData call (the API's limit).
pub const QUERIES_PER_CALL: usize = 500;

impl AwsProvider {
    pub(super) async fn read_gpu_utilisation(
        &self,
        region: &str,
        instances: &[String],
        from: DateTime<Utc>,
        to: DateTime<Utc>,
    ) -> Result<HashMap<String, Vec<Sample>>, CloudError> {
        let (groups, unwatched) = self.group_by_scope(region, instances, "GetMetricData");
        if let Some(failed) = unwatched.failed.into_iter().next() {
            return Err(failed.error);
        }
        let metric = &self.settings.gpu_metric;
        let period = i32::try_from(metric.period.as_secs())
            .unwrap_or(300)
            .max(60);
        let mut readings: HashMap<String, Vec<Sample>> = HashMap::new();
        for (index, ids) in groups {
            let cloudwatch = &self.scopes[index].cloudwatch;
            for chunk in ids.chunks(QUERIES_PER_CALL) {
                let queries: Vec<MetricDataQuery> = chunk
                    .iter()
                    .enumerate()
                    .map(|(n, id)| {
                        MetricDataQuery::builder()
                            .id(format!("i{n}"))
                            .metric_stat(
                                MetricStat::builder()
                                    .metric(
                                        Metric::builder()
                                            .namespace(&metric.namespace)
                                            .metric_name(&metric.name)
                                            .dimensions(
                                                Dimension::builder()
                                                    .name("InstanceId")
                                                    .value(id)
                                                    .build(),
                                            )
                                            .build(),
                                    )
                                    .period(period)
                                    .stat("Maximum")
                                    .build(),
                            )
                            .return_data(true)
                            .build()
                    })
                    .collect();
                // A long window can need several pages; each page carries more points of the
                // same queries.
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
                        .await
                        .map_err(|e| cloud_error("GetMetricData", e))?;
                    for result in page.metric_data_results() {
                        let Some(n) = result
                            .id()
                            .and_then(|id| id.strip_prefix('i'))
                            .and_then(|n| n.parse::<usize>().ok())
                            .filter(|n| *n < chunk.len())
                        else {
                            continue;
                        };
                        if let Some(StatusCode::InternalError | StatusCode::Forbidden) =
                            result.status_code()
                        {
                            tracing::warn!(
                                instance = %chunk[n],
                                "CloudWatch returned no GPU data: {:?}",
                                result.messages()
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
                    match page.next_token() {
                        Some(next) if !next.is_empty() => token = Some(next.to_string()),
                        _ => break,
                    }
                }
                for (n, mut samples) in points {
                    // Pages and scan order are CloudWatch's business: the engine wants oldest
                    // first, one reading per time.
                    samples.sort_by_key(|s| s.at);
                    samples.dedup_by_key(|s| s.at);
                    readings.insert(chunk[n].clone(), samples);
                }
            }
        }
        Ok(readings)
    }
}
