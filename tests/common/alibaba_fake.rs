//! A fake of Alibaba Cloud's ECS and CloudMonitor RPC APIs, written from Alibaba's
//! documentation (API reference of DescribeInstances, DescribeInstanceTypes, StartInstances,
//! StopInstances, TagResources, UntagResources, DescribeMetricList; "V3 request body and
//! signature mechanism"), not from ebb's code: a local HTTP server on its own thread that
//! checks every request's ACS3-HMAC-SHA256 signature with its own implementation, keeps
//! instances with their states, charge types, stopped modes and locks (a preemptible one it
//! recycles is locked `Recycling` at one listing and released before the next, as "Handle spot
//! instance interruption events" describes), and refuses what the
//! documentation says ECS refuses (a bad signature, a stale date, more than 100 instances a
//! call, more than 50 resources a tag call, an instance in the wrong state).
//!
//! STS's AssumeRoleWithOIDC (RRSA on ACK; "AssumeRoleWithOIDC" in the STS API reference: an
//! anonymous GET whose query holds the role, the provider, the token and the session name)
//! issues the fake's AccessKey with a security token, which every later ECS call must then
//! carry (`x-acs-security-token`).
//!
//! Two documented behaviours the issue expected as refusals are not: StopInstances "does not
//! block" an instance that cannot stop without charge ("如实例自身不支持节省停机模式，API 侧
//! 不会进行报错拦截，优先保证实例停机"), so a local-disk family or a subscription asked
//! `StopCharging` is stopped and reports `StoppedMode=Not-applicable` (still billed), as here.

