//! Advancing one reclaim by one step: the cloud calls, written to the audit log (an intent
//! before each call, its outcome after) and to `reclaims`.
//!
//! Each step can be repeated: an image is found by its name before one is made, a termination
//! twice is harmless, and a restore's launch carries the same client token each time. A call
//! whose answer was lost (or whose tick died after it) leaves its intent open; once the call can
//! no longer land, the reclaim resolves it from what the cloud shows before its next step
//! (`resolve`), and the box is never terminated before its image is proven.

mod restore;

use super::{image_name, image_tags, prove, refusal, IMAGE_TIMEOUT};
use crate::cloud::{ActionReport, ArtifactKind, CloudError, ImageMade, ImageState, SpotMoves};
use crate::engine::{Action, Code, ReclaimHold};
use crate::fleet::InstanceState;
use crate::names::{ACTOR, RECLAIM_TAG};
use crate::spot::drive::{Tick, Unanswered};
use crate::store::{
    NewAuditEntry, Outcome, ReclaimRecord, ReclaimState, Store, StoreError, INTERRUPTED,
};
use chrono::{DateTime, Duration, Utc};
use sqlx::types::Json;

/// What one step of a reclaim came to.
#[derive(Debug)]
pub struct Advanced {
    /// The state it is in afterwards.
    pub state: ReclaimState,
    /// What happened (empty when it waited).
    pub detail: String,
}

/// Advances `r` by one step, with what keeps its box this tick (`hold`), once its
/// `unanswered` intents are resolved from what the cloud shows; while one of them cannot be (a
/// read fails), nothing else is done.
pub async fn advance<S: SpotMoves>(
    spot: &S,
    store: &Store,
    tick: Tick<'_>,
    r: ReclaimRecord,
    cx: Context<'_>,
    unanswered: &[Unanswered],
) -> Result<Advanced, StoreError> {
    let hold = cx.hold;
    let mut run = Run {
        spot,
        store,
        tick,
        keep_image_for: cx.keep_image_for,
        r,
        audit: Vec::new(),
        happened: String::new(),
    };
    if run.resolve(unanswered).await? {
        run.step(hold).await?;
    }
    run.flush().await?;
    Ok(Advanced {
        state: run.r.state,
        detail: run.happened,
    })
}

/// What the step sees of its reclaim's box and policy this tick.
#[derive(Debug, Clone, Copy)]
pub struct Context<'a> {
    /// What keeps the box.
    pub hold: &'a ReclaimHold,
    /// Its policy's `stopped.keep_image_for` in the current set; `None` when the policy is gone,
    /// has no `stopped` rule or does not set it (the image is then kept).
    pub keep_image_for: Option<Duration>,
}

/// One step of one reclaim: the row as it changes, and the audit entries to write with it.
struct Run<'a, S> {
    spot: &'a S,
    store: &'a Store,
    tick: Tick<'a>,
    keep_image_for: Option<Duration>,
    r: ReclaimRecord,
    audit: Vec<NewAuditEntry>,
    happened: String,
}

