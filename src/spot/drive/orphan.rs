//! A replacement ebb launched and lost track of (see [`crate::spot::orphans`]): terminated as
//! an action of its migration, so that it does not bill untracked.

use super::{Context, Run};
use crate::cloud::Provider;
use crate::engine::Code;
use crate::spot::Hold;
use crate::store::{Leadership, MigrationRecord, Store, StoreError};
use chrono::{DateTime, Utc};

/// Terminates `id`, a launch of migration `m` that `m` does not track (`why`), with its intent
/// on the leader's session first and its outcome in `m`'s history; what happened.
#[allow(clippy::too_many_arguments)]
pub async fn terminate_lost<P: Provider>(
    provider: &P,
    store: &Store,
    leader: &mut Leadership,
    m: MigrationRecord,
    id: &str,
    why: &str,
    version: &str,
    now: DateTime<Utc>,
) -> Result<String, StoreError> {
    let cx = Context {
        rule: None,
        decision: None,
        warned: false,
        hold: &Hold::Unknown,
        version,
        now,
    };
    let mut run = Run {
        p: provider,
        store,
        leader,
        cx,
        m,
        audit: Vec::new(),
        happened: String::new(),
    };
    let reason = format!("terminate {id}: {why}");
    let detail = match run
        .terminate_replacement(id, Code::SpotOrphan, &reason)
        .await?
    {
        Ok(()) => format!("terminated {id}, a launch of this migration it did not track"),
        Err(e) => format!("terminating {id}, a launch of this migration it did not track: {e}"),
    };
    let state = run.m.state;
    run.go(state, detail.clone()).await?;
    Ok(detail)
}
