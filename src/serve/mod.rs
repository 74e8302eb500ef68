//! `ebb serve`: the control loop and the HTTP API in one process. Every background activity is
//! one task type run by one [`driver`]: the tick loop, and, registered with their periods in
//! `registry.rs`, the policy watcher, the calendar fetcher, the listener for tick requests from
//! other replicas, the
//! pruner of old history, the report's roll-up, the session pruner, on a simulated clock its
//! publisher, the spot interruption
//! queue reader, and with `EBB_EVENTS_URL` the event sender (the webhook sender reports into
//! the same statuses). `GET /v1/status` shows what each last did.

mod calendar_fetcher;
mod clock_publisher;
mod driver;
mod events;
mod interruptions;
mod listener;
mod policy_watcher;
mod pruner;
mod registry;
mod rollup;
mod sessions;
mod tick_loop;
mod tick_requests;

pub use driver::{drive, BackgroundTask};
pub use events::{
    EventSender, EventsConfig, EventsError, EventsStatus, FIRST_BACKOFF, MAX_BACKOFF,
};
pub use listener::HttpLimits;
pub use rollup::{ReportRollup, RollupError, RollupStatus};
pub use sessions::{SessionPruneError, SessionPruner, SessionsPruned};

use crate::api::{self, ApiLimits, ApiState, Attempts, ChangeBudgets, Tokens};
use crate::checkpoint::Publisher;
use crate::clock::Clock;
use crate::cloud::aws::warnings::InterruptionQueue;
use crate::cloud::Provider;
use crate::console;
use crate::control::{Control, TickLimits};
use crate::reconcile::Reconciler;
pub use calendar_fetcher::{
    calendar_client, fetch_calendar, CalendarFetchError, CalendarFetcher, CalendarsFetched,
};
use clock_publisher::ClockPublisher;
use interruptions::InterruptionReader;
use policy_watcher::PolicyWatcher;
use pruner::Pruner;
pub use pruner::Retention;
use registry::Registry;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tick_loop::TickLoop;
use tick_requests::TickRequests;

/// How often the policy files are checked for changes.
const POLICY_POLL: Duration = Duration::from_secs(2);

/// How often the leader looks for new outcomes to send as events (real time).
const EVENTS_POLL: Duration = Duration::from_secs(2);

/// How often the leader prunes old history (real time).
const PRUNE_EVERY: Duration = Duration::from_secs(3600);

/// How often the calendars the policies take from an address are fetched (real time).
const CALENDAR_FETCH_EVERY: Duration = Duration::from_secs(24 * 3600);

/// How often a simulated clock is published for the commands (real time): well within the
/// minute after which they take it for stopped.
const CLOCK_PUBLISH_EVERY: Duration = Duration::from_secs(5);

/// How often each replica forgets expired console logins (real time).
const SESSIONS_PRUNE_EVERY: Duration = Duration::from_secs(600);

/// How often the leader rolls up the report's past days (real time).
const ROLLUP_EVERY: Duration = Duration::from_secs(900);

/// Connections of the API's and the console's own pool: apart from the control loop's, so a
/// flood of reads cannot take a connection a tick needs.
const API_CONNECTIONS: u32 = 4;

/// How long one statement of the API or the console may run.
const API_STATEMENT_LIMIT: Duration = Duration::from_secs(10);

/// How long requests in flight may take to finish at shutdown.
const API_DRAIN: Duration = Duration::from_secs(10);

