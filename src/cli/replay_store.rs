//! `ebb replay` from Postgres (`DATABASE_URL`), without `--fleet` and `--utilisation`: the
//! fleet as ebb tracked it at `--from` (`Store::fleet_at`), and the GPU readings ebb kept,
//! read a chunk of instances at a time (by instance, in id order) and handed to the same
//! workers the files feed. A month of a large fleet is never in memory at once.

use crate::engine::Prior;
use crate::fleet::{Fleet, Instance};
use crate::replay::{self, Recording};
use crate::store::Store;
use anyhow::{Context as _, Result};
use chrono::{DateTime, Utc};
use std::sync::mpsc::SyncSender;

/// The fleet at `from` and what ebb remembered of it then, from `store`, with the volumes and
/// Elastic IPs last read of each instance (ebb keeps no history of them).
pub(super) async fn fleet_at(store: &Store, from: DateTime<Utc>) -> Result<(Fleet, Prior)> {
    let (instances, prior) = store
        .fleet_at(from)
        .await
        .context("cannot read the fleet from Postgres")?;
    if instances.is_empty() {
        anyhow::bail!(
            "Postgres has no instance ebb tracked at {}: give a --from after ebb's first tick, or --fleet and --utilisation files",
            from.to_rfc3339()
        );
    }
    let ids: Vec<String> = instances.iter().map(|i| i.id.clone()).collect();
    let attached = store
        .attached_of(&ids)
        .await
        .context("cannot read the instances' volumes from Postgres")?;
    let fleet = Fleet {
        instances,
        attached,
        levers: crate::cloud::levers(),
        ..Fleet::default()
    };
    Ok((fleet, prior))
}

/// Reads the readings of `instances` within `span` from `store` a chunk at a time, and sends
/// each chunk's recordings to the workers. Runs on a thread that may block: each chunk's
/// query is waited for on `runtime`.
pub(super) fn stream_chunks(
    store: &Store,
    runtime: &tokio::runtime::Handle,
    instances: &[Instance],
    span: (DateTime<Utc>, DateTime<Utc>),
    send: &SyncSender<Vec<Recording>>,
) -> Result<()> {
    replay::in_chunks(
        instances,
        |ids| {
            runtime
                .block_on(store.kept_of(ids, span))
                .context("cannot read the GPU readings and activity from Postgres")
        },
        |recordings| {
            send.send(recordings)
                .map_err(|_| anyhow::anyhow!("the replay stopped early"))
        },
    )
}
