//! Undoing a migration (`rolled_back`, or `failed` when the undo fails), and ending one that
//! ebb stops following.

use super::super::current_savings;
use super::{first_error, Run};
use crate::cloud::{CloudError, ErrorKind, Provider};
use crate::engine::{Action, Code};
use crate::names::MIGRATING_TAG;
use crate::spot::State;
use crate::store::StoreError;

impl<P: Provider> Run<'_, P> {
    /// Undoes the migration: terminates the replacement, starts the original again, removes
    /// its `ebb:migrating` tag and the image.
    pub(super) async fn roll_back(&mut self, why: String) -> Result<(), StoreError> {
        let original = self.m.original.clone();
        let reason = format!("roll back ({why}): start {original} again");
        let seq = self
            .intent(Action::MigrateToSpot, Code::SpotRollback, &reason)
            .await?;
        let errors = self.undo_calls().await;
        if errors.is_empty() {
            let detail = format!("rolled back: {original} started again ({why})");
            self.outcome(
                seq,
                Action::MigrateToSpot,
                Code::SpotRollback,
                Ok(&detail),
                None,
            );
            self.m.error = Some(why);
            return self.go(State::RolledBack, detail).await;
        }
        let error = CloudError {
            kind: ErrorKind::Other,
            operation: "rollback",
            code: None,
            message: errors.join("; "),
            request_id: None,
        };
        self.outcome(
            seq,
            Action::MigrateToSpot,
            Code::SpotRollback,
            Err(&error),
            None,
        );
        self.fail(format!(
            "rolling back ({why}) failed: {}; finish it by hand",
            error.message
        ))
        .await
    }

    /// The cloud calls of a roll-back, each tried whatever the others did; what failed. What
    /// could not be removed stays recorded, for people to finish.
    async fn undo_calls(&mut self) -> Vec<String> {
        let original = self.m.original.clone();
        let region = self.m.region.clone();
        let ids = std::slice::from_ref(&original);
        let mut errors: Vec<String> = Vec::new();
        if let Some(current) = self.m.current.take() {
            let report = self
                .p
                .terminate(&region, std::slice::from_ref(&current))
                .await;
            if let Some(e) = first_error(&report) {
                errors.push(format!("terminating {current}: {e}"));
                self.m.current = Some(current);
            }
        }
        if let Some(e) = first_error(&self.p.start(&region, ids).await) {
            errors.push(format!("starting {original}: {e}"));
        }
        let tag = [MIGRATING_TAG.to_string()];
        if let Some(e) = first_error(&self.p.untag(&region, ids, &tag).await) {
            errors.push(format!("removing its {} tag: {e}", MIGRATING_TAG));
        }
        if let Some(image) = self.m.image.take() {
            if let Err(e) = self.p.delete_image(&region, &image).await {
                errors.push(format!("deleting image {image}: {e}"));
                self.m.image = Some(image);
            }
        }
        errors
    }

    /// Ebb stops following the migration; the original loses its `ebb:migrating` tag if it
    /// is still there, so that the rules govern it again.
    pub(super) async fn end(&mut self, why: String) -> Result<(), StoreError> {
        let region = self.m.region.clone();
        if self.m.holds_original() {
            let _ = self
                .p
                .untag(
                    &region,
                    std::slice::from_ref(&self.m.original),
                    &[MIGRATING_TAG.to_string()],
                )
                .await;
        }
        if let Some(image) = self.m.image.clone() {
            if self.p.delete_image(&region, &image).await.is_ok() {
                self.m.image = None;
            }
        }
        self.event(Action::MigrateToSpot, Code::SpotEnded, &why);
        self.m.saved_before += current_savings(&self.m, self.now());
        self.m.running_since = None;
        self.m.ended_at = Some(self.now());
        self.go(State::Done, why).await
    }
}
