//! Capacity reservations held outside ebb (issue 45 point 1), made in moto by the test, not by
//! ebb: a box running in one is not stopped at the close (`reserved_no_saving`, the reason
//! naming the reservation and its end) unless the policy sets `stop.in_reservation: stop`; a box
//! in a reservation ebb made (tagged with its token) is not held; the inventory snapshot
//! carries the reservation for `ebb plan`; a stop inside it saves nothing in `ebb report`; and
//! `ebb advise` counts the reserved hours no instance used from the hourly reads.

use super::tick::{Setup, EVENING, LATER, POLICY};
use crate::common;

use aws_sdk_ec2::types::{
    CapacityReservationInstancePlatform, CapacityReservationSpecification,
    CapacityReservationTarget, EndDateType, InstanceStateName, ResourceType, Tag, TagSpecification,
};
use common::moto::G5;
use serde_json::Value;
use sqlx::PgPool;

/// When the test's reservations end.
const END: &str = "2030-01-31T00:00:00Z";

/// A reservation of `size` instances of `id`'s type and zone, tagged `tags` (none: someone
/// else's), and `id` made to run in it: stopped, targeted at it, started. Returns the
/// reservation's id.
async fn run_in_reservation(s: &Setup, id: &str, tags: &[(&str, &str)], size: i32) -> String {
    let ec2 = &s.f.ec2;
    let listed = ec2
        .describe_instances()
        .instance_ids(id)
        .send()
        .await
        .unwrap();
    let instance = &listed.reservations()[0].instances()[0];
    let zone = instance.placement().unwrap().availability_zone().unwrap();
    let mut spec = TagSpecification::builder().resource_type(ResourceType::CapacityReservation);
    for (key, value) in tags {
        spec = spec.tags(Tag::builder().key(*key).value(*value).build());
    }
    let made = ec2
        .create_capacity_reservation()
        .instance_type(G5.instance_type)
        .instance_platform(CapacityReservationInstancePlatform::LinuxUnix)
        .availability_zone(zone)
        .instance_count(size)
        .end_date_type(EndDateType::Limited)
        .end_date(aws_sdk_ec2::primitives::DateTime::from_secs(
            chrono::DateTime::parse_from_rfc3339(END)
                .unwrap()
                .timestamp(),
        ))
        .tag_specifications(spec.build())
        .send()
        .await
        .unwrap();
    let reservation = made
        .capacity_reservation()
        .unwrap()
        .capacity_reservation_id()
        .unwrap()
        .to_string();
    ec2.stop_instances().instance_ids(id).send().await.unwrap();
    let target = CapacityReservationTarget::builder()
        .capacity_reservation_id(&reservation)
        .build();
    ec2.modify_instance_capacity_reservation_attributes()
        .instance_id(id)
        .capacity_reservation_specification(
            CapacityReservationSpecification::builder()
                .capacity_reservation_target(target)
                .build(),
        )
        .send()
        .await
        .unwrap();
    ec2.start_instances().instance_ids(id).send().await.unwrap();
    reservation
}

