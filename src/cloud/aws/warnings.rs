//! Spot interruption warnings, read from an SQS queue (`EBB_INTERRUPTION_QUEUE`).
//!
//! EC2 warns two minutes before it takes spot capacity back. An EventBridge rule on
//! `EC2 Spot Instance Interruption Warning` events sends the warnings to a queue, and ebb reads
//! them there, so a migration launches the next replacement at once instead of at the first
//! tick after the instance is gone.

use super::{cloud_error, Timeouts};
use crate::cloud::CloudError;
use aws_config::retry::RetryConfig;
use aws_config::BehaviorVersion;
use chrono::{DateTime, Utc};
use serde::Deserialize;

/// The EventBridge detail type of a warning.
const DETAIL_TYPE: &str = "EC2 Spot Instance Interruption Warning";
/// How long one receive call waits for messages (SQS long polling, at most 20 s).
const WAIT_SECONDS: i32 = 20;

/// One warning: EC2 will reclaim `instance` within two minutes of `at`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Warning {
    /// The instance.
    pub instance: String,
    /// When EC2 gave the warning.
    pub at: DateTime<Utc>,
}

/// An EventBridge event, as much of it as ebb reads.
#[derive(Deserialize)]
struct Event {
    #[serde(rename = "detail-type")]
    detail_type: String,
    time: DateTime<Utc>,
    detail: Detail,
}

#[derive(Deserialize)]
struct Detail {
    #[serde(rename = "instance-id")]
    instance_id: String,
}

/// The warning in an SQS message body, or `None` when it is not one.
pub fn parse(body: &str) -> Option<Warning> {
    let event: Event = serde_json::from_str(body).ok()?;
    (event.detail_type == DETAIL_TYPE).then_some(Warning {
        instance: event.detail.instance_id,
        at: event.time,
    })
}

/// What one receive call got: the warnings, and every message to delete once they are recorded.
#[derive(Debug, Default)]
pub struct Batch {
    /// The warnings among the messages.
    pub warnings: Vec<Warning>,
    /// The receipt handle of every message read, warnings or not.
    receipts: Vec<String>,
}

/// The queue EventBridge sends spot interruption warnings to.
#[derive(Debug, Clone)]
pub struct InterruptionQueue {
    sqs: aws_sdk_sqs::Client,
    url: String,
}

impl InterruptionQueue {
    /// The queue at `url`, with the standard AWS credential chain and ebb's default
    /// [`Timeouts`] (whose attempt timeout is above the long poll's 20 s).
    pub async fn connect(url: String) -> InterruptionQueue {
        let config = aws_config::defaults(BehaviorVersion::latest())
            .retry_config(RetryConfig::standard())
            .timeout_config(Timeouts::default().config())
            .load()
            .await;
        InterruptionQueue::new(aws_sdk_sqs::Client::new(&config), url)
    }

    /// The queue at `url`, through `sqs`.
    pub fn new(sqs: aws_sdk_sqs::Client, url: String) -> InterruptionQueue {
        InterruptionQueue { sqs, url }
    }

    /// Waits up to 20 s for messages and returns the warnings among them. The messages stay in
    /// the queue (hidden for its visibility timeout) until [`InterruptionQueue::delete`].
    pub async fn receive(&self) -> Result<Batch, CloudError> {
        let out = self
            .sqs
            .receive_message()
            .queue_url(&self.url)
            .max_number_of_messages(10)
            .wait_time_seconds(WAIT_SECONDS)
            .send()
            .await
            .map_err(|e| cloud_error("ReceiveMessage", e))?;
        let mut batch = Batch::default();
        for message in out.messages() {
            match message.body().and_then(parse) {
                Some(w) => batch.warnings.push(w),
                None => tracing::warn!(
                    queue = self.url,
                    "a message that is not a spot interruption warning is dropped: {}",
                    message.body().unwrap_or("")
                ),
            }
            batch
                .receipts
                .extend(message.receipt_handle().map(str::to_string));
        }
        Ok(batch)
    }

    /// Deletes the messages of `batch`, ones that are not warnings too: left in the queue, they
    /// would come back forever.
    pub async fn delete(&self, batch: Batch) -> Result<(), CloudError> {
        for handle in batch.receipts {
            self.sqs
                .delete_message()
                .queue_url(&self.url)
                .receipt_handle(handle)
                .send()
                .await
                .map_err(|e| cloud_error("DeleteMessage", e))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_warning_is_read_from_eventbridge_and_other_events_are_not() {
        // As EventBridge sends it (AWS documentation, "Spot Instance interruption notices").
        let body = r#"{
            "version": "0",
            "id": "12345678-1234-1234-1234-123456789012",
            "detail-type": "EC2 Spot Instance Interruption Warning",
            "source": "aws.ec2",
            "account": "123456789012",
            "time": "2026-11-30T12:00:00Z",
            "region": "us-east-1",
            "resources": ["arn:aws:ec2:us-east-1a:instance/i-1234567890abcdef0"],
            "detail": {"instance-id": "i-1234567890abcdef0", "instance-action": "terminate"}
        }"#;
        assert_eq!(
            parse(body),
            Some(Warning {
                instance: "i-1234567890abcdef0".into(),
                at: "2026-11-30T12:00:00Z".parse().unwrap(),
            })
        );
        let rebalance = body.replace(DETAIL_TYPE, "EC2 Instance Rebalance Recommendation");
        assert_eq!(parse(&rebalance), None);
        assert_eq!(parse("not json"), None);
    }
}
