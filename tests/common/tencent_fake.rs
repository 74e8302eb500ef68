//! A fake of the Tencent Cloud APIs ebb calls (CVM, Tag, Cloud Monitor, STS), written from
//! Tencent Cloud's API documentation, for the tests that run `--cloud tencent` against it.
//!
//! Every request's TC3-HMAC-SHA256 signature is checked by this file's own implementation of
//! the documented algorithm (not ebb's: the two can disagree), with the documented refusals
//! (`AuthFailure.SignatureFailure`, `AuthFailure.SignatureExpire`, ...). It keeps instances
//! with their state, charge type (`POSTPAID_BY_HOUR`, `PREPAID`, `SPOTPAID`), stopped mode
//! (`KEEP_CHARGING`, `STOP_CHARGING`), public IP and tags, and refuses what the service
//! refuses: a stop of a `PREPAID` instance, `STOP_CHARGING` for a type that does not support
//! it, more than 100 instances in one call, a state that does not allow the call. A refused
//! call changes nothing. It runs on a thread of its own, so a test may block on the `ebb`
//! binary meanwhile.
//!
//! STS's AssumeRoleWithWebIdentity (TKE's pod identity) is the one call taken unsigned
//! (`Authorization: SKIP`, as the STS API documents it): it issues the fake's keys with a token
//! for the role the test set, and every signed call after it must carry that token
//! (`X-TC-Token`).

use axum::extract::State;
use axum::http::HeaderMap;
use axum::routing::post;
use axum::{Json, Router};
use hmac::{Hmac, Mac};
use serde_json::{json, Value};
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};

/// The keys the fake accepts.
pub const SECRET_ID: &str = "AKIDfakeTencentTestKey0000000000000";
/// The secret key of [`SECRET_ID`].
pub const SECRET_KEY: &str = "fakeTencentSecretKey0000000000000";
/// The account (root UIN) of the fake's resources.
pub const ACCOUNT: &str = "100000000001";

/// One CVM instance.
#[derive(Debug, Clone)]
pub struct FakeInstance {
    /// `ins-...`.
    pub id: String,
    /// Its region.
    pub region: String,
    /// Its type, one of [`TYPES`].
    pub instance_type: String,
    /// `RUNNING`, `STOPPED`, ...
    pub state: String,
    /// `POSTPAID_BY_HOUR`, `PREPAID`, `SPOTPAID`.
    pub charge: String,
    /// `KEEP_CHARGING`, `STOP_CHARGING` or `NOT_APPLICABLE`.
    pub stopped_mode: String,
    /// Whether a stop without charge is allowed for it (some families' are not).
    pub stop_charging_supported: bool,
    /// Its public IP, released by a stop without charge.
    pub public_ip: Option<String>,
    /// Its tags.
    pub tags: BTreeMap<String, String>,
    /// A stop or start accepted and not finished yet.
    pub under_way: Option<UnderWay>,
}

/// A stop or start CVM accepted: the instance shows `STOPPING` or `STARTING` (its stopped mode
/// `NOT_APPLICABLE`, "not in the shut-down state") until it is through, as CVM documents. The
/// fake measures that time in reads of the instance: the read right after the call still shows
/// it on its way, a later one shows where it ends.
#[derive(Debug, Clone)]
pub struct UnderWay {
    state: String,
    stopped_mode: String,
    public_ip: Option<String>,
    reads_left: u32,
}

impl FakeInstance {
    /// What a read of it shows now: a change under way is through once enough reads saw it.
    fn read(&mut self) {
        let Some(under_way) = &mut self.under_way else {
            return;
        };
        if under_way.reads_left > 0 {
            under_way.reads_left -= 1;
            return;
        }
        self.state = under_way.state.clone();
        self.stopped_mode = under_way.stopped_mode.clone();
        self.public_ip = under_way.public_ip.clone();
        self.under_way = None;
    }

