//! Instances: syncing what the cloud lists, and the prior facts the engine reads back.

pub(super) use super::sync_diff::micros;
pub use super::sync_diff::SyncReport;
use super::sync_diff::{Row, StoredRow, SyncDiff, ROWS_PER_STATEMENT};
use super::{Result, Store};
use crate::engine::{Action, Decision, InstanceFacts, Override, Prior};
use crate::fleet::{Billing, BillingModel, Instance, InstanceState, Owner};
use chrono::{DateTime, Utc};
use serde::Serialize;
use sqlx::types::Json;
use sqlx::PgConnection;
use std::collections::{BTreeMap, BTreeSet, HashSet};

/// One instance as the store knows it.
#[derive(Debug, Clone, PartialEq, Serialize, sqlx::FromRow)]
pub struct InstanceRecord {
    /// Instance id.
    pub id: String,
    /// Region.
    pub region: String,
    /// Instance type.
    pub instance_type: String,
    /// Last observed EC2 state.
    pub state: String,
    /// `on-demand` or `spot`.
    pub lifecycle: String,
    /// Last start, as the cloud reports it.
    pub launched_at: Option<DateTime<Utc>>,
    /// Tags.
    pub tags: Json<BTreeMap<String, String>>,
    /// What owns it besides ebb, derived from its tags when they were stored.
    pub owner: Option<Json<Owner>>,
    /// First sync that listed it.
    pub first_seen_at: DateTime<Utc>,
    /// Last sync that listed it.
    pub last_seen_at: DateTime<Utc>,
    /// When the cloud stopped listing it.
    pub gone_at: Option<DateTime<Utc>>,
    /// When ebb saw it enter its state.
    pub state_since: DateTime<Utc>,
    /// The policy that governed it at the last decision.
    pub policy: Option<String>,
    /// When ebb last stopped it (cleared when seen running again).
    pub stopped_by_ebb_at: Option<DateTime<Utc>>,
    /// When ebb last started it.
    pub started_by_ebb_at: Option<DateTime<Utc>>,
    /// When ebb last gave notice of a stop.
    pub notified_at: Option<DateTime<Utc>>,
    /// When a person started it, while it runs since (see [`InstanceFacts`]).
    pub started_by_person_at: Option<DateTime<Utc>>,
    /// The latest decision's action (`none` when nothing is to be done).
    pub decided_action: Option<String>,
    /// The latest decision's code.
    pub decided_code: Option<String>,
    /// The latest decision's reason.
    pub decided_reason: Option<String>,
    /// Since when the decision has been what it is.
    pub decided_since: Option<DateTime<Utc>>,
    /// How its listing said it is billed; `None` when not listed since ebb kept it.
    #[serde(skip)]
    pub billing: Option<Json<BillingModel>>,
}

impl InstanceRecord {
    /// How it is billed in `state`, as its listing said ([`Billing::EC2`]'s way for a row not
    /// listed since ebb kept it).
    pub fn billing_in(&self, state: InstanceState) -> Billing {
        super::fleet_at::billing(self.billing.as_ref(), &self.instance_type, state)
    }
}

/// One instance's latest decision, in the shape of `ebb plan --format json`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, sqlx::FromRow)]
pub struct PlannedAction {
    /// Instance id.
    pub instance: String,
    /// What is to be done.
    pub action: String,
    /// The governing policy.
    pub policy: Option<String>,
    /// Stable machine code.
    pub code: String,
    /// For people.
    pub reason: String,
}

/// The `SELECT` of [`InstanceRecord`]s from `instances i`, without a `WHERE` or an order.
macro_rules! select_instances {
    () => {
        "SELECT i.id, i.region, i.instance_type, i.state, i.lifecycle, i.launched_at, i.tags,
                i.owner, i.first_seen_at,
                CASE WHEN i.gone_at IS NULL THEN coalesce(r.synced_at, i.changed_at)
                     ELSE i.gone_at END AS last_seen_at,
                i.gone_at, i.state_since, i.policy, i.stopped_by_ebb_at, i.started_by_ebb_at,
                i.notified_at, i.started_by_person_at, i.decided_action, i.decided_code, i.decided_reason,
                i.decided_since, i.billing
         FROM instances i LEFT JOIN region_syncs r ON r.region = i.region"
    };
}
pub(super) use select_instances;

/// An action the cloud carried out, as ebb remembers it for its next decisions
/// (`stopped_by_ebb_at`, `started_by_ebb_at`, `notified_at`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ActionDone {
    /// The instance acted on.
    pub instance: String,
    /// What was done; only stops, hibernations, starts, notices and their withdrawals are
    /// remembered.
    pub action: Action,
    /// When.
    pub at: DateTime<Utc>,
}