/// How a replica serves.
#[derive(Debug)]
pub struct Config {
    /// This replica's name, shown as the leader's.
    pub name: String,
    /// Time between ticks, on `clock`.
    pub interval: Duration,
    /// How long a tick may run before it is abandoned, in real time.
    pub deadline: Duration,
    /// What time it is.
    pub clock: Clock,
    /// The API's address.
    pub listen: SocketAddr,
    /// How long a client may hold a connection to it, and how many it may hold.
    pub http: HttpLimits,
    /// Who may change things through the API.
    pub tokens: Tokens,
    /// Publishes audit checkpoints, when they are configured.
    pub checkpoints: Option<Arc<Publisher>>,
    /// Public reads, the longest override, the time limit of requests.
    pub limits: ApiLimits,
    /// Where spot interruption warnings arrive, if anywhere.
    pub interruptions: Option<InterruptionQueue>,
    /// How long instance state changes, spot warnings and GPU readings are kept.
    pub retention: Retention,
    /// The on-demand prices the API's and the console's reports count stopped hours at.
    pub prices: crate::cloud::PriceTable,
    /// The cloud the boxes are on: the currency of a budget that names none.
    pub cloud: crate::fleet::Cloud,
    /// Where every outcome is posted as an event, if anywhere.
    pub events: Option<EventsConfig>,
    /// The proxies whose `X-Forwarded-For` names the client of a login or a snooze link.
    pub trusted_proxies: Vec<ipnet::IpNet>,
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
    /// The calendars' copies cannot be read.
    #[error("cannot read the calendars' copies: {0}")]
    CalendarCopies(crate::store::StoreError),
    /// The events' cursor cannot be made (`EBB_EVENTS_URL`).
    #[error("cannot start sending events: {0}")]
    Events(#[from] crate::store::StoreError),
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
    // Before the first tick: the calendars' last good copies, whatever their addresses
    // answer now.
    let copies = reconciler.store().calendar_copies().await;
    reconciler
        .policies()
        .set_copies(copies.map_err(ServeError::CalendarCopies)?);
    if config.events.is_some() {
        // Before the first tick: every row this process appends comes after the cursor.
        reconciler.store().start_event_cursor().await?;
    }
    let state = ApiState {
        store: reconciler
            .store()
            .for_readers(API_CONNECTIONS, API_STATEMENT_LIMIT),
        policies: reconciler.policies().clone(),
        control: control.clone(),
        tokens: Arc::new(config.tokens),
        clock: config.clock,
        checkpoints: config.checkpoints.clone(),
        change_budgets: Arc::new(ChangeBudgets::new(config.limits.changes_per_minute)),
        attempts: Arc::new(Attempts::new(config.trusted_proxies)),
        audit_verified: Default::default(),
        limits: config.limits,
        prices: Arc::new(config.prices),
        cloud: config.cloud,
    };
    let (stop_api, api_stopped) = tokio::sync::watch::channel(());
    let http = config.http;
    let api = tokio::spawn(async move {
        let mut stopped = api_stopped;
        // The console's pages beside the API's routes, on one listener and the same state.
        let routes = api::router(state.clone()).merge(console::router(state));
        listener::serve(listener, routes, http, async move {
            let _ = stopped.changed().await;
        })
        .await
    });
    let tasks = control.tasks.clone();
    let background = spawn_background(
        &reconciler,
        &control,
        config.clock,
        config.retention,
        config.interruptions,
        config.events,
    );

    let every = config.clock.real(config.interval);
    control.watch_ticks(TickLimits {
        interval: every,
        deadline: config.deadline,
    });
    let ticks = TickLoop::new(
        &reconciler,
        &config.name,
        config.clock,
        &control,
        config.deadline,
        config.checkpoints,
    );
    drive(ticks, every, Some(&control.wake), &tasks, shutdown).await;
    tracing::info!("shut down");

    background.stop();
    drop(stop_api);
    match tokio::time::timeout(API_DRAIN, api).await {
        Ok(Ok(())) => {}
        Ok(Err(err)) => tracing::error!(error = %err, "the API task failed"),
        Err(_) => tracing::warn!(
            waited = %humantime::format_duration(API_DRAIN),
            "API requests still open; exiting anyway"
        ),
    }
    Ok(())
}

/// Registers every background task but the tick loop: the tick requests of other replicas, the
/// policy watcher, the calendar fetcher, the pruner, the report's roll-up, the session pruner, on a simulated clock
/// the clock publisher, and with a receiver the event sender, with a queue the interruption
/// reader.
fn spawn_background<P: Provider>(
    reconciler: &Reconciler<P>,
    control: &Arc<Control>,
    clock: Clock,
    retention: Retention,
    interruptions: Option<InterruptionQueue>,
    events: Option<EventsConfig>,
) -> Registry {
    let store = reconciler.store();
    let mut registry = Registry::new(control.tasks.clone());
    registry.register(
        TickRequests::new(store.clone(), control.clone()),
        Duration::ZERO,
    );
    registry.register(
        PolicyWatcher::new(reconciler.policies().clone(), control.clone(), clock),
        POLICY_POLL,
    );
    registry.register(
        CalendarFetcher::new(store.clone(), reconciler.policies().clone(), clock),
        CALENDAR_FETCH_EVERY,
    );
    registry.register(
        Pruner::new(store.clone(), clock, control.clone(), retention),
        PRUNE_EVERY,
    );
    registry.register(
        ReportRollup::new(store.clone(), clock, control.clone()),
        ROLLUP_EVERY,
    );
    registry.register(SessionPruner::new(store.clone()), SESSIONS_PRUNE_EVERY);
    if let Some(publisher) = ClockPublisher::new(store.clone(), clock) {
        registry.register(publisher, CLOCK_PUBLISH_EVERY);
    }
    if let Some(config) = events {
        registry.register(
            EventSender::new(store.clone(), control.clone(), config),
            EVENTS_POLL,
        );
    }
    if let Some(queue) = interruptions {
        registry.register(
            InterruptionReader::new(queue, store.clone()),
            Duration::ZERO,
        );
    }
    registry
}
