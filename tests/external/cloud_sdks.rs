//! ebb's Alibaba Cloud and Tencent Cloud requests held against the clouds' official Python SDKs
//! (`need_cloud_sdks` in scripts/lib.sh), not only against the fakes written from the same
//! reading of the docs as the providers: each provider makes every kind of call it makes (lists,
//! describes types, tags, stops, starts, untags, reads GPU utilisation, quotes prices) on its fake
//! (`tests/common/alibaba_fake.rs`, `tests/common/tencent_fake.rs`), and `alibaba_sdk.py` and
//! `tencent_sdk.py` sign each request ebb sent with the SDK's signer and hold its parameters
//! against the SDK's request models: names, casing, list encoding and values, and no parameter
//! the action does not define (Alibaba's DescribeInstanceTypes and CloudMonitor's
//! DescribeMetricList take no `RegionId`). Each answer the fakes gave goes through the SDK's
//! response model of its action, and a field the model does not define fails the test: the
//! fakes answer in the shapes the clouds' own SDKs read.
//!
//! The requests carry what ebb once signed differently from the Alibaba SDK: a managed tag with
//! an empty value (`EBB_MANAGED_TAG=gpu-pool=`), non-ASCII tag values, and list parameters.

use crate::common;

use common::alibaba_fake::{Fake, FakeInstance, FakeOidc, KEY_ID, KEY_SECRET};
use common::tencent_fake::{self, TencentFake};
use ebb::clock::Clock;
use ebb::cloud::alibaba::{AlibabaProvider, CredentialSource, Credentials, OidcRole, Settings};
use ebb::cloud::tencent::{self, GpuMetric, Keys, TencentProvider};
use ebb::cloud::{PriceQuotes, Provider, StopKind};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::io::Write;
use std::process::{Command, Stdio};

const REGION: &str = "cn-hangzhou";

