//! Advancing one migration by one step: the cloud calls, written to the audit log (an intent
//! before each call, its outcome after) and to `spot_migrations`.
//!
//! Each step can be repeated: a stop or termination twice is harmless, an image is found by
//! its name and a replacement by its launch tag before either is made again. So when ebb dies
//! between a call and the write that records it, the next tick redoes the step and finds what
//! the first attempt made.
//!
//! A call whose answer was lost (or whose tick died after it) leaves its intent open; once it
//! can no longer land, the migration resolves it from what the cloud shows before its next
//! step (`unknown`), and a call found carried out is not made again.
//!
//! [`advance`] is the one entry. The steps are split by phase: `stop` (planned, stopping),
//! `image` (imaging, choosing the spot offer), `launch` (launching, verifying), `done`
//! (watching the replacement, reclaims, cleaning up the original) and `undo` (rolling back,
//! ending).

mod done;
mod early;
mod image;
mod launch;
mod orphan;
mod stop;
mod undo;
mod unknown;

pub use orphan::terminate_lost;
pub use unknown::Unanswered;

use super::{retry_wait, Alert, Hold, State, Step};
use crate::cloud::{ActionReport, CloudError, InstanceStatus, Provider, SpotMoves};
use crate::engine::{Action, Code, Decision};
use crate::names::ACTOR;
use crate::policy::SpotRule;
use crate::store::{Leadership, MigrationRecord, NewAuditEntry, Outcome, Store, StoreError};
use chrono::{DateTime, Utc};

/// What one tick lends every migration step: its time, the policy version in force, and the
/// leader's session, whose fence commits each call's intent.
pub struct Tick<'a> {
    /// The tick's time: of its audit rows, the prices it reads and the tags and overrides in
    /// force.
    pub at: DateTime<Utc>,
    /// Now for the migration's waits and the times it records: the database's clock against a
    /// real cloud (`reconcile::Timers`), so that no replica whose host's clock runs ahead
    /// terminates an original or deletes an image early; otherwise the tick's time.
    pub now: DateTime<Utc>,
    /// The policy-set version, for the audit log.
    pub version: &'a str,
    /// The leadership this tick acts under.
    pub leader: &'a mut Leadership,
}

/// What the step sees of its migration's original this tick.
#[derive(Debug, Clone, Copy)]
pub struct Context<'a> {
    /// The spot rule of the migration's policy in the current set; `None` when the policy is
    /// gone or has no spot rule any more.
    pub rule: Option<&'a SpotRule>,
    /// This tick's decision on the original, if it was listed.
    pub decision: Option<&'a Decision>,
    /// EC2 warned that it will reclaim the current replacement within two minutes.
    pub warned: bool,
    /// What protects the original this tick, and whether its policy still moves it.
    pub hold: &'a Hold,
    /// The job's last checkpoint (tag `ebb:checkpoint-at`) on the workload's instance as
    /// listed this tick (the current replacement, else the original), for the spot ranking's
    /// work lost at an interruption.
    pub checkpoint_at: Option<DateTime<Utc>>,
}

/// What one step of a migration came to.
#[derive(Debug)]
pub struct Advanced {
    /// The state it is in afterwards.
    pub state: State,
    /// What happened (empty when it waited).
    pub detail: String,
    /// What a person must look at, if anything, and why.
    pub alert: Option<(Alert, String)>,
}

/// Advances `m` by one step, once its `unanswered` intents are resolved from what the cloud
/// shows; while one of them cannot be (a read fails), nothing else is done.
pub async fn advance<P: Provider>(
    provider: &P,
    spot: &P::SpotMoves,
    store: &Store,
    tick: Tick<'_>,
    m: MigrationRecord,
    cx: Context<'_>,
    unanswered: &[Unanswered],
) -> Result<Advanced, StoreError> {
    let mut run = Run::new(provider, spot, store, tick, m, cx);
    if !run.resolve(unanswered).await? {
        run.flush().await?;
        return Ok(run.advanced());
    }
    run.step().await?;
    // The outcomes of resolved intents, when the step saved nothing after them.
    run.flush().await?;
    Ok(run.advanced())
}

