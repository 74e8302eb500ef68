//! Runs a background task: an activation at every period, and at once when woken, with each
//! activation's start and result in the task's status. Modelled on the background tasks of
//! Oxide's omicron: one type per task, one driver for all of them, and activations that are
//! safe to repeat, so a missed or doubled wake-up changes nothing. Each activation returns the
//! task's own status type (shown in `GET /v1/status`) or its own error type; the driver logs
//! each failure once, with the task's name and the error as fields, so the tasks never log
//! their own.

use crate::control::Tasks;
use serde::Serialize;
use std::fmt::Display;
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

    /// What an activation did: `last.status` in `GET /v1/status`, and as a line `last.detail`.
    type Status: Serialize + Display;
    /// Why an activation failed: `last.detail`, and the log's `error` field.
    type Error: std::error::Error;

    /// Does the task's work once: what it did, or why it failed. Safe to repeat.
    fn activate(&mut self) -> impl Future<Output = Result<Self::Status, Self::Error>> + Send;

    /// How long to wait after a failed activation, when that differs from the period.
    fn retry_after_failure(&self) -> Option<Duration> {
        None
    }
}

/// The shortest time between two activations that wake-ups ask for.
const WAKE_GAP: Duration = Duration::from_secs(10);

/// Activates `task` at once, then `every` after each activation began (at once if it took
/// longer), and when `wake` is notified, until `shutdown` resolves. An activation under way
/// always finishes first: shutdown is only noticed between activations.
///
/// Wake-ups make at most one extra activation per [`WAKE_GAP`] (or per period, if shorter): a
/// wake sooner after the last woken activation's start is served when the gap ends, together
/// with every wake until then, so that a flood of tick requests cannot keep the leader ticking
/// back to back, while a request made long after the last is served at once.
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
    // When the last activation a wake asked for began, and whether a wake waits for its period.
    let mut woken_at: Option<Instant> = None;
    let mut wake_waits = false;
    let gap = every.min(WAKE_GAP);
    loop {
        let woke = tokio::select! {
            biased;
            () = &mut shutdown => break,
            () = tokio::time::sleep_until(next) => false,
            () = woken(wake) => true,
        };
        if let (true, Some(at)) = (woke, woken_at) {
            if at.elapsed() < gap {
                wake_waits = true;
                next = next.min(at + gap);
                continue;
            }
        }
        let started = Instant::now();
        if woke || wake_waits {
            woken_at = Some(started);
            wake_waits = false;
        }
        tasks.started(T::NAME);
        let result = task.activate().await;
        let wait = match (&result, task.retry_after_failure()) {
            (Err(_), Some(retry)) => retry,
            _ => every,
        };
        if let Err(err) = &result {
            tracing::error!(
                task = T::NAME,
                error = %err,
                retry_in = %humantime::format_duration(wait),
                "background task failed"
            );
        }
        tasks.finished(T::NAME, result.as_ref());
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
    use std::sync::{Arc, Mutex};

    /// Counts its activations; every second one fails.
    struct Counter(Arc<AtomicU32>);

    /// What [`Counter`] did.
    #[derive(Serialize)]
    struct Counted {
        n: u32,
    }

    impl Display for Counted {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            write!(f, "done {}", self.n)
        }
    }

    /// Why [`Counter`] failed.
    #[derive(Debug, thiserror::Error)]
    #[error("failed {0}")]
    struct Failed(u32);

    impl BackgroundTask for Counter {
        const NAME: &'static str = "counter";
        const DESCRIPTION: &'static str = "counts";
        type Status = Counted;
        type Error = Failed;

        async fn activate(&mut self) -> Result<Counted, Failed> {
            let n = self.0.fetch_add(1, Ordering::SeqCst) + 1;
            tokio::time::sleep(Duration::from_secs(1)).await;
            if n % 2 == 0 {
                Err(Failed(n))
            } else {
                Ok(Counted { n })
            }
        }

        fn retry_after_failure(&self) -> Option<Duration> {
            Some(Duration::from_secs(30))
        }
    }

    /// Counts its activations, which succeed at once: the period is its only wait.
    struct Succeeding(Arc<AtomicU32>);

    impl BackgroundTask for Succeeding {
        const NAME: &'static str = "succeeding";
        const DESCRIPTION: &'static str = "counts";
        type Status = Counted;
        type Error = Failed;

        async fn activate(&mut self) -> Result<Counted, Failed> {
            let n = self.0.fetch_add(1, Ordering::SeqCst) + 1;
            Ok(Counted { n })
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_flood_of_wake_ups_makes_at_most_one_extra_activation_per_gap() {
        let count = Arc::new(AtomicU32::new(0));
        let tasks = Tasks::default();
        let wake = Arc::new(Notify::new());
        let driver = {
            let (count, tasks, wake) = (count.clone(), tasks.clone(), wake.clone());
            tokio::spawn(async move {
                let task = Succeeding(count);
                drive(
                    task,
                    Duration::from_secs(60),
                    Some(&wake),
                    &tasks,
                    std::future::pending(),
                )
                .await
            })
        };
        let start = Instant::now();
        let at = |secs: u64| start + Duration::from_millis(secs * 1000 + 500);
        tokio::time::sleep_until(at(2)).await;
        assert_eq!(count.load(Ordering::SeqCst), 1, "at once");
        // A wake is served at once.
        wake.notify_one();
        tokio::time::sleep_until(at(4)).await;
        assert_eq!(count.load(Ordering::SeqCst), 2);
        // Wakes every second for the next 10 s: none is served until 10 s after the woken
        // activation began (12.5 s), and then all of them by one activation.
        for second in 5..12 {
            wake.notify_one();
            tokio::time::sleep_until(at(second)).await;
        }
        assert_eq!(count.load(Ordering::SeqCst), 2, "held to the gap");
        tokio::time::sleep_until(at(13)).await;
        assert_eq!(count.load(Ordering::SeqCst), 3, "served at the gap's end");
        tokio::time::sleep_until(at(50)).await;
        assert_eq!(count.load(Ordering::SeqCst), 3, "and only once");
        driver.abort();
    }

    /// The log's JSON lines, kept in memory.
    #[derive(Clone, Default)]
    struct Captured(Arc<Mutex<Vec<u8>>>);

    impl std::io::Write for Captured {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }

        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    impl Captured {
        fn lines(&self) -> Vec<serde_json::Value> {
            let text = String::from_utf8(self.0.lock().unwrap().clone()).unwrap();
            text.lines()
                .map(|l| serde_json::from_str(l).unwrap())
                .collect()
        }
    }

    #[tokio::test(start_paused = true)]
    async fn activations_follow_the_period_wake_ups_failures_and_shutdown() {
        let log = Captured::default();
        let writer = log.clone();
        let _logging = tracing::subscriber::set_default(
            tracing_subscriber::fmt()
                .json()
                .with_writer(move || writer.clone())
                .finish(),
        );
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
        assert_eq!(last.status, None);
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
        let last = status.last.as_ref().unwrap();
        assert_eq!(last.detail, "done 3");
        assert_eq!(last.status, Some(serde_json::json!({"n": 3})));
        // The one failure is logged once, by the driver, with the task and error as fields.
        let errors: Vec<_> = log
            .lines()
            .into_iter()
            .filter(|l| l["level"] == "ERROR")
            .collect();
        assert_eq!(errors.len(), 1, "{errors:#?}");
        let fields = &errors[0]["fields"];
        assert_eq!(fields["task"], "counter", "{fields}");
        assert_eq!(fields["error"], "failed 2", "{fields}");
        assert_eq!(fields["retry_in"], "30s", "{fields}");
        assert_eq!(fields["message"], "background task failed", "{fields}");
    }
}