impl<S: SpotMoves> Run<'_, S> {
    /// Now on the timers' clock: what the reclaim's waits are measured by, and the times it
    /// records.
    fn now(&self) -> DateTime<Utc> {
        self.tick.now
    }

    /// Resolves the intents of `unanswered` that what the cloud shows can settle now; `false`
    /// when a read failed and the step must wait.
    async fn resolve(&mut self, unanswered: &[Unanswered]) -> Result<bool, StoreError> {
        for u in unanswered {
            let what = u
                .intent
                .entry
                .reason
                .split_once(": ")
                .map_or("", |(_, w)| w);
            if what.starts_with("image ") {
                let Ok(artifacts) = self.spot.migration_artifacts(&self.r.region).await else {
                    return Ok(false);
                };
                let id = self.r.id.to_string();
                let own = image_tags(self.r.id, &self.r.instance);
                let made = artifacts.into_iter().find(|a| {
                    a.kind == ArtifactKind::Image
                        && own.iter().all(|(k, v)| a.tags.get(k) == Some(v))
                });
                match made {
                    Some(a) => {
                        self.settle(u, Outcome::Succeeded, format!("found image {}", a.id));
                        self.r.image = Some(a.id);
                        if self.r.state != ReclaimState::Imaging {
                            self.r.state = ReclaimState::Imaging;
                            self.r.state_since = self.now();
                        }
                    }
                    None => self.settle(
                        u,
                        Outcome::Failed,
                        format!("not carried out: no image tagged {RECLAIM_TAG}={id} is found"),
                    ),
                }
            } else if what.starts_with("terminate ") {
                let Ok(found) = self.status(&self.r.instance.clone()).await else {
                    return Ok(false);
                };
                match found {
                    Some(state) if !gone(state) => self.settle(
                        u,
                        Outcome::Failed,
                        format!("not carried out: it is still {}", state.as_str()),
                    ),
                    _ => {
                        self.settle(u, Outcome::Succeeded, "found it terminated".into());
                        self.r.terminated_at = Some(self.now());
                        self.r.state = ReclaimState::Reclaimed;
                        self.r.state_since = self.now();
                    }
                }
            } else if let Some(image) = what.strip_prefix("deregister image ") {
                let image = image.split([' ', ':']).next().unwrap_or_default();
                let Ok(found) = self.spot.image(&self.r.region, image).await else {
                    return Ok(false);
                };
                match found.filter(|i| i.state != ImageState::Failed) {
                    Some(_) => self.settle(
                        u,
                        Outcome::Failed,
                        format!("not carried out: image {image} is still registered"),
                    ),
                    None => {
                        self.settle(u, Outcome::Succeeded, format!("found image {image} gone"));
                        self.r.image_deleted_at.get_or_insert(self.now());
                    }
                }
            } else if let Some(snapshot) = what.strip_prefix("delete snapshot ") {
                let snapshot = snapshot.split(' ').next().unwrap_or_default().to_string();
                let Ok(artifacts) = self.spot.migration_artifacts(&self.r.region).await else {
                    return Ok(false);
                };
                let there = artifacts
                    .iter()
                    .any(|a| a.kind == ArtifactKind::Snapshot && a.id == snapshot);
                match there {
                    true => self.settle(
                        u,
                        Outcome::Failed,
                        format!("not carried out: snapshot {snapshot} is still there"),
                    ),
                    false => {
                        self.settle(
                            u,
                            Outcome::Succeeded,
                            format!("found snapshot {snapshot} gone"),
                        );
                        self.r.snapshots.retain(|s| *s != snapshot);
                    }
                }
            } else if what.starts_with("launch ") {
                let id = self.r.id.to_string();
                let Ok(found) = self
                    .spot
                    .find_tagged(&self.r.region, RECLAIM_TAG, &id)
                    .await
                else {
                    return Ok(false);
                };
                match found.filter(|s| s.image == self.r.image && !gone(s.state)) {
                    Some(s) => {
                        self.settle(u, Outcome::Succeeded, format!("found {} launched", s.id));
                        self.r.restored_as = Some(s.id);
                        self.r.state = ReclaimState::Restoring;
                        self.r.state_since = self.now();
                    }
                    None => self.settle(
                        u,
                        Outcome::Failed,
                        format!("not carried out: no box tagged {RECLAIM_TAG}={id} runs its image"),
                    ),
                }
            }
        }
        Ok(true)
    }

    /// The step the reclaim's state calls for.
    async fn step(&mut self, hold: &ReclaimHold) -> Result<(), StoreError> {
        match self.r.state {
            // Its notice runs: what keeps the box is judged when it ends.
            ReclaimState::Noticed if self.now() < self.r.due_at => Ok(()),
            ReclaimState::Noticed | ReclaimState::Imaging => match hold {
                ReclaimHold::Unknown => Ok(()),
                ReclaimHold::Held(why) => {
                    let why = match &self.r.image {
                        Some(image) => format!("{why}; its image {image} is kept"),
                        None => why.clone(),
                    };
                    self.end(ReclaimState::Held, Code::ReclaimHeld, why).await
                }
                ReclaimHold::Free if self.r.image.is_none() => self.make_image().await,
                ReclaimHold::Free => self.imaging().await,
            },
            ReclaimState::Reclaimed if self.r.restore_asked_at.is_some() => self.restore().await,
            ReclaimState::Restoring => self.restoring().await,
            ReclaimState::Restored if self.r.ended_at.is_none() => self.expire_image().await,
            _ => Ok(()),
        }
    }

    /// Reads how the box was launched, refuses a box an image would not hold, and asks for
    /// the image (found by its name if an earlier attempt made it).
    async fn make_image(&mut self) -> Result<(), StoreError> {
        let (region, instance) = (self.r.region.clone(), self.r.instance.clone());
        if !self.read_spec().await? {
            return Ok(());
        }
        let name = image_name(self.r.id, &instance);
        let what = format!("image {instance} with all its volumes as {name}");
        let seq = match self
            .intent(Action::Reclaim, Code::ReclaimImage, &what)
            .await?
        {
            Ok(seq) => seq,
            Err(why) => return self.end(ReclaimState::Held, Code::ReclaimHeld, why).await,
        };
        let made = self
            .spot
            .create_image(&region, &instance, &name, &image_tags(self.r.id, &instance))
            .await;
        let image = match made {
            Ok(ImageMade::Made(image)) => {
                self.outcome(
                    seq,
                    Action::Reclaim,
                    Code::ReclaimImage,
                    Ok(&format!("image {image} asked for")),
                    None,
                );
                image
            }
            Ok(ImageMade::Named(ids)) => match self.own_image(&ids).await {
                Some(image) => {
                    let found = format!("found image {image} made by an earlier call");
                    self.outcome(
                        seq,
                        Action::Reclaim,
                        Code::ReclaimImage,
                        Ok(&format!("{found}; nothing made")),
                        None,
                    );
                    image
                }
                None => {
                    let why = format!("images named {name} exist ({}) that ebb cannot prove it made for this reclaim; the box is kept", ids.join(", "));
                    let refused = CloudError::other("CreateImage", &why);
                    self.outcome(
                        seq,
                        Action::Reclaim,
                        Code::ReclaimImage,
                        Err(&refused),
                        None,
                    );
                    return self
                        .end(ReclaimState::Refused, Code::ReclaimRefused, why)
                        .await;
                }
            },
            Err(e) if e.kind.may_have_landed() => {
                let detail = format!("the answer to the image request was lost ({e}); looked for by its tags once it can no longer land");
                return self.go(ReclaimState::Imaging, detail).await;
            }
            Err(e) => {
                self.outcome(seq, Action::Reclaim, Code::ReclaimImage, Err(&e), None);
                let why = format!("its image could not be made ({e}); the box is kept");
                return self
                    .end(ReclaimState::Refused, Code::ReclaimRefused, why)
                    .await;
            }
        };
        self.r.image = Some(image.clone());
        self.go(
            ReclaimState::Imaging,
            format!("image {image} of {instance} is being made"),
        )
        .await
    }

    /// Records how the box was launched, read from EC2 unless recorded (the box is stopped, so
    /// its volumes stay those its image is made of), and refuses a box an image would not hold;
    /// `false` when it cannot be read, or the reclaim ended.
    async fn read_spec(&mut self) -> Result<bool, StoreError> {
        if self.r.launch_spec.is_some() {
            return Ok(true);
        }
        let spec = match self
            .spot
            .launch_spec(&self.r.region, &self.r.instance)
            .await
        {
            Ok(spec) => spec,
            Err(e) => {
                tracing::warn!(reclaim = self.r.id, error = %e, "cannot read how the box was launched");
                return Ok(false);
            }
        };
        if let Some(why) = refusal(&spec) {
            self.end(ReclaimState::Refused, Code::ReclaimRefused, why)
                .await?;
            return Ok(false);
        }
        self.r.launch_spec = Some(Json(spec));
        Ok(true)
    }

    /// The first of `ids` (images of the reclaim's name) that carries the reclaim's tag.
    async fn own_image(&self, ids: &[String]) -> Option<String> {
        for id in ids {
            let Ok(Some(image)) = self.spot.image(&self.r.region, id).await else {
                continue;
            };
            let own = image_tags(self.r.id, &self.r.instance);
            if own.iter().all(|(k, v)| image.tags.get(k) == Some(v)) {
                return Some(id.clone());
            }
        }
        None
    }

    /// Waits for the image; once it is available and proven, terminates the box.
    async fn imaging(&mut self) -> Result<(), StoreError> {
        // Read again when the tick that asked for the image died before recording it.
        if !self.read_spec().await? {
            return Ok(());
        }
        let image = self.r.image.clone().unwrap_or_default();
        let volumes = self
            .r
            .launch_spec
            .as_ref()
            .map_or(Vec::new(), |s| s.0.volumes.clone());
        let found = match self.spot.image(&self.r.region, &image).await {
            Ok(found) => found,
            Err(e) => {
                tracing::warn!(reclaim = self.r.id, error = %e, "cannot read the image");
                return Ok(());
            }
        };
        let found = match found {
            Some(f) if f.state == ImageState::Pending => {
                if self.now() - self.r.state_since <= IMAGE_TIMEOUT {
                    return Ok(());
                }
                let why = format!(
                    "image {image} was not available within 6 h; the box and the image are kept"
                );
                return self
                    .end(ReclaimState::Refused, Code::ReclaimRefused, why)
                    .await;
            }
            Some(f) if f.state == ImageState::Available => f,
            _ => {
                let why = format!("image {image} failed or is gone; the box is kept");
                return self
                    .end(ReclaimState::Refused, Code::ReclaimRefused, why)
                    .await;
            }
        };
        if let Err(why) = prove(&found, &image, self.r.id, &self.r.instance, &volumes) {
            let why = format!("{why}; the box is kept, and so is the image");
            return self
                .end(ReclaimState::Refused, Code::ReclaimRefused, why)
                .await;
        }
        self.r.snapshots = found.snapshots.clone();
        self.r.image_volumes = Some(found.volumes.clone());
        self.terminate(&image, volumes.len()).await
    }

    /// Terminates the box, whose image `image` of its `volumes` volumes is proven.
    async fn terminate(&mut self, image: &str, volumes: usize) -> Result<(), StoreError> {
        let instance = self.r.instance.clone();
        let what = format!(
            "terminate {instance}: its image {image} is proven complete ({} snapshots of its {volumes} volumes)",
            self.r.snapshots.len()
        );
        let seq = match self.intent(Action::Reclaim, Code::Reclaimed, &what).await? {
            Ok(seq) => seq,
            Err(why) => {
                let why = format!("{why}; its image {image} is kept");
                return self.end(ReclaimState::Held, Code::ReclaimHeld, why).await;
            }
        };
        let report = self
            .spot
            .terminate(&self.r.region, std::slice::from_ref(&instance))
            .await;
        match first_error(&report) {
            None => {
                self.outcome(
                    seq,
                    Action::Reclaim,
                    Code::Reclaimed,
                    Ok("terminated"),
                    request_id(&report),
                );
                self.r.terminated_at = Some(self.now());
                let detail = format!("{instance} terminated; image {image} keeps its disks: `ebb restore {instance}` brings it back");
                self.go(ReclaimState::Reclaimed, detail).await
            }
            Some(e) if e.kind.may_have_landed() => {
                let detail = format!("the answer to the termination was lost ({e}); resolved from what EC2 shows once it can no longer land");
                self.go(ReclaimState::Imaging, detail).await
            }
            Some(e) => {
                self.outcome(seq, Action::Reclaim, Code::Reclaimed, Err(&e), None);
                let why = format!("it could not be terminated ({e}); the box is kept, and so is its image {image}");
                self.end(ReclaimState::Refused, Code::ReclaimRefused, why)
                    .await
            }
        }
    }

    /// The state of instance `id` now; `None` when EC2 no longer knows it.
    async fn status(&self, id: &str) -> Result<Option<InstanceState>, CloudError> {
        let found = self
            .spot
            .describe(&self.r.region, &[id.to_string()])
            .await?;
        Ok(found.into_iter().find(|s| s.id == id).map(|s| s.state))
    }

    fn entry(&self, action: Action, outcome: Outcome, code: Code, what: &str) -> NewAuditEntry {
        let reason = format!("reclaim {}: {what}", self.r.id);
        NewAuditEntry {
            instance: Some(self.r.instance.clone()),
            region: Some(self.r.region.clone()),
            outcome,
            policy: Some(self.r.policy.clone()),
            policy_version: Some(self.tick.version.to_string()),
            code: Some(code.as_str().to_string()),
            ..NewAuditEntry::event(self.tick.at, ACTOR, action.as_str(), reason)
        }
    }

    /// Commits the intent of a cloud call through the leader's fence, right before the call:
    /// its sequence number, or why not when an override made since protects the box.
    async fn intent(
        &mut self,
        action: Action,
        code: Code,
        what: &str,
    ) -> Result<Result<i64, String>, StoreError> {
        let entry = self.entry(action, Outcome::Intent, code, what);
        self.tick.leader.fence_one(entry, self.tick.at).await
    }

    /// Notes the outcome of intent `seq`.
    fn outcome(
        &mut self,
        seq: i64,
        action: Action,
        code: Code,
        result: Result<&str, &CloudError>,
        request_id: Option<String>,
    ) {
        let (outcome, what, error) = match result {
            Ok(detail) => (Outcome::Succeeded, detail.to_string(), None),
            Err(e) => (Outcome::Failed, e.to_string(), Some(e.stored())),
        };
        let mut entry = self.entry(action, outcome, code, &what);
        entry.intent_seq = Some(seq);
        entry.request_id = request_id.or_else(|| result.err().and_then(|e| e.request_id.clone()));
        entry.error = error;
        self.audit.push(entry);
    }

    /// Settles unanswered intent `u` from what the cloud shows: `detail` says what.
    fn settle(&mut self, u: &Unanswered, outcome: Outcome, detail: String) {
        let e = &u.intent.entry;
        self.audit.push(NewAuditEntry {
            at: self.tick.at,
            outcome,
            reason: format!("{}; {detail}", e.reason),
            error: (outcome == Outcome::Failed).then(|| format!("{INTERRUPTED}: {detail}")),
            request_id: None,
            intent_seq: Some(u.intent.seq),
            ..e.clone()
        });
    }

    /// Notes what happened without a cloud call.
    fn event(&mut self, action: Action, code: Code, outcome: Outcome, what: &str) {
        let entry = self.entry(action, outcome, code, what);
        self.audit.push(entry);
    }

    /// Ends the reclaim in `state` (held or refused) for `why`.
    async fn end(
        &mut self,
        state: ReclaimState,
        code: Code,
        why: String,
    ) -> Result<(), StoreError> {
        let outcome = match state {
            ReclaimState::Refused => Outcome::Failed,
            _ => Outcome::Skipped,
        };
        self.event(Action::Reclaim, code, outcome, &why);
        self.r.error = Some(why.clone());
        self.r.ended_at = Some(self.now());
        self.go(state, why).await
    }

    /// Moves to `state`, and saves the row with the audit entries.
    async fn go(&mut self, state: ReclaimState, detail: String) -> Result<(), StoreError> {
        if state != self.r.state {
            self.r.state = state;
            self.r.state_since = self.now();
        }
        self.happened = detail;
        let audit = std::mem::take(&mut self.audit);
        self.store.save_reclaim(&self.r, &audit).await
    }

    /// Saves the row with the audit entries not saved yet, if any.
    async fn flush(&mut self) -> Result<(), StoreError> {
        if self.audit.is_empty() {
            return Ok(());
        }
        let audit = std::mem::take(&mut self.audit);
        self.store.save_reclaim(&self.r, &audit).await
    }
}

/// Whether an instance in `state` is gone, or going.
fn gone(state: InstanceState) -> bool {
    matches!(
        state,
        InstanceState::Terminated | InstanceState::ShuttingDown
    )
}

fn first_error(report: &ActionReport) -> Option<CloudError> {
    match report.failed.first() {
        Some(f) => Some(f.error.clone()),
        // A call that answered for no instance at all said nothing of this one.
        None if report.done.is_empty() => Some(CloudError::other(
            "TerminateInstances",
            "EC2 answered for no instance",
        )),
        None => None,
    }
}

fn request_id(report: &ActionReport) -> Option<String> {
    report.done.first().and_then(|d| d.request_id.clone())
}