impl<P: Provider> Run<'_, P> {
    /// The step the migration's state calls for.
    async fn step(&mut self) -> Result<(), StoreError> {
        if self.m.ended_at.is_some() {
            return self.expire_image().await;
        }
        match self.m.state {
            // An early move under way follows its own steps, whatever protects the original.
            _ if self.m.outgoing.is_some() => self.moving().await,
            State::Planned => self.planned().await,
            State::Stopping | State::Imaging | State::Launching | State::Verifying => {
                self.before_done().await
            }
            State::Done => self.done().await,
            State::RollingBack if self.backing_off() => Ok(()),
            State::RollingBack => {
                let why = self.m.error.clone().unwrap_or_default();
                self.roll_back(why).await
            }
            State::RolledBack | State::Failed => Ok(()),
        }
    }
}

/// One step of one migration: the migration as it changes, and the audit entries to write
/// with it.
struct Run<'a, P: Provider> {
    p: &'a P,
    /// The cloud's spot moves: images, launches, terminations.
    spot: &'a P::SpotMoves,
    store: &'a Store,
    tick: Tick<'a>,
    cx: Context<'a>,
    m: MigrationRecord,
    /// Outcomes and events, written with the migration row.
    audit: Vec<NewAuditEntry>,
    happened: String,
    alert: Option<(Alert, String)>,
    /// Calls of unanswered intents found carried out this tick: not made again.
    landed: Vec<unknown::Landed>,
}

impl<'a, P: Provider> Run<'a, P> {
    /// A step of `m` that has done nothing yet.
    fn new(
        p: &'a P,
        spot: &'a P::SpotMoves,
        store: &'a Store,
        tick: Tick<'a>,
        m: MigrationRecord,
        cx: Context<'a>,
    ) -> Self {
        Run {
            p,
            spot,
            store,
            tick,
            cx,
            m,
            audit: Vec::new(),
            happened: String::new(),
            alert: None,
            landed: Vec::new(),
        }
    }

    /// What the step came to.
    fn advanced(self) -> Advanced {
        Advanced {
            state: self.m.state,
            detail: self.happened,
            alert: self.alert,
        }
    }

    /// Now on the timers' clock: what every wait of the migration is measured by, and every
    /// time it records.
    fn now(&self) -> DateTime<Utc> {
        self.tick.now
    }

    /// The tick's own time: its audit rows', and what tags, overrides and prices are judged at.
    fn tick_now(&self) -> DateTime<Utc> {
        self.tick.at
    }

    /// A step before `done`: undone when a protection or the policy forbids the move now, held
    /// while the original's tags are unknown, taken otherwise. A relaunch after a reclaim,
    /// once the original is terminated (EC2 lists it no more) or someone took it back, has no
    /// original to go back to: its replacement is verified whatever protects the original.
    async fn before_done(&mut self) -> Result<(), StoreError> {
        if !self.m.holds_original() && matches!(self.m.state, State::Launching | State::Verifying) {
            return self.launched().await;
        }
        match self.cx.hold {
            Hold::Protected(why) => {
                let why = format!("{why}; the move is undone");
                self.roll_back(why).await
            }
            Hold::Unknown => self.wait(format!(
                "{} was not listed: its protections are unknown",
                self.m.original
            )),
            Hold::Free => match self.m.state {
                State::Stopping => self.stopping().await,
                State::Imaging => self.imaging().await,
                _ => self.launched().await,
            },
        }
    }

    fn entry(&self, action: Action, outcome: Outcome, code: Code, reason: &str) -> NewAuditEntry {
        let reason = format!("migration {}: {reason}", self.m.id);
        NewAuditEntry {
            instance: Some(self.m.original.clone()),
            region: Some(self.m.region.clone()),
            outcome,
            policy: Some(self.m.policy.clone()),
            policy_version: Some(self.tick.version.to_string()),
            code: Some(code.as_str().to_string()),
            ..NewAuditEntry::event(self.tick_now(), ACTOR, action.as_str(), reason)
        }
    }

    /// Commits the intent of a cloud call through the leader's fence, right before the call:
    /// its sequence number, or `Err` with why not when an override made since protects the
    /// original from it (the calls that move the original: see [`Leadership::fence`]).
    async fn intent(
        &mut self,
        action: Action,
        code: Code,
        reason: &str,
    ) -> Result<Result<i64, String>, StoreError> {
        let entry = self.entry(action, Outcome::Intent, code, reason);
        self.tick.leader.fence_one(entry, self.tick_now()).await
    }

    /// Notes a failed attempt of the step under way: it is tried again after a wait that grows
    /// with each failure in a row.
    fn back_off(&mut self) {
        self.m.failures += 1;
        self.m.retry_at = Some(self.now() + retry_wait(self.m.failures));
    }

