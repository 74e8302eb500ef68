//! The console's group page over real HTTP and a real Postgres, after ticks of the reconciler
//! on the simulated fleet have scaled an Auto Scaling group down at the close and back at the
//! opening: its capacity now and remembered, its window, what ebb decides now, its capacity
//! over time, its members and its changes; and the links to it from the fleet page and from a
//! member's page.

use crate::common;
use crate::console::Console;

use common::t;
use common::world::SimWorld;
use ebb::clock::Clock;
use ebb::fleet::{Capacity, ScalingGroup};
use ebb::store::Store;
use reqwest::StatusCode;
use sqlx::PgPool;

/// Berlin's office hours: 07:00-18:00 UTC in winter.
const POLICY: &str = r#"
policies:
  - name: inference-hours
    match: {tags: {team: inference}}
    work_hours:
      timezone: Europe/Berlin
      periods:
        - {days: mon-fri, start: "08:00", stop: "19:00"}
      busy_defers_stop: false
"#;

/// The group's two members (tagged by the group, as EC2 Auto Scaling tags them) and a box
/// beside them.
const FLEET: &str = r#"
instances:
  - id: i-0member1
    region: eu-central-1
    type: g5.2xlarge
    state: running
    launched_at: 2026-11-30T06:00:00Z
    tags: {team: inference, "aws:autoscaling:groupName": inference}
  - id: i-0member2
    region: eu-central-1
    type: g5.2xlarge
    state: running
    launched_at: 2026-11-30T06:00:00Z
    tags: {team: inference, "aws:autoscaling:groupName": inference}
  - id: i-0beside
    region: eu-central-1
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
        region: "eu-central-1".to_string(),
        tags: [("team", "inference"), ("ebb:managed", "true")]
            .into_iter()
            .collect(),
        capacity: UP,
        members: Vec::new(),
    }
}

/// The console on `pool` at `at`, with the world's policy.
async fn console_at(pool: &PgPool, at: &str) -> Console {
    let console = Console::start_on(pool, Clock::Fixed(t(at))).await;
    std::fs::write(console.policies.path().join("p.yaml"), POLICY).unwrap();
    console
}

#[sqlx::test(migrations = false)]
async fn a_group_page_shows_its_capacity_window_members_and_changes(pool: PgPool) {
    let mut world = SimWorld::plan(FLEET)
        .policy("inference.yaml", POLICY)
        .clock(Clock::Fixed(t("2026-11-30T10:00:00Z")))
        .start_with(Store::from_pool(pool.clone()), |sim| {
            sim.with_groups(vec![inference()])
        })
        .await;
    // In hours, then the close (19:00 Berlin), then the next tick that lists it down.
    for at in [
        "2026-11-30T10:00:00Z",
        "2026-11-30T18:00:00Z",
        "2026-11-30T18:05:00Z",
    ] {
        world.tick(at).await;
    }

    // The evening: held down by ebb, opening in the morning with the capacity it found.
    let evening = console_at(&pool, "2026-11-30T18:30:00Z").await;
    let page = evening.page("/groups/eu-central-1/inference").await;
    for text in [
        "<h1>Group inference</h1>",
        "min 0 desired 0 max 4, 0 members",
        "Held down by ebb",
        "min 2 desired 2 max 4 is restored at the opening",
        "outside work hours",
        "Opens <time datetime=\"2026-12-01T07:00:00Z\">Tue 2026-12-01 08:00</time> Europe/Berlin (07:00 UTC)",
        "stopped_outside_hours",
        "scale_down_group",
    ] {
        assert!(page.contains(text), "{text} missing from:\n{page}");
    }

    // The opening restores it, with new members.
    world.tick("2026-12-01T07:00:00Z").await;
    world.tick("2026-12-01T07:05:00Z").await;
    let morning = console_at(&pool, "2026-12-01T07:10:00Z").await;
    let page = morning.page("/groups/eu-central-1/inference").await;
    for text in [
        "min 2 desired 2 max 4, 2 members (listed at <time datetime=\"2026-12-01T07:05:00Z\">",
        "in work hours",
        "Closes <time datetime=\"2026-12-01T18:00:00Z\">Tue 2026-12-01 19:00</time> Europe/Berlin (18:00 UTC)",
        "<code>in_hours</code>",
        // The chart: desired from 2 down to 0 and back, with ebb's two changes marked.
        "Capacity of group inference",
        "3 listings with a change; desired between 0 and 2",
        "restore_group",
        "group inference: work hours: capacity back to min 2 desired 2 max 4",
        // The members: the evening's, ended by the group, and the morning's.
        "href=\"/instances/i-0member1\"",
        "shutting-down",
        "pending",
    ] {
        assert!(page.contains(text), "{text} missing from:\n{page}");
    }
    assert_eq!(page.matches("class=\"mark\"").count(), 2, "{page}");
    assert!(!page.contains("i-0beside"), "not a member");

    // The fleet page lists the group, and a member's protections link to it.
    let fleet = morning.page("/").await;
    let link = "href=\"/groups/eu-central-1/inference\"";
    assert!(fleet.contains("Auto Scaling groups"), "{fleet}");
    assert!(fleet.matches(link).count() >= 2, "{fleet}");
    let member = morning.page("/instances/i-0member1").await;
    assert!(member.contains(link), "{member}");
    let beside = morning.page("/instances/i-0beside").await;
    assert!(!beside.contains("/groups/"), "{beside}");

    let (status, _, body) = morning.get("/groups/eu-central-1/nope").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert!(
        body.contains("ebb knows no Auto Scaling group nope in eu-central-1"),
        "{body}"
    );
}