    /// Begins a change through `through` to `state`, in `stopped_mode`, with `public_ip`.
    fn begin(&mut self, through: &str, state: &str, stopped_mode: &str, public_ip: Option<String>) {
        self.state = through.to_string();
        self.stopped_mode = "NOT_APPLICABLE".to_string();
        self.under_way = Some(UnderWay {
            state: state.to_string(),
            stopped_mode: stopped_mode.to_string(),
            public_ip,
            reads_left: 1,
        });
    }

    /// A running pay-as-you-go GN7 (one T4) in `region` with a public IP and `tags`.
    pub fn gpu(id: &str, region: &str, tags: &[(&str, &str)]) -> FakeInstance {
        FakeInstance {
            id: id.to_string(),
            region: region.to_string(),
            instance_type: "GN7.2XLARGE32".to_string(),
            state: "RUNNING".to_string(),
            charge: "POSTPAID_BY_HOUR".to_string(),
            stopped_mode: "NOT_APPLICABLE".to_string(),
            stop_charging_supported: true,
            public_ip: Some(format!("203.0.113.{}", id.len())),
            tags: tags
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            under_way: None,
        }
    }
}

/// The instance types the fake knows: type, family, GPUs.
pub const TYPES: &[(&str, &str, u32)] = &[
    ("GN7.2XLARGE32", "GN7", 1),
    ("GN10X.2XLARGE40", "GN10X", 1),
    ("S5.LARGE8", "S5", 0),
    ("IT5.4XLARGE64", "IT5", 0),
];

/// A call the fake answered, signature checked.
#[derive(Debug, Clone)]
pub struct Call {
    /// `cvm`, `tag`, `monitor`, `sts`.
    pub service: String,
    /// `X-TC-Action`.
    pub action: String,
    /// The JSON body.
    pub body: Value,
    /// The body as sent, and the headers (names lowercase), the signature among them.
    pub raw: String,
    pub headers: Vec<(String, String)>,
    /// The error code it answered with, if it refused.
    pub refused: Option<String>,
    /// The answer, as sent back (a refusal's too).
    pub answer: Value,
}

/// What the fake holds.
#[derive(Debug, Default)]
pub struct FakeState {
    /// The instances.
    pub instances: Vec<FakeInstance>,
    /// GPU utilisation by instance, reported for every period asked.
    pub gpu_util: BTreeMap<String, f64>,
    /// Every call whose signature held, in order.
    pub calls: Vec<Call>,
    /// Requests refused for their signature or credentials, with the code.
    pub auth_refusals: Vec<String>,
    /// By action, how many of its next calls are refused as over the rate limit
    /// (`RequestLimitExceeded`, as CVM documents it), changing nothing.
    pub throttle: BTreeMap<String, u32>,
    /// An instance terminated by someone right after the Nth DescribeInstances answer (from
    /// 1): CVM pages by offset, so the pages after it shift.
    pub gone_after_describe: Option<(usize, String)>,
    /// The service account's CAM role STS lets assume, when the test sets one.
    pub web_identity: Option<FakeWebIdentity>,
    /// The token STS issued: once it has, every signed call must carry it.
    pub issued_token: Option<String>,
    describes: usize,
    requests: u64,
}

/// A CAM role STS lets assume with one OIDC token.
#[derive(Debug, Clone)]
pub struct FakeWebIdentity {
    pub role_arn: String,
    pub provider_id: String,
    pub token: String,
}

/// The fake, serving on 127.0.0.1.
pub struct TencentFake {
    /// Its address, for `EBB_TENCENT_ENDPOINT`.
    pub url: String,
    state: Arc<Mutex<FakeState>>,
}