#[sqlx::test(migrations = false)]
async fn a_box_in_a_reservation_held_outside_ebb_is_kept_unless_the_policy_frees_it(pool: PgPool) {
    let s = Setup::new(&pool, "us-east-2").await;
    let held = s.f.launch(G5).await;
    let in_ebbs = s.f.launch(G5).await;
    let plain = s.f.launch(G5).await;
    let reservation = run_in_reservation(&s, &held, &[], 1).await;
    run_in_reservation(&s, &in_ebbs, &[("ebb:reservation", "a-token")], 1).await;

    // The inventory reads which reservation each box runs in, and what it is: the snapshot
    // carries the one held outside ebb, not ebb's own.
    let out = s.ebb().run(&["inventory", "--format", "json"]);
    assert!(out.status.success(), "{out:?}");
    let snapshot: Value = serde_json::from_slice(&out.stdout).unwrap();
    let of = |id: &str| {
        snapshot["instances"]
            .as_array()
            .unwrap()
            .iter()
            .find(|i| i["id"] == id)
            .unwrap_or_else(|| panic!("{id} in {snapshot:#}"))
            .clone()
    };
    assert_eq!(
        of(&held)["capacity_reservation"],
        serde_json::json!({"id": reservation, "kind": "capacity-reservation", "end": END}),
        "{snapshot:#}"
    );
    assert_eq!(of(&in_ebbs)["capacity_reservation"], Value::Null);
    assert_eq!(of(&plain)["capacity_reservation"], Value::Null);
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("fleet.json");
    std::fs::write(&file, &out.stdout).unwrap();
    let plan = s.ebb().run(&[
        "explain",
        &held,
        "--policies",
        s.policies.path().to_str().unwrap(),
        "--fleet",
        file.to_str().unwrap(),
        "--at",
        EVENING,
    ]);
    let text = String::from_utf8_lossy(&plan.stdout);
    assert!(plan.status.success(), "{plan:?}");
    assert!(text.contains("reserved_no_saving"), "{text}");
    assert!(
        text.contains(&format!(
            "it runs in capacity reservation {reservation} (ending 2030-01-31T00:00Z)"
        )),
        "{text}"
    );

    // At the close the other two are stopped; the held one is not.
    let evening = s.tick(EVENING, &[]);
    assert!(evening.contains("2 actions (2 succeeded"), "{evening}");
    assert_eq!(s.state(&held).await, InstanceStateName::Running);
    assert_eq!(s.state(&in_ebbs).await, InstanceStateName::Stopped);
    assert_eq!(s.state(&plain).await, InstanceStateName::Stopped);

    // A policy that frees reserved capacity for other boxes stops it.
    let freeing = format!("{POLICY}    stop: {{in_reservation: stop}}\n");
    std::fs::write(s.policies.path().join("research.yaml"), freeing).unwrap();
    let later = s.tick(LATER, &[]);
    assert!(later.contains("1 actions (1 succeeded"), "{later}");
    assert_eq!(s.state(&held).await, InstanceStateName::Stopped);
    let stops = s.audit(&held, "stop");
    assert_eq!(stops[1]["code"], "stopped_in_reservation", "{stops:#?}");
    assert!(s.ebb().run(&["audit", "verify"]).status.success());

    // The report counts the three stops in the gross; the reservation paid for the held box's
    // hours, so they come off the net: 3 h 55 min of its 11 h 55 min stopped to midnight.
    let out = s.ebb().run(&[
        "report",
        "--since",
        "2026-11-30T00:00:00Z",
        "--until",
        "2026-12-01T00:00:00Z",
        "--format",
        "json",
    ]);
    assert!(out.status.success(), "{out:?}");
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    let total = |key: &str| report["total"][key].as_f64().unwrap();
    assert_eq!(total("stopped_hours"), 11.92, "{report:#}");
    let per_hour = total("saved_usd") / (4.0 + 4.0 + 235.0 / 60.0);
    assert!(per_hour > 0.0, "g5.xlarge is priced in {}", s.f.region);
    let reserved = total("reserved_covered_usd");
    assert!(
        (reserved - per_hour * 235.0 / 60.0).abs() < 0.01,
        "{reserved} in {report:#}"
    );
    assert!(
        (total("net_saved_usd") - (total("saved_usd") - reserved)).abs() < 0.011,
        "{report:#}"
    );
}

#[sqlx::test(migrations = false)]
async fn ebb_advise_counts_a_reservations_unused_hours_and_the_boxes_that_could_use_it(
    pool: PgPool,
) {
    let s = Setup::new(&pool, "us-west-2").await;
    let held = s.f.launch(G5).await;
    let outside = s.f.launch(G5).await;
    // Three g5.xlarge held; one box runs in it, so two are paid for and unused.
    let reservation = run_in_reservation(&s, &held, &[], 3).await;

    // Within work hours, an hour apart: each tick reads the region's reservations once.
    s.tick("2026-12-01T09:05:00Z", &[]);
    s.tick("2026-12-01T10:05:00Z", &[]);
    assert_eq!(s.state(&held).await, InstanceStateName::Running);

    let out = s.ebb().run(&[
        "advise",
        "--from",
        "2026-12-01T09:05:00Z",
        "--to",
        "2026-12-01T11:05:00Z",
        "--format",
        "json",
    ]);
    assert!(out.status.success(), "{out:?}");
    let advice: Value = serde_json::from_slice(&out.stdout).unwrap();
    let reservations = &advice["reservations"];
    assert_eq!(reservations["hours_read"]["us-west-2"], 2.0, "{advice:#}");
    let idle = reservations["idle"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["reservation"] == reservation.as_str())
        .unwrap_or_else(|| panic!("{reservation} in {advice:#}"));
    assert_eq!(idle["size"], 3);
    assert_eq!(idle["paid_hours"], 6.0);
    assert_eq!(idle["unused_hours"], 4.0);
    assert_eq!(
        idle["unused_usd"], 4.02,
        "four hours of g5.xlarge at $1.006"
    );
    assert_eq!(idle["could_use"], serde_json::json!([outside]));

    // The table says the same, and that the reads are what it counts from.
    let out = s.ebb().run(&[
        "advise",
        "--from",
        "2026-12-01T09:05:00Z",
        "--to",
        "2026-12-01T11:05:00Z",
    ]);
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(table.contains("read for us-west-2 2 of 2 h"), "{table}");
    assert!(
        table
            .lines()
            .any(|l| l.starts_with(&reservation) && l.contains("$4.02")),
        "{table}"
    );
}
