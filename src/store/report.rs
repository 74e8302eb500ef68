//! What `ebb report` is worked out from (`crate::report`), read by index: ebb's stops and
//! starts in the window and each instance's last one before it, the state changes of those
//! instances from then on, their facts, the migrations and overrides of the window, and the
//! Auto Scaling groups' changes in it (and each group's last one before it, when down). The
//! audit log and the state changes are read only over the window (and, for the instances
//! still stopped at its start, from their last stop), never whole. The statements are not
//! kept prepared: each is planned for its own window (a generic plan, made for any window,
//! could scan the whole log for a 30-day one), and a report is rare enough that planning costs
//! nothing that matters.

use super::inventory::micros;
use super::{Result, Store};
use crate::fleet::money::HeldCommitments;
use crate::report::{
    ActionRecord, EbbAction, GroupChange, History, InstanceInfo, OverrideSpan, ReclaimSpan,
    ReservationSpan, SpotMove, StateChange, StopSaved,
};
use chrono::{DateTime, Utc};
use futures_util::TryFutureExt;
use sqlx::types::Json;
use std::collections::{BTreeMap, HashMap};

/// The audit rows of ebb's own succeeded stops, hibernations and starts: the predicate of the
/// partial indexes of migration 0010, which the statements repeat so that they are used.
macro_rules! ebb_actions {
    () => {
        "actor = 'scheduler' AND NOT dry_run AND outcome = 'succeeded'
         AND action IN ('stop', 'hibernate', 'start')"
    };
}

/// ebb's actions in `[since, until)`, and the last one before `since`, when it is a stop, of
/// every instance that may have been kept stopped by it at `since`: one seen since then
/// entering a state that ends a stopped stretch (running, terminated, gone), or a live one
/// still stopped by ebb now. Any stretch open at `since` either ended by such a change or is
/// still open, so those two sets hold every instance it kept stopped.
const ACTIONS: &str = concat!(
    "WITH candidates AS (
         SELECT DISTINCT instance FROM instance_events
         WHERE at >= $1
           AND to_state IN ('pending', 'running', 'shutting-down', 'terminated', 'gone')
         UNION
         SELECT id FROM instances WHERE gone_at IS NULL AND stopped_by_ebb_at < $1
     )
     SELECT last.instance, last.at, last.action, last.policy, last.code
     FROM candidates AS c CROSS JOIN LATERAL (
         SELECT instance, at, action, policy, code FROM audit_log
         WHERE instance = c.instance AND at < $1 AND ",
    ebb_actions!(),
    "
         ORDER BY at DESC LIMIT 1
     ) AS last
     WHERE last.action <> 'start'
     UNION ALL
     SELECT instance, at, action, policy, code FROM audit_log
     WHERE at >= $1 AND at < $2 AND instance IS NOT NULL AND ",
    ebb_actions!()
);

/// The state changes of each instance `$1` from its time `$2` to `$3`, each instance's by its
/// index (`OFFSET 0` keeps the planner from joining the whole table instead).
const CHANGES: &str = "SELECT e.instance, e.at, e.to_state
     FROM UNNEST($1::text[], $2::timestamptz[]) AS c(instance, since)
     CROSS JOIN LATERAL (
         SELECT instance, at, to_state FROM instance_events
         WHERE instance = c.instance AND at >= c.since AND at < $3
         OFFSET 0
     ) AS e";

/// The facts of each instance `$1`, each by its primary key: for thousands of ids the planner
/// would rather scan the table, which grows with every instance ever seen.
const FACTS: &str = "SELECT i.id, i.region, i.instance_type, i.tags, i.policy, i.volumes,
            i.elastic_ips, i.lifecycle = 'spot'
     FROM UNNEST($1::text[]) AS n(id)
     CROSS JOIN LATERAL (
         SELECT id, region, instance_type, tags, policy, volumes, elastic_ips, lifecycle
         FROM instances WHERE id = n.id OFFSET 0
     ) AS i";

/// The groups' changes in `[since, until)`, and each group's last change before `since` when
/// it was a scale-down (the group was still down at `since`).
const GROUP_CHANGES: &str = "SELECT region, name, at, scale_down, up_desired, to_desired,
            instance_type, policy
     FROM scaling_group_changes WHERE at >= $1 AND at < $2
     UNION ALL
     SELECT * FROM (
         SELECT DISTINCT ON (region, name) region, name, at, scale_down, up_desired, to_desired,
                instance_type, policy
         FROM scaling_group_changes WHERE at < $1
         ORDER BY region, name, at DESC
     ) AS last
     WHERE last.scale_down";

/// A row of [`ACTIONS`]: instance, time, action, policy, the outcome's code.
type ActionRow = (
    String,
    DateTime<Utc>,
    String,
    Option<String>,
    Option<String>,
);

/// A row of [`GROUP_CHANGES`].
type GroupRow = (
    String,
    String,
    DateTime<Utc>,
    bool,
    i32,
    i32,
    Option<String>,
    Option<String>,
);