impl TencentFake {
    /// Serves `instances` on a port of its own, on a thread of its own.
    pub fn start(instances: Vec<FakeInstance>) -> TencentFake {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let url = format!("http://{}/", listener.local_addr().unwrap());
        let state = Arc::new(Mutex::new(FakeState {
            instances,
            ..FakeState::default()
        }));
        let shared = state.clone();
        std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            runtime.block_on(async move {
                let listener = tokio::net::TcpListener::from_std(listener).unwrap();
                let app = Router::new().route("/", post(answer)).with_state(shared);
                axum::serve(listener, app).await.unwrap();
            });
        });
        TencentFake { url, state }
    }

    /// What it holds now.
    pub fn state(&self) -> MutexGuard<'_, FakeState> {
        self.state.lock().unwrap()
    }

    /// Instance `id`.
    pub fn instance(&self, id: &str) -> FakeInstance {
        let state = self.state();
        state.instances.iter().find(|i| i.id == id).unwrap().clone()
    }

    /// Asks the fake `action` of `service` in `region` with `body`, signed with `secret_key`
    /// by this file's own signing, as a client other than ebb would: its answer.
    pub async fn ask(
        &self,
        service: &str,
        action: &str,
        region: &str,
        body: &Value,
        secret_key: &str,
    ) -> Value {
        let url: reqwest::Url = self.url.parse().unwrap();
        let host = format!("{}:{}", url.host_str().unwrap(), url.port().unwrap());
        let text = body.to_string();
        let timestamp = chrono::Utc::now().timestamp();
        let date = chrono::DateTime::from_timestamp(timestamp, 0)
            .unwrap()
            .format("%Y-%m-%d")
            .to_string();
        let content_type = "application/json; charset=utf-8";
        let canonical = format!(
            "POST\n/\n\ncontent-type:{content_type}\nhost:{host}\n\ncontent-type;host\n{}",
            hex(&Sha256::digest(text.as_bytes()))
        );
        let to_sign = format!(
            "TC3-HMAC-SHA256\n{timestamp}\n{date}/{service}/tc3_request\n{}",
            hex(&Sha256::digest(canonical.as_bytes()))
        );
        let authorization = format!(
            "TC3-HMAC-SHA256 Credential={SECRET_ID}/{date}/{service}/tc3_request, \
             SignedHeaders=content-type;host, Signature={}",
            signature_of(secret_key, &date, service, &to_sign)
        );
        reqwest::Client::new()
            .post(url)
            .header("Authorization", authorization)
            .header("Content-Type", content_type)
            .header("Host", host)
            .header("X-TC-Action", action)
            .header("X-TC-Version", version_of(service).unwrap())
            .header("X-TC-Region", region)
            .header("X-TC-Timestamp", timestamp.to_string())
            .body(text)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap()
    }

    /// The calls of `action` answered so far.
    pub fn calls(&self, action: &str) -> Vec<Call> {
        let state = self.state();
        state
            .calls
            .iter()
            .filter(|c| c.action == action)
            .cloned()
            .collect()
    }
}

type Shared = Arc<Mutex<FakeState>>;

/// A refusal as Tencent Cloud answers it: HTTP 200 with `Response.Error`.
fn refusal(code: &str, message: &str, request_id: &str) -> Value {
    json!({"Response": {"Error": {"Code": code, "Message": message}, "RequestId": request_id}})
}

