//! What an AWS error says of the call it ended, in one place: refused or never sent (the call
//! was not carried out: `failed`), or possibly carried out with its answer lost
//! ([`ErrorKind::Unanswered`]: a timeout once the request was sent, a connection lost after
//! sending, an answer that could not be read, a 5xx). [`cloud_error`] sorts a call's last
//! error; [`once_sent`] makes the calls that change something stop retrying at the first attempt
//! that may have landed, so that every attempt before the last is proven not carried out and
//! the last error speaks for the whole call.

use crate::cloud::{CloudError, ErrorKind};
use crate::fleet::Cloud;
use aws_sdk_ec2::config::interceptors::InterceptorContext;
use aws_sdk_ec2::config::retry::{ClassifyRetry, RetryAction};
use aws_sdk_ec2::error::{ConnectorError, ProvideErrorMetadata, SdkError};
use aws_sdk_ec2::operation::RequestId;
use aws_smithy_runtime_api::client::retries::classifiers::{RetryClassifierPriority, RetryReason};
use aws_smithy_types::retry::ErrorKind as RetryKind;

/// Turns an SDK error into a [`CloudError`]: its AWS code, message and request id, and its kind
/// by what the error proves of the call.
pub(super) fn cloud_error<E>(operation: &'static str, err: SdkError<E>) -> CloudError
where
    E: ProvideErrorMetadata + RequestId + std::error::Error + Send + Sync + 'static,
{
    let request_id = err
        .as_service_error()
        .and_then(|e| e.request_id())
        .or_else(|| err.request_id())
        .map(str::to_string);
    if let SdkError::ServiceError(context) = &err {
        let code = context.err().code().map(str::to_string);
        let status = context.raw().status().as_u16();
        let kind = match code.as_deref().map(ErrorKind::from_code) {
            // A 5xx without a code that proves a refusal: the service may have done it.
            Some(ErrorKind::Other) | None if status >= 500 => ErrorKind::Unanswered,
            Some(kind) => kind,
            None => ErrorKind::Other,
        };
        return CloudError {
            kind,
            operation,
            message: context
                .err()
                .message()
                .map(str::to_string)
                .unwrap_or_else(|| format!("HTTP {status}")),
            code,
            request_id,
            cloud: Some(Cloud::Aws),
        };
    }
    let message = one_line(&err);
    let kind = match &err {
        // The credential chain fails inside the dispatch, before anything is sent.
        _ if message.contains("no credentials found") => ErrorKind::Credentials,
        SdkError::DispatchFailure(failure) => match failure.as_connector_error() {
            // A request the client would not send (a bad header, say): not a network matter.
            Some(connector) if connector.is_user() => ErrorKind::Other,
            Some(connector) if !was_sent(connector) => ErrorKind::Unavailable,
            _ => ErrorKind::Unanswered,
        },
        // The attempt's or the operation's time limit, with the request possibly sent; or an
        // answer that came but could not be read.
        SdkError::TimeoutError(_) | SdkError::ResponseError(_) => ErrorKind::Unanswered,
        _ => ErrorKind::Other,
    };
    CloudError {
        kind,
        operation,
        code: None,
        message,
        request_id,
        cloud: Some(Cloud::Aws),
    }
}

/// Whether a connector error may have come after the request left: anything but a request the
/// client refused to send and a connection never made (refused, unreachable, timed out while
/// connecting, a name that did not resolve).
fn was_sent(err: &ConnectorError) -> bool {
    if err.is_user() {
        return false;
    }
    let mut next: Option<&(dyn std::error::Error + 'static)> = Some(err);
    while let Some(e) = next {
        if e.downcast_ref::<hyper_util::client::legacy::Error>()
            .is_some_and(hyper_util::client::legacy::Error::is_connect)
        {
            return false;
        }
        next = e.source();
    }
    true
}

/// An error and its causes on one line, each said once (the SDK nests errors that repeat
/// their cause, and its credential errors span lines).
pub(super) fn one_line(err: &dyn std::error::Error) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut next = Some(err);
    while let Some(e) = next {
        let text = e
            .to_string()
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ");
        if !parts.iter().any(|p| p.contains(&text)) {
            parts.push(text);
        }
        next = e.source();
    }
    parts.join(": ")
}

/// The SDK's retry classifier for the calls that change something: an attempt that may have
/// been carried out is not made again. A throttle (which EC2 applies before doing anything)
/// and a connection never made are still retried; anything else that failed ends the call with
/// its error, which [`cloud_error`] then sorts as the whole call's.
#[derive(Debug)]
struct NotAgainOnceSent;

impl ClassifyRetry for NotAgainOnceSent {
    fn classify_retry(&self, ctx: &InterceptorContext) -> RetryAction {
        self.classify_retry_v2(ctx, &RetryAction::NoActionIndicated)
    }

    fn classify_retry_v2(&self, ctx: &InterceptorContext, previous: &RetryAction) -> RetryAction {
        let Some(Err(err)) = ctx.output_or_error() else {
            return RetryAction::NoActionIndicated;
        };
        // A retry the SDK wants stands only when the attempt proved it did nothing; with no
        // retry wanted there is nothing to overrule.
        let may_retry = match previous {
            RetryAction::RetryIndicated(reason) => {
                let throttled = matches!(
                    reason,
                    RetryReason::RetryableError {
                        kind: RetryKind::ThrottlingError,
                        ..
                    }
                );
                throttled || err.as_connector_error().is_some_and(|c| !was_sent(c))
            }
            _ => true,
        };
        if may_retry {
            RetryAction::NoActionIndicated
        } else {
            RetryAction::RetryForbidden
        }
    }

    fn name(&self) -> &'static str {
        "ebb: not again once sent"
    }

    fn priority(&self) -> RetryClassifierPriority {
        // After the SDK's own classifiers, to overrule their verdict.
        RetryClassifierPriority::run_after(RetryClassifierPriority::transient_error_classifier())
    }
}

