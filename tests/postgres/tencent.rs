//! `ebb tick --cloud tencent` end to end: the built binary against the Tencent Cloud fake
//! (`tests/common/tencent_fake.rs`, which checks every request's TC3 signature with its own
//! implementation) and a real Postgres.

use crate::common;

use common::tencent_fake::{FakeInstance, FakeWebIdentity, TencentFake, SECRET_ID, SECRET_KEY};
use common::Ebb;
use serde_json::Value;
use sqlx::PgPool;

/// Research boxes run 09:00–19:00 Beijing time on weekdays; ebb starts in the morning only what
/// it stopped. The stops do not wait for a busy GPU, so that these tests are about the stops.
const POLICY: &str = r#"
policies:
  - name: research-hours
    match:
      tags: {team: research}
    work_hours:
      timezone: Asia/Shanghai
      periods:
        - {days: mon-fri, start: "09:00", stop: "19:00"}
      outside_hours: stop
      start_at_open: stopped-by-ebb
      busy_defers_stop: false
"#;

/// Monday 20:00, 20:05, 20:10 and Tuesday 09:05 in Beijing.
const EVENING: &str = "2026-11-30T12:00:00Z";
const LATER: &str = "2026-11-30T12:05:00Z";
const LATEST: &str = "2026-11-30T12:10:00Z";
const MORNING: &str = "2026-12-01T01:05:00Z";

const REGION: &str = "ap-guangzhou";
const OPTED_IN: &[(&str, &str)] = &[("team", "research"), ("ebb:managed", "true")];

struct Setup {
    fake: TencentFake,
    url: String,
    policies: tempfile::TempDir,
}

impl Setup {
    async fn new(pool: &PgPool, instances: Vec<FakeInstance>) -> Setup {
        let policies = tempfile::tempdir().unwrap();
        std::fs::write(policies.path().join("research.yaml"), POLICY).unwrap();
        Setup {
            fake: TencentFake::start(instances),
            url: common::migrated_for_runtime(pool).await,
            policies,
        }
    }

    /// `ebb` on the fake, with its keys, this setup's database and policies.
    fn ebb(&self) -> Ebb {
        Ebb::on(&self.url)
            .env("EBB_CLOUD", "tencent")
            .env("EBB_TENCENT_ENDPOINT", &self.fake.url)
            .env("TENCENTCLOUD_SECRET_ID", SECRET_ID)
            .env("TENCENTCLOUD_SECRET_KEY", SECRET_KEY)
            .env_remove("TENCENTCLOUD_SESSION_TOKEN")
            .env("EBB_POLICIES", self.policies.path())
            .env("EBB_REGIONS", REGION)
            .env("EBB_MANAGED_TAG", "ebb:managed=true")
    }

    fn tick(&self, at: &str) -> String {
        let out = self.ebb().run(&["tick", "--at", at]);
        assert!(out.status.success(), "tick at {at} failed: {out:?}");
        String::from_utf8(out.stdout).unwrap()
    }

    /// A tick that ran, whether all its actions succeeded (exit 0) or some failed (exit 1).
    fn tick_ran(&self, at: &str) -> String {
        let out = self.ebb().run(&["tick", "--at", at]);
        assert!(
            matches!(out.status.code(), Some(0 | 1)),
            "tick at {at} could not run: {out:?}"
        );
        String::from_utf8(out.stdout).unwrap()
    }

    /// The audit rows about `instance` with `action`.
    fn audit(&self, instance: &str, action: &str) -> Vec<Value> {
        let out = self.ebb().run(&[
            "audit",
            "--instance",
            instance,
            "--action",
            action,
            "--format",
            "json",
        ]);
        assert!(out.status.success(), "{out:?}");
        serde_json::from_slice(&out.stdout).unwrap()
    }

