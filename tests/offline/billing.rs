//! What an instance's billing allows the engine: no stop of a subscription, no stop of a family
//! that cannot stop without charge unless the policy allows it, nothing on an instance being
//! recycled, no stop of a box in a capacity reservation someone else holds unless the policy
//! says so, and spot moves only on EC2. 2026-11-30 is a Monday.

use crate::common;

use common::*;
use ebb::engine::{Action, Code, InstanceFacts};
use ebb::fleet::{
    Billing, Charge, Cloud, HeldReservation, Instance, InstanceState, Levers, Lifecycle,
    ReservationKind, ReservationTerms,
};
use ebb::policy::PolicySet;

/// Beijing office hours on weekdays, with a notice before each stop when `notice`.
fn office(notice: bool, extra: &str) -> ebb::policy::PolicySet {
    let notify = if notice {
        "    notify: {before: 15m}\n"
    } else {
        ""
    };
    policies(&format!(
        r#"
policies:
  - name: gpu-office
    match: {{tags: {{team: ml}}}}
    work_hours:
      timezone: Asia/Shanghai
      periods: [{{days: mon-fri, start: "09:00", stop: "19:00"}}]
{notify}{extra}"#
    ))
}

/// A running Alibaba box of `instance_type` paid as `charge`.
fn alibaba(instance_type: &str, charge: Charge) -> Instance {
    let mut i = instance("i-bp1", &[("team", "ml")]);
    i.region = "cn-hangzhou".into();
    i.instance_type = instance_type.into();
    i.billing = Billing::of(Cloud::Alibaba, charge, instance_type, None);
    i
}

/// 22:00 in Beijing on a Monday: outside hours.
const NIGHT: &str = "2026-11-30T14:00:00Z";

#[test]
fn a_pay_as_you_go_gpu_box_is_stopped_after_hours() {
    let box_ = alibaba("ecs.gn7i-c8g1.2xlarge", Charge::PayAsYouGo);
    let d = World::with(vec![box_]).one(NIGHT, &office(false, ""));
    assert_eq!((d.action, d.code), (Action::Stop, Code::OutsideHours));
}

#[test]
fn a_subscription_box_is_never_stopped_nor_given_notice() {
    let w = World::with(vec![alibaba("ecs.gn7i-c8g1.2xlarge", Charge::Subscription)]);
    for set in [office(false, ""), office(true, "")] {
        let d = w.one(NIGHT, &set);
        assert_eq!(
            (d.action, d.code),
            (Action::None, Code::SubscriptionNoSaving)
        );
        assert!(d.reason.contains("a stop saves nothing"), "{}", d.reason);
        assert!(d.reason.contains("the policy alone would"), "{}", d.reason);
    }
    let hibernating = policies(
        r#"
policies:
  - name: gpu-office
    match: {tags: {team: ml}}
    work_hours:
      timezone: Asia/Shanghai
      outside_hours: hibernate
      periods: [{days: mon-fri, start: "09:00", stop: "19:00"}]
"#,
    );
    let d = w.one(NIGHT, &hibernating);
    assert_eq!(d.action, Action::None);
    // In hours nothing is asked, and the code stays the rules' own.
    let d = w.one("2026-11-30T03:00:00Z", &office(false, ""));
    assert_eq!((d.action, d.code), (Action::None, Code::InHours));
}

#[test]
fn a_subscription_box_stopped_by_ebb_is_still_started_at_the_opening() {
    let mut box_ = alibaba("ecs.gn7i-c8g1.2xlarge", Charge::Subscription);
    box_.state = InstanceState::Stopped;
    let w = World::with(vec![box_]).facts(
        "i-bp1",
        InstanceFacts {
            stopped_by_ebb_at: Some(t("2026-11-27T11:05:00Z")),
            ..Default::default()
        },
    );
    let d = w.one("2026-11-30T01:02:00Z", &office(false, ""));
    assert_eq!((d.action, d.code), (Action::Start, Code::StartAtOpen));
}

