//! A small typed client of Tencent Cloud API 3.0 over reqwest: a JSON body POSTed to
//! `https://SERVICE.tencentcloudapi.com/` with the action, version, region and timestamp in
//! `X-TC-*` headers, signed with TC3-HMAC-SHA256 (`sign.rs`). Every answer is
//! `{"Response": {...}}`, its `Error` (`Code`, `Message`) when the call failed, and always its
//! `RequestId`.
//!
//! What an error proves of the call, as `crates/ebb-cloud/src/cloud/aws/errors.rs` sorts AWS's: an answer that
//! refuses it (a code) was not carried out; a connection never made was not sent; anything else
//! once the request may have left (a timeout, a lost connection, a 5xx, an answer that could not
//! be read, an `InternalError`) is [`ErrorKind::Unanswered`], resolved later from the real
//! state. A call is never made again by the client: the pacer makes a throttled one again,
//! which Tencent refused before doing anything.

use super::credentials::Source;
use super::sign::{Signed, CONTENT_TYPE};
use crate::cloud::{CloudError, ErrorKind};
use crate::fleet::Cloud;
use serde::de::DeserializeOwned;
use serde::Deserialize;
use serde_json::Value;
use std::time::Duration;

/// A service of Tencent Cloud API 3.0: its host's first label and its API version.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Service {
    /// The first label of its host, also the credential scope's service (`cvm`).
    pub name: &'static str,
    /// `X-TC-Version`.
    pub version: &'static str,
}

/// Cloud Virtual Machine.
pub(super) const CVM: Service = Service {
    name: "cvm",
    version: "2017-03-12",
};
/// The Tag service, whose TagResources and UnTagResources tag any resource by its six-segment
/// name.
pub(super) const TAG: Service = Service {
    name: "tag",
    version: "2018-08-13",
};
/// Cloud Monitor.
pub(super) const MONITOR: Service = Service {
    name: "monitor",
    version: "2018-07-24",
};
/// Security Token Service, for the account (`GetCallerIdentity`) the six-segment names need.
pub(super) const STS: Service = Service {
    name: "sts",
    version: "2018-08-13",
};

/// How long a call may take: opening the connection, and the whole call.
pub(super) const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// The whole call, from sending the request to the end of the answer.
pub(super) const CALL_TIMEOUT: Duration = Duration::from_secs(30);

/// An answer: its body, and the request id for the audit log.
#[derive(Debug)]
pub(super) struct Answer<T> {
    /// The `Response` object, typed.
    pub body: T,
    /// Its `RequestId`.
    pub request_id: Option<String>,
}

/// The client: one HTTP client, the endpoint, the keys.
#[derive(Debug)]
pub(super) struct Client {
    http: reqwest::Client,
    /// Where every service is asked instead of its own host (`EBB_TENCENT_ENDPOINT`).
    endpoint: Option<reqwest::Url>,
    keys: Source,
}

/// An answer's envelope.
#[derive(Deserialize)]
struct Envelope {
    #[serde(rename = "Response")]
    response: Value,
}

/// A refusal in an answer.
#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct Refusal {
    code: String,
    #[serde(default)]
    message: String,
}

impl Client {
    /// A client of `endpoint` (every service there), or of each service's own host, with keys
    /// from `keys`.
    pub(super) fn new(endpoint: Option<reqwest::Url>, keys: Source) -> Result<Client, CloudError> {
        let http = reqwest::Client::builder()
            .connect_timeout(CONNECT_TIMEOUT)
            .timeout(CALL_TIMEOUT)
            .build()
            .map_err(|e| CloudError::other("configuration", e.to_string()))?;
        Ok(Client {
            http,
            endpoint,
            keys,
        })
    }

    /// Calls `action` of `service` in `region` (`None` for the global services) with `body`.
    pub(super) async fn call<T: DeserializeOwned>(
        &self,
        service: Service,
        action: &'static str,
        region: Option<&str>,
        body: &Value,
    ) -> Result<Answer<T>, CloudError> {
        self.send(service, action, region, body)
            .await
            .map_err(|e| e.from_cloud(Cloud::Tencent))
    }

