//! The later steps of the capacity reservations ebb made for starts (`start.reserve_capacity`,
//! made in `act/reserve.rs`): each is cancelled once its instance runs, or at its deadline, or
//! when its instance is gone; and a reservation step whose answer was lost is resolved from
//! what EC2 says now (DescribeCapacityReservations by ebb's token, the instance's target), once
//! its call can no longer be in flight, into exactly one outcome. Only a reservation carrying
//! the token ebb recorded is ever taken as ebb's.

use super::act::as_report;
use super::{Reconciler, TickContext};
use crate::cloud::{CapacityReservations, Provider, Reservation};
use crate::engine::{Action, Code, Decision};
use crate::fleet::{Fleet, InstanceState};
use crate::names::RESERVATION_TAG;
use crate::store::{
    AuditEntry, NewAuditEntry, Outcome, ReservationRow, ReservationStep, StoreError, INTERRUPTED,
};
use chrono::SecondsFormat;

/// Whether `action` is a reservation step: its lost answer is resolved here, not from the
/// instance's state.
pub(super) fn is_reservation_step(action: Option<Action>) -> bool {
    matches!(
        action,
        Some(Action::ReserveCapacity | Action::TargetReservation | Action::CancelReservation)
    )
}

impl<P: Provider> Reconciler<P> {
    /// Advances every live reservation one step: a lost answer resolved, or a cancellation due.
    pub(super) async fn reservations(
        &self,
        fleet: &Fleet,
        complete: &[String],
        tick: &mut TickContext<'_>,
    ) -> Result<(), StoreError> {
        let Some(reserver) = self.provider.capacity_reservations() else {
            // A cloud without reservations has none of ebb's to advance.
            return Ok(());
        };
        let rows = self.store.live_reservations().await?;
        if rows.is_empty() {
            return Ok(());
        }
        let pending: Vec<AuditEntry> = self
            .store
            .pending_intents()
            .await?
            .into_iter()
            .filter(|p| is_reservation_step(Action::parse(&p.entry.action)))
            .collect();
        let seqs: Vec<i64> = pending.iter().map(|p| p.seq).collect();
        let recorded = self.store.intents_recorded(&seqs).await?;
        for row in rows {
            let Some(step) = row.step else {
                continue;
            };
            let open = pending
                .iter()
                .find(|p| p.entry.instance.as_deref() == Some(row.instance.as_str()));
            if let Some(intent) = open {
                let since = self.intent_since(intent.entry.at, recorded.get(&intent.seq).copied());
                // A call still in flight may land after it is called failed.
                if tick.timers >= since + self.options.in_flight_for {
                    self.resolve_step(reserver, &row, step, intent, tick)
                        .await?;
                }
                continue;
            }
            let listed = fleet.instances.iter().find(|i| i.id == row.instance);
            let runs = listed.is_some_and(|i| {
                matches!(i.state, InstanceState::Running | InstanceState::Pending)
            });
            let gone = listed.is_none() && complete.contains(&row.region);
            let why = if gone {
                "its instance is gone".to_string()
            } else if runs {
                "its instance runs".to_string()
            } else if tick.now >= row.ends_at {
                format!(
                    "its deadline {} passed",
                    row.ends_at.to_rfc3339_opts(SecondsFormat::Secs, true)
                )
            } else {
                continue;
            };
            match step {
                ReservationStep::Reserving => {
                    self.settle_unmade(reserver, &row, &why, tick).await?
                }
                ReservationStep::Targeting
                | ReservationStep::Targeted
                | ReservationStep::Cancelling => {
                    self.cancel(reserver, &row, gone, &why, tick).await?
                }
                ReservationStep::Cancelled if gone => {
                    let step = ReservationStep::Released;
                    self.store
                        .set_reservation_step(&row.token, step, None, tick.now)
                        .await?
                }
                _ => {}
            }
        }
        Ok(())
    }

    /// A reservation never made for a start that did not happen (its instance runs without it,
    /// is gone, or the deadline passed): one found by its token after all is cancelled, else
    /// the row ends.
    async fn settle_unmade(
        &self,
        reserver: &P::CapacityReservations,
        row: &ReservationRow,
        why: &str,
        tick: &mut TickContext<'_>,
    ) -> Result<(), StoreError> {
        let found = reserver
            .reservations(&row.region, &row.instance, &row.token)
            .await;
        match found.map(|f| f.into_iter().find(|r| !r.state.ended())) {
            Ok(Some(r)) => {
                let made = Some((r.id.as_str(), r.instance_type.as_str()));
                let step = ReservationStep::Cancelling;
                self.store
                    .set_reservation_step(&row.token, step, made, tick.now)
                    .await?;
                let row = ReservationRow {
                    reservation_id: Some(r.id.clone()),
                    ..row.clone()
                };
                self.cancel(reserver, &row, false, why, tick).await
            }
            Ok(None) => {
                let step = ReservationStep::Refused;
                self.store
                    .set_reservation_step(&row.token, step, None, tick.now)
                    .await
            }
            Err(err) => {
                tracing::warn!(error = %err, "capacity reservations could not be read");
                Ok(())
            }
        }
    }

