//! `ebb serve`: the control loop and the HTTP API in one process, and what asks for a tick
//! before the interval is up: a change in the policy files, a request through the API or
//! `ebb override` on any replica (a Postgres notification), and SIGHUP (wired in `main`).

use crate::api::{self, ApiState, Tokens};
use crate::clock::Clock;
use crate::cloud::aws::warnings::InterruptionQueue;
use crate::cloud::Provider;
use crate::reconcile::{control_loop, Control, PolicySource, Reconciler};
use crate::store::Store;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

/// How often the policy files are checked for changes.
const POLICY_POLL: Duration = Duration::from_secs(2);

/// How long to wait after the interruption queue failed before reading it again.
const QUEUE_RETRY: Duration = Duration::from_secs(30);

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
    /// Where spot interruption warnings arrive, if anywhere.
    pub interruptions: Option<InterruptionQueue>,
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
    let warnings = config
        .interruptions
        .map(|queue| tokio::spawn(read_warnings(queue, reconciler.store().clone())));

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
    if let Some(warnings) = warnings {
        warnings.abort();
    }
    drop(stop_api);
    match tokio::time::timeout(API_DRAIN, api).await {
        Ok(Ok(Ok(()))) => {}
        Ok(Ok(Err(err))) => tracing::error!("the API failed: {err}"),
        Ok(Err(err)) => tracing::error!("the API task failed: {err}"),
        Err(_) => tracing::warn!("API requests still open after {API_DRAIN:?}; exiting anyway"),
    }
    Ok(())
}

/// Records every spot interruption warning from the queue, which wakes the leader (on any
/// replica: the store notifies through Postgres), for as long as the process runs. A message
/// is deleted only once its warning is recorded; otherwise the queue shows it again.
async fn read_warnings(queue: InterruptionQueue, store: Store) {
    loop {
        let batch = match queue.receive().await {
            Ok(batch) => batch,
            Err(err) => {
                tracing::error!("cannot read the spot interruption queue: {err}");
                tokio::time::sleep(QUEUE_RETRY).await;
                continue;
            }
        };
        let rows: Vec<_> = batch
            .warnings
            .iter()
            .map(|w| (w.instance.clone(), w.at))
            .collect();
        for (instance, at) in &rows {
            tracing::info!(instance, at = %at, "spot interruption warning");
        }
        if !rows.is_empty() {
            if let Err(err) = store.record_spot_warnings(&rows).await {
                tracing::error!("cannot record spot interruption warnings: {err}");
                tokio::time::sleep(QUEUE_RETRY).await;
                continue;
            }
        }
        if let Err(err) = queue.delete(batch).await {
            tracing::error!("cannot delete read spot interruption warnings: {err}");
        }
    }
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
