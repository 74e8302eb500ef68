//! Alibaba Cloud credentials: an AccessKey given to ebb (with an STS token when temporary), the
//! RAM role of the pod's service account on ACK (RRSA: STS AssumeRoleWithOIDC with the OIDC
//! token the cluster mounts), or the ECS instance's RAM role from the metadata server; a role's
//! are fetched again before they expire. Held in memory only: ebb writes them to no file.

use super::super::{CloudError, ErrorKind};
use chrono::{DateTime, Duration, Utc};
use serde::Deserialize;
use std::fmt;
use std::path::PathBuf;
use tokio::sync::Mutex;

/// How long before its expiry a role's credentials are fetched again (they are issued for
/// hours; Alibaba renews them on the metadata server well before).
const REFRESH_BEFORE: Duration = Duration::minutes(10);

/// The metadata server's hardening token lives this long (seconds).
const TOKEN_TTL: &str = "300";

/// How long the credentials STS issues for a service account's role last (seconds): the
/// official SDKs' default.
const OIDC_SESSION_SECONDS: &str = "3600";

/// Where the credentials come from.
#[derive(Clone)]
pub enum CredentialSource {
    /// An AccessKey (`ALIBABA_CLOUD_ACCESS_KEY_ID` and `_SECRET`), with the STS token of
    /// temporary ones (`ALIBABA_CLOUD_SECURITY_TOKEN`).
    AccessKey(Credentials),
    /// The RAM role of the ECS instance ebb runs on, from its metadata server
    /// (`http://100.100.100.200/latest/meta-data/ram/security-credentials/ROLE`).
    RamRole {
        /// The role's name; `None` asks the metadata server which role the instance has.
        role: Option<String>,
        /// The metadata server's base URL.
        metadata: String,
    },
    /// The RAM role of the Kubernetes service account ebb runs as on ACK (RRSA), assumed with
    /// the OIDC token the cluster mounts (`ALIBABA_CLOUD_ROLE_ARN`,
    /// `ALIBABA_CLOUD_OIDC_PROVIDER_ARN`, `ALIBABA_CLOUD_OIDC_TOKEN_FILE`, as the pod identity
    /// webhook sets them).
    Oidc(OidcRole),
}

/// A RAM role assumed with an OIDC token (STS AssumeRoleWithOIDC, which takes no signature).
#[derive(Clone, Debug)]
pub struct OidcRole {
    /// The role's ARN (`acs:ram::ACCOUNT:role/NAME`).
    pub role_arn: String,
    /// The ARN of the cluster's OIDC identity provider.
    pub provider_arn: String,
    /// The file the token is read from at each fetch (the cluster rotates it).
    pub token_file: PathBuf,
    /// The name of the role's session, which ActionTrail records.
    pub session_name: String,
    /// STS's base URL (`https://sts-vpc.cn-hangzhou.aliyuncs.com`).
    pub sts: String,
}

impl fmt::Debug for CredentialSource {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        match self {
            CredentialSource::AccessKey(c) => write!(f, "AccessKey({})", c.access_key_id),
            CredentialSource::RamRole { role, metadata } => {
                write!(f, "RamRole({role:?} at {metadata})")
            }
            CredentialSource::Oidc(o) => write!(f, "Oidc({} at {})", o.role_arn, o.sts),
        }
    }
}

/// One set of credentials.
#[derive(Clone, PartialEq, Eq)]
pub struct Credentials {
    /// The AccessKey id.
    pub access_key_id: String,
    /// The AccessKey secret.
    pub access_key_secret: String,
    /// The STS token of temporary credentials.
    pub security_token: Option<String>,
}

impl fmt::Debug for Credentials {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.debug_struct("Credentials")
            .field("access_key_id", &self.access_key_id)
            .finish_non_exhaustive()
    }
}

/// What the metadata server answers for a role.
#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct RoleCredentials {
    access_key_id: String,
    access_key_secret: String,
    security_token: String,
    expiration: DateTime<Utc>,
    #[serde(default)]
    code: Option<String>,
}

