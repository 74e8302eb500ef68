//! `ebb advise` on hand-made fleets whose answers are worked out by hand in each test (the
//! commitments of office boxes beside boxes busy around the clock; a right-sized 8-GPU box; a
//! busy box left as it is), and on the demo week, where a suggested policy change, applied
//! and replayed, costs less and serves as much.

use ebb::advise::{self, Advisor, Basis, Inputs, PlanRates, Term};
use ebb::fleet::Sample;
use ebb::replay::{Options, Recording};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

fn at(s: &str) -> chrono::DateTime<chrono::Utc> {
    ebb::when::parse_time(s).unwrap()
}

/// Samples every 5 minutes over `[from, to)`, at `percent(time)`.
fn samples(
    from: &str,
    to: &str,
    percent: impl Fn(chrono::DateTime<chrono::Utc>) -> f64,
) -> Vec<Sample> {
    let mut out = Vec::new();
    let mut t = at(from);
    while t < at(to) {
        out.push(Sample::new(t, percent(t)));
        t += chrono::Duration::minutes(5);
    }
    out
}

/// The advice of `recordings` under `inputs`, with no candidate policy change, on one worker.
fn advice_of(
    inputs: &Inputs,
    recordings: &[Recording],
    prior: &ebb::engine::Prior,
) -> advise::Advice {
    let mut advisor = Advisor::new(inputs, &[], prior);
    advisor.advise(recordings).unwrap();
    let mut advice = advise::empty(inputs, 0);
    advice.merge(advisor.finish());
    advice.finish(&[], None);
    advice
}

