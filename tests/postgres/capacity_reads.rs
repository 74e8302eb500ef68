//! The capacity reservations held outside ebb, read hourly by the leader and kept in Postgres
//! (issue 45 point 1): each successful read is kept with every reservation's size and use, a
//! read is made at most once an hour per region, and a failed read keeps nothing, so that its
//! hours are unread in `ebb advise` (counted neither used nor unused), never zero. On the
//! simulated fleet with a real Postgres; the cloud's answers are the test's.

use crate::common;

use common::intercept::{Answer, Call, Method};
use common::t;
use common::world::SimWorld;
use ebb::advise::reservations::reservation_use;
use ebb::advise::Period;
use ebb::cloud::CloudError;
use ebb::fleet::{HeldCapacity, ReservationKind};
use ebb::store::Store;
use sqlx::PgPool;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

const FLEET: &str = r#"
instances:
  - id: i-0a
    region: us-east-1
    type: p5.48xlarge
    state: running
    tags: {team: research}
"#;

/// Office hours: the box is left running through the test's ticks.
const POLICY: &str = r#"
policies:
  - name: office
    match: {tags: {team: research}}
    work_hours:
      timezone: UTC
      periods: [{days: mon-fri, start: "09:00", stop: "19:00"}]
"#;

/// Three p5.48xlarge held in us-east-1a, `available` of them unused.
fn held(available: u32) -> HeldCapacity {
    HeldCapacity {
        id: "cr-0held".to_string(),
        instance_type: "p5.48xlarge".to_string(),
        zone: "us-east-1a".to_string(),
        platform: "Linux/UNIX".to_string(),
        kind: ReservationKind::CapacityReservation,
        total: 3,
        available,
        targeted: true,
        end: None,
    }
}

#[sqlx::test(migrations = false)]
async fn reads_are_kept_hourly_and_a_failed_read_leaves_its_hours_unread(pool: PgPool) {
    let mut world = SimWorld::plan(FLEET)
        .policy("office.yaml", POLICY)
        .start(Store::from_pool(pool))
        .await;
    // What the cloud answers at each read: a size and use, or a failure.
    let answers: Arc<Mutex<Vec<Result<u32, ()>>>> =
        Arc::new(Mutex::new(vec![Ok(2), Err(()), Err(()), Ok(1)]));
    let next = answers.clone();
    world.cloud().after(
        Method::HeldCapacity,
        move |_call: &Call, answer: &mut Answer| {
            *answer = Answer::HeldCapacity(match next.lock().unwrap().remove(0) {
                Ok(available) => Ok(vec![held(available)]),
                Err(()) => Err(CloudError::timed_out("DescribeCapacityReservations")),
            });
        },
    );

    world.tick("2026-12-01T10:00:00Z").await;
    // Within the hour: not read again.
    world.tick("2026-12-01T10:30:00Z").await;
    let reads_made = |world: &SimWorld| {
        let calls = world.cloud().calls();
        calls
            .iter()
            .filter(|c| c.method == Method::HeldCapacity)
            .count()
    };
    assert_eq!(reads_made(&world), 1);
    world.tick("2026-12-01T11:00:00Z").await;
    world.tick("2026-12-01T12:00:00Z").await;
    world.tick("2026-12-01T13:00:00Z").await;
    assert_eq!(reads_made(&world), 4);
    assert!(answers.lock().unwrap().is_empty());

    let period = Period {
        from: t("2026-12-01T10:00:00Z"),
        to: t("2026-12-01T15:00:00Z"),
    };
    let reads = world
        .store
        .capacity_reads(period.from, period.to)
        .await
        .unwrap();
    let kept: Vec<_> = reads.iter().map(|r| (r.region.as_str(), r.at)).collect();
    assert_eq!(
        kept,
        [
            ("us-east-1", t("2026-12-01T10:00:00Z")),
            ("us-east-1", t("2026-12-01T13:00:00Z"))
        ],
        "the failed reads kept nothing"
    );
    assert_eq!(reads[1].reservations, [held(1)]);
    let outside = BTreeMap::from([("p5.48xlarge".to_string(), vec!["i-0a".to_string()])]);
    assert_eq!(
        reads[1].ran_outside, outside,
        "the listing's box, in no reservation"
    );

    // The 10:00 read stands for two hours, the 13:00 one for two: 12:00 to 13:00 is unread.
    let on_demand = BTreeMap::from([(
        "us-east-1".to_string(),
        BTreeMap::from([("p5.48xlarge".to_string(), 55.04)]),
    )]);
    let used = reservation_use(&reads, &period, &on_demand);
    assert_eq!(used.hours_read["us-east-1"], 4.0);
    let [idle] = used.idle.as_slice() else {
        panic!("{used:?}")
    };
    assert_eq!(
        (idle.paid_hours, idle.unused_hours),
        (12.0, 2.0 * 2.0 + 2.0)
    );
    assert!((idle.unused_usd.unwrap() - 6.0 * 55.04).abs() < 1e-9);
    assert_eq!(idle.could_use, ["i-0a"]);
}