/// What STS answers AssumeRoleWithOIDC: the credentials, or why not.
#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct AssumedRole {
    #[serde(default)]
    credentials: Option<StsCredentials>,
    #[serde(default)]
    code: Option<String>,
    #[serde(default)]
    message: Option<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct StsCredentials {
    access_key_id: String,
    access_key_secret: String,
    security_token: String,
    expiration: DateTime<Utc>,
}

/// Credentials as a call needs them: fixed, or the role's, fetched again before they expire.
pub(super) struct Keyring {
    source: CredentialSource,
    http: reqwest::Client,
    cached: Mutex<Option<(Credentials, DateTime<Utc>)>>,
}

impl Keyring {
    /// Credentials from `source`, the role's fetched with `http`.
    pub(super) fn new(source: CredentialSource, http: reqwest::Client) -> Keyring {
        Keyring {
            source,
            http,
            cached: Mutex::new(None),
        }
    }

    /// The credentials to sign a call made at `now` with.
    pub(super) async fn get(&self, now: DateTime<Utc>) -> Result<Credentials, CloudError> {
        if let CredentialSource::AccessKey(c) = &self.source {
            return Ok(c.clone());
        }
        let mut cached = self.cached.lock().await;
        if let Some((c, expires)) = &*cached {
            if now + REFRESH_BEFORE < *expires {
                return Ok(c.clone());
            }
        }
        let fresh = match &self.source {
            CredentialSource::AccessKey(c) => return Ok(c.clone()),
            CredentialSource::RamRole { role, metadata } => {
                self.fetch(role.as_deref(), metadata).await
            }
            CredentialSource::Oidc(role) => self.assume(role).await,
        };
        match (fresh, cached.as_ref()) {
            (Ok((c, expires)), _) => {
                *cached = Some((c.clone(), expires));
                Ok(c)
            }
            // Still valid: a metadata server that fails once does not stop the calls.
            (Err(_), Some((c, expires))) if now < *expires => Ok(c.clone()),
            (Err(e), _) => Err(e),
        }
    }

    /// The role's credentials from the metadata server, and when they expire.
    async fn fetch(
        &self,
        role: Option<&str>,
        metadata: &str,
    ) -> Result<(Credentials, DateTime<Utc>), CloudError> {
        let base = format!(
            "{}/latest/meta-data/ram/security-credentials/",
            metadata.trim_end_matches('/')
        );
        let token = self.token(metadata).await;
        let role = match role {
            Some(r) => r.to_string(),
            None => self
                .get_text(&base, token.as_deref())
                .await?
                .lines()
                .next()
                .map(str::trim)
                .filter(|r| !r.is_empty())
                .ok_or_else(|| {
                    failure("the metadata server lists no RAM role: attach one to the instance, or set ALIBABA_CLOUD_ACCESS_KEY_ID")
                })?
                .to_string(),
        };
        let text = self
            .get_text(&format!("{base}{role}"), token.as_deref())
            .await?;
        let answer: RoleCredentials = serde_json::from_str(&text).map_err(|e| {
            failure(format!(
                "the metadata server's credentials of role {role} cannot be read: {e}"
            ))
        })?;
        if answer.code.as_deref().is_some_and(|c| c != "Success") {
            return Err(failure(format!(
                "the metadata server refused the credentials of role {role}: {}",
                answer.code.unwrap_or_default()
            )));
        }
        Ok((
            Credentials {
                access_key_id: answer.access_key_id,
                access_key_secret: answer.access_key_secret,
                security_token: Some(answer.security_token),
            },
            answer.expiration,
        ))
    }

