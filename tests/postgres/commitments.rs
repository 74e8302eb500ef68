//! `ebb report` from gross to net on a history written through the store's own functions: a
//! reserved instance covers one stopped box (its stopped hours are gross savings, not net), and
//! what stopped boxes still pay for their volumes and Elastic IPs is subtracted. The answers
//! are worked out by hand beside each check.

use crate::common;

use common::savings::Fleet;
use common::{database_url, instance};
use ebb::engine::Action;
use ebb::fleet::money::{Attached, Volume};
use ebb::fleet::InstanceState;
use ebb::store::{Outcome, Store};
use serde_json::Value;
use sqlx::PgPool;
use std::collections::HashMap;

/// g.ten: $10/h on demand, $6/h reserved for a year; g.two: $2/h. One g.ten reservation is
/// held. gp3 at $0.08 per GB-month (730 hours), an Elastic IP at $0.005/h.
const PRICES: &str = "source: test
as_of: today
prices:
  us-east-1: {g.ten: 10.0, g.two: 2.0}
reserved:
  source: test
  as_of: today
  rates:
    us-east-1: {g.ten: {1y: 6.0}}
commitments:
  reserved_instances:
    - {instance_type: g.ten, region: us-east-1, count: 1, term: 1y}
while_stopped:
  source: test
  as_of: today
  ebs_gb_month:
    us-east-1: {gp3: 0.08}
  elastic_ip_hour:
    us-east-1: 0.005
";

/// The window: Monday 30 November 2026, UTC, and the night after.
const SINCE: &str = "2026-11-30T00:00:00Z";
const UNTIL: &str = "2026-12-01T12:00:00Z";

fn gp3(size_gib: u64) -> Volume {
    Volume {
        volume_type: "gp3".into(),
        size_gib,
    }
}

/// The history: i-reserved (g.ten, team reserved; 730 GiB of gp3) and i-plain (g.two, team
/// plain; 365 GiB of gp3 and one Elastic IP) run from Sunday; ebb stops both Monday 20:00
/// and starts both Tuesday 08:00: 12 stopped hours each. With `busy_g_ten`, a third g.ten
/// (i-busy) runs all along.
async fn history(store: &Store, busy_g_ten: bool) {
    let mut fleet = Fleet::new(store.clone());
    fleet.instances.clear();
    let mut boxes = vec![
        ("i-reserved", "g.ten", "reserved"),
        ("i-plain", "g.two", "plain"),
    ];
    if busy_g_ten {
        boxes.push(("i-busy", "g.ten", "busy"));
    }
    for (id, ty, team) in boxes {
        let mut i = instance(id, &[("team", team), ("ebb:managed", "true")]);
        i.instance_type = ty.to_string();
        fleet.instances.insert(id, i);
    }
    fleet.sync("2026-11-29T12:00:00Z").await;
    let attached: HashMap<String, Attached> = [
        (
            "i-reserved".to_string(),
            Attached {
                volumes: Some(vec![gp3(730)]),
                elastic_ips: Some(0),
            },
        ),
        (
            "i-plain".to_string(),
            Attached {
                volumes: Some(vec![gp3(300), gp3(65)]),
                elastic_ips: Some(1),
            },
        ),
    ]
    .into();
    store.keep_attached(&attached).await.unwrap();
    for id in ["i-reserved", "i-plain"] {
        fleet
            .ebb_did(
                "2026-11-30T20:00:00Z",
                id,
                Action::Stop,
                Outcome::Succeeded,
                "office",
            )
            .await;
        fleet
            .seen("2026-11-30T20:00:00Z", id, InstanceState::Stopped)
            .await;
    }
    for id in ["i-reserved", "i-plain"] {
        fleet
            .ebb_did(
                "2026-12-01T08:00:00Z",
                id,
                Action::Start,
                Outcome::Succeeded,
                "office",
            )
            .await;
        fleet
            .seen("2026-12-01T08:00:00Z", id, InstanceState::Running)
            .await;
    }
}

/// `ebb report --format json --by team` over the window, with [`PRICES`].
fn report(pool: &PgPool) -> Value {
    serde_json::from_str(&report_as(pool, "json")).unwrap()
}

