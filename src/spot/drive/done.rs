//! `done`: the replacement serves the workload. ebb watches it for reclaims (and launches the
//! next replacement), terminates the original after `keep_original_for`, and deletes the
//! image once nothing is relaunched from it.

use super::super::{current_savings, recent_interruptions, Interruption};
use super::{first_error, request_id, Run};
use crate::cloud::{InstanceStatus, Market, Provider};
use crate::engine::{Action, Code};
use crate::fleet::InstanceState;
use crate::names::MIGRATING_TAG;
use crate::spot::State;
use crate::store::StoreError;
use chrono::{DateTime, Utc};

impl<P: Provider> Run<'_, P> {
    /// `done`: terminates the original once `keep_original_for` has passed, and watches the
    /// replacement for reclaims.
    pub(super) async fn done(&mut self) -> Result<(), StoreError> {
        if let (true, Some(rule), Some(since)) =
            (self.m.holds_original(), self.cx.rule, self.first_verified())
        {
            if self.now() - since >= rule.keep_original_for {
                return self.clean_up_original().await;
            }
        }
        let Some(current) = self.m.current.clone() else {
            // An interruption was counted; launch the next replacement.
            return self.relaunch().await;
        };
        let status = match self.status(&current).await {
            Ok(s) => s,
            Err(e) => return self.wait(format!("cannot read {current}: {e}")),
        };
        match status {
            Some(s)
                if s.reclaimed()
                    || (self.cx.warned
                        && matches!(s.state, InstanceState::Running | InstanceState::Pending)) =>
            {
                self.interrupted(s).await
            }
            Some(s) if matches!(s.state, InstanceState::Running | InstanceState::Pending) => {
                if self.m.market == Market::OnDemand && !self.m.holds_original() {
                    if let Some(image) = self.m.image.clone() {
                        // Nothing is relaunched from it any more.
                        return self.delete_image(image).await;
                    }
                }
                Ok(())
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
            Ok(_) => {}
            Err(e) => return self.wait(format!("cannot read {original}: {e}")),
        }
        let reason = format!(
            "terminate the original {original}: kept for keep_original_for, the replacement runs"
        );
        let seq = self
            .intent(Action::MigrateToSpot, Code::SpotCleanup, &reason)
            .await?;
        let report = self
            .p
            .terminate(&self.m.region, std::slice::from_ref(&original))
            .await;
        match first_error(&report) {
            Some(e) => {
                self.outcome(seq, Action::MigrateToSpot, Code::SpotCleanup, Err(&e), None);
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
                self.go(State::Done, detail).await
            }
        }
    }

    /// Someone started the original again: it only loses its `ebb:migrating` tag and is left
    /// to the rules.
    async fn original_returned(&mut self) -> Result<(), StoreError> {
        let original = self.m.original.clone();
        let _ = self
            .p
            .untag(
                &self.m.region,
                std::slice::from_ref(&original),
                &[MIGRATING_TAG.to_string()],
            )
            .await;
        let detail = format!(
            "the original {original} was started again by someone; not terminated, left to the rules"
        );
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
            "spot interruption warning for"
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
                Err(e) => return self.wait(format!("cannot read spot prices: {e}")),
            }
        }
        self.launch(Market::OnDemand, None, Action::FallbackOnDemand)
            .await
    }

    /// Deletes the image once the workload runs on-demand and the original is gone.
    async fn delete_image(&mut self, image: String) -> Result<(), StoreError> {
        let (action, code) = (Action::FallbackOnDemand, Code::SpotImageDeleted);
        let reason =
            format!("delete image {image}: the workload runs on-demand and the original is gone");
        let seq = self.intent(action, code, &reason).await?;
        match self.p.delete_image(&self.m.region, &image).await {
            Ok(()) => {
                let detail = format!("deleted image {image}");
                self.outcome(seq, action, code, Ok(&detail), None);
                self.m.image = None;
                self.go(State::Done, detail).await
            }
            Err(e) => {
                self.outcome(seq, action, code, Err(&e), None);
                self.go(State::Done, format!("deleting image {image} failed: {e}"))
                    .await
            }
        }
    }
}