    /// Whether the step under way waits after earlier failures.
    fn backing_off(&self) -> bool {
        self.m.retry_at.is_some_and(|t| self.now() < t)
    }

    /// Notes the outcome of an intent. An error that may have been carried out (its answer
    /// lost: a timeout once sent, a connection lost after sending, a 5xx) is no outcome: the
    /// intent stays open, the migration waits while the call may still land, and then resolves
    /// it from what the cloud shows (`unknown.rs`), never `failed` while it could land.
    fn outcome(
        &mut self,
        seq: i64,
        action: Action,
        code: Code,
        result: Result<&str, &CloudError>,
        request_id: Option<String>,
    ) {
        if let Some(e) = result.err().filter(|e| e.kind.may_have_landed()) {
            tracing::warn!(
                migration = self.m.id,
                intent = seq,
                error = %e,
                "the answer was lost: the call may have been carried out; its intent stays open"
            );
            return;
        }
        let (outcome, reason, error) = match result {
            Ok(detail) => (Outcome::Succeeded, detail.to_string(), None),
            Err(e) => (Outcome::Failed, e.to_string(), Some(e.stored())),
        };
        let mut entry = self.entry(action, outcome, code, &reason);
        entry.intent_seq = Some(seq);
        entry.request_id = request_id.or_else(|| result.err().and_then(|e| e.request_id.clone()));
        entry.error = error;
        self.audit.push(entry);
    }

    /// Notes a step that needed no cloud call.
    fn event(&mut self, action: Action, code: Code, reason: &str) {
        let entry = self.entry(action, Outcome::Succeeded, code, reason);
        self.audit.push(entry);
    }

    /// Moves to `state` with a line in the history, and saves the row with the audit entries.
    async fn go(&mut self, state: State, detail: String) -> Result<(), StoreError> {
        if state != self.m.state {
            self.m.state = state;
            self.m.state_since = self.now();
        }
        match self.m.steps.0.last_mut() {
            // The same step again (a failure that repeats): counted, not appended.
            Some(last) if last.state == state && last.detail == detail => last.repeated += 1,
            _ => self.m.steps.0.push(Step {
                at: self.now(),
                state,
                detail: detail.clone(),
                repeated: 0,
            }),
        }
        self.happened = detail;
        let audit = std::mem::take(&mut self.audit);
        self.store.save_migration(&self.m, &audit).await
    }

    async fn status(&self, id: &str) -> Result<Option<InstanceStatus>, CloudError> {
        let found = self
            .spot
            .describe(&self.m.region, &[id.to_string()])
            .await?;
        Ok(found.into_iter().find(|s| s.id == id))
    }

    /// Gives up: the migration stopped half-way in a state ebb could not undo.
    async fn fail(&mut self, why: String) -> Result<(), StoreError> {
        self.event(Action::MigrateToSpot, Code::SpotFailed, &why);
        self.m.error = Some(why.clone());
        self.go(State::Failed, why).await
    }

    /// The call of the step under way (`what`) lost its answer (`error`): it may have been
    /// carried out, so nothing is decided from it and its intent stays open. The migration
    /// keeps its state; once the call can no longer land, the intent is resolved from what the
    /// cloud shows (`unknown.rs`) and the step goes on from there.
    async fn unanswered(&mut self, what: String, error: &CloudError) -> Result<(), StoreError> {
        let detail = format!(
            "{what}: not known whether it was carried out ({error}); resolved from what the cloud shows once it can no longer land"
        );
        self.go(self.m.state, detail).await
    }

    /// Saves the row with the audit entries not saved yet, if any.
    async fn flush(&mut self) -> Result<(), StoreError> {
        if self.audit.is_empty() {
            return Ok(());
        }
        let audit = std::mem::take(&mut self.audit);
        self.store.save_migration(&self.m, &audit).await
    }

    /// Nothing to do this tick.
    fn wait(&mut self, why: String) -> Result<(), StoreError> {
        tracing::debug!(migration = self.m.id, why = %why, "waiting");
        Ok(())
    }
}

/// The error of a one-instance call whose answer was lost: it may have been carried out.
fn lost(report: &ActionReport) -> Option<CloudError> {
    first_error(report).filter(|e| e.kind.may_have_landed())
}

fn first_error(report: &ActionReport) -> Option<CloudError> {
    report.failed.first().map(|f| f.error.clone())
}

fn request_id(report: &ActionReport) -> Option<String> {
    report.done.first().and_then(|d| d.request_id.clone())
}
