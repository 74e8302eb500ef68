//! `ebb replay` from Postgres (no `--fleet`, no `--utilisation`): the instances, their states
//! and ebb's stops written through the store's own functions, as ticks write them, and the
//! report equal to the one replayed from `ebb metrics export` and a fleet snapshot of the
//! same instances at `--from`, run with the built binary.

use crate::common;
use crate::common::ebb_on;

use chrono::{DateTime, Duration, Utc};
use common::{database_url, instance, t};
use ebb::fleet::{Instance, InstanceState, Sample};
use ebb::store::{NewAuditEntry, Outcome, Store};
use sqlx::PgPool;
use std::process::Output;

const FROM: &str = "2026-11-30T06:00:00Z";
const TO: &str = "2026-11-30T20:00:00Z";

const POLICIES: &str = r#"
policies:
  - name: office
    match: {tags: {team: office}}
    work_hours:
      timezone: UTC
      periods: [{days: mon-fri, start: "08:00", stop: "18:00"}]
      start_at_open: stopped-by-ebb
  - name: notebooks
    match: {tags: {team: research}}
    idle: {gpu_below: 5, for: 30m}
"#;

/// The same instances at [`FROM`] as a snapshot: what ebb tracked then, in the states it had
/// then, with ebb's stop of i-office remembered (so the opening starts it), and the volumes
/// and Elastic IPs ticks kept of them.
const SNAPSHOT: &str = "instances:
  - {id: i-notebook, region: us-east-1, type: g5.xlarge, state: running,
     state_since: 2026-11-29T17:00:00Z, tags: {team: research},
     volumes: [{volume_type: gp3, size_gib: 500}], elastic_ips: 1}
  - {id: i-office, region: us-east-1, type: g5.xlarge, state: stopped,
     state_since: 2026-11-29T17:00:00Z, stopped_by_ebb_at: 2026-11-29T16:59:00Z,
     tags: {team: office}, volumes: [{volume_type: gp3, size_gib: 500}], elastic_ips: 1}
  - {id: i-person, region: us-east-1, type: g5.xlarge, state: stopped,
     state_since: 2026-11-29T17:00:00Z, tags: {team: research},
     volumes: [{volume_type: gp3, size_gib: 500}], elastic_ips: 1}
";

/// 500 GiB of gp3 and an Elastic IP, as a tick keeps what it read.
fn disk_and_address() -> ebb::fleet::money::Attached {
    ebb::fleet::money::Attached {
        volumes: Some(vec![ebb::fleet::money::Volume {
            volume_type: "gp3".into(),
            size_gib: 500,
        }]),
        elastic_ips: Some(1),
    }
}

