//! The activity signals a tick reads (`idle.activity`):
//! - Prometheus: one range query per distinct query a tick, for every instance that wants it,
//!   from the server `EBB_METRICS=prometheus:URL` names;
//! - Jupyter: each instance's own server, at its `ebb:jupyter` tag or the signal's URL with its
//!   private IP, at most [`JUPYTER_AT_ONCE`] at a time;
//! - heartbeats posted through the API, as Postgres keeps them (the `ebb:active-at` tag is in
//!   the listing);
//! - CloudWatch metrics, through the cloud's provider (`cloudwatch.rs`).
//!
//! An instance an answer does not name, a query or request that fails, or a box whose server's
//! address is unknown, is unread for that signal: in use, not idle.

use super::{cloudwatch, READING_MARGIN};
use crate::cloud::jupyter::Jupyter;
use crate::cloud::prometheus::Prometheus;
use crate::cloud::MetricQuery;
use crate::engine;
use crate::fleet::activity::SignalReading;
use crate::fleet::{Fleet, Instance};
use crate::names::JUPYTER_TAG;
use crate::policy::{self, Policy, PolicySet, SignalSource};
use crate::store::ActivityRecord;
use chrono::{DateTime, Duration, Utc};
use futures_util::StreamExt;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

/// How many Jupyter Servers a tick asks at once.
const JUPYTER_AT_ONCE: usize = 32;

/// How long a tick spends on Jupyter Servers in all: servers that do not answer must not hold
/// the tick, and every other decision, past its deadline. One not asked by then is unread.
const JUPYTER_BUDGET: std::time::Duration = std::time::Duration::from_secs(60);

/// The signals to read.
#[derive(Debug, Default)]
pub(super) struct Wanted {
    /// By query: the positions in the listing of the instances to read with their signal's
    /// name, and the longest window any of them needs.
    prometheus: BTreeMap<String, (Vec<(usize, String)>, Duration)>,
    /// The positions of the instances whose Jupyter Server to ask, with the signal's name and
    /// its URL template.
    jupyter: Vec<(usize, String, Option<String>)>,
    /// The positions of the instances whose heartbeats posted through the API to read, with
    /// the signal's name.
    heartbeat: Vec<(usize, String)>,
    /// The CloudWatch metrics to read.
    pub(super) cloudwatch: Vec<cloudwatch::Want>,
}

impl Wanted {
    /// The ids of the instances whose posted heartbeats to read.
    pub(super) fn heartbeat_ids(&self, fleet: &Fleet) -> Vec<String> {
        let ids = self
            .heartbeat
            .iter()
            .map(|(i, _)| fleet.instances[*i].id.clone());
        ids.collect()
    }
}

/// Adds the signals of `policy` for instance `id` at `position`, over `window`.
pub(super) fn want(
    wanted: &mut Wanted,
    policy: &Policy,
    (position, id): (usize, &str),
    window: Duration,
) {
    let signals = policy.idle.iter().flat_map(|rule| &rule.activity);
    for signal in signals {
        match &signal.source {
            SignalSource::Prometheus { query, .. } => {
                let (positions, longest) = wanted.prometheus.entry(query.clone()).or_default();
                positions.push((position, signal.name.clone()));
                *longest = (*longest).max(window);
            }
            SignalSource::Jupyter { url } => {
                wanted
                    .jupyter
                    .push((position, signal.name.clone(), url.clone()))
            }
            SignalSource::Heartbeat { .. } => {
                wanted.heartbeat.push((position, signal.name.clone()))
            }
            SignalSource::Cloudwatch {
                namespace,
                metric,
                dimensions,
                ..
            } => wanted.cloudwatch.push(cloudwatch::Want {
                position,
                name: signal.name.clone(),
                query: MetricQuery {
                    instance: id.to_string(),
                    namespace: namespace.clone(),
                    metric: metric.clone(),
                    dimensions: dimensions.clone(),
                },
                window,
            }),
        }
    }
}