type InstanceRow = (
    String,
    String,
    String,
    Json<BTreeMap<String, String>>,
    Option<String>,
    Option<Json<Vec<crate::fleet::money::Volume>>>,
    Option<i32>,
    bool,
);

/// A reclaim as a report reads it: instance, policy, region, its image's volumes, due, box
/// terminated, restore asked, image deregistered.
type ReclaimRow = (
    String,
    String,
    String,
    Option<Json<Vec<crate::fleet::money::Volume>>>,
    DateTime<Utc>,
    Option<DateTime<Utc>>,
    Option<DateTime<Utc>>,
    Option<DateTime<Utc>>,
);
/// A capacity reservation as a report reads it: instance, region, type, made, cancelled.
type HeldReservation = (String, String, String, DateTime<Utc>, Option<DateTime<Utc>>);

impl Store {
    /// What a report over `[since, until)` is worked out from; what ran in it too, where the
    /// commitments `held` can cover it.
    pub async fn report_history(
        &self,
        since: DateTime<Utc>,
        until: DateTime<Utc>,
        held: &HeldCommitments,
    ) -> Result<History> {
        let stops = self.report_stop_history(since, until).await?;
        let rest = self.report_other_history(since, until).await?;
        let running = self.report_running(since, until, held).await?;
        let mut instances = rest.instances;
        instances.extend(stops.instances);
        Ok(History {
            actions: stops.actions,
            changes: stops.changes,
            instances,
            running,
            ..rest
        })
    }

    /// The part of a report's history over `[since, until)` that ebb's stops make: its
    /// actions, the state changes of their instances, and those instances' facts.
    pub async fn report_stop_history(
        &self,
        since: DateTime<Utc>,
        until: DateTime<Utc>,
    ) -> Result<History> {
        let (since, until) = (micros(since), micros(until));
        let actions = self.report_actions(since, until).await?;
        let mut first: BTreeMap<&str, DateTime<Utc>> = BTreeMap::new();
        for a in &actions {
            let at = first.entry(&a.instance).or_insert(a.at);
            *at = (*at).min(a.at);
        }
        let (ids, froms): (Vec<&str>, Vec<DateTime<Utc>>) = first.into_iter().unzip();
        let changes = sqlx::query_as::<_, (String, DateTime<Utc>, String)>(CHANGES)
            .persistent(false)
            .bind(&ids)
            .bind(&froms)
            .bind(until)
            .fetch_all(&self.pool)
            .err_into();
        // Both read by the same instances, each on a connection of its own.
        let (changes, instances) = tokio::try_join!(changes, self.report_facts(&ids))?;
        let changes = changes
            .into_iter()
            .map(|(instance, at, to_state)| StateChange {
                instance,
                at,
                to_state,
            })
            .collect();
        Ok(History {
            actions,
            changes,
            instances,
            ..History::default()
        })
    }

    /// The rest of a report's history over `[since, until)`: spot migrations, overrides and
    /// groups' changes, and the facts of the instances they name.
    pub async fn report_other_history(
        &self,
        since: DateTime<Utc>,
        until: DateTime<Utc>,
    ) -> Result<History> {
        let (since, until) = (micros(since), micros(until));
        let migrations = self.migrations_between(since, until).await?;
        let overrides: Vec<(String, DateTime<Utc>, DateTime<Utc>)> = sqlx::query_as(
            "SELECT instance, created_at, least(until, revoked_at) FROM overrides
             WHERE until > $1 AND created_at < $2 AND (revoked_at IS NULL OR revoked_at > $1)",
        )
        .persistent(false)
        .bind(since)
        .bind(until)
        .fetch_all(&self.pool)
        .await?;
        let reservations: Vec<HeldReservation> = sqlx::query_as(
            "SELECT instance, region, instance_type, made_at, cancelled_at
                 FROM capacity_reservations
                 WHERE made_at IS NOT NULL AND instance_type IS NOT NULL AND made_at < $2
                   AND (cancelled_at IS NULL OR cancelled_at > $1)",
        )
        .persistent(false)
        .bind(since)
        .bind(until)
        .fetch_all(&self.pool)
        .await?;
        let reclaims = self.report_reclaims(since, until).await?;
        let mut named: Vec<&str> = migrations.iter().map(|m| m.original.as_str()).collect();
        named.extend(overrides.iter().map(|(i, ..)| i.as_str()));
        named.extend(reservations.iter().map(|(i, ..)| i.as_str()));
        named.extend(reclaims.iter().map(|r| r.instance.as_str()));
        named.sort_unstable();
        named.dedup();
        let instances = self.report_facts(&named).await?;
        let groups = self.report_group_changes(since, until).await?;
        Ok(History {
            instances,
            migrations,
            overrides: overrides
                .into_iter()
                .map(|(instance, created_at, ends_at)| OverrideSpan {
                    instance,
                    created_at,
                    ends_at,
                })
                .collect(),
            groups,
            reservations: reservations
                .into_iter()
                .map(
                    |(instance, region, instance_type, from, to)| ReservationSpan {
                        instance,
                        region,
                        instance_type,
                        from,
                        to,
                    },
                )
                .collect(),
            reclaims,
            ..History::default()
        })
    }