#[test]
fn a_local_disk_family_is_refused_unless_the_policy_allows_a_charging_stop() {
    let w = World::with(vec![alibaba("ecs.i2g.2xlarge", Charge::PayAsYouGo)]);
    let d = w.one(NIGHT, &office(false, ""));
    assert_eq!(
        (d.action, d.code),
        (Action::None, Code::ChargingStopRefused)
    );
    assert!(d.reason.contains("family ecs.i2*"), "{}", d.reason);
    assert!(
        d.reason.contains("stop.allow_charging_stop: true"),
        "{}",
        d.reason
    );
    let d = w.one(NIGHT, &office(true, ""));
    assert_eq!(d.code, Code::ChargingStopRefused, "no notice either");
    let allowed = office(false, "    stop: {allow_charging_stop: true}\n");
    let d = w.one(NIGHT, &allowed);
    assert_eq!((d.action, d.code), (Action::Stop, Code::OutsideHours));
    let not_allowed = office(false, "    stop: {allow_charging_stop: false}\n");
    assert_eq!(w.one(NIGHT, &not_allowed).code, Code::ChargingStopRefused);
}

#[test]
fn a_recycling_lock_leaves_the_instance_alone_and_says_so() {
    let mut box_ = alibaba("ecs.gn7i-c8g1.2xlarge", Charge::PayAsYouGo);
    box_.lifecycle = Lifecycle::Spot;
    box_.billing.recycling = true;
    box_.tags
        .insert("ebb:stop-at".into(), "2026-11-30T11:00:00Z".into());
    let w = World::with(vec![box_]);
    let d = w.one(NIGHT, &office(false, ""));
    assert_eq!((d.action, d.code), (Action::None, Code::RecyclingWarned));
    assert!(d.reason.contains("recycling"), "{}", d.reason);
    // In hours too, where the rules would withdraw the stale notice: left alone.
    let d = w.one("2026-11-30T03:00:00Z", &office(false, ""));
    assert_eq!((d.action, d.code), (Action::None, Code::RecyclingWarned));
}

/// A running EC2 box in a capacity reservation someone else holds, of `terms` (`None`: unread).
fn reserved(terms: Option<ReservationTerms>) -> Instance {
    let mut i = instance("i-reserved", &[("team", "ml")]);
    i.billing.reservation = Some(Box::new(HeldReservation {
        id: "cr-0123".into(),
        terms,
    }));
    i
}

#[test]
fn a_box_in_a_reservation_held_outside_ebb_is_not_stopped_unless_the_policy_says() {
    let block = ReservationTerms {
        kind: ReservationKind::CapacityBlock,
        end: Some(t("2026-12-04T11:30:00Z")),
    };
    let w = World::with(vec![reserved(Some(block))]);
    for set in [office(false, ""), office(true, "")] {
        let d = w.one(NIGHT, &set);
        assert_eq!((d.action, d.code), (Action::None, Code::ReservedNoSaving));
        assert!(
            d.reason
                .contains("it runs in Capacity Block cr-0123 (ending 2026-12-04T11:30Z)"),
            "{}",
            d.reason
        );
        assert!(d.reason.contains("a stop saves nothing"), "{}", d.reason);
        assert!(
            d.reason.contains("stop.in_reservation: stop"),
            "{}",
            d.reason
        );
    }
    // Asked for, the box is stopped to free the capacity.
    let freed = office(false, "    stop: {in_reservation: stop}\n");
    let d = w.one(NIGHT, &freed);
    assert_eq!((d.action, d.code), (Action::Stop, Code::OutsideHours));
    let kept = office(false, "    stop: {in_reservation: keep}\n");
    assert_eq!(w.one(NIGHT, &kept).code, Code::ReservedNoSaving);
    // A reservation whose terms could not be read still holds the stop back, and says so.
    let d = World::with(vec![reserved(None)]).one(NIGHT, &office(false, ""));
    assert_eq!(d.code, Code::ReservedNoSaving);
    assert!(
        d.reason
            .contains("capacity reservation cr-0123 (its end could not be read)"),
        "{}",
        d.reason
    );
    // Without a reservation the same box is stopped.
    let d = World::with(
        vec![reserved(None)]
            .into_iter()
            .map(|mut i| {
                i.billing.reservation = None;
                i
            })
            .collect(),
    )
    .one(NIGHT, &office(false, ""));
    assert_eq!(d.code, Code::OutsideHours);
}

#[test]
fn in_reservation_takes_keep_or_stop_only() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("p.yaml"),
        r#"