use axum::body::Bytes;
use axum::extract::{RawQuery, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::Router;
use hmac::{Hmac, Mac};
use serde_json::{json, Value};
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

/// The AccessKey the fake accepts.
pub const KEY_ID: &str = "LTAI-fake-key";
/// Its secret.
pub const KEY_SECRET: &str = "fake-secret-of-the-docs";

/// One ECS instance as the fake keeps it.
#[derive(Debug, Clone)]
pub struct FakeInstance {
    pub id: String,
    pub region: String,
    pub instance_type: String,
    /// Its `InstanceTypeFamily` (`ecs.gn5` for `ecs.gn5-c4g1.xlarge`).
    pub family: String,
    /// `Running`, `Stopped`, `Stopping`, `Starting`, `Pending`.
    pub status: String,
    /// `PostPaid` or `PrePaid`.
    pub charge_type: String,
    /// `NoSpot`, `SpotAsPriceGo`, `SpotWithPriceLimit`.
    pub spot_strategy: String,
    /// What DescribeInstances says of a stopped instance: `StopCharging`, `KeepCharging`,
    /// `Not-applicable`.
    pub stopped_mode: String,
    /// `OperationLocks` reasons (`Recycling`, `security`).
    pub locks: Vec<String>,
    /// For a preemptible instance ECS is recycling: the listings that still show it (locked
    /// `Recycling`) before it is released and listed no more.
    pub recycled_after: Option<u32>,
    pub tags: BTreeMap<String, String>,
    /// A stop or start accepted and not finished yet.
    pub under_way: Option<UnderWay>,
}

/// A stop or start ECS accepted: the instance shows `Stopping` or `Starting` (its stopped mode
/// `Not-applicable`) until it is through, as ECS documents. The fake measures that time in
/// reads of the instance: the read right after the call still shows it on its way, a later
/// one shows where it ends.
#[derive(Debug, Clone)]
pub struct UnderWay {
    /// The status it ends in.
    pub status: String,
    /// The stopped mode it ends in.
    pub stopped_mode: String,
    /// The reads that still show it on its way.
    pub reads_left: u32,
}

impl FakeInstance {
    /// What a read of it shows now: a change under way is through once enough reads saw it.
    pub fn read(&mut self) {
        let Some(under_way) = &mut self.under_way else {
            return;
        };
        if under_way.reads_left > 0 {
            under_way.reads_left -= 1;
            return;
        }
        self.status = under_way.status.clone();
        self.stopped_mode = under_way.stopped_mode.clone();
        self.under_way = None;
    }

    /// Begins a change through `through` to `status` in `stopped_mode`.
    pub fn begin(&mut self, through: &str, status: &str, stopped_mode: &str) {
        self.status = through.to_string();
        self.stopped_mode = "Not-applicable".to_string();
        self.under_way = Some(UnderWay {
            status: status.to_string(),
            stopped_mode: stopped_mode.to_string(),
            reads_left: 1,
        });
    }
}

impl FakeInstance {
    /// A running pay-as-you-go instance of `instance_type` in `region` with `tags`.
    pub fn new(id: &str, region: &str, instance_type: &str, tags: &[(&str, &str)]) -> Self {
        FakeInstance {
            id: id.to_string(),
            region: region.to_string(),
            instance_type: instance_type.to_string(),
            // ECS's families are named before the size and the first dash: `ecs.gn5-c4g1.xlarge`
            // is of `ecs.gn5`, `ecs.gn7i-c8g1.2xlarge` of `ecs.gn7i`.
            family: instance_type
                .split('.')
                .take(2)
                .collect::<Vec<_>>()
                .join(".")
                .split('-')
                .next()
                .unwrap()
                .to_string(),
            status: "Running".to_string(),
            charge_type: "PostPaid".to_string(),
            spot_strategy: "NoSpot".to_string(),
            stopped_mode: "Not-applicable".to_string(),
            locks: Vec::new(),
            recycled_after: None,
            under_way: None,
            tags: tags
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        }
    }

    /// Whether its family has local disks or persistent memory (the economical mode
    /// documentation's list: the i and d series, gn5, re6p).
    pub fn local_storage(&self) -> bool {
        let family = self.family.strip_prefix("ecs.").unwrap_or(&self.family);
        let series = |p: char| {
            family.starts_with(p) && family[1..].starts_with(|c: char| c.is_ascii_digit())
        };
        series('i') || series('d') || family == "gn5" || family.starts_with("re6p")
    }
}

/// One call the fake answered (or refused): its action and parameters.
#[derive(Debug, Clone)]
pub struct Call {
    pub action: String,
    pub params: BTreeMap<String, String>,
    /// Its headers as received (names lowercase), the signature among them.
    pub headers: Vec<(String, String)>,
    /// Whether the fake accepted it.
    pub accepted: bool,
    /// The answer's JSON body, as sent back (an error's too).
    pub answer: Value,
}

/// What the fake holds.
#[derive(Debug, Default)]
pub struct FakeState {
    pub instances: Vec<FakeInstance>,
    /// Every call, in order.
    pub calls: Vec<Call>,
    /// GPU utilisation datapoints: (instance, GPU, epoch ms, percent).
    pub gpu_points: Vec<(String, String, i64, f64)>,
    /// The next call of this action is carried out, but answered `500 InternalError`: an
    /// answer lost on the way back.
    pub lose_answer_of: Option<String>,
    /// By action, how many of its next calls are refused for flow control
    /// (`400 Throttling.User`, as ECS documents it), changing nothing.
    pub throttle: BTreeMap<String, u32>,
    /// The service account's role STS lets assume, when the test sets one.
    pub oidc: Option<FakeOidc>,
    /// The security token STS issued: once it has, every ECS call must carry it.
    pub issued_token: Option<String>,
}

/// A RAM role STS lets assume with one OIDC token.
#[derive(Debug, Clone)]
pub struct FakeOidc {
    pub role_arn: String,
    pub provider_arn: String,
    pub token: String,
}

/// A running fake; it stops with the test process.
pub struct Fake {
    /// Its base URL, for `EBB_ALIBABA_ENDPOINT`.
    pub url: String,
    pub state: Arc<Mutex<FakeState>>,
}

impl Fake {
    /// Starts a fake holding `instances`.
    pub fn start(instances: Vec<FakeInstance>) -> Fake {
        let state = Arc::new(Mutex::new(FakeState {
            instances,
            ..FakeState::default()
        }));
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let shared = state.clone();
        // A thread of its own: the tests run the ebb binary synchronously.
        std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            runtime.block_on(async move {
                let listener = tokio::net::TcpListener::from_std(listener).unwrap();
                let app = Router::new()
                    .route("/", post(answer).get(assume_role_with_oidc))
                    .with_state(shared);
                axum::serve(listener, app).await.unwrap();
            });
        });
        Fake { url, state }
    }

    /// The environment that points ebb at the fake with its AccessKey.
    pub fn env(&self) -> [(&'static str, String); 4] {
        [
            ("EBB_CLOUD", "alibaba".to_string()),
            ("EBB_ALIBABA_ENDPOINT", self.url.clone()),
            ("ALIBABA_CLOUD_ACCESS_KEY_ID", KEY_ID.to_string()),
            ("ALIBABA_CLOUD_ACCESS_KEY_SECRET", KEY_SECRET.to_string()),
        ]
    }

    /// The calls of `action` the fake accepted.
    pub fn accepted(&self, action: &str) -> Vec<Call> {
        let state = self.state.lock().unwrap();
        state
            .calls
            .iter()
            .filter(|c| c.action == action && c.accepted)
            .cloned()
            .collect()
    }

    /// Recycles preemptible instance `id` as ECS documents it: locked `Recycling` (its
    /// interruption warning, about five minutes ahead) for the next listing, then released.
    pub fn recycle(&self, id: &str) {
        let mut state = self.state.lock().unwrap();
        let i = state.instances.iter_mut().find(|i| i.id == id).unwrap();
        assert_ne!(
            i.spot_strategy, "NoSpot",
            "ECS recycles preemptible instances only"
        );
        i.locks.push("Recycling".to_string());
        i.recycled_after = Some(1);
    }

    /// Whether instance `id` is still there (not released).
    pub fn holds(&self, id: &str) -> bool {
        let state = self.state.lock().unwrap();
        state.instances.iter().any(|i| i.id == id)
    }

    /// Instance `id` as the fake holds it now.
    pub fn instance(&self, id: &str) -> FakeInstance {
        let state = self.state.lock().unwrap();
        state.instances.iter().find(|i| i.id == id).unwrap().clone()
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// RFC 3986 encoding: letters, digits and `-_.~` as they are, every other byte `%XX`.
fn percent(text: &str) -> String {
    let mut out = String::new();
    for b in text.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                out.push(b as char)
            }
            _ => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}

/// The query's parameters, decoded.
fn parse_query(raw: &str) -> BTreeMap<String, String> {
    url::form_urlencoded::parse(raw.as_bytes())
        .map(|(k, v)| (k.into_owned(), v.into_owned()))
        .collect()
}

/// Checks the request's signature as the documentation describes it: the canonical request
/// (method, path, query sorted by name and encoded, the signed headers lowercase with their
/// trimmed values, their names, the body's SHA-256), its SHA-256 after `ACS3-HMAC-SHA256\n`,
/// signed by HMAC-SHA256 under the secret. `Err` is the error code to answer with.
fn verify(
    headers: &HeaderMap,
    query: &BTreeMap<String, String>,
    body: &[u8],
) -> Result<(), &'static str> {
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    let auth = header("authorization").ok_or("IncompleteSignature")?;
    let rest = auth
        .strip_prefix("ACS3-HMAC-SHA256 ")
        .ok_or("IncompleteSignature")?;
    let mut fields = BTreeMap::new();
    for part in rest.split(',') {
        let (k, v) = part.trim().split_once('=').ok_or("IncompleteSignature")?;
        fields.insert(k, v);
    }
    let (Some(key), Some(signed), Some(signature)) = (
        fields.get("Credential"),
        fields.get("SignedHeaders"),
        fields.get("Signature"),
    ) else {
        return Err("IncompleteSignature");
    };
    if *key != KEY_ID {
        return Err("InvalidAccessKeyId.NotFound");
    }
    let body_hash = hex(&Sha256::digest(body));
    if header("x-acs-content-sha256") != Some(body_hash.as_str()) {
        return Err("SignatureDoesNotMatch");
    }
    let date = header("x-acs-date").ok_or("IncompleteSignature")?;
    let date = chrono::DateTime::parse_from_rfc3339(date).map_err(|_| "InvalidTimeStamp.Format")?;
    if (chrono::Utc::now() - date.with_timezone(&chrono::Utc))
        .num_minutes()
        .abs()
        > 15
    {
        return Err("InvalidTimeStamp.Expired");
    }
    let names: Vec<&str> = signed.split(';').collect();
    for required in [
        "host",
        "x-acs-action",
        "x-acs-version",
        "x-acs-date",
        "x-acs-signature-nonce",
    ] {
        if !names.contains(&required) {
            return Err("IncompleteSignature");
        }
    }
    let mut canonical_headers = String::new();
    for name in &names {
        let value = header(name).ok_or("IncompleteSignature")?;
        canonical_headers.push_str(&format!("{name}:{}\n", value.trim()));
    }
    let canonical_query: Vec<String> = query
        .iter()
        // A parameter with an empty value is `name=`, as Alibaba's SDKs sign it.
        .map(|(k, v)| format!("{}={}", percent(k), percent(v)))
        .collect();
    let canonical = format!(
        "POST\n/\n{}\n{canonical_headers}\n{signed}\n{body_hash}",
        canonical_query.join("&")
    );
    let to_sign = format!(
        "ACS3-HMAC-SHA256\n{}",
        hex(&Sha256::digest(canonical.as_bytes()))
    );
    let mut mac = Hmac::<Sha256>::new_from_slice(KEY_SECRET.as_bytes()).unwrap();
    mac.update(to_sign.as_bytes());
    match hex(&mac.finalize().into_bytes()) == *signature {
        true => Ok(()),
        false => Err("SignatureDoesNotMatch"),
    }
}