/// Reads `wanted` into `fleet.activity`, with the heartbeats posted through the API, by
/// instance id, read from Postgres (`posted`); what was asked of a server (Jupyter,
/// Prometheus), as the console keeps it.
pub(super) async fn read(
    prometheus: Option<&Prometheus>,
    jupyter: Option<&Jupyter>,
    wanted: Wanted,
    posted: HashMap<String, DateTime<Utc>>,
    fleet: &mut Fleet,
    now: DateTime<Utc>,
) -> Vec<ActivityRecord> {
    let mut asked = Vec::new();
    for (i, name) in wanted.heartbeat {
        let id = fleet.instances[i].id.clone();
        let last = SignalReading::LastUse(posted.get(&id).copied());
        fleet.activity.entry(id).or_default().insert(name, last);
    }
    read_jupyter(jupyter, wanted.jupyter, fleet, now, &mut asked).await;
    for (query, (positions, window)) in wanted.prometheus {
        let answer = match prometheus {
            Some(p) => p
                .values(&query, now - window - READING_MARGIN, now)
                .await
                .map_err(|e| e.to_string()),
            None => Err("no Prometheus server to ask: a prometheus signal reads the one EBB_METRICS=prometheus:URL names".to_string()),
        };
        let failed = answer.as_ref().err().map(|e| Arc::<str>::from(e.as_str()));
        let found = answer.unwrap_or_default();
        for (i, name) in positions {
            let id = fleet.instances[i].id.clone();
            // Cloned, not taken: two signals of a policy may share a query.
            let reading = match (&failed, found.get(&id).cloned()) {
                (Some(why), _) => SignalReading::Unread(why.clone()),
                (None, Some(points)) => SignalReading::Points(points),
                (None, None) => {
                    SignalReading::Unread("the query gave no series for this instance".into())
                }
            };
            if let SignalReading::Unread(why) = &reading {
                tracing::debug!(instance = %id, signal = %name, %why, "activity signal unread");
            }
            asked.push(ActivityRecord::of(&id, &name, &reading, now));
            fleet.activity.entry(id).or_default().insert(name, reading);
        }
    }
    asked
}

/// The latest use each activity signal read this tick showed of each instance of `fleet`
/// under `set`, where newer than what `kept` (the uses this process kept before) says.
pub(super) fn new_uses(
    set: &PolicySet,
    fleet: &Fleet,
    now: DateTime<Utc>,
    kept: &HashMap<(String, String), DateTime<Utc>>,
) -> Vec<(String, String, DateTime<Utc>)> {
    let mut fresh = Vec::new();
    let read = fleet
        .instances
        .iter()
        .filter(|i| fleet.activity.contains_key(&i.id));
    for inst in read {
        let Some(policy) = engine::governing_policy(set, inst) else {
            continue;
        };
        for (name, at) in engine::last_uses(policy, &fleet.activity, inst, now) {
            let key = (inst.id.clone(), name.to_string());
            if kept.get(&key).is_none_or(|k| *k < at) {
                fresh.push((key.0, key.1, at));
            }
        }
    }
    fresh
}

/// Where the Jupyter Server of `instance` is: its `ebb:jupyter` tag, else the signal's URL
/// `template` with its private IP; or why that is unknown.
fn jupyter_url(instance: &Instance, template: Option<&str>) -> Result<String, String> {
    if let Some(tag) = instance.tag(JUPYTER_TAG) {
        return Ok(tag.to_string());
    }
    match (template, &instance.private_ip) {
        (Some(template), Some(ip)) => Ok(policy::jupyter_url(template, *ip)),
        (Some(_), None) => Err(format!(
            "no {JUPYTER_TAG} tag, and its cloud gave no private IP for the signal's url"
        )),
        (None, _) => Err(format!(
            "no {JUPYTER_TAG} tag says where its Jupyter Server is (or give the signal a url)"
        )),
    }
}