const OFFICE_POLICY: &str = "
policies:
  - name: office
    match: {tags: {team: office}}
    work_hours:
      timezone: UTC
      periods: [{days: mon-fri, start: \"08:00\", stop: \"18:00\"}]
";

/// Four office boxes ebb stopped on Friday, and two serving boxes no policy governs.
fn commitment_fleet() -> String {
    let mut fleet = String::from("instances:\n");
    for i in 1..=4 {
        fleet.push_str(&format!(
            "  - {{id: i-office{i}, region: us-east-1, type: g5.xlarge, state: stopped, state_since: 2026-11-27T18:00:00Z, stopped_by_ebb_at: 2026-11-27T18:00:00Z, tags: {{team: office}}}}\n"
        ));
    }
    for i in 1..=2 {
        fleet.push_str(&format!(
            "  - {{id: i-serving{i}, region: us-east-1, type: g5.xlarge, state: running, tags: {{team: serving}}}}\n"
        ));
    }
    fleet.push_str("prices:\n  us-east-1: {g5.xlarge: {on_demand: 1.0}}\n");
    fleet
}

/// The office boxes are busy 09:00-17:00 on weekdays, the serving boxes always.
fn commitment_load(id: &str, t: chrono::DateTime<chrono::Utc>) -> f64 {
    use chrono::{Datelike, Timelike};
    let weekday = t.weekday().number_from_monday() <= 5;
    match id.starts_with("i-serving") || (weekday && (9..17).contains(&t.hour())) {
        true => 60.0,
        false => 1.0,
    }
}

/// Four office boxes under 08:00-18:00 hours and two serving boxes busy around the clock, all
/// g5.xlarge at $1.00/h on demand, $0.60/h under a 1-year plan and $0.40/h under a 3-year one,
/// over the week from Monday 2026-11-30 (168 hours).
///
/// By hand, after the policies: the office boxes run 08:00-18:00 on weekdays, 50 of the 168
/// hours; the serving boxes run all 168. At plan rates (1 year) each hour holds 2 × 0.60 =
/// $1.20 (118 hours) or 6 × 0.60 = $3.60 (50 hours); on demand $2 or $6 (536 in all).
/// - Committing $1.20/h: all 168 hours covered up to 1.20, the office hours' rest on demand:
///   168 × 1.20 + 50 × (3.60 - 1.20) / 0.60 = 201.60 + 200 = 401.60, saving 536 - 401.60 =
///   $134.40 (= 168 h × 2 boxes × $0.40), or 134.40 × 730 / 168 = $584.00 a month; used 100 %,
///   covering 336 / 536 = 62.69 % of the spend.
/// - Committing $3.60/h: 168 × 3.60 = 604.80, saving -68.80: worse. So $1.20: the two serving
///   boxes' on-demand rate at the plan's rate, no more.
///
/// Before the policies every box runs every hour: $3.60 at plan rates each hour, and the same
/// method commits $3.60/h (saving 168 × 6 × 0.40 = 403.20 on that spend). After the policies it
/// is used (118 × 1.20 + 50 × 3.60) / (3.60 × 168) = 321.60 / 604.80 = 53.17 %, and loses
/// $68.80 over the week, 68.80 × 730 / 168 = $298.93 a month.
///
/// 3 years at $0.40: $0.80 (two boxes) saves 168 × 2 × 0.60 = 201.60; $2.40 (six) costs 403.20
/// against 536, saving 132.80: $0.80/h.
#[test]
fn commitments_are_sized_on_the_floor_the_policies_leave() {
    let d = tempfile::tempdir().unwrap();
    std::fs::create_dir(d.path().join("policies")).unwrap();
    std::fs::write(d.path().join("policies/p.yaml"), OFFICE_POLICY).unwrap();
    std::fs::write(d.path().join("fleet.yaml"), commitment_fleet()).unwrap();
    let set = ebb::policy::load(&[d.path().join("policies")]).unwrap();
    let (fleet, prior) = ebb::snapshot::load_snapshot(&d.path().join("fleet.yaml")).unwrap();
    let (from, to) = ("2026-11-30T00:00:00Z", "2026-12-07T00:00:00Z");
    let recordings: Vec<Recording> = fleet
        .instances
        .iter()
        .map(|i| Recording::new(i, samples(from, to, |t| commitment_load(&i.id, t))))
        .collect();
    let rates: PlanRates = [(Term::OneYear, 0.6), (Term::ThreeYears, 0.4)].into();
    let commitment_rates = BTreeMap::from([(
        "us-east-1".to_string(),
        BTreeMap::from([("g5.xlarge".to_string(), rates)]),
    )]);
    let on_demand = BTreeMap::new();
    let catalogue = advise::catalogue::shipped();
    let inputs = Inputs {
        options: Options {
            levers: ebb::cloud::levers(),
            from: at(from),
            to: at(to),
            tick: chrono::Duration::minutes(5),
            busy_threshold: 5.0,
        },
        policies: &set,
        prices: &fleet.prices,
        catalogue: &catalogue,
        on_demand: &on_demand,
        commitment_rates: &commitment_rates,
        max_unserved: None,
        subscription_tables: &[],
    };
    let advice = advice_of(&inputs, &recordings, &prior);
    let find = |term, basis| {
        advice
            .commitments
            .iter()
            .find(|c| c.term == term && c.basis == basis && c.region == "us-east-1")
            .unwrap_or_else(|| panic!("{term:?} {basis:?} in {:?}", advice.commitments))
    };
    let close = |got: f64, want: f64, what: &str| {
        assert!((got - want).abs() < 0.01, "{what}: {got}, by hand {want}");
    };
    let after = find(Term::OneYear, Basis::AfterPolicies);
    close(after.hourly_commitment_usd, 1.20, "1y after, $/h");
    assert!(after.hourly_commitment_usd <= 2.0 * 0.6 + 1e-9);
    close(after.utilisation_pct, 100.0, "1y after, used %");
    close(
        after.coverage_pct,
        100.0 * 336.0 / 536.0,
        "1y after, covered %",
    );
    close(
        after.monthly_savings_usd,
        134.40 * 730.0 / 168.0,
        "1y after, a month",
    );
    let before = find(Term::OneYear, Basis::BeforePolicies);
    close(before.hourly_commitment_usd, 3.60, "1y before, $/h");
    assert!(before.hourly_commitment_usd > after.hourly_commitment_usd);
    close(
        before.utilisation_pct,
        100.0 * 321.6 / 604.8,
        "1y before, used % after",
    );
    assert!(before.utilisation_pct < 100.0);
    close(
        before.monthly_savings_usd,
        -68.80 * 730.0 / 168.0,
        "1y before, a month after",
    );
    let three = find(Term::ThreeYears, Basis::AfterPolicies);
    close(three.hourly_commitment_usd, 0.80, "3y after, $/h");
    assert_eq!(advice.roles.commit, ["i-serving1", "i-serving2"]);
    assert_eq!(
        advice.roles.schedule,
        ["i-office1", "i-office2", "i-office3", "i-office4"]
    );
    assert!(advice.roles.spot.is_empty());
    let json: Value = serde_json::from_str(&advice.json()).unwrap();
    assert_eq!(json["from"], from);
    assert_eq!(json["commitments"].as_array().unwrap().len(), 4);
    assert_eq!(json["commitments"][0]["term"], "1y");
    assert_eq!(json["commitments"][0]["basis"], "after_policies");
}

/// The demo week's recording, from the workload generator, and a price table of the shipped
/// us-east-1 prices for each of its regions, written into `d`: (fleet, CSV, prices).
fn demo_week(d: &Path) -> [String; 3] {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let demo = root.join("deploy/demo-fleet.yaml");
    let (fleet, behaviours) = ebb::snapshot::load_simulation(&demo).unwrap();
    let mut csv = Vec::new();
    ebb::cloud::sim::write_utilisation(&fleet, &behaviours, at(DEMO.0), at(DEMO.1), &mut csv)
        .unwrap();
    std::fs::write(d.join("util.csv"), csv).unwrap();
    let table: serde_yaml::Value =
        serde_yaml::from_str(&std::fs::read_to_string(root.join("deploy/prices.yaml")).unwrap())
            .unwrap();
    let us = table["prices"]["us-east-1"].clone();
    let regions = ["ap-east-1", "eu-central-1", "us-east-1", "us-west-2"];
    let prices = serde_json::json!({
        "source": "deploy/prices.yaml's us-east-1, for every region",
        "as_of": "2025-05-01",
        "prices": regions.iter().map(|r| (r.to_string(), serde_json::to_value(&us).unwrap())).collect::<serde_json::Map<_, _>>(),
    });
    std::fs::write(
        d.join("prices.yaml"),
        serde_yaml::to_string(&prices).unwrap(),
    )
    .unwrap();
    let p = |name: &str| d.join(name).to_str().unwrap().to_string();
    [
        demo.to_str().unwrap().to_string(),
        p("util.csv"),
        p("prices.yaml"),
    ]
}

/// The demo week.
const DEMO: (&str, &str) = ("2026-11-30T00:00:00Z", "2026-12-07T00:00:00Z");

/// Runs the binary in the repository's root; its JSON output.
fn json_of(args: &[&str]) -> Value {
    let o = Command::new(env!("CARGO_BIN_EXE_ebb"))
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    serde_json::from_slice(&o.stdout).unwrap()
}

/// `change` applied to the YAML of its policy in a copy of `policies/` in `d`.
fn apply(change: &Value, d: &Path) -> String {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let out = d.join("changed");
    std::fs::create_dir_all(&out).unwrap();
    let (policy, key) = (
        change["policy"].as_str().unwrap(),
        change["key"].as_str().unwrap(),
    );
    let (from, to) = (
        change["from"].as_str().unwrap(),
        change["to"].as_str().unwrap(),
    );
    let leaf = key.rsplit('.').next().unwrap();
    let quote = |v: &str| match v.contains(':') {
        true => format!("\"{v}\""),
        false => v.to_string(),
    };
    let (old, new) = (
        format!("{leaf}: {}", quote(from)),
        format!("{leaf}: {}", quote(to)),
    );
    let mut applied = false;
    for entry in std::fs::read_dir(root.join("policies")).unwrap() {
        let path = entry.unwrap().path();
        let text = std::fs::read_to_string(&path).unwrap();
        let name = format!("- name: {policy}\n");
        let text = match text.split_once(&name) {
            Some((head, rest)) => {
                // The policy's block ends where the next one begins.
                let (block, tail) = rest.split_once("\n  - name:").unwrap_or((rest, ""));
                assert!(block.contains(&old), "{old} in {block}");
                applied = true;
                let tail = match tail.is_empty() {
                    true => String::new(),
                    false => format!("\n  - name:{tail}"),
                };
                format!("{head}{name}{}{tail}", block.replacen(&old, &new, 1))
            }
            None => text,
        };
        std::fs::write(out.join(path.file_name().unwrap()), text).unwrap();
    }
    assert!(applied, "{change}");
    out.to_str().unwrap().to_string()
}

/// The demo week under the example policies: `ebb advise` suggests at least one policy change,
/// and each, applied to the policy's YAML and replayed with `ebb replay` over the same week,
/// costs less than the current policies with no more unserved busy hours and no more wrongful
/// stops. Its saving is the replays' difference over a 730-hour month.
#[test]
fn a_policy_change_on_the_demo_week_costs_less_and_serves_as_much() {
    let d = tempfile::tempdir().unwrap();
    let [fleet, util, prices] = demo_week(d.path());
    let common = [
        "--fleet",
        &fleet,
        "--utilisation",
        &util,
        "--prices",
        &prices,
        "--from",
        DEMO.0,
        "--to",
        DEMO.1,
        "--format",
        "json",
    ];
    let mut args = vec!["advise", "--policies", "policies"];
    args.extend(common);
    let advice = json_of(&args);
    assert_eq!(advice["from"], DEMO.0);
    let changes = advice["policy_changes"].as_array().unwrap();
    assert!(!changes.is_empty(), "{advice:#}");
    let replay = |policies: &str| {
        let mut args = vec!["replay", "--policies", policies];
        args.extend(common);
        json_of(&args)
    };
    // The report of the change's currency (the policy's boxes are billed in it), and its
    // policies' scenario.
    let scenario = |r: &Value, currency: &str| -> Value {
        let report = match currency {
            "USD" => r.clone(),
            other => r["other_currencies"]
                .as_array()
                .unwrap()
                .iter()
                .find(|o| o["currency"] == other)
                .unwrap_or_else(|| panic!("no {other} report in {r:#}"))
                .clone(),
        };
        report["scenarios"]["policies"].clone()
    };
    let all_now = replay("policies");
    let m = |t: &Value, key: &str| t[key].as_f64().unwrap_or_else(|| panic!("{key} in {t}"));
    let mut currencies = std::collections::BTreeSet::new();
    for change in changes {
        let currency = change["currency"].as_str().unwrap();
        currencies.insert(currency);
        let cost = format!("cost_{}", currency.to_lowercase());
        let dir = tempfile::tempdir().unwrap();
        let now = scenario(&all_now, currency);
        let changed = scenario(&replay(&apply(change, dir.path())), currency);
        assert!(
            m(&changed, &cost) < m(&now, &cost),
            "{change}: {changed} vs {now}"
        );
        assert!(
            m(&changed, "unserved_busy_hours") <= m(&now, "unserved_busy_hours") + 1e-9,
            "{change}: {changed} vs {now}"
        );
        assert!(
            m(&changed, "wrongful_stops") <= m(&now, "wrongful_stops"),
            "{change}"
        );
        let monthly = (m(&now, &cost) - m(&changed, &cost)) * 730.0 / 168.0;
        let key = format!("monthly_savings_{}", currency.to_lowercase());
        assert!(
            (m(change, &key) - monthly).abs() < 0.05,
            "{change}: by replay {monthly}"
        );
        assert!(change["yaml_diff"]
            .as_str()
            .unwrap()
            .contains(&format!("name: {}", change["policy"].as_str().unwrap())));
    }
    // The demo's Hangzhou policy is advised in yuan, beside the dollars' policies.
    assert_eq!(
        currencies.into_iter().collect::<Vec<_>>(),
        ["CNY", "USD"],
        "{changes:#?}"
    );
}

/// Prices of the right-sizing tests, $/hour on demand (the shipped table's us-east-1 figures).
const SIZING_PRICES: &str = "
source: deploy/prices.yaml's us-east-1
as_of: 2025-05-01
prices:
  us-east-1:
    p4d.24xlarge: 32.7726
    p3.2xlarge: 3.06
    g4dn.xlarge: 0.526
    g5.xlarge: 1.006
    g6.xlarge: 0.8048
    g6e.xlarge: 1.861
    g5.12xlarge: 5.672
";

/// The CSV of `rows` instances, each `(id, days, gpu_util, gpu_mem_mib, gpus_busy)`, sampled
/// every 5 minutes from 2026-11-30 for its days.
fn signals_csv(rows: &[(&str, i64, f64, u32, u32)]) -> String {
    let mut csv = String::from("instance,time,gpu_util,gpu_mem_mib,gpus_busy\n");
    for (id, days, util, mem, busy) in rows {
        let from = at("2026-11-30T00:00:00Z");
        let mut t = from;
        while t < from + chrono::Duration::days(*days) {
            csv.push_str(&format!(
                "{id},{},{util},{mem},{busy}\n",
                t.format("%Y-%m-%dT%H:%M:%SZ")
            ));
            t += chrono::Duration::minutes(5);
        }
    }
    csv
}

/// Eight days, 2026-11-30 to 2026-12-08 (192 hours), of a fleet no policy governs, so each
/// instance runs all 192 hours:
/// - `i-a100x8`, a p4d.24xlarge (8 × A100 40 GB, $32.7726/h) whose busiest GPU is at 30 %,
///   one GPU busy and 12 GiB (12,288 MiB) held. A single-GPU type carries it when 12,288 MiB is
///   within 80 % of its GPU and its GPU is Ampere or newer: g5.xlarge (A10G, 22,888 × 0.8 =
///   18,310 MiB, $1.006), g6.xlarge (L4, the same memory, $0.8048), g6e.xlarge (L40S, $1.861);
///   not g4dn.xlarge (T4, older, though cheaper at $0.526) nor p3.2xlarge (V100, older). The
///   cheapest is g6.xlarge: (32.7726 - 0.8048) × 192 h = $6,137.82 over the period, or
///   31.9678 × 730 = $23,336.49 a month.
/// - `i-busy`, a g5.xlarge at 95 % holding 20,000 MiB: only g6e.xlarge (45,776 × 0.8 = 36,621)
///   holds that among the others, and it costs more: no suggestion.
/// - the same p4d load on a spot instance, on one an Auto Scaling group owns, and on one with
///   6 days of readings: no suggestion.
#[test]
fn an_eight_gpu_box_using_one_gpu_is_right_sized_and_a_busy_box_is_not() {
    let d = tempfile::tempdir().unwrap();
    std::fs::create_dir(d.path().join("policies")).unwrap();
    std::fs::write(
        d.path().join("policies/p.yaml"),
        "policies:\n  - name: none\n    match: {tags: {team: nobody}}\n    idle: {gpu_below: 5, for: 1h}\n",
    )
    .unwrap();
    let instance = |id: &str, ty: &str, extra: &str| {
        format!("  - {{id: {id}, region: us-east-1, type: {ty}, state: running, launched_at: 2026-11-29T00:00:00Z, tags: {{team: ml}}{extra}}}\n")
    };
    let fleet = [
        "instances:\n".to_string(),
        instance("i-a100x8", "p4d.24xlarge", ""),
        instance("i-busy", "g5.xlarge", ""),
        instance("i-spot", "p4d.24xlarge", ", lifecycle: spot"),
        instance("i-owned", "p4d.24xlarge", "").replace(
            "{team: ml}",
            "{team: ml, \"aws:autoscaling:groupName\": training}",
        ),
        instance("i-short", "p4d.24xlarge", ""),
    ]
    .concat();
    std::fs::write(d.path().join("fleet.yaml"), fleet).unwrap();
    std::fs::write(d.path().join("prices.yaml"), SIZING_PRICES).unwrap();
    std::fs::write(
        d.path().join("util.csv"),
        signals_csv(&[
            ("i-a100x8", 8, 30.0, 12288, 1),
            ("i-busy", 8, 95.0, 20000, 1),
            ("i-spot", 8, 30.0, 12288, 1),
            ("i-owned", 8, 30.0, 12288, 1),
            ("i-short", 6, 30.0, 12288, 1),
        ]),
    )
    .unwrap();
    let p = |name: &str| d.path().join(name).to_str().unwrap().to_string();
    let advice = json_of(&[
        "advise",
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
        "2026-12-08T00:00:00Z",
        "--format",
        "json",
    ]);
    let rightsize = advice["rightsize"].as_array().unwrap();
    assert_eq!(rightsize.len(), 1, "{advice:#}");
    let s = &rightsize[0];
    assert_eq!(s["instance"], "i-a100x8");
    assert_eq!(s["type"], "p4d.24xlarge");
    assert_eq!(s["suggested_type"], "g6.xlarge");
    let monthly = (32.7726 - 0.8048) * 730.0;
    assert!(
        (s["monthly_savings_usd"].as_f64().unwrap() - monthly).abs() < 0.01,
        "{s}: by hand {monthly}"
    );
    let why = s["why"].as_str().unwrap();
    for part in [
        "busiest GPU p95 30 %",
        "p95 1 of 8 GPUs busy",
        "peak 12.0 GiB",
        "g6.xlarge would carry it",
        "$23,336.49 a month less",
    ] {
        assert!(why.contains(part), "{part} in {why}");
    }
}

/// Two Alibaba boxes paid by the hour at 10 CNY/h, with subscriptions of their type at 5,000
/// CNY a month for 1 month and 4,000 a month for 12, over the week from Monday 2026-11-30
/// (168 hours); and one box already on a subscription.
///
/// The office box is busy 09:00-17:00 on weekdays, the serving ones always
/// (`commitment_load`). By hand: `i-serving-allday` (no policy) runs all 168 hours, 730 h a month, 7,300 CNY paid by the
/// hour: the 12-month term saves 3,300 a month (break-even 400 h), the 1-month one 2,300
/// (break-even 500 h), so 12 months. `i-office` runs 08:00-18:00 on weekdays, 50 of the 168
/// hours, 50 × 730 / 168 = 217.26 h a month, 2,172.62 CNY paid by the hour: under both
/// break-evens, so it stays by the hour; a subscription would lose the 7,300 - 2,172.62 =
/// 5,127.38 a month stopping saves. `i-serving-prepaid` is not paid by the hour: no advice.
#[test]
fn a_box_running_all_month_is_advised_a_subscription_and_one_stopped_nightly_is_not() {
    let d = tempfile::tempdir().unwrap();
    std::fs::create_dir(d.path().join("policies")).unwrap();
    std::fs::write(d.path().join("policies/p.yaml"), OFFICE_POLICY).unwrap();
    let box_of = |id: &str, team: &str, charge: &str| {
        format!("  - {{id: {id}, region: cn-hangzhou, type: ecs.gn7i-c8g1.2xlarge, state: running, cloud: alibaba, charge: {charge}, tags: {{team: {team}}}}}\n")
    };
    let fleet = [
        "instances:\n".to_string(),
        box_of("i-serving-allday", "serving", "pay-as-you-go"),
        box_of("i-office", "office", "pay-as-you-go"),
        box_of("i-serving-prepaid", "serving", "subscription"),
        "prices:\n  cn-hangzhou: {ecs.gn7i-c8g1.2xlarge: {on_demand: 10.0}}\n".to_string(),
    ]
    .concat();
    std::fs::write(d.path().join("fleet.yaml"), fleet).unwrap();
    let set = ebb::policy::load(&[d.path().join("policies")]).unwrap();
    let (fleet, prior) = ebb::snapshot::load_snapshot(&d.path().join("fleet.yaml")).unwrap();
    let (from, to) = ("2026-11-30T00:00:00Z", "2026-12-07T00:00:00Z");
    let recordings: Vec<Recording> = fleet
        .instances
        .iter()
        .map(|i| Recording::new(i, samples(from, to, |t| commitment_load(&i.id, t))))
        .collect();
    let yuan = ebb::cloud::PriceTable {
        prices: [(
            "cn-hangzhou".to_string(),
            [("ecs.gn7i-c8g1.2xlarge".to_string(), 10.0)].into(),
        )]
        .into(),
        subscription: [(
            "cn-hangzhou".to_string(),
            [(
                "ecs.gn7i-c8g1.2xlarge".to_string(),
                [(1, 5000.0), (12, 4000.0)].into(),
            )]
            .into(),
        )]
        .into(),
        ..Default::default()
    };
    let tables = [("CNY", &yuan)];
    let (on_demand, commitment_rates) = (BTreeMap::new(), BTreeMap::new());
    let catalogue = advise::catalogue::shipped();
    let inputs = Inputs {
        options: Options {
            levers: ebb::cloud::levers(),
            from: at(from),
            to: at(to),
            tick: chrono::Duration::minutes(5),
            busy_threshold: 5.0,
        },
        policies: &set,
        prices: &fleet.prices,
        catalogue: &catalogue,
        on_demand: &on_demand,
        commitment_rates: &commitment_rates,
        max_unserved: None,
        subscription_tables: &tables,
    };
    let advice = advice_of(&inputs, &recordings, &prior);
    let close = |got: f64, want: f64, what: &str| {
        assert!((got - want).abs() < 0.01, "{what}: {got}, by hand {want}");
    };
    let ids: Vec<&str> = advice
        .subscriptions
        .iter()
        .map(|s| s.instance.as_str())
        .collect();
    assert_eq!(
        ids,
        ["i-office", "i-serving-allday"],
        "none for the subscription box"
    );
    let allday = &advice.subscriptions[1];
    assert_eq!(allday.currency, "CNY");
    close(allday.running_hours_a_month, 730.0, "all day, hours");
    close(allday.pay_as_you_go_a_month, 7300.0, "all day, by the hour");
    assert_eq!(allday.advised_months, Some(12));
    close(allday.terms[1].saving_a_month, 3300.0, "12 months, saving");
    close(
        allday.terms[1].break_even_hours,
        400.0,
        "12 months, break-even",
    );
    close(
        allday.terms[0].break_even_hours,
        500.0,
        "1 month, break-even",
    );
    assert_eq!(
        allday.action.as_deref(),
        Some("ModifyInstanceChargeType InstanceChargeType=PrePaid Period=12 PeriodUnit=Month")
    );
    let office = &advice.subscriptions[0];
    close(
        office.running_hours_a_month,
        50.0 * 730.0 / 168.0,
        "office, hours",
    );
    close(office.pay_as_you_go_a_month, 2172.62, "office, by the hour");
    assert_eq!(office.advised_months, None);
    assert_eq!(office.action, None);
    assert!(
        office
            .why
            .contains("would lose the 5127.38 CNY a month that stopping it saves"),
        "{}",
        office.why
    );
    let json: Value = serde_json::from_str(&advice.json()).unwrap();
    assert_eq!(json["subscriptions"][0]["advised_months"], Value::Null);
    assert_eq!(json["subscriptions"][1]["advised_months"], 12);
    assert!(advice.table().contains("12-month subscription"));
    assert!(advice.markdown().contains("stay by the hour"));
}

/// Advice from less than a week says that its figures rest on those days alone; a week says
/// nothing of it.
#[test]
fn advice_from_less_than_a_week_says_its_figures_rest_on_it() {
    let d = tempfile::tempdir().unwrap();
    let [fleet, util, prices] = demo_week(d.path());
    let stderr = |to: &str| {
        let o = Command::new(env!("CARGO_BIN_EXE_ebb"))
            .args([
                "advise",
                "--policies",
                "policies",
                "--fleet",
                &fleet,
                "--utilisation",
                &util,
                "--prices",
                &prices,
                "--from",
                DEMO.0,
                "--to",
                to,
                "--format",
                "json",
            ])
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        String::from_utf8_lossy(&o.stderr).into_owned()
    };
    let two_days = stderr("2026-12-02T00:00:00Z");
    assert!(
        two_days.contains("warning: advice from 2.0 days of recording"),
        "{two_days}"
    );
    assert!(!stderr(DEMO.1).contains("days of recording"));
}
