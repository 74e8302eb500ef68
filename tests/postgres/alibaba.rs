//! `--cloud alibaba` end to end: the built binary against the fake of Alibaba Cloud's ECS API
//! (`tests/common/alibaba_fake.rs`, written from the documentation, checking every signature)
//! and a real Postgres. An opted-in pay-as-you-go GPU box is stopped in the no-charge mode after
//! hours and started at the opening; a subscription box is never stopped; a local-disk family
//! is refused before the call; the audit log verifies.

use crate::common;

use common::alibaba_fake::{Fake, FakeInstance, FakeOidc};
use common::Ebb;
use serde_json::Value;
use sqlx::PgPool;

/// Beijing work hours on weekdays, for the ML team's boxes.
const POLICY: &str = r#"
policies:
  - name: ml-beijing
    match:
      tags: {team: ml}
    work_hours:
      timezone: Asia/Shanghai
      periods:
        - {days: mon-fri, start: "09:00", stop: "19:00"}
      start_at_open: stopped-by-ebb
      busy_defers_stop: false
"#;

const REGION: &str = "cn-hangzhou";

/// A price table with the Hangzhou GPU box in yuan (a test figure, not Alibaba's price list).
const YUAN_PRICES: &str = "source: test
as_of: 2026-12-01
prices: {}
other_currencies:
  CNY:
    source: a test figure
    as_of: 2026-12-01
    prices:
      cn-hangzhou:
        ecs.gn7i-c8g1.2xlarge: 9.5
";

/// Monday 20:00, 20:05 and Tuesday 09:05 in Beijing.
const EVENING: &str = "2026-11-30T12:00:00Z";
const LATER: &str = "2026-11-30T12:05:00Z";
const MORNING: &str = "2026-12-01T01:05:00Z";

fn managed(id: &str, instance_type: &str) -> FakeInstance {
    FakeInstance::new(
        id,
        REGION,
        instance_type,
        &[("team", "ml"), ("ebb:managed", "true")],
    )
}

/// The fake's fleet: a pay-as-you-go GPU box, a subscription one, a local-disk one, a gn5 GPU
/// box (local SSDs: family `ecs.gn5`, though its type names `ecs.gn5-c4g1`), and a box not
/// opted in.
fn fleet() -> Vec<FakeInstance> {
    let mut subscription = managed("i-bp1sub", "ecs.gn7i-c8g1.2xlarge");
    subscription.charge_type = "PrePaid".into();
    vec![
        managed("i-bp1gpu", "ecs.gn7i-c8g1.2xlarge"),
        subscription,
        managed("i-bp1local", "ecs.i2g.2xlarge"),
        managed("i-bp1gn5", "ecs.gn5-c4g1.xlarge"),
        FakeInstance::new(
            "i-bp1other",
            REGION,
            "ecs.gn7i-c8g1.2xlarge",
            &[("team", "ml")],
        ),
    ]
}

struct Setup {
    fake: Fake,
    url: String,
    policies: tempfile::TempDir,
}

impl Setup {
    async fn new(pool: &PgPool) -> Setup {
        let policies = tempfile::tempdir().unwrap();
        std::fs::write(policies.path().join("ml.yaml"), POLICY).unwrap();
        Setup {
            fake: Fake::start(fleet()),
            url: common::migrated_for_runtime(pool).await,
            policies,
        }
    }

    /// A pay-as-you-go GPU box, `i-bp1gpu`, and a preemptible one of the same type, `i-bp1spot`.
    async fn with_a_preemptible_box(pool: &PgPool) -> Setup {
        let mut preemptible = managed("i-bp1spot", "ecs.gn7i-c8g1.2xlarge");
        preemptible.spot_strategy = "SpotAsPriceGo".into();
        Setup {
            fake: Fake::start(vec![
                managed("i-bp1gpu", "ecs.gn7i-c8g1.2xlarge"),
                preemptible,
            ]),
            ..Setup::new(pool).await
        }
    }

    fn ebb(&self) -> Ebb {
        Ebb::on(&self.url)
            .envs(self.fake.env())
            .env("EBB_POLICIES", self.policies.path())
            .env("EBB_REGIONS", REGION)
    }

    fn tick(&self, at: &str) -> String {
        let out = self.ebb().run(&["tick", "--at", at]);
        assert!(out.status.success(), "tick at {at} failed: {out:?}");
        String::from_utf8(out.stdout).unwrap()
    }

