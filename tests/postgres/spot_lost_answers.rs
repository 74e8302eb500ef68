//! A lost answer to a spot migration's call is unknown, not failed (issue 27): each call that
//! changes the cloud in a move, a reclaim and a roll-back is carried out with its answer lost
//! (the caller sees a timeout, [`ErrorKind::Unanswered`](ebb::cloud::ErrorKind)). Its intent
//! stays open and nothing is done to the migration while the call could still land
//! ([`IN_FLIGHT`]); the first tick past that resolves it `succeeded` from what the cloud shows
//! (the tag, the stopped original, the image, the launch by its tag, ...), the migration goes
//! on from there without making that call again, and it ends as the clean run did, with as many
//! replacements and images. The matrix of `spot_faults.rs` checks the same invariants at every
//! call with every fault; this one says what a lost answer leads to.

use crate::common;

use super::spot_faults::{run, setup, Inject, Path, Ran, IN_FLIGHT};
use common::faulty::Class;
use common::intercept::Method;
use common::time::on_paused_time;
use ebb::store::Outcome;
use sqlx::PgPool;
use std::collections::BTreeMap;

/// The calls of a run that change the cloud, each with how often it was made.
fn changes(ran: &Ran) -> BTreeMap<(Method, Vec<String>), usize> {
    let mut made = BTreeMap::new();
    for c in ran.calls.iter().filter(|c| c.method.changes()) {
        *made.entry((c.method, c.ids.clone())).or_default() += 1;
    }
    made
}

/// Every change of `path`'s clean run, carried out with its answer lost: what broke, per call.
async fn lose_each_answer(url: String, path: Path) {
    let (dbs, dir) = setup(&url).await;
    let clean = run(&dbs, dir.path(), path, None).await;
    assert!(
        clean.broken.is_empty(),
        "{path:?} clean: {:#?}",
        clean.broken
    );
    let points: Vec<_> = clean.calls.iter().filter(|c| c.method.changes()).collect();
    let methods: Vec<&str> = points.iter().map(|c| c.method.name()).collect();
    println!(
        "{path:?}: {} changes: {methods:?}; (instances, images) made: {:?}",
        points.len(),
        clean.made
    );
    assert!(points.len() >= 4, "{path:?}: {methods:?}");
    let mut failures = Vec::new();
    for call in &points {
        let lost = Some((call.index, Inject::Fault(Class::Lost)));
        let ran = run(&dbs, dir.path(), path, lost).await;
        let mut wrong = ran.broken.clone();
        if ran.ending != clean.ending {
            wrong.push(format!("ended {} (clean: {})", ran.ending, clean.ending));
        }
        // Open through the in-flight window, then resolved from what the cloud shows, once.
        match ran.resolved.as_slice() {
            [r] if r.outcome == Outcome::Succeeded && r.after >= IN_FLIGHT => {}
            other => wrong.push(format!("resolved: {other:#?}")),
        }
        // The call that landed is not made again, nor anything made twice.
        let key = (call.method, call.ids.clone());
        let (made, clean_made) = (changes(&ran), changes(&clean));
        let (made, clean_made) = (made.get(&key), clean_made.get(&key));
        if made != clean_made {
            wrong.push(format!(
                "{} {:?} made {made:?} times (clean: {clean_made:?})",
                call.method, call.ids
            ));
        }
        if ran.made != clean.made {
            wrong.push(format!(
                "made (instances, images) {:?} (clean: {:?})",
                ran.made, clean.made
            ));
        }
        if !wrong.is_empty() {
            failures.push(format!(
                "{path:?}, the answer to call {} ({} {:?}) lost: {wrong:#?}",
                call.index, call.method, call.ids
            ));
        }
    }
    dbs.pool.close().await;
    assert!(
        failures.is_empty(),
        "{} of {} lost answers:\n{}",
        failures.len(),
        points.len(),
        failures.join("\n")
    );
}

/// The tag and the stop of the original, its image, the spot launch, and the original's
/// termination after `keep_original_for`.
#[sqlx::test(migrations = false)]
async fn a_lost_answer_in_a_move_is_resolved_succeeded_after_the_window_and_the_move_completes(
    pool: PgPool,
) {
    on_paused_time(|| lose_each_answer(common::database_url(&pool), Path::Move));
}

/// The relaunches after each reclaim, and the image's deregistration and its snapshot's
/// deletion after `keep_image_for`.
#[sqlx::test(migrations = false)]
async fn a_lost_answer_after_a_reclaim_is_resolved_succeeded_after_the_window(pool: PgPool) {
    on_paused_time(|| lose_each_answer(common::database_url(&pool), Path::Reclaim));
}

/// The roll-back's start of the original, the replacement's termination, the tag's removal,
/// the image's deregistration and its snapshot's deletion.
#[sqlx::test(migrations = false)]
async fn a_lost_answer_in_a_roll_back_is_resolved_succeeded_after_the_window(pool: PgPool) {
    on_paused_time(|| lose_each_answer(common::database_url(&pool), Path::Rollback));
}
