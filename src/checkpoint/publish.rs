//! Publishing: after a tick or a change that appended audit rows, the head is signed, logged as
//! a JSON line and written to the sink. A failure is logged, counted and shown in
//! `GET /v1/status` (task `audit_checkpoints`); it never fails what appended the rows.

use super::sink::{Sink, SinkError, Written};
use super::Checkpoint;
use crate::control::Tasks;
use crate::store::{Store, StoreError};
use chrono::{DateTime, Utc};
use ed25519_dalek::SigningKey;
use prometheus_client::metrics::counter::Counter;
use serde::Serialize;
use std::sync::Mutex;
use std::time::Duration;

/// The task's name in the statuses.
const TASK: &str = "audit_checkpoints";

/// How long one publication may take; past it, it is reported as failed.
pub const PUBLISH_LIMIT: Duration = Duration::from_secs(30);

/// A checkpoint stored: the `audit_checkpoints` task's status.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Published {
    /// The row it covers.
    pub seq: i64,
    /// Whether the sink held it already (written by another replica, or before a restart).
    pub already_there: bool,
}

impl std::fmt::Display for Published {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.already_there {
            false => write!(f, "checkpoint of row {} stored", self.seq),
            true => write!(f, "checkpoint of row {} was stored already", self.seq),
        }
    }
}

/// Why a checkpoint was not published.
#[derive(Debug, thiserror::Error)]
pub enum PublishError {
    /// The audit chain's head could not be read.
    #[error("cannot read the audit head: {0}")]
    Head(#[source] StoreError),
    /// Reading the head took longer than [`PUBLISH_LIMIT`].
    #[error("reading the audit head timed out")]
    HeadTimedOut,
    /// The sink refused or failed.
    #[error("checkpoint of row {seq}: {source}")]
    Sink {
        /// The row.
        seq: i64,
        /// Why.
        source: SinkError,
    },
    /// The sink took longer than [`PUBLISH_LIMIT`].
    #[error("checkpoint of row {seq}: not stored within {}s", PUBLISH_LIMIT.as_secs())]
    SinkTimedOut {
        /// The row.
        seq: i64,
    },
}

/// Signs and stores checkpoints of one database's audit chain.
#[derive(Debug)]
pub struct Publisher {
    key: SigningKey,
    sink: Sink,
    tasks: Tasks,
    failures: Counter,
    /// The `seq` of the last checkpoint published (or found stored) by this process.
    last: Mutex<Option<i64>>,
}

impl Publisher {
    /// Publishes with `key` to `sink`, reporting into `tasks` and counting failures in
    /// `failures`.
    pub fn new(key: SigningKey, sink: Sink, tasks: Tasks, failures: Counter) -> Publisher {
        tasks.register(
            TASK,
            "signs the audit chain's head and stores it outside the database",
        );
        Publisher {
            key,
            sink,
            tasks,
            failures,
            last: Mutex::new(None),
        }
    }

    /// Publishes a checkpoint of the head at `now` if rows were appended since the last one;
    /// the checkpoint, or `None` when there was nothing new. Errors are logged and reported
    /// here, and returned for the caller to mention; they are never the caller's failure.
    pub async fn publish(
        &self,
        store: &Store,
        now: DateTime<Utc>,
    ) -> Result<Option<Checkpoint>, PublishError> {
        let head = match tokio::time::timeout(PUBLISH_LIMIT, store.audit_head()).await {
            Ok(Ok(head)) => head,
            Ok(Err(err)) => return Err(self.failed(PublishError::Head(err))),
            Err(_) => return Err(self.failed(PublishError::HeadTimedOut)),
        };
        let Some((seq, hash)) = head else {
            return Ok(None);
        };
        if *self.last.lock().unwrap_or_else(|e| e.into_inner()) >= Some(seq) {
            return Ok(None);
        }
        self.tasks.started(TASK);
        let checkpoint = Checkpoint::sign(&self.key, seq, &hash, now);
        // The log line is a copy of its own, made before the store is tried.
        tracing::info!(
            audit_checkpoint = true,
            seq = checkpoint.seq,
            hash = checkpoint.hash,
            at = %checkpoint.at.to_rfc3339(),
            signature = checkpoint.signature,
            "audit checkpoint"
        );
        let written = match tokio::time::timeout(PUBLISH_LIMIT, self.sink.write(&checkpoint)).await
        {
            Ok(Ok(written)) => written,
            Ok(Err(source)) => return Err(self.failed(PublishError::Sink { seq, source })),
            Err(_) => return Err(self.failed(PublishError::SinkTimedOut { seq })),
        };
        *self.last.lock().unwrap_or_else(|e| e.into_inner()) = Some(seq);
        let published = Published {
            seq,
            already_there: written == Written::AlreadyThere,
        };
        self.tasks.finished::<_, PublishError>(TASK, Ok(&published));
        Ok(Some(checkpoint))
    }

    /// Counts, logs (once, with the error as a field) and reports `err`, and returns it.
    fn failed(&self, err: PublishError) -> PublishError {
        self.failures.inc();
        tracing::error!(task = TASK, error = %err, "background task failed");
        if self
            .tasks
            .statuses()
            .get(TASK)
            .is_some_and(|s| s.running_since.is_none())
        {
            self.tasks.started(TASK);
        }
        self.tasks.finished::<Published, _>(TASK, Err(&err));
        err
    }
}
