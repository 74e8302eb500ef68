//! Cloud errors, sorted into the kinds the reconciler treats differently.

use crate::fleet::Cloud;
use std::fmt;

/// What kind of failure a cloud error is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorKind {
    /// The API kept throttling after every retry.
    Throttled,
    /// The credentials are missing, invalid or expired.
    Credentials,
    /// The credentials are valid but not allowed this call (or this instance).
    AccessDenied,
    /// EC2 has no capacity for the instance type in its zone right now.
    InsufficientCapacity,
    /// The instance does not exist.
    NotFound,
    /// The instance is in a state that does not allow the call.
    InvalidState,
    /// The instance cannot hibernate.
    HibernationUnsupported,
    /// The service could not be reached, and nothing was sent: the call was not carried out.
    Unavailable,
    /// The request may have reached the service, but no answer says what became of it: a
    /// timeout once it was sent, a connection lost after sending, an answer that could not be
    /// read, or a 5xx. The call may have been carried out: its outcome is unknown until the
    /// instance's state tells (`reconcile/resolve.rs`), never `failed` at once.
    Unanswered,
    /// Anything else the service refused.
    Other,
}

impl ErrorKind {
    /// Sorts an AWS error code.
    pub fn from_code(code: &str) -> ErrorKind {
        match code {
            "RequestLimitExceeded" | "Throttling" | "ThrottlingException" => ErrorKind::Throttled,
            "AuthFailure"
            | "InvalidClientTokenId"
            | "ExpiredToken"
            | "ExpiredTokenException"
            | "SignatureDoesNotMatch"
            | "UnrecognizedClientException"
            | "MissingAuthenticationToken" => ErrorKind::Credentials,
            "UnauthorizedOperation" | "AccessDenied" | "AccessDeniedException" => {
                ErrorKind::AccessDenied
            }
            "InsufficientInstanceCapacity" | "InsufficientHostCapacity" => {
                ErrorKind::InsufficientCapacity
            }
            "IncorrectInstanceState" | "IncorrectState" | "IncorrectSpotRequestState" => {
                ErrorKind::InvalidState
            }
            "UnsupportedHibernationConfiguration" => ErrorKind::HibernationUnsupported,
            // The service failed while handling the call: it may have carried it out.
            "InternalError" | "InternalFailure" | "ServiceUnavailable" | "Unavailable" => {
                ErrorKind::Unanswered
            }
            c if c.starts_with("InvalidInstanceID") => ErrorKind::NotFound,
            _ => ErrorKind::Other,
        }
    }

    /// Whether the error is about the call as a whole, so that retrying part of a batch
    /// cannot help (and would only add load).
    pub fn is_whole_call(self) -> bool {
        matches!(
            self,
            ErrorKind::Throttled
                | ErrorKind::Credentials
                | ErrorKind::Unavailable
                | ErrorKind::Unanswered
        )
    }

    /// Whether the call may have been carried out despite the error: only an answer that
    /// proves otherwise (a refusal, a connection never made) makes it `failed`.
    pub fn may_have_landed(self) -> bool {
        self == ErrorKind::Unanswered
    }

    /// Its stable name, which begins every stored error ([`CloudError::stored`]).
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorKind::Throttled => "throttled",
            ErrorKind::Credentials => "credentials",
            ErrorKind::AccessDenied => "access_denied",
            ErrorKind::InsufficientCapacity => "insufficient_capacity",
            ErrorKind::NotFound => "not_found",
            ErrorKind::InvalidState => "invalid_state",
            ErrorKind::HibernationUnsupported => "hibernation_unsupported",
            ErrorKind::Unavailable => "unavailable",
            ErrorKind::Unanswered => "unanswered",
            ErrorKind::Other => "other",
        }
    }
}

/// A failed cloud call: the operation, the AWS error code and message, and the request id.
#[derive(Debug, Clone, PartialEq)]
pub struct CloudError {
    /// What kind of failure it is.
    pub kind: ErrorKind,
    /// The API operation (`StopInstances`).
    pub operation: &'static str,
    /// The AWS error code, when the service sent one.
    pub code: Option<String>,
    /// The service's message, or what went wrong on the way.
    pub message: String,
    /// The request id, when the service answered.
    pub request_id: Option<String>,
    /// The cloud whose API the call went to, so that a hint names its credentials, its
    /// permissions and its endpoint setting; `None` where no cloud's API made it (the simulated
    /// fleet, a Prometheus server), which gets hints that name no cloud.
    pub cloud: Option<Cloud>,
}

impl CloudError {
    /// An error of `kind` from `operation` that no service sent (no code, no request id): what
    /// went wrong on the way, or a call refused before it was made.
    pub fn new(kind: ErrorKind, operation: &'static str, message: impl Into<String>) -> Self {
        CloudError {
            kind,
            operation,
            code: None,
            message: message.into(),
            request_id: None,
            cloud: None,
        }
    }

