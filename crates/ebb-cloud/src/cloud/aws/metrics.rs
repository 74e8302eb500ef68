//! GPU readings from CloudWatch: the CloudWatch agent's `nvidia_smi_utilization_gpu` and
//! `nvidia_smi_memory_used`, published per GPU and aggregated on `InstanceId` and on
//! `InstanceId` and `index` (see `deploy/cloudwatch-agent.json`).
//!
//! The `Maximum` statistic of the `InstanceId` aggregate over a period is the busiest GPU's
//! reading (and the memory of the GPU that held the most), so two queries per instance give
//! both. How many GPUs were busy takes each GPU's own series (`InstanceId` and `index`): one
//! query per GPU of an instance whose type has several (known from the listing); a box of one
//! GPU is busy when its reading is, and an instance whose GPUs are unknown has no count.

use super::{cloud_error, to_chrono, to_smithy, AwsProvider, GpuMetric};
use crate::cloud::{CloudError, GpuReadings};
use crate::fleet::{Sample, GPU_BUSY_PERCENT};
use aws_sdk_cloudwatch::types::{
    Dimension, Metric, MetricDataQuery, MetricDataResult, MetricStat, ScanBy, StatusCode,
};
use chrono::{DateTime, Utc};
use futures_util::FutureExt as _;
use std::collections::{BTreeMap, HashMap};

/// Queries per GetMetricData call (the API's limit).
pub(super) const QUERIES_PER_CALL: usize = 500;

/// The agent's metric of the GPU memory used, MiB.
const MEMORY_METRIC: &str = "nvidia_smi_memory_used";

/// An instance whose GPUs are read, and how many GPUs its type has when known.
#[derive(Debug, Clone)]
pub(super) struct Target {
    id: String,
    gpus: Option<u32>,
}

impl Target {
    /// The queries it takes: the busiest GPU, the memory, and each GPU when it has several.
    fn queries(&self) -> usize {
        2 + self.per_gpu() as usize
    }

    /// How many GPUs are read one by one.
    fn per_gpu(&self) -> u32 {
        self.gpus.filter(|&n| n > 1).unwrap_or(0)
    }
}

/// The targets in calls of at most [`QUERIES_PER_CALL`] queries, in order.
pub(super) fn calls(targets: &[Target]) -> Vec<&[Target]> {
    let mut calls = Vec::new();
    let (mut start, mut queries) = (0, 0);
    for (k, target) in targets.iter().enumerate() {
        let more = target.queries().min(QUERIES_PER_CALL);
        if queries + more > QUERIES_PER_CALL {
            calls.push(&targets[start..k]);
            (start, queries) = (k, 0);
        }
        queries += more;
    }
    if start < targets.len() {
        calls.push(&targets[start..]);
    }
    calls
}

/// What a query reads of its instance.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Signal {
    /// The busiest GPU's utilisation (`i<n>`).
    Busiest,
    /// The memory of the GPU that held the most (`m<n>`).
    Memory,
    /// The utilisation of GPU `index` (`g<n>_<index>`).
    Gpu(u32),
}

impl Signal {
    /// The query id for instance `n` of a call.
    fn id(self, n: usize) -> String {
        match self {
            Signal::Busiest => format!("i{n}"),
            Signal::Memory => format!("m{n}"),
            Signal::Gpu(index) => format!("g{n}_{index}"),
        }
    }

    /// The instance number and signal a query `id` names.
    fn of(id: &str) -> Option<(usize, Signal)> {
        let (kind, rest) = id.split_at_checked(1)?;
        match kind {
            "i" => Some((rest.parse().ok()?, Signal::Busiest)),
            "m" => Some((rest.parse().ok()?, Signal::Memory)),
            "g" => {
                let (n, index) = rest.split_once('_')?;
                Some((n.parse().ok()?, Signal::Gpu(index.parse().ok()?)))
            }
            _ => None,
        }
    }
}