    async fn send<T: DeserializeOwned>(
        &self,
        service: Service,
        action: &'static str,
        region: Option<&str>,
        body: &Value,
    ) -> Result<Answer<T>, CloudError> {
        let url = match &self.endpoint {
            Some(url) => url.clone(),
            None => format!("https://{}.tencentcloudapi.com/", service.name)
                .parse()
                .map_err(|e| CloudError::other(action, format!("bad endpoint: {e}")))?,
        };
        let host = match (url.host_str(), url.port()) {
            (Some(host), Some(port)) => format!("{host}:{port}"),
            (Some(host), None) => host.to_string(),
            (None, _) => return Err(CloudError::other(action, "the endpoint has no host")),
        };
        let now = chrono::Utc::now().timestamp();
        let keys = self.keys.keys(now).await?;
        let text = body.to_string();
        let authorization = Signed {
            secret_id: &keys.id,
            secret_key: &keys.key,
            service: service.name,
            host: &host,
            timestamp: now,
            body: &text,
        }
        .authorization();
        let mut request = self
            .http
            .post(url)
            .header("Authorization", authorization)
            .header("Content-Type", CONTENT_TYPE)
            .header("Host", &host)
            .header("X-TC-Action", action)
            .header("X-TC-Version", service.version)
            .header("X-TC-Timestamp", now.to_string());
        if let Some(region) = region {
            request = request.header("X-TC-Region", region);
        }
        if let Some(token) = &keys.token {
            request = request.header("X-TC-Token", token);
        }
        let answer = request
            .body(text)
            .send()
            .await
            .map_err(|e| transport_error(action, &e))?;
        let status = answer.status().as_u16();
        let text = answer
            .text()
            .await
            .map_err(|e| transport_error(action, &e))?;
        read_answer(action, status, &text)
    }
}

/// What a failure of the HTTP client proves: a connection never made (refused, unreachable,
/// timed out while connecting) was not sent; a request the client would not build was not
/// either; anything after may have been carried out.
fn transport_error(action: &'static str, err: &reqwest::Error) -> CloudError {
    let kind = if err.is_connect() {
        ErrorKind::Unavailable
    } else if err.is_builder() {
        ErrorKind::Other
    } else {
        ErrorKind::Unanswered
    };
    let mut message = err.to_string();
    let mut source = std::error::Error::source(err);
    while let Some(cause) = source {
        message.push_str(&format!(": {cause}"));
        source = cause.source();
    }
    CloudError::new(kind, action, message)
}

/// An answer of HTTP `status` with body `text`, as its typed `Response` or the error it says.
pub(super) fn read_answer<T: DeserializeOwned>(
    action: &'static str,
    status: u16,
    text: &str,
) -> Result<Answer<T>, CloudError> {
    let unreadable = |why: String| {
        // A 5xx or an answer that says nothing readable: the call may have been carried out.
        CloudError::new(
            ErrorKind::Unanswered,
            action,
            format!("HTTP {status}, an answer that could not be read ({why})"),
        )
    };
    let envelope: Envelope = serde_json::from_str(text).map_err(|e| unreadable(e.to_string()))?;
    let request_id = envelope
        .response
        .get("RequestId")
        .and_then(Value::as_str)
        .map(str::to_string);
    if let Some(error) = envelope.response.get("Error") {
        let refusal: Refusal =
            serde_json::from_value(error.clone()).map_err(|e| unreadable(e.to_string()))?;
        let mut error = CloudError::coded(
            kind_of(&refusal.code),
            action,
            &refusal.code,
            refusal.message,
        );
        error.request_id = request_id;
        return Err(error);
    }
    if status >= 500 {
        return Err(unreadable("no error in it".to_string()));
    }
    let body = serde_json::from_value(envelope.response).map_err(|e| unreadable(e.to_string()))?;
    Ok(Answer { body, request_id })
}