    /// The audit rows of `action` on `id`.
    fn audit(&self, id: &str, action: &str) -> Vec<Value> {
        let out = self.ebb().run(&[
            "audit",
            "--instance",
            id,
            "--action",
            action,
            "--format",
            "json",
        ]);
        serde_json::from_slice(&out.stdout).unwrap()
    }

    /// The outcomes of the rows of ebb's stops of `id`, sorted.
    fn stop_outcomes(&self, id: &str) -> Vec<String> {
        let mut outcomes: Vec<String> = self
            .audit(id, "stop")
            .iter()
            .map(|r| r["outcome"].as_str().unwrap().to_string())
            .collect();
        outcomes.sort();
        outcomes
    }

    /// The instance ids of the fake's accepted calls of `action`.
    fn acted_on(&self, action: &str) -> Vec<String> {
        self.fake
            .accepted(action)
            .iter()
            .flat_map(|c| {
                c.params
                    .iter()
                    .filter(|(k, _)| k.starts_with("InstanceId."))
                    .map(|(_, v)| v.clone())
                    .collect::<Vec<_>>()
            })
            .collect()
    }
}

#[sqlx::test(migrations = false)]
async fn inventory_lists_the_opted_in_boxes_with_their_billing_and_gpus(pool: PgPool) {
    let s = Setup::new(&pool).await;
    let out = s.ebb().run(&["inventory", "--format", "json"]);
    assert!(out.status.success(), "{out:?}");
    let snapshot: Value = serde_json::from_slice(&out.stdout).unwrap();
    let instances = snapshot["instances"].as_array().unwrap();
    let ids: Vec<&str> = instances
        .iter()
        .map(|i| i["id"].as_str().unwrap())
        .collect();
    assert_eq!(
        ids,
        ["i-bp1gpu", "i-bp1sub", "i-bp1local", "i-bp1gn5"],
        "only the opted-in boxes"
    );
    assert!(instances.iter().all(|i| i["cloud"] == "alibaba"));
    assert_eq!(instances[1]["charge"], "subscription");
    assert!(
        instances[0].get("charge").is_none(),
        "pay-as-you-go is the default"
    );
    assert_eq!(
        s.fake.accepted("DescribeInstanceTypes").len(),
        1,
        "the three types asked in one call"
    );
    let table = s.ebb().run(&["inventory"]);
    let table = String::from_utf8(table.stdout).unwrap();
    assert!(
        table.contains("1 × NVIDIA A10"),
        "GPUs from DescribeInstanceTypes: {table}"
    );
}

