//! Early moves of a spot migration's replacement (`ebb::spot::early`) under the fault matrix of
//! [`super::spot_faults`]: a rebalance recommendation for a spot replacement whose job
//! checkpointed recently, and back to spot after a fall back to on-demand. Each is run once
//! cleanly on the simulated fleet with the reconciler on the paused clock, then again with
//! every fault class at every call of its own part; besides the matrix's invariants, the
//! witness checks at every termination of a running replacement that another copy of the
//! workload runs (`Faults::watch_copies`): never zero running copies.
//!
//! The job on the workload's current copy checkpoints at every tick (its `ebb:checkpoint-at`
//! tag), as a training job that checkpoints often would.

use crate::common;

use super::spot_faults::{self, Path, World, ORIGINAL, REGION};
use chrono::SecondsFormat;
use common::time::on_paused_time;
use ebb::cloud::{Market, Provider};
use ebb::fleet::InstanceState;
use ebb::names::CHECKPOINT_AT_TAG;
use ebb::spot::State;
use ebb::store::MigrationRecord;
use sqlx::PgPool;
use std::collections::BTreeMap;
use std::path::Path as FsPath;

/// Back to spot: one reclaim falls back to on-demand, spot is tried again after an hour, and
/// the image stays for that (it is what the spot replacement is launched from).
const BACK_TO_SPOT_POLICY: &str = r#"
policies:
  - name: to-spot
    match: {tags: {workload: training}}
    spot:
      min_savings: 40%
      checkpoint_max_age: 30m
      instance_types: [g5.xlarge, g5.2xlarge]
      max_interruptions: 1
      keep_original_for: 30m
      keep_image_for: 1d
      back_to_spot_after: 1h
"#;

/// The policy of `path`, when it is not the matrix's own.
pub(super) fn prepare(path: Path, dir: &FsPath) {
    if path == Path::BackToSpot {
        std::fs::write(dir.join("policies/spot.yaml"), BACK_TO_SPOT_POLICY).unwrap();
    }
}

/// Whether the early path's own part starts after this tick; if so, starts it. Back to spot
/// first has its replacement reclaimed (one reclaim is `max_interruptions`), and starts once
/// the on-demand replacement runs.
pub(super) async fn trigger(w: &World, path: Path, m: &MigrationRecord) -> bool {
    let settled =
        m.state == State::Done && m.original_terminated_at.is_some() && m.outgoing.is_none();
    let Some(current) = m.current.clone().filter(|_| settled) else {
        return false;
    };
    if w.state_of(&current).await != Some(InstanceState::Running) {
        return false;
    }
    let first = m.interruptions.0.is_empty();
    match (path, m.market) {
        (Path::Rebalance, Market::Spot) if first => {
            w.faults.watch_copies();
            let at = w.clock.now();
            let recorded = w
                .store
                .record_spot_rebalances(&[(current.clone(), REGION.to_string(), at)])
                .await
                .unwrap();
            assert_eq!(
                recorded,
                [current],
                "a live migration's current replacement"
            );
            true
        }
        (Path::BackToSpot, Market::Spot) if first => {
            w.ec2.reclaim(REGION, &current).await;
            false
        }
        (Path::BackToSpot, Market::OnDemand) if m.running_since.is_some() => {
            w.faults.watch_copies();
            true
        }
        _ => false,
    }
}

/// The job on the workload's current copy checkpoints now (early paths only).
pub(super) async fn job(w: &World, path: Path) {
    if !matches!(path, Path::Rebalance | Path::BackToSpot) {
        return;
    }
    let Some(current) = w.migration().await.and_then(|m| m.current) else {
        return;
    };
    let at = w.clock.now().to_rfc3339_opts(SecondsFormat::Secs, true);
    let tags = BTreeMap::from([(CHECKPOINT_AT_TAG.to_string(), at)]);
    w.cloud.inner.tag(REGION, &[current], &tags).await;
}

#[sqlx::test(migrations = false)]
async fn every_fault_at_every_call_of_a_move_on_a_rebalance_keeps_one_copy_running(pool: PgPool) {
    on_paused_time(|| spot_faults::matrix(common::database_url(&pool), Path::Rebalance));
}

