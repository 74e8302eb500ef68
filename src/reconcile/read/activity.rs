//! Activity signals read from Prometheus (`idle.activity: [{prometheus: ...}]`): one range
//! query per distinct query a tick, for every instance that wants it, from the server
//! `EBB_METRICS=prometheus:URL` names. An instance the answer does not name, or a query that
//! fails, is unread for that signal: in use, not idle.

use super::READING_MARGIN;
use crate::cloud::prometheus::Prometheus;
use crate::fleet::activity::SignalReading;
use crate::fleet::Fleet;
use crate::policy::{Policy, SignalSource};
use chrono::{DateTime, Duration, Utc};
use std::collections::BTreeMap;
use std::sync::Arc;

/// By query: the positions in the listing of the instances to read with their signal's name,
/// and the longest window any of them needs.
pub(super) type Wanted = BTreeMap<String, (Vec<(usize, String)>, Duration)>;

/// Adds the Prometheus signals of `policy` for the instance at `position`, over `window`.
pub(super) fn want(wanted: &mut Wanted, policy: &Policy, position: usize, window: Duration) {
    let signals = policy.idle.iter().flat_map(|rule| &rule.activity);
    for signal in signals {
        if let SignalSource::Prometheus { query, .. } = &signal.source {
            let (positions, longest) = wanted.entry(query.clone()).or_default();
            positions.push((position, signal.name.clone()));
            *longest = (*longest).max(window);
        }
    }
}

/// Reads `wanted` into `fleet.activity`.
pub(super) async fn read(
    prometheus: Option<&Prometheus>,
    wanted: Wanted,
    fleet: &mut Fleet,
    now: DateTime<Utc>,
) {
    for (query, (positions, window)) in wanted {
        let answer = match prometheus {
            Some(p) => p
                .values(&query, now - window - READING_MARGIN, now)
                .await
                .map_err(|e| e.to_string()),
            None => Err("no Prometheus server to ask: a prometheus signal reads the one EBB_METRICS=prometheus:URL names".to_string()),
        };
        let failed = answer.as_ref().err().map(|e| Arc::<str>::from(e.as_str()));
        let mut found = answer.unwrap_or_default();
        for (i, name) in positions {
            let id = fleet.instances[i].id.clone();
            let reading = match (&failed, found.remove(&id)) {
                (Some(why), _) => SignalReading::Unread(why.clone()),
                (None, Some(points)) => SignalReading::Points(points),
                (None, None) => {
                    SignalReading::Unread("the query gave no series for this instance".into())
                }
            };
            if let SignalReading::Unread(why) = &reading {
                tracing::debug!(instance = %id, signal = %name, %why, "activity signal unread");
            }
            fleet.activity.entry(id).or_default().insert(name, reading);
        }
    }
}
