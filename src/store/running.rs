//! What ran over a report's window (`report::RunningSpan`): the usage commitments apply to
//! before ebb's stopped hours, read from the instances' state changes: for a report, only in
//! the regions the commitments held can cover, and only when some are held; for a day's
//! rollup, everywhere, since the commitments are those of the report that reads it.

use super::inventory::micros;
use super::{Result, Store};
use crate::budget::Ran;
use crate::fleet::money::{HeldCommitments, PlanKind};
use crate::fleet::Tags;
use crate::report::RunningSpan;
use chrono::{DateTime, Utc};
use futures_util::TryStreamExt as _;
use std::collections::BTreeMap;
use std::sync::Arc;

/// Each instance of the regions `$3` (all when NULL) known in `[$1, $2)`: its facts, its state
/// at `$1` (what its last change before `$1` left, or else what its first change since left:
/// the state it has now may have come at `$2` or later), and its changes inside, in time order.
const RUNNING: &str = "SELECT i.id, i.tags, i.region, i.instance_type, i.lifecycle, i.state,
            i.first_seen_at,
            coalesce(b.to_state, a.from_state), coalesce(w.ats, '{}'), coalesce(w.tos, '{}')
     FROM instances AS i
     LEFT JOIN LATERAL (
         SELECT to_state FROM instance_events
         WHERE instance = i.id AND at < $1 ORDER BY at DESC LIMIT 1
     ) AS b ON true
     LEFT JOIN LATERAL (
         SELECT from_state FROM instance_events
         WHERE instance = i.id AND at >= $1 ORDER BY at LIMIT 1
     ) AS a ON true
     LEFT JOIN LATERAL (
         SELECT array_agg(at ORDER BY at) AS ats, array_agg(to_state ORDER BY at) AS tos
         FROM instance_events WHERE instance = i.id AND at >= $1 AND at < $2
     ) AS w ON true
     WHERE ($3::text[] IS NULL OR i.region = ANY($3))
       AND i.first_seen_at < $2 AND (i.gone_at IS NULL OR i.gone_at > $1)";

/// A row of [`RUNNING`].
type Row = (
    String,
    sqlx::types::Json<BTreeMap<String, String>>,
    String,
    String,
    String,
    String,
    DateTime<Utc>,
    Option<String>,
    Vec<DateTime<Utc>>,
    Vec<String>,
);

/// Whether an instance in `state` is billed as running.
fn runs(state: &str) -> bool {
    matches!(state, "pending" | "running")
}

impl Store {
    /// The stretches instances ran in `[since, until)`, in the regions `held` can cover; none
    /// when nothing is held.
    pub(super) async fn report_running(
        &self,
        since: DateTime<Utc>,
        until: DateTime<Utc>,
        held: &HeldCommitments,
    ) -> Result<Vec<RunningSpan>> {
        if held.is_empty() {
            return Ok(Vec::new());
        }
        let regions: Option<Vec<&str>> = if held
            .savings_plans
            .iter()
            .any(|p| p.kind == PlanKind::Compute)
        {
            None
        } else {
            let ri = held.reserved_instances.iter().map(|r| r.region.as_str());
            let plans = held
                .savings_plans
                .iter()
                .filter_map(|p| p.region.as_deref());
            Some(ri.chain(plans).collect())
        };
        self.running_spans(since, until, regions).await
    }

    /// The stretches instances of `regions` (all when `None`) ran in `[since, until)`.
    pub(super) async fn running_spans(
        &self,
        since: DateTime<Utc>,
        until: DateTime<Utc>,
        regions: Option<Vec<&str>>,
    ) -> Result<Vec<RunningSpan>> {
        let ran = self.ran_in(since, until, regions).await?;
        // No commitment covers a spot hour: only the on-demand hours are usage they apply to.
        Ok(ran
            .into_iter()
            .filter(|r| !r.spot)
            .map(|r| RunningSpan {
                region: r.region.to_string(),
                instance_type: r.instance_type.to_string(),
                from: r.from,
                to: r.to,
            })
            .collect())
    }

    /// Every box's stretches of running (or pending) in `[since, until)`, with its tags as
    /// last listed: what budgets count spend from.
    pub async fn ran(&self, since: DateTime<Utc>, until: DateTime<Utc>) -> Result<Vec<Ran>> {
        self.ran_in(since, until, None).await
    }

    /// The stretches instances of `regions` (all when `None`) ran in `[since, until)`. Row by
    /// row: a month of a large fleet's rows at once was the largest thing a tick held.
    async fn ran_in(
        &self,
        since: DateTime<Utc>,
        until: DateTime<Utc>,
        regions: Option<Vec<&str>>,
    ) -> Result<Vec<Ran>> {
        let (since, until) = (micros(since), micros(until));
        let mut rows = sqlx::query_as::<_, Row>(RUNNING)
            .persistent(false)
            .bind(since)
            .bind(until)
            .bind(regions)
            .fetch(&self.pool);
        let mut spans = Vec::new();
        while let Some(row) = rows.try_next().await? {
            let (id, tags, region, instance_type, lifecycle, now, first_seen, before, ats, tos) =
                row;
            let spot = lifecycle == "spot";
            let (id, region, instance_type): (Arc<str>, Arc<str>, Arc<str>) =
                (id.into(), region.into(), instance_type.into());
            let tags: Tags = tags.0.into_iter().collect();
            let span = |from, to| Ran {
                instance: id.clone(),
                region: region.clone(),
                instance_type: instance_type.clone(),
                tags: tags.clone(),
                spot,
                from,
                to,
            };
            let mut state = before.unwrap_or(now);
            let mut from = since.max(first_seen);
            for (at, to) in ats.into_iter().zip(tos) {
                if runs(&state) && !runs(&to) && at > from {
                    spans.push(span(from, at));
                }
                if !runs(&state) && runs(&to) {
                    from = at;
                }
                state = to;
            }
            if runs(&state) && until > from {
                spans.push(span(from, until));
            }
        }
        Ok(spans)
    }
}
