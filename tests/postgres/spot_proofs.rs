//! The spot paths that must prove something before they end anything (issue 27), on the fault
//! matrix's world (`spot_faults`): the simulated fleet with EC2's image and launch rules, the
//! fault layer and a real Postgres. Each test combines two faults the matrix injects one at a
//! time.

use super::spot_faults::{check, run, setup, Path, World, IN_FLIGHT, ORIGINAL, REGION};
use crate::common;

use common::faulty::Class;
use common::intercept::Method;
use common::time::on_paused_time;
use ebb::cloud::{CloudError, Provider};
use ebb::fleet::InstanceState;
use ebb::names::MIGRATING_TAG;
use ebb::reconcile::{Options, Timers};
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
/// Now the cut-off call's intent is resolved from what the cloud shows once the call can no
/// longer land, and the step goes on from there: a tag found made, then a cancel that reads
/// the original and rolls the move back (it ends running and untagged); a stop found made, the
/// move goes on from it: rolled back under the protection, done despite the failed listing.
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
                // Until the cut-off call could no longer land, nothing is done to the move.
                tokio::time::advance(IN_FLIGHT.to_std().unwrap()).await;
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
                for _ in 0..15 {
                    w.tick().await;
                    tokio::time::advance(std::time::Duration::from_secs(60)).await;
                }
                let m = w.migration().await.unwrap();
                let what = format!("{method:?} cut off, then {next:?}");
                let broken = check(&w, &m).await;
                failures.extend(broken.into_iter().map(|b| format!("{what}: {b}")));
                if method == Method::Stop && matches!(next, Next::FailedListing) {
                    // Not cancelled as "not started": the move went on from the stopped
                    // original (with how it was launched, which the killed tick never saved).
                    if m.state != State::Done {
                        let last = m.steps.0.last();
                        failures.push(format!("{what}: {:?} {last:?}, not moved", m.state));
                    }
                    continue;
                }
                if m.state != State::RolledBack {
                    failures.push(format!("{what}: {:?} {:?}", m.state, m.steps.0.last()));
                }
                if w.state_of(ORIGINAL).await != Some(InstanceState::Running) {
                    failures.push(format!("{what}: the original does not run"));
                }
                if let Some(tag) = migrating_tag(&w).await {
                    failures.push(format!("{what}: the original keeps {MIGRATING_TAG}={tag}"));
                }
            }
        }
        dbs.pool.close().await;
        assert!(failures.is_empty(), "{failures:#?}");
    });
}

/// Whether the original is terminated (or gone from EC2's answers).
async fn terminated(w: &World) -> bool {
    matches!(
        w.state_of(ORIGINAL).await,
        None | Some(InstanceState::Terminated | InstanceState::ShuttingDown)
    )
}

/// Ticks `w` every 5 minutes of its clock for `hours`.
async fn tick_for(w: &mut World, hours: u32) {
    for _ in 0..hours * 12 {
        w.tick().await;
        tokio::time::advance(std::time::Duration::from_secs(300)).await;
    }
}

/// Against a real cloud a migration's waits run on the database's clock
/// (`Timers::Database`): on a host whose clock runs hours past the database's, the moved
/// original is not terminated before the database has seen `keep_original_for` (30 minutes)
/// pass. On the tick's own clock the same four hours terminate it; once the database's clock
/// has passed the wait (the migration's recorded times moved an hour back), it goes too.
#[sqlx::test(migrations = false)]
async fn a_clock_running_hours_ahead_terminates_no_original_before_the_databases_wait(
    pool: PgPool,
) {
    let url = common::database_url(&pool);
    on_paused_time(|| async move {
        let (dbs, dir) = setup(&url).await;
        let mut tick_clock = World::new(dbs.fresh().await, dir.path()).await;
        tick_for(&mut tick_clock, 4).await;
        assert!(
            terminated(&tick_clock).await,
            "terminated on the tick's clock"
        );
        drop(tick_clock);

        let database_clock = Options {
            timers: Timers::Database,
            ..Options::default()
        };
        let store = dbs.fresh().await;
        let mut w = World::new(store, dir.path())
            .await
            .with_options(database_clock);
        tick_for(&mut w, 4).await;
        let m = w.migration().await.unwrap();
        assert_eq!(m.state, State::Done, "{:?}", m.steps.0.last());
        let current = m.current.clone().unwrap();
        assert_eq!(w.state_of(&current).await, Some(InstanceState::Running));
        assert_eq!(
            w.state_of(ORIGINAL).await,
            Some(InstanceState::Stopped),
            "kept: the database's clock has not seen keep_original_for pass"
        );

        sqlx::query(
            "UPDATE spot_migrations SET
                 state_since = state_since - interval '1 hour',
                 running_since = running_since - interval '1 hour',
                 steps = (SELECT jsonb_agg(jsonb_set(s, '{at}',
                              to_jsonb(to_char(((s->>'at')::timestamptz - interval '1 hour')
                                  AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"'))))
                          FROM jsonb_array_elements(steps) AS s)",
        )
        .execute(&dbs.pool)
        .await
        .unwrap();
        tick_for(&mut w, 1).await;
        assert!(
            terminated(&w).await,
            "terminated once the database's clock passed the wait"
        );
        let broken = check(&w, &w.migration().await.unwrap()).await;
        assert!(broken.is_empty(), "{broken:#?}");
        dbs.pool.close().await;
    });
}