    /// The StopInstances calls the fake answered that named `id`.
    fn stops_of(&self, id: &str) -> Vec<Value> {
        self.fake
            .calls("StopInstances")
            .into_iter()
            .filter(|c| {
                c.body["InstanceIds"]
                    .as_array()
                    .unwrap()
                    .contains(&id.into())
            })
            .map(|c| c.body)
            .collect()
    }
}

fn outcomes(rows: &[Value]) -> Vec<&str> {
    rows.iter()
        .map(|r| r["outcome"].as_str().unwrap())
        .collect()
}

#[sqlx::test(migrations = false)]
async fn the_inventory_lists_the_managed_instances_with_their_gpus(pool: PgPool) {
    let mut cpu = FakeInstance::gpu("ins-cpu", REGION, OPTED_IN);
    cpu.instance_type = "S5.LARGE8".to_string();
    let s = Setup::new(
        &pool,
        vec![
            FakeInstance::gpu("ins-gpu", REGION, OPTED_IN),
            cpu,
            FakeInstance::gpu("ins-unmanaged", REGION, &[("team", "research")]),
            FakeInstance::gpu("ins-elsewhere", "ap-shanghai", OPTED_IN),
        ],
    )
    .await;
    let out = s.ebb().run(&["inventory", "--format", "json"]);
    assert!(out.status.success(), "{out:?}");
    let listed: Value = serde_json::from_slice(&out.stdout).unwrap();
    let text = listed.to_string();
    assert!(text.contains("ins-gpu"), "{text}");
    assert!(text.contains("ins-cpu"), "{text}");
    assert!(!text.contains("ins-unmanaged"), "not opted in: {text}");
    assert!(!text.contains("ins-elsewhere"), "another region: {text}");
    let table = s.ebb().run(&["inventory"]);
    let table = String::from_utf8(table.stdout).unwrap();
    let gpu_row = table.lines().find(|l| l.contains("ins-gpu")).unwrap();
    assert!(gpu_row.contains("1 × NVIDIA Tesla T4"), "{table}");
    let cpu_row = table.lines().find(|l| l.contains("ins-cpu")).unwrap();
    assert!(!cpu_row.contains("NVIDIA"), "{table}");
    let listings = s.fake.calls("DescribeInstances");
    assert!(!listings.is_empty());
    assert!(
        listings
            .iter()
            .all(|c| c.body["Filters"][0]["Name"] == "tag:ebb:managed" && c.body["Limit"] == 100),
        "the managed tag filters the listing, 100 a page: {listings:?}"
    );
    assert!(
        s.fake.state().auth_refusals.is_empty(),
        "every request was signed as the fake checks it"
    );
}

#[sqlx::test(migrations = false)]
async fn a_pay_as_you_go_box_stops_without_charge_and_starts_at_the_opening(pool: PgPool) {
    let s = Setup::new(
        &pool,
        vec![
            FakeInstance::gpu("ins-research", REGION, OPTED_IN),
            FakeInstance::gpu(
                "ins-other",
                REGION,
                &[("team", "other"), ("ebb:managed", "true")],
            ),
        ],
    )
    .await;

    s.tick(EVENING);
    // CVM accepts the stop, and the read right after it finds the instance still STOPPING,
    // its stopped mode NOT_APPLICABLE ("not in the shut-down state"): the outcome waits.
    let stopping = s.fake.instance("ins-research");
    assert_eq!(stopping.state, "STOPPING");
    assert_eq!(stopping.stopped_mode, "NOT_APPLICABLE");
    let stops = s.stops_of("ins-research");
    assert_eq!(stops.len(), 1);
    assert_eq!(stops[0]["StoppedMode"], "STOP_CHARGING");
    assert_eq!(s.fake.instance("ins-other").state, "RUNNING");
    assert_eq!(outcomes(&s.audit("ins-research", "stop")), ["intent"]);

    // The next listing finds it stopped without charge: the outcome is written with that mode.
    let later = s.tick(LATER);
    assert!(later.contains("0 actions"), "{later}");
    assert!(later.contains("1 interrupted actions resolved"), "{later}");
    assert_eq!(s.stops_of("ins-research").len(), 1, "no second stop");
    let stopped = s.fake.instance("ins-research");
    assert_eq!(stopped.state, "STOPPED");
    assert_eq!(stopped.stopped_mode, "STOP_CHARGING");
    assert_eq!(stopped.public_ip, None, "a stop without charge releases it");
    let rows = s.audit("ins-research", "stop");
    assert_eq!(outcomes(&rows), ["intent", "succeeded"]);
    assert_eq!(rows[1]["code"], "outside_hours");
    let reason = rows[1]["reason"].as_str().unwrap();
    assert!(reason.contains("stopped without charge"), "{reason}");
    assert!(reason.contains("use an EIP"), "{reason}");
    assert!(rows[1]["request_id"].as_str().unwrap().starts_with("fake-"));

    s.tick(MORNING);
    assert_eq!(s.fake.instance("ins-research").state, "STARTING");
    assert_eq!(
        outcomes(&s.audit("ins-research", "start")),
        ["intent", "succeeded"]
    );
    assert!(s.ebb().run(&["audit", "verify"]).status.success());
    assert!(s.fake.state().auth_refusals.is_empty());
}