/// Asks the Jupyter Server of each instance at `positions` when a person last used it.
async fn read_jupyter(
    jupyter: Option<&Jupyter>,
    positions: Vec<(usize, String, Option<String>)>,
    fleet: &mut Fleet,
    now: DateTime<Utc>,
    kept: &mut Vec<ActivityRecord>,
) {
    let deadline = tokio::time::Instant::now() + JUPYTER_BUDGET;
    let asked = positions.into_iter().map(|(i, name, template)| {
        let instance = &fleet.instances[i];
        let (id, url) = (
            instance.id.clone(),
            jupyter_url(instance, template.as_deref()),
        );
        async move {
            let reading = match (jupyter, url) {
                (_, Err(why)) => Err(why),
                (None, Ok(_)) => Err("this process reads no Jupyter Server".to_string()),
                (Some(client), Ok(url)) => {
                    let asked = tokio::time::timeout_at(deadline, client.last_use(&url, now));
                    asked.await.unwrap_or_else(|_| {
                        Err(format!(
                            "not asked within the {}s a tick gives all Jupyter Servers",
                            JUPYTER_BUDGET.as_secs()
                        ))
                    })
                }
            };
            let reading = reading.map_or_else(
                |why| SignalReading::Unread(why.into()),
                SignalReading::LastUse,
            );
            (id, name, reading)
        }
    });
    let read: Vec<_> = futures_util::stream::iter(asked)
        .buffer_unordered(JUPYTER_AT_ONCE)
        .collect()
        .await;
    for (id, name, reading) in read {
        if let SignalReading::Unread(why) = &reading {
            tracing::debug!(instance = %id, signal = %name, %why, "activity signal unread");
        }
        kept.push(ActivityRecord::of(&id, &name, &reading, now));
        fleet.activity.entry(id).or_default().insert(name, reading);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Servers that accept and never answer: the tick's Jupyter reads end within the budget
    /// (and one request's time limit), every box unread, none idle.
    #[tokio::test(start_paused = true)]
    async fn servers_that_never_answer_hold_the_tick_no_longer_than_the_budget() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        std::thread::spawn(move || {
            let held: Vec<_> = listener.incoming().flatten().collect();
            drop(held);
        });
        let mut fleet = Fleet::default();
        let mut wanted = Vec::new();
        for k in 0..1000 {
            let mut tags = crate::fleet::Tags::default();
            tags.insert(JUPYTER_TAG.to_string(), url.clone());
            fleet.instances.push(crate::fleet::Instance {
                id: format!("i-{k}"),
                region: "us-east-1".into(),
                instance_type: "g5.xlarge".into(),
                state: crate::fleet::InstanceState::Running,
                state_since: None,
                lifecycle: crate::fleet::Lifecycle::OnDemand,
                launched_at: None,
                tags,
                gpus: None,
                gpu_util: Vec::new(),
                via_role: None,
                billing: crate::fleet::Billing::EC2,
                private_ip: None,
            });
            wanted.push((k, "jupyter".to_string(), None));
        }
        let client = Jupyter::new(None).unwrap();
        let started = tokio::time::Instant::now();
        read_jupyter(
            Some(&client),
            wanted,
            &mut fleet,
            Utc::now(),
            &mut Vec::new(),
        )
        .await;
        let took = started.elapsed();
        // A minute, and the last request's own time limit.
        assert!(took <= std::time::Duration::from_secs(66), "{took:?}");
        let why = |r: &BTreeMap<String, SignalReading>| match &r["jupyter"] {
            SignalReading::Unread(why) => Some(why.to_string()),
            _ => None,
        };
        let unread: Vec<String> = fleet.activity.values().filter_map(why).collect();
        assert_eq!(unread.len(), 1000);
        assert!(
            unread
                .iter()
                .any(|w| w.contains("not asked within the 60s")),
            "the budget ended the reads"
        );
    }
}
