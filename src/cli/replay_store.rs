//! `ebb replay` from Postgres (`DATABASE_URL`), without `--fleet` and `--utilisation`: the
//! fleet as ebb tracked it at `--from` (`Store::fleet_at`), and the GPU readings ebb kept,
//! read a chunk of instances at a time (by instance, in id order) and handed to the same
//! workers the files feed. A month of a large fleet is never in memory at once.

use crate::engine::{Prior, RECENT};
use crate::fleet::{Fleet, Instance};
use crate::policy::PolicySet;
use crate::replay::{Recording, CHUNK, WRONGFUL_WITHIN};
use crate::store::Store;
use anyhow::{Context as _, Result};
use chrono::{DateTime, Duration, Utc};
use std::sync::mpsc::SyncSender;

/// The span of readings a replay from `from` to `to` reads: back far enough that the first
/// tick's longest idle window (of `sets`) is covered, on past `to` as far as a stop's demand
/// coming back is looked for.
pub(super) fn readings_span(
    from: DateTime<Utc>,
    to: DateTime<Utc>,
    sets: &[&PolicySet],
) -> (DateTime<Utc>, DateTime<Utc>) {
    let longest = sets
        .iter()
        .flat_map(|set| &set.policies)
        .filter_map(|p| p.idle.as_ref().map(|i| i.window))
        .max()
        .unwrap_or(Duration::zero());
    (from - longest - RECENT, to + WRONGFUL_WITHIN + RECENT)
}

/// The fleet at `from` and what ebb remembered of it then, from `store`.
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
    let fleet = Fleet {
        instances,
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
    for chunk in instances.chunks(CHUNK) {
        let ids: Vec<String> = chunk.iter().map(|i| i.id.clone()).collect();
        let mut readings = runtime
            .block_on(store.gpu_readings_of(&ids, span.0, span.1))
            .context("cannot read the GPU readings from Postgres")?;
        let recordings = chunk
            .iter()
            .map(|inst| Recording::new(inst, readings.remove(&inst.id).unwrap_or_default()))
            .collect();
        send.send(recordings)
            .map_err(|_| anyhow::anyhow!("the replay stopped early"))?;
    }
    Ok(())
}
