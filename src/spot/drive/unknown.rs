//! A step's call left without an answer (lost, or its tick died after the call) is unknown:
//! its intent stays open while the call may still land (`reconcile/resolve.rs` leaves the
//! migration alone meanwhile), and is then resolved here, before the migration's next step,
//! from what the cloud shows of that call: `succeeded` when its effect is there, otherwise as a
//! deposed leader's intent is (`failed` as interrupted, the step repeated; `skipped` when the
//! instance is gone). A read that fails leaves it open. A call found carried out is taken as
//! done by the step, never made again.

use super::Run;
use crate::cloud::{ArtifactKind, ImageState, InstanceStatus, Provider, SpotMoves};
use crate::fleet::InstanceState;
use crate::names::{IMAGE_OF_TAG, LAUNCH_TAG, MIGRATING_TAG, MIGRATION_TAG};
use crate::spot::{prove_image, prove_replacement, State};
use crate::store::{AuditEntry, NewAuditEntry, Outcome, StoreError, INTERRUPTED};
use chrono::{DateTime, Utc};
use sqlx::types::Json;

/// An intent of a migration's step left open, past the window in which its call could land.
#[derive(Debug, Clone)]
pub struct Unanswered {
    /// The intent.
    pub intent: AuditEntry,
    /// When it was committed, on the timers' clock (`reconcile::Timers`).
    pub since: DateTime<Utc>,
}

impl Unanswered {
    /// The migration whose step it is, from its reason (`migration {id}: ...`, as every step
    /// writes it).
    pub fn migration(&self) -> Option<i64> {
        let (head, _) = self.intent.entry.reason.split_once(": ")?;
        head.strip_prefix("migration ")?.parse().ok()
    }
}

/// The cloud call an intent was for, read back from the reason its step wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Call {
    Tag,
    Stop,
    Image,
    Launch,
    Start,
    Untag,
    Terminate(String),
    Deregister(String),
    DeleteSnapshot(String),
}

impl Call {
    /// The call of the intent whose reason is `reason`.
    fn of(reason: &str) -> Option<Call> {
        let (_, what) = reason.split_once(": ")?;
        // The id that follows `prefix`.
        let id = |prefix: &str| {
            let rest = what.strip_prefix(prefix)?;
            let id = rest.split([' ', ':']).next()?;
            (!id.is_empty()).then(|| id.to_string())
        };
        let call = if let Some(id) = id("roll back: terminate the replacement ")
            .or_else(|| id("terminate the original "))
            .or_else(|| id("terminate "))
        {
            Call::Terminate(id)
        } else if let Some(image) = id("deregister image ") {
            Call::Deregister(image)
        } else if let Some(snapshot) = id("delete snapshot ") {
            Call::DeleteSnapshot(snapshot)
        } else if what.starts_with("roll back: start ") {
            Call::Start
        } else if what.starts_with("remove the ") {
            Call::Untag
        } else if what.starts_with("tag ") {
            Call::Tag
        } else if what.starts_with("stop ") {
            Call::Stop
        } else if what.starts_with("image ") {
            Call::Image
        } else if what.starts_with("launch ") {
            Call::Launch
        } else {
            return None;
        };
        Some(call)
    }
}

/// A call found carried out, which the step takes as done this tick instead of calling again.
#[derive(Debug, Clone)]
pub(super) enum Landed {
    Tag,
    Start,
    Untag,
    /// The replacement the launch made, proven the migration's.
    Launch(InstanceStatus),
    Terminate(String),
}

/// What the cloud shows of an unanswered call.
struct Seen {
    outcome: Outcome,
    detail: String,
    /// What it did, when it was carried out.
    effect: Option<Effect>,
}

/// What a call found carried out did.
enum Effect {
    /// Moves the migration on: the original stopped, or its image made.
    Stopped,
    Imaged(String),
    /// Leaves the migration's record: its image deregistered, or a snapshot deleted.
    Deregistered,
    SnapshotDeleted(String),
    /// Taken as done by the step this tick.
    Landed(Landed),
}

impl Seen {
    fn landed(detail: String, effect: Effect) -> Option<Seen> {
        Some(Seen {
            outcome: Outcome::Succeeded,
            detail,
            effect: Some(effect),
        })
    }

    /// The call's effect is not there, and can no longer come: as a deposed leader's intent,
    /// `failed` as interrupted (never backed off), and the step is taken again from here.
    fn absent(what: String) -> Option<Seen> {
        Some(Seen {
            outcome: Outcome::Failed,
            detail: format!(
                "{INTERRUPTED}, or its answer lost; {what} (the step is taken again from here)"
            ),
            effect: None,
        })
    }

    /// Whether the call landed cannot be told from what the cloud shows.
    fn unknowable(detail: String) -> Option<Seen> {
        Some(Seen {
            outcome: Outcome::Skipped,
            detail,
            effect: None,
        })
    }
}

