//! Alibaba Cloud credentials: an AccessKey given to ebb (with an STS token when temporary), or
//! the ECS instance's RAM role from the metadata server, fetched again before it expires. Held
//! in memory only: ebb writes them to no file.

use super::super::{CloudError, ErrorKind};
use chrono::{DateTime, Duration, Utc};
use serde::Deserialize;
use std::fmt;
use tokio::sync::Mutex;

/// How long before its expiry a role's credentials are fetched again (they are issued for
/// hours; Alibaba renews them on the metadata server well before).
const REFRESH_BEFORE: Duration = Duration::minutes(10);

/// The metadata server's hardening token lives this long (seconds).
const TOKEN_TTL: &str = "300";

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
}

impl fmt::Debug for CredentialSource {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        match self {
            CredentialSource::AccessKey(c) => write!(f, "AccessKey({})", c.access_key_id),
            CredentialSource::RamRole { role, metadata } => {
                write!(f, "RamRole({role:?} at {metadata})")
            }
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
        let (role, metadata) = match &self.source {
            CredentialSource::AccessKey(c) => return Ok(c.clone()),
            CredentialSource::RamRole { role, metadata } => (role, metadata),
        };
        let mut cached = self.cached.lock().await;
        if let Some((c, expires)) = &*cached {
            if now + REFRESH_BEFORE < *expires {
                return Ok(c.clone());
            }
        }
        let fresh = self.fetch(role.as_deref(), metadata).await;
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
