//! The audit log's rows as values: a row to append, a stored row, and what a row records.
//! Appending, reading and verifying them is [`super::audit`]'s.

use chrono::{DateTime, Utc};
use serde::Serialize;
use std::fmt;

/// What a row records.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// About to act; committed before the cloud call.
    Intent,
    /// The action succeeded (or a record-only event, such as a policy change, happened).
    Succeeded,
    /// The action failed.
    Failed,
    /// The action was not carried out (dry run, or the reason no longer held).
    Skipped,
}

impl Outcome {
    /// The stored name.
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Intent => "intent",
            Outcome::Succeeded => "succeeded",
            Outcome::Failed => "failed",
            Outcome::Skipped => "skipped",
        }
    }

    /// The outcome named `s`.
    pub fn parse(s: &str) -> Option<Outcome> {
        [
            Outcome::Intent,
            Outcome::Succeeded,
            Outcome::Failed,
            Outcome::Skipped,
        ]
        .into_iter()
        .find(|o| o.as_str() == s)
    }
}

impl fmt::Display for Outcome {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A row to append.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NewAuditEntry {
    /// When it happened.
    pub at: DateTime<Utc>,
    /// `scheduler`, or the user or API token behind a manual action.
    pub actor: String,
    /// The instance acted on, if any.
    pub instance: Option<String>,
    /// Its region.
    pub region: Option<String>,
    /// The action (`stop`, `start`, ..., `override`, `policy_version`).
    pub action: String,
    /// Intent or outcome.
    pub outcome: Outcome,
    /// The governing policy.
    pub policy: Option<String>,
    /// The policy-set version the decision was made with.
    pub policy_version: Option<String>,
    /// The decision code.
    pub code: Option<String>,
    /// Why, for people.
    pub reason: String,
    /// Decided but not acted on.
    pub dry_run: bool,
    /// The cloud's request id.
    pub request_id: Option<String>,
    /// The error text of a failure.
    pub error: Option<String>,
    /// For an outcome: the `seq` of its intent.
    pub intent_seq: Option<i64>,
}

impl NewAuditEntry {
    /// A record-only row (no instance, outcome `succeeded`).
    pub fn event(at: DateTime<Utc>, actor: &str, action: &str, reason: String) -> Self {
        NewAuditEntry {
            at,
            actor: actor.to_string(),
            instance: None,
            region: None,
            action: action.to_string(),
            outcome: Outcome::Succeeded,
            policy: None,
            policy_version: None,
            code: None,
            reason,
            dry_run: false,
            request_id: None,
            error: None,
            intent_seq: None,
        }
    }
}

/// A stored row.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AuditEntry {
    /// Position in the chain, from 1, without gaps.
    pub seq: i64,
    /// The row's content.
    #[serde(flatten)]
    pub entry: NewAuditEntry,
    /// The previous row's hash.
    #[serde(skip)]
    pub prev_hash: Vec<u8>,
    /// This row's hash.
    #[serde(skip)]
    pub hash: Vec<u8>,
}

/// How the error of a `failed` outcome begins when it resolves an intent that a crash
/// interrupted before the cloud call: the action was not refused, so it is not backed off.
pub const INTERRUPTED: &str = "interrupted";