policies:
  - name: p
    match: {tags: {team: ml}}
    work_hours: {timezone: UTC, periods: [{days: mon-fri, start: "09:00", stop: "19:00"}]}
    stop: {in_reservation: release}
"#,
    )
    .unwrap();
    let text = ebb::policy::load(&[dir.path().to_path_buf()])
        .unwrap_err()
        .to_string();
    assert!(
        text.contains("in_reservation: \"release\" is not one of: keep, stop"),
        "{text}"
    );
}

/// An interruptible Alibaba box whose spot price saves 80 %, and the policy that moves such boxes.
fn alibaba_spot_candidate() -> (World, PolicySet) {
    let set = policies(
        r#"
policies:
  - name: training
    match: {tags: {team: ml}}
    spot:
      min_savings: 10%
      checkpoint_max_age: 30m
"#,
    );
    let mut box_ = alibaba("ecs.gn7i-c8g1.2xlarge", Charge::PayAsYouGo);
    box_.tags.insert("ebb:interruptible".into(), "true".into());
    box_.tags
        .insert("ebb:checkpoint-at".into(), "2026-11-30T11:50:00Z".into());
    let w = World::with(vec![box_]).price("cn-hangzhou", "ecs.gn7i-c8g1.2xlarge", 10.0, 2.0);
    (w, set)
}

#[test]
fn spot_migration_is_not_available_where_the_provider_has_no_spot_moves_and_plan_says_so() {
    let (w, set) = alibaba_spot_candidate();
    let d = w.one("2026-11-30T12:00:00Z", &set);
    assert_eq!(d.action, Action::None);
    assert!(
        d.reason.contains(
            "spot migration is not available for Alibaba Cloud ECS: ebb cannot move its instances"
        ),
        "{}",
        d.reason
    );
}

/// What a cloud can do reaches the engine as data: given spot moves, the same Alibaba box is
/// moved, with no change to the engine.
#[test]
fn a_cloud_given_spot_moves_in_the_levers_has_its_boxes_moved() {
    let (w, set) = alibaba_spot_candidate();
    let mut levers = Levers::default();
    levers.spot_moves.insert(Cloud::Alibaba);
    let d = w.levers(levers).one("2026-11-30T12:00:00Z", &set);
    assert_eq!(d.action, Action::MigrateToSpot, "{}", d.reason);
}

#[test]
fn the_decider_agrees_on_every_billing_code() {
    let mut fleet = vec![
        alibaba("ecs.gn7i-c8g1.2xlarge", Charge::Subscription),
        alibaba("ecs.i2g.2xlarge", Charge::PayAsYouGo),
        alibaba("ecs.gn7i-c8g1.2xlarge", Charge::PayAsYouGo),
    ];
    fleet[1].id = "i-bp2".into();
    fleet[2].id = "i-bp3".into();
    fleet[2].billing.recycling = true;
    fleet.push(reserved(None));
    let w = World::with(fleet);
    let set = office(false, "");
    let (f, prior) = w.fleet();
    let briefs = ebb::engine::Decider::new(&set).decide(t(NIGHT), &f, &prior);
    let codes: Vec<Code> = briefs.iter().map(|b| b.code).collect();
    assert_eq!(
        codes,
        [
            Code::SubscriptionNoSaving,
            Code::ChargingStopRefused,
            Code::RecyclingWarned,
            Code::ReservedNoSaving
        ]
    );
}

