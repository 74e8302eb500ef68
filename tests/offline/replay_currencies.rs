//! `ebb replay` over boxes billed in two currencies, through the built binary: an EC2 box in
//! dollars and an Alibaba Cloud box in yuan, each priced from its currency's table, summed in a
//! report of its own and never added to the other; budgets shown in their own currency.

use crate::common::ebb;
use serde_json::Value;

const POLICY: &str = "
policies:
  - name: office
    match: {tags: {team: office}}
    work_hours:
      timezone: UTC
      periods: [{days: mon-fri, start: \"08:00\", stop: \"18:00\"}]
budgets:
  - name: office-daily
    match: {tags: {team: office}}
    amount: 5
    period: day
    timezone: UTC
    at_limit: notify
  - name: office-yuan
    match: {tags: {team: office}}
    amount: 50
    currency: CNY
    period: day
    timezone: UTC
    at_limit: notify
";

const FLEET: &str = "
instances:
  - id: i-office
    region: us-east-1
    type: g5.xlarge
    state: stopped
    state_since: 2026-11-27T18:00:00Z
    stopped_by_ebb_at: 2026-11-27T18:00:00Z
    tags: {team: office}
  - id: i-bp1office
    region: cn-hangzhou
    type: ecs.gn7i-c8g1.2xlarge
    cloud: alibaba
    state: stopped
    state_since: 2026-11-27T18:00:00Z
    stopped_by_ebb_at: 2026-11-27T18:00:00Z
    tags: {team: office}
";

const PRICES: &str = "
source: test
as_of: 2026-12-01
prices:
  us-east-1: {g5.xlarge: 1.0}
other_currencies:
  CNY:
    source: test-cny
    as_of: 2026-12-01
    prices:
      cn-hangzhou: {ecs.gn7i-c8g1.2xlarge: 10.0}
";

/// Both boxes idle all day, sampled every 5 minutes.
fn trace() -> String {
    let mut csv = String::from("instance,time,gpu_util\n");
    for id in ["i-office", "i-bp1office"] {
        for m in (0..24 * 60).step_by(5) {
            csv.push_str(&format!(
                "{id},2026-11-30T{:02}:{:02}:00Z,1\n",
                m / 60,
                m % 60
            ));
        }
    }
    csv
}

/// `ebb replay` of Monday 2026-11-30 in `format`.
fn replay(format: &str) -> String {
    let d = tempfile::tempdir().unwrap();
    std::fs::create_dir(d.path().join("policies")).unwrap();
    for (name, text) in [
        ("policies/p.yaml", POLICY.to_string()),
        ("fleet.yaml", FLEET.to_string()),
        ("prices.yaml", PRICES.to_string()),
        ("util.csv", trace()),
    ] {
        std::fs::write(d.path().join(name), text).unwrap();
    }
    let p = |name: &str| d.path().join(name).to_str().unwrap().to_string();
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
        "2026-11-30T00:00:00Z",
        "--to",
        "2026-12-01T00:00:00Z",
        "--format",
        format,
    ]);
    assert!(
        o.status.success(),
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8(o.stdout).unwrap()
}

/// `want` within a tick (5 minutes) of `price`.
fn close(got: &Value, want: f64, price: f64) {
    let got = got
        .as_f64()
        .unwrap_or_else(|| panic!("not a number: {got}"));
    assert!(
        (got - want).abs() <= price * 5.0 / 60.0 + 1e-9,
        "{got}, by hand {want}"
    );
}

#[test]
fn each_box_is_priced_and_summed_in_the_currency_its_cloud_bills_in() {
    let r: Value = serde_json::from_str(&replay("json")).unwrap();
    // Dollars: the EC2 box alone, 10 h of 24 at $1.
    assert_eq!(r["currency"], "USD");
    let ids: Vec<&str> = r["instances"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["instance"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["i-office"]);
    let usd = &r["scenarios"];
    close(&usd["policies"]["cost_usd"], 10.0, 1.0);
    close(&usd["always_on"]["cost_usd"], 24.0, 1.0);
    close(&usd["policies"]["savings_vs_always_on_usd"], 14.0, 1.0);
    // Yuan: the Alibaba Cloud box alone, at the CNY table's 10 an hour.
    let others = r["other_currencies"].as_array().unwrap();
    assert_eq!(others.len(), 1, "{r:#}");
    let cny = &others[0];
    assert_eq!(cny["currency"], "CNY");
    assert_eq!(cny["instances"][0]["instance"], "i-bp1office");
    let s = &cny["scenarios"];
    close(&s["policies"]["cost_cny"], 100.0, 10.0);
    close(&s["always_on"]["cost_cny"], 240.0, 10.0);
    close(&s["policies"]["savings_vs_always_on_cny"], 140.0, 10.0);
    assert!(s["policies"].get("cost_usd").is_none(), "{s:#}");
    // A budget naming no currency is in its boxes': the dollars' period counts the EC2 box,
    // the yuan's the Alibaba one; a budget in CNY is the yuan report's alone.
    let budgets = |v: &Value| -> Vec<(String, f64)> {
        v["budgets"]
            .as_array()
            .unwrap()
            .iter()
            .map(|b| {
                let spent = b
                    .get("spent_usd")
                    .or(b.get("spent_cny"))
                    .and_then(Value::as_f64)
                    .unwrap();
                (b["budget"].as_str().unwrap().to_string(), spent)
            })
            .collect()
    };
    let in_usd = budgets(&r);
    assert_eq!(in_usd.len(), 1, "{in_usd:?}");
    assert_eq!(in_usd[0].0, "office-daily");
    close(&in_usd[0].1.into(), 10.0, 1.0);
    let in_cny = budgets(cny);
    let names: Vec<&str> = in_cny.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["office-daily", "office-yuan"]);
    for (_, spent) in &in_cny {
        close(&(*spent).into(), 100.0, 10.0);
    }
    assert!(cny["budgets"][0].get("amount_cny").is_some(), "{cny:#}");
}

#[test]
fn the_table_and_the_comment_label_each_currency() {
    let table = replay("table");
    assert!(table.contains("1 instances billed in USD"), "{table}");
    assert!(table.contains("1 instances billed in CNY"), "{table}");
    assert!(table.contains("cost_cny"), "{table}");
    assert!(
        table.contains("budget office-yuan: ¥50.00 a period"),
        "{table}"
    );
    let md = replay("markdown");
    assert!(md.contains("| cost (USD) |"), "{md}");
    assert!(md.contains("| cost (CNY) |"), "{md}");
    assert!(md.contains("against always on"), "{md}");
}
