//! `reclaimed` → `restoring` → `restored`: once someone asks for the box back (`ebb restore`),
//! it is launched from its image with what was recorded of it, and followed until it is up;
//! then, with `keep_image_for`, the image and its snapshots are deleted once it has been up
//! that long.

use super::Run;
use crate::cloud::{Launch, Market, SpotMoves};
use crate::engine::{Action, Code};
use crate::fleet::InstanceState;
use crate::names::{MIGRATING_TAG, RECLAIM_TAG, RESTORED_FROM_TAG, STOP_AT_TAG};
use crate::store::{Outcome, ReclaimState, StoreError};
use sqlx::types::Json;
use std::collections::BTreeMap;

/// EC2's error code when the private IP address asked for is taken.
const IP_IN_USE: &str = "InvalidIPAddress.InUse";

impl<S: SpotMoves> Run<'_, S> {
    /// Launches the box again from its image, with what was recorded of it.
    pub(super) async fn restore(&mut self) -> Result<(), StoreError> {
        let (Some(image), Some(Json(spec))) = (self.r.image.clone(), self.r.launch_spec.clone())
        else {
            tracing::error!(
                reclaim = self.r.id,
                "a reclaimed box without its image or launch settings cannot be restored"
            );
            return Ok(());
        };
        let instance = self.r.instance.clone();
        let by = self.r.restore_asked_by.clone().unwrap_or_default();
        let ip = spec.private_ip.as_ref().map_or(String::new(), |ip| {
            format!(" with its private IP {ip} if free")
        });
        let what = format!(
            "launch {instance} again from image {image} as {} in {}{ip}, asked by {by}; its user data was not kept",
            spec.instance_type, spec.subnet
        );
        let Ok(seq) = self.intent(Action::Restore, Code::Restored, &what).await? else {
            return Ok(());
        };
        let mut spec = spec;
        for key in [STOP_AT_TAG, MIGRATING_TAG] {
            spec.tags.remove(key);
        }
        let launch_tags = BTreeMap::from([
            (RECLAIM_TAG.to_string(), self.r.id.to_string()),
            (RESTORED_FROM_TAG.to_string(), instance.clone()),
        ]);
        let wanted_ip = spec.private_ip.clone();
        let launch = Launch {
            image,
            instance_type: spec.instance_type.clone(),
            subnet: spec.subnet.clone(),
            spec,
            market: Market::OnDemand,
            tags: launch_tags,
            client_token: format!("ebb-restore-{}", self.r.id),
            private_ip: wanted_ip.clone(),
        };
        let mut launched = self.spot.launch(&self.r.region, &launch).await;
        let mut address = wanted_ip
            .as_ref()
            .map_or(String::new(), |ip| format!(" with its private IP {ip}"));
        if let (Err(e), Some(ip)) = (&launched, &wanted_ip) {
            if e.code.as_deref() == Some(IP_IN_USE) {
                // Another box took the address since the termination: EC2 chooses one, as for
                // any launch. No box was made by the refused call, so this is the same launch.
                address = format!("; its private IP {ip} was in use, so EC2 chose another");
                let anywhere = Launch {
                    private_ip: None,
                    client_token: format!("ebb-restore-{}-any-ip", self.r.id),
                    ..launch
                };
                launched = self.spot.launch(&self.r.region, &anywhere).await;
            }
        }
        match launched {
            Ok(s) => {
                self.outcome(
                    seq,
                    Action::Restore,
                    Code::Restored,
                    Ok(&format!("launched {}{address}", s.id)),
                    None,
                );
                self.r.restored_as = Some(s.id.clone());
                self.go(
                    ReclaimState::Restoring,
                    format!("{} launched from the image of {instance}", s.id),
                )
                .await
            }
            Err(e) if e.kind.may_have_landed() => {
                let detail = format!("the answer to the launch was lost ({e}); looked for by its tag once it can no longer land");
                self.go(ReclaimState::Reclaimed, detail).await
            }
            Err(e) => {
                self.outcome(seq, Action::Restore, Code::Restored, Err(&e), None);
                self.r.restore_asked_at = None;
                self.r.restore_asked_by = None;
                let detail = format!("the launch failed ({e}); run ebb restore {instance} again");
                self.go(ReclaimState::Reclaimed, detail).await
            }
        }
    }

    /// Waits for the restored box to come up; one gone before it did is asked for again.
    pub(super) async fn restoring(&mut self) -> Result<(), StoreError> {
        let Some(restored) = self.r.restored_as.clone() else {
            return Ok(());
        };
        let state = match self.status(&restored).await {
            Ok(state) => state,
            Err(e) => {
                tracing::warn!(reclaim = self.r.id, error = %e, "cannot read the restored box");
                return Ok(());
            }
        };
        let image = self.r.image.clone().unwrap_or_default();
        match state {
            Some(InstanceState::Pending) => Ok(()),
            // Up, or stopped by someone since: either way the box is back.
            Some(
                state @ (InstanceState::Running | InstanceState::Stopping | InstanceState::Stopped),
            ) => {
                let kept = match self.keep_image_for {
                    Some(keep) => format!("kept until it has been up {}", humantime(keep)),
                    None => "kept".to_string(),
                };
                let detail = format!(
                    "{restored} is {}: {} is back from image {image}, {kept}",
                    state.as_str(),
                    self.r.instance
                );
                self.event(Action::Restore, Code::Restored, Outcome::Succeeded, &detail);
                if self.keep_image_for.is_none() {
                    self.r.ended_at = Some(self.now());
                }
                self.go(ReclaimState::Restored, detail).await
            }
            other => {
                let state = other.map_or("gone", InstanceState::as_str);
                let detail = format!(
                    "the restored box {restored} is {state}; run ebb restore {} again",
                    self.r.instance
                );
                self.event(Action::Restore, Code::Restored, Outcome::Failed, &detail);
                self.r.restored_as = None;
                self.r.restore_asked_at = None;
                self.r.restore_asked_by = None;
                self.go(ReclaimState::Reclaimed, detail).await
            }
        }
    }

    /// `restored`, its image kept for `keep_image_for`: once the restored box has been up that
    /// long and still exists, running the image (its volumes are then a copy of the image's
    /// data), the image is deregistered and its snapshots deleted, a call each. A restored box
    /// gone before then leaves the image as the only copy: it is kept, and the reclaim ends.
    pub(super) async fn expire_image(&mut self) -> Result<(), StoreError> {
        let Some(keep) = self.keep_image_for else {
            let why = "its policy no longer sets keep_image_for: the image is kept".to_string();
            return self.finish(why).await;
        };
        if self.now() - self.r.state_since < keep {
            return Ok(());
        }
        let restored = self.r.restored_as.clone().unwrap_or_default();
        let found = match self
            .spot
            .describe(&self.r.region, std::slice::from_ref(&restored))
            .await
        {
            Ok(found) => found.into_iter().find(|s| s.id == restored),
            Err(e) => {
                tracing::warn!(reclaim = self.r.id, error = %e, "cannot read the restored box");
                return Ok(());
            }
        };
        let copy = found.filter(|s| {
            s.image == self.r.image
                && !matches!(
                    s.state,
                    InstanceState::Terminated | InstanceState::ShuttingDown
                )
        });
        if copy.is_none() && self.r.image_deleted_at.is_none() {
            let why = format!(
                "the restored box {restored} is gone: image {} may be the only copy of the box's disks, and is kept",
                self.r.image.as_deref().unwrap_or("-")
            );
            return self.finish(why).await;
        }
        if self.r.image_deleted_at.is_none() {
            let image = self.r.image.clone().unwrap_or_default();
            let what = format!(
                "deregister image {image}: the restored box {restored} has been up {}",
                humantime(keep)
            );
            let Ok(seq) = self
                .intent(Action::Reclaim, Code::ReclaimImageDeleted, &what)
                .await?
            else {
                return Ok(());
            };
            match self.spot.deregister_image(&self.r.region, &image).await {
                Ok(()) => {
                    self.outcome(
                        seq,
                        Action::Reclaim,
                        Code::ReclaimImageDeleted,
                        Ok("deregistered"),
                        None,
                    );
                    self.r.image_deleted_at = Some(self.now());
                }
                Err(e) if e.kind.may_have_landed() => return self.flush().await,
                Err(e) => {
                    self.outcome(
                        seq,
                        Action::Reclaim,
                        Code::ReclaimImageDeleted,
                        Err(&e),
                        None,
                    );
                    // Not tried again every tick: kept, and said so.
                    let why = format!("image {image} could not be deregistered ({e}): it is kept, with its snapshots; delete them by hand");
                    return self.finish(why).await;
                }
            }
        }
        while let Some(snapshot) = self.r.snapshots.first().cloned() {
            let what = format!("delete snapshot {snapshot} of the deregistered image");
            let Ok(seq) = self
                .intent(Action::Reclaim, Code::ReclaimImageDeleted, &what)
                .await?
            else {
                return self.flush().await;
            };
            match self.spot.delete_snapshot(&self.r.region, &snapshot).await {
                Ok(()) => {
                    self.outcome(
                        seq,
                        Action::Reclaim,
                        Code::ReclaimImageDeleted,
                        Ok("deleted"),
                        None,
                    );
                    self.r.snapshots.remove(0);
                }
                Err(e) if e.kind.may_have_landed() => return self.flush().await,
                Err(e) => {
                    self.outcome(
                        seq,
                        Action::Reclaim,
                        Code::ReclaimImageDeleted,
                        Err(&e),
                        None,
                    );
                    let why = format!(
                        "snapshot {snapshot} could not be deleted ({e}): snapshots {} are kept; delete them by hand",
                        self.r.snapshots.join(", ")
                    );
                    return self.finish(why).await;
                }
            }
        }
        self.r.ended_at = Some(self.now());
        let detail = format!(
            "image {} and its snapshots deleted",
            self.r.image.as_deref().unwrap_or("-")
        );
        self.go(ReclaimState::Restored, detail).await
    }

    /// Ends the restored reclaim with what is left of its image kept, for `why`.
    async fn finish(&mut self, why: String) -> Result<(), StoreError> {
        self.event(
            Action::Reclaim,
            Code::ReclaimImageDeleted,
            Outcome::Skipped,
            &why,
        );
        self.r.ended_at = Some(self.now());
        self.go(ReclaimState::Restored, why).await
    }
}

/// `d` as people write it (`7d`, `30m`).
fn humantime(d: chrono::Duration) -> String {
    d.to_std().map_or_else(
        |_| d.to_string(),
        |d| humantime::format_duration(d).to_string(),
    )
}