/// Remembers `done` inside the caller's transaction, one statement per action and time.
pub(super) async fn remember_in(conn: &mut PgConnection, done: &[ActionDone]) -> Result<()> {
    // Each statement with the time it binds to $2, if it takes one.
    let mut statements: BTreeMap<(&str, Option<DateTime<Utc>>), Vec<String>> = BTreeMap::new();
    for d in done {
        let at = Some(micros(d.at));
        let key = match d.action {
            Action::Stop | Action::Hibernate => (
                "UPDATE instances SET stopped_by_ebb_at = $2 WHERE id = ANY($1)",
                at,
            ),
            Action::Start => (
                "UPDATE instances SET started_by_ebb_at = $2, stopped_by_ebb_at = NULL WHERE id = ANY($1)",
                at,
            ),
            Action::Notify => (
                "UPDATE instances SET notified_at = $2 WHERE id = ANY($1)",
                at,
            ),
            // A later stop needs a notice of its own.
            Action::WithdrawNotice => (
                "UPDATE instances SET notified_at = NULL WHERE id = ANY($1)",
                None,
            ),
            _ => continue,
        };
        statements.entry(key).or_default().push(d.instance.clone());
    }
    for ((sql, at), instances) in statements {
        let mut statement = sqlx::query(sql).bind(instances);
        if let Some(at) = at {
            statement = statement.bind(at);
        }
        statement.execute(&mut *conn).await?;
    }
    Ok(())
}

impl Store {
    /// Records what the cloud lists now in `regions` (and the regions of `instances`): new
    /// instances are inserted, changed ones updated, unchanged ones left as they are, and those
    /// no longer listed marked gone (never deleted). State changes become `instance_events`. An
    /// instance seen running again loses its `stopped_by_ebb_at`: its last stop is no longer
    /// ebb's. One that ebb stopped and that is listed up again without a listing in between
    /// that saw it stopped (a person's start between two ticks) is recorded as started: the
    /// event at its launch time where the cloud gives one, and `started_by_person_at`.
    pub async fn sync_inventory(
        &self,
        regions: &[String],
        instances: &[Instance],
        now: DateTime<Utc>,
    ) -> Result<SyncReport> {
        let now = micros(now);
        let regions: Vec<String> = regions
            .iter()
            .cloned()
            .chain(instances.iter().map(|i| i.region.clone()))
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect();
        let mut tx = self.pool.begin().await?;
        // One sync at a time: two replicas syncing at once would both insert the same ids.
        sqlx::query("SELECT pg_advisory_xact_lock(hashtext('ebb.inventory'))")
            .execute(&mut *tx)
            .await?;
        // The live rows of the regions, then those of listed ids the store has only as gone
        // (back in the listing): gone rows, which only grow, are never loaded otherwise.
        let mut rows: Vec<Row> = sqlx::query_as(
            "SELECT id, fingerprint, state, false, stopped_by_ebb_at FROM instances
             WHERE region = ANY($1) AND gone_at IS NULL",
        )
        .bind(&regions)
        .fetch_all(&mut *tx)
        .await?;
        let live: HashSet<&str> = rows.iter().map(|(id, ..)| id.as_str()).collect();
        let unseen: Vec<&str> = instances
            .iter()
            .map(|i| i.id.as_str())
            .filter(|id| !live.contains(id))
            .collect();
        if !unseen.is_empty() {
            let back: Vec<Row> = sqlx::query_as(
                "SELECT id, fingerprint, state, true, stopped_by_ebb_at FROM instances
                 WHERE id = ANY($1) AND gone_at IS NOT NULL",
            )
            .bind(&unseen)
            .fetch_all(&mut *tx)
            .await?;
            rows.extend(back);
        }
        let rows: Vec<StoredRow> = rows
            .into_iter()
            .map(
                |(id, fingerprint, state, gone, stopped_by_ebb_at)| StoredRow {
                    id,
                    fingerprint,
                    state,
                    gone,
                    stopped_by_ebb_at,
                },
            )
            .collect();
        let diff = SyncDiff::new(instances, &rows, now);
        diff.write(&mut tx, now).await?;
        sqlx::query(
            "INSERT INTO region_syncs (region, synced_at) SELECT r, $2 FROM UNNEST($1::text[]) AS r
             ON CONFLICT (region) DO UPDATE SET synced_at = excluded.synced_at",
        )
        .bind(&regions)
        .bind(now)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(diff.report())
    }

