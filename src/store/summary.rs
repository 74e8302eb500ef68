//! What each instance's row keeps of its audit history, written in the transaction of every
//! append: the newest audit row about it, and the scheduler's failure streak on it. A tick reads
//! these instead of the log, so its work grows with the live fleet, never with history.

use super::audit_entry::{AuditEntry, NewAuditEntry, Outcome, INTERRUPTED};
use super::{Result, Store};
use crate::names::ACTOR;
use chrono::{DateTime, Utc};
use sqlx::PgConnection;
use std::collections::{BTreeMap, HashMap};

/// Failed attempts of one action in a row on one instance.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FailureStreak {
    /// The action that keeps failing.
    pub action: String,
    /// How many of its latest outcomes in a row failed.
    pub failures: u32,
    /// When the last failure was recorded.
    pub last_at: DateTime<Utc>,
    /// The code of the last failure's row (`insufficient_capacity` for a start EC2 had no
    /// capacity for, which is retried sooner).
    pub code: Option<String>,
}

/// How one append changes an instance's failure streak.
#[derive(Debug, PartialEq, Eq)]
enum StreakChange {
    /// Its newest real outcome succeeded: no streak.
    Ended,
    /// It failed `failures` times in a row at `action`, the last at `at` with `code`; with
    /// `continues`,
    /// every outcome of the append was such a failure, so a streak of `action` already recorded
    /// goes on.
    Failing {
        action: String,
        code: Option<String>,
        failures: i32,
        at: DateTime<Utc>,
        continues: bool,
    },
}

/// The failing streaks of one append as columns, bound to one `UPDATE … FROM unnest(…)`.
#[derive(Default)]
struct FailingColumns<'a> {
    ids: Vec<&'a str>,
    actions: Vec<String>,
    codes: Vec<Option<String>>,
    failures: Vec<i32>,
    ats: Vec<DateTime<Utc>>,
    continues: Vec<bool>,
}

/// Whether `e` counts for the failure streak: a real outcome of the scheduler that succeeded or
/// failed, and not an interruption (resolved from state after a crash, not a refusal).
fn counts_for_streak(e: &NewAuditEntry) -> bool {
    e.actor == ACTOR
        && !e.dry_run
        && matches!(e.outcome, Outcome::Succeeded | Outcome::Failed)
        && !e
            .error
            .as_deref()
            .is_some_and(|err| err.starts_with(&format!("{INTERRUPTED};")))
}

/// The streak changes of `rows` (in order), by instance.
fn streak_changes(rows: &[AuditEntry]) -> BTreeMap<&str, StreakChange> {
    let mut outcomes: BTreeMap<&str, Vec<&NewAuditEntry>> = BTreeMap::new();
    for r in rows {
        if let (Some(id), true) = (r.entry.instance.as_deref(), counts_for_streak(&r.entry)) {
            outcomes.entry(id).or_default().push(&r.entry);
        }
    }
    outcomes
        .into_iter()
        .map(|(id, list)| {
            let last = list[list.len() - 1];
            let change = if last.outcome == Outcome::Succeeded {
                StreakChange::Ended
            } else {
                let in_a_row = list
                    .iter()
                    .rev()
                    .take_while(|e| e.outcome == Outcome::Failed && e.action == last.action)
                    .count();
                StreakChange::Failing {
                    action: last.action.clone(),
                    code: last.code.clone(),
                    failures: i32::try_from(in_a_row).unwrap_or(i32::MAX),
                    at: last.at,
                    continues: in_a_row == list.len(),
                }
            };
            (id, change)
        })
        .collect()
}

/// Brings the summaries of the instances `rows` are about up to date, inside the append's
/// transaction.
pub(super) async fn update_in(conn: &mut PgConnection, rows: &[AuditEntry]) -> Result<()> {
    let mut newest: BTreeMap<&str, i64> = BTreeMap::new();
    for r in rows {
        if let Some(id) = r.entry.instance.as_deref() {
            newest.insert(id, r.seq);
        }
    }
    if newest.is_empty() {
        return Ok(());
    }
    let (ids, seqs): (Vec<&str>, Vec<i64>) = newest.into_iter().unzip();
    sqlx::query(
        "UPDATE instances SET last_audit_seq = v.seq
         FROM unnest($1::text[], $2::bigint[]) AS v(id, seq) WHERE instances.id = v.id",
    )
    .bind(&ids)
    .bind(&seqs)
    .execute(&mut *conn)
    .await?;
    // One statement for the streaks that ended and one for those that failed, not one per
    // instance: a backlog tick records tens of thousands of outcomes in one append.
    let mut ended: Vec<&str> = Vec::new();
    let mut failing = FailingColumns::default();
    for (id, change) in streak_changes(rows) {
        match change {
            StreakChange::Ended => ended.push(id),
            StreakChange::Failing {
                action,
                code,
                failures,
                at,
                continues,
            } => {
                failing.ids.push(id);
                failing.actions.push(action);
                failing.codes.push(code);
                failing.failures.push(failures);
                failing.ats.push(at);
                failing.continues.push(continues);
            }
        }
    }
    if !ended.is_empty() {
        sqlx::query(
            "UPDATE instances SET failing_action = NULL, failing_code = NULL, failures = 0,
                 last_failed_at = NULL
             WHERE id = ANY($1)",
        )
        .bind(&ended)
        .execute(&mut *conn)
        .await?;
    }
    if !failing.ids.is_empty() {
        sqlx::query(
            "UPDATE instances SET
                 failures = CASE WHEN v.continues AND instances.failing_action = v.action
                                 THEN instances.failures + v.failures ELSE v.failures END,
                 failing_action = v.action, last_failed_at = v.at, failing_code = v.code
             FROM unnest($1::text[], $2::text[], $3::int4[], $4::timestamptz[], $5::bool[], $6::text[])
                  AS v(id, action, failures, at, continues, code)
             WHERE instances.id = v.id",
        )
        .bind(&failing.ids)
        .bind(&failing.actions)
        .bind(&failing.failures)
        .bind(&failing.ats)
        .bind(&failing.continues)
        .bind(&failing.codes)
        .execute(&mut *conn)
        .await?;
    }
    Ok(())
}

