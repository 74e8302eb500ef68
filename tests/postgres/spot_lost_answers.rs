//! A lost answer to a spot migration's call is unknown, not failed (issue 27): each call that
//! changes the cloud in a move, a reclaim and a roll-back is carried out with its answer lost
//! (the caller sees a timeout, [`ErrorKind::Unanswered`](ebb::cloud::ErrorKind)). Its intent
//! stays open, the next tick closes it (never `failed`) and repeats the step from what the
//! cloud shows, and the migration ends as the clean run did. The matrix of
//! `spot_faults.rs` checks the same invariants at every call with every fault; this one says
//! what a lost answer leads to.

use crate::common;

use super::spot_faults::{run, setup, Inject, Path};
use common::faulty::Class;
use common::time::on_paused_time;
use sqlx::PgPool;

/// Every change of `path`'s clean run, carried out with its answer lost: what broke, per call.
async fn lose_each_answer(url: String, path: Path) {
    let (dbs, dir) = setup(&url).await;
    let clean = run(&dbs, dir.path(), path, None).await;
    assert!(
        clean.broken.is_empty(),
        "{path:?} clean: {:#?}",
        clean.broken
    );
    let changes: Vec<_> = clean.calls.iter().filter(|c| c.method.changes()).collect();
    let methods: Vec<&str> = changes.iter().map(|c| c.method.name()).collect();
    println!("{path:?}: {} changes: {methods:?}", changes.len());
    assert!(changes.len() >= 4, "{path:?}: {methods:?}");
    let mut failures = Vec::new();
    for call in &changes {
        let lost = Some((call.index, Inject::Fault(Class::Lost)));
        let ran = run(&dbs, dir.path(), path, lost).await;
        if !ran.broken.is_empty() || ran.ending != clean.ending {
            failures.push(format!(
                "{path:?}, the answer to call {} ({} {:?}) lost: ended {} (clean: {}): {:#?}",
                call.index, call.method, call.ids, ran.ending, clean.ending, ran.broken
            ));
        }
    }
    dbs.pool.close().await;
    assert!(
        failures.is_empty(),
        "{} of {} lost answers:\n{}",
        failures.len(),
        changes.len(),
        failures.join("\n")
    );
}

/// The tag and the stop of the original, its image, the spot launch, and the original's
/// termination after `keep_original_for`: before, a lost tag, stop, image or launch answer
/// rolled the move back and was recorded `failed`.
#[sqlx::test(migrations = false)]
async fn a_lost_answer_in_a_move_is_repeated_not_failed_and_the_move_completes(pool: PgPool) {
    on_paused_time(|| lose_each_answer(common::database_url(&pool), Path::Move));
}

/// The relaunches after each reclaim, and the image's deregistration and its snapshot's
/// deletion after `keep_image_for`.
#[sqlx::test(migrations = false)]
async fn a_lost_answer_after_a_reclaim_is_repeated_not_failed(pool: PgPool) {
    on_paused_time(|| lose_each_answer(common::database_url(&pool), Path::Reclaim));
}

/// The roll-back's start of the original, the replacement's termination, the tag's removal,
/// the image's deregistration and its snapshot's deletion.
#[sqlx::test(migrations = false)]
async fn a_lost_answer_in_a_roll_back_is_repeated_not_failed(pool: PgPool) {
    on_paused_time(|| lose_each_answer(common::database_url(&pool), Path::Rollback));
}