/// `ebb report --format FORMAT --by team` over the window, with [`PRICES`].
fn report_as(pool: &PgPool, format: &str) -> String {
    let dir = tempfile::tempdir().unwrap();
    let prices = dir.path().join("prices.yaml");
    std::fs::write(&prices, PRICES).unwrap();
    let out = common::Ebb::on(&database_url(pool))
        .env("EBB_PRICES", &prices)
        .env_remove("EBB_CLOUD")
        .run(&[
            "report", "--since", SINCE, "--until", UNTIL, "--by", "team", "--format", format,
            "--at", UNTIL,
        ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// The measures of the team `value` in a report's JSON.
fn team<'a>(json: &'a Value, value: &str) -> &'a Value {
    json["tags"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["value"] == value)
        .unwrap_or_else(|| panic!("no team {value}: {json:#}"))
}

#[sqlx::test]
async fn a_reserved_box_stopped_saves_gross_but_not_net_and_disks_are_shown_apart(pool: PgPool) {
    let store = Store::from_pool(pool.clone());
    history(&store, false).await;
    let json = report(&pool);
    let total = &json["total"];
    // Gross: 12 h × $10 (i-reserved) + 12 h × $2 (i-plain) = $120 + $24 = $144.
    assert_eq!(total["saved_usd"], 144.0, "{json:#}");
    assert_eq!(total["stopped_hours"], 24.0);
    // Nothing else of type g.ten runs in those hours, so the reservation would have covered
    // i-reserved's 12 stopped hours: $120 on demand covered, the reservation's 12 × $6 = $72
    // paid and unused because of the stop.
    assert_eq!(total["commitment_covered_usd"], 120.0);
    assert_eq!(total["unused_commitment_usd"], 72.0);
    // Still paid while stopped: i-reserved 730 GiB × $0.08 / 730 h = $0.08/h, × 12 h = $0.96;
    // i-plain 365 GiB × $0.08 / 730 = $0.04/h plus one Elastic IP at $0.005/h = $0.045/h,
    // × 12 h = $0.54; $1.50 in all. Both pay it running too, so it is shown, not taken off.
    assert_eq!(total["stopped_box_cost_usd"], 1.5);
    assert_eq!(total["unknown_box_cost_hours"], 0.0);
    // Net: $144 − $120 = $24.
    assert_eq!(total["net_saved_usd"], 24.0);
    // The reserved box's stopped hours are gross savings, not net ones: $120 gross, $120
    // covered, a net of $0.
    let reserved = team(&json, "reserved");
    assert_eq!(reserved["saved_usd"], 120.0);
    assert_eq!(reserved["commitment_covered_usd"], 120.0);
    assert_eq!(reserved["net_saved_usd"], 0.0);
    assert_eq!(reserved["stopped_box_cost_usd"], 0.96);
    // The other box's: $24, its disks' $0.54 apart.
    let plain = team(&json, "plain");
    assert_eq!(plain["saved_usd"], 24.0);
    assert_eq!(plain["commitment_covered_usd"], 0.0);
    assert_eq!(plain["net_saved_usd"], 24.0);
    assert_eq!(plain["stopped_box_cost_usd"], 0.54);
    // The table says the same, gross to net, in words.
    let text = report_as(&pool, "table");
    assert!(
        text.contains("\ngross $144.00, net $24.00: less $120.00 of stopped hours reservations and Savings Plans would have covered ($72.00 of commitment left unused by the stops)\nstill paid while stopped: $1.50 for the stopped boxes' volumes and Elastic IPs, paid whether they run or not, so not taken off the net; a policy's stopped.reclaim_after ends that for boxes stopped long, after a proven image\n"),
        "{text}"
    );
}

#[sqlx::test]
async fn a_reservation_that_another_running_box_uses_leaves_the_stop_a_real_saving(pool: PgPool) {
    let store = Store::from_pool(pool.clone());
    history(&store, true).await;
    let json = report(&pool);
    // i-busy, a g.ten running all night, takes the one reservation whether or not i-reserved
    // was stopped: the stop saves its whole $120. i-busy has no volumes read, but it was never
    // stopped, so what it pays for them does not matter.
    let reserved = team(&json, "reserved");
    assert_eq!(reserved["commitment_covered_usd"], 0.0, "{json:#}");
    assert_eq!(reserved["unused_commitment_usd"], 0.0);
    assert_eq!(reserved["net_saved_usd"], 120.0);
    assert_eq!(json["total"]["net_saved_usd"], 144.0);
    assert_eq!(json["total"]["unknown_box_cost_hours"], 0.0);
}

#[sqlx::test]
async fn a_stopped_box_whose_volumes_were_never_read_paid_an_unknown_amount(pool: PgPool) {
    let store = Store::from_pool(pool.clone());
    history(&store, false).await;
    // i-plain's volumes are unread from now on: a failed read keeps what the last one found.
    let unread: HashMap<String, Attached> = [("i-plain".to_string(), Attached::default())].into();
    store.keep_attached(&unread).await.unwrap();
    assert_eq!(team(&report(&pool), "plain")["stopped_box_cost_usd"], 0.54);
    // Never read at all: what it still paid is unknown, not zero; the net does not depend on
    // it.
    sqlx::query("UPDATE instances SET volumes = NULL WHERE id = 'i-plain'")
        .execute(&pool)
        .await
        .unwrap();
    let json = report(&pool);
    let plain = team(&json, "plain");
    assert_eq!(plain["unknown_box_cost_hours"], 12.0, "{json:#}");
    assert_eq!(plain["stopped_box_cost_usd"], 0.0);
    assert_eq!(plain["net_saved_usd"], 24.0);
    assert_eq!(json["total"]["net_saved_usd"], 24.0);
    assert!(
        report_as(&pool, "table")
            .contains("so not taken off the net, and unknown for 12.00 stopped hours"),
        "the table says what is unknown"
    );
}
