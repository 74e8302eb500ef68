//! What `ebb serve`'s background tasks share with the HTTP API: the metrics, whether this
//! replica leads, the wake-up that asks for a tick now, and each task's status
//! (`GET /v1/status`).

use crate::metrics::Metrics;
use chrono::{DateTime, Utc};
use serde::Serialize;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use tokio::sync::Notify;

/// The control loop's shared state.
#[derive(Debug, Default)]
pub struct Control {
    /// Prometheus metrics.
    pub metrics: Metrics,
    /// Notified to tick now (SIGHUP, a policy change, an API call, a request from a replica).
    pub wake: Notify,
    /// The background tasks' statuses.
    pub tasks: Tasks,
    leader: AtomicBool,
    last_tick: tokio::sync::watch::Sender<Option<DateTime<Utc>>>,
}

impl Control {
    /// Whether this replica is the leader.
    pub fn is_leader(&self) -> bool {
        self.leader.load(Ordering::Relaxed)
    }

    /// Records whether this replica is the leader.
    pub fn set_leader(&self, leader: bool) {
        self.leader.store(leader, Ordering::Relaxed);
        self.metrics.leader(leader);
    }

    /// The decision time of this replica's last tick.
    pub fn last_tick(&self) -> Option<DateTime<Utc>> {
        *self.last_tick.borrow()
    }

    /// The decision time of this replica's last tick, updated as each tick finishes: a test on
    /// paused time waits on it for a tick to be done before it moves the clock on.
    pub fn ticks(&self) -> tokio::sync::watch::Receiver<Option<DateTime<Utc>>> {
        self.last_tick.subscribe()
    }

    /// Records the decision time of a tick.
    pub fn set_last_tick(&self, at: DateTime<Utc>) {
        self.last_tick.send_replace(Some(at));
    }
}

/// The statuses of the background tasks, by name; clones share them.
#[derive(Debug, Clone, Default)]
pub struct Tasks(Arc<Mutex<BTreeMap<&'static str, TaskStatus>>>);

/// What one background task has done, as `GET /v1/status` shows it. Times are the system
/// clock's, also under a simulated fleet: they tell when the process did something.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct TaskStatus {
    /// What the task does.
    pub description: &'static str,
    /// Activations begun.
    pub activations: u64,
    /// When the activation under way began, if one is.
    pub running_since: Option<DateTime<Utc>>,
    /// When the last finished activation began and ended, and how it went.
    pub last: Option<Activation>,
}

/// One finished activation of a task.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Activation {
    /// When it began.
    pub started: DateTime<Utc>,
    /// When it ended.
    pub finished: DateTime<Utc>,
    /// Whether it did its job.
    pub ok: bool,
    /// What it did, or why it failed.
    pub detail: String,
}

impl Tasks {
    /// Registers the task `name`, which does `description`.
    pub fn register(&self, name: &'static str, description: &'static str) {
        self.update(name, |s| s.description = description);
    }

    /// Records that an activation of `name` began.
    pub fn started(&self, name: &'static str) {
        self.update(name, |s| {
            s.activations += 1;
            s.running_since = Some(Utc::now());
        });
    }

    /// Records that the activation of `name` under way ended: `Ok` with what it did, or `Err`
    /// with why it failed.
    pub fn finished(&self, name: &'static str, result: Result<String, String>) {
        self.update(name, |s| {
            let now = Utc::now();
            let (ok, detail) = match result {
                Ok(detail) => (true, detail),
                Err(detail) => (false, detail),
            };
            s.last = Some(Activation {
                started: s.running_since.take().unwrap_or(now),
                finished: now,
                ok,
                detail,
            });
        });
    }

    /// Every task's status, by name.
    pub fn statuses(&self) -> BTreeMap<&'static str, TaskStatus> {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    fn update(&self, name: &'static str, change: impl FnOnce(&mut TaskStatus)) {
        let mut tasks = self.0.lock().unwrap_or_else(|e| e.into_inner());
        change(tasks.entry(name).or_default());
    }
}