fn hmac(key: &[u8], data: &str) -> Vec<u8> {
    let mut mac = Hmac::<Sha256>::new_from_slice(key).unwrap();
    mac.update(data.as_bytes());
    mac.finalize().into_bytes().to_vec()
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The signature of `to_sign` with `secret_key`, for `date` and `service`.
fn signature_of(secret_key: &str, date: &str, service: &str, to_sign: &str) -> String {
    let key = hmac(
        &hmac(&hmac(format!("TC3{secret_key}").as_bytes(), date), service),
        "tc3_request",
    );
    hex(&hmac(&key, to_sign))
}

/// Checks a request's signature as "Signature v3" describes it; the service it was signed for,
/// or the refusal's code and message.
fn check_signature(headers: &HeaderMap, body: &str) -> Result<String, (&'static str, String)> {
    let header = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string)
    };
    let failure = |why: String| ("AuthFailure.SignatureFailure", why);
    let authorization = header("authorization").ok_or_else(|| {
        (
            "AuthFailure.MFAFailure",
            "the Authorization header is missing".to_string(),
        )
    })?;
    let rest = authorization
        .strip_prefix("TC3-HMAC-SHA256 ")
        .ok_or_else(|| failure("not TC3-HMAC-SHA256".to_string()))?;
    let mut parts = BTreeMap::new();
    for part in rest.split(", ") {
        let (k, v) = part
            .split_once('=')
            .ok_or_else(|| failure(format!("bad part {part}")))?;
        parts.insert(k, v);
    }
    let (Some(credential), Some(signed_headers), Some(signature)) = (
        parts.get("Credential"),
        parts.get("SignedHeaders"),
        parts.get("Signature"),
    ) else {
        return Err(failure(
            "Credential, SignedHeaders or Signature missing".to_string(),
        ));
    };
    let scope: Vec<&str> = credential.split('/').collect();
    let [id, date, service, "tc3_request"] = scope[..] else {
        return Err(failure(format!("bad credential {credential}")));
    };
    if id != SECRET_ID {
        return Err(("AuthFailure.SecretIdNotFound", format!("unknown id {id}")));
    }
    let timestamp: i64 = header("x-tc-timestamp")
        .and_then(|t| t.parse().ok())
        .ok_or_else(|| failure("X-TC-Timestamp missing".to_string()))?;
    let now = chrono::Utc::now().timestamp();
    if (now - timestamp).abs() > 300 {
        return Err((
            "AuthFailure.SignatureExpire",
            "the timestamp is more than 5 minutes off".to_string(),
        ));
    }
    let utc_date = chrono::DateTime::from_timestamp(timestamp, 0)
        .unwrap()
        .format("%Y-%m-%d")
        .to_string();
    if date != utc_date {
        return Err(failure(format!(
            "the scope's date {date} is not the timestamp's UTC date"
        )));
    }
    let names: Vec<&str> = signed_headers.split(';').collect();
    if !names.contains(&"content-type") || !names.contains(&"host") {
        return Err(failure("content-type and host must be signed".to_string()));
    }
    let mut canonical_headers = String::new();
    for name in &names {
        let value = header(name).unwrap_or_default();
        canonical_headers.push_str(&format!("{name}:{}\n", value.trim().to_lowercase()));
    }
    let canonical = format!(
        "POST\n/\n\n{canonical_headers}\n{signed_headers}\n{}",
        hex(&Sha256::digest(body.as_bytes()))
    );
    let to_sign = format!(
        "TC3-HMAC-SHA256\n{timestamp}\n{date}/{service}/tc3_request\n{}",
        hex(&Sha256::digest(canonical.as_bytes()))
    );
    if signature_of(SECRET_KEY, date, service, &to_sign) != *signature {
        return Err(failure("the signature does not match".to_string()));
    }
    if header("content-type").as_deref() != Some("application/json; charset=utf-8") {
        return Err(failure(
            "the content type is not the one signed for JSON".to_string(),
        ));
    }
    Ok(service.to_string())
}

/// The version each service's calls must name.
fn version_of(service: &str) -> Option<&'static str> {
    match service {
        "cvm" => Some("2017-03-12"),
        "tag" | "sts" => Some("2018-08-13"),
        "monitor" => Some("2018-07-24"),
        _ => None,
    }
}