/// STS's AssumeRoleWithOIDC: the fake's AccessKey with a token of its own for the role the
/// test set, asked with its provider and token; `400` with STS's codes otherwise.
async fn assume_role_with_oidc(
    State(state): State<Arc<Mutex<FakeState>>>,
    RawQuery(raw): RawQuery,
) -> Response {
    let query = parse_query(raw.as_deref().unwrap_or(""));
    let mut state = state.lock().unwrap();
    let param = |name: &str| query.get(name).map(String::as_str);
    let refused = |code: &str, message: &str| Err((code.to_string(), message.to_string()));
    let result = match (&state.oidc, param("Action")) {
        (_, action) if action != Some("AssumeRoleWithOIDC") => refused(
            "InvalidAction.NotFound",
            "the action is not an STS action the fake knows",
        ),
        (None, _) => refused("EntityNotExist.Role", "the role does not exist"),
        _ if param("Version") != Some("2015-04-01") || param("Format") != Some("JSON") => refused(
            "InvalidVersion",
            "Specified parameter Version is not valid.",
        ),
        _ if param("RoleSessionName").is_none_or(str::is_empty) => refused(
            "MissingRoleSessionName",
            "RoleSessionName is mandatory for this action.",
        ),
        (Some(o), _) if param("RoleArn") != Some(o.role_arn.as_str()) => {
            refused("EntityNotExist.Role", "the role does not exist")
        }
        (Some(o), _) if param("OIDCProviderArn") != Some(o.provider_arn.as_str()) => refused(
            "EntityNotExist.OIDCProvider",
            "the OIDC provider does not exist",
        ),
        (Some(o), _) if param("OIDCToken") != Some(o.token.as_str()) => refused(
            "AuthenticationFail.OIDCToken.Invalid",
            "the OIDC token is invalid",
        ),
        _ => Ok(()),
    };
    let (status, answer) = match result {
        Ok(()) => {
            let token = format!("CAIS-fake-{}", state.calls.len());
            state.issued_token = Some(token.clone());
            let expiration = (chrono::Utc::now() + chrono::Duration::hours(1))
                .format("%Y-%m-%dT%H:%M:%SZ")
                .to_string();
            let role = param("RoleArn").unwrap_or_default();
            (
                StatusCode::OK,
                json!({
                    "RequestId": "fake-sts",
                    "OIDCTokenInfo": {"Subject": "system:serviceaccount:ebb:ebb", "Issuer": "https://oidc-ack.fake", "ClientIds": "sts.aliyuncs.com"},
                    "AssumedRoleUser": {"AssumedRoleId": "3010:ebb", "Arn": format!("{role}/ebb")},
                    "Credentials": {"SecurityToken": token, "Expiration": expiration,
                                    "AccessKeySecret": KEY_SECRET, "AccessKeyId": KEY_ID}
                }),
            )
        }
        Err((code, message)) => (StatusCode::BAD_REQUEST, error_body(&code, &message)),
    };
    state.calls.push(Call {
        action: "AssumeRoleWithOIDC".to_string(),
        params: query,
        headers: Vec::new(),
        accepted: status.is_success(),
        answer: answer.clone(),
    });
    (status, axum::Json(answer)).into_response()
}

