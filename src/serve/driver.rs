//! Runs a background task: an activation at every period, and at once when woken, with each
//! activation's start and result in the task's status. Modelled on the background tasks of
//! Oxide's omicron: one type per task, one driver for all of them, and activations that are
//! safe to repeat, so a missed or doubled wake-up changes nothing.

use crate::control::Tasks;
use std::future::Future;
use std::time::Duration;
use tokio::sync::Notify;
use tokio::time::Instant;

/// One background activity of `ebb serve`.
pub trait BackgroundTask {
    /// Its name in `GET /v1/status`.
    const NAME: &'static str;
    /// What it does, for people reading the status.
    const DESCRIPTION: &'static str;

    /// Does the task's work once: what it did, or why it failed. Safe to repeat.
    fn activate(&mut self) -> impl Future<Output = Result<String, String>>;

    /// How long to wait after a failed activation, when that differs from the period.
    fn retry_after_failure(&self) -> Option<Duration> {
        None
    }
}

/// Activates `task` at once, then `every` after each activation began (at once if it took
/// longer), and whenever `wake` is notified, until `shutdown` resolves. An activation under way
/// always finishes first: shutdown is only noticed between activations.
pub async fn drive<T: BackgroundTask>(
    mut task: T,
    every: Duration,
    wake: Option<&Notify>,
    tasks: &Tasks,
    shutdown: impl Future<Output = ()>,
) {
    tasks.register(T::NAME, T::DESCRIPTION);
    tokio::pin!(shutdown);
    let mut next = Instant::now();
    loop {
        tokio::select! {
            biased;
            () = &mut shutdown => break,
            () = tokio::time::sleep_until(next) => {}
            () = woken(wake) => {}
        }
        let started = Instant::now();
        tasks.started(T::NAME);
        let result = task.activate().await;
        let wait = match (&result, task.retry_after_failure()) {
            (Err(_), Some(retry)) => retry,
            _ => every,
        };
        tasks.finished(T::NAME, result);
        next = started + wait;
    }
}

/// Resolves when `wake` is notified; never without one.
async fn woken(wake: Option<&Notify>) {
    match wake {
        Some(wake) => wake.notified().await,
        None => std::future::pending().await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU32, Ordering};
    use std::sync::Arc;

    /// Counts its activations; every second one fails.
    struct Counter(Arc<AtomicU32>);

    impl BackgroundTask for Counter {
        const NAME: &'static str = "counter";
        const DESCRIPTION: &'static str = "counts";

        async fn activate(&mut self) -> Result<String, String> {
            let n = self.0.fetch_add(1, Ordering::SeqCst) + 1;
            tokio::time::sleep(Duration::from_secs(1)).await;
            if n % 2 == 0 {
                Err(format!("failed {n}"))
            } else {
                Ok(format!("done {n}"))
            }
        }

        fn retry_after_failure(&self) -> Option<Duration> {
            Some(Duration::from_secs(30))
        }
    }

    #[tokio::test(start_paused = true)]
    async fn activations_follow_the_period_wake_ups_failures_and_shutdown() {
        let count = Arc::new(AtomicU32::new(0));
        let tasks = Tasks::default();
        let wake = Arc::new(Notify::new());
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let driver = {
            let (count, tasks, wake) = (count.clone(), tasks.clone(), wake.clone());
            tokio::spawn(async move {
                let shutdown = async {
                    let _ = stopped.await;
                };
                drive(
                    Counter(count),
                    Duration::from_secs(10),
                    Some(&wake),
                    &tasks,
                    shutdown,
                )
                .await
            })
        };
        let start = Instant::now();
        // At once, then 10 s after the first began.
        tokio::time::sleep(Duration::from_millis(500)).await;
        assert_eq!(count.load(Ordering::SeqCst), 1);
        assert!(tasks.statuses()["counter"].running_since.is_some());
        tokio::time::sleep_until(start + Duration::from_millis(10_500)).await;
        assert_eq!(count.load(Ordering::SeqCst), 2);
        // The second failed: the next waits 30 s, unless woken.
        tokio::time::sleep_until(start + Duration::from_secs(20)).await;
        assert_eq!(count.load(Ordering::SeqCst), 2);
        let last = tasks.statuses()["counter"].last.clone().unwrap();
        assert!(!last.ok);
        assert_eq!(last.detail, "failed 2");
        wake.notify_one();
        tokio::time::sleep(Duration::from_millis(500)).await;
        assert_eq!(count.load(Ordering::SeqCst), 3);
        // Shutdown during an activation lets it finish.
        stop.send(()).unwrap();
        driver.await.unwrap();
        let status = &tasks.statuses()["counter"];
        assert_eq!(status.activations, 3);
        assert_eq!(status.description, "counts");
        assert!(status.running_since.is_none());
        assert_eq!(status.last.as_ref().unwrap().detail, "done 3");
    }
}