/// Sorts a Tencent Cloud error code into what it proves of the call.
pub(super) fn kind_of(code: &str) -> ErrorKind {
    let family = code.split('.').next().unwrap_or(code);
    match (family, code) {
        ("RequestLimitExceeded", _) => ErrorKind::Throttled,
        (_, "AuthFailure.UnauthorizedOperation") | ("UnauthorizedOperation", _) => {
            ErrorKind::AccessDenied
        }
        ("AuthFailure", _) => ErrorKind::Credentials,
        ("ResourceInsufficient" | "ResourcesSoldOut", _) => ErrorKind::InsufficientCapacity,
        (_, "InvalidInstanceId.NotFound") | ("ResourceNotFound", _) => ErrorKind::NotFound,
        (_, "OperationDenied.InstanceOperationInProgress") => ErrorKind::InvalidState,
        (_, c) if c.starts_with("UnsupportedOperation.InstanceState") => ErrorKind::InvalidState,
        // The service failed while handling the call: it may have carried it out.
        ("InternalError" | "InternalServerError" | "ServiceUnavailable", _) => {
            ErrorKind::Unanswered
        }
        _ => ErrorKind::Other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, Deserialize)]
    #[serde(rename_all = "PascalCase")]
    struct Count {
        total_count: u32,
    }

    fn answer(status: u16, text: &str) -> Result<Answer<Count>, CloudError> {
        read_answer("StopInstances", status, text)
    }

    #[test]
    fn an_answer_is_read_with_its_request_id() {
        let ok = answer(200, r#"{"Response":{"TotalCount":3,"RequestId":"r-1"}}"#).unwrap();
        assert_eq!(ok.body.total_count, 3);
        assert_eq!(ok.request_id.as_deref(), Some("r-1"));
    }

    #[test]
    fn a_refusal_is_not_carried_out() {
        for (code, kind) in [
            ("RequestLimitExceeded", ErrorKind::Throttled),
            (
                "RequestLimitExceeded.UinLimitExceeded",
                ErrorKind::Throttled,
            ),
            ("AuthFailure.SignatureFailure", ErrorKind::Credentials),
            ("AuthFailure.UnauthorizedOperation", ErrorKind::AccessDenied),
            ("UnauthorizedOperation", ErrorKind::AccessDenied),
            ("InvalidInstanceId.NotFound", ErrorKind::NotFound),
            (
                "UnsupportedOperation.InstanceStateStopped",
                ErrorKind::InvalidState,
            ),
            (
                "UnsupportedOperation.StoppedModeStopCharging",
                ErrorKind::Other,
            ),
            (
                "ResourceInsufficient.SpecifiedInstanceType",
                ErrorKind::InsufficientCapacity,
            ),
        ] {
            let text = format!(
                r#"{{"Response":{{"Error":{{"Code":"{code}","Message":"no"}},"RequestId":"r-2"}}}}"#
            );
            let error = answer(200, &text).unwrap_err();
            assert_eq!(error.kind, kind, "{code}");
            assert!(!error.kind.may_have_landed(), "{code}");
            assert_eq!(error.code.as_deref(), Some(code));
            assert_eq!(error.request_id.as_deref(), Some("r-2"));
        }
    }

    #[test]
    fn a_5xx_or_an_unreadable_answer_may_have_been_carried_out() {
        let internal = r#"{"Response":{"Error":{"Code":"InternalError","Message":"x"}}}"#;
        for (status, text) in [
            (502, "<html>bad gateway</html>"),
            (200, "{"),
            (200, internal),
        ] {
            let error = answer(status, text).unwrap_err();
            assert_eq!(error.kind, ErrorKind::Unanswered, "{status} {text}");
            assert!(error.kind.may_have_landed());
        }
    }

    /// A connection refused at a port nobody listens on: reqwest's own error for it.
    #[tokio::test]
    async fn a_connection_never_made_was_not_carried_out() {
        let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let endpoint = format!("http://{}/", closed.local_addr().unwrap());
        drop(closed);
        let keys = Source::new(
            Some(super::super::Keys::fixed("AKID", "secret")),
            None,
            None,
        );
        let client = Client::new(Some(endpoint.parse().unwrap()), keys).unwrap();
        let error = client
            .call::<Count>(CVM, "StopInstances", Some("ap-guangzhou"), &Value::Null)
            .await
            .unwrap_err();
        assert_eq!(error.kind, ErrorKind::Unavailable, "{error}");
        // The hint is Tencent Cloud's: its endpoint setting, no other cloud's.
        let shown = error.to_string();
        assert!(shown.contains("EBB_TENCENT_ENDPOINT"), "{shown}");
        assert!(!shown.contains("AWS"), "{shown}");
    }
}