    /// The same error, as one `cloud`'s API gave it.
    pub fn from_cloud(self, cloud: Cloud) -> Self {
        CloudError {
            cloud: Some(cloud),
            ..self
        }
    }

    /// [`CloudError::new`] of [`ErrorKind::Other`].
    pub fn other(operation: &'static str, message: impl Into<String>) -> Self {
        CloudError::new(ErrorKind::Other, operation, message)
    }

    /// An error of `kind` the service answered `operation` with: its `code` and `message`.
    pub fn coded(
        kind: ErrorKind,
        operation: &'static str,
        code: &str,
        message: impl Into<String>,
    ) -> Self {
        CloudError {
            code: Some(code.to_string()),
            ..CloudError::new(kind, operation, message)
        }
    }

    /// EC2's `RequestLimitExceeded`: the API throttles.
    pub fn throttled(operation: &'static str) -> Self {
        let message = "Request limit exceeded.";
        CloudError::coded(
            ErrorKind::Throttled,
            operation,
            "RequestLimitExceeded",
            message,
        )
    }

    /// EC2's `UnauthorizedOperation`: the credentials may not make the call.
    pub fn denied(operation: &'static str) -> Self {
        let message = "You are not authorized to perform this operation.";
        let code = "UnauthorizedOperation";
        CloudError::coded(ErrorKind::AccessDenied, operation, code, message)
    }

    /// EC2's `InsufficientInstanceCapacity`: no capacity for the type in the zone now.
    pub fn no_capacity(operation: &'static str) -> Self {
        let message = "There is no capacity available that matches your request.";
        let code = "InsufficientInstanceCapacity";
        CloudError::coded(ErrorKind::InsufficientCapacity, operation, code, message)
    }

    /// A resource EC2 does not know, with EC2's `code` (`InvalidSnapshot.NotFound`).
    pub fn not_found(operation: &'static str, code: &str, message: impl Into<String>) -> Self {
        CloudError::coded(ErrorKind::NotFound, operation, code, message)
    }

    /// A call whose reply did not arrive in time (it may have been carried out).
    pub fn timed_out(operation: &'static str) -> Self {
        let message = "the reply did not arrive in time";
        CloudError::coded(ErrorKind::Unanswered, operation, "RequestTimeout", message)
    }

    /// What the ids of a call's later batches, never sent, are failed with once this error
    /// ended the call: a lost answer for one batch says nothing of the batches after it.
    pub fn for_unsent(&self) -> CloudError {
        if !self.kind.may_have_landed() {
            return self.clone();
        }
        let message = format!("not sent, after an earlier batch got no answer ({self})");
        CloudError::new(ErrorKind::Unavailable, self.operation, message)
    }

    /// What ebb stores of it (audit rows, migrations, notices): its kind's stable code, then
    /// the summary, in which the service's message has every secret-looking word hidden
    /// ([`crate::cloud::redact_secrets`]): `access_denied: StopInstances failed: ...`.
    pub fn stored(&self) -> String {
        format!("{}: {self}", self.kind.as_str())
    }

    /// The same error, with the request id of the call that failed.
    pub fn with_request_id(self, request_id: impl Into<String>) -> Self {
        CloudError {
            request_id: Some(request_id.into()),
            ..self
        }
    }
}

impl fmt::Display for CloudError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} failed", self.operation)?;
        if let Some(code) = &self.code {
            write!(f, ": {code}")?;
        }
        if !self.message.is_empty() {
            // A service's message may quote an ARN with its account, a signed URL or a key:
            // never shown as it came.
            write!(f, ": {}", super::redact_secrets(&self.message))?;
        }
        if let Some(id) = &self.request_id {
            write!(f, " (request id {id})")?;
        }
        let hints = Hints::of(self.cloud);
        match self.kind {
            ErrorKind::Credentials => write!(f, "; check the {} ebb runs with", hints.credentials),
            ErrorKind::AccessDenied => write!(
                f,
                "; {} needs the permissions in {}, and changes are allowed only on instances \
                 carrying the management tag",
                hints.role, hints.permissions
            ),
            ErrorKind::Unavailable => {
                write!(
                    f,
                    "; check the network and {}, ebb will try again",
                    hints.endpoint
                )
            }
            ErrorKind::Unanswered => write!(
                f,
                "; the answer was lost (check the network and {}): a change it asked for may \
                 have been carried out, and is resolved from the instance's state at a later tick",
                hints.endpoint
            ),
            _ => Ok(()),
        }
    }
}

