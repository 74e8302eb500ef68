//! `ebb replay`'s net with what a stopped box still pays: the volumes and Elastic IPs a fleet
//! snapshot gives (optional: a snapshot without them loads as before), priced by the price
//! table's `while_stopped` as `ebb report` prices them; and the snapshot `ebb inventory`
//! writes carries them back.

use crate::common::ebb;
use serde_json::Value;

const POLICY: &str = "
policies:
  - name: office
    match: {tags: {team: office}}
    work_hours:
      timezone: UTC
      periods: [{days: mon-fri, start: \"08:00\", stop: \"18:00\"}]
";

/// An office box ebb stopped on Friday evening, with a 500 GiB gp3 volume and an Elastic IP,
/// and a serving box no policy governs (its volumes unknown: it never stops).
const FLEET: &str = "
instances:
  - id: i-office
    region: us-east-1
    type: g5.xlarge
    state: stopped
    state_since: 2026-11-27T18:00:00Z
    stopped_by_ebb_at: 2026-11-27T18:00:00Z
    tags: {team: office}
    volumes: [{volume_type: gp3, size_gib: 500}]
    elastic_ips: 1
  - id: i-serving
    region: us-east-1
    type: g5.xlarge
    state: running
    tags: {team: serving}
";

/// $1/h on demand; gp3 at $0.08 per GB-month, an Elastic IP at $0.005/h.
const PRICES: &str = "
source: test
as_of: today
prices:
  us-east-1: {g5.xlarge: 1.0}
while_stopped:
  source: test
  as_of: today
  ebs_gb_month:
    us-east-1: {gp3: 0.08}
  elastic_ip_hour:
    us-east-1: 0.005
";

const FROM: &str = "2026-11-30T00:00:00Z";
const TO: &str = "2026-12-05T00:00:00Z";

/// The office box busy 09:00-17:00 on weekdays, the serving box always, every 5 minutes.
fn csv() -> String {
    use chrono::{Datelike, Timelike};
    let mut csv = String::from("instance,time,gpu_util\n");
    for id in ["i-office", "i-serving"] {
        let mut t = ebb::when::parse_time(FROM).unwrap();
        while t < ebb::when::parse_time(TO).unwrap() {
            let office = t.weekday().number_from_monday() <= 5 && (9..17).contains(&t.hour());
            let busy = id == "i-serving" || office;
            csv.push_str(&format!(
                "{id},{},{}\n",
                t.format("%Y-%m-%dT%H:%M:%SZ"),
                if busy { 60.0 } else { 1.0 }
            ));
            t += chrono::Duration::minutes(5);
        }
    }
    csv
}

/// `ebb replay` over `fleet` with the prices; its JSON and its table.
fn replay(fleet: &str) -> (Value, String) {
    let d = tempfile::tempdir().unwrap();
    std::fs::create_dir(d.path().join("policies")).unwrap();
    std::fs::write(d.path().join("policies/p.yaml"), POLICY).unwrap();
    std::fs::write(d.path().join("fleet.yaml"), fleet).unwrap();
    std::fs::write(d.path().join("util.csv"), csv()).unwrap();
    std::fs::write(d.path().join("prices.yaml"), PRICES).unwrap();
    let p = |name: &str| d.path().join(name).to_str().unwrap().to_string();
    let run = |format: &str| {
        let o = ebb(&[
            "replay",
            "--policies",
            &p("policies"),
            "--fleet",
            &p("fleet.yaml"),
            "--utilisation",
            &p("util.csv"),
            "--prices",
            &p("prices.yaml"),
            "--from",
            FROM,
            "--to",
            TO,
            "--format",
            format,
        ]);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        String::from_utf8(o.stdout).unwrap()
    };
    (serde_json::from_str(&run("json")).unwrap(), run("table"))
}

/// By hand, over the 120 hours from Monday: ebb starts the office box at each 08:00 and stops
/// it at each 18:00, 50 hours running against 120 always on: $70 gross (at $1/h, within a
/// tick). Stopped 70 hours, it still pays 500 GiB × $0.08 / 730 h = $0.054795/h for its volume
/// and $0.005/h for its address: 70 × 0.059795 = $4.1856, which it pays running too, so the
/// net is the gross, $70. The serving box never stops: its unknown volumes cost nothing here.
#[test]
fn a_stopped_box_s_volume_and_address_are_shown_apart_from_the_net() {
    let (json, table) = replay(FLEET);
    let net = &json["commitments"];
    let got = |key: &str| {
        net[key]
            .as_f64()
            .unwrap_or_else(|| panic!("{key} in {json:#}"))
    };
    let tick_h = 5.0 / 60.0;
    let per_hour = 500.0 * 0.08 / 730.0 + 0.005;
    assert!((got("gross_savings_usd") - 70.0).abs() <= tick_h, "{net}");
    assert!(
        (got("stopped_box_cost_usd") - 70.0 * per_hour).abs() <= tick_h * per_hour + 1e-4,
        "{net}: by hand {}",
        70.0 * per_hour
    );
    assert_eq!(got("net_savings_usd"), got("gross_savings_usd"), "{net}");
    assert_eq!(got("commitment_covered_usd"), 0.0);
    assert_eq!(got("unknown_box_cost_hours"), 0.0);
    assert!(
        table.contains("Still paid while stopped: $4.19 for the stopped boxes' volumes and Elastic IPs, paid whether they run or not, so not taken off the net."),
        "{table}"
    );

    // The same snapshot without the box's volumes and address loads as before; what the office
    // box paid over its 70 stopped hours is then unknown, and the net is still the gross.
    let without = FLEET
        .replace("    volumes: [{volume_type: gp3, size_gib: 500}]\n", "")
        .replace("    elastic_ips: 1\n", "");
    let (json, table) = replay(&without);
    let net = &json["commitments"];
    assert_eq!(net["net_savings_usd"], net["gross_savings_usd"], "{net}");
    assert!(
        (net["unknown_box_cost_hours"].as_f64().unwrap() - 70.0).abs() <= tick_h,
        "{net}"
    );
    assert!(table.contains(", and unknown for 70."), "{table}");
}

/// The snapshot `ebb inventory --format json` writes carries the volumes and Elastic IPs read,
/// and reads back the same.
#[test]
fn the_snapshot_export_carries_volumes_and_addresses_back() {
    let d = tempfile::tempdir().unwrap();
    let yaml = d.path().join("fleet.yaml");
    std::fs::write(&yaml, FLEET).unwrap();
    let (fleet, _) = ebb::snapshot::load_snapshot(&yaml).unwrap();
    assert_eq!(fleet.attached.len(), 1, "only i-office's are known");
    let json = d.path().join("fleet.json");
    std::fs::write(
        &json,
        ebb::output::snapshot_json(&fleet.instances, &fleet.attached),
    )
    .unwrap();
    let (again, _) = ebb::snapshot::load_snapshot(&json).unwrap();
    assert_eq!(again.attached, fleet.attached);
    let office = &again.attached["i-office"];
    assert_eq!(office.elastic_ips, Some(1));
    assert_eq!(office.volumes.as_ref().unwrap()[0].size_gib, 500);
}
