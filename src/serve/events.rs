//! Sends every outcome of the audit log to `EBB_EVENTS_URL` as a CloudEvent
//! ([`crate::events`]), at least once and in `seq` order, so in order for each instance.
//!
//! The audit log is the outbox and `event_cursor` the position in it (`store/event_cursor.rs`):
//! an event is posted, then the cursor moves past its row, so a process killed in between
//! posts that one event again after its restart, with the same `id`, and loses none. Only the
//! leader sends. A post that fails (an error, a timeout, an answer other than 2xx) stops the
//! activation where it is; the next one starts from that event again, after a back-off that
//! doubles with each failure in a row, up to [`MAX_BACKOFF`].

use super::driver::BackgroundTask;
use crate::control::Control;
use crate::events::{event_of, CONTENT_TYPE};
use crate::store::{AuditFilter, Store, StoreError};
use serde::Serialize;
use std::sync::Arc;
use std::time::Duration;

/// Audit rows read at once.
const PAGE: i64 = 200;
/// Events posted by one activation at most, so that each ends.
const MOST: u64 = 2000;
/// Time allowed for one post.
const TIMEOUT: Duration = Duration::from_secs(10);
/// The wait after a first failure; doubled after each further one in a row.
pub const FIRST_BACKOFF: Duration = Duration::from_secs(2);
/// The longest wait between attempts.
pub const MAX_BACKOFF: Duration = Duration::from_secs(300);

/// Where events go and what they say they come from.
#[derive(Clone)]
pub struct EventsConfig {
    /// The receiver (`EBB_EVENTS_URL`); a secret, never shown.
    pub url: reqwest::Url,
    /// The events' `source` (`EBB_EVENTS_SOURCE`).
    pub source: String,
}

impl std::fmt::Debug for EventsConfig {
    /// Without the URL, which may carry a token.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EventsConfig")
            .field("url", &"(hidden)")
            .field("source", &self.source)
            .finish()
    }
}

/// Posts the audit log's outcomes as events at each activation.
pub struct EventSender {
    store: Store,
    control: Arc<Control>,
    config: EventsConfig,
    client: reqwest::Client,
    failures: u32,
}

impl EventSender {
    /// A sender of `store`'s outcomes as `config` says, while `control` says this replica leads.
    pub fn new(store: Store, control: Arc<Control>, config: EventsConfig) -> Self {
        let client = crate::webhook::outbound_client(TIMEOUT);
        EventSender {
            store,
            control,
            config,
            client,
            failures: 0,
        }
    }
}

/// What an activation of the event sender did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "events", rename_all = "snake_case")]
pub enum EventsStatus {
    /// Nothing: only the leader sends.
    NotLeader,
    /// Posted `sent` events; every audit row up to `through` is delivered (or is no event).
    Delivered {
        /// Events posted.
        sent: u64,
        /// The `seq` of the last row handled.
        through: i64,
    },
}

impl std::fmt::Display for EventsStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            EventsStatus::NotLeader => write!(f, "not the leader, which sends events"),
            EventsStatus::Delivered { sent, through } => {
                write!(
                    f,
                    "{sent} events sent; delivered through audit row {through}"
                )
            }
        }
    }
}

/// Why events could not be sent; the next activation starts again from the first not sent.
#[derive(Debug, thiserror::Error)]
pub enum EventsError {
    /// The audit log or the cursor could not be read or moved.
    #[error("cannot send events: {0}")]
    Store(#[from] StoreError),
    /// The receiver did not take an event. Never holds the URL, which may carry a secret.
    #[error("event of audit row {seq} ({event_type}) not delivered: {last}")]
    NotDelivered {
        /// The row.
        seq: i64,
        /// The event's type.
        event_type: String,
        /// What the post got: an HTTP status, or the error without the URL.
        last: String,
    },
}

impl BackgroundTask for EventSender {
    const NAME: &'static str = "event_sender";
    const DESCRIPTION: &'static str =
        "posts every outcome of the audit log to EBB_EVENTS_URL as a CloudEvent, in order";

    type Status = EventsStatus;
    type Error = EventsError;

    async fn activate(&mut self) -> Result<EventsStatus, EventsError> {
        let result = self.send().await;
        self.failures = match result {
            Ok(_) => 0,
            Err(_) => self.failures.saturating_add(1),
        };
        result
    }

    fn retry_after_failure(&self) -> Option<Duration> {
        let doublings = self.failures.saturating_sub(1).min(16);
        Some((FIRST_BACKOFF * 2u32.pow(doublings)).min(MAX_BACKOFF))
    }
}

impl EventSender {
    /// Posts the events after the cursor, in order, until none is left, [`MOST`] were sent, a
    /// post fails or this replica no longer leads.
    async fn send(&mut self) -> Result<EventsStatus, EventsError> {
        if !self.control.is_leader() {
            return Ok(EventsStatus::NotLeader);
        }
        let mut through = match self.store.event_cursor().await? {
            Some(through) => through,
            // `serve` made it at its start; made here again only if it was deleted since.
            None => self.store.start_event_cursor().await?,
        };
        let mut sent = 0;
        loop {
            let page = self
                .store
                .audit(&AuditFilter {
                    after: Some(through),
                    limit: Some(PAGE),
                    ..AuditFilter::default()
                })
                .await?;
            let Some(last) = page.last().map(|r| r.seq) else {
                break;
            };
            for row in &page {
                let Some(event) = event_of(&self.config.source, row) else {
                    continue;
                };
                if !self.control.is_leader() || sent == MOST {
                    // Rows before this one are handled; it is sent by the next activation.
                    self.store.advance_event_cursor(row.seq - 1).await?;
                    return Ok(EventsStatus::Delivered {
                        sent,
                        through: row.seq - 1,
                    });
                }
                let answer = self
                    .client
                    .post(self.config.url.clone())
                    .header(reqwest::header::CONTENT_TYPE, CONTENT_TYPE)
                    .json(&event)
                    .send()
                    .await;
                let failure = match answer {
                    Ok(r) if r.status().is_success() => None,
                    Ok(r) => Some(format!("HTTP {}", r.status())),
                    Err(e) => Some(e.without_url().to_string()),
                };
                if let Some(last) = failure {
                    self.store.advance_event_cursor(row.seq - 1).await?;
                    return Err(EventsError::NotDelivered {
                        seq: row.seq,
                        event_type: event.event_type,
                        last,
                    });
                }
                // Moved at once: a process killed now posts this event again, and no other.
                self.store.advance_event_cursor(row.seq).await?;
                sent += 1;
            }
            self.store.advance_event_cursor(last).await?;
            through = last;
            if (page.len() as i64) < PAGE {
                break;
            }
        }
        Ok(EventsStatus::Delivered { sent, through })
    }
}