async fn answer(State(shared): State<Shared>, headers: HeaderMap, body: String) -> Json<Value> {
    let mut state = shared.lock().unwrap();
    state.requests += 1;
    let request_id = format!("fake-{:08}", state.requests);
    let unsigned = headers.get("authorization").and_then(|v| v.to_str().ok()) == Some("SKIP")
        && headers.get("x-tc-action").and_then(|v| v.to_str().ok())
            == Some("AssumeRoleWithWebIdentity");
    let token = headers.get("x-tc-token").and_then(|v| v.to_str().ok());
    let service = match check_signature(&headers, &body) {
        _ if unsigned => "sts".to_string(),
        Ok(_) if state.issued_token.is_some() && token != state.issued_token.as_deref() => {
            state
                .auth_refusals
                .push("AuthFailure.TokenFailure".to_string());
            return Json(refusal(
                "AuthFailure.TokenFailure",
                "the token does not match the SecretId",
                &request_id,
            ));
        }
        Ok(service) => service,
        Err((code, message)) => {
            state.auth_refusals.push(code.to_string());
            return Json(refusal(code, &message, &request_id));
        }
    };
    let header = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
    };
    let action = header("x-tc-action").to_string();
    let region = header("x-tc-region").to_string();
    let received = headers
        .iter()
        .filter_map(|(name, value)| Some((name.to_string(), value.to_str().ok()?.to_string())))
        .collect();
    let raw = body;
    let body: Value = serde_json::from_str(&raw).unwrap_or(Value::Null);
    let throttled = state.throttle.get_mut(&action).filter(|n| **n > 0);
    let answered = if let Some(left) = throttled {
        *left -= 1;
        Err((
            "RequestLimitExceeded".to_string(),
            "Your current request times equals to `20` in a second, which exceeds the frequency limit `20` for a second. Please reduce the frequency of calls.".to_string(),
        ))
    } else if version_of(&service) != Some(header("x-tc-version")) {
        Err((
            "InvalidParameter".to_string(),
            format!("{service} does not have version {}", header("x-tc-version")),
        ))
    } else {
        state.handle(&service, &action, &region, &body)
    };
    let (response, refused) = match answered {
        Ok(mut response) => {
            response["RequestId"] = json!(request_id);
            (json!({ "Response": response }), None)
        }
        Err((code, message)) => (refusal(&code, &message, &request_id), Some(code)),
    };
    state.calls.push(Call {
        service,
        action,
        body,
        raw,
        headers: received,
        refused,
        answer: response.clone(),
    });
    Json(response)
}

type Answered = Result<Value, (String, String)>;

fn refuse(code: &str, message: impl Into<String>) -> Answered {
    Err((code.to_string(), message.into()))
}