/// The configuration a call that changes something is sent with (`.customize()
/// .config_override(once_sent())`): no attempt again once one may have been carried out.
pub(super) fn once_sent() -> aws_sdk_ec2::config::Builder {
    aws_sdk_ec2::config::Builder::default().retry_classifier(NotAgainOnceSent)
}

/// [`once_sent`] for the Auto Scaling client: a group's capacity change is not sent again once
/// it may have been carried out.
pub(super) fn group_change_once_sent() -> aws_sdk_autoscaling::config::Builder {
    aws_sdk_autoscaling::config::Builder::default().retry_classifier(NotAgainOnceSent)
}

/// [`once_sent`] for the EKS client: a node group's scaling change is not sent again once it
/// may have been carried out.
pub(super) fn node_group_change_once_sent() -> aws_sdk_eks::config::Builder {
    aws_sdk_eks::config::Builder::default().retry_classifier(NotAgainOnceSent)
}

#[cfg(test)]
mod tests {
    use super::*;
    use aws_sdk_ec2::config::http::HttpResponse;
    use aws_sdk_ec2::error::ErrorMetadata;
    use aws_sdk_ec2::operation::stop_instances::StopInstancesError;
    use aws_smithy_types::body::SdkBody;

    type Stop = SdkError<StopInstancesError, HttpResponse>;

    fn kind(err: Stop) -> ErrorKind {
        cloud_error("StopInstances", err).kind
    }

    fn answered(status: u16, code: &str) -> Stop {
        let meta = ErrorMetadata::builder()
            .code(code)
            .message("from EC2")
            .build();
        let raw = HttpResponse::new(status.try_into().unwrap(), SdkBody::from("<Response/>"));
        SdkError::service_error(StopInstancesError::generic(meta), raw)
    }

    fn boxed(text: &str) -> Box<dyn std::error::Error + Send + Sync> {
        text.into()
    }

    #[test]
    fn a_refusal_is_not_carried_out() {
        for (status, code, expected) in [
            (400, "IncorrectInstanceState", ErrorKind::InvalidState),
            (403, "UnauthorizedOperation", ErrorKind::AccessDenied),
            (400, "InvalidInstanceID.NotFound", ErrorKind::NotFound),
            (503, "RequestLimitExceeded", ErrorKind::Throttled),
            (
                500,
                "InsufficientInstanceCapacity",
                ErrorKind::InsufficientCapacity,
            ),
        ] {
            let found = kind(answered(status, code));
            assert_eq!(found, expected, "{status} {code}");
            assert!(!found.may_have_landed(), "{status} {code}");
        }
    }

    #[test]
    fn a_5xx_after_the_retries_may_have_been_carried_out() {
        for (status, code) in [(500, "InternalError"), (503, "Unavailable"), (502, "")] {
            let found = kind(answered(status, code));
            assert_eq!(found, ErrorKind::Unanswered, "{status} {code}");
            assert!(found.may_have_landed());
        }
    }

    #[test]
    fn a_timeout_may_have_been_carried_out() {
        assert_eq!(
            kind(SdkError::timeout_error(boxed("attempt timeout"))),
            ErrorKind::Unanswered
        );
        let read_timeout = ConnectorError::timeout(boxed("read timed out"));
        assert_eq!(
            kind(SdkError::dispatch_failure(read_timeout)),
            ErrorKind::Unanswered
        );
    }

    #[test]
    fn a_connection_lost_after_sending_may_have_been_carried_out() {
        let reset = ConnectorError::io(boxed("connection reset by peer"));
        assert_eq!(
            kind(SdkError::dispatch_failure(reset)),
            ErrorKind::Unanswered
        );
        let unread = SdkError::response_error(
            boxed("unexpected end of body"),
            HttpResponse::new(200.try_into().unwrap(), SdkBody::empty()),
        );
        assert_eq!(kind(unread), ErrorKind::Unanswered);
    }

    #[test]
    fn a_request_never_sent_was_not_carried_out() {
        let refused = ConnectorError::user(boxed("invalid request"));
        assert_eq!(kind(SdkError::dispatch_failure(refused)), ErrorKind::Other);
        let built = SdkError::construction_failure(boxed("missing field"));
        assert_eq!(kind(built), ErrorKind::Other);
    }

    /// A connection refused at a port nobody listens on: the SDK's own error for it.
    #[tokio::test]
    async fn a_connection_never_made_was_not_carried_out() {
        let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let endpoint = format!("http://{}", closed.local_addr().unwrap());
        drop(closed);
        let config = aws_sdk_ec2::Config::builder()
            .behavior_version(aws_sdk_ec2::config::BehaviorVersion::latest())
            .region(aws_sdk_ec2::config::Region::new("eu-west-1"))
            .credentials_provider(aws_sdk_ec2::config::Credentials::new(
                "AKID", "secret", None, None, "test",
            ))
            .endpoint_url(endpoint)
            .retry_config(aws_sdk_ec2::config::retry::RetryConfig::disabled())
            .build();
        let err = aws_sdk_ec2::Client::from_conf(config)
            .stop_instances()
            .instance_ids("i-0123456789abcdef0")
            .send()
            .await
            .unwrap_err();
        let error = cloud_error("StopInstances", err);
        assert_eq!(error.kind, ErrorKind::Unavailable, "{error}");
    }
}
