//! Forgets console logins that have expired (`console_sessions`) at every activation. A login's row is refused once expired
//! whether or not it is deleted; deleting keeps the table to the logins that can still be
//! used, however long no one logs in. Every replica prunes: the statements are idempotent and
//! cheap (an index on the expiry), and a replica that serves logins need not lead.

use super::driver::BackgroundTask;
use crate::store::{Store, StoreError};
use serde::Serialize;

/// Deletes expired console logins at each activation.
pub struct SessionPruner {
    store: Store,
}

impl SessionPruner {
    /// A pruner of `store`'s expired logins.
    pub fn new(store: Store) -> Self {
        SessionPruner { store }
    }
}

/// What an activation of the session pruner deleted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct SessionsPruned {
    /// Expired console logins.
    pub sessions: u64,
}

impl std::fmt::Display for SessionsPruned {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "deleted {} expired console logins", self.sessions)
    }
}

/// Why the session pruner could not prune.
#[derive(Debug, thiserror::Error)]
#[error("cannot forget expired logins: {0}")]
pub struct SessionPruneError(#[from] StoreError);

impl BackgroundTask for SessionPruner {
    const NAME: &'static str = "session_pruner";
    const DESCRIPTION: &'static str = "deletes expired console logins, by the database's clock";

    type Status = SessionsPruned;
    type Error = SessionPruneError;

    async fn activate(&mut self) -> Result<SessionsPruned, SessionPruneError> {
        Ok(SessionsPruned {
            sessions: self.store.prune_console_sessions().await?,
        })
    }
}