/// What a user checks when one cloud's calls fail: where ebb's credentials come from, who needs
/// which permissions, and the setting that points ebb at the API.
struct Hints {
    credentials: &'static str,
    role: &'static str,
    permissions: &'static str,
    endpoint: &'static str,
}

impl Hints {
    fn of(cloud: Option<Cloud>) -> Hints {
        match cloud {
            Some(Cloud::Aws) => Hints {
                credentials: "AWS credentials (environment, profile, or role)",
                role: "ebb's IAM role",
                permissions: "deploy/iam-policy.json",
                endpoint: "AWS_ENDPOINT_URL",
            },
            Some(Cloud::Alibaba) => Hints {
                credentials: "Alibaba Cloud credentials (ALIBABA_CLOUD_ACCESS_KEY_ID and \
                              ALIBABA_CLOUD_ACCESS_KEY_SECRET, or the instance's RAM role)",
                role: "ebb's RAM role",
                permissions: "docs/alibaba.md",
                endpoint: "EBB_ALIBABA_ENDPOINT",
            },
            Some(Cloud::Tencent) => Hints {
                credentials: "Tencent Cloud credentials (TENCENTCLOUD_SECRET_ID and \
                              TENCENTCLOUD_SECRET_KEY, or the instance's CAM role)",
                role: "ebb's CAM role",
                permissions: "docs/tencent.md",
                endpoint: "EBB_TENCENT_ENDPOINT",
            },
            None => Hints {
                credentials: "cloud credentials",
                role: "ebb's role",
                permissions: "the cloud's page in docs/",
                endpoint: "the cloud's endpoint",
            },
        }
    }
}

impl std::error::Error for CloudError {}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each cloud's hints name its own credentials, permissions and endpoint, and no other
    /// cloud's: an Alibaba user is not sent to check AWS credentials.
    #[test]
    fn hints_name_the_cloud_the_error_came_from() {
        let alibaba = ["Alibaba", "ALIBABA", "RAM"];
        let tencent = ["Tencent", "TENCENT", "CAM"];
        let aws = ["AWS", "IAM"];
        let rows = [
            (
                Some(Cloud::Aws),
                ["AWS credentials", "iam-policy.json", "AWS_ENDPOINT_URL"],
                [alibaba, tencent].concat(),
            ),
            (
                Some(Cloud::Alibaba),
                [
                    "ALIBABA_CLOUD_ACCESS_KEY_ID",
                    "docs/alibaba.md",
                    "EBB_ALIBABA_ENDPOINT",
                ],
                [aws.as_slice(), &tencent].concat(),
            ),
            (
                Some(Cloud::Tencent),
                [
                    "TENCENTCLOUD_SECRET_ID",
                    "docs/tencent.md",
                    "EBB_TENCENT_ENDPOINT",
                ],
                [aws.as_slice(), &alibaba].concat(),
            ),
            (
                None,
                ["cloud credentials", "docs/", "the cloud's endpoint"],
                [aws.as_slice(), &alibaba, &tencent].concat(),
            ),
        ];
        let kinds = [
            ErrorKind::Credentials,
            ErrorKind::AccessDenied,
            ErrorKind::Unavailable,
        ];
        for (cloud, hints, foreign) in rows {
            for (kind, hint) in kinds.into_iter().zip(hints) {
                let mut error = CloudError::new(kind, "StopInstances", "refused");
                error.cloud = cloud;
                let shown = error.to_string();
                assert!(shown.contains(hint), "{cloud:?}: {shown}");
                for word in &foreign {
                    assert!(!shown.contains(word), "{cloud:?} names {word}: {shown}");
                }
            }
        }
    }

    #[test]
    fn codes_sort_into_kinds() {
        assert_eq!(
            ErrorKind::from_code("RequestLimitExceeded"),
            ErrorKind::Throttled
        );
        assert_eq!(
            ErrorKind::from_code("InvalidInstanceID.Malformed"),
            ErrorKind::NotFound
        );
        assert_eq!(
            ErrorKind::from_code("InsufficientInstanceCapacity"),
            ErrorKind::InsufficientCapacity
        );
        assert_eq!(
            ErrorKind::from_code("UnauthorizedOperation"),
            ErrorKind::AccessDenied
        );
        assert!(ErrorKind::from_code("AuthFailure").is_whole_call());
        assert!(!ErrorKind::from_code("UnauthorizedOperation").is_whole_call());
    }

    #[test]
    fn access_denied_says_what_to_do() {
        let e = CloudError::denied("StopInstances")
            .with_request_id("req-1")
            .from_cloud(Cloud::Aws);
        let text = e.to_string();
        assert!(text.starts_with("StopInstances failed: UnauthorizedOperation: You are not"));
        assert!(text.contains("(request id req-1)"));
        assert!(text.contains("deploy/iam-policy.json"));
    }
}
