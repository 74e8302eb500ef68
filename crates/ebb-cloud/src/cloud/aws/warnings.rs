//! Spot interruption warnings and rebalance recommendations, read from an SQS queue
//! (`EBB_INTERRUPTION_QUEUE`).
//!
//! EC2 warns two minutes before it takes spot capacity back, and often recommends rebalancing
//! 10 to 20 minutes before that. An EventBridge rule on `EC2 Spot Instance Interruption
//! Warning` and `EC2 Instance Rebalance Recommendation` events sends both to a queue, and ebb
//! reads them there: a migration launches the next replacement at once instead of at the first
//! tick after the instance is gone, and both are kept in the pools' history (`ebb pools`).
//!
//! Anyone allowed to send to the queue could write a message that looks like a warning, so a
//! message counts only when it says it comes from EC2 (`source: aws.ec2`) in a watched region
//! and account; the store then keeps it only for an instance that is a live migration's
//! current replacement in that region.

use super::{cloud_error, Timeouts};
use crate::cloud::CloudError;
use aws_config::retry::RetryConfig;
use aws_config::BehaviorVersion;
use chrono::{DateTime, Utc};
use futures_util::FutureExt as _;
use serde::Deserialize;

/// The EventBridge detail type of a warning.
const DETAIL_TYPE: &str = "EC2 Spot Instance Interruption Warning";
/// The EventBridge detail type of a rebalance recommendation.
const REBALANCE_DETAIL_TYPE: &str = "EC2 Instance Rebalance Recommendation";
/// The EventBridge source of EC2's events.
const SOURCE: &str = "aws.ec2";
/// How long one receive call waits for messages (SQS long polling, at most 20 s).
const WAIT_SECONDS: i32 = 20;

/// What EC2 said of an instance.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Signal {
    /// It will reclaim the instance within two minutes.
    Interruption,
    /// The instance is at elevated risk of interruption (a rebalance recommendation).
    Rebalance,
}

/// One warning: EC2 will reclaim `instance` within two minutes of `at`, or (a rebalance
/// recommendation) it is at elevated risk of being reclaimed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Warning {
    /// The instance.
    pub instance: String,
    /// Its region.
    pub region: String,
    /// When EC2 gave the warning.
    pub at: DateTime<Utc>,
    /// An interruption warning or a rebalance recommendation.
    pub signal: Signal,
    /// The account the event came from.
    pub account: String,
}

/// An EventBridge event, as much of it as ebb reads.
#[derive(Deserialize)]
struct Event {
    #[serde(rename = "detail-type")]
    detail_type: String,
    source: String,
    account: String,
    region: String,
    time: DateTime<Utc>,
    detail: Detail,
}

/// The warnings ebb takes: from EC2, in the regions and accounts it watches.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Accepted {
    /// The watched regions.
    pub regions: Vec<String>,
    /// The watched accounts: the queue's own (EventBridge sends an account's events to a queue
    /// of that account) and those of the roles ebb assumes.
    pub accounts: Vec<String>,
}

impl Accepted {
    /// The warnings of `regions`, in the account of the queue at `queue_url` and those of
    /// `role_arns`.
    pub fn new(regions: Vec<String>, queue_url: &str, role_arns: &[String]) -> Accepted {
        // arn:aws:iam::ACCOUNT:role/NAME
        let role_accounts = role_arns.iter().filter_map(|arn| arn.split(':').nth(4));
        let accounts = queue_account(queue_url)
            .into_iter()
            .chain(role_accounts)
            .filter(|a| !a.is_empty())
            .map(str::to_string)
            .collect();
        Accepted { regions, accounts }
    }
}

/// The account of the queue at `url` (`https://sqs.REGION.amazonaws.com/ACCOUNT/NAME`).
fn queue_account(url: &str) -> Option<&str> {
    url.trim_end_matches('/').rsplit('/').nth(1)
}

#[derive(Deserialize)]
struct Detail {
    #[serde(rename = "instance-id")]
    instance_id: String,
}