impl Store {
    /// Whether the newest audit row about each of `instances` is a dry run of `(action, code)`:
    /// a dry-run decision that holds for hours need not be written again at every tick.
    pub async fn last_dry_runs(
        &self,
        instances: &[String],
    ) -> Result<HashMap<String, (String, Option<String>)>> {
        let rows: Vec<(String, String, Option<String>)> = sqlx::query_as(
            "SELECT i.id, a.action, a.code FROM instances AS i
             JOIN audit_log AS a ON a.seq = i.last_audit_seq
             WHERE i.id = ANY($1) AND a.dry_run",
        )
        .bind(instances)
        .fetch_all(&self.pool)
        .await?;
        Ok(rows
            .into_iter()
            .map(|(instance, action, code)| (instance, (action, code)))
            .collect())
    }

    /// For each of `instances` whose latest real outcome from the scheduler failed: the action,
    /// how many of its latest outcomes in a row failed, and when the last did. What the
    /// reconciler backs off by. Interrupted actions (see [`INTERRUPTED`]) do not count.
    pub async fn failure_streaks(
        &self,
        instances: &[String],
    ) -> Result<HashMap<String, FailureStreak>> {
        type StreakRow = (String, String, i32, DateTime<Utc>, Option<String>);
        let rows: Vec<StreakRow> = sqlx::query_as(
            "SELECT id, failing_action, failures, last_failed_at, failing_code FROM instances
             WHERE id = ANY($1) AND failures > 0",
        )
        .bind(instances)
        .fetch_all(&self.pool)
        .await?;
        Ok(rows
            .into_iter()
            .map(|(instance, action, failures, last_at, code)| {
                let streak = FailureStreak {
                    action,
                    failures: u32::try_from(failures).unwrap_or(0),
                    last_at,
                    code,
                };
                (instance, streak)
            })
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::NewAuditEntry;

    fn row(seq: i64, action: &str, outcome: Outcome, error: Option<&str>) -> AuditEntry {
        AuditEntry {
            seq,
            entry: NewAuditEntry {
                instance: Some("i-1".into()),
                outcome,
                error: error.map(str::to_string),
                ..NewAuditEntry::event(DateTime::UNIX_EPOCH, ACTOR, action, "r".into())
            },
            prev_hash: Vec::new(),
            hash: Vec::new(),
        }
    }

    #[test]
    fn a_streak_counts_the_newest_actions_failures_in_a_row() {
        let rows = [
            row(1, "stop", Outcome::Failed, Some("denied")),
            row(2, "start", Outcome::Failed, Some("no capacity")),
            row(
                3,
                "start",
                Outcome::Failed,
                Some("interrupted; found stopped"),
            ),
            row(4, "start", Outcome::Failed, Some("no capacity")),
        ];
        let changes = streak_changes(&rows);
        assert_eq!(
            changes["i-1"],
            StreakChange::Failing {
                action: "start".into(),
                code: None,
                failures: 2,
                at: DateTime::UNIX_EPOCH,
                continues: false
            }
        );
        let rows = [
            row(1, "start", Outcome::Failed, None),
            row(2, "start", Outcome::Failed, None),
        ];
        assert!(matches!(
            streak_changes(&rows)["i-1"],
            StreakChange::Failing {
                failures: 2,
                continues: true,
                ..
            }
        ));
        let rows = [
            row(1, "stop", Outcome::Failed, None),
            row(2, "stop", Outcome::Succeeded, None),
        ];
        assert_eq!(streak_changes(&rows)["i-1"], StreakChange::Ended);
        let rows = [row(1, "stop", Outcome::Skipped, None)];
        assert!(streak_changes(&rows).is_empty());
    }
}
