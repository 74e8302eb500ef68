//! An early start as a verdict reads it: how much earlier than `start_ahead` a policy's starts
//! begin, and why (worked out in `early.rs`).

use super::text::span;
use crate::engine::early::TokenRate;
use chrono::{DateTime, Duration, Utc};

/// How much earlier than `start_ahead` a policy's starts at its next opening begin, and why.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct Early {
    /// The opening.
    pub(super) open: DateTime<Utc>,
    /// How much earlier than `start_ahead`, in whole minutes.
    pub(super) lead: Duration,
    /// How many starts of its account and region are due by its start of `start_ahead`.
    pub(super) due: usize,
    /// The API whose bucket makes it early.
    pub(super) api: &'static str,
    /// That bucket.
    pub(super) rate: TokenRate,
}

impl Early {
    /// The reason's words: `started 4m early: 240 starts due by 09:00 UTC exceed EC2's
    /// StartInstances rate (5 at once, then 2/s)`, with the opening as `at` writes it.
    pub(super) fn text(&self, at: impl Fn(DateTime<Utc>) -> String) -> String {
        format!(
            "started {} early: {} starts due by {} exceed EC2's {} rate ({} at once, then {}/s)",
            span(self.lead),
            self.due,
            at(self.open),
            self.api,
            self.rate.burst,
            self.rate.per_second
        )
    }
}
