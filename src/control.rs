//! What `ebb serve`'s background tasks share with the HTTP API: the metrics, whether this
//! replica leads, the wake-up that asks for a tick now, each task's status (`GET /v1/status`),
//! and how far behind the leader's ticks are (`/readyz`, `/healthz`).

use crate::metrics::Metrics;
use chrono::{DateTime, Utc};
use serde::Serialize;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::Notify;
use tokio::time::Instant;

/// How often the leader ticks and how long a tick may run: what readiness and liveness measure
/// its progress against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TickLimits {
    /// Time between ticks (real time).
    pub interval: Duration,
    /// How long a tick may run before it is abandoned.
    pub deadline: Duration,
}

impl TickLimits {
    /// How long the leader may go without completing a tick and stay ready: three intervals.
    pub fn ready_within(&self) -> Duration {
        self.interval * 3
    }

    /// How long the leader may go without completing a tick before it counts as stuck: two
    /// ticks abandoned at their deadline in a row, and an interval more. A replica whose tick
    /// loop got there is not merely slow (the deadline would have ended a slow tick); a restart
    /// frees the leadership for another replica.
    pub fn alive_within(&self) -> Duration {
        self.deadline * 2 + self.interval
    }
}

/// The leader's progress, on tokio's clock (paused in tests).
#[derive(Debug, Default)]
struct Progress {
    /// Set once the tick loop runs; without it, nothing is measured.
    limits: Option<TickLimits>,
    /// When this replica last became the leader, while it leads.
    leading_since: Option<Instant>,
    /// When the last tick completed, successfully or not (an abandoned tick does not count).
    completed: Option<Instant>,
}

impl Progress {
    /// The limits, and how long the leader has gone without completing a tick; `None` when
    /// not measured or not leading.
    fn behind(&self) -> Option<(TickLimits, Duration)> {
        let limits = self.limits?;
        let leading = self.leading_since?;
        let since = self
            .completed
            .map_or(leading, |completed| completed.max(leading));
        Some((limits, Instant::now().saturating_duration_since(since)))
    }
}

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
    progress: Mutex<Progress>,
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
        let mut progress = self.progress();
        progress.leading_since = match (leader, progress.leading_since) {
            (true, Some(since)) => Some(since),
            (true, None) => Some(Instant::now()),
            (false, _) => None,
        };
    }

    /// Starts measuring the leader's progress against `limits`.
    pub fn watch_ticks(&self, limits: TickLimits) {
        self.progress().limits = Some(limits);
    }

    /// Records that a tick completed, successfully or not.
    pub fn tick_completed(&self) {
        self.progress().completed = Some(Instant::now());
    }

    /// Why this replica is not ready as far as its ticks go: it leads and has not completed a
    /// tick in three intervals. `None` when it is ready, and always for a follower.
    pub fn ticks_behind(&self) -> Option<String> {
        let (limits, behind) = self.progress().behind()?;
        (behind > limits.ready_within()).then(|| {
            format!(
                "leading, and no tick completed in {} (three tick intervals)",
                humantime::format_duration(round(behind))
            )
        })
    }

    /// Why this replica's tick loop is stuck: it leads and has not completed a tick in twice
    /// the tick deadline and an interval more. `None` when it is alive, and always for a
    /// follower (it does not tick).
    pub fn stuck(&self) -> Option<String> {
        let (limits, behind) = self.progress().behind()?;
        (behind > limits.alive_within()).then(|| {
            format!(
                "leading, and no tick completed in {} (twice the tick deadline of {} and an interval)",
                humantime::format_duration(round(behind)),
                humantime::format_duration(limits.deadline)
            )
        })
    }

    fn progress(&self) -> std::sync::MutexGuard<'_, Progress> {
        self.progress.lock().unwrap_or_else(|e| e.into_inner())
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

/// `d` in whole seconds, for messages.
fn round(d: Duration) -> Duration {
    Duration::from_secs(d.as_secs())
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
    /// What it did, or why it failed, in one line.
    pub detail: String,
    /// What it did in the task's own terms (its status type, serialised); absent when it
    /// failed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<serde_json::Value>,
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

    /// Records that the activation of `name` under way ended: its status, or why it failed.
    /// Only records: whoever runs the activation logs its failure, once.
    pub fn finished<S, E>(&self, name: &'static str, result: Result<&S, &E>)
    where
        S: Serialize + std::fmt::Display,
        E: std::fmt::Display,
    {
        let (ok, detail, status) = match result {
            Ok(status) => (true, status.to_string(), serde_json::to_value(status).ok()),
            Err(err) => (false, err.to_string(), None),
        };
        self.update(name, |s| {
            let now = Utc::now();
            s.last = Some(Activation {
                started: s.running_since.take().unwrap_or(now),
                finished: now,
                ok,
                detail,
                status,
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
