//! Stops the cloud accepted whose instances had not stopped yet when read back: their intents
//! stay open, marked with what their outcome rows will say, until a listing shows the
//! instances stopped (`reconcile/stopping.rs`).

use super::audit::append_in;
use super::inventory::{remember_in, ActionDone};
use super::{NewAuditEntry, Result, Store};
use std::collections::HashMap;

/// A stop the cloud accepted, its outcome waiting for the instance to have stopped.
#[derive(Debug, Clone, PartialEq)]
pub struct AcceptedStop {
    /// Its intent.
    pub intent_seq: i64,
    /// The request id of the call the cloud accepted.
    pub request_id: Option<String>,
    /// Its outcome's reason so far (the decision's, and what the call did instead, if
    /// anything).
    pub reason: String,
}

impl Store {
    /// Appends the outcomes of a call (`outcomes`), remembers what the cloud carried out
    /// (`done`), and marks the intents of the stops it accepted whose instances had not
    /// stopped yet (`accepted`), as one transaction: a crash after it leaves no accepted stop
    /// looking like one whose call may not have been made.
    pub async fn record_outcomes(
        &self,
        outcomes: &[NewAuditEntry],
        done: &[ActionDone],
        accepted: &[AcceptedStop],
    ) -> Result<()> {
        let mut tx = self.pool.begin().await?;
        append_in(&mut tx, outcomes).await?;
        remember_in(&mut tx, done).await?;
        if !accepted.is_empty() {
            let seqs: Vec<i64> = accepted.iter().map(|a| a.intent_seq).collect();
            let request_ids: Vec<Option<String>> =
                accepted.iter().map(|a| a.request_id.clone()).collect();
            let reasons: Vec<String> = accepted.iter().map(|a| a.reason.clone()).collect();
            sqlx::query(
                "UPDATE open_intents AS o
                 SET accepted_request_id = x.request_id, accepted_reason = x.reason
                 FROM unnest($1::bigint[], $2::text[], $3::text[]) AS x(seq, request_id, reason)
                 WHERE o.seq = x.seq",
            )
            .bind(&seqs)
            .bind(&request_ids)
            .bind(&reasons)
            .execute(&mut *tx)
            .await?;
        }
        tx.commit().await?;
        Ok(())
    }

    /// The stops among the open intents `seqs` that the cloud accepted, by intent.
    pub async fn accepted_stops(&self, seqs: &[i64]) -> Result<HashMap<i64, AcceptedStop>> {
        if seqs.is_empty() {
            return Ok(HashMap::new());
        }
        let rows: Vec<(i64, Option<String>, String)> = sqlx::query_as(
            "SELECT seq, accepted_request_id, accepted_reason FROM open_intents
             WHERE seq = ANY($1) AND accepted_reason IS NOT NULL",
        )
        .bind(seqs)
        .fetch_all(&self.pool)
        .await?;
        Ok(rows
            .into_iter()
            .map(|(intent_seq, request_id, reason)| {
                let stop = AcceptedStop {
                    intent_seq,
                    request_id,
                    reason,
                };
                (intent_seq, stop)
            })
            .collect())
    }
}
