//! The simulated fleet's spot zones (`spot_zones:` in the fleet file): the zones are offered
//! with their prices and subnets, a replacement is launched into the zone asked for, and a
//! spot one is reclaimed at its pool's reclaim moments, with EC2's reason for a spot
//! interruption, so that the migration sees a reclaim; the quiet zone keeps it.

use chrono::{DateTime, Duration, Utc};
use ebb::clock::Clock;
use ebb::cloud::sim::{reclaims, SimProvider};
use ebb::cloud::{ImageMade, Launch, Market, Provider, SpotMoves, SPOT_TERMINATION};
use ebb::fleet::InstanceState;
use std::collections::BTreeMap;

const T0: &str = "2026-12-01T00:00:00Z";

const FLEET: &str = "\
instances:
  - id: i-0trainer1
    region: eu-central-1
    type: p4d.24xlarge
    state: running
    launched_at: 2026-11-30T00:00:00Z
    tags: {workload: training, \"ebb:interruptible\": \"true\"}
    sim: {usage: busy}
prices:
  eu-central-1:
    p4d.24xlarge: {on_demand: 40.97, spot: 14.34}
spot_zones:
  eu-central-1:
    - zone: eu-central-1a
      reclaim_every: 3h
      spot: {p4d.24xlarge: 14.34}
    - zone: eu-central-1b
      reclaim_every: 10d
      spot: {p4d.24xlarge: 14.63}
";

fn at(s: &str) -> DateTime<Utc> {
    s.parse().unwrap()
}

#[tokio::test(start_paused = true)]
async fn a_spot_replacement_is_reclaimed_at_its_zones_rate_with_ec2s_reason() {
    let d = tempfile::tempdir().unwrap();
    let path = d.path().join("fleet.yaml");
    std::fs::write(&path, FLEET).unwrap();
    let seed = ebb::snapshot::load_simulated(&path).unwrap();
    let sim = SimProvider::new(seed.fleet, seed.behaviours, Clock::simulated(at(T0), 1.0))
        .with_zones(seed.zones);
    let region = "eu-central-1";
    let ty = "p4d.24xlarge".to_string();

    // Both zones are offered, at their own prices, with a subnet each.
    let prices = sim
        .prices(region, std::slice::from_ref(&ty), at(T0))
        .await
        .unwrap();
    assert_eq!(
        prices[0].spot_by_zone,
        BTreeMap::from([
            ("eu-central-1a".to_string(), 14.34),
            ("eu-central-1b".to_string(), 14.63)
        ])
    );
    let spec = sim.launch_spec(region, "i-0trainer1").await.unwrap();
    assert_eq!(
        spec.zone, "eu-central-1a",
        "the file's instances are in the first zone"
    );
    assert_eq!(
        spec.subnets_by_zone.keys().collect::<Vec<_>>(),
        ["eu-central-1a", "eu-central-1b"]
    );

    let ImageMade::Made(image) = sim
        .create_image(region, "i-0trainer1", "img", &BTreeMap::new())
        .await
        .unwrap()
    else {
        panic!("no image made");
    };
    let launch = |zone: &str| Launch {
        image: image.clone(),
        spec: spec.clone(),
        instance_type: ty.clone(),
        subnet: spec.subnets_by_zone[zone].clone(),
        market: Market::Spot,
        tags: BTreeMap::new(),
        client_token: format!("token-{zone}"),
        private_ip: None,
    };
    let busy = sim.launch(region, &launch("eu-central-1a")).await.unwrap();
    let quiet = sim.launch(region, &launch("eu-central-1b")).await.unwrap();
    assert_eq!(
        (busy.zone.as_str(), quiet.zone.as_str()),
        ("eu-central-1a", "eu-central-1b")
    );

    // Seven hours on: eu-central-1a has reclaimed its pool at least once since the launch,
    // at the moment the reclaim function gives; eu-central-1b has not.
    let later = at(T0) + Duration::hours(7);
    tokio::time::advance(std::time::Duration::from_secs(7 * 3600)).await;
    let first = reclaims(
        region,
        "eu-central-1a",
        &ty,
        Duration::hours(3),
        at(T0),
        later,
    )[0];
    let never = reclaims(
        region,
        "eu-central-1b",
        &ty,
        Duration::days(10),
        at(T0),
        later,
    );
    assert!(never.is_empty(), "{never:?}");
    let ids = [busy.id.clone(), quiet.id.clone()];
    let found = sim.describe(region, &ids).await.unwrap();
    let reclaimed = &found[0];
    assert!(reclaimed.reclaimed(), "{reclaimed:?}");
    assert_eq!(reclaimed.state, InstanceState::Terminated);
    assert_eq!(reclaimed.state_reason.as_deref(), Some(SPOT_TERMINATION));
    let listed = sim.instances().await;
    let gone = listed.instances.iter().find(|i| i.id == busy.id).unwrap();
    assert_eq!(
        gone.state_since.unwrap(),
        first + Duration::seconds(30),
        "terminated 30 s after the reclaim"
    );
    assert_eq!(found[1].state, InstanceState::Running, "{:?}", found[1]);
    assert!(!found[1].reclaimed());
}
