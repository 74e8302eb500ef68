//! The spot paths that must prove something before they end anything (issue 27), on the fault
//! matrix's world (`spot_faults`): the simulated fleet with EC2's image and launch rules, the
//! fault layer and a real Postgres. Each test combines two faults the matrix injects one at a
//! time.

use super::spot_faults::{check, run, setup, Path, World, ORIGINAL, REGION};
use crate::common;

use common::faulty::Class;
use common::intercept::Method;
use common::time::on_paused_time;
use ebb::cloud::{CloudError, Provider};
use ebb::fleet::InstanceState;
use ebb::names::MIGRATING_TAG;
use ebb::spot::State;
use sqlx::PgPool;
use std::collections::BTreeMap;

/// What happens on the tick after the one cut off.
#[derive(Debug, Clone, Copy)]
enum Next {
    /// Someone tags the original `ebb:skip=true`.
    Protection,
    /// The listing of every region fails.
    FailedListing,
}

/// The original's `ebb:migrating` tag, as EC2 has it now.
async fn migrating_tag(w: &World) -> Option<String> {
    let found = w.cloud.inner.reread(REGION, &[ORIGINAL.to_string()]).await;
    let original = found.unwrap().into_iter().find(|i| i.id == ORIGINAL);
    original.and_then(|i| i.tag(MIGRATING_TAG).map(str::to_string))
}

/// A tick cut off right after `planned` tagged the original `ebb:migrating` or stopped it left
/// the row `planned`; the next tick, seeing a protection or no listing, cancelled it as "not
/// started", and the original stayed tagged (and stopped), left alone by every rule for ever.
/// Now the cancel reads the original and rolls the move back: it ends running and untagged.
#[sqlx::test(migrations = false)]
async fn a_move_cut_off_after_its_tag_or_stop_is_rolled_back_when_it_is_cancelled(pool: PgPool) {
    let url = common::database_url(&pool);
    on_paused_time(|| async move {
        let (dbs, dir) = setup(&url).await;
        let clean = run(&dbs, dir.path(), Path::Move, None).await;
        let original = [ORIGINAL.to_string()];
        let mut failures = Vec::new();
        for method in [Method::Tag, Method::Stop] {
            let call = clean
                .calls
                .iter()
                .find(|c| c.method == method && c.ids == original)
                .expect("the clean run tags and stops the original");
            for next in [Next::Protection, Next::FailedListing] {
                let mut w = World::new(dbs.fresh().await, dir.path()).await;
                w.faults.set_fault(call.index, Class::Kill);
                let mut killed = false;
                for _ in 0..5 {
                    if !w.tick().await {
                        killed = true;
                        break;
                    }
                    tokio::time::advance(std::time::Duration::from_secs(60)).await;
                }
                assert!(killed, "{method:?}: the tick was never cut off");
                let m = w.migration().await.unwrap();
                assert_eq!(m.state, State::Planned, "{method:?}: cut off while planned");
                assert_eq!(migrating_tag(&w).await, Some(m.id.to_string()));
                match next {
                    Next::Protection => {
                        let skip = BTreeMap::from([("ebb:skip".into(), "true".into())]);
                        w.cloud.inner.tag(REGION, &original, &skip).await;
                        w.faults.protected(ORIGINAL);
                    }
                    Next::FailedListing => w.cloud.refuse_next(
                        Method::Instances,
                        1,
                        CloudError::throttled("DescribeInstances"),
                    ),
                }
                for _ in 0..5 {
                    tokio::time::advance(std::time::Duration::from_secs(60)).await;
                    w.tick().await;
                }
                let m = w.migration().await.unwrap();
                let what = format!("{method:?} cut off, then {next:?}");
                if m.state != State::RolledBack {
                    failures.push(format!("{what}: {:?} {:?}", m.state, m.steps.0.last()));
                }
                if w.state_of(ORIGINAL).await != Some(InstanceState::Running) {
                    failures.push(format!("{what}: the original does not run"));
                }
                if let Some(tag) = migrating_tag(&w).await {
                    failures.push(format!("{what}: the original keeps {MIGRATING_TAG}={tag}"));
                }
                let broken = check(&w, &m).await;
                failures.extend(broken.into_iter().map(|b| format!("{what}: {b}")));
            }
        }
        dbs.pool.close().await;
        assert!(failures.is_empty(), "{failures:#?}");
    });
}
