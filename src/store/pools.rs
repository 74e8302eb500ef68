//! The spot pools' history: what ebb saw in each instance type and zone over the last 30
//! days, from the interruption queue (`pool_events`), the migrations' reclaims and the audit
//! log's capacity errors, for `ebb pools`, the console's `/pools` and the spot ranking.

use super::{Result, Store};
use crate::fleet::{Pool, PoolEvent, PoolEventKind, PoolHistory};
use chrono::{DateTime, Duration, Utc};
use std::collections::HashSet;

/// How far back the pools' history is read: the longest window `ebb pools` counts.
pub const POOL_HISTORY: Duration = Duration::days(30);

/// One event read from the queue, to keep in the pools' history.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueuedPoolEvent {
    /// An interruption warning or a rebalance recommendation.
    pub kind: PoolEventKind,
    /// The instance.
    pub instance: String,
    /// Its region.
    pub region: String,
    /// The account the event came from; empty for ebb's own (the queue's).
    pub account: String,
    /// When EC2 sent it.
    pub at: DateTime<Utc>,
}

impl Store {
    /// Keeps `events` in the pools' history, each with its instance's type and zone: a live
    /// or past migration's replacement's as the migration recorded them, else the type ebb's
    /// inventory lists (the zone unknown, empty). An event for an instance ebb knows neither
    /// way is left out, since its pool is unknown; one kept already is not kept twice.
    /// Returns how many were kept.
    pub async fn record_pool_events(&self, events: &[QueuedPoolEvent]) -> Result<u64> {
        let mut kept = 0;
        for e in events {
            if e.kind == PoolEventKind::CapacityError {
                continue;
            }
            kept += sqlx::query(
                "INSERT INTO pool_events (at, kind, account, region, zone, instance_type, instance)
                 SELECT $1, $2, $3, $4, COALESCE(m.zone, ''), t.instance_type, $5
                 FROM (SELECT COALESCE(
                          (SELECT instance_type FROM spot_migrations
                           WHERE current = $5 AND region = $4 ORDER BY id DESC LIMIT 1),
                          (SELECT instance_type FROM instances WHERE id = $5 AND region = $4))
                       AS instance_type) t
                 LEFT JOIN LATERAL (SELECT zone FROM spot_migrations
                                    WHERE current = $5 AND region = $4
                                    ORDER BY id DESC LIMIT 1) m ON true
                 WHERE t.instance_type IS NOT NULL
                 ON CONFLICT (instance, kind, at) DO NOTHING",
            )
            .bind(e.at)
            .bind(e.kind.as_str())
            .bind(&e.account)
            .bind(&e.region)
            .bind(&e.instance)
            .execute(&self.pool)
            .await?
            .rows_affected();
        }
        Ok(kept)
    }

    /// Everything ebb saw in the pools in the [`POOL_HISTORY`] before `now`: the queue's
    /// events, the reclaims of spot migrations (in ebb's own account; one the queue warned of
    /// already is not counted twice), and the starts and spot launches refused for lack of
    /// capacity (a start's zone is unknown: empty).
    pub async fn pool_history(&self, now: DateTime<Utc>) -> Result<PoolHistory> {
        let since = now - POOL_HISTORY;
        type Row = (
            DateTime<Utc>,
            String,
            String,
            String,
            String,
            String,
            Option<String>,
        );
        let queued: Vec<Row> = sqlx::query_as(
            "SELECT at, kind, account, region, zone, instance_type, instance FROM pool_events
             WHERE at > $1 AND at <= $2",
        )
        .bind(since)
        .bind(now)
        .fetch_all(&self.pool)
        .await?;
        let reclaims: Vec<Row> = sqlx::query_as(
            "SELECT (e->>'at')::timestamptz, 'interruption', '', m.region,
                    COALESCE(e->>'zone', ''), COALESCE(e->>'instance_type', ''), e->>'instance'
             FROM spot_migrations m, jsonb_array_elements(m.interruptions) e
             WHERE (m.ended_at IS NULL OR m.ended_at > $1)
               AND (e->>'at')::timestamptz > $1 AND (e->>'at')::timestamptz <= $2",
        )
        .bind(since)
        .bind(now)
        .fetch_all(&self.pool)
        .await?;
        // A start's type is the instance's own (a fallback changes it after the refusal); a
        // spot launch's type and zone are in its intent's reason ("migration ID: launch spot
        // TYPE in ZONE (SUBNET) ..."), which ebb writes.
        let refused: Vec<Row> = sqlx::query_as(
            "SELECT a.at, 'capacity_error', '', i.region, '',
                    COALESCE(i.own_type, i.instance_type), a.instance
             FROM audit_log a JOIN instances i ON i.id = a.instance
             WHERE a.action = 'start' AND a.outcome = 'failed'
               AND a.code = 'insufficient_capacity' AND a.at > $1 AND a.at <= $2
             UNION ALL
             SELECT a.at, 'capacity_error', '', COALESCE(a.region, ''), p.m[2], p.m[1], a.instance
             FROM audit_log a JOIN audit_log intent ON intent.seq = a.intent_seq,
                  regexp_match(intent.reason, '^migration [0-9]+: launch spot (\\S+) in (\\S+) \\(') AS p(m)
             WHERE p.m IS NOT NULL
               AND a.outcome = 'failed' AND a.action IN ('migrate_to_spot', 'relaunch_spot')
               AND a.error LIKE 'insufficient_capacity:%' AND a.at > $1 AND a.at <= $2",
        )
        .bind(since)
        .bind(now)
        .fetch_all(&self.pool)
        .await?;
        let warned: HashSet<String> = queued
            .iter()
            .filter(|r| r.1 == "interruption")
            .filter_map(|r| r.6.clone())
            .collect();
        let reclaims = reclaims
            .into_iter()
            .filter(|r| r.6.as_ref().is_none_or(|i| !warned.contains(i)));
        let events = queued
            .into_iter()
            .chain(reclaims)
            .chain(refused)
            .filter_map(
                |(at, kind, account, region, zone, instance_type, instance)| {
                    Some(PoolEvent {
                        pool: Pool {
                            account,
                            region,
                            zone,
                            instance_type,
                        },
                        kind: PoolEventKind::parse(&kind)?,
                        at,
                        instance,
                    })
                },
            )
            .collect();
        Ok(PoolHistory { events })
    }
}
