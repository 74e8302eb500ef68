//! `done`: the replacement serves the workload. ebb watches it for reclaims (and launches the
//! next replacement), terminates the original after `keep_original_for`, and deletes the
//! image once nothing is relaunched from it.

use super::super::{current_savings, image_intact, recent_interruptions, Alert, Interruption};
use super::{first_error, request_id, Run};
use crate::cloud::{InstanceStatus, Market, Provider, SpotMoves};
use crate::engine::{Action, Code};
use crate::fleet::InstanceState;
use crate::names::INTERRUPTIBLE_TAG;
use crate::spot::{Hold, State};
use crate::store::StoreError;
use chrono::{DateTime, Utc};

impl<P: Provider> Run<'_, P> {
    /// `done`: terminates the original once `keep_original_for` has passed, and watches the
    /// replacement for reclaims.
    pub(super) async fn done(&mut self) -> Result<(), StoreError> {
        let Some(current) = self.m.current.clone() else {
            if self.backing_off() {
                return self.wait("the next launch waits after a failed one".into());
            }
            // An interruption was counted, or a launch failed; launch the next replacement.
            return self.relaunch().await;
        };
        let status = match self.status(&current).await {
            Ok(s) => s,
            Err(e) => return self.wait(format!("cannot read {current}: {e}")),
        };
        let running =
            |s: &InstanceStatus| matches!(s.state, InstanceState::Running | InstanceState::Pending);
        // A warning is a queue message anyone allowed to send could write: believed only when
        // EC2 itself marks the instance's spot request for interruption.
        let warned = match &status {
            Some(s) if self.cx.warned && running(s) => {
                match self
                    .spot
                    .interruption_confirmed(&self.m.region, &current)
                    .await
                {
                    Ok(true) => true,
                    Ok(false) => {
                        tracing::warn!(
                            migration = self.m.id,
                            instance = current.as_str(),
                            "interruption warning not confirmed by EC2: not believed"
                        );
                        false
                    }
                    Err(e) => {
                        return self.wait(format!(
                            "cannot confirm the interruption warning for {current}: {e}"
                        ))
                    }
                }
            }
            _ => false,
        };
        match status {
            Some(s) if s.reclaimed() || warned => self.interrupted(s).await,
            // The original is cleaned up only while the replacement runs, and a failing
            // clean-up never keeps a reclaim from being handled (above).
            Some(s) if s.state == InstanceState::Running && self.clean_up_due() => {
                self.clean_up_original().await
            }
            Some(s) if matches!(s.state, InstanceState::Running | InstanceState::Pending) => {
                if s.state == InstanceState::Running && self.early_move(&s).await? {
                    return Ok(());
                }
                if self.image_left() && self.image_done_with() {
                    self.delete_image().await
                } else {
                    Ok(())
                }
            }
            other => {
                let what = other.map_or("gone".to_string(), |s| {
                    format!(
                        "{} ({})",
                        s.state.as_str(),
                        s.state_reason.unwrap_or_default()
                    )
                });
                self.end(format!("{current} is {what}, not by a spot reclaim; ebb stops following this migration")).await
            }
        }
    }

    /// Whether the original is ebb's to terminate now: kept for `keep_original_for` since the
    /// first replacement was verified, and not waiting after a failed attempt.
    fn clean_up_due(&self) -> bool {
        match (self.m.holds_original(), self.cx.rule, self.first_verified()) {
            (true, Some(rule), Some(since)) => {
                self.now() - since >= rule.keep_original_for && !self.backing_off()
            }
            _ => false,
        }
    }

    /// Whether nothing will be launched from the image any more and it is no longer the only
    /// copy of the workload's disks: the workload has run on-demand for `keep_image_for` with
    /// the original gone.
    fn image_done_with(&self) -> bool {
        let keep = self.cx.rule.map(|r| r.keep_image_for);
        match (
            self.m.market,
            self.m.holds_original(),
            self.m.running_since,
            keep,
        ) {
            (Market::OnDemand, false, Some(since), Some(keep)) => {
                self.now() - since >= keep && !self.backing_off()
            }
            _ => false,
        }
    }

    /// When the first replacement was verified: from then on the original is kept for
    /// `keep_original_for`.
    pub(super) fn first_verified(&self) -> Option<DateTime<Utc>> {
        self.m
            .steps
            .0
            .iter()
            .find(|s| s.state == State::Done)
            .map(|s| s.at)
    }

    /// Terminates the original, unless someone started it again: then it is theirs, and only
    /// loses its `ebb:migrating` tag.
    async fn clean_up_original(&mut self) -> Result<(), StoreError> {
        let original = self.m.original.clone();
        match self.status(&original).await {
            Ok(Some(s)) if s.state == InstanceState::Stopped => {}
            Ok(Some(s)) if matches!(s.state, InstanceState::Pending | InstanceState::Running) => {
                return self.original_returned().await;
            }
            Ok(Some(s)) if s.state != InstanceState::Terminated => {
                return self.wait(format!("the original {original} is {}", s.state.as_str()));
            }
            Ok(_) => return self.original_gone().await,
            Err(e) => return self.wait(format!("cannot read {original}: {e}")),
        }
        match self.cx.hold {
            Hold::Free => {}
            Hold::Protected(why) => {
                return self.wait(format!("the original {original} is not terminated: {why}"))
            }
            Hold::Unknown => {
                return self.wait(format!(
                    "the original {original} was not listed: its protections are unknown"
                ))
            }
        }
        // Once the original is gone, the image is the only copy of its disks besides the
        // running spot instance: it must still be there, whoever cleans up images.
        let image = self.m.image.clone().unwrap_or_default();
        let intact = match self.spot.image(&self.m.region, &image).await {
            Ok(found) => image_intact(found.as_ref(), &image, &self.m.snapshots),
            Err(e) => {
                return self.wait(format!(
                    "the original {original} is not terminated: cannot read image {image}: {e}"
                ))
            }
        };
        if let Err(why) = intact {
            return self.keep_original(why).await;
        }
        // The listing may be minutes old: a tag put on since protects it too. Read last,
        // right before the intent, so that nothing read after it can miss a tag.
        if let Err(why) = self.tags_still_free(&original).await {
            return self.wait(format!("the original {original} is not terminated: {why}"));
        }
        let reason = format!(
            "terminate the original {original}: kept for keep_original_for, the replacement runs"
        );
        let seq = match self
            .intent(Action::MigrateToSpot, Code::SpotCleanup, &reason)
            .await?
        {
            Ok(seq) => seq,
            Err(why) => {
                return self.wait(format!("the original {original} is not terminated: {why}"))
            }
        };
        let report = self
            .spot
            .terminate(&self.m.region, std::slice::from_ref(&original))
            .await;
        match first_error(&report) {
            // Terminated or not, the next tick sees it: gone, or still stopped and terminated then.
            Some(e) if e.kind.may_have_landed() => {
                self.outcome(seq, Action::MigrateToSpot, Code::SpotCleanup, Err(&e), None);
                self.unanswered(format!("terminating the original {original}"), &e)
                    .await
            }
            Some(e) => {
                self.outcome(seq, Action::MigrateToSpot, Code::SpotCleanup, Err(&e), None);
                self.back_off();
                self.go(State::Done, format!("terminating {original} failed: {e}"))
                    .await
            }
            None => {
                let detail = format!("terminated the original {original}");
                let request = request_id(&report);
                self.outcome(
                    seq,
                    Action::MigrateToSpot,
                    Code::SpotCleanup,
                    Ok(&detail),
                    request,
                );
                self.m.original_terminated_at = Some(self.now());
                self.m.failures = 0;
                self.m.retry_at = None;
                self.go(State::Done, detail).await
            }
        }
    }

    /// The original is due for termination but its image does not hold its disks any more
    /// (`why`): it is kept, tried again at every tick, and a person is alerted.
    async fn keep_original(&mut self, why: String) -> Result<(), StoreError> {
        let detail = format!(
            "the original {} is not terminated: {why}; its disks would live only on the spot replacement. Terminate it by hand once they are safe elsewhere, or start it to take the workload back",
            self.m.original
        );
        tracing::warn!(
            migration = self.m.id,
            instance = self.m.original.as_str(),
            error = %why,
            "original kept: its image does not hold its disks"
        );
        self.alert = Some((Alert::ImageMissing, detail.clone()));
        self.go(State::Done, detail).await
    }

    /// Whether `id`, read again right before an irreversible call, still carries no tag that
    /// protects it and is still `ebb:interruptible`; why not otherwise (also when it cannot be
    /// read, or is no longer listed as managed). Overrides are checked by the intent's fence.
    async fn tags_still_free(&self, id: &str) -> Result<(), String> {
        let found = self
            .p
            .reread(&self.m.region, &[id.to_string()])
            .await
            .map_err(|e| format!("cannot read its tags again: {e}"))?;
        let inst = found
            .iter()
            .find(|i| i.id == id)
            .ok_or_else(|| "it is no longer listed as managed".to_string())?;
        if let Some(why) = crate::engine::tags_forbid_stop(inst, self.tick_now()) {
            return Err(why);
        }
        if inst.tag(INTERRUPTIBLE_TAG) != Some("true") {
            return Err(format!("it is no longer tagged {INTERRUPTIBLE_TAG}=true"));
        }
        Ok(())
    }

    /// The original is terminated already: by ebb's own call, when the tick that made it died
    /// before recording it, or by someone. Either way it is gone, and the image is the only
    /// copy of its disks from now on.
    async fn original_gone(&mut self) -> Result<(), StoreError> {
        let detail = format!("the original {} is terminated", self.m.original);
        self.event(Action::MigrateToSpot, Code::SpotCleanup, &detail);
        self.m.original_terminated_at = Some(self.now());
        self.go(State::Done, detail).await
    }

    /// Someone started the original again: it only loses its `ebb:migrating` tag and is left
    /// to the rules.
    async fn original_returned(&mut self) -> Result<(), StoreError> {
        let original = self.m.original.clone();
        let mut detail = format!(
            "the original {original} was started again by someone; not terminated, left to the rules"
        );
        if let Err(e) = self.untag_original(Code::SpotOriginalReturned).await? {
            detail.push_str(&format!(" ({e})"));
        }
        self.event(Action::MigrateToSpot, Code::SpotOriginalReturned, &detail);
        self.m.original_returned_at = Some(self.now());
        self.go(State::Done, detail).await
    }

    /// Spot capacity was reclaimed from `s`, or will be within two minutes (a warning): counts
    /// it and launches the next replacement. A warned instance is left to run out its two
    /// minutes, which its job may need to checkpoint; EC2 ends it.
    pub(super) async fn interrupted(&mut self, s: InstanceStatus) -> Result<(), StoreError> {
        self.m.saved_before += current_savings(&self.m, self.now());
        self.m.interruptions.0.push(Interruption {
            at: self.now(),
            instance: s.id.clone(),
            instance_type: s.instance_type.clone(),
            zone: s.zone.clone(),
        });
        self.m.current = None;
        self.m.running_since = None;
        let recent = recent_interruptions(&self.m.interruptions.0, self.now());
        let max = self.cx.rule.map_or(0, |r| r.max_interruptions as usize);
        if recent >= max {
            self.m.market = Market::OnDemand;
        }
        let what = if s.reclaimed() {
            "spot capacity reclaimed from"
        } else {
            "spot interruption warning, confirmed by EC2, for"
        };
        let detail = format!(
            "{what} {} ({} in {}); {recent} reclaim(s) in 24 h",
            s.id, s.instance_type, s.zone
        );
        self.event(Action::RelaunchSpot, Code::SpotInterrupted, &detail);
        self.go(State::Done, detail).await?;
        self.relaunch().await
    }

    /// Launches a replacement for a reclaimed one: on spot, unless reclaims hit
    /// `max_interruptions` or no acceptable offer is left, then on-demand.
    async fn relaunch(&mut self) -> Result<(), StoreError> {
        if self.m.market == Market::Spot {
            match self.spot_target().await {
                Ok(Some(target)) => {
                    return self
                        .launch(Market::Spot, Some(target), Action::RelaunchSpot)
                        .await
                }
                Ok(None) => self.m.market = Market::OnDemand,
                Err(e) => return self.wait(format!("cannot rank the spot offers: {e}")),
            }
        }
        self.launch(Market::OnDemand, None, Action::FallbackOnDemand)
            .await
    }

    /// Deletes the image once the workload has run on-demand for `keep_image_for` with the
    /// original gone.
    async fn delete_image(&mut self) -> Result<(), StoreError> {
        let what = self.m.image.clone().unwrap_or_else(|| "the image".into());
        let reason = "the workload has run on-demand for keep_image_for and the original is gone";
        match self
            .delete_image_call(Code::SpotImageDeleted, reason)
            .await?
        {
            Ok(()) => {
                self.m.failures = 0;
                self.m.retry_at = None;
                self.go(State::Done, format!("deleted {what} and its snapshots"))
                    .await
            }
            Err(e) => {
                self.back_off();
                self.go(State::Done, e).await
            }
        }
    }
}