    /// The reclaims whose proven image was kept, or whose box was terminated, at some time in
    /// `[since, until)`.
    async fn report_reclaims(
        &self,
        since: DateTime<Utc>,
        until: DateTime<Utc>,
    ) -> Result<Vec<ReclaimSpan>> {
        let rows: Vec<ReclaimRow> = sqlx::query_as(
            "SELECT instance, policy, region, image_volumes, due_at, terminated_at,
                    restore_asked_at, image_deleted_at
             FROM reclaims
             WHERE (image_volumes IS NOT NULL AND due_at < $2
                    AND (image_deleted_at IS NULL OR image_deleted_at > $1))
                OR (terminated_at < $2 AND (restore_asked_at IS NULL OR restore_asked_at > $1))",
        )
        .persistent(false)
        .bind(since)
        .bind(until)
        .fetch_all(&self.pool)
        .await?;
        Ok(rows
            .into_iter()
            .map(
                |(instance, policy, region, volumes, due_at, terminated, restore, deleted)| {
                    ReclaimSpan {
                        instance,
                        policy,
                        region,
                        volumes: volumes.map(|v| v.0),
                        imaged_from: due_at,
                        terminated_at: terminated,
                        restore_asked_at: restore,
                        image_deleted_at: deleted,
                    }
                },
            )
            .collect())
    }

    /// The groups' changes a report over `[since, until)` counts from.
    async fn report_group_changes(
        &self,
        since: DateTime<Utc>,
        until: DateTime<Utc>,
    ) -> Result<Vec<GroupChange>> {
        let rows: Vec<GroupRow> = sqlx::query_as(GROUP_CHANGES)
            .persistent(false)
            .bind(since)
            .bind(until)
            .fetch_all(&self.pool)
            .await?;
        Ok(rows
            .into_iter()
            .map(
                |(region, group, at, scale_down, up_desired, to_desired, instance_type, policy)| {
                    GroupChange {
                        region,
                        group,
                        at,
                        scale_down,
                        up_desired,
                        to_desired,
                        instance_type,
                        policy,
                    }
                },
            )
            .collect())
    }

    /// ebb's own stops, hibernations and starts that succeeded in the window, oldest first.
    async fn report_actions(
        &self,
        since: DateTime<Utc>,
        until: DateTime<Utc>,
    ) -> Result<Vec<ActionRecord>> {
        let rows: Vec<ActionRow> = sqlx::query_as(ACTIONS)
            .persistent(false)
            .bind(since)
            .bind(until)
            .fetch_all(&self.pool)
            .await?;
        Ok(rows
            .into_iter()
            .filter_map(|(instance, at, action, policy, code)| {
                let action = match action.as_str() {
                    "stop" => EbbAction::Stop,
                    "hibernate" => EbbAction::Hibernate,
                    "start" => EbbAction::Start,
                    _ => return None,
                };
                Some(ActionRecord {
                    instance,
                    at,
                    action,
                    policy,
                    saved: StopSaved::of_code(code.as_deref()),
                })
            })
            .collect())
    }

    /// The region, type, tags, policy and market of each named instance, as last listed.
    async fn report_facts(&self, named: &[&str]) -> Result<HashMap<String, InstanceInfo>> {
        let facts: Vec<InstanceRow> = sqlx::query_as(FACTS)
            .persistent(false)
            .bind(named)
            .fetch_all(&self.pool)
            .await?;
        Ok(facts
            .into_iter()
            .map(
                |(id, region, instance_type, tags, policy, volumes, elastic_ips, spot)| {
                    let info = InstanceInfo {
                        region,
                        instance_type,
                        tags: tags.0,
                        policy,
                        attached: crate::fleet::money::Attached {
                            volumes: volumes.map(|v| v.0),
                            elastic_ips: elastic_ips.and_then(|n| u32::try_from(n).ok()),
                        },
                        interruptible: spot,
                    };
                    (id, info)
                },
            )
            .collect())
    }

    /// The spot migrations in progress at some time in `[since, until)`, as far as their
    /// savings go.
    async fn migrations_between(
        &self,
        since: DateTime<Utc>,
        until: DateTime<Utc>,
    ) -> Result<Vec<SpotMove>> {
        let records = self.migrations_overlapping(since, until).await?;
        Ok(records
            .into_iter()
            .map(|m| {
                let reclaimed = m.interruptions.0.iter().map(|i| i.at).max();
                SpotMove {
                    earlier_until: reclaimed.max(m.ended_at),
                    original: m.original,
                    policy: m.policy,
                    created_at: m.created_at,
                    on_spot: m.market == crate::cloud::Market::Spot,
                    running_since: m.running_since,
                    ended_at: m.ended_at,
                    on_demand_price: m.on_demand_price,
                    price: m.price,
                    saved_before: m.saved_before,
                }
            })
            .collect())
    }
}