/// The strings of `body[field]`.
fn strings(body: &Value, field: &str) -> Vec<String> {
    body[field]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|v| v.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

impl FakeState {
    fn handle(&mut self, service: &str, action: &str, region: &str, body: &Value) -> Answered {
        match (service, action) {
            ("cvm", _) | ("monitor", _) if region.is_empty() => {
                refuse("MissingParameter", "X-TC-Region is required")
            }
            ("cvm", "DescribeInstances") => self.describe(region, body),
            ("cvm", "DescribeInstanceTypeConfigs") => Ok(type_configs(body)),
            ("cvm", "DescribeZoneInstanceConfigInfos") => Ok(zone_configs(body)),
            ("cvm", "StopInstances") => self.stop(region, body),
            ("cvm", "StartInstances") => self.start(region, body),
            ("tag", "TagResources") => self.tag(body, true),
            ("tag", "UnTagResources") => self.tag(body, false),
            ("sts", "GetCallerIdentity") => Ok(json!({
                "AccountId": ACCOUNT, "Arn": format!("qcs::cam::uin/{ACCOUNT}:uin/{ACCOUNT}"),
                "UserId": ACCOUNT, "PrincipalId": ACCOUNT, "Type": "RootAccount"
            })),
            ("monitor", "GetMonitorData") => self.monitor(body),
            ("sts", "AssumeRoleWithWebIdentity") => self.assume(body),
            _ => refuse("InvalidAction", format!("{service} has no action {action}")),
        }
    }

    /// STS's AssumeRoleWithWebIdentity: the fake's keys with a token of their own for the
    /// role the test set, asked with its provider and token.
    fn assume(&mut self, body: &Value) -> Answered {
        let Some(role) = self.web_identity.clone() else {
            return refuse("ResourceNotFound.RoleNotExist", "the role does not exist");
        };
        let field = |name: &str| body[name].as_str().unwrap_or_default();
        if field("RoleSessionName").is_empty() {
            return refuse("MissingParameter", "RoleSessionName is required");
        }
        if field("RoleArn") != role.role_arn || field("ProviderId") != role.provider_id {
            return refuse("ResourceNotFound.RoleNotExist", "the role does not exist");
        }
        if field("WebIdentityToken") != role.token {
            return refuse(
                "InvalidParameter.WebIdentityTokenError",
                "the WebIdentityToken is invalid",
            );
        }
        let seconds = body["DurationSeconds"].as_i64().unwrap_or(7200);
        let expires = chrono::Utc::now().timestamp() + seconds;
        let token = format!("fake-sts-token-{}", self.requests);
        self.issued_token = Some(token.clone());
        Ok(json!({
            "Credentials": {"Token": token, "TmpSecretId": SECRET_ID, "TmpSecretKey": SECRET_KEY},
            "ExpiredTime": expires,
            "Expiration": chrono::DateTime::from_timestamp(expires, 0).unwrap().to_rfc3339(),
        }))
    }

    fn describe(&mut self, region: &str, body: &Value) -> Answered {
        let ids = strings(body, "InstanceIds");
        let filters = body["Filters"].as_array().cloned().unwrap_or_default();
        if !ids.is_empty() && !filters.is_empty() {
            return refuse(
                "InvalidParameter",
                "InstanceIds and Filters cannot be given together",
            );
        }
        let limit = body["Limit"].as_u64().unwrap_or(20) as usize;
        if ids.len() > 100 || limit > 100 {
            return refuse(
                "InvalidParameterValue.LimitExceeded",
                "at most 100 instances",
            );
        }
        let offset = body["Offset"].as_u64().unwrap_or(0) as usize;
        let matching: Vec<usize> = self
            .instances
            .iter()
            .enumerate()
            .filter(|(_, i)| i.region == region)
            .filter(|(_, i)| ids.is_empty() || ids.contains(&i.id))
            .filter(|(_, i)| {
                filters.iter().all(|f| {
                    let values = strings(f, "Values");
                    match f["Name"].as_str().unwrap_or("").strip_prefix("tag:") {
                        Some(key) => i.tags.get(key).is_some_and(|v| values.contains(v)),
                        None => false,
                    }
                })
            })
            .map(|(n, _)| n)
            .collect();
        for &n in matching.iter().skip(offset).take(limit) {
            self.instances[n].read();
        }
        let page: Vec<Value> = matching
            .iter()
            .skip(offset)
            .take(limit)
            .map(|&n| {
                let i = &self.instances[n];
                json!({
                    "InstanceId": i.id, "InstanceType": i.instance_type,
                    "InstanceState": i.state, "InstanceChargeType": i.charge,
                    "StopChargingMode": i.stopped_mode,
                    "PublicIpAddresses": i.public_ip.as_ref().map(|ip| vec![ip.clone()]),
                    "PrivateIpAddresses": [format!("10.0.0.{}", n % 250 + 1)],
                    "Placement": {"Zone": format!("{region}-3")},
                    "Tags": i.tags.iter().map(|(k, v)| json!({"Key": k, "Value": v})).collect::<Vec<_>>(),
                })
            })
            .collect();
        let answer = json!({ "TotalCount": matching.len(), "InstanceSet": page });
        self.describes += 1;
        if let Some((after, id)) = &self.gone_after_describe {
            if *after == self.describes {
                let id = id.clone();
                self.instances.retain(|i| i.id != id);
            }
        }
        Ok(answer)
    }

    /// The instances `ids` of `region`, or the refusal of the whole call.
    fn targets(&self, region: &str, ids: &[String]) -> Result<Vec<usize>, (String, String)> {
        if ids.is_empty() || ids.len() > 100 {
            return Err((
                "InvalidParameterValue.LimitExceeded".to_string(),
                "give 1 to 100 instances".to_string(),
            ));
        }
        ids.iter()
            .map(|id| {
                self.instances
                    .iter()
                    .position(|i| &i.id == id && i.region == region)
                    .ok_or_else(|| {
                        (
                            "InvalidInstanceId.NotFound".to_string(),
                            format!("no instance {id}"),
                        )
                    })
            })
            .collect()
    }

    fn stop(&mut self, region: &str, body: &Value) -> Answered {
        let targets = self.targets(region, &strings(body, "InstanceIds"))?;
        let mode = body["StoppedMode"].as_str().unwrap_or("KEEP_CHARGING");
        for &i in &targets {
            let instance = &self.instances[i];
            if instance.state != "RUNNING" {
                return refuse(
                    "UnsupportedOperation.InstanceStateStopped",
                    format!("{} is {}", instance.id, instance.state),
                );
            }
            if instance.charge == "PREPAID" {
                return refuse(
                    "UnsupportedOperation.InstanceChargeType",
                    format!("{} is a PREPAID instance", instance.id),
                );
            }
            if mode == "STOP_CHARGING" && !instance.stop_charging_supported {
                return refuse(
                    "UnsupportedOperation.StoppedModeStopCharging",
                    format!("{} does not support stopping without charge", instance.id),
                );
            }
        }
        for &i in &targets {
            let instance = &mut self.instances[i];
            let public_ip = match mode {
                "STOP_CHARGING" => None,
                _ => instance.public_ip.clone(),
            };
            instance.begin("STOPPING", "STOPPED", mode, public_ip);
        }
        Ok(json!({}))
    }

    fn start(&mut self, region: &str, body: &Value) -> Answered {
        let targets = self.targets(region, &strings(body, "InstanceIds"))?;
        if let Some(&i) = targets
            .iter()
            .find(|&&i| self.instances[i].state != "STOPPED")
        {
            let instance = &self.instances[i];
            return refuse(
                "UnsupportedOperation.InstanceStateRunning",
                format!("{} is {}", instance.id, instance.state),
            );
        }
        for &i in &targets {
            let instance = &mut self.instances[i];
            let public_ip = instance
                .public_ip
                .clone()
                .or_else(|| Some("198.51.100.7".to_string()));
            instance.begin("STARTING", "RUNNING", "NOT_APPLICABLE", public_ip);
        }
        Ok(json!({}))
    }

    fn tag(&mut self, body: &Value, bind: bool) -> Answered {
        let resources = strings(body, "ResourceList");
        if resources.is_empty() || resources.len() > 10 {
            return refuse("InvalidParameterValue", "give 1 to 10 resources");
        }
        let mut failed = Vec::new();
        for resource in &resources {
            // qcs::cvm:REGION:uin/ACCOUNT:instance/ID
            let segments: Vec<&str> = resource.split(':').collect();
            let found = match segments[..] {
                ["qcs", "", "cvm", region, account, kind] => account
                    .strip_prefix("uin/")
                    .filter(|a| *a == ACCOUNT)
                    .and(kind.strip_prefix("instance/"))
                    .and_then(|id| {
                        self.instances
                            .iter_mut()
                            .find(|i| i.id == id && i.region == region)
                    }),
                _ => None,
            };
            let Some(instance) = found else {
                failed.push(json!({"Resource": resource, "Code": "ResourceNotFound",
                    "Message": "no such resource"}));
                continue;
            };
            if bind {
                for tag in body["Tags"].as_array().into_iter().flatten() {
                    let key = tag["TagKey"].as_str().unwrap_or("").to_string();
                    let value = tag["TagValue"].as_str().unwrap_or("").to_string();
                    instance.tags.insert(key, value);
                }
            } else {
                for key in strings(body, "TagKeys") {
                    instance.tags.remove(&key);
                }
            }
        }
        Ok(json!({ "FailedResources": failed }))
    }

    fn monitor(&self, body: &Value) -> Answered {
        let instances = body["Instances"].as_array().cloned().unwrap_or_default();
        if instances.len() > 10 {
            return refuse("InvalidParameterValue", "at most 10 instances a call");
        }
        if body["Namespace"] != "QCE/CVM" || body["MetricName"] != "GpuUtil" {
            return refuse("InvalidParameterValue", "unknown metric");
        }
        let time = |field: &str| {
            chrono::DateTime::parse_from_rfc3339(body[field].as_str().unwrap_or(""))
                .map(|t| t.timestamp())
        };
        let (Ok(start), Ok(end)) = (time("StartTime"), time("EndTime")) else {
            return refuse(
                "InvalidParameterValue",
                "StartTime and EndTime are ISO 8601",
            );
        };
        let period = body["Period"].as_i64().unwrap_or(300).max(60);
        let mut points = Vec::new();
        for instance in &instances {
            let id = instance["Dimensions"][0]["Value"].as_str().unwrap_or("");
            let Some(value) = self.gpu_util.get(id) else {
                continue;
            };
            let stamps: Vec<i64> = (start / period * period..=end)
                .step_by(period as usize)
                .collect();
            points.push(json!({
                "Dimensions": [{"Name": "InstanceId", "Value": id}],
                "Timestamps": stamps, "Values": vec![value; stamps.len()],
            }));
        }
        Ok(json!({ "Period": period, "MetricName": "GpuUtil", "DataPoints": points }))
    }
}

/// DescribeInstanceTypeConfigs of the types named in an `instance-type` filter.
fn type_configs(body: &Value) -> Value {
    let wanted: Vec<String> = body["Filters"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|f| f["Name"] == "instance-type")
        .flat_map(|f| strings(f, "Values"))
        .collect();
    let set: Vec<Value> = TYPES
        .iter()
        .filter(|(t, _, _)| wanted.iter().any(|w| w == t))
        .map(|(t, family, gpus)| {
            json!({"Zone": "ap-guangzhou-3", "InstanceType": t, "InstanceFamily": family,
                   "GPU": gpus * 4, "GpuCount": gpus, "CPU": 8, "Memory": 32})
        })
        .collect();
    json!({ "InstanceTypeConfigSet": set })
}

/// The fake's prices in yuan (test figures, not Tencent's), by zone of ap-guangzhou: a type's
/// hour pay-as-you-go, and a month of subscription. Zone 6 asks more than zone 3.
fn zone_price(zone: &str, instance_type: &str) -> Option<(f64, f64)> {
    let (hour, month) = match instance_type {
        "GN7.2XLARGE32" => (8.0, 3_000.0),
        "GN10X.2XLARGE40" => (12.0, 5_000.0),
        _ => return None,
    };
    let dearer = if zone == "ap-guangzhou-6" { 1.1 } else { 1.0 };
    Some((hour * dearer, month * dearer))
}

/// DescribeZoneInstanceConfigInfos: each wanted type in each zone, paid each wanted way
/// (filters `instance-type` and `instance-charge-type`), with its `ItemPrice`.
fn zone_configs(body: &Value) -> Value {
    let filter = |name: &str| -> Vec<String> {
        body["Filters"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|f| f["Name"] == name)
            .flat_map(|f| strings(f, "Values"))
            .collect()
    };
    let (types, charges) = (filter("instance-type"), filter("instance-charge-type"));
    let mut set = Vec::new();
    for zone in ["ap-guangzhou-3", "ap-guangzhou-6"] {
        for (t, family, gpus) in TYPES
            .iter()
            .filter(|(t, _, _)| types.iter().any(|w| w == t))
        {
            let Some((hour, month)) = zone_price(zone, t) else {
                continue;
            };
            for charge in ["POSTPAID_BY_HOUR", "PREPAID"] {
                if !charges.is_empty() && !charges.iter().any(|c| c == charge) {
                    continue;
                }
                let price = match charge {
                    "POSTPAID_BY_HOUR" => {
                        json!({"UnitPrice": hour * 1.25, "UnitPriceDiscount": hour,
                                                 "ChargeUnit": "HOUR", "Discount": 80.0})
                    }
                    _ => json!({"OriginalPrice": month * 1.25, "DiscountPrice": month,
                                "DiscountPriceOneYear": month * 10.0,
                                "OriginalPriceOneYear": month * 12.5, "Discount": 80.0}),
                };
                set.push(
                    json!({"Zone": zone, "InstanceType": t, "InstanceChargeType": charge,
                                "InstanceFamily": family, "GpuCount": gpus, "Cpu": 8, "Memory": 32,
                                "Status": "SELL", "Price": price}),
                );
            }
        }
    }
    json!({ "InstanceTypeQuotaSet": set })
}