impl<P: Provider> Run<'_, P> {
    /// Resolves `unanswered`, this migration's intents whose calls can no longer land, each
    /// with its outcome in the audit entries of this step; whether every one was.
    pub(super) async fn resolve(&mut self, unanswered: &[Unanswered]) -> Result<bool, StoreError> {
        let mut all = true;
        for u in unanswered {
            let e = &u.intent.entry;
            let seen = match Call::of(&e.reason) {
                Some(call) => self.seen(&call, u.since).await,
                None => Seen::unknowable(format!(
                    "{INTERRUPTED}, or its answer lost; the step goes on from what the cloud shows"
                )),
            };
            let Some(seen) = seen else {
                all = false;
                continue;
            };
            self.audit.push(NewAuditEntry {
                at: self.tick_now(),
                outcome: seen.outcome,
                reason: format!("{}; {}", e.reason, seen.detail),
                error: (seen.outcome == Outcome::Failed).then(|| seen.detail.clone()),
                request_id: None,
                intent_seq: Some(u.intent.seq),
                ..e.clone()
            });
            // What waited for the answer goes on now.
            self.m.retry_at = None;
            match seen.effect {
                Some(Effect::Stopped) => {
                    let detail = format!("stopping {}: {}", self.m.original, seen.detail);
                    self.go(State::Stopping, detail).await?;
                }
                Some(Effect::Imaged(image)) => {
                    let detail = format!("imaging {} as {image}: {}", self.m.original, seen.detail);
                    self.m.image = Some(image);
                    self.go(State::Imaging, detail).await?;
                }
                Some(Effect::Deregistered) => self.m.image = None,
                Some(Effect::SnapshotDeleted(s)) => self.m.snapshots.retain(|k| *k != s),
                Some(Effect::Landed(landed)) => self.landed.push(landed),
                None => {}
            }
        }
        Ok(all)
    }

    /// What the cloud shows of `call`, whose intent was committed at `since`; `None` while it
    /// cannot be read.
    async fn seen(&mut self, call: &Call, since: DateTime<Utc>) -> Option<Seen> {
        let original = self.m.original.clone();
        let region = self.m.region.clone();
        match call {
            Call::Tag | Call::Stop | Call::Untag => {
                let ids = std::slice::from_ref(&original);
                let found = self.p.reread(&region, ids).await.ok()?;
                let Some(i) = found.into_iter().find(|i| i.id == original) else {
                    return Seen::unknowable(format!(
                        "{original} is no longer listed as managed: not known whether the call was carried out; the step goes on from what the cloud shows"
                    ));
                };
                let ours = self.m.id.to_string();
                let tag = i.tag(MIGRATING_TAG);
                let state = i.state.as_str();
                match call {
                    Call::Tag if tag == Some(ours.as_str()) => Seen::landed(
                        format!("found {original} tagged {MIGRATING_TAG}={ours}"),
                        Effect::Landed(Landed::Tag),
                    ),
                    Call::Tag => {
                        Seen::absent(format!("{original} is not tagged {MIGRATING_TAG}={ours}"))
                    }
                    Call::Untag if tag.is_none() => Seen::landed(
                        format!("found {original} without {MIGRATING_TAG}"),
                        Effect::Landed(Landed::Untag),
                    ),
                    Call::Untag => {
                        Seen::absent(format!("{original} is still tagged {MIGRATING_TAG}"))
                    }
                    _ if matches!(i.state, InstanceState::Stopping | InstanceState::Stopped)
                        && i.in_state_since(since) =>
                    {
                        // A tick killed after the stop never saved how the original was
                        // launched, which the rest of the move copies: read it now.
                        if self.m.launch_spec.is_none() {
                            let spec = self.spot.launch_spec(&region, &original).await.ok()?;
                            self.m.launch_spec = Some(Json(spec));
                        }
                        Seen::landed(format!("found {original} {state}"), Effect::Stopped)
                    }
                    // Stopped before the intent: someone else's stop, which the step sees.
                    _ if matches!(i.state, InstanceState::Stopping | InstanceState::Stopped) => {
                        Seen::unknowable(format!(
                            "found {original} {state} since before the intent: not this call's stop"
                        ))
                    }
                    _ => Seen::absent(format!("{original} is {state}")),
                }
            }
            Call::Start => {
                let status = self.status(&original).await.ok()?;
                match status.map(|s| s.state) {
                    Some(s @ (InstanceState::Pending | InstanceState::Running)) => Seen::landed(
                        format!("found {original} {}", s.as_str()),
                        Effect::Landed(Landed::Start),
                    ),
                    Some(s) if !gone(s) => Seen::absent(format!("{original} is {}", s.as_str())),
                    _ => Seen::unknowable(format!("{original} is gone")),
                }
            }
            Call::Terminate(id) => {
                let status = self.status(id).await.ok()?;
                match status.map(|s| s.state) {
                    Some(s) if !gone(s) => Seen::absent(format!("{id} is {}", s.as_str())),
                    s => Seen::landed(
                        format!("found {id} {}", s.map_or("gone", InstanceState::as_str)),
                        Effect::Landed(Landed::Terminate(id.clone())),
                    ),
                }
            }
            Call::Launch => self.seen_launch().await,
            Call::Image => self.seen_image().await,
            Call::Deregister(image) => match self.spot.image(&region, image).await.ok()? {
                Some(found) if found.state != ImageState::Failed => {
                    Seen::absent(format!("image {image} is still registered"))
                }
                _ => Seen::landed(format!("found image {image} gone"), Effect::Deregistered),
            },
            Call::DeleteSnapshot(snapshot) => {
                let artifacts = self.spot.migration_artifacts(&region).await.ok()?;
                let there = artifacts
                    .iter()
                    .any(|a| a.kind == ArtifactKind::Snapshot && a.id == *snapshot);
                match there {
                    true => Seen::absent(format!("snapshot {snapshot} is still there")),
                    false => Seen::landed(
                        format!("found snapshot {snapshot} gone"),
                        Effect::SnapshotDeleted(snapshot.clone()),
                    ),
                }
            }
        }
    }

    /// A launch: the instance carrying its `ebb:launch` tag, proven to run the migration's
    /// image (the launch id is the row's next, as when the call was made).
    async fn seen_launch(&mut self) -> Option<Seen> {
        let launch_id = format!("{}-{}-{}", self.m.original, self.m.id, self.m.launches + 1);
        let found = self
            .spot
            .find_tagged(&self.m.region, LAUNCH_TAG, &launch_id)
            .await
            .ok()?;
        match found {
            Some(s) if prove_replacement(&s, self.m.image.as_deref()).is_ok() => Seen::landed(
                format!("found {} launched as {launch_id}", s.id),
                Effect::Landed(Landed::Launch(s)),
            ),
            // None, or not proven: the step looks again, and launches under the same client
            // token, which makes no second instance.
            _ => Seen::absent(format!(
                "no instance of launch {launch_id} running the migration's image is found"
            )),
        }
    }

    /// An image: one carrying the migration's tags and proven made of the original's volumes.
    async fn seen_image(&mut self) -> Option<Seen> {
        let (id, original) = (self.m.id.to_string(), self.m.original.clone());
        let artifacts = self.spot.migration_artifacts(&self.m.region).await.ok()?;
        let volumes = self
            .m
            .launch_spec
            .as_ref()
            .map_or(Vec::new(), |s| s.0.volumes.clone());
        let tagged = artifacts.into_iter().filter(|a| {
            a.kind == ArtifactKind::Image
                && a.tags.get(MIGRATION_TAG) == Some(&id)
                && a.tags.get(IMAGE_OF_TAG) == Some(&original)
        });
        for a in tagged {
            let image = self.spot.image(&self.m.region, &a.id).await.ok()?;
            if image.is_some_and(|i| prove_image(&i, self.m.id, &original, &volumes).is_ok()) {
                let detail = format!("found image {} of {original}", a.id);
                return Seen::landed(detail, Effect::Imaged(a.id));
            }
        }
        Seen::absent(format!(
            "no image of {original} this migration made is found"
        ))
    }

    /// Takes the call found carried out that `is` names, if one was.
    pub(super) fn took(&mut self, is: impl Fn(&Landed) -> bool) -> Option<Landed> {
        let at = self.landed.iter().position(is)?;
        Some(self.landed.remove(at))
    }
}

