//! Every background task of `ebb serve` but the tick loop, registered in one place as Oxide's
//! omicron registers its tasks (`Driver::register`): the task and its period. Each runs under
//! [`drive`] on a runtime task of its own until serve stops them; none is woken early (only
//! the tick loop is, by `Control::wake`, and it runs on serve's own task to finish its tick
//! at shutdown).

use super::driver::{drive, BackgroundTask};
use crate::control::Tasks;
use std::future::pending;
use std::time::Duration;
use tokio::task::JoinHandle;

/// The running background tasks.
pub(super) struct Registry {
    tasks: Tasks,
    running: Vec<JoinHandle<()>>,
}

impl Registry {
    /// No task yet; each registered reports its activations into `tasks`.
    pub(super) fn new(tasks: Tasks) -> Registry {
        Registry {
            tasks,
            running: Vec::new(),
        }
    }

    /// Runs `task` at once, then `every` after each activation began (back to back, with
    /// `Duration::ZERO`, for a task that waits within its activation).
    pub(super) fn register<T>(&mut self, task: T, every: Duration)
    where
        T: BackgroundTask + Send + 'static,
    {
        let tasks = self.tasks.clone();
        self.running.push(tokio::spawn(async move {
            drive(task, every, None, &tasks, pending()).await
        }));
    }

    /// Stops every task, an activation under way with it.
    pub(super) fn stop(self) {
        for task in self.running {
            task.abort();
        }
    }
}
