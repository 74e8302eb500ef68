//! The fleet as ebb tracked it at a past time, and what ebb remembered of it then: what
//! `ebb replay` reads from Postgres in place of a fleet snapshot file.

use super::{Result, Store};
use crate::engine::{InstanceFacts, Override, Prior};
use crate::fleet::{Billing, BillingModel, Instance, InstanceState, Lifecycle, Tags};
use crate::names::ACTOR;
use chrono::{DateTime, Utc};
use sqlx::types::Json;
use std::collections::{BTreeMap, HashMap};

/// An instance's row with what its state changes say about `at`.
#[derive(sqlx::FromRow)]
struct Row {
    id: String,
    region: String,
    instance_type: String,
    lifecycle: String,
    launched_at: Option<DateTime<Utc>>,
    tags: Json<BTreeMap<String, String>>,
    state: String,
    first_seen_at: DateTime<Utc>,
    /// The state its last change at or before `at` led to, and when.
    state_then: Option<String>,
    changed_then: Option<DateTime<Utc>>,
    /// The state before its first change after `at`.
    state_before_next: Option<String>,
    /// When ebb last stopped (or hibernated) it, at or before `at`.
    stopped_by_ebb: Option<DateTime<Utc>>,
    /// When it was last seen entering `running`, at or before `at`.
    last_running: Option<DateTime<Utc>>,
    /// How its listing said it is billed (`None`: not listed since this was kept).
    billing: Option<Json<BillingModel>>,
}

/// How an instance of `instance_type` in `state` is billed, by the model its listing gave; a
/// row kept before ebb kept the model is billed as EC2 bills, as it was then taken to be.
pub(super) fn billing(
    model: Option<&Json<BillingModel>>,
    instance_type: &str,
    state: InstanceState,
) -> Billing {
    let stopped = state == InstanceState::Stopped;
    match model {
        Some(Json(model)) => Billing::from_model(model, instance_type, stopped),
        None => Billing::ec2(stopped),
    }
}

/// States an instance can be replayed from: one being terminated costs nothing and is
/// never acted on.
fn replayable(state: &str) -> Option<InstanceState> {
    let state: InstanceState = serde_json::from_value(serde_json::json!(state)).ok()?;
    (!matches!(
        state,
        InstanceState::Terminated | InstanceState::ShuttingDown
    ))
    .then_some(state)
}

impl Store {
    /// The instances ebb tracked at `at`, by id, each in its state then, with what ebb
    /// remembered of them (its own stops) and the overrides in force then.
    ///
    /// The state at `at` is the one its last recorded change at or before `at` led to; without
    /// one, the state before its first change after `at`; without any change, its state now.
    /// Instances ebb first saw after `at`, or that were gone (or being terminated) at `at`, are
    /// left out. Tags, type and region are the ones ebb holds now: it keeps no history of them.
    pub async fn fleet_at(&self, at: DateTime<Utc>) -> Result<(Vec<Instance>, Prior)> {
        let rows: Vec<Row> = sqlx::query_as(
            "SELECT i.id, i.region, i.instance_type, i.lifecycle, i.launched_at, i.tags, i.state,
                    i.first_seen_at, i.billing, b.to_state AS state_then, b.at AS changed_then,
                    a.from_state AS state_before_next,
                    (SELECT max(l.at) FROM audit_log l
                     WHERE l.instance = i.id AND l.actor = $2 AND l.outcome = 'succeeded'
                       AND l.action IN ('stop', 'hibernate') AND NOT l.dry_run AND l.at <= $1)
                        AS stopped_by_ebb,
                    (SELECT max(e.at) FROM instance_events e
                     WHERE e.instance = i.id AND e.to_state = 'running' AND e.at <= $1)
                        AS last_running
             FROM instances i
             LEFT JOIN LATERAL (SELECT to_state, at FROM instance_events e
                                WHERE e.instance = i.id AND e.at <= $1
                                ORDER BY e.at DESC LIMIT 1) b ON true
             LEFT JOIN LATERAL (SELECT from_state FROM instance_events e
                                WHERE e.instance = i.id AND e.at > $1
                                ORDER BY e.at LIMIT 1) a ON true
             WHERE i.first_seen_at <= $1 AND (i.gone_at IS NULL OR i.gone_at > $1)
             ORDER BY i.id",
        )
        .bind(at)
        .bind(ACTOR)
        .fetch_all(&self.pool)
        .await?;
        let mut instances = Vec::with_capacity(rows.len());
        let mut facts = HashMap::new();
        for row in rows {
            let then = row
                .state_then
                .as_deref()
                .or(row.state_before_next.as_deref())
                .unwrap_or(&row.state);
            let Some(state) = replayable(then) else {
                continue;
            };
            // Ebb's stop is remembered until the instance is seen running again.
            let stopped_by_ebb_at = row.stopped_by_ebb.filter(|stop| {
                matches!(state, InstanceState::Stopped | InstanceState::Stopping)
                    && row.last_running.is_none_or(|run| *stop > run)
            });
            if stopped_by_ebb_at.is_some() {
                let f = InstanceFacts {
                    stopped_by_ebb_at,
                    ..InstanceFacts::default()
                };
                facts.insert(row.id.clone(), f);
            }
            instances.push(Instance {
                id: row.id,
                region: row.region,
                state,
                state_since: Some(row.changed_then.unwrap_or(row.first_seen_at)),
                lifecycle: match row.lifecycle.as_str() {
                    "spot" => Lifecycle::Spot,
                    _ => Lifecycle::OnDemand,
                },
                launched_at: row.launched_at,
                tags: row.tags.0.into_iter().collect::<Tags>(),
                gpus: None,
                gpu_util: Vec::new(),
                via_role: None,
                billing: billing(row.billing.as_ref(), &row.instance_type, state),
                instance_type: row.instance_type,
                private_ip: None,
            });
        }
        let overrides: Vec<(String, DateTime<Utc>, String, String)> = sqlx::query_as(
            "SELECT instance, until, reason, created_by FROM overrides
             WHERE created_at <= $1 AND until > $1 AND (revoked_at IS NULL OR revoked_at > $1)",
        )
        .bind(at)
        .fetch_all(&self.pool)
        .await?;
        let overrides = overrides
            .into_iter()
            .map(|(instance, until, reason, by)| Override {
                instance,
                until,
                reason,
                by,
            })
            .collect();
        Ok((instances, Prior::new(facts, overrides)))
    }
}
