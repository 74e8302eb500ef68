//! `ebb serve`: the control loop and the HTTP API in one process, and what asks for a tick
//! before the interval is up: a change in the policy files, a request through the API or
//! `ebb override` on any replica (a Postgres notification), and SIGHUP (wired in `main`).

use crate::api::{self, ApiState, Tokens};
use crate::clock::Clock;
use crate::cloud::Provider;
use crate::reconcile::{control_loop, Control, PolicySource, Reconciler};
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

/// How often the policy files are checked for changes.
const POLICY_POLL: Duration = Duration::from_secs(2);

/// How long requests in flight may take to finish at shutdown.
const API_DRAIN: Duration = Duration::from_secs(10);

/// How a replica serves.
#[derive(Debug)]
pub struct Config {
    /// This replica's name, shown as the leader's.
    pub name: String,
    /// Time between ticks, on `clock`.
    pub interval: Duration,
    /// What time it is.
    pub clock: Clock,
    /// The API's address.
    pub listen: SocketAddr,
    /// Who may change things through the API.
    pub tokens: Tokens,
}

/// Why serving could not start.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// The API's address cannot be bound.
    #[error("cannot listen on {addr}: {source}; set EBB_LISTEN (or --listen) to a free address")]
    Listen {
        /// The address.
        addr: SocketAddr,
        /// Why.
        source: std::io::Error,
    },
}

/// Serves until `shutdown` resolves; the tick in flight finishes first, then the API stops.
pub async fn run<P: Provider>(
    reconciler: Reconciler<P>,
    config: Config,
    control: Arc<Control>,
    shutdown: impl Future<Output = ()>,
) -> Result<(), ServeError> {
    let listener = tokio::net::TcpListener::bind(config.listen)
        .await
        .map_err(|source| ServeError::Listen {
            addr: config.listen,
            source,
        })?;
    tracing::info!(address = %config.listen, tokens = config.tokens.len(), "API listening");
    let state = ApiState {
        store: reconciler.store().clone(),
        policies: reconciler.policies().clone(),
        control: control.clone(),
        tokens: Arc::new(config.tokens),
        clock: config.clock,
    };
    let (stop_api, api_stopped) = tokio::sync::watch::channel(());
    let api = tokio::spawn(async move {
        let mut stopped = api_stopped;
        axum::serve(listener, api::router(state))
            .with_graceful_shutdown(async move {
                let _ = stopped.changed().await;
            })
            .await
    });
    let store = reconciler.store().clone();
    let on_request = control.clone();
    let requests = tokio::spawn(async move { store.forward_wakes(&on_request.wake).await });
    let watcher = tokio::spawn(watch_policies(
        reconciler.policies().clone(),
        control.clone(),
    ));

    control_loop(
        &reconciler,
        &config.name,
        config.interval,
        config.clock,
        &control,
        shutdown,
    )
    .await;

    requests.abort();
    watcher.abort();
    drop(stop_api);
    match tokio::time::timeout(API_DRAIN, api).await {
        Ok(Ok(Ok(()))) => {}
        Ok(Ok(Err(err))) => tracing::error!("the API failed: {err}"),
        Ok(Err(err)) => tracing::error!("the API task failed: {err}"),
        Err(_) => tracing::warn!("API requests still open after {API_DRAIN:?}; exiting anyway"),
    }
    Ok(())
}

/// Wakes the control loop when the policy files change (an edit, a `git pull`, a ConfigMap
/// update), so that a change takes effect without waiting for the next tick.
async fn watch_policies(policies: Arc<PolicySource>, control: Arc<Control>) {
    let fingerprint = |p: Arc<PolicySource>| async move {
        tokio::task::spawn_blocking(move || p.fingerprint())
            .await
            .ok()
    };
    let mut last = fingerprint(policies.clone()).await;
    let mut every = tokio::time::interval(POLICY_POLL);
    every.tick().await;
    loop {
        every.tick().await;
        let now = fingerprint(policies.clone()).await;
        if now != last {
            tracing::info!("the policy files changed; ticking now");
            control.wake.notify_one();
            last = now;
        }
    }
}