/// What an SDK makes of `input`, by `script` (`alibaba_sdk.py`, `tencent_sdk.py`).
fn sdk(script: &str, input: &Value) -> Value {
    let script = format!("{}/tests/external/{script}", env!("CARGO_MANIFEST_DIR"));
    let mut child = Command::new("python3")
        .arg(&script)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run python3");
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(input.to_string().as_bytes()).unwrap();
    drop(stdin);
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{script} failed (is the SDK installed? scripts/test installs it):\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

#[tokio::test]
async fn the_alibaba_requests_are_signed_and_named_as_the_official_sdk_makes_them() {
    let pooled =
        |id: &str| FakeInstance::new(id, REGION, "ecs.gn7i-c8g1.2xlarge", &[("gpu-pool", "")]);
    let fake = Fake::start(vec![
        pooled("i-bp1a"),
        pooled("i-bp1b"),
        FakeInstance::new(
            "i-bp1other",
            REGION,
            "ecs.gn7i-c8g1.2xlarge",
            &[("team", "ml")],
        ),
    ]);
    let mut settings = Settings::new(
        vec![REGION.to_string()],
        Some(("gpu-pool".to_string(), String::new())),
        CredentialSource::AccessKey(Credentials {
            access_key_id: KEY_ID.to_string(),
            access_key_secret: KEY_SECRET.to_string(),
            security_token: None,
        }),
    );
    settings.endpoint = Some(fake.url.parse().unwrap());
    let provider = AlibabaProvider::connect(settings, Clock::System).unwrap();

    // An empty-valued managed tag lists the boxes that carry it, and only those.
    let inventory = provider.instances().await;
    assert!(inventory.failures.is_empty(), "{:?}", inventory.failures);
    let mut listed: Vec<&str> = inventory.instances.iter().map(|i| i.id.as_str()).collect();
    listed.sort_unstable();
    assert_eq!(listed, ["i-bp1a", "i-bp1b"]);

    let ids = vec!["i-bp1a".to_string(), "i-bp1b".to_string()];
    let tags = BTreeMap::from([("owner".to_string(), "张三 & 李四 (ml/视觉)".to_string())]);
    let tagged = provider.tag(REGION, &ids, &tags).await;
    assert!(tagged.failed.is_empty(), "{:?}", tagged.failed);
    let stopped = provider.stop(REGION, &ids, StopKind::Stop).await;
    assert!(stopped.failed.is_empty(), "{:?}", stopped.failed);
    // A later read finds them stopped; then the morning's calls.
    provider.instances().await;
    let started = provider.start(REGION, &ids).await;
    assert!(started.failed.is_empty(), "{:?}", started.failed);
    let keys = vec!["ebb:stop-at".to_string()];
    let untagged = provider.untag(REGION, &ids, &keys).await;
    assert!(untagged.failed.is_empty(), "{:?}", untagged.failed);
    let (from, to) = (
        chrono::DateTime::from_timestamp(1_764_500_000, 0).unwrap(),
        chrono::DateTime::from_timestamp(1_764_503_600, 0).unwrap(),
    );
    provider
        .gpu_utilisation(REGION, &ids, from, to)
        .await
        .unwrap();
    let quoted = provider
        .quote(REGION, &["ecs.gn7i-c8g1.2xlarge".to_string()], to)
        .await
        .unwrap();
    assert_eq!(quoted.len(), 1, "{quoted:?}");

    let calls = fake.state.lock().unwrap().calls.clone();
    let actions = [
        "DescribeInstances",
        "DescribeInstanceTypes",
        "TagResources",
        "StopInstances",
        "DescribeMetricList",
        "DescribePrice",
        "StartInstances",
        "UntagResources",
    ];
    for action in actions {
        assert!(calls.iter().any(|c| c.action == action), "no {action} sent");
    }
    let metrics = &calls
        .iter()
        .find(|c| c.action == "DescribeMetricList")
        .unwrap()
        .params;
    let answer = sdk(
        "alibaba_sdk.py",
        &json!({
            "secret": KEY_SECRET,
            "calls": calls
                .iter()
                .map(|c| {
                    json!({
                        "action": c.action,
                        "params": c.params,
                        "headers": c.headers,
                        "accepted": c.accepted,
                        "answer": c.answer,
                    })
                })
                .collect::<Vec<_>>(),
            "models": {
                "DescribeInstances": {
                    "region_id": REGION,
                    "max_results": 100,
                    "tag": [{"key": "gpu-pool", "value": ""}],
                },
                "TagResources": {
                    "region_id": REGION,
                    "resource_type": "instance",
                    "resource_id": ids,
                    "tag": [{"key": "owner", "value": tags["owner"]}],
                },
                "StopInstances": {
                    "region_id": REGION,
                    "instance_id": ids,
                    "stopped_mode": "StopCharging",
                    "force_stop": false,
                    "batch_optimization": "SuccessFirst",
                },
                "StartInstances": {
                    "region_id": REGION,
                    "instance_id": ids,
                    "batch_optimization": "SuccessFirst",
                },
                "UntagResources": {
                    "region_id": REGION,
                    "resource_type": "instance",
                    "resource_id": ids,
                    "tag_key": keys,
                },
                // The first of its five terms: the hour.
                "DescribePrice": {
                    "region_id": REGION,
                    "resource_type": "instance",
                    "instance_type": "ecs.gn7i-c8g1.2xlarge",
                    "price_unit": "Hour",
                    "period": 1,
                },
                // No region: the action defines none.
                "DescribeInstanceTypes": {
                    "instance_types": ["ecs.gn7i-c8g1.2xlarge"],
                },
                // CloudMonitor's, also without a region; the values are ebb's, the names the
                // model's.
                "DescribeMetricList": {
                    "namespace": "acs_ecs_dashboard",
                    "metric_name": "gpu_gpu_usedutilization",
                    "period": metrics["Period"],
                    "start_time": from.timestamp_millis().to_string(),
                    "end_time": to.timestamp_millis().to_string(),
                    "dimensions": metrics["Dimensions"],
                    "length": metrics["Length"],
                },
            },
        }),
    );

    // The signature: the SDK's over the very request ebb sent.
    for (call, by_sdk) in calls
        .iter()
        .zip(answer["authorizations"].as_array().unwrap())
    {
        let sent = call
            .headers
            .iter()
            .find(|(name, _)| name == "authorization")
            .map(|(_, value)| value.as_str());
        assert_eq!(sent, by_sdk.as_str(), "{} {:?}", call.action, call.params);
    }
    // The parameters: the SDK model's names, list encoding and values (a boolean as ECS
    // documents it, `false`; the SDK's Python writes `False`).
    for (action, by_sdk) in answer["params"].as_object().unwrap() {
        let sent = &calls.iter().find(|c| &c.action == action).unwrap().params;
        let by_sdk: BTreeMap<String, String> = by_sdk
            .as_object()
            .unwrap()
            .iter()
            .map(|(k, v)| (k.clone(), v.as_str().unwrap().replace("False", "false")))
            .collect();
        assert_eq!(sent, &by_sdk, "{action}");
    }
    // The answers: every field the fake answers with is one the SDK's response model reads.
    for (action, unknown) in answer["answer_unknown"].as_object().unwrap() {
        assert_eq!(
            unknown,
            &json!([]),
            "{action}'s answer has fields the SDK does not"
        );
    }
}

#[tokio::test]
async fn the_tencent_requests_are_signed_and_named_as_the_official_sdk_makes_them() {
    const REGION: &str = "ap-guangzhou";
    let opted_in: &[(&str, &str)] = &[("ebb:managed", "true")];
    let fake = TencentFake::start(vec![
        tencent_fake::FakeInstance::gpu("ins-a", REGION, opted_in),
        tencent_fake::FakeInstance::gpu("ins-b", REGION, opted_in),
    ]);
    let provider = TencentProvider::connect(tencent::Settings {
        regions: vec![REGION.to_string()],
        managed_tag: Some(("ebb:managed".to_string(), "true".to_string())),
        endpoint: Some(fake.url.parse().unwrap()),
        keys: Some(Keys::fixed(
            tencent_fake::SECRET_ID,
            tencent_fake::SECRET_KEY,
        )),
        web_identity: None,
        on_demand: Default::default(),
        gpu_metric: GpuMetric::default(),
        currency: "CNY".to_string(),
    })
    .unwrap();
    let inventory = provider.instances().await;
    assert!(inventory.failures.is_empty(), "{:?}", inventory.failures);
    assert_eq!(inventory.instances.len(), 2);
    let ids = vec!["ins-a".to_string(), "ins-b".to_string()];
    let tags = BTreeMap::from([("owner".to_string(), "张三 & 李四 (ml/视觉)".to_string())]);
    let tagged = provider.tag(REGION, &ids, &tags).await;
    assert!(tagged.failed.is_empty(), "{:?}", tagged.failed);
    let stopped = provider.stop(REGION, &ids, StopKind::Stop).await;
    assert!(stopped.failed.is_empty(), "{:?}", stopped.failed);
    let quoted = provider
        .quote(REGION, &["GN7.2XLARGE32".to_string()], chrono::Utc::now())
        .await
        .unwrap();
    assert_eq!(quoted.len(), 1, "{quoted:?}");
    // A later read finds them stopped; then the morning's calls.
    provider.instances().await;
    let started = provider.start(REGION, &ids).await;
    assert!(started.failed.is_empty(), "{:?}", started.failed);
    let untagged = provider.untag(REGION, &ids, &["owner".to_string()]).await;
    assert!(untagged.failed.is_empty(), "{:?}", untagged.failed);
    let to = chrono::Utc::now();
    provider
        .gpu_utilisation(REGION, &ids, to - chrono::Duration::hours(1), to)
        .await
        .unwrap();

    let calls = fake.state().calls.clone();
    for action in [
        "DescribeInstances",
        "DescribeInstanceTypeConfigs",
        "TagResources",
        "UnTagResources",
        "StopInstances",
        "StartInstances",
        "GetMonitorData",
        "DescribeZoneInstanceConfigInfos",
    ] {
        assert!(calls.iter().any(|c| c.action == action), "no {action} sent");
    }
    let answer = sdk(
        "tencent_sdk.py",
        &json!({
            "secret": tencent_fake::SECRET_KEY,
            "calls": calls
                .iter()
                .map(|c| {
                    json!({
                        "service": c.service,
                        "action": c.action,
                        "raw": c.raw,
                        "headers": c.headers,
                        "answer": c.answer,
                    })
                })
                .collect::<Vec<_>>(),
        }),
    );
    for (call, by_sdk) in calls.iter().zip(answer.as_array().unwrap()) {
        let sent = call
            .headers
            .iter()
            .find(|(name, _)| name == "authorization")
            .map(|(_, value)| value.as_str());
        assert_eq!(
            sent,
            by_sdk["authorization"].as_str(),
            "{} {}",
            call.action,
            call.raw
        );
        if by_sdk["body"].is_null() {
            continue; // a service whose SDK the test does not install (STS)
        }
        assert_eq!(
            by_sdk["unknown"],
            json!([]),
            "{}: {}",
            call.action,
            call.raw
        );
        assert_eq!(call.body, by_sdk["body"], "{}", call.action);
        assert_eq!(
            by_sdk["answer_unknown"],
            json!([]),
            "{}'s answer has fields the SDK does not: {}",
            call.action,
            call.answer
        );
    }
}

/// RRSA on ACK: the AssumeRoleWithOIDC request ebb sends STS is the one the official
/// credentials SDK builds for the same role, provider, token and session (all its parameters,
/// but the time), sent the same way; and the SDK reads, from the answer the fake gave ebb, the
/// credentials ebb then signed with.
#[tokio::test]
async fn the_rrsa_request_to_sts_is_the_one_the_official_credentials_sdk_makes() {
    let fake = Fake::start(vec![FakeInstance::new(
        "i-bp1a",
        REGION,
        "ecs.gn7i-c8g1.2xlarge",
        &[("gpu-pool", "")],
    )]);
    let role = "acs:ram::1234567890:role/ebb";
    let provider_arn = "acs:ram::1234567890:oidc-provider/ack-rrsa-c0ffee";
    let token = "eyJhbGciOiJSUzI1NiJ9.e30.c2ln";
    fake.state.lock().unwrap().oidc = Some(FakeOidc {
        role_arn: role.to_string(),
        provider_arn: provider_arn.to_string(),
        token: token.to_string(),
    });
    let dir = tempfile::tempdir().unwrap();
    let token_file = dir.path().join("token");
    std::fs::write(&token_file, token).unwrap();
    let mut settings = Settings::new(
        vec![REGION.to_string()],
        Some(("gpu-pool".to_string(), String::new())),
        CredentialSource::Oidc(OidcRole {
            role_arn: role.to_string(),
            provider_arn: provider_arn.to_string(),
            token_file: token_file.clone(),
            session_name: "ebb".to_string(),
            sts: fake.url.clone(),
        }),
    );
    settings.endpoint = Some(fake.url.parse().unwrap());
    let provider = AlibabaProvider::connect(settings, Clock::System).unwrap();
    let inventory = provider.instances().await;
    assert!(inventory.failures.is_empty(), "{:?}", inventory.failures);
    assert_eq!(inventory.instances.len(), 1);

    let [assumed] = fake.accepted("AssumeRoleWithOIDC").try_into().unwrap();
    let sdk = sdk(
        "alibaba_oidc_sdk.py",
        &json!({
            "role_arn": role,
            "provider_arn": provider_arn,
            "token_file": token_file,
            "session_name": "ebb",
            "answer": assumed.answer,
        }),
    );
    assert_eq!(sdk["method"], "GET", "{sdk:#}");
    let without_time = |query: BTreeMap<String, String>| {
        query
            .into_iter()
            .filter(|(k, _)| k != "Timestamp")
            .collect::<BTreeMap<_, _>>()
    };
    let built: BTreeMap<String, String> = serde_json::from_value(sdk["query"].clone()).unwrap();
    assert!(built.contains_key("Timestamp") && assumed.params.contains_key("Timestamp"));
    assert_eq!(without_time(assumed.params.clone()), without_time(built));
    let issued = fake.state.lock().unwrap().issued_token.clone().unwrap();
    assert_eq!(
        sdk["credentials"],
        json!({"access_key_id": KEY_ID, "access_key_secret": KEY_SECRET, "security_token": issued}),
        "the SDK reads from the answer the credentials ebb signed with"
    );
    let listed = fake.accepted("DescribeInstances");
    let sent = listed[0]
        .headers
        .iter()
        .find(|(k, _)| k == "x-acs-security-token");
    assert_eq!(sent.map(|(_, v)| v.as_str()), Some(issued.as_str()));
}

/// TKE's pod identity: the AssumeRoleWithWebIdentity call ebb makes to STS is the one the
/// official SDK builds for the same role, provider, token, session and region (service,
/// version, action, parameters, unsigned); and the SDK reads, from the answer the fake gave
/// ebb, the keys ebb then signed with.
#[tokio::test]
async fn the_tke_request_to_sts_is_the_one_the_official_sdk_makes() {
    const REGION: &str = "ap-guangzhou";
    let fake = TencentFake::start(vec![tencent_fake::FakeInstance::gpu(
        "ins-a",
        REGION,
        &[("ebb:managed", "true")],
    )]);
    let role = "qcs::cam::uin/100000000001:roleName/ebb";
    let token = "eyJhbGciOiJSUzI1NiJ9.e30.c2ln";
    fake.state().web_identity = Some(tencent_fake::FakeWebIdentity {
        role_arn: role.to_string(),
        provider_id: "tke-oidc-cls-fake".to_string(),
        token: token.to_string(),
    });
    let dir = tempfile::tempdir().unwrap();
    let token_file = dir.path().join("token");
    std::fs::write(&token_file, token).unwrap();
    let provider = TencentProvider::connect(tencent::Settings {
        regions: vec![REGION.to_string()],
        managed_tag: Some(("ebb:managed".to_string(), "true".to_string())),
        endpoint: Some(fake.url.parse().unwrap()),
        keys: None,
        web_identity: Some(tencent::WebIdentity {
            role_arn: role.to_string(),
            provider_id: "tke-oidc-cls-fake".to_string(),
            token_file,
            region: REGION.to_string(),
            session_name: "ebb".to_string(),
        }),
        on_demand: Default::default(),
        gpu_metric: GpuMetric::default(),
        currency: "CNY".to_string(),
    })
    .unwrap();
    let inventory = provider.instances().await;
    assert!(inventory.failures.is_empty(), "{:?}", inventory.failures);
    assert_eq!(inventory.instances.len(), 1);

    let [assumed] = fake.calls("AssumeRoleWithWebIdentity").try_into().unwrap();
    let sdk = sdk(
        "tencent_oidc_sdk.py",
        &json!({
            "region": REGION,
            "provider_id": "tke-oidc-cls-fake",
            "token": token,
            "role_arn": role,
            "session_name": "ebb",
            "answer": assumed.answer,
        }),
    );
    let header = |name: &str| {
        let found = assumed.headers.iter().find(|(k, _)| k == name);
        found.map(|(_, v)| v.as_str()).unwrap_or_default()
    };
    let call = &sdk["call"];
    assert_eq!(call["service"], "sts", "{sdk:#}");
    assert_eq!(call["version"], header("x-tc-version"));
    assert_eq!(call["region"], header("x-tc-region"));
    assert_eq!(call["action"], header("x-tc-action"));
    assert_eq!(call["skip_sign"], true);
    assert_eq!(header("authorization"), "SKIP");
    assert_eq!(
        call["params"], assumed.body,
        "the same parameters, of the same types"
    );
    let issued = fake.state().issued_token.clone().unwrap();
    assert_eq!(
        sdk["keys"],
        json!({"id": tencent_fake::SECRET_ID, "key": tencent_fake::SECRET_KEY, "token": issued}),
        "the SDK reads from the answer the keys ebb signed with"
    );
}
