//! A replacement ebb launched and lost track of (see [`crate::spot::orphans`]): terminated as
//! an action of its migration, so that it does not bill untracked.

use super::{Context, Run, Tick};
use crate::cloud::Provider;
use crate::engine::Code;
use crate::spot::orphans::Orphan;
use crate::spot::Hold;
use crate::store::{MigrationRecord, Store, StoreError};

/// Terminates `orphan`, a launch of migration `m` that `m` does not track, with its intent on
/// the leader's session first and its outcome in `m`'s history; what happened.
pub async fn terminate_lost<P: Provider>(
    provider: &P,
    spot: &P::SpotMoves,
    store: &Store,
    tick: Tick<'_>,
    m: MigrationRecord,
    orphan: &Orphan,
) -> Result<String, StoreError> {
    let cx = Context {
        rule: None,
        decision: None,
        warned: false,
        hold: &Hold::Unknown,
        checkpoint_at: None,
    };
    let mut run = Run::new(provider, spot, store, tick, m, cx);
    let id = &orphan.artifact.id;
    let reason = format!("terminate {id}: {}", orphan.why);
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
