//! Virtual time for tests that run the control plane in this process: tokio's clock paused and
//! moved only by the test, and a wall-clock watchdog that turns a hang into a failure.

use std::future::Future;
use std::sync::mpsc;
use std::time::Duration;

/// Runs `work` on a runtime of its own whose clock starts paused and moves only by
/// `tokio::time::advance`; blocks until it is done (a panic in it fails the caller).
///
/// The runtime is new because `#[sqlx::test]`'s runtime starts on the wall clock: tokio counts
/// timer deadlines in whole milliseconds from the runtime's start, rounded up, so on a clock
/// paused later, off that grid, a deadline exactly `advance`d to does not fire.
///
/// Paused alone, tokio moves its clock to the next pending timer whenever the runtime has
/// nothing to do, and it has nothing to do whenever it waits on Postgres, moto or the API: time
/// would jump in the middle of a tick, by however far the nearest timer (the next tick, the
/// policy watcher's poll, a pool's timeout) happens to be. While a `spawn_blocking` task runs,
/// tokio does not auto-advance (see "Preventing auto-advance" under `tokio::time::pause`), so
/// one is kept waiting for as long as `work` runs.
pub fn on_paused_time<W, F>(work: W) -> F::Output
where
    W: FnOnce() -> F + Send,
    F: Future,
    F::Output: Send,
{
    std::thread::scope(|scope| {
        let runtime = scope.spawn(|| {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .start_paused(true)
                .build()
                .unwrap();
            runtime.block_on(async {
                let (_release, held) = mpsc::channel::<()>();
                // Detached: it ends when `_release` is dropped, also when `work` panics.
                drop(tokio::task::spawn_blocking(move || {
                    let _ = held.recv();
                }));
                work().await
            })
        });
        runtime
            .join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
    })
}

/// `work`, or a panic naming `what` if it has not finished after `limit` of wall time. Time is
/// paused, so a tick that waits for something that never comes would otherwise hang the test
/// run; the limit is generous and never decides the outcome of a test that passes.
pub async fn watchdog<T>(limit: Duration, what: &str, work: impl Future<Output = T>) -> T {
    let (expired, expiry) = tokio::sync::oneshot::channel::<()>();
    // A thread, not a blocking task: the runtime would wait for it at the end of the test.
    std::thread::spawn(move || {
        std::thread::sleep(limit);
        let _ = expired.send(());
    });
    tokio::select! {
        done = work => done,
        _ = expiry => panic!("{what}: not done after {limit:?} of wall time"),
    }
}
