//! One signed call to an Alibaba Cloud RPC API over reqwest, and what its failure proves: a
//! refusal (a coded 4xx) or a connection never made is `failed`; a timeout once the request may
//! have been sent, an answer cut or unreadable, or a 5xx, is [`ErrorKind::Unanswered`] (the call
//! may have been carried out: its outcome is resolved from the instances' state later).

use super::credentials::Keyring;
use super::sign::{self, Signed};
use crate::cloud::{CloudError, ErrorKind};
use crate::fleet::Cloud;
use chrono::{DateTime, Utc};
use serde_json::Value;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};

/// An Alibaba Cloud product ebb calls, with its API version.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Product {
    /// Elastic Compute Service.
    Ecs,
    /// CloudMonitor.
    Cms,
}

impl Product {
    /// The API version ebb speaks.
    pub(super) fn version(self) -> &'static str {
        match self {
            Product::Ecs => "2014-05-26",
            Product::Cms => "2019-01-01",
        }
    }

    /// Its endpoint in `region`.
    fn host(self, region: &str) -> String {
        match self {
            Product::Ecs => format!("ecs.{region}.aliyuncs.com"),
            Product::Cms => format!("metrics.{region}.aliyuncs.com"),
        }
    }
}

/// Signs and sends calls.
pub(super) struct Client {
    http: reqwest::Client,
    keyring: Keyring,
    /// Every product at this base URL instead of its endpoint (a test's fake).
    endpoint: Option<reqwest::Url>,
    /// Makes each call's nonce unique within the process, beside the time.
    nonces: AtomicU64,
}

impl Client {
    /// A client that signs with `keyring`'s credentials and sends with `http`.
    pub(super) fn new(
        http: reqwest::Client,
        keyring: Keyring,
        endpoint: Option<reqwest::Url>,
    ) -> Client {
        Client {
            http,
            keyring,
            endpoint,
            nonces: AtomicU64::new(0),
        }
    }

    /// Calls `action` of `product` in `region` with `params` (POST, the parameters in the
    /// query, an empty body), signed for `now`; the answer's JSON.
    pub(super) async fn call(
        &self,
        product: Product,
        region: &str,
        action: &'static str,
        params: &BTreeMap<String, String>,
        now: DateTime<Utc>,
    ) -> Result<Value, CloudError> {
        self.send(product, region, action, params, now)
            .await
            .map_err(|e| e.from_cloud(Cloud::Alibaba))
    }

    async fn send(
        &self,
        product: Product,
        region: &str,
        action: &'static str,
        params: &BTreeMap<String, String>,
        now: DateTime<Utc>,
    ) -> Result<Value, CloudError> {
        let credentials = self.keyring.get(now).await.map_err(|e| CloudError {
            operation: action,
            ..e
        })?;
        let (base, host) = match &self.endpoint {
            Some(url) => {
                let host = match url.port() {
                    Some(port) => format!("{}:{port}", url.host_str().unwrap_or_default()),
                    None => url.host_str().unwrap_or_default().to_string(),
                };
                (url.as_str().trim_end_matches('/').to_string(), host)
            }
            None => {
                let host = product.host(region);
                (format!("https://{host}"), host)
            }
        };
        let nonce = format!(
            "{:x}-{:x}-{}",
            now.timestamp_nanos_opt().unwrap_or_default(),
            self.nonces.fetch_add(1, Ordering::Relaxed),
            std::process::id()
        );
        let mut headers = vec![
            ("host".to_string(), host),
            ("x-acs-action".to_string(), action.to_string()),
            ("x-acs-version".to_string(), product.version().to_string()),
            (
                "x-acs-date".to_string(),
                now.format("%Y-%m-%dT%H:%M:%SZ").to_string(),
            ),
            ("x-acs-signature-nonce".to_string(), nonce),
            ("x-acs-content-sha256".to_string(), sign::sha256_hex(b"")),
        ];
        if let Some(token) = &credentials.security_token {
            headers.push(("x-acs-security-token".to_string(), token.clone()));
        }
        let payload_hash = sign::sha256_hex(b"");
        let authorization = sign::authorization(
            &Signed {
                method: "POST",
                path: "/",
                query: params,
                headers: &headers,
                payload_hash: &payload_hash,
            },
            &credentials.access_key_id,
            &credentials.access_key_secret,
        );
        let query = sign::canonical_query(params);
        let mut request = self.http.post(format!("{base}/?{query}"));
        for (name, value) in headers.iter().filter(|(n, _)| n != "host") {
            request = request.header(name, value);
        }
        let answer = request
            .header("authorization", authorization)
            .send()
            .await
            .map_err(|e| transport_error(action, &e))?;
        let status = answer.status();
        let text = answer.text().await.map_err(|e| {
            CloudError::new(
                ErrorKind::Unanswered,
                action,
                format!("the answer was cut: {}", one_line(&e)),
            )
        })?;
        let body: Value = serde_json::from_str(&text).map_err(|e| {
            let kind = match status.is_server_error() || status.is_success() {
                // A success or a failure that cannot be read: what became of it is unknown.
                true => ErrorKind::Unanswered,
                false => ErrorKind::Other,
            };
            CloudError::new(
                kind,
                action,
                format!("HTTP {status}, unreadable answer: {e}"),
            )
        })?;
        // CloudMonitor says `"Code": "200"` and `"Success": true` on success; ECS says nothing.
        let refused = match body.get("Code") {
            None => false,
            Some(Value::String(c)) => c != "200",
            Some(Value::Number(n)) => n.as_u64() != Some(200),
            Some(_) => true,
        };
        let failed = body.get("Success").and_then(Value::as_bool) == Some(false);
        if status.is_success() && !refused && !failed {
            return Ok(body);
        }
        let code = body.get("Code").and_then(Value::as_str).unwrap_or_default();
        let kind = match kind_of(code) {
            // A 5xx without a code that proves a refusal: the service may have done it.
            ErrorKind::Other if status.is_server_error() => ErrorKind::Unanswered,
            kind => kind,
        };
        Err(CloudError {
            kind,
            operation: action,
            code: (!code.is_empty()).then(|| code.to_string()),
            message: body
                .get("Message")
                .and_then(Value::as_str)
                .map_or_else(|| format!("HTTP {status}"), str::to_string),
            cloud: None,
            request_id: body
                .get("RequestId")
                .and_then(Value::as_str)
                .map(str::to_string),
        })
    }
}

