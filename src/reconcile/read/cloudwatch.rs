//! The `cloudwatch` activity signals: a metric of each instance, read through its cloud's
//! [`InstanceMetrics`], one call per region (of at most 500 queries a call), and at most once
//! per five-minute period: CloudWatch bills each metric asked for, and its readings are of
//! five-minute periods, so the later ticks of a period reuse what its first tick read.

use super::incremental::period_of;
use super::READING_MARGIN;
use crate::cloud::{InstanceMetrics, MetricQuery};
use crate::fleet::activity::SignalReading;
use crate::fleet::Fleet;
use crate::store::ActivityRecord;
use chrono::{DateTime, Duration, Utc};
use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;

/// A signal to read: the instance's position in the listing, the signal's name, its metric,
/// and the window its rule looks back over.
#[derive(Debug)]
pub(super) struct Want {
    pub(super) position: usize,
    pub(super) name: String,
    pub(super) query: MetricQuery,
    pub(super) window: Duration,
}

/// What the current period's reads found, by instance and signal name, with the start of the
/// window each was read from: in memory only, so a restart or a new leader asks once more.
#[derive(Debug, Default)]
pub(in crate::reconcile) struct MetricsRead(Mutex<Period>);

/// The period the reads are of, and what they found.
type Period = (
    Option<DateTime<Utc>>,
    HashMap<(String, String), (DateTime<Utc>, SignalReading)>,
);

impl MetricsRead {
    /// What was read of `want` in the period of `now`, if its window reaches back as far as
    /// `want`'s (a longer window, or a new period, is read again).
    fn reuse(&self, want: &Want, id: &str, now: DateTime<Utc>) -> Option<SignalReading> {
        let period = self.0.lock().expect("metric reads poisoned");
        if period.0 != Some(period_of(now)) {
            return None;
        }
        let (from, reading) = period.1.get(&(id.to_string(), want.name.clone()))?;
        (*from <= now - want.window - READING_MARGIN).then(|| reading.clone())
    }

    /// Notes `reading` of signal `name` of `id`, read from `from` in the period of `now`.
    fn keep(
        &self,
        id: &str,
        name: &str,
        from: DateTime<Utc>,
        reading: &SignalReading,
        now: DateTime<Utc>,
    ) {
        let mut period = self.0.lock().expect("metric reads poisoned");
        if period.0 != Some(period_of(now)) {
            *period = (Some(period_of(now)), HashMap::new());
        }
        let key = (id.to_string(), name.to_string());
        period.1.insert(key, (from, reading.clone()));
    }
}