#[sqlx::test(migrations = false)]
async fn the_night_is_priced_at_what_cvm_quotes_the_cheapest_zone_for(pool: PgPool) {
    let s = Setup::new(
        &pool,
        vec![FakeInstance::gpu("ins-research", REGION, OPTED_IN)],
    )
    .await;
    s.tick(EVENING);
    s.tick(LATER);
    s.tick(MORNING);
    // One call a day quotes the region's types, paid both ways.
    let asked = s.fake.calls("DescribeZoneInstanceConfigInfos");
    assert_eq!(asked.len(), 1, "{asked:?}");
    let kept: (String, String, Option<f64>, Value, String) =
        sqlx::query_as("SELECT instance_type, currency, hourly, monthly, source FROM price_quotes")
            .fetch_one(&pool)
            .await
            .unwrap();
    // Zone 3's hour, the cheaper; zone 6's month, the dearer, and a year over twelve: neither
    // a stop's saving nor a subscription's is over-claimed.
    assert_eq!(
        (kept.0.as_str(), kept.1.as_str(), kept.2),
        ("GN7.2XLARGE32", "CNY", Some(8.0))
    );
    assert!(
        (kept.3["1"].as_f64().unwrap() - 3_300.0).abs() < 1e-9,
        "{:?}",
        kept.3
    );
    assert!(
        (kept.3["12"].as_f64().unwrap() - 2_750.0).abs() < 1e-9,
        "{:?}",
        kept.3
    );
    assert_eq!(kept.4, "DescribeZoneInstanceConfigInfos");
    let out = s.ebb().run(&[
        "report", "--at", MORNING, "--since", EVENING, "--until", MORNING, "--format", "json",
    ]);
    assert!(out.status.success(), "{out:?}");
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["total"]["saved_usd"], 0.0, "{report:#}");
    let yuan = &report["other_currencies"][0];
    assert_eq!(yuan["currency"], "CNY", "{report:#}");
    assert_eq!(yuan["saved"], 104.0, "13 h at 8 CNY: {report:#}");
}

#[sqlx::test(migrations = false)]
async fn a_subscription_box_is_never_stopped(pool: PgPool) {
    let mut prepaid = FakeInstance::gpu("ins-prepaid", REGION, OPTED_IN);
    prepaid.charge = "PREPAID".to_string();
    let s = Setup::new(&pool, vec![prepaid]).await;

    s.tick_ran(EVENING);
    s.tick_ran(LATER);
    assert_eq!(s.fake.instance("ins-prepaid").state, "RUNNING");
    assert!(
        s.stops_of("ins-prepaid").is_empty(),
        "no stop was ever asked for"
    );
    assert!(
        s.audit("ins-prepaid", "stop").is_empty(),
        "the engine decides no stop of a subscription (subscription_no_saving)"
    );
    assert!(s.ebb().run(&["audit", "verify"]).status.success());
}

