//! Undoing a migration (`rolling_back` until the original runs again, then `rolled_back`;
//! `failed` when the original is gone), ending one that ebb stops following, and the image
//! kept after the end while it is the only copy of the workload's disks.

use super::super::{current_savings, Alert};
use super::unknown::Landed;
use super::{first_error, request_id, Run};
use crate::cloud::{ActionReport, Provider, SpotMoves};
use crate::engine::{Action, Code};
use crate::fleet::InstanceState;
use crate::names::MIGRATING_TAG;
use crate::spot::State;
use crate::store::{Outcome, StoreError};

/// Whether the original exists, as EC2 answered for it by id.
pub(super) enum Original {
    /// It exists (stopped, running or between the two), in this state.
    There(InstanceState),
    /// EC2 no longer knows it, or it is terminated or shutting down.
    Gone,
    /// It could not be read: why.
    Unread(String),
}

impl<P: Provider> Run<'_, P> {
    /// Undoes the migration, the original first: starts it again, and only once EC2 accepted
    /// that terminates the replacement, removes the `ebb:migrating` tag and deletes the image.
    /// A call that fails (no capacity to start the original) leaves the migration
    /// `rolling_back`, tried again after a growing wait; the replacement keeps running until
    /// then, as the workload may be on it. Only an original that is gone makes it `failed`.
    pub(super) async fn roll_back(&mut self, why: String) -> Result<(), StoreError> {
        if self.m.outgoing.is_some() {
            // An early move's failure is never undone through the original: the replacement it
            // replaces still serves the workload.
            return self.abandon(why).await;
        }
        self.m.error = Some(why.clone());
        let original = self.m.original.clone();
        let state = match self.original().await {
            Original::There(state) => state,
            Original::Gone => {
                return self
                    .fail(format!(
                        "rolling back ({why}): {original} is gone, nothing to start; {}",
                        self.what_is_left()
                    ))
                    .await
            }
            Original::Unread(e) => return self.retry_roll_back(&why, e).await,
        };
        // Started only when not running: a move undone before its stop leaves it running.
        if state != InstanceState::Running {
            if let Err(e) = self.start_original().await? {
                return self.retry_roll_back(&why, e).await;
            }
        }
        if let Some(current) = self.m.current.clone() {
            let reason = format!("roll back: terminate the replacement {current}");
            if let Err(e) = self
                .terminate_replacement(&current, Code::SpotRollback, &reason)
                .await?
            {
                return self.retry_roll_back(&why, e).await;
            }
        }
        if let Err(e) = self.untag_original(Code::SpotRollback).await? {
            return self.retry_roll_back(&why, e).await;
        }
        if self.image_left() {
            // The original runs again: the image is not the only copy of its disks.
            let reason = format!("roll back, {original} runs again");
            if let Err(e) = self.delete_image_call(Code::SpotRollback, &reason).await? {
                return self.retry_roll_back(&why, e).await;
            }
        }
        self.m.failures = 0;
        self.m.retry_at = None;
        self.go(
            State::RolledBack,
            format!("rolled back: {original} runs again ({why})"),
        )
        .await
    }

    /// A roll-back call failed: `rolling_back`, tried again after a wait.
    async fn retry_roll_back(&mut self, why: &str, error: String) -> Result<(), StoreError> {
        self.back_off();
        let detail = format!(
            "rolling back ({why}): {error}; tried again after {} min",
            super::super::retry_wait(self.m.failures).num_minutes()
        );
        self.go(State::RollingBack, detail).await
    }

    /// What the migration leaves for people, when it cannot be undone.
    fn what_is_left(&self) -> String {
        let current = self.m.current.as_deref().map_or(String::new(), |c| {
            format!("the replacement {c} keeps running; ")
        });
        match &self.m.image {
            Some(image) => format!("{current}the image {image} is kept; launch from it by hand"),
            None => format!("{current}no image was made"),
        }
    }

    /// Whether the original exists, read by id.
    pub(super) async fn original(&self) -> Original {
        match self.status(&self.m.original).await {
            Ok(Some(s))
                if !matches!(
                    s.state,
                    InstanceState::Terminated | InstanceState::ShuttingDown
                ) =>
            {
                Original::There(s.state)
            }
            Ok(_) => Original::Gone,
            Err(e) => Original::Unread(format!("cannot read {}: {e}", self.m.original)),
        }
    }

    /// StartInstances of the original, as an action; none when an earlier call whose answer
    /// was lost is found to have started it (`unknown.rs`).
    async fn start_original(&mut self) -> Result<Result<(), String>, StoreError> {
        if self.took(|l| matches!(l, Landed::Start)).is_some() {
            return Ok(Ok(()));
        }
        let original = self.m.original.clone();
        let reason = format!("roll back: start {original} again");
        let seq = self.unfenced_intent(Code::SpotRollback, &reason).await?;
        let report = self
            .p
            .start(&self.m.region, std::slice::from_ref(&original))
            .await;
        Ok(self.note(
            seq,
            Code::SpotRollback,
            &report,
            format!("started {original} again"),
        ))
    }

    /// TerminateInstances of a replacement ebb launched, as an action (none when an earlier call
    /// whose answer was lost is found to have terminated it); on failure it stays recorded, so
    /// that it is never left running untracked.
    pub(super) async fn terminate_replacement(
        &mut self,
        id: &str,
        code: Code,
        reason: &str,
    ) -> Result<Result<(), String>, StoreError> {
        let landed = self.took(|l| matches!(l, Landed::Terminate(t) if t == id));
        let result = match landed {
            Some(_) => Ok(()),
            None => {
                let seq = self.unfenced_intent(code, reason).await?;
                let report = self.spot.terminate(&self.m.region, &[id.to_string()]).await;
                self.note(seq, code, &report, format!("terminated {id}"))
            }
        };
        if result.is_ok() && self.m.current.as_deref() == Some(id) {
            self.m.current = None;
        }
        Ok(result)
    }

    /// Removes the original's `ebb:migrating` tag, as an action (none when an earlier call
    /// whose answer was lost is found to have removed it), so that the rules govern it again.
    pub(super) async fn untag_original(
        &mut self,
        code: Code,
    ) -> Result<Result<(), String>, StoreError> {
        if self.took(|l| matches!(l, Landed::Untag)).is_some() {
            return Ok(Ok(()));
        }
        let original = self.m.original.clone();
        let reason = format!("remove the {MIGRATING_TAG} tag of {original}");
        let seq = self.unfenced_intent(code, &reason).await?;
        let keys = [MIGRATING_TAG.to_string()];
        let report = self
            .p
            .untag(&self.m.region, std::slice::from_ref(&original), &keys)
            .await;
        Ok(self.note(
            seq,
            code,
            &report,
            format!("removed {MIGRATING_TAG} from {original}"),
        ))
    }

    /// Deletes the migration's image, one action per EC2 call: DeregisterImage, then
    /// DeleteSnapshot of each of its snapshots (EC2 refuses to delete a snapshot a registered
    /// image uses). The snapshots are recorded in the row before the image is deregistered,
    /// and each leaves the record once deleted, so that a crash or a failure between the calls
    /// leaves none behind untracked: the next attempt goes on where this one stopped. `why` is
    /// why the image may go.
    pub(super) async fn delete_image_call(
        &mut self,
        code: Code,
        why: &str,
    ) -> Result<Result<(), String>, StoreError> {
        let region = self.m.region.clone();
        let image = self.m.image.clone();
        if let Some(image) = &image {
            if self.m.snapshots.is_empty() {
                // A row from before snapshots were recorded: learn them first.
                match self.spot.image(&region, image).await {
                    Ok(Some(found)) => self.m.snapshots = found.snapshots,
                    Ok(None) => {}
                    Err(e) => return Ok(Err(format!("reading image {image}: {e}"))),
                }
            }
            // Once deregistered, only the row knows the snapshots: it is written first, with
            // the step's audit entries so far.
            let audit = std::mem::take(&mut self.audit);
            self.store.save_migration(&self.m, &audit).await?;
            let reason = format!("deregister image {image}: {why}");
            let seq = self.unfenced_intent(code, &reason).await?;
            let result = self.spot.deregister_image(&region, image).await;
            let detail = format!("deregistered image {image}");
            let done = result.as_ref().map(|()| detail.as_str());
            self.outcome(seq, Action::MigrateToSpot, code, done, None);
            if let Err(e) = result {
                return Ok(Err(format!("deregistering image {image}: {e}")));
            }
            self.m.image = None;
        }
        let of = image.map_or("the migration's image".to_string(), |i| {
            format!("image {i}")
        });
        while let Some(snapshot) = self.m.snapshots.first().cloned() {
            let reason = format!("delete snapshot {snapshot} of {of}: {why}");
            let seq = self.unfenced_intent(code, &reason).await?;
            let result = self.spot.delete_snapshot(&region, &snapshot).await;
            let detail = format!("deleted snapshot {snapshot}");
            let done = result.as_ref().map(|()| detail.as_str());
            self.outcome(seq, Action::MigrateToSpot, code, done, None);
            if let Err(e) = result {
                return Ok(Err(format!("deleting snapshot {snapshot} of {of}: {e}")));
            }
            self.m.snapshots.remove(0);
        }
        Ok(Ok(()))
    }

    /// Whether the image, or snapshots of it not deleted yet, are left.
    pub(super) fn image_left(&self) -> bool {
        self.m.image.is_some() || !self.m.snapshots.is_empty()
    }

    /// The intent of a call that no override forbids (it undoes or ends the move), committed
    /// on the leader's session right before the call: a replica that lost the lead cannot
    /// write it, and so makes no call.
    pub(super) async fn unfenced_intent(
        &mut self,
        code: Code,
        reason: &str,
    ) -> Result<i64, StoreError> {
        let entry = self.entry(Action::MigrateToSpot, Outcome::Intent, code, reason);
        Ok(self.tick.leader.append_intents(&[entry]).await?[0].seq)
    }

    /// The outcome of a one-instance call from its report.
    pub(super) fn note(
        &mut self,
        seq: i64,
        code: Code,
        report: &ActionReport,
        done: String,
    ) -> Result<(), String> {
        match first_error(report) {
            Some(e) => {
                self.outcome(seq, Action::MigrateToSpot, code, Err(&e), None);
                Err(e.to_string())
            }
            None => {
                self.outcome(
                    seq,
                    Action::MigrateToSpot,
                    code,
                    Ok(&done),
                    request_id(report),
                );
                Ok(())
            }
        }
    }

    /// Ebb stops following the migration: the original loses its `ebb:migrating` tag if it
    /// is still there, so that the rules govern it again. The image is deleted only while the
    /// original exists; otherwise it may be the only copy of the workload's disks (the
    /// replacement ended for a cause ebb cannot know) and is kept until a person releases it.
    pub(super) async fn end(&mut self, why: String) -> Result<(), StoreError> {
        let mut detail = why.clone();
        let original_there =
            self.m.holds_original() && matches!(self.original().await, Original::There(_));
        if original_there {
            if let Err(e) = self.untag_original(Code::SpotEnded).await? {
                detail.push_str(&format!("; {e}"));
            }
        }
        if original_there && self.image_left() {
            let reason = format!("the migration ended, {} exists", self.m.original);
            if let Err(e) = self.delete_image_call(Code::SpotEnded, &reason).await? {
                detail.push_str(&format!("; {e}"));
            }
        }
        if self.m.image.is_some() && !original_there {
            // No timer: only a person can tell whether the workload's disks live elsewhere.
            self.m.image_kept_until = None;
            let only_copy = self.only_copy();
            detail.push_str(&format!("; {only_copy}"));
            self.alert = Some((Alert::ImageOnlyCopy, only_copy));
        } else if self.image_left() {
            // The original is there, and deleting failed: what is left goes at the next try.
            self.back_off();
            self.m.image_kept_until = Some(self.now());
        }
        self.event(Action::MigrateToSpot, Code::SpotEnded, &detail);
        self.m.saved_before += current_savings(&self.m, self.now());
        self.m.running_since = None;
        self.m.ended_at = Some(self.now());
        self.go(State::Done, detail).await
    }

    /// What is said of an image kept after the end until a person releases it.
    fn only_copy(&self) -> String {
        format!(
            "the image {} may be the only copy of the disks of {}: it is kept until a person runs `ebb spot-moves release {}`",
            self.m.image.as_deref().unwrap_or("(none)"),
            self.m.original,
            self.m.id
        )
    }

    /// After the end: deletes the kept image once its time has come (`keep_image_for`, or
    /// released by a person); alerts while it waits for a person.
    pub(super) async fn expire_image(&mut self) -> Result<(), StoreError> {
        let Some(until) = self.m.image_kept_until else {
            if self.m.image.is_some() {
                self.alert = Some((Alert::ImageOnlyCopy, self.only_copy()));
            }
            return Ok(());
        };
        if !self.image_left() || self.now() < until || self.backing_off() {
            return Ok(());
        }
        let what = self.m.image.clone().unwrap_or_else(|| "the image".into());
        let reason =
            "kept after the migration ended until keep_image_for passed or a person released it";
        match self
            .delete_image_call(Code::SpotImageDeleted, reason)
            .await?
        {
            Ok(()) => {
                self.m.image_kept_until = None;
                self.m.failures = 0;
                self.m.retry_at = None;
                self.go(
                    State::Done,
                    format!("deleted {what} and its snapshots, no longer kept"),
                )
                .await
            }
            Err(e) => {
                self.back_off();
                self.go(State::Done, e).await
            }
        }
    }
}
