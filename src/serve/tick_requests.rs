//! Listens for tick requests from any replica (`POST /v1/tick`, `ebb override`): a Postgres
//! notification that wakes this replica's tick loop, which ticks if it leads.

use super::driver::BackgroundTask;
use crate::control::Control;
use crate::store::{Store, WakeListener};
use chrono::{DateTime, SecondsFormat, Utc};
use serde::Serialize;
use std::sync::Arc;
use std::time::Duration;

/// How long to wait after the listening connection failed before listening again.
const LISTEN_RETRY: Duration = Duration::from_secs(5);

/// The longest one activation waits for a request: a bounded wait, so the status is fresh and
/// an activation always ends.
const LISTEN_WAIT: Duration = Duration::from_secs(60);

/// Each activation listens (connecting first when it is not), and waits at most
/// [`LISTEN_WAIT`] for one tick request.
pub struct TickRequests {
    store: Store,
    control: Arc<Control>,
    /// The listening connection, and since when it listens; none before the first activation
    /// and after the connection failed.
    listener: Option<(WakeListener, DateTime<Utc>)>,
    /// Tick requests heard since this replica started.
    requests: u64,
}

impl TickRequests {
    /// A listener on `store` that wakes `control`'s tick loop.
    pub fn new(store: Store, control: Arc<Control>) -> Self {
        TickRequests {
            store,
            control,
            listener: None,
            requests: 0,
        }
    }

    /// The status of a connection listening since `since`.
    fn listening(&self, since: DateTime<Utc>) -> Listening {
        Listening {
            listening: true,
            since,
            requests: self.requests,
        }
    }
}

/// Whether the task listens, as `GET /v1/status` shows it: a successful activation listens; a
/// failed one does not, until an activation after [`LISTEN_RETRY`] connects again.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Listening {
    /// Always true: a status is only made while listening.
    pub listening: bool,
    /// Since when the connection listens.
    pub since: DateTime<Utc>,
    /// Tick requests heard since this replica started.
    pub requests: u64,
}

impl std::fmt::Display for Listening {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "listening since {}; {} tick requests heard",
            self.since.to_rfc3339_opts(SecondsFormat::Secs, true),
            self.requests
        )
    }
}

/// Why the task is not listening.
#[derive(Debug, thiserror::Error)]
#[error("not listening for tick requests: {0}")]
pub struct NotListening(#[from] sqlx::Error);

impl BackgroundTask for TickRequests {
    const NAME: &'static str = "tick_requests";
    const DESCRIPTION: &'static str = "wakes the tick loop when any replica asks for a tick";
    type Status = Listening;
    type Error = NotListening;

    async fn activate(&mut self) -> Result<Listening, NotListening> {
        let Some((listener, since)) = &mut self.listener else {
            let listener = self.store.listen_for_wakes().await?;
            let since = Utc::now();
            self.listener = Some((listener, since));
            // Connected: say so at once rather than after a wait.
            return Ok(self.listening(since));
        };
        let since = *since;
        match listener.wait(LISTEN_WAIT).await {
            Ok(asked) => {
                if asked {
                    self.requests += 1;
                    self.control.wake.notify_one();
                }
                Ok(self.listening(since))
            }
            Err(err) => {
                self.listener = None;
                Err(err.into())
            }
        }
    }

    fn retry_after_failure(&self) -> Option<Duration> {
        Some(LISTEN_RETRY)
    }
}