/// What a transport error proves: nothing sent (a connection never made) is `Unavailable`;
/// anything after (a timeout, a connection lost) may have landed.
fn transport_error(action: &'static str, err: &reqwest::Error) -> CloudError {
    let kind = match err.is_connect() {
        true => ErrorKind::Unavailable,
        false => ErrorKind::Unanswered,
    };
    CloudError::new(kind, action, one_line(err))
}

/// An error and its causes on one line.
fn one_line(err: &dyn std::error::Error) -> String {
    let mut text = err.to_string();
    let mut source = err.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

/// Sorts an Alibaba Cloud error code (ECS and CloudMonitor's published codes).
pub(super) fn kind_of(code: &str) -> ErrorKind {
    match code {
        c if c.starts_with("Throttling") => ErrorKind::Throttled,
        "InvalidAccessKeyId.NotFound"
        | "InvalidAccessKeyId.Inactive"
        | "InvalidAccessKeyId"
        | "SignatureDoesNotMatch"
        | "IncompleteSignature"
        | "InvalidSecurityToken.Expired"
        | "InvalidSecurityToken.Malformed"
        | "InvalidSecurityToken.MismatchWithAccessKey"
        | "InvalidTimeStamp.Expired"
        | "SignatureNonceUsed" => ErrorKind::Credentials,
        c if c.starts_with("Forbidden") || c == "NoPermission" => ErrorKind::AccessDenied,
        "OperationDenied.NoStock" | "Zone.NotOnSale" | "OperationDenied.NoStockForInstanceType" => {
            ErrorKind::InsufficientCapacity
        }
        c if c.starts_with("IncorrectInstanceStatus") || c == "InstanceLockedForSecurity" => {
            ErrorKind::InvalidState
        }
        c if c.starts_with("InvalidInstanceId") => ErrorKind::NotFound,
        // The service failed while handling the call: it may have carried it out.
        "InternalError" | "ServiceUnavailable" | "UnknownError" => ErrorKind::Unanswered,
        _ => ErrorKind::Other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_sort_by_what_they_prove() {
        assert_eq!(kind_of("Throttling.User"), ErrorKind::Throttled);
        assert_eq!(kind_of("SignatureDoesNotMatch"), ErrorKind::Credentials);
        assert_eq!(kind_of("Forbidden.RAM"), ErrorKind::AccessDenied);
        assert_eq!(kind_of("IncorrectInstanceStatus"), ErrorKind::InvalidState);
        assert_eq!(kind_of("InvalidInstanceId.NotFound"), ErrorKind::NotFound);
        assert_eq!(
            kind_of("OperationDenied.NoStock"),
            ErrorKind::InsufficientCapacity
        );
        assert_eq!(kind_of("InternalError"), ErrorKind::Unanswered);
        assert_eq!(kind_of("InvalidParameter"), ErrorKind::Other);
    }
}