fn error_body(code: &str, message: &str) -> Value {
    json!({"RequestId": "fake-error", "Code": code, "Message": message})
}

async fn answer(
    State(state): State<Arc<Mutex<FakeState>>>,
    RawQuery(raw): RawQuery,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let query = parse_query(raw.as_deref().unwrap_or(""));
    let action = headers
        .get("x-acs-action")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_string();
    let mut state = state.lock().unwrap();
    let token = headers
        .get("x-acs-security-token")
        .and_then(|v| v.to_str().ok());
    let issued = state.issued_token.clone();
    let throttled = state.throttle.get_mut(&action).filter(|n| **n > 0);
    let result = match verify(&headers, &query, &body) {
        Ok(()) if issued.is_some() && token != issued.as_deref() => Err((
            StatusCode::BAD_REQUEST,
            "InvalidSecurityToken.Mismatch",
            "the security token does not match the AccessKey".to_string(),
        )),
        Err(code) => Err((
            StatusCode::BAD_REQUEST,
            code,
            "the signature does not verify".to_string(),
        )),
        Ok(()) if throttled.is_some() => {
            throttled.into_iter().for_each(|left| *left -= 1);
            Err((
                StatusCode::BAD_REQUEST,
                "Throttling.User",
                "Request was denied due to user flow control.".to_string(),
            ))
        }
        Ok(()) => super::alibaba_fake_api::act(&mut state, &action, &query),
    };
    let lost = result.is_ok() && state.lose_answer_of.as_deref() == Some(action.as_str());
    if lost {
        state.lose_answer_of = None;
    }
    let received = headers
        .iter()
        .filter_map(|(name, value)| Some((name.to_string(), value.to_str().ok()?.to_string())))
        .collect();
    let accepted = result.is_ok();
    let (status, answer) = match (lost, result) {
        (true, _) => (
            StatusCode::INTERNAL_SERVER_ERROR,
            error_body(
                "InternalError",
                "The request processing has failed due to some unknown error.",
            ),
        ),
        (false, Ok(body)) => (StatusCode::OK, body),
        (false, Err((status, code, message))) => (status, error_body(code, &message)),
    };
    state.calls.push(Call {
        action,
        params: query,
        headers: received,
        accepted,
        answer: answer.clone(),
    });
    (status, axum::Json(answer)).into_response()
}