impl AwsProvider {
    /// `ids` with the GPU counts their listing found.
    pub(super) fn gpu_targets(&self, ids: Vec<String>) -> Vec<Target> {
        let known = self.known.read().expect("instance map poisoned");
        ids.into_iter()
            .map(|id| {
                let gpus = known.get(&id).and_then(|k| k.gpus);
                Target { id, gpus }
            })
            .collect()
    }

    /// Runs `queries` over every page of the window `(from, to)`, giving each result to
    /// `each`. A long window can need several pages; each page carries more points of the same
    /// queries, and each query's status on its last page is its status.
    pub(super) async fn metric_pages(
        &self,
        cloudwatch: &aws_sdk_cloudwatch::Client,
        queries: Vec<MetricDataQuery>,
        (from, to): (DateTime<Utc>, DateTime<Utc>),
        mut each: impl FnMut(&MetricDataResult),
    ) -> Result<(), CloudError> {
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
            page.metric_data_results().iter().for_each(&mut each);
            match page.next_token() {
                Some(next) if !next.is_empty() => token = Some(next.to_string()),
                _ => return Ok(()),
            }
        }
    }

    /// Runs `queries` (those of [`gpu_queries`] for `chunk`) over every page of the window,
    /// and adds what they found of each instance of `chunk` to `readings`: its samples
    /// (sorted, one per time) when each of its queries ended `Complete`, otherwise the
    /// instance as unread.
    pub(super) async fn read_metric_pages(
        &self,
        cloudwatch: &aws_sdk_cloudwatch::Client,
        queries: Vec<MetricDataQuery>,
        chunk: &[Target],
        (from, to): (DateTime<Utc>, DateTime<Utc>),
        readings: &mut GpuReadings,
    ) -> Result<(), CloudError> {
        let mut answers: BTreeMap<(usize, Signal), Answered> = BTreeMap::new();
        self.metric_pages(cloudwatch, queries, (from, to), |result| {
            add_result(result, chunk.len(), &mut answers)
        })
        .await?;
        for (n, target) in chunk.iter().enumerate() {
            let signals = std::iter::once(Signal::Busiest)
                .chain(std::iter::once(Signal::Memory))
                .chain((0..target.per_gpu()).map(Signal::Gpu));
            let mut mine = BTreeMap::new();
            let mut failure = None;
            for signal in signals {
                match answers.remove(&(n, signal)) {
                    Some(answered) if answered.status == Some(StatusCode::Complete) => {
                        mine.insert(signal, answered.points);
                    }
                    Some(answered) => {
                        failure.get_or_insert_with(|| answered.failure());
                    }
                    None => {
                        failure.get_or_insert_with(|| {
                            "CloudWatch's GetMetricData answer has no result for one of this instance's queries".to_string()
                        });
                    }
                }
            }
            match failure {
                None => {
                    readings
                        .samples
                        .insert(target.id.clone(), samples(target, mine));
                }
                Some(why) => {
                    tracing::warn!(instance = %target.id, error = %why, "cannot read GPU utilisation");
                    readings.unread.insert(target.id.clone(), why);
                }
            }
        }
        Ok(())
    }
}

