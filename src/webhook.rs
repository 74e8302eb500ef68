//! Notices to people: a Slack-compatible JSON POST (`{"text": ...}`) to `EBB_WEBHOOK_URL`.
//!
//! Posting happens on a task of its own, with retries, so a slow or failing receiver never
//! holds up a tick; the tag `ebb:stop-at` on the instance is the notice of record. Each notice
//! posted is one activation of the `webhook_sender` task in `GET /v1/status`.

use crate::control::Tasks;
use serde::Serialize;
use std::time::Duration;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

/// Notices waiting to be posted; beyond this, new ones are dropped (and logged).
const QUEUE: usize = 1000;
/// Attempts per notice.
const ATTEMPTS: u32 = 4;
/// Time allowed for one attempt.
const TIMEOUT: Duration = Duration::from_secs(10);
/// The wait before the second attempt, doubled before each further one.
const BACKOFF: Duration = Duration::from_secs(1);
/// The task's name in the statuses.
const TASK: &str = "webhook_sender";

/// A notice delivered: the `webhook_sender` task's status.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Posted {
    /// The attempt that delivered it, from 1.
    pub attempt: u32,
}

impl std::fmt::Display for Posted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "notice posted")
    }
}

/// Why a notice was not delivered. Never holds the URL, which is a secret.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("not delivered after {attempts} attempts: {last}")]
pub struct NotDelivered {
    /// Attempts made.
    pub attempts: u32,
    /// What the last attempt got: an HTTP status, or the error without the URL.
    pub last: String,
}

/// The sending side of the webhook; clones share one queue.
#[derive(Debug, Clone)]
pub struct Webhook {
    queue: mpsc::Sender<String>,
}

/// The posting task; [`Poster::finish`] waits for the queue to drain.
#[derive(Debug)]
pub struct Poster {
    task: JoinHandle<()>,
}

impl Webhook {
    /// Starts posting to `url`, reporting each notice into `tasks`.
    pub fn start(url: reqwest::Url, tasks: Tasks) -> (Webhook, Poster) {
        let (queue, mut notices) = mpsc::channel::<String>(QUEUE);
        let client = reqwest::Client::builder()
            .timeout(TIMEOUT)
            .build()
            .unwrap_or_default();
        tasks.register(TASK, "posts notices of coming stops to EBB_WEBHOOK_URL");
        let task = tokio::spawn(async move {
            while let Some(text) = notices.recv().await {
                tasks.started(TASK);
                let result = post(&client, &url, &text).await;
                if let Err(err) = &result {
                    tracing::error!(task = TASK, error = %err, "background task failed");
                }
                tasks.finished(TASK, result.as_ref());
            }
        });
        (Webhook { queue }, Poster { task })
    }

    /// Queues a notice; never waits.
    pub fn send(&self, text: String) {
        if let Err(err) = self.queue.try_send(text) {
            tracing::error!(error = %err, "webhook notice dropped");
        }
    }
}

impl Poster {
    /// Waits up to `limit` for queued notices to be posted, once every [`Webhook`] is dropped.
    pub async fn finish(self, limit: Duration) {
        if tokio::time::timeout(limit, self.task).await.is_err() {
            tracing::error!(
                waited = %humantime::format_duration(limit),
                "webhook notices still unsent; giving up on them"
            );
        }
    }
}

/// Posts one notice, with retries; why it was not delivered, if it was not.
async fn post(
    client: &reqwest::Client,
    url: &reqwest::Url,
    text: &str,
) -> Result<Posted, NotDelivered> {
    let body = serde_json::json!({ "text": text });
    let mut wait = BACKOFF;
    let mut attempt = 1;
    loop {
        let answer = client.post(url.clone()).json(&body).send().await;
        let error = match answer {
            Ok(r) if r.status().is_success() => return Ok(Posted { attempt }),
            Ok(r) => format!("HTTP {}", r.status()),
            // The URL is a secret (it lets anyone post to the channel): never in the logs.
            Err(e) => e.without_url().to_string(),
        };
        if attempt == ATTEMPTS {
            return Err(NotDelivered {
                attempts: ATTEMPTS,
                last: error,
            });
        }
        tracing::warn!(attempt, error = %error, "webhook notice failed, retrying");
        tokio::time::sleep(wait).await;
        wait *= 2;
        attempt += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_failed_post_never_tells_the_url() {
        // A closed port: every attempt fails at once; the back-off runs on the paused clock.
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let url: reqwest::Url = format!("http://127.0.0.1:{port}/services/T0/B0/s3cr3t-path")
            .parse()
            .unwrap();
        let client = reqwest::Client::new();
        let error = post(&client, &url, "a notice")
            .await
            .unwrap_err()
            .to_string();
        assert!(
            error.starts_with("not delivered after 4 attempts"),
            "{error}"
        );
        assert!(
            !error.contains("s3cr3t") && !error.contains("127.0.0.1"),
            "{error}"
        );
    }
}
