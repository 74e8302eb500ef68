//! Auto Scaling groups on the simulated fleet with a real Postgres: a change whose answer was
//! lost is unknown, not failed, and is resolved from the group's real capacity once its call
//! can no longer be in flight, never by calling again; the group is then restored at the
//! opening from what Postgres remembers.

use crate::common;

use chrono::Duration;
use common::intercept::{Answer, Call, Intercept, Method};
use common::world::SimWorld;
use ebb::cloud::{CloudError, Provider};
use ebb::fleet::{Capacity, ScalingGroup};
use ebb::reconcile::Options;
use ebb::store::{AuditFilter, Store};
use sqlx::PgPool;

const POLICY: &str = r#"
policies:
  - name: office
    match: {tags: {team: inference}}
    work_hours:
      timezone: UTC
      periods:
        - {days: mon-fri, start: "09:00", stop: "19:00"}
      busy_defers_stop: false
"#;

/// A box beside the group, so that us-east-1 is listed.
const FLEET: &str = r#"
instances:
  - id: i-beside
    region: us-east-1
    type: g5.xlarge
    state: running
    tags: {team: other}
"#;

const UP: Capacity = Capacity {
    min: 2,
    desired: 2,
    max: 4,
};

fn inference() -> ScalingGroup {
    ScalingGroup {
        name: "inference".to_string(),
        region: "us-east-1".to_string(),
        tags: [("team", "inference"), ("ebb:managed", "true")]
            .into_iter()
            .collect(),
        capacity: UP,
        members: Vec::new(),
    }
}

async fn capacity(world: &SimWorld) -> Capacity {
    let groups = world.cloud().scaling_groups("us-east-1").await.unwrap();
    groups[0].capacity
}

async fn group_rows(world: &SimWorld) -> Vec<(String, String)> {
    let rows = world.store.audit(&AuditFilter::default()).await.unwrap();
    rows.iter()
        .filter(|r| r.entry.action.ends_with("_group"))
        .map(|r| (r.entry.action.clone(), r.entry.outcome.as_str().to_string()))
        .collect()
}

#[sqlx::test(migrations = false)]
async fn a_lost_answer_is_resolved_from_the_groups_capacity_and_not_called_again(pool: PgPool) {
    let mut world = SimWorld::plan(FLEET)
        .policy("office.yaml", POLICY)
        .options(Options {
            in_flight_for: Duration::minutes(7),
            ..Options::default()
        })
        .start_with(Store::from_pool(pool), |sim| {
            Intercept::new(sim.with_groups(vec![inference()]))
        })
        .await;
    // The first scale-down lands, and its answer is lost.
    let mut lose = true;
    world.cloud().after(
        Method::SetGroupCapacity,
        move |_call: &Call, answer: &mut Answer| {
            if std::mem::take(&mut lose) {
                *answer = Answer::Requested(Err(CloudError::timed_out("UpdateAutoScalingGroup")));
            }
        },
    );

    world.tick("2026-11-30T19:05:00Z").await;
    let zero = Capacity {
        min: 0,
        desired: 0,
        max: 4,
    };
    assert_eq!(capacity(&world).await, zero, "the call landed");
    assert_eq!(
        group_rows(&world).await,
        [("scale_down_group".to_string(), "intent".to_string())],
        "unknown, not failed"
    );

    // While the call may be in flight, the group is left alone and the intent stays open.
    world.tick("2026-11-30T19:10:00Z").await;
    assert_eq!(group_rows(&world).await.len(), 1);

    // Later, the intent is resolved from the group's capacity: succeeded, without a new call.
    world.tick("2026-11-30T19:15:00Z").await;
    assert_eq!(
        group_rows(&world).await,
        [
            ("scale_down_group".to_string(), "intent".to_string()),
            ("scale_down_group".to_string(), "succeeded".to_string()),
        ]
    );
    let set_calls = world.cloud().ids_of(Method::SetGroupCapacity);
    assert_eq!(set_calls, ["inference"], "never called again");

    // The opening restores what ebb found, since it knows the group is down because of it.
    world.tick("2026-12-01T09:00:00Z").await;
    assert_eq!(capacity(&world).await, UP);
    let rows = group_rows(&world).await;
    assert_eq!(
        rows[2..],
        [
            ("restore_group".to_string(), "intent".to_string()),
            ("restore_group".to_string(), "succeeded".to_string()),
        ]
    );
}