#[sqlx::test(migrations = false)]
async fn a_refused_mode_fails_alone_and_charges_nothing_more(pool: PgPool) {
    let mut unsupported = FakeInstance::gpu("ins-no-mode", REGION, OPTED_IN);
    unsupported.instance_type = "GN10X.2XLARGE40".to_string();
    unsupported.stop_charging_supported = false;
    let s = Setup::new(
        &pool,
        vec![
            FakeInstance::gpu("ins-research", REGION, OPTED_IN),
            unsupported,
        ],
    )
    .await;

    let evening = s.tick_ran(EVENING);
    assert!(evening.contains("0 succeeded, 1 failed"), "{evening}");
    assert_eq!(s.fake.instance("ins-research").state, "STOPPING");
    let refused = s.fake.instance("ins-no-mode");
    assert_eq!(
        refused.state, "RUNNING",
        "never stopped in a mode that charges"
    );
    assert!(
        s.stops_of("ins-no-mode")
            .iter()
            .all(|body| body["StoppedMode"] == "STOP_CHARGING"),
        "no stop without the no-charge mode was asked for"
    );
    let rows = s.audit("ins-no-mode", "stop");
    assert_eq!(outcomes(&rows), ["intent", "failed"]);
    let error = rows[1]["error"].as_str().unwrap();
    assert!(
        error.contains("UnsupportedOperation.StoppedModeStopCharging"),
        "{error}"
    );
    s.tick_ran(LATER);
    assert_eq!(
        outcomes(&s.audit("ins-research", "stop")),
        ["intent", "succeeded"],
        "the refusal of one never blocks the others"
    );
    assert!(s.ebb().run(&["audit", "verify"]).status.success());
}

