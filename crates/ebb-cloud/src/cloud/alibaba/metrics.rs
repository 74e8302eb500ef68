//! GPU utilisation from CloudMonitor: DescribeMetricList of `gpu_gpu_usedutilization` in the
//! `acs_ecs_dashboard` namespace (each GPU's utilisation in percent, dimensions `instanceId`
//! and `gpuId`), which the CloudMonitor agent reports from instances with an NVIDIA driver.
//! A reading is the maximum over an instance's GPUs in a period.

use super::client::Product;
use super::AlibabaProvider;
use crate::cloud::{CloudError, ErrorKind, GpuReadings};
use crate::fleet::Sample;
use chrono::{DateTime, Utc};
use serde_json::Value;
use std::collections::{BTreeMap, HashMap};

/// CloudMonitor's namespace of ECS metrics.
pub const NAMESPACE: &str = "acs_ecs_dashboard";

/// The metric of one GPU's utilisation.
pub const METRIC: &str = "gpu_gpu_usedutilization";

/// Seconds a reading covers.
const PERIOD: i64 = 300;

/// Instances per query: CloudMonitor takes at most 50 dimension sets.
const INSTANCES_PER_QUERY: usize = 50;

/// Datapoints per page.
const PAGE: &str = "1000";

impl AlibabaProvider {
    /// The GPU readings of `instances` in `region` from `from` to `to`, every page of every
    /// query: a page that fails fails the read (a partial answer is not an answer).
    pub(super) async fn read_gpus(
        &self,
        region: &str,
        instances: &[String],
        from: DateTime<Utc>,
        to: DateTime<Utc>,
    ) -> Result<GpuReadings, CloudError> {
        let mut by_instance: HashMap<String, BTreeMap<DateTime<Utc>, f64>> = HashMap::new();
        for chunk in instances.chunks(INSTANCES_PER_QUERY) {
            let dimensions: Vec<Value> = chunk
                .iter()
                .map(|id| serde_json::json!({ "instanceId": id }))
                .collect();
            // No `RegionId`: DescribeMetricList does not define one; the endpoint is the region's.
            let mut params = BTreeMap::from([
                ("Namespace".to_string(), NAMESPACE.to_string()),
                ("MetricName".to_string(), METRIC.to_string()),
                ("Period".to_string(), PERIOD.to_string()),
                ("StartTime".to_string(), from.timestamp_millis().to_string()),
                ("EndTime".to_string(), to.timestamp_millis().to_string()),
                (
                    "Dimensions".to_string(),
                    Value::from(dimensions).to_string(),
                ),
                ("Length".to_string(), PAGE.to_string()),
            ]);
            loop {
                let page = self
                    .call(Product::Cms, region, "DescribeMetricList", &params)
                    .await?;
                add_datapoints(&page, &mut by_instance)?;
                match page.get("NextToken").and_then(Value::as_str) {
                    Some(next) if !next.is_empty() => {
                        params.insert("NextToken".to_string(), next.to_string());
                    }
                    _ => break,
                }
            }
        }
        let samples = by_instance
            .into_iter()
            .map(|(id, points)| {
                let samples = points
                    .into_iter()
                    .map(|(at, percent)| Sample::new(at, percent))
                    .collect();
                (id, samples)
            })
            .collect();
        Ok(GpuReadings {
            samples,
            unread: HashMap::new(),
        })
    }
}

/// Adds a page's datapoints (a JSON text in `Datapoints`), the maximum over each instance's
/// GPUs at each time.
fn add_datapoints(
    page: &Value,
    by_instance: &mut HashMap<String, BTreeMap<DateTime<Utc>, f64>>,
) -> Result<(), CloudError> {
    let unreadable = |why: String| {
        CloudError::new(
            ErrorKind::Other,
            "DescribeMetricList",
            format!("CloudMonitor's datapoints cannot be read: {why}"),
        )
    };
    let points: Vec<Value> = match page.get("Datapoints") {
        Some(Value::String(text)) if !text.is_empty() => {
            serde_json::from_str(text).map_err(|e| unreadable(e.to_string()))?
        }
        Some(Value::Array(points)) => points.clone(),
        _ => Vec::new(),
    };
    for p in points {
        let (Some(id), Some(ms), Some(max)) = (
            p.get("instanceId").and_then(Value::as_str),
            p.get("timestamp").and_then(Value::as_i64),
            p.get("Maximum").and_then(Value::as_f64),
        ) else {
            return Err(unreadable(format!("a datapoint without its fields: {p}")));
        };
        let at = DateTime::from_timestamp_millis(ms)
            .ok_or_else(|| unreadable(format!("a time out of range: {ms}")))?;
        let slot = by_instance.entry(id.to_string()).or_default();
        let v = slot.entry(at).or_insert(max);
        *v = v.max(max);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_reading_is_the_maximum_over_the_gpus() {
        let page = serde_json::json!({
            "Code": "200",
            "Datapoints": r#"[{"timestamp":1764464700000,"instanceId":"i-1","gpuId":"0","Maximum":12.5},
                             {"timestamp":1764464700000,"instanceId":"i-1","gpuId":"1","Maximum":80.0},
                             {"timestamp":1764465000000,"instanceId":"i-1","gpuId":"0","Maximum":3.0}]"#
        });
        let mut by = HashMap::new();
        add_datapoints(&page, &mut by).unwrap();
        let values: Vec<f64> = by["i-1"].values().copied().collect();
        assert_eq!(values, [80.0, 3.0]);
        let bad = serde_json::json!({"Datapoints": "[{\"timestamp\": 1}]"});
        assert!(
            add_datapoints(&bad, &mut by).is_err(),
            "a partial point is a failed read"
        );
    }
}