    /// The credentials of `role` from STS, assumed with the token its file holds now, and when
    /// they expire: the request the official SDKs make (GET, in the query, no signature).
    async fn assume(&self, role: &OidcRole) -> Result<(Credentials, DateTime<Utc>), CloudError> {
        let token = tokio::fs::read_to_string(&role.token_file)
            .await
            .map_err(|e| {
                oidc_failure(format!(
                    "the OIDC token file {} cannot be read ({e}): is the pod's service account set up for RRSA?",
                    role.token_file.display()
                ))
            })?;
        let timestamp = chrono::Utc::now().format("%Y-%m-%dT%H:%M:%SZ").to_string();
        let url = reqwest::Url::parse_with_params(
            &format!("{}/", role.sts.trim_end_matches('/')),
            [
                ("Action", "AssumeRoleWithOIDC"),
                ("Format", "JSON"),
                ("Version", "2015-04-01"),
                ("DurationSeconds", OIDC_SESSION_SECONDS),
                ("RoleArn", role.role_arn.as_str()),
                ("OIDCProviderArn", role.provider_arn.as_str()),
                ("OIDCToken", token.trim()),
                ("RoleSessionName", role.session_name.as_str()),
                ("Timestamp", timestamp.as_str()),
            ],
        )
        .map_err(|e| oidc_failure(format!("STS's address {} is not a URL: {e}", role.sts)))?;
        let answer = self
            .http
            .get(url)
            .send()
            .await
            .map_err(|e| oidc_failure(format!("STS at {} cannot be reached: {e}", role.sts)))?;
        let status = answer.status();
        let text = answer
            .text()
            .await
            .map_err(|e| oidc_failure(format!("STS's answer was cut: {e}")))?;
        let assumed: AssumedRole = serde_json::from_str(&text).map_err(|e| {
            oidc_failure(format!(
                "STS answered {status} in a form ebb cannot read ({e})"
            ))
        })?;
        match (status.is_success(), assumed.credentials) {
            (true, Some(c)) => Ok((
                Credentials {
                    access_key_id: c.access_key_id,
                    access_key_secret: c.access_key_secret,
                    security_token: Some(c.security_token),
                },
                c.expiration,
            )),
            _ => Err(oidc_failure(format!(
                "STS refused to assume {} ({status} {}: {}): check the role's trust policy names the cluster's OIDC provider and this service account",
                role.role_arn,
                assumed.code.unwrap_or_default(),
                assumed.message.unwrap_or_default()
            ))),
        }
    }

    /// The metadata server's hardening token, when it gives one (it is optional unless the
    /// instance enforces it).
    async fn token(&self, metadata: &str) -> Option<String> {
        let url = format!("{}/latest/api/token", metadata.trim_end_matches('/'));
        let answer = self
            .http
            .put(url)
            .header("X-aliyun-ecs-metadata-token-ttl-seconds", TOKEN_TTL)
            .send()
            .await
            .ok()?;
        match answer.status().is_success() {
            true => answer.text().await.ok(),
            false => None,
        }
    }

    async fn get_text(&self, url: &str, token: Option<&str>) -> Result<String, CloudError> {
        let mut request = self.http.get(url);
        if let Some(t) = token {
            request = request.header("X-aliyun-ecs-metadata-token", t);
        }
        let answer = request
            .send()
            .await
            .map_err(|e| failure(format!("the metadata server cannot be reached: {e}")))?;
        let status = answer.status();
        let text = answer
            .text()
            .await
            .map_err(|e| failure(format!("the metadata server's answer was cut: {e}")))?;
        match status.is_success() {
            true => Ok(text),
            false => Err(failure(format!(
                "the metadata server answered {status} for {url}"
            ))),
        }
    }
}

fn failure(message: impl Into<String>) -> CloudError {
    CloudError::new(ErrorKind::Credentials, "GetRoleCredentials", message)
}