/// The samples of `target` from the points of each of its queries: one per time of the
/// busiest GPU's series, oldest first, with the memory and the count of busy GPUs of the same
/// time where their series have it.
fn samples(target: &Target, mut points: BTreeMap<Signal, Points>) -> Vec<Sample> {
    let mut busiest = points.remove(&Signal::Busiest).unwrap_or_default();
    // Pages and scan order are CloudWatch's business: the engine wants oldest first, one
    // reading per time.
    busiest.sort_by_key(|(at, _)| *at);
    busiest.dedup_by_key(|(at, _)| *at);
    let by_time = |points: Option<Points>| -> HashMap<DateTime<Utc>, f64> {
        points.unwrap_or_default().into_iter().collect()
    };
    let memory = by_time(points.remove(&Signal::Memory));
    let gpus: Vec<HashMap<DateTime<Utc>, f64>> = (0..target.per_gpu())
        .map(|index| by_time(points.remove(&Signal::Gpu(index))))
        .collect();
    busiest
        .into_iter()
        .map(|(at, percent)| {
            let gpus_busy = match target.gpus {
                Some(1) => Some(u16::from(percent >= GPU_BUSY_PERCENT)),
                Some(_) => {
                    let read: Vec<f64> = gpus.iter().filter_map(|g| g.get(&at).copied()).collect();
                    let busy = read.iter().filter(|&&p| p >= GPU_BUSY_PERCENT).count();
                    (!read.is_empty()).then(|| u16::try_from(busy).unwrap_or(u16::MAX))
                }
                None => None,
            };
            Sample {
                at,
                percent,
                memory_mib: memory
                    .get(&at)
                    .filter(|m| **m >= 0.0)
                    .map(|m| m.round().min(f64::from(u32::MAX)) as u32),
                gpus_busy,
            }
        })
        .collect()
}

/// The finite points of one query, in the order CloudWatch gave them.
pub(super) type Points = Vec<(DateTime<Utc>, f64)>;

/// What the pages of a GetMetricData call said of one query.
#[derive(Debug, Default)]
pub(super) struct Answered {
    /// Its finite points.
    pub(super) points: Points,
    /// Its status on the last page that had it.
    pub(super) status: Option<StatusCode>,
    /// The messages CloudWatch gave with it.
    messages: Vec<String>,
}

impl Answered {
    /// Adds what one page's `result` of this query says.
    pub(super) fn add(&mut self, result: &MetricDataResult) {
        self.status = result.status_code().cloned();
        self.messages.extend(result.messages().iter().map(|m| {
            format!("{} {}", m.code().unwrap_or(""), m.value().unwrap_or(""))
                .trim()
                .to_string()
        }));
        self.points.extend(
            result
                .timestamps()
                .iter()
                .zip(result.values())
                .filter(|(_, v)| v.is_finite())
                .filter_map(|(at, value)| Some((to_chrono(at)?, *value))),
        );
    }

