//! EKS managed node groups on the simulated fleet with a real Postgres: a node group's group is
//! changed through EKS (UpdateNodegroupConfig, never UpdateAutoScalingGroup), and the change's
//! one outcome waits for DescribeUpdate: `Successful` succeeded with the update id, `Failed`
//! failed with EKS's errors, `InProgress` asked again at the next tick. An update that cannot
//! be read (moto's 404) and a change whose answer was lost are unknown, resolved from the node
//! group's scaling config once the call can no longer be in flight, never by calling again.

use crate::common;

use chrono::Duration;
use common::groups::{inference_group, BOX_BESIDE, OFFICE_POLICY};
use common::intercept::{Answer, Call, Intercept, Method};
use common::world::SimWorld;
use ebb::cloud::{CloudError, NodeGroupUpdate, ScalingGroups, UpdateStatus};
use ebb::fleet::{Capacity, ScalingGroup};
use ebb::reconcile::Options;
use ebb::store::{AuditEntry, AuditFilter, Store};
use sqlx::PgPool;

const UP: Capacity = Capacity {
    min: 1,
    desired: 2,
    max: 3,
};

const FLOOR: Capacity = Capacity {
    min: 0,
    desired: 0,
    max: 3,
};

/// The Auto Scaling group of EKS node group `gpu` of cluster `prod`, opted in.
fn node_group() -> ScalingGroup {
    let eks = [("eks:cluster-name", "prod"), ("eks:nodegroup-name", "gpu")];
    inference_group("eks-gpu-1234", UP, &eks)
}

async fn world(pool: PgPool) -> SimWorld {
    SimWorld::plan(BOX_BESIDE)
        .policy("office.yaml", OFFICE_POLICY)
        .options(Options {
            in_flight_for: Duration::minutes(7),
            ..Options::default()
        })
        .start_with(Store::from_pool(pool), |sim| {
            Intercept::new(sim.with_groups(vec![node_group()]))
        })
        .await
}

async fn capacity(world: &SimWorld) -> Capacity {
    let groups = world.cloud().scaling_groups("us-east-1").await.unwrap();
    groups[0].capacity
}

async fn group_rows(world: &SimWorld) -> Vec<AuditEntry> {
    let rows = world.store.audit(&AuditFilter::default()).await.unwrap();
    rows.into_iter()
        .filter(|r| r.entry.action.ends_with("_group"))
        .collect()
}

/// The rows' (action, outcome).
fn outcomes(rows: &[AuditEntry]) -> Vec<(String, String)> {
    rows.iter()
        .map(|r| (r.entry.action.clone(), r.entry.outcome.as_str().to_string()))
        .collect()
}

fn row(action: &str, outcome: &str) -> (String, String) {
    (action.to_string(), outcome.to_string())
}

/// EKS answers DescribeUpdate with `status` (and `errors`) for the next `times` reads.
fn eks_says(world: &SimWorld, status: UpdateStatus, errors: &[&str], times: u32) {
    let errors: Vec<String> = errors.iter().map(|e| e.to_string()).collect();
    let mut left = times;
    world.cloud().after(
        Method::NodeGroupUpdate,
        move |_call: &Call, answer: &mut Answer| {
            if left > 0 {
                left -= 1;
                *answer = Answer::Update(Ok(NodeGroupUpdate {
                    status,
                    errors: errors.clone(),
                }));
            }
        },
    );
}

#[sqlx::test(migrations = false)]
async fn a_node_group_is_changed_through_eks_and_its_outcome_waits_for_the_update(pool: PgPool) {
    let mut world = world(pool).await;
    eks_says(&world, UpdateStatus::InProgress, &[], 1);

    world.tick("2026-11-30T19:05:00Z").await;
    assert_eq!(capacity(&world).await, FLOOR);
    assert_eq!(
        world.cloud().ids_of(Method::SetNodeGroupCapacity),
        ["eks-gpu-1234"]
    );
    assert!(
        world.cloud().ids_of(Method::SetGroupCapacity).is_empty(),
        "never UpdateAutoScalingGroup, which EKS would undo"
    );
    let rows = group_rows(&world).await;
    assert_eq!(
        outcomes(&rows),
        [row("scale_down_group", "intent")],
        "in progress"
    );
    assert!(
        rows[0].entry.reason.contains("EKS node group prod/gpu"),
        "{}",
        rows[0].entry.reason
    );

    // The next tick asks again, and EKS says it is done: the outcome carries the update id.
    world.tick("2026-11-30T19:06:00Z").await;
    let rows = group_rows(&world).await;
    assert_eq!(
        outcomes(&rows),
        [
            row("scale_down_group", "intent"),
            row("scale_down_group", "succeeded")
        ]
    );
    assert_eq!(rows[1].entry.request_id.as_deref(), Some("sim-update-1"));
    assert_eq!(rows[1].entry.intent_seq, Some(rows[0].seq));
    assert_eq!(world.cloud().ids_of(Method::SetNodeGroupCapacity).len(), 1);

    // At the opening the capacity found comes back through EKS, done at once.
    world.tick("2026-12-01T09:00:00Z").await;
    assert_eq!(capacity(&world).await, UP);
    let rows = group_rows(&world).await;
    assert_eq!(
        outcomes(&rows[2..]),
        [
            row("restore_group", "intent"),
            row("restore_group", "succeeded")
        ]
    );
    assert_eq!(rows[3].entry.request_id.as_deref(), Some("sim-update-2"));
    assert!(world.cloud().ids_of(Method::SetGroupCapacity).is_empty());
}