/// The warning in an SQS message body, or why it is not one ebb takes.
pub fn parse(body: &str, accepted: &Accepted) -> Result<Warning, String> {
    let event: Event = serde_json::from_str(body)
        .map_err(|e| format!("not an EventBridge spot interruption warning ({e})"))?;
    let signal = match event.detail_type.as_str() {
        DETAIL_TYPE => Signal::Interruption,
        REBALANCE_DETAIL_TYPE => Signal::Rebalance,
        other => {
            return Err(format!(
                "detail-type \"{other}\" is neither a spot interruption warning nor a rebalance recommendation"
            ))
        }
    };
    if event.source != SOURCE {
        return Err(format!("source \"{}\" is not {SOURCE}", event.source));
    }
    if !accepted.regions.contains(&event.region) {
        return Err(format!(
            "region {} is not watched (EBB_REGIONS)",
            event.region
        ));
    }
    if !accepted.accounts.contains(&event.account) {
        return Err(format!(
            "account {} is neither the queue's nor one of EBB_ROLE_ARNS",
            event.account
        ));
    }
    Ok(Warning {
        instance: event.detail.instance_id,
        region: event.region,
        at: event.time,
        signal,
        account: event.account,
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
    accepted: Accepted,
}

impl InterruptionQueue {
    /// The queue at `url`, with the standard AWS credential chain and ebb's default
    /// [`Timeouts`] (whose attempt timeout is above the long poll's 20 s), taking the warnings
    /// of `regions` (none: the SDK's region) in the queue's account and those of `role_arns`.
    pub async fn connect(
        url: String,
        regions: Vec<String>,
        role_arns: &[String],
    ) -> InterruptionQueue {
        let config = aws_config::defaults(BehaviorVersion::latest())
            .retry_config(RetryConfig::standard())
            .timeout_config(Timeouts::default().config())
            .load()
            .await;
        let regions = match regions.is_empty() {
            true => config.region().map(|r| r.to_string()).into_iter().collect(),
            false => regions,
        };
        let accepted = Accepted::new(regions, &url, role_arns);
        InterruptionQueue::new(aws_sdk_sqs::Client::new(&config), url, accepted)
    }

    /// The queue's own account, from its URL (`https://sqs.REGION.amazonaws.com/ACCOUNT/NAME`).
    pub fn account(&self) -> Option<&str> {
        queue_account(&self.url)
    }

    /// The queue at `url`, through `sqs`, taking the warnings `accepted` says.
    pub fn new(sqs: aws_sdk_sqs::Client, url: String, accepted: Accepted) -> InterruptionQueue {
        InterruptionQueue { sqs, url, accepted }
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
            .boxed()
            .await
            .map_err(|e| cloud_error("ReceiveMessage", e))?;
        let mut batch = Batch::default();
        for message in out.messages() {
            match parse(message.body().unwrap_or(""), &self.accepted) {
                Ok(w) => batch.warnings.push(w),
                Err(why) => tracing::warn!(
                    queue = self.url,
                    error = %why,
                    body = message.body().unwrap_or(""),
                    "a message is dropped"
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
                .boxed()
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
        let accepted = Accepted::new(
            vec!["us-east-1".into()],
            "https://sqs.us-east-1.amazonaws.com/123456789012/ebb-spot-interruptions",
            &["arn:aws:iam::210987654321:role/ebb".into()],
        );
        assert_eq!(accepted.accounts, ["123456789012", "210987654321"]);
        assert_eq!(
            parse(body, &accepted),
            Ok(Warning {
                instance: "i-1234567890abcdef0".into(),
                region: "us-east-1".into(),
                at: "2026-11-30T12:00:00Z".parse().unwrap(),
                signal: Signal::Interruption,
                account: "123456789012".into(),
            })
        );
        let other = body.replace("123456789012\",", "210987654321\",");
        assert!(parse(&other, &accepted).is_ok(), "a role's account");
        let state_change = body.replace(DETAIL_TYPE, "EC2 Instance State-change Notification");
        for (refused, why) in [
            (state_change, "detail-type"),
            ("not json".to_string(), "not an EventBridge"),
            (body.replace("\"aws.ec2\"", "\"my.app\""), "source"),
            (
                body.replace("\"us-east-1\"", "\"eu-west-1\""),
                "region eu-west-1",
            ),
            (
                body.replace("123456789012\",", "999999999999\","),
                "account 999999999999",
            ),
        ] {
            let err = parse(&refused, &accepted).unwrap_err();
            assert!(err.contains(why), "{err}");
        }
    }

    #[test]
    fn a_rebalance_recommendation_is_read_with_the_same_checks() {
        // As EventBridge sends it (AWS documentation, "EC2 instance rebalance
        // recommendations").
        let body = r#"{
            "version": "0",
            "id": "12345678-1234-1234-1234-123456789012",
            "detail-type": "EC2 Instance Rebalance Recommendation",
            "source": "aws.ec2",
            "account": "123456789012",
            "time": "2026-11-30T12:00:00Z",
            "region": "us-east-1",
            "resources": ["arn:aws:ec2:us-east-1b:instance/i-1234567890abcdef0"],
            "detail": {"instance-id": "i-1234567890abcdef0"}
        }"#;
        let accepted = Accepted::new(
            vec!["us-east-1".into()],
            "https://sqs.us-east-1.amazonaws.com/123456789012/ebb-spot-interruptions",
            &[],
        );
        let w = parse(body, &accepted).unwrap();
        assert_eq!(w.signal, Signal::Rebalance);
        assert_eq!(w.instance, "i-1234567890abcdef0");
        for (refused, why) in [
            (body.replace("\"aws.ec2\"", "\"my.app\""), "source"),
            (
                body.replace("\"us-east-1\"", "\"eu-west-1\""),
                "region eu-west-1",
            ),
            (
                body.replace("123456789012\",", "999999999999\","),
                "account 999999999999",
            ),
        ] {
            let err = parse(&refused, &accepted).unwrap_err();
            assert!(err.contains(why), "{err}");
        }
    }
}