fn oidc_failure(message: impl Into<String>) -> CloudError {
    CloudError::new(ErrorKind::Credentials, "AssumeRoleWithOIDC", message)
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::routing::get;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    /// A metadata server whose role `ebb-role` credentials expire at 12:00, counting the
    /// credential fetches.
    async fn metadata() -> (String, Arc<AtomicUsize>) {
        let fetches = Arc::new(AtomicUsize::new(0));
        let counted = fetches.clone();
        let app = axum::Router::new()
            .route(
                "/latest/meta-data/ram/security-credentials/",
                get(|| async { "ebb-role\n" }),
            )
            .route(
                "/latest/meta-data/ram/security-credentials/ebb-role",
                get(move || {
                    let n = counted.fetch_add(1, Ordering::SeqCst);
                    async move {
                        serde_json::json!({
                            "AccessKeyId": format!("STS.key{n}"), "AccessKeySecret": "s",
                            "SecurityToken": "token", "Expiration": "2026-11-30T12:00:00Z",
                            "LastUpdated": "2026-11-30T06:00:00Z", "Code": "Success"
                        })
                        .to_string()
                    }
                }),
            );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        (url, fetches)
    }

    fn at(s: &str) -> DateTime<Utc> {
        s.parse().unwrap()
    }

    #[tokio::test]
    async fn a_roles_credentials_are_kept_until_shortly_before_they_expire() {
        let (url, fetches) = metadata().await;
        let keyring = Keyring::new(
            CredentialSource::RamRole {
                role: None,
                metadata: url,
            },
            reqwest::Client::new(),
        );
        let first = keyring.get(at("2026-11-30T08:00:00Z")).await.unwrap();
        assert_eq!(first.access_key_id, "STS.key0");
        assert_eq!(first.security_token.as_deref(), Some("token"));
        let later = keyring.get(at("2026-11-30T11:40:00Z")).await.unwrap();
        assert_eq!(later, first, "kept while more than 10 minutes are left");
        assert_eq!(fetches.load(Ordering::SeqCst), 1);
        let renewed = keyring.get(at("2026-11-30T11:55:00Z")).await.unwrap();
        assert_eq!(
            renewed.access_key_id, "STS.key1",
            "fetched again before expiry"
        );
    }

    /// STS for RRSA: the credentials it issues expire at 12:00; it keeps the tokens it was
    /// asked with.
    async fn sts() -> (String, Arc<std::sync::Mutex<Vec<String>>>) {
        let tokens = Arc::new(std::sync::Mutex::new(Vec::new()));
        let asked = tokens.clone();
        let app = axum::Router::new().route(
            "/",
            get(
                move |axum::extract::Query(q): axum::extract::Query<
                    std::collections::BTreeMap<String, String>,
                >| {
                    let mut asked = asked.lock().unwrap();
                    asked.push(q["OIDCToken"].clone());
                    let n = asked.len();
                    async move {
                        serde_json::json!({"RequestId": "r", "Credentials": {
                            "AccessKeyId": format!("STS.oidc{n}"), "AccessKeySecret": "s",
                            "SecurityToken": "token", "Expiration": "2026-11-30T12:00:00Z"}})
                        .to_string()
                    }
                },
            ),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        (url, tokens)
    }

    #[tokio::test]
    async fn a_service_accounts_role_is_assumed_again_before_expiry_with_the_token_then_mounted() {
        let (url, tokens) = sts().await;
        let dir = tempfile::tempdir().unwrap();
        let token_file = dir.path().join("token");
        std::fs::write(&token_file, "token-a\n").unwrap();
        let keyring = Keyring::new(
            CredentialSource::Oidc(OidcRole {
                role_arn: "acs:ram::1:role/ebb".into(),
                provider_arn: "acs:ram::1:oidc-provider/ack".into(),
                token_file: token_file.clone(),
                session_name: "ebb".into(),
                sts: url,
            }),
            reqwest::Client::new(),
        );
        let first = keyring.get(at("2026-11-30T08:00:00Z")).await.unwrap();
        assert_eq!(first.access_key_id, "STS.oidc1");
        // The cluster rotates the token; the role's credentials are kept while they last.
        std::fs::write(&token_file, "token-b").unwrap();
        let kept = keyring.get(at("2026-11-30T11:40:00Z")).await.unwrap();
        assert_eq!(kept, first);
        let renewed = keyring.get(at("2026-11-30T11:55:00Z")).await.unwrap();
        assert_eq!(renewed.access_key_id, "STS.oidc2");
        assert_eq!(*tokens.lock().unwrap(), ["token-a", "token-b"]);
    }

    #[tokio::test]
    async fn no_role_and_no_metadata_server_is_a_credentials_error() {
        let keyring = Keyring::new(
            CredentialSource::RamRole {
                role: Some("ebb-role".into()),
                // Nothing listens on the discard port.
                metadata: "http://127.0.0.1:9".into(),
            },
            reqwest::Client::new(),
        );
        let error = keyring.get(at("2026-11-30T08:00:00Z")).await.unwrap_err();
        assert_eq!(error.kind, ErrorKind::Credentials);
        assert!(
            error.message.contains("metadata server"),
            "{}",
            error.message
        );
    }
}