/// Whether an instance in `state` is gone, or going.
fn gone(state: InstanceState) -> bool {
    matches!(
        state,
        InstanceState::Terminated | InstanceState::ShuttingDown
    )
}

#[cfg(test)]
mod tests {
    use super::Call;

    #[test]
    fn the_call_is_read_back_from_the_reason_its_step_wrote() {
        let cases = [
            ("migration 7: tag i-1 ebb:migrating=7, so that", Call::Tag),
            ("migration 7: stop i-1 to image it", Call::Stop),
            (
                "migration 7: image i-1 with all its volumes as x",
                Call::Image,
            ),
            (
                "migration 7: launch spot g5.xlarge in a (s) from ami-1",
                Call::Launch,
            ),
            ("migration 7: roll back: start i-1 again", Call::Start),
            (
                "migration 7: remove the ebb:migrating tag of i-1",
                Call::Untag,
            ),
            (
                "migration 7: terminate the original i-1: kept for",
                Call::Terminate("i-1".into()),
            ),
            (
                "migration 7: roll back: terminate the replacement i-2",
                Call::Terminate("i-2".into()),
            ),
            (
                "migration 7: terminate i-2: it did not come up",
                Call::Terminate("i-2".into()),
            ),
            (
                "migration 7: deregister image ami-1: why",
                Call::Deregister("ami-1".into()),
            ),
            (
                "migration 7: delete snapshot snap-1 of image ami-1: why",
                Call::DeleteSnapshot("snap-1".into()),
            ),
        ];
        for (reason, call) in cases {
            assert_eq!(Call::of(reason), Some(call), "{reason}");
        }
        assert_eq!(Call::of("migration 7: something else"), None);
    }
}