fn out(o: &Output) -> String {
    assert!(
        o.status.success(),
        "exit {:?}: {}",
        o.status,
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn with_state(mut i: Instance, state: InstanceState) -> Instance {
    i.state = state;
    i
}

/// Five-minute readings from `from` to `to`, `busy` percent within `busy_span`, 1 % otherwise.
fn readings(from: &str, to: &str, busy_span: (&str, &str)) -> Vec<Sample> {
    let (busy_from, busy_to) = (t(busy_span.0), t(busy_span.1));
    let mut at: DateTime<Utc> = t(from);
    let mut samples = Vec::new();
    while at < t(to) {
        let busy = at >= busy_from && at < busy_to;
        samples.push(Sample::new(at, if busy { 70.0 } else { 1.0 }));
        at += Duration::minutes(5);
    }
    samples
}

/// Ebb's stop of `id` at `at`, as a tick records its outcome.
fn ebb_stopped(id: &str, at: &str) -> NewAuditEntry {
    NewAuditEntry {
        at: t(at),
        actor: "scheduler".into(),
        instance: Some(id.into()),
        region: Some("us-east-1".into()),
        action: "stop".into(),
        outcome: Outcome::Succeeded,
        policy: Some("office".into()),
        policy_version: None,
        code: Some("outside_hours".into()),
        reason: "outside work hours".into(),
        dry_run: false,
        request_id: Some("req-1".into()),
        error: None,
        intent_seq: None,
    }
}

/// A day of what ticks write: syncs of the listing (states, an instance gone before
/// [`FROM`], one first seen after it, one a person starts after it), ebb's stop of i-office
/// the evening before, and the GPU readings.
async fn record_a_day(store: &Store) {
    let region = ["us-east-1".to_string()];
    let office = instance("i-office", &[("team", "office")]);
    let notebook = instance("i-notebook", &[("team", "research")]);
    let person = instance("i-person", &[("team", "research")]);
    let gone = instance("i-gone", &[("team", "research")]);
    let late = instance("i-late", &[("team", "research")]);
    let stopped = |i: &Instance| with_state(i.clone(), InstanceState::Stopped);
    let evening = [
        stopped(&office),
        notebook.clone(),
        stopped(&person),
        gone.clone(),
    ];
    store
        .sync_inventory(&region, &evening, t("2026-11-29T17:00:00Z"))
        .await
        .unwrap();
    store
        .append_audit(&[ebb_stopped("i-office", "2026-11-29T16:59:00Z")])
        .await
        .unwrap();
    // i-gone is terminated and no longer listed before the replay starts.
    let night = [stopped(&office), notebook.clone(), stopped(&person)];
    store
        .sync_inventory(&region, &night, t("2026-11-30T05:00:00Z"))
        .await
        .unwrap();
    // After --from: i-late appears, a person starts i-person, the office box runs.
    let morning = [
        office.clone(),
        notebook.clone(),
        stopped(&person),
        late.clone(),
    ];
    store
        .sync_inventory(&region, &morning, t("2026-11-30T08:05:00Z"))
        .await
        .unwrap();
    let later = [office, notebook, person, late];
    store
        .sync_inventory(&region, &later, t("2026-11-30T09:10:00Z"))
        .await
        .unwrap();
    let kept = ["i-notebook", "i-office", "i-person", "i-late", "i-gone"]
        .into_iter()
        .map(|id| (id.to_string(), disk_and_address()))
        .collect();
    store.keep_attached(&kept).await.unwrap();
    let day = |busy| readings("2026-11-30T05:00:00Z", "2026-11-30T21:00:00Z", busy);
    let notebook_day = day(("2026-11-30T10:00:00Z", "2026-11-30T10:30:00Z"));
    let office_day = day(("2026-11-30T09:00:00Z", "2026-11-30T17:00:00Z"));
    let person_day = day(("2026-11-30T09:00:00Z", "2026-11-30T12:00:00Z"));
    let late_day = day(("2026-11-30T07:00:00Z", "2026-11-30T19:00:00Z"));
    let gone_day = day(("2026-11-30T05:00:00Z", "2026-11-30T21:00:00Z"));
    store
        .record_gpu_readings(&[
            ("i-notebook", &notebook_day),
            ("i-office", &office_day),
            ("i-person", &person_day),
            ("i-late", &late_day),
            ("i-gone", &gone_day),
        ])
        .await
        .unwrap();
}

#[sqlx::test(migrations = false)]
async fn replay_from_postgres_equals_the_replay_of_the_export_and_a_snapshot(pool: PgPool) {
    let url = database_url(&pool);
    let store = Store::from_pool(pool);
    store.migrate().await.unwrap();
    record_a_day(&store).await;

    let dir = tempfile::tempdir().unwrap();
    let p = |name: &str| dir.path().join(name).to_str().unwrap().to_string();
    std::fs::write(p("policies.yaml"), POLICIES).unwrap();
    std::fs::write(p("fleet.yaml"), SNAPSHOT).unwrap();
    let prices = concat!(env!("CARGO_MANIFEST_DIR"), "/deploy/prices.yaml");
    let exported = out(&ebb_on(
        &url,
        &["metrics", "export", "--since", "2026-11-29T00:00:00Z"],
    ));
    // The export has every instance's readings; the snapshot names the three ebb tracked at
    // --from, so the file replay is given theirs.
    let tracked: String = exported
        .lines()
        .filter(|l| !l.starts_with("i-late") && !l.starts_with("i-gone"))
        .map(|l| format!("{l}\n"))
        .collect();
    std::fs::write(p("util.csv"), tracked).unwrap();
    let common = [
        "replay",
        "--policies",
        &p("policies.yaml"),
        "--from",
        FROM,
        "--to",
        TO,
        "--prices",
        prices,
        "--format",
        "json",
    ];
    let from_files = out(&ebb_on(
        &url,
        &[
            &common[..],
            &["--fleet", &p("fleet.yaml"), "--utilisation", &p("util.csv")],
        ]
        .concat(),
    ));
    let from_postgres = out(&ebb_on(&url, &common));
    let files: serde_json::Value = serde_json::from_str(&from_files).unwrap();
    let postgres: serde_json::Value = serde_json::from_str(&from_postgres).unwrap();
    assert_eq!(postgres, files, "{from_postgres}\n{from_files}");
    // Both say what the stopped boxes still paid for the disks and addresses kept.
    let net = &postgres["commitments"];
    assert!(net["stopped_box_cost_usd"].as_f64().unwrap() > 0.0, "{net}");
    assert!(net["net_savings_usd"].is_number(), "{net}");

    // And the report is about something: the three instances tracked at --from, i-office
    // started at the opening (ebb's stop remembered), i-person's demand unserved until a
    // person starts it, the notebook stopped when idle.
    let ids: Vec<&str> = postgres["instances"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["instance"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["i-notebook", "i-office", "i-person"]);
    let measure = |id: &str, m: &str| {
        let i = postgres["instances"]
            .as_array()
            .unwrap()
            .iter()
            .find(|i| i["instance"] == id)
            .unwrap();
        i["scenarios"]["policies"][m].as_f64().unwrap()
    };
    assert_eq!(measure("i-office", "starts"), 1.0, "{postgres}");
    assert_eq!(measure("i-office", "unserved_busy_hours"), 0.0);
    assert!(measure("i-person", "unserved_busy_hours") > 0.0);
    assert!(measure("i-notebook", "stops") >= 1.0);

    // `ebb advise` reads the same fleet and readings from Postgres as from the files, and
    // advises the same.
    let advise = |files: &[&str]| -> serde_json::Value {
        let mut args = common.to_vec();
        args[0] = "advise";
        args.extend_from_slice(files);
        serde_json::from_str(&out(&ebb_on(&url, &args))).unwrap()
    };
    let files = advise(&["--fleet", &p("fleet.yaml"), "--utilisation", &p("util.csv")]);
    let postgres = advise(&[]);
    assert_eq!(postgres, files);
    assert_eq!(postgres["from"], FROM);
    assert!(postgres["policy_changes"].is_array(), "{postgres}");
}

#[test]
fn a_fleet_file_without_utilisation_is_refused() {
    let o = ebb_on(
        "postgres://unused",
        &[
            "replay",
            "--policies",
            "unused",
            "--fleet",
            "fleet.yaml",
            "--from",
            FROM,
            "--to",
            TO,
        ],
    );
    assert_eq!(o.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("--utilisation"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
}

/// How each box is billed is kept with it, so that what is worked out from Postgres (the fleet
/// `ebb replay` and `ebb advise` start from, the console's explanations) bills an Alibaba
/// Cloud or Tencent Cloud box as its listing did: before, every box read back was billed as
/// EC2 bills, so a subscription box or a gn5 box (whose stop keeps charging) was taken to save
/// on every stop.
#[sqlx::test(migrations = false)]
async fn each_box_is_read_back_billed_as_its_cloud_listed_it(pool: PgPool) {
    use ebb::fleet::{Billing, Charge, Cloud, StoppedMode};
    let store = Store::from_pool(pool);
    store.migrate().await.unwrap();
    let listed = |id: &str, region: &str, instance_type: &str, billing: Billing| Instance {
        region: region.to_string(),
        instance_type: instance_type.to_string(),
        billing,
        ..instance(id, &[("team", "research")])
    };
    let gn5 = Billing::of(
        Cloud::Alibaba,
        Charge::PayAsYouGo,
        "ecs.gn5-c4g1.xlarge",
        Some("ecs.gn5"),
    );
    let prepaid = Billing::of(
        Cloud::Alibaba,
        Charge::Subscription,
        "ecs.gn7i-c8g1.2xlarge",
        None,
    );
    let tencent = Billing::of(Cloud::Tencent, Charge::PayAsYouGo, "GN7.2XLARGE32", None);
    let mut stopped = listed(
        "ins-stopped",
        "ap-guangzhou",
        "GN7.2XLARGE32",
        tencent.clone(),
    );
    stopped.state = InstanceState::Stopped;
    let instances = [
        listed("i-gn5", "cn-hangzhou", "ecs.gn5-c4g1.xlarge", gn5.clone()),
        listed(
            "i-prepaid",
            "cn-hangzhou",
            "ecs.gn7i-c8g1.2xlarge",
            prepaid.clone(),
        ),
        stopped,
        instance("i-ec2", &[("team", "research")]),
    ];
    let regions = ["cn-hangzhou", "ap-guangzhou", "us-east-1"].map(String::from);
    store
        .sync_inventory(&regions, &instances, t(FROM))
        .await
        .unwrap();

    let (fleet, _) = store.fleet_at(t(FROM)).await.unwrap();
    let billing = |id: &str| {
        let i = fleet.iter().find(|i| i.id == id).unwrap();
        i.billing.clone()
    };
    assert_eq!(billing("i-gn5"), gn5);
    assert!(!billing("i-gn5").stop_saves(), "a gn5 stop keeps charging");
    assert_eq!(billing("i-prepaid"), prepaid);
    assert_eq!(
        billing("ins-stopped"),
        Billing {
            stopped_mode: Some(StoppedMode::Unknown),
            ..tencent
        },
        "what a stopped Tencent box is billed was not kept: unknown, never no charge"
    );
    assert_eq!(billing("i-ec2"), Billing::EC2);

    // The console's records bill them the same way.
    let record = store.instance("i-prepaid").await.unwrap().unwrap();
    assert_eq!(record.billing_in(InstanceState::Running), prepaid);
}

/// From Postgres, an Alibaba Cloud box is priced by the quote `serve` kept (the price table
/// has no yuan), in a report of its own in CNY, apart from the EC2 box's dollars; without the
/// quote, the replay refuses to guess.
#[sqlx::test(migrations = false)]
async fn an_alibaba_box_is_replayed_in_yuan_at_the_quote_kept(pool: PgPool) {
    use ebb::fleet::quotes::PriceQuote;
    use ebb::fleet::{Billing, Charge, Cloud};
    let url = database_url(&pool);
    let store = Store::from_pool(pool);
    store.migrate().await.unwrap();
    let hangzhou = Instance {
        region: "cn-hangzhou".into(),
        instance_type: "ecs.gn7i-c8g1.2xlarge".into(),
        billing: Billing::of(
            Cloud::Alibaba,
            Charge::PayAsYouGo,
            "ecs.gn7i-c8g1.2xlarge",
            None,
        ),
        ..instance("i-bp1", &[("team", "office")])
    };
    let ec2 = instance("i-ec2", &[("team", "office")]);
    let regions = ["cn-hangzhou", "us-east-1"].map(String::from);
    store
        .sync_inventory(&regions, &[hangzhou, ec2], t(FROM))
        .await
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let policies = dir.path().join("policies.yaml");
    std::fs::write(&policies, POLICIES).unwrap();
    let prices = concat!(env!("CARGO_MANIFEST_DIR"), "/deploy/prices.yaml");
    let args = [
        "replay",
        "--policies",
        policies.to_str().unwrap(),
        "--from",
        FROM,
        "--to",
        TO,
        "--prices",
        prices,
        "--format",
        "json",
    ];
    let refused = ebb_on(&url, &args);
    assert_eq!(refused.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&refused.stderr).contains("ecs.gn7i-c8g1.2xlarge"));

    let quote = PriceQuote {
        region: "cn-hangzhou".into(),
        instance_type: "ecs.gn7i-c8g1.2xlarge".into(),
        currency: "CNY".into(),
        hourly: Some(10.0),
        monthly: Default::default(),
        source: "DescribePrice".into(),
        quoted_at: t(FROM),
    };
    store.keep_quotes(&[quote]).await.unwrap();
    let r: serde_json::Value = serde_json::from_str(&out(&ebb_on(&url, &args))).unwrap();
    assert_eq!(r["instances"][0]["instance"], "i-ec2");
    // 14 hours always on at g5.xlarge's shipped $1.006.
    let usd = r["scenarios"]["always_on"]["cost_usd"].as_f64().unwrap();
    assert!((usd - 14.0 * 1.006).abs() < 1e-6, "{r:#}");
    let cny = &r["other_currencies"][0];
    assert_eq!(cny["currency"], "CNY");
    assert_eq!(cny["instances"][0]["instance"], "i-bp1");
    let yuan = cny["scenarios"]["always_on"]["cost_cny"].as_f64().unwrap();
    assert!((yuan - 140.0).abs() < 1e-6, "{cny:#}");
}
