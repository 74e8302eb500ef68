//! Any CloudWatch metric of an instance, for the idle rules' `cloudwatch` activity signals:
//! the `Maximum` of each over the GPU metric's period, in GetMetricData calls of at most
//! [`QUERIES_PER_CALL`] queries (the metrics are billed one by one, however they are batched),
//! through the account that listed each instance.

use super::metrics::{maximum, Answered, QUERIES_PER_CALL};
use super::AwsProvider;
use crate::cloud::{CloudError, InstanceMetrics, MetricAnswer, MetricQuery};
use aws_sdk_cloudwatch::types::{Dimension, Metric, MetricDataQuery, StatusCode};
use chrono::{DateTime, Utc};
use std::collections::{BTreeMap, HashMap};

impl InstanceMetrics for AwsProvider {
    async fn metric_maxima(
        &self,
        region: &str,
        queries: &[MetricQuery],
        from: DateTime<Utc>,
        to: DateTime<Utc>,
    ) -> Result<Vec<MetricAnswer>, CloudError> {
        let ids: Vec<String> = queries.iter().map(|q| q.instance.clone()).collect();
        let (groups, unwatched) = self.group_by_scope(region, &ids, "GetMetricData");
        if let Some(failed) = unwatched.failed.into_iter().next() {
            return Err(failed.error);
        }
        let scope_of: HashMap<&str, usize> = groups
            .iter()
            .flat_map(|(scope, ids)| ids.iter().map(|id| (id.as_str(), *scope)))
            .collect();
        let mut by_scope: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
        for (k, query) in queries.iter().enumerate() {
            by_scope
                .entry(scope_of[query.instance.as_str()])
                .or_default()
                .push(k);
        }
        let period = i32::try_from(self.settings.gpu_metric.period.as_secs())
            .unwrap_or(300)
            .max(60);
        let mut answers: Vec<MetricAnswer> = vec![Err(String::new()); queries.len()];
        for (scope, positions) in by_scope {
            let cloudwatch = &self.scopes[scope].cloudwatch;
            for chunk in positions.chunks(QUERIES_PER_CALL) {
                let asked = chunk
                    .iter()
                    .enumerate()
                    .map(|(n, &k)| data_query(n, &queries[k], period))
                    .collect();
                let mut answered: BTreeMap<usize, Answered> = BTreeMap::new();
                self.metric_pages(cloudwatch, asked, (from, to), |result| {
                    let n = result
                        .id()
                        .and_then(|id| id.strip_prefix('q')?.parse().ok());
                    if let Some(n) = n.filter(|n: &usize| *n < chunk.len()) {
                        answered.entry(n).or_default().add(result);
                    }
                })
                .await?;
                for (n, &k) in chunk.iter().enumerate() {
                    answers[k] = answer(answered.remove(&n));
                }
            }
        }
        Ok(answers)
    }
}

/// Query `q<n>` of a call: the `Maximum` of `query`'s metric over `period` seconds, with the
/// instance's `InstanceId` beside its other dimensions.
fn data_query(n: usize, query: &MetricQuery, period: i32) -> MetricDataQuery {
    let dimension = |name: &str, value: &str| Dimension::builder().name(name).value(value).build();
    let dimensions = std::iter::once(dimension("InstanceId", &query.instance))
        .chain(query.dimensions.iter().map(|(k, v)| dimension(k, v)))
        .collect();
    let metric = Metric::builder()
        .namespace(&query.namespace)
        .metric_name(&query.metric)
        .set_dimensions(Some(dimensions))
        .build();
    maximum(format!("q{n}"), metric, period)
}

/// A query's answer: its points, oldest and one per time, when it ended `Complete`.
fn answer(answered: Option<Answered>) -> MetricAnswer {
    let Some(answered) = answered else {
        return Err("CloudWatch's GetMetricData answer has no result for this query".to_string());
    };
    if answered.status != Some(StatusCode::Complete) {
        return Err(answered.failure());
    }
    let mut points = answered.points;
    points.sort_by_key(|(at, _)| *at);
    points.dedup_by_key(|(at, _)| *at);
    Ok(points)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_query_names_its_instance_beside_its_own_dimensions() {
        let query = MetricQuery {
            instance: "i-0abc".into(),
            namespace: "CWAgent".into(),
            metric: "procstat_lookup_pid_count".into(),
            dimensions: [("pattern".to_string(), "sshd".to_string())].into(),
        };
        let asked = data_query(7, &query, 300);
        assert_eq!(asked.id(), Some("q7"));
        let stat = asked.metric_stat().unwrap();
        assert_eq!((stat.period(), stat.stat()), (Some(300), Some("Maximum")));
        let metric = stat.metric().unwrap();
        assert_eq!(metric.namespace(), Some("CWAgent"));
        assert_eq!(metric.metric_name(), Some("procstat_lookup_pid_count"));
        let dimensions: Vec<(&str, &str)> = metric
            .dimensions()
            .iter()
            .map(|d| (d.name().unwrap(), d.value().unwrap()))
            .collect();
        assert_eq!(dimensions, [("InstanceId", "i-0abc"), ("pattern", "sshd")]);
    }
}
