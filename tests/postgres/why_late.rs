//! Why a stop came late: a box busy past the close is kept while its GPU is busy
//! (`busy_deferred`), and the stop that follows says how long it waited and since when, in its
//! decision and in its audit row, which is what `ebb audit --instance` shows.

use crate::common::{t, world::SimWorld};
use ebb::clock::Clock;
use ebb::store::{AuditFilter, Store};
use sqlx::PgPool;

const POLICY: &str = r#"
policies:
  - name: office
    match: {tags: {team: research}}
    work_hours:
      timezone: UTC
      periods: [{days: mon-fri, start: "09:00", stop: "19:00"}]
      outside_hours: stop
"#;

/// A training run from 08:00 to 21:00 on Monday.
const FLEET: &str = r#"
instances:
  - {id: i-train, region: us-east-1, type: g5.xlarge, state: running, launched_at: "2026-11-30T07:00:00Z", tags: {team: research}, sim: {usage: training, runs: [{start: "2026-11-30T08:00:00Z", hours: 13}]}}
"#;

#[sqlx::test(migrations = false)]
async fn a_stop_that_waited_for_a_busy_gpu_says_how_long(pool: PgPool) {
    let store = Store::from_pool(pool);
    // The simulator's clock stands after every tick, so its readings reach each tick's time.
    let mut w = SimWorld::plan(FLEET)
        .policy("office.yaml", POLICY)
        .clock(Clock::Fixed(t("2026-12-01T00:00:00Z")))
        .start(store.clone())
        .await;
    for at in ["2026-11-30T19:00:00Z", "2026-11-30T20:00:00Z"] {
        let report = w.tick(at).await;
        assert!(report.actions.is_empty(), "{at}: {:?}", report.actions);
        let code = store
            .instance("i-train")
            .await
            .unwrap()
            .unwrap()
            .decided_code;
        assert_eq!(code.as_deref(), Some("busy_deferred"), "{at}");
    }
    let report = w.tick("2026-11-30T21:15:00Z").await;
    let stop = &report.actions[0].decision;
    assert_eq!(
        (stop.action.as_str(), stop.code.as_str()),
        ("stop", "outside_hours")
    );
    let why = "waited 2h15m while the GPU was busy (since 19:00 UTC)";
    assert!(stop.reason.contains(why), "{}", stop.reason);
    let rows = store
        .audit(&AuditFilter {
            instance: Some("i-train".into()),
            action: Some("stop".into()),
            ..AuditFilter::default()
        })
        .await
        .unwrap();
    assert!(
        !rows.is_empty() && rows.iter().all(|r| r.entry.reason.contains(why)),
        "{rows:?}"
    );
}
