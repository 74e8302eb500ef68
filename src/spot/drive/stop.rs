//! The first steps: `planned` (check the move still holds, stop the original) and `stopping`
//! (once it is stopped, image it).

use super::super::{image_tags, prove_image, STOP_TIMEOUT};
use super::undo::Original;
use super::unknown::Landed;
use super::{lost, Run};
use crate::cloud::{CloudError, ImageMade, Provider, SpotMoves, StopKind};
use crate::engine::{Action, Code};
use crate::fleet::InstanceState;
use crate::names::MIGRATING_TAG;
use crate::spot::{Hold, State};
use crate::store::StoreError;
use sqlx::types::Json;
use std::collections::BTreeMap;

impl<P: Provider> Run<'_, P> {
    /// `planned`: checks that the move still holds, reads how the original was launched,
    /// marks it `ebb:migrating` and stops it.
    pub(super) async fn planned(&mut self) -> Result<(), StoreError> {
        if let Err(why) = self.still_eligible() {
            return self
                .cancel(format!("not started, no longer eligible: {why}"))
                .await;
        }
        if let Hold::Protected(why) = self.cx.hold {
            let why = format!("not started: {why}");
            return self.cancel(why).await;
        }
        if self.m.launch_spec.is_none() {
            let original = &self.m.original;
            match self.spot.launch_spec(&self.m.region, original).await {
                Ok(spec) => self.m.launch_spec = Some(Json(spec)),
                Err(e) => {
                    let why = format!("not started: cannot read how {original} was launched: {e}");
                    return self.cancel(why).await;
                }
            }
        }
        if self.m.launch_spec.as_ref().is_some_and(|s| s.0.hibernation) {
            let why = format!(
                "not started: {} was launched with hibernation enabled, and EC2 does not support images of such a box (a replacement launched from one may not be reachable)",
                self.m.original
            );
            return self.cancel(why).await;
        }
        self.stop_original().await
    }

    /// Whether this tick still decides to move the original (or sees it marked as moving);
    /// why not otherwise.
    fn still_eligible(&self) -> Result<(), String> {
        let marked = self.cx.decision.is_some_and(|d| d.code == Code::Migrating);
        match self.cx.decision {
            Some(d) if (d.action == Action::MigrateToSpot && !d.dry_run) || marked => Ok(()),
            other => Err(other.map_or("the instance is not listed".to_string(), |d| {
                d.reason.clone()
            })),
        }
    }

    /// Ends the migration before it changed anything. An earlier tick cut off after the tag
    /// or the stop of [`Self::stop_original`] leaves the row `planned` with the original
    /// tagged `ebb:migrating` (and perhaps stopped), which every rule then leaves alone: so the
    /// original is read first, and when it carries this migration's tag the move is rolled back
    /// instead (started again, untagged). While it cannot be read, nothing is ended.
    async fn cancel(&mut self, detail: String) -> Result<(), StoreError> {
        let original = self.m.original.clone();
        let ids = std::slice::from_ref(&original);
        let listed = match self.p.reread(&self.m.region, ids).await {
            Ok(found) => found.into_iter().find(|i| i.id == original),
            Err(e) => {
                return self.wait(format!(
                    "{detail}; but {original} cannot be read, and may carry {MIGRATING_TAG}: {e}"
                ))
            }
        };
        let ours = self.m.id.to_string();
        let undo = match listed {
            Some(inst) => inst.tag(MIGRATING_TAG) == Some(ours.as_str()),
            // Not listed: gone, or no longer managed, with its tags unknown.
            None => match self.original().await {
                Original::Gone => false,
                Original::There(_) => true,
                Original::Unread(e) => return self.wait(format!("{detail}; but {e}")),
            },
        };
        if undo {
            let why = format!("{detail}; an earlier attempt may have tagged or stopped {original}");
            return self.roll_back(why).await;
        }
        self.event(Action::MigrateToSpot, Code::SpotCancelled, &detail);
        self.m.error = Some(detail.clone());
        self.go(State::RolledBack, detail).await
    }

    /// Tags the original `ebb:migrating`, then stops it: two calls, each an action with its
    /// intent through the fence first. An override made before the tag cancels the move with
    /// nothing changed; one made between the two calls rolls the tag back.
    async fn stop_original(&mut self) -> Result<(), StoreError> {
        let original = self.m.original.clone();
        let region = self.m.region.clone();
        let ids = [original.clone()];
        let reason = format!(
            "tag {original} {MIGRATING_TAG}={}, so that the rules leave it to the migration",
            self.m.id
        );
        // Tagged already by a call whose answer was lost (`unknown.rs`): not tagged again.
        if self.took(|l| matches!(l, Landed::Tag)).is_none() {
            let seq = match self
                .intent(Action::MigrateToSpot, Code::SpotStop, &reason)
                .await?
            {
                Ok(seq) => seq,
                Err(why) => return self.cancel(format!("not started: {why}")).await,
            };
            let tags = BTreeMap::from([(MIGRATING_TAG.to_string(), self.m.id.to_string())]);
            let report = self.p.tag(&region, &ids, &tags).await;
            if let Some(e) = lost(&report) {
                return self.unanswered(format!("tagging {original}"), &e).await;
            }
            let tagged = format!("tagged {original} {MIGRATING_TAG}={}", self.m.id);
            if let Err(e) = self.note(seq, Code::SpotStop, &report, tagged) {
                return self
                    .roll_back(format!("tagging {original} failed: {e}"))
                    .await;
            }
        }
        let reason = format!("stop {original} to image it (its guest shuts down normally, so the job can checkpoint)");
        let seq = match self
            .intent(Action::MigrateToSpot, Code::SpotStop, &reason)
            .await?
        {
            Ok(seq) => seq,
            Err(why) => return self.roll_back(format!("not stopped: {why}")).await,
        };
        let report = self.p.stop(&region, &ids, StopKind::Stop).await;
        if let Some(e) = lost(&report) {
            return self.unanswered(format!("stopping {original}"), &e).await;
        }
        let detail = format!("stopping {original}");
        match self.note(seq, Code::SpotStop, &report, detail.clone()) {
            Ok(()) => self.go(State::Stopping, detail).await,
            Err(e) => {
                self.roll_back(format!("stopping {original} failed: {e}"))
                    .await
            }
        }
    }

    /// `stopping`: once the original is stopped, images it.
    pub(super) async fn stopping(&mut self) -> Result<(), StoreError> {
        let original = self.m.original.clone();
        let state = match self.status(&original).await {
            Ok(s) => s.map(|s| s.state),
            Err(e) => return self.wait(format!("cannot read {original}: {e}")),
        };
        match state {
            Some(InstanceState::Stopped) => self.create_image().await,
            Some(InstanceState::Terminated | InstanceState::ShuttingDown) | None => {
                self.fail(format!(
                    "{original} was terminated while it stopped; nothing to move or restore"
                ))
                .await
            }
            Some(_) if self.now() - self.m.state_since > STOP_TIMEOUT => {
                self.roll_back(format!("{original} did not stop within 30 min"))
                    .await
            }
            Some(s) => self.wait(format!("{original} is {}", s.as_str())),
        }
    }

    /// Images the stopped original with all its volumes, tagged as this migration's. Images of
    /// the same name found instead (an attempt whose answer was lost, or anyone's) are adopted
    /// only when proven to be this migration's image of the original.
    async fn create_image(&mut self) -> Result<(), StoreError> {
        let original = self.m.original.clone();
        let name = format!("ebb-{original}-{}", self.m.id);
        let reason = format!("image {original} with all its volumes as {name}");
        let seq = match self
            .intent(Action::MigrateToSpot, Code::SpotImage, &reason)
            .await?
        {
            Ok(seq) => seq,
            Err(why) => return self.roll_back(format!("{why}; the move is undone")).await,
        };
        let tags = image_tags(self.m.id, &original);
        let made = self
            .spot
            .create_image(&self.m.region, &original, &name, &tags)
            .await;
        let image = match made {
            Ok(ImageMade::Made(image)) => Ok(image),
            Ok(ImageMade::Named(found)) => self.adopt_image(&name, found).await,
            // Made or not, it is found by its name when the step is repeated.
            Err(e) if e.kind.may_have_landed() => {
                return self
                    .unanswered(format!("imaging {original} as {name}"), &e)
                    .await
            }
            Err(e) => Err(e.to_string()),
        };
        match image {
            Ok(image) => {
                let detail = format!("imaging {original} as {image}");
                self.outcome(
                    seq,
                    Action::MigrateToSpot,
                    Code::SpotImage,
                    Ok(&detail),
                    None,
                );
                self.m.image = Some(image);
                self.go(State::Imaging, detail).await
            }
            Err(e) => {
                let error = CloudError::other("CreateImage", e.clone());
                self.outcome(
                    seq,
                    Action::MigrateToSpot,
                    Code::SpotImage,
                    Err(&error),
                    None,
                );
                self.roll_back(format!("imaging {original} failed: {e}"))
                    .await
            }
        }
    }

    /// The first of `found` (images named `name`) proven to be this migration's; every other
    /// one is refused in the audit log and never launched from.
    async fn adopt_image(&mut self, name: &str, found: Vec<String>) -> Result<String, String> {
        let volumes = self
            .m
            .launch_spec
            .as_ref()
            .map_or(Vec::new(), |s| s.0.volumes.clone());
        let mut refused = Vec::new();
        for id in found {
            let proof = match self.spot.image(&self.m.region, &id).await {
                Ok(Some(image)) => prove_image(&image, self.m.id, &self.m.original, &volumes),
                Ok(None) => Err("it is gone".to_string()),
                Err(e) => Err(format!("it cannot be read: {e}")),
            };
            match proof {
                Ok(()) => return Ok(id),
                Err(why) => {
                    let detail =
                        format!("refused image {id} named {name}: {why}; never launched from");
                    tracing::warn!(
                        migration = self.m.id,
                        image = %id,
                        error = %why,
                        "refused an image; never launched from"
                    );
                    self.event(Action::MigrateToSpot, Code::SpotRefused, &detail);
                    refused.push(format!("{id} ({why})"));
                }
            }
        }
        Err(format!(
            "an image named {name} exists that ebb cannot prove it made: {}",
            refused.join(", ")
        ))
    }
}