/// Reads `wanted` into `fleet.activity` through `metrics`, the cloud's, if it has them; what
/// it asked of CloudWatch (not what it reused) goes to `asked`, as the console keeps it. A
/// query that fails, or a call that fails for all its queries, leaves its instances unread for
/// that signal: in use, not idle. Failures are not kept, so the next tick asks again.
pub(super) async fn read<M: InstanceMetrics>(
    metrics: Option<&M>,
    memo: &MetricsRead,
    wanted: Vec<Want>,
    fleet: &mut Fleet,
    now: DateTime<Utc>,
    asked: &mut Vec<ActivityRecord>,
) {
    let mut by_region: BTreeMap<String, Vec<Want>> = BTreeMap::new();
    for want in wanted {
        let id = fleet.instances[want.position].id.clone();
        match memo.reuse(&want, &id, now) {
            Some(reading) => {
                let readings = fleet.activity.entry(id).or_default();
                readings.insert(want.name, reading);
            }
            None => {
                let region = fleet.instances[want.position].region.clone();
                by_region.entry(region).or_default().push(want);
            }
        }
    }
    for (region, wants) in by_region {
        let Some(window) = wants.iter().map(|w| w.window).max() else {
            continue;
        };
        let from = now - window - READING_MARGIN;
        let queries: Vec<MetricQuery> = wants.iter().map(|w| w.query.clone()).collect();
        let answers = match metrics {
            Some(metrics) => metrics
                .metric_maxima(&region, &queries, from, now)
                .await
                .map_err(|e| e.to_string()),
            None => Err("ebb reads CloudWatch metrics of EC2 instances only".to_string()),
        };
        for (k, want) in wants.into_iter().enumerate() {
            let answer = match &answers {
                Ok(answers) => answers[k].clone(),
                Err(why) => Err(why.clone()),
            };
            let reading = match answer {
                Ok(points) => SignalReading::Points(points),
                Err(why) => SignalReading::Unread(why.into()),
            };
            let id = fleet.instances[want.position].id.clone();
            match &reading {
                SignalReading::Unread(why) => {
                    tracing::debug!(instance = %id, signal = %want.name, %why, "activity signal unread");
                }
                _ => memo.keep(&id, &want.name, from, &reading, now),
            }
            asked.push(ActivityRecord::of(&id, &want.name, &reading, now));
            let readings = fleet.activity.entry(id).or_default();
            readings.insert(want.name, reading);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cloud::{CloudError, MetricAnswer};
    use crate::fleet::{Billing, Instance, InstanceState, Lifecycle};
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// Answers every query with one reading of 1 at the window's end, and counts the queries.
    #[derive(Default)]
    struct Counting(AtomicUsize);

    impl InstanceMetrics for Counting {
        async fn metric_maxima(
            &self,
            _region: &str,
            queries: &[MetricQuery],
            _from: DateTime<Utc>,
            to: DateTime<Utc>,
        ) -> Result<Vec<MetricAnswer>, CloudError> {
            self.0.fetch_add(queries.len(), Ordering::SeqCst);
            Ok(queries.iter().map(|_| Ok(vec![(to, 1.0)])).collect())
        }
    }

    fn fleet() -> Fleet {
        let mut fleet = Fleet::default();
        fleet.instances.push(Instance {
            id: "i-a".into(),
            region: "us-east-1".into(),
            instance_type: "g5.xlarge".into(),
            state: InstanceState::Running,
            state_since: None,
            lifecycle: Lifecycle::OnDemand,
            launched_at: None,
            tags: Default::default(),
            gpus: None,
            gpu_util: Vec::new(),
            via_role: None,
            billing: Billing::EC2,
            private_ip: None,
        });
        fleet
    }

    fn want(window: Duration) -> Vec<Want> {
        vec![Want {
            position: 0,
            name: "procs".into(),
            query: MetricQuery {
                instance: "i-a".into(),
                namespace: "CWAgent".into(),
                metric: "procstat_lookup_pid_count".into(),
                dimensions: BTreeMap::new(),
            },
            window,
        }]
    }

    #[tokio::test]
    async fn a_metric_is_asked_once_a_period_unless_a_longer_window_wants_more() {
        let (counting, kept) = (Counting::default(), MetricsRead::default());
        let (metrics, memo) = (&counting, &kept);
        let t = |m: i64| {
            "2026-12-07T10:00:00Z".parse::<DateTime<Utc>>().unwrap() + Duration::minutes(m)
        };
        let asked = |at| async move {
            let mut fleet = fleet();
            let window = want(Duration::minutes(30));
            read(Some(metrics), memo, window, &mut fleet, at, &mut Vec::new()).await;
            let reading = fleet.activity["i-a"]["procs"].clone();
            (metrics.0.load(Ordering::SeqCst), reading)
        };
        // The period's first tick asks; its later ticks reuse what it read.
        assert_eq!(asked(t(0)).await.0, 1);
        let (count, reading) = asked(t(4)).await;
        assert_eq!(count, 1);
        assert_eq!(reading, SignalReading::Points(vec![(t(0), 1.0)]));
        // The next period asks again.
        assert_eq!(asked(t(5)).await.0, 2);
        // A longer window than was read is asked for in the same period.
        let mut fleet = fleet();
        read(
            Some(metrics),
            memo,
            want(Duration::hours(2)),
            &mut fleet,
            t(6),
            &mut Vec::new(),
        )
        .await;
        assert_eq!(metrics.0.load(Ordering::SeqCst), 3);
    }

    #[tokio::test]
    async fn without_the_capability_every_signal_is_unread() {
        let mut fleet = fleet();
        let mut asked = Vec::new();
        let now = Utc::now();
        read(
            None::<&Counting>,
            &MetricsRead::default(),
            want(Duration::minutes(30)),
            &mut fleet,
            now,
            &mut asked,
        )
        .await;
        let SignalReading::Unread(why) = &fleet.activity["i-a"]["procs"] else {
            panic!("read without a reader");
        };
        assert!(why.contains("EC2 instances only"), "{why}");
        assert_eq!(asked.len(), 1);
    }
}
