//! Notices to people: a Slack-compatible JSON POST (`{"text": ...}`) to `EBB_WEBHOOK_URL`.
//!
//! Posting happens on a task of its own, with retries, so a slow or failing receiver never
//! holds up a tick; the tag `ebb:stop-at` on the instance is the notice of record.

use std::time::Duration;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

/// Notices waiting to be posted; beyond this, new ones are dropped (and logged).
const QUEUE: usize = 1000;
/// Attempts per notice.
const ATTEMPTS: u32 = 4;
/// Time allowed for one attempt.
const TIMEOUT: Duration = Duration::from_secs(10);

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
    /// Starts posting to `url`.
    pub fn start(url: reqwest::Url) -> (Webhook, Poster) {
        Webhook::start_with_backoff(url, Duration::from_secs(1))
    }

    /// Starts posting to `url`, waiting `backoff`, doubled each time, between attempts.
    pub fn start_with_backoff(url: reqwest::Url, backoff: Duration) -> (Webhook, Poster) {
        let (queue, mut notices) = mpsc::channel::<String>(QUEUE);
        let client = reqwest::Client::builder()
            .timeout(TIMEOUT)
            .build()
            .unwrap_or_default();
        let task = tokio::spawn(async move {
            while let Some(text) = notices.recv().await {
                post(&client, &url, &text, backoff).await;
            }
        });
        (Webhook { queue }, Poster { task })
    }

    /// Queues a notice; never waits.
    pub fn send(&self, text: String) {
        if let Err(err) = self.queue.try_send(text) {
            tracing::error!("webhook notice dropped: {err}");
        }
    }
}

impl Poster {
    /// Waits up to `limit` for queued notices to be posted, once every [`Webhook`] is dropped.
    pub async fn finish(self, limit: Duration) {
        if tokio::time::timeout(limit, self.task).await.is_err() {
            tracing::error!("webhook notices still unsent after {limit:?}; giving up on them");
        }
    }
}

async fn post(client: &reqwest::Client, url: &reqwest::Url, text: &str, backoff: Duration) {
    let body = serde_json::json!({ "text": text });
    let mut wait = backoff;
    for attempt in 1..=ATTEMPTS {
        let answer = client.post(url.clone()).json(&body).send().await;
        let error = match answer {
            Ok(r) if r.status().is_success() => return,
            Ok(r) => format!("HTTP {}", r.status()),
            Err(e) => e.to_string(),
        };
        if attempt == ATTEMPTS {
            tracing::error!(attempts = ATTEMPTS, "webhook notice not delivered: {error}");
            return;
        }
        tracing::warn!(attempt, "webhook notice failed, retrying: {error}");
        tokio::time::sleep(wait).await;
        wait *= 2;
    }
}
