//! Where the Tencent Cloud credentials come from: the keys the command line read
//! (`TENCENTCLOUD_SECRET_ID`, `TENCENTCLOUD_SECRET_KEY` and, for temporary ones,
//! `TENCENTCLOUD_SESSION_TOKEN`); or else, on TKE with pod identity, the CAM role of ebb's
//! service account, assumed with STS AssumeRoleWithWebIdentity and the mounted OIDC token
//! (`TKE_ROLE_ARN`, `TKE_PROVIDER_ID`, `TKE_WEB_IDENTITY_TOKEN_FILE`, `TKE_REGION`); or else the
//! CAM role bound to the instance ebb runs on, whose temporary keys the metadata server hands
//! out (`http://metadata.tencentyun.com/latest/meta-data/cam/security-credentials/ROLE`) and
//! which are fetched again before they expire; while the metadata server does not answer,
//! the keys held are used until they do expire. They are kept in memory only, never written.

use crate::cloud::{CloudError, ErrorKind};
use serde::Deserialize;
use serde_json::json;
use std::fmt;
use std::path::PathBuf;
use std::time::Duration;
use tokio::sync::Mutex;

/// STS, where a service account's role is assumed.
const STS: &str = "https://sts.tencentcloudapi.com";

/// How long the keys STS issues for a service account's role last (seconds): the official
/// SDK's default.
const WEB_IDENTITY_SECONDS: i64 = 7200;

/// The metadata server's CAM role credentials, under the role's name.
const ROLE_CREDENTIALS: &str =
    "http://metadata.tencentyun.com/latest/meta-data/cam/security-credentials/";

/// How long before temporary keys expire they are fetched again.
const REFRESH_BEFORE: i64 = 300;

/// A secret id and key, with a session token when they are temporary.
#[derive(Clone)]
pub struct Keys {
    /// The secret id (`AKID...`), sent in the `Authorization` header.
    pub(super) id: String,
    /// The secret key, only ever used to sign.
    pub(super) key: String,
    /// `X-TC-Token`, for temporary keys (STS or a CAM role).
    pub(super) token: Option<String>,
    /// When temporary keys expire, in seconds since 1970.
    expires: Option<i64>,
}

impl Keys {
    /// Lasting keys: a secret id and key without a token.
    pub fn fixed(id: &str, key: &str) -> Keys {
        Keys {
            id: id.to_string(),
            key: key.to_string(),
            token: None,
            expires: None,
        }
    }

    /// The same keys with the session token of temporary ones.
    pub fn with_token(self, token: Option<String>) -> Keys {
        Keys { token, ..self }
    }
}

impl fmt::Debug for Keys {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The secret key and the token never reach a log.
        f.debug_struct("Keys")
            .field("id", &self.id)
            .field("expires", &self.expires)
            .finish_non_exhaustive()
    }
}

/// A CAM role assumed with an OIDC token: TKE's pod identity, as the webhook sets it up.
#[derive(Debug, Clone)]
pub struct WebIdentity {
    /// The role's ARN (`qcs::cam::uin/100000000001:roleName/ebb`).
    pub role_arn: String,
    /// The identity provider's name in CAM (`TKE_PROVIDER_ID`).
    pub provider_id: String,
    /// The file the token is read from at each fetch (the cluster rotates it).
    pub token_file: PathBuf,
    /// The region the STS call names (`TKE_REGION`).
    pub region: String,
    /// The name of the role's session, which CloudAudit records.
    pub session_name: String,
}

/// Where the keys come from.
#[derive(Debug)]
pub(super) enum Source {
    /// Fixed keys, from the environment.
    Fixed(Keys),
    /// A service account's CAM role, through STS.
    WebIdentity {
        /// The client that asks STS.
        http: reqwest::Client,
        /// STS's base URL ([`STS`], or the test double's).
        sts: String,
        /// The role and its token.
        identity: WebIdentity,
        /// The keys fetched last.
        cached: Mutex<Option<Keys>>,
    },
    /// The instance's CAM role, through the metadata server.
    Role {
        /// The client that asks the metadata server.
        http: reqwest::Client,
        /// Where the metadata server lists the role and its keys ([`ROLE_CREDENTIALS`]).
        base: String,
        /// The keys fetched last.
        cached: Mutex<Option<Keys>>,
    },
}