#[sqlx::test(migrations = false)]
async fn a_failed_update_is_a_failed_outcome_with_ekss_errors(pool: PgPool) {
    let mut world = world(pool).await;
    eks_says(
        &world,
        UpdateStatus::Failed,
        &["AsgInstanceLaunchFailures: Could not launch On-Demand Instances"],
        1,
    );
    world.tick("2026-11-30T19:05:00Z").await;
    let rows = group_rows(&world).await;
    assert_eq!(
        outcomes(&rows),
        [
            row("scale_down_group", "intent"),
            row("scale_down_group", "failed")
        ]
    );
    let error = rows[1].entry.error.clone().unwrap();
    assert!(error.contains("Failed"), "{error}");
    assert!(
        error.contains("Could not launch On-Demand Instances"),
        "{error}"
    );
}

#[sqlx::test(migrations = false)]
async fn a_cancelled_update_is_a_failed_outcome(pool: PgPool) {
    let mut world = world(pool).await;
    eks_says(&world, UpdateStatus::Cancelled, &[], 1);
    world.tick("2026-11-30T19:05:00Z").await;
    let rows = group_rows(&world).await;
    assert_eq!(outcomes(&rows)[1], row("scale_down_group", "failed"));
    let error = rows[1].entry.error.clone().unwrap();
    assert!(error.contains("Cancelled"), "{error}");
}

#[sqlx::test(migrations = false)]
async fn an_update_that_cannot_be_read_is_unknown_then_resolved_from_the_scaling_config(
    pool: PgPool,
) {
    let mut world = world(pool).await;
    // As moto answers DescribeUpdate, which it lacks: 404.
    world.cloud().refuse(
        Method::NodeGroupUpdate,
        CloudError::not_found("DescribeUpdate", "404", "HTTP 404"),
    );

    world.tick("2026-11-30T19:05:00Z").await;
    assert_eq!(capacity(&world).await, FLOOR, "the change landed");
    assert_eq!(
        outcomes(&group_rows(&world).await),
        [row("scale_down_group", "intent")],
        "a failed read is no success"
    );
    world.tick("2026-11-30T19:10:00Z").await;
    assert_eq!(group_rows(&world).await.len(), 1, "may still be in flight");
    assert!(world.cloud().ids_of(Method::NodeGroupCapacity).is_empty());

    world.tick("2026-11-30T19:15:00Z").await;
    let rows = group_rows(&world).await;
    assert_eq!(
        outcomes(&rows),
        [
            row("scale_down_group", "intent"),
            row("scale_down_group", "succeeded")
        ]
    );
    let reason = &rows[1].entry.reason;
    assert!(reason.contains("could not be read"), "{reason}");
    assert!(reason.contains("scaling config"), "{reason}");
    assert_eq!(world.cloud().ids_of(Method::SetNodeGroupCapacity).len(), 1);

    // Held down by ebb, it is put back at the opening.
    world.tick("2026-12-01T09:00:00Z").await;
    assert_eq!(capacity(&world).await, UP);
}

#[sqlx::test(migrations = false)]
async fn a_lost_answer_is_resolved_from_the_scaling_config_and_not_sent_again(pool: PgPool) {
    let mut world = world(pool).await;
    // The change lands, and its answer (with the update id) is lost.
    let mut lose = true;
    world.cloud().after(
        Method::SetNodeGroupCapacity,
        move |_call: &Call, answer: &mut Answer| {
            if std::mem::take(&mut lose) {
                *answer = Answer::Requested(Err(CloudError::timed_out("UpdateNodegroupConfig")));
            }
        },
    );
    world.tick("2026-11-30T19:05:00Z").await;
    assert_eq!(capacity(&world).await, FLOOR);
    assert_eq!(
        outcomes(&group_rows(&world).await),
        [row("scale_down_group", "intent")]
    );
    assert!(
        world.cloud().ids_of(Method::NodeGroupUpdate).is_empty(),
        "no update id to ask about"
    );

    world.tick("2026-11-30T19:15:00Z").await;
    let rows = group_rows(&world).await;
    assert_eq!(outcomes(&rows)[1], row("scale_down_group", "succeeded"));
    assert!(
        rows[1].entry.reason.contains("answer"),
        "{}",
        rows[1].entry.reason
    );
    assert_eq!(world.cloud().ids_of(Method::SetNodeGroupCapacity).len(), 1);
}

#[sqlx::test(migrations = false)]
async fn a_lost_call_that_never_landed_is_failed_from_the_scaling_config(pool: PgPool) {
    let mut world = world(pool).await;
    // The call times out before EKS took it: nothing changed.
    world.cloud().refuse_next(
        Method::SetNodeGroupCapacity,
        1,
        CloudError::timed_out("UpdateNodegroupConfig"),
    );
    world.tick("2026-11-30T19:05:00Z").await;
    assert_eq!(capacity(&world).await, UP);
    world.tick("2026-11-30T19:15:00Z").await;
    let rows = group_rows(&world).await;
    assert_eq!(outcomes(&rows)[1], row("scale_down_group", "failed"));
    let error = rows[1].entry.error.clone().unwrap();
    assert!(error.contains("not min 0 desired 0 max 3"), "{error}");
}