#[test]
fn a_snapshot_says_each_instances_cloud_charge_stopped_mode_and_reservation() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("fleet.yaml");
    std::fs::write(
        &file,
        r#"
instances:
  - {id: i-ec2, region: us-east-1, type: g5.xlarge, state: stopped}
  - {id: i-bp1, region: cn-hangzhou, type: ecs.i2g.2xlarge, state: stopped, cloud: alibaba,
     charge: subscription, stopped_mode: charging}
  - {id: i-bp2, region: cn-hangzhou, type: ecs.gn7i-c8g1.2xlarge, state: running, cloud: alibaba,
     lifecycle: spot, recycling: true}
  - {id: i-block, region: us-east-1, type: p5.48xlarge, state: running,
     capacity_reservation: {id: cr-1, kind: capacity-block, end: "2026-12-04T11:30:00Z"}}
  - {id: i-unread, region: us-east-1, type: p5.48xlarge, state: running,
     capacity_reservation: {id: cr-2}}
"#,
    )
    .unwrap();
    let (fleet, _) = ebb::snapshot::load_snapshot(&file).unwrap();
    let [ec2, local, spot, block, unread] = &fleet.instances[..] else {
        panic!("five instances")
    };
    assert_eq!(
        block.billing.reservation.as_deref(),
        Some(&HeldReservation {
            id: "cr-1".into(),
            terms: Some(ReservationTerms {
                kind: ReservationKind::CapacityBlock,
                end: Some(t("2026-12-04T11:30:00Z")),
            }),
        })
    );
    assert_eq!(
        unread.billing.reservation.as_ref().map(|r| r.terms),
        Some(None),
        "no kind: what it is was not read"
    );
    // And `ebb inventory --format json` writes them back the same.
    let json = dir.path().join("fleet.json");
    std::fs::write(
        &json,
        ebb::output::snapshot_json(&fleet.instances, &fleet.attached),
    )
    .unwrap();
    let (again, _) = ebb::snapshot::load_snapshot(&json).unwrap();
    assert_eq!(again.instances[3].billing, block.billing);
    assert_eq!(again.instances[4].billing, unread.billing);
    assert_eq!(
        ec2.billing,
        Billing::ec2(true),
        "EC2 by default, its stop ends charges"
    );
    assert_eq!(local.billing.cloud, Cloud::Alibaba);
    assert_eq!(local.billing.charge, Charge::Subscription);
    assert_eq!(
        local.billing.stop_saving,
        ebb::fleet::StopSaving::KeepsCharging { family: "ecs.i2*" }
    );
    assert_eq!(
        local.billing.stopped_mode,
        Some(ebb::fleet::StoppedMode::Charging)
    );
    assert!(spot.billing.recycling);
    assert_eq!(spot.billing.stopped_mode, None, "not stopped");
}

#[tokio::test(start_paused = true)]
async fn the_simulated_cloud_reports_each_stops_stopped_mode() {
    use ebb::cloud::{sim::SimProvider, Provider, StopKind, StopReadBack};
    use ebb::fleet::StoppedMode;
    let local = alibaba("ecs.i2g.2xlarge", Charge::PayAsYouGo);
    let mut gpu = alibaba("ecs.gn7i-c8g1.2xlarge", Charge::PayAsYouGo);
    gpu.id = "i-bp2".into();
    let ec2 = instance("i-ec2", &[]);
    let fleet = ebb::fleet::Fleet {
        instances: vec![local, gpu, ec2],
        ..Default::default()
    };
    let clock = ebb::clock::Clock::simulated(t("2026-11-30T12:00:00Z"), 1.0);
    let sim = SimProvider::new(fleet, Default::default(), clock);
    let mut report = sim
        .stop(
            "cn-hangzhou",
            &["i-bp1".into(), "i-bp2".into()],
            StopKind::Stop,
        )
        .await;
    report.done.extend(
        sim.stop("us-east-1", &["i-ec2".into()], StopKind::Stop)
            .await
            .done,
    );
    let modes: Vec<(&str, Option<StopReadBack>)> = report
        .done
        .iter()
        .map(|d| (d.instance.as_str(), d.read_back))
        .collect();
    assert_eq!(
        modes,
        [
            ("i-bp1", Some(StopReadBack::Stopped(StoppedMode::Charging))),
            ("i-bp2", Some(StopReadBack::Stopped(StoppedMode::NoCharge))),
            ("i-ec2", Some(StopReadBack::Stopped(StoppedMode::NoCharge)))
        ]
    );
    // The paused clock moved on past the stops, which take time on the simulated clock.
    tokio::time::advance(std::time::Duration::from_secs(600)).await;
    let listed = sim.instances().await.instances;
    let stopped: Vec<Option<StoppedMode>> = listed.iter().map(|i| i.billing.stopped_mode).collect();
    assert_eq!(
        stopped,
        [
            Some(StoppedMode::Charging),
            Some(StoppedMode::NoCharge),
            Some(StoppedMode::NoCharge)
        ],
        "the listing reports the mode once stopped"
    );
}