/// On TKE with pod identity (its four variables, no secret id), ebb assumes its service
/// account's CAM role with STS AssumeRoleWithWebIdentity and the mounted OIDC token, as the
/// official SDK does, and signs every call with the keys STS issued and their token; a token
/// STS refuses lists nothing and says why.
#[sqlx::test(migrations = false)]
async fn on_tke_with_pod_identity_ebb_assumes_its_service_accounts_role(pool: PgPool) {
    let s = Setup::new(&pool, vec![FakeInstance::gpu("ins-gpu", REGION, OPTED_IN)]).await;
    let role = "qcs::cam::uin/100000000001:roleName/ebb";
    s.fake.state().web_identity = Some(FakeWebIdentity {
        role_arn: role.to_string(),
        provider_id: "tke-oidc-cls-fake".to_string(),
        token: "eyJ-the-service-accounts-token".to_string(),
    });
    let dir = tempfile::tempdir().unwrap();
    let token_file = dir.path().join("token");
    std::fs::write(&token_file, "eyJ-the-service-accounts-token").unwrap();
    let tke = || {
        s.ebb()
            .env_remove("TENCENTCLOUD_SECRET_ID")
            .env_remove("TENCENTCLOUD_SECRET_KEY")
            .env("TKE_ROLE_ARN", role)
            .env("TKE_PROVIDER_ID", "tke-oidc-cls-fake")
            .env("TKE_WEB_IDENTITY_TOKEN_FILE", &token_file)
            .env("TKE_REGION", REGION)
    };

    let out = tke().run(&["inventory", "--format", "json"]);
    assert!(out.status.success(), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stdout).contains("ins-gpu"));
    let assumed = s.fake.calls("AssumeRoleWithWebIdentity");
    assert_eq!(assumed.len(), 1, "one role session for the whole run");
    assert_eq!(assumed[0].body["RoleSessionName"], "ebb");
    assert!(assumed[0].refused.is_none(), "{:?}", assumed[0]);
    let issued = s.fake.state().issued_token.clone().unwrap();
    let listed = s.fake.calls("DescribeInstances");
    assert!(!listed.is_empty());
    for call in &listed {
        let token = call.headers.iter().find(|(k, _)| k == "x-tc-token");
        assert_eq!(
            token.map(|(_, v)| v),
            Some(&issued),
            "signed with STS's token"
        );
    }
    assert!(s.fake.state().auth_refusals.is_empty());

    // A token STS does not take: nothing listed, and the error says what to check.
    std::fs::write(&token_file, "eyJ-a-stale-token").unwrap();
    let out = tke().run(&["inventory", "--format", "json"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{out:?}");
    assert!(
        stderr.contains("InvalidParameter.WebIdentityTokenError")
            && stderr.contains("trust policy"),
        "{stderr}"
    );
    // Three of the four variables is a mistake said before any call.
    let out = tke().env_remove("TKE_REGION").run(&["inventory"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(
            "set all of TKE_ROLE_ARN, TKE_PROVIDER_ID, TKE_WEB_IDENTITY_TOKEN_FILE and TKE_REGION"
        ),
        "{stderr}"
    );
}

#[sqlx::test(migrations = false)]
async fn a_bad_signature_is_refused_and_nothing_is_acted_on(pool: PgPool) {
    let s = Setup::new(
        &pool,
        vec![FakeInstance::gpu("ins-research", REGION, OPTED_IN)],
    )
    .await;
    let out = s
        .ebb()
        .env("TENCENTCLOUD_SECRET_KEY", "not-the-key")
        .run(&["tick", "--at", EVENING]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stdout.contains("AuthFailure.SignatureFailure")
            || stderr.contains("AuthFailure.SignatureFailure"),
        "{out:?}"
    );
    assert_eq!(s.fake.instance("ins-research").state, "RUNNING");
    assert!(s.fake.calls("StopInstances").is_empty());
    assert!(!s.fake.state().auth_refusals.is_empty());
}

#[sqlx::test(migrations = false)]
async fn a_hundred_and_one_boxes_stop_in_calls_of_at_most_a_hundred(pool: PgPool) {
    let ids: Vec<String> = (0..101).map(|n| format!("ins-{n:03}")).collect();
    let boxes = ids
        .iter()
        .map(|id| FakeInstance::gpu(id, REGION, OPTED_IN))
        .collect();
    let s = Setup::new(&pool, boxes).await;

    s.tick(EVENING);
    let calls = s.fake.calls("StopInstances");
    assert!(calls.iter().all(|c| c.refused.is_none()), "{calls:?}");
    let sizes: Vec<usize> = calls
        .iter()
        .map(|c| c.body["InstanceIds"].as_array().unwrap().len())
        .collect();
    assert_eq!(sizes, [100, 1]);
    s.tick(LATER);
    for id in &ids {
        assert_eq!(s.fake.instance(id).stopped_mode, "STOP_CHARGING", "{id}");
    }
    let listings = s.fake.calls("DescribeInstances");
    assert!(
        listings.iter().any(|c| c.body["Offset"] == 100),
        "the second page was asked for: {listings:?}"
    );
}

/// CVM pages by offset: an instance terminated while the pages are read shifts the later
/// ones, and the first listing misses one that is still there. The listing is read again
/// until two agree, so the inventory holds every instance that remains.
#[sqlx::test(migrations = false)]
async fn an_instance_gone_mid_listing_makes_no_other_one_missed(pool: PgPool) {
    let ids: Vec<String> = (0..150).map(|n| format!("ins-{n:03}")).collect();
    let boxes = ids
        .iter()
        .map(|id| FakeInstance::gpu(id, REGION, OPTED_IN))
        .collect();
    let s = Setup::new(&pool, boxes).await;
    s.fake.state().gone_after_describe = Some((1, "ins-005".to_string()));
    let out = s.ebb().run(&["inventory", "--format", "json"]);
    assert!(out.status.success(), "{out:?}");
    let listed: Value = serde_json::from_slice(&out.stdout).unwrap();
    let listed: std::collections::BTreeSet<&str> = listed["instances"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["id"].as_str().unwrap())
        .collect();
    let remaining: std::collections::BTreeSet<&str> = ids
        .iter()
        .map(String::as_str)
        .filter(|id| *id != "ins-005")
        .collect();
    assert_eq!(
        listed, remaining,
        "ins-100 shifted onto the first page is not missed"
    );
    assert!(s.fake.calls("DescribeInstances").len() >= 4, "listed again");
}

/// The fake refuses what Tencent Cloud documents as refused, and changes nothing then.
#[tokio::test]
async fn the_fake_refuses_what_the_service_refuses() {
    let mut prepaid = FakeInstance::gpu("ins-prepaid", REGION, OPTED_IN);
    prepaid.charge = "PREPAID".to_string();
    let mut local = FakeInstance::gpu("ins-local", REGION, OPTED_IN);
    local.stop_charging_supported = false;
    let fake = TencentFake::start(vec![
        prepaid,
        local,
        FakeInstance::gpu("ins-ok", REGION, OPTED_IN),
    ]);
    let code = |answer: &Value| {
        answer["Response"]["Error"]["Code"]
            .as_str()
            .map(str::to_string)
    };
    let stop =
        |ids: &[&str]| serde_json::json!({"InstanceIds": ids, "StoppedMode": "STOP_CHARGING"});

    let answer = fake
        .ask(
            "cvm",
            "StopInstances",
            REGION,
            &stop(&["ins-prepaid"]),
            SECRET_KEY,
        )
        .await;
    assert_eq!(
        code(&answer).as_deref(),
        Some("UnsupportedOperation.InstanceChargeType")
    );
    let answer = fake
        .ask(
            "cvm",
            "StopInstances",
            REGION,
            &stop(&["ins-local", "ins-ok"]),
            SECRET_KEY,
        )
        .await;
    assert_eq!(
        code(&answer).as_deref(),
        Some("UnsupportedOperation.StoppedModeStopCharging")
    );
    assert_eq!(
        fake.instance("ins-ok").state,
        "RUNNING",
        "a refused call changes nothing"
    );
    let many: Vec<String> = (0..101).map(|n| format!("ins-{n}")).collect();
    let many: Vec<&str> = many.iter().map(String::as_str).collect();
    let answer = fake
        .ask("cvm", "StopInstances", REGION, &stop(&many), SECRET_KEY)
        .await;
    assert_eq!(
        code(&answer).as_deref(),
        Some("InvalidParameterValue.LimitExceeded")
    );
    let answer = fake
        .ask(
            "cvm",
            "StopInstances",
            REGION,
            &stop(&["ins-ok"]),
            "another key",
        )
        .await;
    assert_eq!(
        code(&answer).as_deref(),
        Some("AuthFailure.SignatureFailure")
    );
    assert_eq!(fake.instance("ins-ok").state, "RUNNING");

    let answer = fake
        .ask(
            "cvm",
            "StopInstances",
            REGION,
            &stop(&["ins-ok"]),
            SECRET_KEY,
        )
        .await;
    assert_eq!(code(&answer), None, "{answer}");
    assert!(answer["Response"]["RequestId"].is_string());
    // Stopping takes time: a read shows it on its way, a later one stopped without charge.
    let read = || async {
        let answer = fake
            .ask(
                "cvm",
                "DescribeInstances",
                REGION,
                &serde_json::json!({"InstanceIds": ["ins-ok"]}),
                SECRET_KEY,
            )
            .await;
        let i = &answer["Response"]["InstanceSet"][0];
        (i["InstanceState"].clone(), i["StopChargingMode"].clone())
    };
    assert_eq!(read().await, ("STOPPING".into(), "NOT_APPLICABLE".into()));
    assert_eq!(read().await, ("STOPPED".into(), "STOP_CHARGING".into()));
}

/// With `busy_defers_stop`, GPU utilisation is read from Cloud Monitor's `GpuUtil`: the busy
/// box stays up after hours, the idle one is stopped.
#[sqlx::test(migrations = false)]
async fn a_busy_gpu_read_from_cloud_monitor_defers_the_stop(pool: PgPool) {
    let s = Setup::new(
        &pool,
        vec![
            FakeInstance::gpu("ins-busy", REGION, OPTED_IN),
            FakeInstance::gpu("ins-idle", REGION, OPTED_IN),
        ],
    )
    .await;
    std::fs::write(
        s.policies.path().join("research.yaml"),
        POLICY.replace("busy_defers_stop: false", "busy_defers_stop: true"),
    )
    .unwrap();
    {
        let mut state = s.fake.state();
        state.gpu_util.insert("ins-busy".to_string(), 93.0);
        state.gpu_util.insert("ins-idle".to_string(), 0.0);
    }

    s.tick(EVENING);
    assert_eq!(s.fake.instance("ins-busy").state, "RUNNING");
    assert_eq!(s.fake.instance("ins-idle").state, "STOPPING");
    let reads = s.fake.calls("GetMonitorData");
    assert!(!reads.is_empty());
    assert!(reads.iter().all(|c| c.refused.is_none()), "{reads:?}");
}

/// A family listed as unable to stop without charge (local NVMe disks) is not stopped
/// (`charging_stop_refused`) and no call is made; with `stop.allow_charging_stop: true` it is
/// stopped with `KEEP_CHARGING`, and the audit row says the stop saves nothing.
#[sqlx::test(migrations = false)]
async fn a_local_disk_family_is_refused_before_the_call_unless_allowed(pool: PgPool) {
    let mut local = FakeInstance::gpu("ins-local", REGION, OPTED_IN);
    local.instance_type = "IT5.4XLARGE64".to_string();
    local.stop_charging_supported = false;
    let s = Setup::new(&pool, vec![local]).await;

    s.tick(EVENING);
    assert_eq!(s.fake.instance("ins-local").state, "RUNNING");
    assert!(
        s.fake.calls("StopInstances").is_empty(),
        "refused before the call"
    );
    assert!(s.audit("ins-local", "stop").is_empty());

    std::fs::write(
        s.policies.path().join("research.yaml"),
        format!("{POLICY}    stop:\n      allow_charging_stop: true\n"),
    )
    .unwrap();
    s.tick(LATER);
    s.tick(LATEST);
    let stopped = s.fake.instance("ins-local");
    assert_eq!(stopped.state, "STOPPED");
    assert_eq!(stopped.stopped_mode, "KEEP_CHARGING");
    let rows = s.audit("ins-local", "stop");
    assert_eq!(outcomes(&rows), ["intent", "succeeded"]);
    assert_eq!(rows[1]["code"], "stopped_still_charging");
    let reason = rows[1]["reason"].as_str().unwrap();
    assert!(reason.contains("stopped, still charging"), "{reason}");
    assert!(s.ebb().run(&["audit", "verify"]).status.success());
}

#[sqlx::test(migrations = false)]
async fn a_stop_over_the_rate_limit_is_made_again_and_lands_once(pool: PgPool) {
    let s = Setup::new(
        &pool,
        vec![FakeInstance::gpu("ins-research", REGION, OPTED_IN)],
    )
    .await;
    // CVM refuses the next two stops with `RequestLimitExceeded`: it did nothing for them.
    s.fake.state().throttle.insert("StopInstances".into(), 2);
    s.tick(EVENING);
    let refused: Vec<Option<String>> = s
        .fake
        .calls("StopInstances")
        .into_iter()
        .map(|c| c.refused)
        .collect();
    let throttled = Some("RequestLimitExceeded".to_string());
    assert_eq!(refused, [throttled.clone(), throttled, None]);
    assert_eq!(s.fake.instance("ins-research").state, "STOPPING");
    s.tick(LATER);
    assert_eq!(
        outcomes(&s.audit("ins-research", "stop")),
        ["intent", "succeeded"]
    );
}