    /// Cancels `row`'s reservation, for `why`; the row ends `released` when the instance is
    /// `gone`, otherwise `cancelled` (the instance still starts into it until its next start).
    async fn cancel(
        &self,
        reserver: &P::CapacityReservations,
        row: &ReservationRow,
        gone: bool,
        why: &str,
        tick: &mut TickContext<'_>,
    ) -> Result<(), StoreError> {
        let Some(id) = row.reservation_id.as_deref() else {
            return Ok(());
        };
        if row.step != Some(ReservationStep::Cancelling) {
            let step = ReservationStep::Cancelling;
            self.store
                .set_reservation_step(&row.token, step, None, tick.now)
                .await?;
        }
        let reason = format!("capacity reservation {id} cancelled: {why}");
        let d = step_decision(
            row,
            Action::CancelReservation,
            Code::ReservationCancelled,
            reason,
        );
        let call = || async {
            let answer = reserver
                .cancel_reservation(&row.region, &row.instance, id)
                .await;
            as_report(&row.instance, &answer)
        };
        if self.one_call(&d, tick, call).await? == Some(Ok(())) {
            let step = match gone {
                true => ReservationStep::Released,
                false => ReservationStep::Cancelled,
            };
            self.store
                .set_reservation_step(&row.token, step, None, tick.now)
                .await?;
        }
        Ok(())
    }

    /// The one outcome of `intent`, a step of `row` whose answer was lost, from what EC2 says
    /// now; the row moves on when the step was carried out. A read that fails leaves it open.
    async fn resolve_step(
        &self,
        reserver: &P::CapacityReservations,
        row: &ReservationRow,
        step: ReservationStep,
        intent: &AuditEntry,
        tick: &mut TickContext<'_>,
    ) -> Result<(), StoreError> {
        let (region, instance, token) = (&row.region, &row.instance, &row.token);
        let resolved = match Action::parse(&intent.entry.action) {
            Some(Action::ReserveCapacity) => {
                let Ok(found) = reserver.reservations(region, instance, token).await else {
                    return Ok(());
                };
                match found.into_iter().next() {
                    Some(r) => Resolved::done(
                        format!(
                            "found capacity reservation {} tagged {RESERVATION_TAG}={token} \
                             after an interruption",
                            r.id
                        ),
                        ReservationStep::Targeting,
                        Some(r),
                    ),
                    None => Resolved::not_done(format!(
                        "no capacity reservation carries its token {token}: none was made"
                    )),
                }
            }
            Some(Action::TargetReservation) => {
                let Ok(target) = reserver.reservation_target(region, instance).await else {
                    return Ok(());
                };
                // A release (after a cancellation) targets nothing; a target, the reservation.
                let (want, next) = match step {
                    ReservationStep::Cancelled => (None, ReservationStep::Released),
                    _ => (row.reservation_id.clone(), ReservationStep::Targeted),
                };
                match target == want {
                    true => Resolved::done(
                        format!(
                            "found the instance made to start into {} after an interruption",
                            want.as_deref().unwrap_or("open capacity")
                        ),
                        next,
                        None,
                    ),
                    false => Resolved::not_done(format!(
                        "the instance starts into {}, not what was asked",
                        target.as_deref().unwrap_or("open capacity")
                    )),
                }
            }
            Some(Action::CancelReservation) => {
                let Ok(found) = reserver.reservations(region, instance, token).await else {
                    return Ok(());
                };
                match found.iter().find(|r| r.state.ended()) {
                    Some(r) => Resolved::done(
                        format!(
                            "found capacity reservation {} ended after an interruption",
                            r.id
                        ),
                        ReservationStep::Cancelled,
                        None,
                    ),
                    None => Resolved::not_done("the reservation is still held".to_string()),
                }
            }
            _ => return Ok(()),
        };
        let e = &intent.entry;
        let outcome = NewAuditEntry {
            at: tick.now,
            outcome: resolved.outcome,
            reason: format!("{}; {}", e.reason, resolved.detail),
            error: (resolved.outcome == Outcome::Failed)
                .then(|| format!("{INTERRUPTED}; {}", resolved.detail)),
            request_id: None,
            intent_seq: Some(intent.seq),
            ..e.clone()
        };
        self.store.append_outcomes(&[outcome], &[]).await?;
        if let Some(next) = resolved.next {
            let made = resolved.made.as_ref();
            let made = made.map(|r| (r.id.as_str(), r.instance_type.as_str()));
            self.store
                .set_reservation_step(token, next, made, tick.now)
                .await?;
        }
        Ok(())
    }
}

/// What a lost answer came to.
struct Resolved {
    outcome: Outcome,
    detail: String,
    /// The step the row moves to, when the call was carried out.
    next: Option<ReservationStep>,
    /// The reservation found made.
    made: Option<Reservation>,
}

impl Resolved {
    fn done(detail: String, next: ReservationStep, made: Option<Reservation>) -> Resolved {
        Resolved {
            outcome: Outcome::Succeeded,
            detail,
            next: Some(next),
            made,
        }
    }

    /// Not carried out: the row stays at its step, which is taken again.
    fn not_done(detail: String) -> Resolved {
        Resolved {
            outcome: Outcome::Failed,
            detail,
            next: None,
            made: None,
        }
    }
}

/// The decision a reservation step of `row` is audited as, with `reason`.
fn step_decision(row: &ReservationRow, action: Action, code: Code, reason: String) -> Decision {
    Decision {
        instance: row.instance.clone(),
        region: row.region.clone(),
        action,
        policy: row.policy.clone(),
        code,
        reason,
        dry_run: false,
        stop_at: None,
    }
}