#[sqlx::test(migrations = false)]
async fn every_fault_at_every_call_of_a_move_back_to_spot_keeps_one_copy_running(pool: PgPool) {
    on_paused_time(|| spot_faults::matrix(common::database_url(&pool), Path::BackToSpot));
}

/// What the clean run of `path` did: the migration, and every replacement's type, market and
/// whether it still runs.
async fn clean(url: &str, path: Path) -> (MigrationRecord, Vec<String>) {
    let (dbs, dir) = spot_faults::setup(url).await;
    prepare(path, dir.path());
    let ran = spot_faults::run(&dbs, dir.path(), path, None).await;
    assert!(ran.broken.is_empty(), "{:#?}", ran.broken);
    let m = ran.migration.clone();
    let steps = m.steps.0.iter().map(|s| s.detail.clone()).collect();
    dbs.pool.close().await;
    (m, steps)
}

#[sqlx::test(migrations = false)]
async fn a_rebalance_recommendation_moves_the_replacement_to_another_pool_before_the_reclaim(
    pool: PgPool,
) {
    let url = common::database_url(&pool);
    on_paused_time(|| async move {
        let (m, steps) = clean(&url, Path::Rebalance).await;
        // g5.xlarge was the cheapest pool; the move leaves it for the next best.
        assert_eq!(m.market, Market::Spot);
        assert_eq!(m.instance_type.as_deref(), Some("g5.2xlarge"), "{steps:#?}");
        assert!(m.interruptions.0.is_empty(), "moved before any reclaim");
        assert!(m.outgoing.is_none());
        let verified = steps
            .iter()
            .position(|s| s.starts_with("verified:"))
            .unwrap();
        let moved = steps
            .iter()
            .rposition(|s| s.starts_with("verified:"))
            .unwrap();
        let retired = steps
            .iter()
            .position(|s| s.contains("replaced early"))
            .unwrap_or_else(|| panic!("{steps:#?}"));
        assert!(verified < moved && moved < retired, "{steps:#?}");
        assert!(steps
            .iter()
            .any(|s| s.contains("EC2 recommended rebalancing")));
    });
}

#[sqlx::test(migrations = false)]
async fn after_a_fall_back_to_on_demand_the_workload_goes_back_to_spot_after_back_to_spot_after(
    pool: PgPool,
) {
    let url = common::database_url(&pool);
    on_paused_time(|| async move {
        let (m, steps) = clean(&url, Path::BackToSpot).await;
        assert_eq!(m.market, Market::Spot, "{steps:#?}");
        // The reclaimed pool (g5.xlarge) is avoided: back to spot in the other one.
        assert_eq!(m.instance_type.as_deref(), Some("g5.2xlarge"), "{steps:#?}");
        assert_eq!(m.interruptions.0.len(), 1);
        let on_demand = steps
            .iter()
            .position(|s| s.contains("as on-demand"))
            .unwrap_or_else(|| panic!("{steps:#?}"));
        let back = steps
            .iter()
            .position(|s| s.contains("for back_to_spot_after"))
            .unwrap_or_else(|| panic!("{steps:#?}"));
        let retired = steps
            .iter()
            .position(|s| s.contains("replaced early"))
            .unwrap_or_else(|| panic!("{steps:#?}"));
        assert!(on_demand < back && back < retired, "{steps:#?}");
    });
}

#[sqlx::test(migrations = false)]
async fn a_recommendation_for_an_instance_that_is_no_current_replacement_is_not_kept(pool: PgPool) {
    let store = ebb::store::Store::from_pool(pool);
    store.migrate().await.unwrap();
    let at = "2026-11-30T12:00:00Z".parse().unwrap();
    let recorded = store
        .record_spot_rebalances(&[(ORIGINAL.to_string(), REGION.to_string(), at)])
        .await
        .unwrap();
    assert!(recorded.is_empty());
    assert_eq!(store.spot_rebalance(ORIGINAL).await.unwrap(), None);
}
