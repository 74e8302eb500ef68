//! Cloud errors, sorted into the kinds the reconciler treats differently.

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
    /// The service failed (5xx) or could not be reached, after every retry.
    Unavailable,
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
            "InternalError" | "InternalFailure" | "ServiceUnavailable" | "Unavailable" => {
                ErrorKind::Unavailable
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
            ErrorKind::Throttled | ErrorKind::Credentials | ErrorKind::Unavailable
        )
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
}

impl fmt::Display for CloudError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} failed", self.operation)?;
        if let Some(code) = &self.code {
            write!(f, ": {code}")?;
        }
        if !self.message.is_empty() {
            write!(f, ": {}", self.message)?;
        }
        if let Some(id) = &self.request_id {
            write!(f, " (request id {id})")?;
        }
        match self.kind {
            ErrorKind::Credentials => f.write_str(
                "; check the AWS credentials ebb runs with (environment, profile, or role)",
            ),
            ErrorKind::AccessDenied => f.write_str(
                "; ebb's role needs the permissions in deploy/iam-policy.json, and changes are \
                 allowed only on instances carrying the management tag",
            ),
            ErrorKind::Unavailable => {
                f.write_str("; check the network and AWS_ENDPOINT_URL, ebb will try again")
            }
            _ => Ok(()),
        }
    }
}

impl std::error::Error for CloudError {}

#[cfg(test)]
mod tests {
    use super::*;

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
        let e = CloudError {
            kind: ErrorKind::AccessDenied,
            operation: "StopInstances",
            code: Some("UnauthorizedOperation".into()),
            message: "You are not authorized to perform this operation.".into(),
            request_id: Some("req-1".into()),
        };
        let text = e.to_string();
        assert!(text.starts_with("StopInstances failed: UnauthorizedOperation: You are not"));
        assert!(text.contains("(request id req-1)"));
        assert!(text.contains("deploy/iam-policy.json"));
    }
}