/// On ACK with RRSA (the pod identity webhook's three variables, no AccessKey), ebb assumes
/// its service account's RAM role with the mounted OIDC token, as the official SDKs do, and
/// signs every ECS call with the credentials STS issued and their security token; a token STS
/// refuses lists nothing and says why.
#[sqlx::test(migrations = false)]
async fn on_ack_with_rrsa_ebb_assumes_its_service_accounts_role(pool: PgPool) {
    let s = Setup::new(&pool).await;
    let role = "acs:ram::1234567890:role/ebb";
    let provider = "acs:ram::1234567890:oidc-provider/ack-rrsa-c0ffee";
    s.fake.state.lock().unwrap().oidc = Some(FakeOidc {
        role_arn: role.to_string(),
        provider_arn: provider.to_string(),
        token: "eyJ-the-service-accounts-token".to_string(),
    });
    let dir = tempfile::tempdir().unwrap();
    let token_file = dir.path().join("token");
    std::fs::write(&token_file, "eyJ-the-service-accounts-token\n").unwrap();
    let rrsa = || {
        s.ebb()
            .env_remove("ALIBABA_CLOUD_ACCESS_KEY_ID")
            .env_remove("ALIBABA_CLOUD_ACCESS_KEY_SECRET")
            .env("ALIBABA_CLOUD_ROLE_ARN", role)
            .env("ALIBABA_CLOUD_OIDC_PROVIDER_ARN", provider)
            .env("ALIBABA_CLOUD_OIDC_TOKEN_FILE", &token_file)
    };

    let out = rrsa().run(&["inventory", "--format", "json"]);
    assert!(out.status.success(), "{out:?}");
    let snapshot: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(snapshot["instances"].as_array().unwrap().len(), 4);
    let assumed = s.fake.accepted("AssumeRoleWithOIDC");
    assert_eq!(assumed.len(), 1, "one role session for the whole run");
    assert_eq!(assumed[0].params["RoleSessionName"], "ebb");
    let issued = s.fake.state.lock().unwrap().issued_token.clone().unwrap();
    let listed = s.fake.accepted("DescribeInstances");
    assert!(!listed.is_empty());
    for call in &listed {
        let token = call
            .headers
            .iter()
            .find(|(k, _)| k == "x-acs-security-token");
        assert_eq!(
            token.map(|(_, v)| v),
            Some(&issued),
            "signed with STS's token"
        );
    }

    // A token STS does not take: nothing listed, and the error says what to check.
    std::fs::write(&token_file, "eyJ-a-stale-token").unwrap();
    let out = rrsa().run(&["inventory", "--format", "json"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{out:?}");
    assert!(
        stderr.contains("AuthenticationFail.OIDCToken.Invalid") && stderr.contains("trust policy"),
        "{stderr}"
    );
    // Only two of the three variables is a mistake said before any call.
    let out = rrsa()
        .env_remove("ALIBABA_CLOUD_OIDC_TOKEN_FILE")
        .run(&["inventory"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("set all of ALIBABA_CLOUD_ROLE_ARN, ALIBABA_CLOUD_OIDC_PROVIDER_ARN and ALIBABA_CLOUD_OIDC_TOKEN_FILE"),
        "{stderr}"
    );
}

#[sqlx::test(migrations = false)]
async fn a_request_signed_with_the_wrong_secret_is_refused_and_nothing_is_listed(pool: PgPool) {
    let s = Setup::new(&pool).await;
    let out = s
        .ebb()
        .env("ALIBABA_CLOUD_ACCESS_KEY_SECRET", "not-the-secret")
        .run(&["inventory", "--format", "json"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{out:?}");
    assert!(stderr.contains("SignatureDoesNotMatch"), "{stderr}");
    let state = s.fake.state.lock().unwrap();
    assert!(state.calls.iter().all(|c| !c.accepted), "{:?}", state.calls);
}

#[sqlx::test(migrations = false)]
async fn a_gpu_box_stops_without_charge_after_hours_and_starts_at_the_opening(pool: PgPool) {
    let s = Setup::new(&pool).await;
    s.tick(EVENING);
    let stops = s.fake.accepted("StopInstances");
    assert_eq!(stops.len(), 1, "one stop call: {stops:?}");
    assert_eq!(stops[0].params["StoppedMode"], "StopCharging");
    assert_eq!(s.acted_on("StopInstances"), ["i-bp1gpu"]);
    // ECS answers the stop at once, but the instance is still stopping when ebb reads it back,
    // and its stopped mode is "Not-applicable" until it has stopped: the stop's outcome waits.
    let gpu = s.fake.instance("i-bp1gpu");
    assert_eq!(
        (gpu.status.as_str(), gpu.stopped_mode.as_str()),
        ("Stopping", "Not-applicable")
    );
    assert_eq!(s.stop_outcomes("i-bp1gpu"), ["intent"]);
    // A subscription saves nothing stopped; a local-disk family cannot stop without charge:
    // neither was asked, and the fake never saw a stop of either.
    assert_eq!(s.fake.instance("i-bp1sub").status, "Running");
    assert_eq!(s.fake.instance("i-bp1local").status, "Running");
    assert_eq!(s.fake.instance("i-bp1gn5").status, "Running");
    assert_eq!(s.fake.instance("i-bp1other").status, "Running");

    // The next tick's listing finds it stopped without charge: the outcome is written then,
    // with the mode read, never as "billing unknown".
    s.tick(LATER);
    let gpu = s.fake.instance("i-bp1gpu");
    assert_eq!(
        (gpu.status.as_str(), gpu.stopped_mode.as_str()),
        ("Stopped", "StopCharging")
    );
    assert_eq!(s.stop_outcomes("i-bp1gpu"), ["intent", "succeeded"]);
    let stops = s.audit("i-bp1gpu", "stop");
    let done = stops.iter().find(|r| r["outcome"] == "succeeded").unwrap();
    assert_eq!(done["code"], "outside_hours", "{done:#?}");
    assert!(
        done["reason"]
            .as_str()
            .unwrap()
            .contains("; stopped without charge; the public IP will change"),
        "{done:#?}"
    );
    assert_eq!(
        s.fake.accepted("StopInstances").len(),
        1,
        "never sent again"
    );

    s.tick(MORNING);
    assert_eq!(s.acted_on("StartInstances"), ["i-bp1gpu"]);
    assert_eq!(s.fake.instance("i-bp1gpu").status, "Starting");
    // The night is counted as saved: stopped without charge from the outcome to the start,
    // priced in yuan by the table's CNY prices, and no dollar of it.
    let dir = tempfile::tempdir().unwrap();
    let prices = dir.path().join("prices.yaml");
    std::fs::write(&prices, YUAN_PRICES).unwrap();
    let out = s.ebb().env("EBB_PRICES", &prices).run(&[
        "report", "--at", MORNING, "--since", EVENING, "--until", MORNING, "--format", "json",
    ]);
    assert!(out.status.success(), "{out:?}");
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["total"]["stops"], 1, "{report:#}");
    assert_eq!(report["total"]["stopped_hours"], 13.0, "{report:#}");
    assert_eq!(report["total"]["charging_stopped_hours"], 0.0, "{report:#}");
    assert_eq!(report["total"]["saved_usd"], 0.0, "{report:#}");
    let yuan = &report["other_currencies"][0];
    assert_eq!(yuan["currency"], "CNY", "{report:#}");
    assert_eq!(yuan["saved"], 123.5, "13 h at 9.5 CNY: {report:#}");
    assert_eq!(yuan["priced_stopped_hours"], 13.0, "{report:#}");
    let out = s
        .ebb()
        .run(&["audit", "--instance", "i-bp1gpu", "--format", "json"]);
    let rows: Vec<Value> = serde_json::from_slice(&out.stdout).unwrap();
    let mut done: Vec<&str> = rows
        .iter()
        .filter(|r| r["outcome"] == "succeeded")
        .map(|r| r["action"].as_str().unwrap())
        .collect();
    done.sort_unstable();
    assert_eq!(done, ["start", "stop"], "{rows:#?}");
    let verify = s.ebb().run(&["audit", "verify"]);
    assert!(
        verify.status.success(),
        "the audit log verifies: {verify:?}"
    );
}

#[sqlx::test(migrations = false)]
async fn without_a_price_table_the_night_is_priced_at_what_ecs_quotes(pool: PgPool) {
    let s = Setup::new(&pool).await;
    s.tick(EVENING);
    // The first tick quotes each type the fleet runs, every term: the hour, 1, 3 and 6
    // months and a year. A type ECS does not sell is refused and left unquoted.
    let quoted = s.fake.accepted("DescribePrice");
    let mut types: Vec<&str> = quoted
        .iter()
        .map(|c| c.params["InstanceType"].as_str())
        .collect();
    types.dedup();
    assert_eq!(
        types,
        ["ecs.gn5-c4g1.xlarge", "ecs.gn7i-c8g1.2xlarge"],
        "{quoted:?}"
    );
    assert_eq!(quoted.len(), 10, "five terms of each: {quoted:?}");
    let kept: Vec<(String, String, Option<f64>, Value)> = sqlx::query_as(
        "SELECT instance_type, currency, hourly, monthly FROM price_quotes ORDER BY instance_type",
    )
    .fetch_all(&pool)
    .await
    .unwrap();
    let gn7i = &kept[1];
    assert_eq!(
        (gn7i.0.as_str(), gn7i.1.as_str(), gn7i.2),
        ("ecs.gn7i-c8g1.2xlarge", "CNY", Some(9.5))
    );
    // The instance's part of each term, a month of it: the system disk is not in it.
    let month = |m: &str| gn7i.3[m].as_f64().unwrap();
    assert_eq!(
        (month("1"), month("3"), month("6")),
        (4_000.0, 4_000.0, 4_000.0)
    );
    assert!((month("12") - 40_000.0 / 12.0).abs() < 1e-9, "{:?}", gn7i.3);

    // `ebb quotes` shows what was kept, for a figure to be traced to its quote.
    let out = s.ebb().run(&["quotes"]);
    assert!(out.status.success(), "{out:?}");
    let listed = String::from_utf8(out.stdout).unwrap();
    let row = listed
        .lines()
        .find(|l| l.contains("ecs.gn7i-c8g1.2xlarge"))
        .unwrap_or_else(|| panic!("{listed}"));
    for shown in [
        "cn-hangzhou",
        "CNY",
        "9.5000",
        "1: 4000.00, 3: 4000.00, 6: 4000.00, 12: 3333.33",
        "DescribePrice",
        "2026-11-30T12:00:00Z",
    ] {
        assert!(row.contains(shown), "{shown:?} not in {row:?}");
    }
    let out = s.ebb().run(&["quotes", "--format", "json"]);
    let json: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json.as_array().unwrap().len(), 2, "{json:#}");
    assert_eq!(json[1]["hourly"], 9.5, "{json:#}");

    // A quote a day old or less is not asked again.
    s.tick(LATER);
    s.tick(MORNING);
    assert_eq!(s.fake.accepted("DescribePrice").len(), 10);

    // No EBB_PRICES: the night is counted in yuan at the quoted hour.
    let out = s.ebb().run(&[
        "report", "--at", MORNING, "--since", EVENING, "--until", MORNING, "--format", "json",
    ]);
    assert!(out.status.success(), "{out:?}");
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["total"]["stopped_hours"], 13.0, "{report:#}");
    assert_eq!(report["total"]["saved_usd"], 0.0, "{report:#}");
    let yuan = &report["other_currencies"][0];
    assert_eq!(yuan["currency"], "CNY", "{report:#}");
    assert_eq!(yuan["saved"], 123.5, "13 h at 9.5 CNY: {report:#}");
    // The table says where the yuan come from.
    let out = s.ebb().run(&[
        "report", "--at", MORNING, "--since", EVENING, "--until", MORNING,
    ]);
    let table = String::from_utf8(out.stdout).unwrap();
    assert!(
        table.contains("in CNY, apart from the dollars (prices from the cloud's quotes (DescribePrice, 2026-11-30), as of 2026-11-30): 123.50 CNY saved"),
        "{table}"
    );
    // The quote wins over a table's figure for the same type.
    let dir = tempfile::tempdir().unwrap();
    let prices = dir.path().join("prices.yaml");
    std::fs::write(&prices, YUAN_PRICES.replace("9.5", "20")).unwrap();
    let out = s.ebb().env("EBB_PRICES", &prices).run(&[
        "report", "--at", MORNING, "--since", EVENING, "--until", MORNING, "--format", "json",
    ]);
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["other_currencies"][0]["saved"], 123.5, "{report:#}");
}

#[sqlx::test(migrations = false)]
async fn a_quote_a_day_old_is_asked_again_and_a_failed_one_keeps_the_last_good(pool: PgPool) {
    let s = Setup::new(&pool).await;
    let quoted_at = || async {
        sqlx::query_scalar::<_, chrono::DateTime<chrono::Utc>>(
            "SELECT quoted_at FROM price_quotes WHERE instance_type = 'ecs.gn7i-c8g1.2xlarge'",
        )
        .fetch_one(&pool)
        .await
        .unwrap()
    };
    s.tick(EVENING);
    let first = quoted_at().await;
    assert_eq!(
        first,
        EVENING.parse::<chrono::DateTime<chrono::Utc>>().unwrap()
    );
    // A day later ECS's answer is lost: nothing of the region is replaced.
    s.fake.state.lock().unwrap().lose_answer_of = Some("DescribePrice".into());
    s.tick("2026-12-01T12:00:00Z");
    assert_eq!(quoted_at().await, first, "the last good quote is kept");
    let kept: Option<f64> = sqlx::query_scalar(
        "SELECT hourly FROM price_quotes WHERE instance_type = 'ecs.gn7i-c8g1.2xlarge'",
    )
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!(kept, Some(9.5));
    // The next tick quotes it again.
    s.tick("2026-12-01T12:05:00Z");
    assert_eq!(
        quoted_at().await,
        "2026-12-01T12:05:00Z"
            .parse::<chrono::DateTime<chrono::Utc>>()
            .unwrap()
    );
}

#[sqlx::test(migrations = false)]
async fn a_preemptible_box_stopped_for_the_night_is_counted_but_never_at_the_pay_as_you_go_price(
    pool: PgPool,
) {
    let s = Setup::with_a_preemptible_box(&pool).await;
    s.tick(EVENING);
    s.tick(LATER);
    s.tick(MORNING);
    assert_eq!(s.stop_outcomes("i-bp1spot"), ["intent", "succeeded"]);
    let out = s.ebb().run(&[
        "report", "--at", MORNING, "--since", EVENING, "--until", MORNING, "--format", "json",
    ]);
    assert!(out.status.success(), "{out:?}");
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    // Both nights are counted; only the pay-as-you-go one is priced, at the quoted 9.5 CNY:
    // the preemptible box's hour costs its market price, several times less.
    assert_eq!(report["total"]["stopped_hours"], 26.0, "{report:#}");
    let yuan = &report["other_currencies"][0];
    assert_eq!(yuan["priced_stopped_hours"], 13.0, "{report:#}");
    assert_eq!(yuan["saved"], 123.5, "{report:#}");
}

/// ECS recycles a preemptible box: locked `Recycling` (its interruption warning) at one
/// listing, released before the next. ebb leaves it alone while it is locked, though the
/// close calls for a stop, and keeps it as gone once it is released.
#[sqlx::test(migrations = false)]
async fn a_preemptible_box_being_recycled_is_left_alone_and_then_kept_as_gone(pool: PgPool) {
    let s = Setup::with_a_preemptible_box(&pool).await;
    s.fake.recycle("i-bp1spot");
    // The same type under the same policy is stopped at the close; the recycled one is not.
    s.tick(EVENING);
    assert_eq!(s.acted_on("StopInstances"), ["i-bp1gpu"]);
    assert!(s.stop_outcomes("i-bp1spot").is_empty());
    assert_eq!(s.fake.instance("i-bp1spot").locks, ["Recycling"]);

    s.tick(LATER);
    assert!(!s.fake.holds("i-bp1spot"), "released after its warning");
    let gone: bool = sqlx::query_scalar("SELECT gone_at IS NOT NULL FROM instances WHERE id = $1")
        .bind("i-bp1spot")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert!(gone, "a released box is kept as gone");
    assert!(s.stop_outcomes("i-bp1spot").is_empty());
    assert_eq!(s.acted_on("StopInstances"), ["i-bp1gpu"]);
}

#[sqlx::test(migrations = false)]
async fn a_budget_in_yuan_is_spent_at_what_ecs_quotes(pool: PgPool) {
    let s = Setup::new(&pool).await;
    std::fs::write(
        s.policies.path().join("budget.yaml"),
        "budgets:
  - name: gn7i-daily
    match: {instance_types: [ecs.gn7i-c8g1.2xlarge]}
    amount: 1000
    period: day
    timezone: Asia/Shanghai
",
    )
    .unwrap();
    let budgets = || {
        let out = s.ebb().run(&["budgets", "--at", LATER, "--format", "json"]);
        assert!(out.status.success(), "{out:?}");
        let rows: Value = serde_json::from_slice(&out.stdout).unwrap();
        rows[0].clone()
    };
    // The first tick's quote is lost: no table prices the type, so the spend of the boxes it
    // recorded is unknown, never zero.
    s.fake.state.lock().unwrap().lose_answer_of = Some("DescribePrice".into());
    s.tick(EVENING);
    let before = budgets();
    assert_eq!(before["currency"], "CNY", "{before:#}");
    assert!(before["spent"].is_null(), "{before:#}");
    assert!(before["unknown"].is_string(), "{before:#}");
    // The next tick quotes the type: the boxes that ran from 20:00 are spent at 9.5 CNY an
    // hour, and the subscription box, still running, burns 9.5 an hour.
    s.tick(LATER);
    let after = budgets();
    let spent = after["spent"]
        .as_f64()
        .unwrap_or_else(|| panic!("{after:#}"));
    assert!(spent > 0.0, "{after:#}");
    assert_eq!(
        after["per_hour"], 9.5,
        "the subscription box still runs: {after:#}"
    );
}

#[sqlx::test(migrations = false)]
async fn plan_says_why_the_subscription_and_the_local_disk_box_stay_up(pool: PgPool) {
    let s = Setup::new(&pool).await;
    let out = s.ebb().run(&["inventory", "--format", "json"]);
    let fleet = tempfile::Builder::new().suffix(".json").tempfile().unwrap();
    std::fs::write(fleet.path(), &out.stdout).unwrap();
    let plan = s.ebb().run(&[
        "plan",
        "--fleet",
        fleet.path().to_str().unwrap(),
        "--at",
        EVENING,
        "--format",
        "json",
    ]);
    assert!(plan.status.success(), "{plan:?}");
    let decisions: Value = serde_json::from_slice(&plan.stdout).unwrap();
    let code = |id: &str| {
        decisions
            .as_array()
            .unwrap()
            .iter()
            .find(|d| d["instance"] == id)
            .map(|d| d["code"].as_str().unwrap().to_string())
    };
    assert_eq!(code("i-bp1gpu").as_deref(), Some("outside_hours"));
    assert_eq!(code("i-bp1sub").as_deref(), Some("subscription_no_saving"));
    assert_eq!(code("i-bp1local").as_deref(), Some("charging_stop_refused"));
    assert_eq!(code("i-bp1gn5").as_deref(), Some("charging_stop_refused"));
    assert!(s.fake.accepted("StopInstances").is_empty());
}

#[sqlx::test(migrations = false)]
async fn a_hundred_and_twenty_boxes_are_listed_in_pages_and_stopped_in_calls_of_a_hundred(
    pool: PgPool,
) {
    let policies = tempfile::tempdir().unwrap();
    std::fs::write(policies.path().join("ml.yaml"), POLICY).unwrap();
    let boxes: Vec<FakeInstance> = (0..120)
        .map(|n| managed(&format!("i-bp{n:03}"), "ecs.gn7i-c8g1.2xlarge"))
        .collect();
    let s = Setup {
        fake: Fake::start(boxes),
        url: common::migrated_for_runtime(&pool).await,
        policies,
    };
    s.tick(EVENING);
    let stops = s.fake.accepted("StopInstances");
    let sizes: Vec<usize> = stops
        .iter()
        .map(|c| {
            c.params
                .keys()
                .filter(|k| k.starts_with("InstanceId."))
                .count()
        })
        .collect();
    assert_eq!(sizes.iter().sum::<usize>(), 120, "{sizes:?}");
    assert!(sizes.iter().all(|n| *n <= 100), "{sizes:?}");
    let state = s.fake.state.lock().unwrap();
    assert!(state.instances.iter().all(|i| i.status == "Stopping"));
    assert!(
        state.calls.iter().all(|c| c.accepted),
        "the fake refused nothing"
    );
}

#[sqlx::test(migrations = false)]
async fn a_stop_whose_answer_is_lost_is_unknown_then_resolved_from_the_state_never_failed(
    pool: PgPool,
) {
    let s = Setup::new(&pool).await;
    s.fake.state.lock().unwrap().lose_answer_of = Some("StopInstances".into());
    // The tick reports the unanswered call; its exit code is not what this test is about.
    s.ebb().run(&["tick", "--at", EVENING]);
    assert_eq!(
        s.fake.instance("i-bp1gpu").status,
        "Stopping",
        "carried out"
    );
    let outcomes = || s.stop_outcomes("i-bp1gpu");
    assert_eq!(outcomes(), ["intent"], "unknown, never failed");
    // Past the time its call could still be in flight, the instance's state resolves it.
    // ECS reports no time a stop began, so a stop found done cannot be proven ebb's (it may
    // have been a person's): it is resolved as not carried out, never as failed.
    s.ebb().run(&["tick", "--at", "2026-11-30T12:10:00Z"]);
    assert_eq!(outcomes(), ["intent", "skipped"]);
    assert_eq!(
        s.fake.accepted("StopInstances").len(),
        1,
        "never sent again"
    );
}

#[sqlx::test(migrations = false)]
async fn a_stop_refused_for_flow_control_is_made_again_and_lands_once(pool: PgPool) {
    let s = Setup::new(&pool).await;
    // ECS refuses the next two stops with `Throttling.User`: it did nothing for them.
    s.fake
        .state
        .lock()
        .unwrap()
        .throttle
        .insert("StopInstances".into(), 2);
    s.tick(EVENING);
    let stops: Vec<bool> = s
        .fake
        .state
        .lock()
        .unwrap()
        .calls
        .iter()
        .filter(|c| c.action == "StopInstances")
        .map(|c| c.accepted)
        .collect();
    assert_eq!(
        stops,
        [false, false, true],
        "made again after each throttle"
    );
    assert_eq!(s.fake.instance("i-bp1gpu").status, "Stopping");
    s.tick(LATER);
    assert_eq!(s.stop_outcomes("i-bp1gpu"), ["intent", "succeeded"]);
}