/// The metadata server's answer for a role.
#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct RoleKeys {
    tmp_secret_id: String,
    tmp_secret_key: String,
    token: String,
    expired_time: i64,
}

/// STS's answer to AssumeRoleWithWebIdentity.
#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct Assumed {
    response: AssumedResponse,
}

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct AssumedResponse {
    #[serde(default)]
    credentials: Option<AssumedKeys>,
    #[serde(default)]
    expired_time: Option<i64>,
    #[serde(default)]
    error: Option<AssumeError>,
}

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct AssumedKeys {
    token: String,
    tmp_secret_id: String,
    tmp_secret_key: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct AssumeError {
    code: String,
    message: String,
}

impl Source {
    /// `keys`, or else the service account's role by `identity` at STS (`endpoint`'s, for a
    /// test double), or else the instance's CAM role.
    pub(super) fn new(
        keys: Option<Keys>,
        identity: Option<WebIdentity>,
        endpoint: Option<&reqwest::Url>,
    ) -> Source {
        let http = || {
            reqwest::Client::builder()
                .connect_timeout(Duration::from_secs(2))
                .timeout(Duration::from_secs(5))
                .build()
                .unwrap_or_default()
        };
        match (keys, identity) {
            (Some(keys), _) => Source::Fixed(keys),
            (None, Some(identity)) => Source::WebIdentity {
                http: http(),
                sts: endpoint.map_or(STS.to_string(), |e| {
                    e.as_str().trim_end_matches('/').to_string()
                }),
                identity,
                cached: Mutex::new(None),
            },
            (None, None) => Source::Role {
                http: http(),
                base: ROLE_CREDENTIALS.to_string(),
                cached: Mutex::new(None),
            },
        }
    }

    /// Keys valid for at least a few more minutes, `now` in seconds since 1970; or, while
    /// fetching new ones fails, those held, until they expire.
    pub(super) async fn keys(&self, now: i64) -> Result<Keys, CloudError> {
        let cached = match self {
            Source::Fixed(keys) => return Ok(keys.clone()),
            Source::Role { cached, .. } | Source::WebIdentity { cached, .. } => cached,
        };
        let mut cached = cached.lock().await;
        if let Some(keys) = cached.as_ref() {
            if keys.expires.is_some_and(|e| e - REFRESH_BEFORE > now) {
                return Ok(keys.clone());
            }
        }
        let fetched = match self {
            Source::Fixed(keys) => Ok(keys.clone()),
            Source::Role { http, base, .. } => role_keys(http, base).await,
            Source::WebIdentity {
                http,
                sts,
                identity,
                ..
            } => assumed_keys(http, sts, identity, now).await,
        };
        match fetched {
            Ok(keys) => {
                *cached = Some(keys.clone());
                Ok(keys)
            }
            Err(err) => match cached
                .as_ref()
                .filter(|k| k.expires.is_some_and(|e| e > now))
            {
                Some(held) => {
                    tracing::warn!(error = %err, "the CAM role's keys could not be fetched again; using those held until they expire");
                    Ok(held.clone())
                }
                None => Err(err),
            },
        }
    }
}

/// The first CAM role the metadata server names, and its temporary keys.
async fn role_keys(http: &reqwest::Client, base: &str) -> Result<Keys, CloudError> {
    let missing = |why: String| {
        CloudError::new(
            ErrorKind::Credentials,
            "credentials",
            format!(
                "no Tencent Cloud credentials: set TENCENTCLOUD_SECRET_ID and \
                 TENCENTCLOUD_SECRET_KEY, or bind a CAM role to the instance ebb runs on ({why})"
            ),
        )
    };
    let get = |url: String| async move {
        let answer = http.get(url).send().await.map_err(|e| e.to_string())?;
        let answer = answer.error_for_status().map_err(|e| e.to_string())?;
        answer.text().await.map_err(|e| e.to_string())
    };
    let roles = get(base.to_string()).await.map_err(missing)?;
    let role = roles
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .ok_or_else(|| missing("the metadata server names no CAM role".to_string()))?;
    let text = get(format!("{base}{role}")).await.map_err(missing)?;
    role_keys_of(&text)
        .map_err(|e| missing(format!("the role's credentials could not be read: {e}")))
}

/// The keys of `identity`'s role from STS (AssumeRoleWithWebIdentity), asked at `now` with the
/// token its file holds now: the request the official SDK makes (JSON, `Authorization: SKIP`,
/// the action, version, region and time in headers).
async fn assumed_keys(
    http: &reqwest::Client,
    sts: &str,
    identity: &WebIdentity,
    now: i64,
) -> Result<Keys, CloudError> {
    let failure =
        |why: String| CloudError::new(ErrorKind::Credentials, "AssumeRoleWithWebIdentity", why);
    let token = tokio::fs::read_to_string(&identity.token_file)
        .await
        .map_err(|e| {
            failure(format!(
                "the web identity token file {} cannot be read ({e}): is the pod's service account bound to a CAM role?",
                identity.token_file.display()
            ))
        })?;
    let body = json!({
        "ProviderId": identity.provider_id,
        "WebIdentityToken": token.trim(),
        "RoleArn": identity.role_arn,
        "RoleSessionName": identity.session_name,
        "DurationSeconds": WEB_IDENTITY_SECONDS,
    });
    let answer = http
        .post(format!("{sts}/"))
        .header("Authorization", "SKIP")
        .header("Content-Type", "application/json")
        .header("X-TC-Action", "AssumeRoleWithWebIdentity")
        .header("X-TC-Version", "2018-08-13")
        .header("X-TC-Region", &identity.region)
        .header("X-TC-Timestamp", now.to_string())
        .body(body.to_string())
        .send()
        .await
        .map_err(|e| failure(format!("STS at {sts} cannot be reached: {e}")))?;
    let text = answer
        .text()
        .await
        .map_err(|e| failure(format!("STS's answer was cut: {e}")))?;
    let assumed: Assumed = serde_json::from_str(&text)
        .map_err(|e| failure(format!("STS answered in a form ebb cannot read ({e})")))?;
    match assumed.response {
        AssumedResponse {
            credentials: Some(keys),
            expired_time: Some(expires),
            ..
        } => Ok(Keys {
            id: keys.tmp_secret_id,
            key: keys.tmp_secret_key,
            token: Some(keys.token),
            expires: Some(expires),
        }),
        AssumedResponse { error, .. } => {
            let (code, message) = error.map_or_else(
                || ("no keys".to_string(), String::new()),
                |e| (e.code, e.message),
            );
            Err(failure(format!(
                "STS refused to assume {} ({code}: {message}): check the role's trust policy names the identity provider {} and this service account",
                identity.role_arn, identity.provider_id
            )))
        }
    }
}

/// The temporary keys of the metadata server's answer for a role.
fn role_keys_of(text: &str) -> Result<Keys, serde_json::Error> {
    let keys: RoleKeys = serde_json::from_str(text)?;
    Ok(Keys {
        id: keys.tmp_secret_id,
        key: keys.tmp_secret_key,
        token: Some(keys.token),
        expires: Some(keys.expired_time),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An answer of the metadata server in the shape the CVM documentation gives ("Managing
    /// Instance Roles"); the values are made up.
    const ROLE_ANSWER: &str = r#"{
        "TmpSecretId": "AKIDoQMxkMNGUu6-0Cc9",
        "TmpSecretKey": "5OdwIsnTNS9ItB8Ts3fPxkRSX0Wx",
        "ExpiredTime": 1615590047,
        "Expiration": "2021-03-12T23:00:47Z",
        "Token": "T2ZfkWwDWhTXbNN8pa",
        "Code": "Success"
    }"#;

    #[tokio::test]
    async fn role_keys_are_read_and_kept_until_shortly_before_they_expire() {
        let keys = role_keys_of(ROLE_ANSWER).unwrap();
        assert_eq!(keys.id, "AKIDoQMxkMNGUu6-0Cc9");
        assert_eq!(keys.token.as_deref(), Some("T2ZfkWwDWhTXbNN8pa"));
        let source = Source::new(None, None, None);
        let Source::Role { cached, .. } = &source else {
            panic!("no keys given: the CAM role");
        };
        *cached.lock().await = Some(keys);
        let in_time = source.keys(1615590047 - REFRESH_BEFORE - 1).await.unwrap();
        assert_eq!(in_time.id, "AKIDoQMxkMNGUu6-0Cc9");
        let text = format!("{:?}", in_time);
        assert!(!text.contains("5OdwIsnTNS9ItB8Ts3fPxkRSX0Wx"), "{text}");
        assert!(!text.contains("T2ZfkWwDWhTXbNN8pa"), "{text}");
    }

    /// STS for TKE's pod identity: the keys it issues expire at `EXPIRES`; it keeps the tokens
    /// it was asked with, and answers unsigned calls only.
    async fn sts() -> (String, std::sync::Arc<std::sync::Mutex<Vec<String>>>) {
        let tokens = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let asked = tokens.clone();
        let app = axum::Router::new().route(
            "/",
            axum::routing::post(
                move |headers: axum::http::HeaderMap, body: axum::Json<serde_json::Value>| {
                    let mut asked = asked.lock().unwrap();
                    let unsigned = headers["authorization"] == "SKIP"
                        && headers["x-tc-action"] == "AssumeRoleWithWebIdentity";
                    asked.push(body["WebIdentityToken"].as_str().unwrap().to_string());
                    let n = asked.len();
                    async move {
                        axum::Json(match unsigned {
                            true => json!({"Response": {"Credentials": {
                                "Token": format!("token{n}"), "TmpSecretId": format!("AKIDtke{n}"),
                                "TmpSecretKey": "key"}, "ExpiredTime": EXPIRES,
                                "Expiration": "2026-11-30T12:00:00Z", "RequestId": "r"}}),
                            false => json!({"Response": {"Error": {"Code": "AuthFailure",
                                "Message": "signed"}, "RequestId": "r"}}),
                        })
                    }
                },
            ),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        (url, tokens)
    }

    /// 2026-11-30T12:00:00Z.
    const EXPIRES: i64 = 1_764_504_000;

    #[tokio::test]
    async fn a_service_accounts_role_is_assumed_again_before_expiry_with_the_token_then_mounted() {
        let (url, tokens) = sts().await;
        let dir = tempfile::tempdir().unwrap();
        let token_file = dir.path().join("token");
        std::fs::write(&token_file, "token-a\n").unwrap();
        let identity = WebIdentity {
            role_arn: "qcs::cam::uin/1:roleName/ebb".into(),
            provider_id: "tke-oidc".into(),
            token_file: token_file.clone(),
            region: "ap-guangzhou".into(),
            session_name: "ebb".into(),
        };
        let source = Source::new(None, Some(identity), Some(&url.parse().unwrap()));
        let first = source.keys(EXPIRES - 4 * 3600).await.unwrap();
        assert_eq!(first.id, "AKIDtke1");
        std::fs::write(&token_file, "token-b").unwrap();
        let kept = source.keys(EXPIRES - REFRESH_BEFORE - 1).await.unwrap();
        assert_eq!(
            kept.id, "AKIDtke1",
            "kept while more than five minutes are left"
        );
        let renewed = source.keys(EXPIRES - REFRESH_BEFORE + 1).await.unwrap();
        assert_eq!(renewed.id, "AKIDtke2");
        assert_eq!(*tokens.lock().unwrap(), ["token-a", "token-b"]);
    }

    #[tokio::test]
    async fn held_keys_are_used_until_they_expire_while_the_metadata_server_does_not_answer() {
        // A port nothing listens on: every fetch fails at once.
        let closed = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap();
        let source = Source::Role {
            http: reqwest::Client::new(),
            base: format!("http://{closed}/latest/meta-data/cam/security-credentials/"),
            cached: Mutex::new(Some(role_keys_of(ROLE_ANSWER).unwrap())),
        };
        // Due for a refresh, which fails: the held keys, still valid, are used.
        let due = 1615590047 - REFRESH_BEFORE + 1;
        assert_eq!(source.keys(due).await.unwrap().id, "AKIDoQMxkMNGUu6-0Cc9");
        // Expired: no keys, and the error says what to do.
        let err = source.keys(1615590047 + 1).await.unwrap_err();
        assert!(err.to_string().contains("bind a CAM role"), "{err}");
    }
}