    /// Why a query that did not end `Complete` is a failed read.
    pub(super) fn failure(&self) -> String {
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

/// The queries of `chunk`, each a `Maximum` over `period`: for instance `n`, `i<n>` the
/// busiest GPU, `m<n>` the memory, and `g<n>_<index>` each GPU of a box with several.
pub(super) fn gpu_queries(
    metric: &GpuMetric,
    period: i32,
    chunk: &[Target],
) -> Vec<MetricDataQuery> {
    let query = |id: String, name: &str, dimensions: Vec<Dimension>| {
        let metric = Metric::builder()
            .namespace(&metric.namespace)
            .metric_name(name)
            .set_dimensions(Some(dimensions))
            .build();
        maximum(id, metric, period)
    };
    let mut queries = Vec::new();
    for (n, target) in chunk.iter().enumerate() {
        let instance = Dimension::builder()
            .name("InstanceId")
            .value(&target.id)
            .build();
        queries.push(query(
            Signal::Busiest.id(n),
            &metric.name,
            vec![instance.clone()],
        ));
        queries.push(query(
            Signal::Memory.id(n),
            MEMORY_METRIC,
            vec![instance.clone()],
        ));
        for index in 0..target.per_gpu() {
            let gpu = Dimension::builder()
                .name("index")
                .value(index.to_string())
                .build();
            queries.push(query(
                Signal::Gpu(index).id(n),
                &metric.name,
                vec![instance.clone(), gpu],
            ));
        }
    }
    queries
}

/// Query `id`: the `Maximum` of `metric` over each `period` seconds.
pub(super) fn maximum(id: String, metric: Metric, period: i32) -> MetricDataQuery {
    let stat = MetricStat::builder()
        .metric(metric)
        .period(period)
        .stat("Maximum")
        .build();
    MetricDataQuery::builder()
        .id(id)
        .metric_stat(stat)
        .return_data(true)
        .build()
}

/// Adds one query's `result` to `answers`, under its instance number and signal; results that
/// name no query of a chunk of `instances` are skipped.
fn add_result(
    result: &MetricDataResult,
    instances: usize,
    answers: &mut BTreeMap<(usize, Signal), Answered>,
) {
    let Some(key) = result
        .id()
        .and_then(Signal::of)
        .filter(|(n, _)| *n < instances)
    else {
        return;
    };
    answers.entry(key).or_default().add(result);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn target(id: &str, gpus: Option<u32>) -> Target {
        Target {
            id: id.into(),
            gpus,
        }
    }

    #[test]
    fn query_ids_name_their_instance_and_signal() {
        for signal in [
            Signal::Busiest,
            Signal::Memory,
            Signal::Gpu(0),
            Signal::Gpu(7),
        ] {
            assert_eq!(Signal::of(&signal.id(42)), Some((42, signal)));
        }
        for id in ["", "x1", "i", "g1", "g1_", "m-1", "i1_2"] {
            assert_eq!(Signal::of(id), None, "{id}");
        }
    }

    #[test]
    fn calls_hold_at_most_500_queries_and_keep_each_instance_whole() {
        // 8-GPU boxes take 10 queries each: 50 a call.
        let boxes: Vec<Target> = (0..120)
            .map(|k| target(&format!("i-{k}"), Some(8)))
            .collect();
        let sizes: Vec<usize> = calls(&boxes).iter().map(|c| c.len()).collect();
        assert_eq!(sizes, [50, 50, 20]);
        // One GPU or unknown: 2 queries each, 250 a call.
        let small: Vec<Target> = (0..600)
            .map(|k| target(&format!("i-{k}"), (k % 2 == 0).then_some(1)))
            .collect();
        let sizes: Vec<usize> = calls(&small).iter().map(|c| c.len()).collect();
        assert_eq!(sizes, [250, 250, 100]);
        assert!(calls(&[]).is_empty());
    }

    #[test]
    fn busy_gpus_are_counted_per_time_from_each_gpu_and_memory_joins_by_time() {
        let t = |m: i64| {
            "2026-11-30T11:00:00Z".parse::<DateTime<Utc>>().unwrap() + chrono::Duration::minutes(m)
        };
        let mut points = BTreeMap::new();
        points.insert(
            Signal::Busiest,
            vec![(t(5), 90.0), (t(0), 30.0), (t(10), 1.0)],
        );
        points.insert(Signal::Memory, vec![(t(0), 12_288.4), (t(5), 40_960.0)]);
        // Three GPUs: at 11:00 one busy (30 %); at 11:05 two; at 11:10 none read.
        points.insert(Signal::Gpu(0), vec![(t(0), 30.0), (t(5), 90.0)]);
        points.insert(Signal::Gpu(1), vec![(t(0), 4.9), (t(5), 5.0)]);
        points.insert(Signal::Gpu(2), vec![(t(0), 0.0)]);
        let got = samples(&target("i-a", Some(3)), points);
        let view: Vec<(i64, f64, Option<u32>, Option<u16>)> = got
            .iter()
            .map(|s| {
                (
                    (s.at - t(0)).num_minutes(),
                    s.percent,
                    s.memory_mib,
                    s.gpus_busy,
                )
            })
            .collect();
        assert_eq!(
            view,
            [
                (0, 30.0, Some(12_288), Some(1)),
                (5, 90.0, Some(40_960), Some(2)),
                (10, 1.0, None, None)
            ]
        );
        // One GPU: busy when the busiest is; unknown GPUs: no count.
        let one = |gpus| {
            let mut points = BTreeMap::new();
            points.insert(Signal::Busiest, vec![(t(0), 5.0), (t(5), 4.0)]);
            samples(&target("i-b", gpus), points)
                .iter()
                .map(|s| s.gpus_busy)
                .collect::<Vec<_>>()
        };
        assert_eq!(one(Some(1)), [Some(1), Some(0)]);
        assert_eq!(one(None), [None, None]);
    }
}
