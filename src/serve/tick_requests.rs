//! Listens for tick requests from any replica (`POST /v1/tick`, `ebb override`): a Postgres
//! notification that wakes this replica's tick loop, which ticks if it leads.

use super::driver::BackgroundTask;
use crate::control::Control;
use crate::store::Store;
use std::sync::Arc;
use std::time::Duration;

/// How long to wait after the listening connection failed before listening again.
const LISTEN_RETRY: Duration = Duration::from_secs(5);

/// Each activation listens until its connection fails.
pub struct TickRequests {
    store: Store,
    control: Arc<Control>,
}

impl TickRequests {
    /// A listener on `store` that wakes `control`'s tick loop.
    pub fn new(store: Store, control: Arc<Control>) -> Self {
        TickRequests { store, control }
    }
}

impl BackgroundTask for TickRequests {
    const NAME: &'static str = "tick_requests";
    const DESCRIPTION: &'static str = "wakes the tick loop when any replica asks for a tick";

    async fn activate(&mut self) -> Result<String, String> {
        let Err(err) = self.store.listen_for_wakes(&self.control.wake).await;
        tracing::warn!(
            "not listening for tick requests, retrying in {}s: {err}",
            LISTEN_RETRY.as_secs()
        );
        Err(format!("stopped listening: {err}"))
    }

    fn retry_after_failure(&self) -> Option<Duration> {
        Some(LISTEN_RETRY)
    }
}
