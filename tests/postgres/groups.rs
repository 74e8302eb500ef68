//! Auto Scaling groups on the simulated fleet with a real Postgres: a change whose answer was
//! lost is unknown, not failed, and is resolved from the group's real capacity once its call
//! can no longer be in flight, never by calling again; the group is then restored at the
//! opening from what Postgres remembers.

use crate::common;

use chrono::Duration;
use common::groups::{inference_group, BOX_BESIDE, OFFICE_POLICY};
use common::intercept::{Answer, Call, Intercept, Method};
use common::world::SimWorld;
use ebb::cloud::{CloudError, ScalingGroups};
use ebb::fleet::Capacity;
use ebb::reconcile::{GroupCounts, Options};
use ebb::store::{AuditFilter, Store};
use sqlx::PgPool;

const UP: Capacity = Capacity {
    min: 2,
    desired: 2,
    max: 4,
};

async fn capacity(world: &SimWorld) -> Capacity {
    let groups = world.cloud().scaling_groups("us-east-1").await.unwrap();
    groups[0].capacity
}

/// Each member of the group and whether its scale-in protection is on.
async fn protection(world: &SimWorld) -> Vec<(String, bool)> {
    let groups = world.cloud().scaling_groups("us-east-1").await.unwrap();
    groups[0]
        .members
        .iter()
        .map(|m| (m.id.clone(), m.protected_from_scale_in))
        .collect()
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
    let mut world = SimWorld::plan(BOX_BESIDE)
        .policy("office.yaml", OFFICE_POLICY)
        .options(Options {
            in_flight_for: Duration::minutes(7),
            ..Options::default()
        })
        .start_with(Store::from_pool(pool), |sim| {
            Intercept::new(sim.with_groups(vec![inference_group("inference", UP, &[])]))
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

    let report = world.tick("2026-11-30T19:05:00Z").await;
    let unknown = GroupCounts {
        listed: 1,
        unknown: 1,
        ..GroupCounts::default()
    };
    assert_eq!(
        report.groups, unknown,
        "the tick counts the group's change as unknown"
    );
    assert!(
        report
            .headline()
            .ends_with("; 1 Auto Scaling groups, 1 capacity changes (0 succeeded, 0 failed, 1 unknown, resolving), 0 interrupted group changes resolved"),
        "{}",
        report.headline()
    );
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
    let report = world.tick("2026-11-30T19:15:00Z").await;
    assert_eq!((report.groups.resolved, report.groups.succeeded), (1, 0));
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
    let report = world.tick("2026-12-01T09:00:00Z").await;
    assert_eq!(report.groups.succeeded, 1);
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

/// The rows of the groups' changes, with their reasons.
async fn group_reasons(world: &SimWorld) -> Vec<(String, String, String)> {
    let rows = world.store.audit(&AuditFilter::default()).await.unwrap();
    rows.iter()
        .filter(|r| r.entry.action.ends_with("_group"))
        .map(|r| {
            let e = &r.entry;
            (
                e.action.clone(),
                e.outcome.as_str().to_string(),
                e.reason.clone(),
            )
        })
        .collect()
}

#[sqlx::test(migrations = false)]
async fn a_persons_change_while_a_scale_down_is_unanswered_is_kept_until_the_opening(pool: PgPool) {
    let mut world = SimWorld::plan(BOX_BESIDE)
        .policy("office.yaml", OFFICE_POLICY)
        .options(Options {
            in_flight_for: Duration::minutes(7),
            ..Options::default()
        })
        .start_with(Store::from_pool(pool), |sim| {
            Intercept::new(sim.with_groups(vec![inference_group("inference", UP, &[])]))
        })
        .await;
    // The scale-down lands and its answer is lost; then a person sets the group to one box
    // for the night, straight at the cloud.
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
    let night = Capacity {
        min: 1,
        desired: 1,
        max: 4,
    };
    let person = world.cloud().inner.clone();
    person
        .set_group_capacity("us-east-1", "inference", night)
        .await
        .unwrap();

    // Resolved once the call cannot be in flight: neither ebb's capacity nor the one it
    // found, so not ebb's; the group is held down at the person's capacity, never scaled
    // down again.
    world.tick("2026-11-30T19:15:00Z").await;
    world.tick("2026-11-30T19:20:00Z").await;
    world.tick("2026-11-30T23:00:00Z").await;
    let rows = group_reasons(&world).await;
    assert_eq!(rows.len(), 2, "{rows:#?}");
    assert_eq!(
        (rows[1].0.as_str(), rows[1].1.as_str()),
        ("scale_down_group", "failed")
    );
    assert!(
        rows[1].2.contains("someone else changed it meanwhile") && rows[1].2.contains("held down"),
        "{rows:#?}"
    );
    assert_eq!(capacity(&world).await, night, "the person's change sticks");
    assert_eq!(
        world.cloud().ids_of(Method::SetGroupCapacity),
        ["inference"],
        "ebb made no second scale-down"
    );

    // The opening restores the capacity ebb found before its scale-down.
    world.tick("2026-12-01T09:00:00Z").await;
    assert_eq!(capacity(&world).await, UP);
    let rows = group_reasons(&world).await;
    assert_eq!(
        rows[2..]
            .iter()
            .map(|(a, o, _)| (a.as_str(), o.as_str()))
            .collect::<Vec<_>>(),
        [("restore_group", "intent"), ("restore_group", "succeeded")]
    );
}

/// The box beside and two g5.xlarge members of group `inference`: the simulated group's
/// members are the instances tagged with its name.
fn two_members() -> String {
    let member = |id: &str| {
        format!(
            "  - id: {id}\n    region: us-east-1\n    type: g5.xlarge\n    state: running\n    \
             tags: {{team: inference, \"aws:autoscaling:groupName\": inference}}\n"
        )
    };
    format!(
        "{BOX_BESIDE}{}{}",
        member("i-member-1"),
        member("i-member-2")
    )
}

/// Two members of a type the price table has, at $1.50 an hour.
const GROUP_PRICES: &str =
    "source: test\nas_of: today\nprices:\n  us-east-1:\n    g5.xlarge: 1.5\n";

#[sqlx::test(migrations = false)]
async fn ebb_report_counts_a_groups_scaled_down_members_hours_and_dollars(pool: PgPool) {
    let fleet = two_members();
    let group = inference_group("inference", UP, &[]);
    let mut world = SimWorld::plan(&fleet)
        .policy("office.yaml", OFFICE_POLICY)
        .start_with(Store::from_pool(pool.clone()), |sim| {
            Intercept::new(sim.with_groups(vec![group]))
        })
        .await;
    // Down Monday 19:00, back Tuesday 09:00: 14 h × 2 members = 28 instance-hours, × $1.50 =
    // $42: 5 h × 2 × $1.50 = $15 on Monday, 9 h × 2 × $1.50 = $27 on Tuesday.
    world.tick("2026-11-30T19:00:00Z").await;
    world.tick("2026-12-01T09:00:00Z").await;
    assert_eq!(capacity(&world).await, UP);

    let dir = tempfile::tempdir().unwrap();
    let prices = dir.path().join("prices.yaml");
    std::fs::write(&prices, GROUP_PRICES).unwrap();
    let report = |format: &str| {
        let out = common::Ebb::on(&common::database_url(&pool))
            .env("EBB_PRICES", &prices)
            .env_remove("EBB_CLOUD")
            .run(&[
                "report",
                "--since",
                "2026-11-30T00:00:00Z",
                "--until",
                "2026-12-02T00:00:00Z",
                "--at",
                "2026-12-10T00:00:00Z",
                "--format",
                format,
            ]);
        assert!(out.status.success(), "{out:?}");
        String::from_utf8(out.stdout).unwrap()
    };
    let json: serde_json::Value = serde_json::from_str(&report("json")).unwrap();
    let total = &json["total"];
    assert_eq!(total["group_scale_downs"], 1, "{json:#}");
    assert_eq!(total["group_hours"], 28.0);
    assert_eq!(total["group_saved_usd"], 42.0);
    assert_eq!(total["saved_usd"], 42.0);
    assert_eq!(json["groups"][0]["group"], "inference");
    assert_eq!(json["groups"][0]["region"], "us-east-1");
    assert_eq!(json["groups"][0]["group_hours"], 28.0);
    assert_eq!(json["policies"][0]["policy"], "office");
    assert_eq!(json["days"][0]["group_saved_usd"], 15.0);
    assert_eq!(json["days"][1]["group_saved_usd"], 27.0);

    let table = report("table");
    assert!(
        table.contains(
            "Auto Scaling groups: $42.00 by scaling 1 group down (1 scale-down), 28.00 instance-hours"
        ),
        "{table}"
    );
    assert!(
        table.contains("\nasg     us-east-1/inference  42.00"),
        "{table}"
    );
}

/// With `group.protect_members`, a scale-down around a member with an override: a dry run
/// decides it and protects nothing, and ebb remembers no member as protected by it (a restore
/// would otherwise take off a protection someone else put on meanwhile); for real, the member
/// is protected and remembered, the other ended, and the restore takes the protection off.
#[sqlx::test(migrations = false)]
async fn a_scale_down_around_a_kept_member_remembers_only_what_ebb_protected(pool: PgPool) {
    let fleet = two_members();
    let policy = format!("{OFFICE_POLICY}    group: {{protect_members: true}}\n");
    let store = Store::from_pool(pool.clone());
    store.migrate().await.unwrap();
    store
        .create_override(
            "i-member-2",
            common::t("2026-12-05T00:00:00Z"),
            "training run",
            "alice",
            common::t("2026-11-30T12:00:00Z"),
        )
        .await
        .unwrap();
    let remembered = || async {
        let protected: Vec<String> =
            sqlx::query_scalar("SELECT protected FROM scaling_groups WHERE name = 'inference'")
                .fetch_one(&pool)
                .await
                .unwrap();
        protected
    };

    let mut dry = SimWorld::plan(&fleet)
        .policy("office.yaml", &policy)
        .options(Options {
            dry_run: true,
            ..Options::default()
        })
        .start_with(store.clone(), |sim| {
            Intercept::new(sim.with_groups(vec![inference_group("inference", UP, &[])]))
        })
        .await;
    dry.tick("2026-11-30T19:00:00Z").await;
    assert_eq!(capacity(&dry).await, UP, "a dry run changes nothing");
    assert!(protection(&dry).await.iter().all(|(_, p)| !p));
    assert!(remembered().await.is_empty(), "nothing protected by ebb");
    drop(dry);

    let mut world = SimWorld::plan(&fleet)
        .policy("office.yaml", &policy)
        .start_with(store.clone(), |sim| {
            Intercept::new(sim.with_groups(vec![inference_group("inference", UP, &[])]))
        })
        .await;
    world.tick("2026-11-30T19:00:00Z").await;
    let one = Capacity {
        min: 1,
        desired: 1,
        max: 4,
    };
    assert_eq!(capacity(&world).await, one);
    assert_eq!(remembered().await, ["i-member-2"]);
    assert!(protection(&world)
        .await
        .contains(&("i-member-2".to_string(), true)));
    world.tick("2026-12-01T09:00:00Z").await;
    assert_eq!(capacity(&world).await, UP);
    assert!(remembered().await.is_empty(), "the protection taken off");
    assert!(protection(&world)
        .await
        .contains(&("i-member-2".to_string(), false)));
}