    /// What `engine::decide` needs from before: ebb's last actions on each live instance, and
    /// the overrides active at `now`.
    pub async fn prior(&self, now: DateTime<Utc>) -> Result<Prior> {
        type FactsRow = (
            String,
            Option<DateTime<Utc>>,
            Option<DateTime<Utc>>,
            Option<DateTime<Utc>>,
            Option<DateTime<Utc>>,
            Option<DateTime<Utc>>,
        );
        // The wait for a busy GPU is the last decision's, since it was first made.
        let rows: Vec<FactsRow> = sqlx::query_as(
            "SELECT id, stopped_by_ebb_at, started_by_ebb_at, notified_at, started_by_person_at,
                    CASE WHEN decided_code = 'busy_deferred' THEN decided_since END
             FROM instances
             WHERE gone_at IS NULL AND (stopped_by_ebb_at IS NOT NULL
                   OR started_by_ebb_at IS NOT NULL OR notified_at IS NOT NULL
                   OR started_by_person_at IS NOT NULL OR decided_code = 'busy_deferred')",
        )
        .fetch_all(&self.pool)
        .await?;
        let facts = rows
            .into_iter()
            .map(
                |(id, stopped, started, notified, person, busy_deferred_since)| {
                    let f = InstanceFacts {
                        stopped_by_ebb_at: stopped,
                        started_by_ebb_at: started,
                        notified_at: notified,
                        started_by_person_at: person,
                        busy_deferred_since,
                    };
                    (id, f)
                },
            )
            .collect();
        let overrides = self.overrides_at(now).await?;
        let refused = self.capacity_failures(now).await?;
        let refused_starts = self.refused_starts(now).await?;
        Ok(Prior::new(facts, overrides)
            .with_capacity_failures(refused)
            .with_refused_starts(refused_starts))
    }

    /// The overrides active at `now`, as the engine takes them.
    pub async fn overrides_at(&self, now: DateTime<Utc>) -> Result<Vec<Override>> {
        Ok(self
            .active_overrides(now)
            .await?
            .into_iter()
            .map(|o| Override {
                instance: o.instance,
                until: o.until,
                reason: o.reason,
                by: o.created_by,
            })
            .collect())
    }

    /// The live instances a person started (see [`InstanceFacts::started_by_person_at`]): a
    /// tick reads their GPUs over the window that decides whether such a start has gone idle.
    pub async fn started_by_person(&self) -> Result<HashSet<String>> {
        let ids: Vec<String> = sqlx::query_scalar(
            "SELECT id FROM instances WHERE started_by_person_at IS NOT NULL AND gone_at IS NULL",
        )
        .fetch_all(&self.pool)
        .await?;
        Ok(ids.into_iter().collect())
    }

    /// Remembers that ebb did `action` to `instances` at `at` (after the cloud accepted it).
    pub async fn record_action(
        &self,
        instances: &[String],
        action: Action,
        at: DateTime<Utc>,
    ) -> Result<()> {
        let done: Vec<ActionDone> = instances
            .iter()
            .map(|instance| ActionDone {
                instance: instance.clone(),
                action,
                at,
            })
            .collect();
        remember_in(&mut *self.pool.acquire().await?, &done).await
    }

    /// Records each instance's decision (its policy, action, code and reason), writing only
    /// the rows where it changed; `decided_since` keeps when the decision last changed. The
    /// reason of a decision to do nothing is kept from when it was made: its numbers (a GPU
    /// reading, say) change at every tick, and rewriting half of a large fleet's rows at each
    /// tick would cost more than the rest of the tick. All or nothing, in statements of
    /// at most 10,000 decisions.
    pub async fn record_decisions(&self, decisions: &[Decision], at: DateTime<Utc>) -> Result<u64> {
        let mut tx = self.pool.begin().await?;
        let mut written = 0;
        for chunk in decisions.chunks(ROWS_PER_STATEMENT) {
            written += record_decisions_in(&mut tx, chunk, at).await?;
        }
        tx.commit().await?;
        Ok(written)
    }
}

/// Records `decisions` (see [`Store::record_decisions`]) in one statement.
async fn record_decisions_in(
    conn: &mut PgConnection,
    decisions: &[Decision],
    at: DateTime<Utc>,
) -> Result<u64> {
    let ids: Vec<&str> = decisions.iter().map(|d| d.instance.as_str()).collect();
    let policies: Vec<Option<&str>> = decisions.iter().map(|d| d.policy.as_deref()).collect();
    let actions: Vec<&str> = decisions.iter().map(|d| d.action.as_str()).collect();
    let codes: Vec<&str> = decisions.iter().map(|d| d.code.as_str()).collect();
    // A reason may quote a read's error: kept without anything secret-looking in it.
    let reasons: Vec<String> = decisions
        .iter()
        .map(|d| crate::cloud::redact_secrets(&d.reason))
        .collect();
    let done = sqlx::query(
        "UPDATE instances AS i SET policy = n.policy, decided_action = n.action,
                    decided_code = n.code, decided_reason = n.reason, decided_since = $6
             FROM UNNEST($1::text[], $2::text[], $3::text[], $4::text[], $5::text[])
                  AS n(id, policy, action, code, reason)
             WHERE i.id = n.id
               AND ((i.policy, i.decided_action, i.decided_code)
                        IS DISTINCT FROM (n.policy, n.action, n.code)
                    OR (n.action <> 'none' AND i.decided_reason IS DISTINCT FROM n.reason))",
    )
    .bind(&ids)
    .bind(&policies)
    .bind(&actions)
    .bind(&codes)
    .bind(&reasons)
    .bind(micros(at))
    .execute(conn)
    .await?;
    Ok(done.rows_affected())
}
