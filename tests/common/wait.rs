//! Waiting for what another process does in its own time, shared with the benchmarks that
//! start the same servers (`benches/activity.rs`).

/// Tries `attempt` until it gives a value, for what another process (Postgres, moto, a server,
/// a browser) does in its own time: again after `every` of tokio's time, or, with `every` zero,
/// as soon as the runtime is free again (on paused time, where a sleep would not end). `None`
/// once `limit` of wall-clock time has passed without one.
#[must_use]
pub async fn eventually<T>(
    limit: std::time::Duration,
    every: std::time::Duration,
    mut attempt: impl AsyncFnMut() -> Option<T>,
) -> Option<T> {
    let started = std::time::Instant::now();
    loop {
        if let Some(done) = attempt().await {
            return Some(done);
        }
        if started.elapsed() >= limit {
            return None;
        }
        if every.is_zero() {
            tokio::task::yield_now().await;
        } else {
            tokio::time::sleep(every).await;
        }
    }
}
