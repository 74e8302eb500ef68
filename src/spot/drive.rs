//! Advancing one migration by one step: the cloud calls, written to the audit log (an intent
//! before each call, its outcome after) and to `spot_migrations`.
//!
//! Each step can be repeated: a stop or termination twice is harmless, an image is found by
//! its name and a replacement by its launch tag before either is made again. So when ebb dies
//! between a call and the write that records it, the next tick redoes the step and finds what
//! the first attempt made.

use super::{avoided, cheapest, current_savings, recent_interruptions, Interruption, State, Step};
use super::{IMAGE_TIMEOUT, LAUNCH_TIMEOUT, STOP_TIMEOUT};
use crate::cloud::{
    ActionReport, CloudError, ImageState, InstanceStatus, Launch, LaunchSpec, Market, Provider,
};
use crate::engine::{Action, Code, Decision};
use crate::fleet::InstanceState;
use crate::names::{
    ACTOR, IMAGE_OF_TAG, LAUNCH_TAG, MIGRATED_FROM_TAG, MIGRATING_TAG, MIGRATION_TAG, STOP_AT_TAG,
};
use crate::policy::SpotRule;
use crate::store::{Leadership, MigrationRecord, NewAuditEntry, Outcome, Store, StoreError};
use chrono::{DateTime, Utc};
use sqlx::types::Json;
use std::collections::BTreeMap;

/// What the step sees beside the migration.
#[derive(Debug, Clone, Copy)]
pub struct Context<'a> {
    /// The spot rule of the migration's policy in the current set; `None` when the policy is
    /// gone or has no spot rule any more.
    pub rule: Option<&'a SpotRule>,
    /// This tick's decision on the original, if it was listed.
    pub decision: Option<&'a Decision>,
    /// EC2 warned that it will reclaim the current replacement within two minutes.
    pub warned: bool,
    /// The policy-set version, for the audit log.
    pub version: &'a str,
    /// Now.
    pub now: DateTime<Utc>,
}

/// Advances `m` by one step; returns the state it is in afterwards and what happened (empty
/// when it waited).
pub async fn advance<P: Provider>(
    provider: &P,
    store: &Store,
    leader: &mut Leadership,
    m: MigrationRecord,
    cx: Context<'_>,
) -> Result<(State, String), StoreError> {
    let mut run = Run {
        p: provider,
        store,
        leader,
        cx,
        m,
        audit: Vec::new(),
        happened: String::new(),
    };
    match run.m.state() {
        State::Planned => run.planned().await?,
        State::Stopping => run.stopping().await?,
        State::Imaging => run.imaging().await?,
        State::Launching | State::Verifying => run.launched().await?,
        State::Done => run.done().await?,
        State::RolledBack | State::Failed => {}
    }
    Ok((run.m.state(), run.happened))
}

struct Run<'a, P> {
    p: &'a P,
    store: &'a Store,
    leader: &'a mut Leadership,
    cx: Context<'a>,
    m: MigrationRecord,
    /// Outcomes and events, written with the migration row.
    audit: Vec<NewAuditEntry>,
    happened: String,
}

impl<P: Provider> Run<'_, P> {
    fn now(&self) -> DateTime<Utc> {
        self.cx.now
    }

    fn entry(&self, action: Action, outcome: Outcome, code: &str, reason: &str) -> NewAuditEntry {
        NewAuditEntry {
            at: self.now(),
            actor: ACTOR.to_string(),
            instance: Some(self.m.original.clone()),
            region: Some(self.m.region.clone()),
            action: action.as_str().to_string(),
            outcome,
            policy: Some(self.m.policy.clone()),
            policy_version: Some(self.cx.version.to_string()),
            code: Some(code.to_string()),
            reason: format!("migration {}: {reason}", self.m.id),
            dry_run: false,
            request_id: None,
            error: None,
            intent_seq: None,
        }
    }

    /// Commits the intent of a cloud call; returns its sequence number.
    async fn intent(
        &mut self,
        action: Action,
        code: &str,
        reason: &str,
    ) -> Result<i64, StoreError> {
        let entry = self.entry(action, Outcome::Intent, code, reason);
        Ok(self.leader.append_intents(&[entry]).await?[0].seq)
    }

    /// Notes the outcome of an intent.
    fn outcome(
        &mut self,
        seq: i64,
        action: Action,
        code: &str,
        result: Result<&str, &CloudError>,
        request_id: Option<String>,
    ) {
        let (outcome, reason, error) = match result {
            Ok(detail) => (Outcome::Succeeded, detail.to_string(), None),
            Err(e) => (Outcome::Failed, e.to_string(), Some(e.to_string())),
        };
        let mut entry = self.entry(action, outcome, code, &reason);
        entry.intent_seq = Some(seq);
        entry.request_id = request_id.or_else(|| result.err().and_then(|e| e.request_id.clone()));
        entry.error = error;
        self.audit.push(entry);
    }

    /// Notes a step that needed no cloud call.
    fn event(&mut self, action: Action, code: &str, reason: &str) {
        let entry = self.entry(action, Outcome::Succeeded, code, reason);
        self.audit.push(entry);
    }

    /// Moves to `state` with a line in the history, and saves the row with the audit entries.
    async fn go(&mut self, state: State, detail: String) -> Result<(), StoreError> {
        if state != self.m.state() {
            self.m.state = state.as_str().to_string();
            self.m.state_since = self.now();
        }
        self.m.steps.0.push(Step {
            at: self.now(),
            state,
            detail: detail.clone(),
        });
        self.happened = detail;
        let audit = std::mem::take(&mut self.audit);
        self.store.save_migration(&self.m, &audit).await
    }

    async fn status(&self, id: &str) -> Result<Option<InstanceStatus>, CloudError> {
        let found = self.p.describe(&self.m.region, &[id.to_string()]).await?;
        Ok(found.into_iter().find(|s| s.id == id))
    }

    /// `planned`: checks that the move still holds, reads how the original was launched,
    /// marks it `ebb:migrating` and stops it.
    async fn planned(&mut self) -> Result<(), StoreError> {
        let id = self.m.id.to_string();
        let marked = self.cx.decision.is_some_and(|d| d.code == Code::Migrating);
        match self.cx.decision {
            Some(d) if (d.action == Action::MigrateToSpot && !d.dry_run) || marked => {}
            other => {
                let why = other.map_or("the instance is not listed".to_string(), |d| {
                    d.reason.clone()
                });
                let detail = format!("not started, no longer eligible: {why}");
                self.event(Action::MigrateToSpot, "spot_cancelled", &detail);
                self.m.error = Some(detail.clone());
                return self.go(State::RolledBack, detail).await;
            }
        }
        let original = self.m.original.clone();
        let region = self.m.region.clone();
        if self.m.launch_spec.is_none() {
            match self.p.launch_spec(&region, &original).await {
                Ok(spec) => self.m.launch_spec = Some(Json(spec)),
                Err(e) => {
                    let detail =
                        format!("not started: cannot read how {original} was launched: {e}");
                    self.event(Action::MigrateToSpot, "spot_cancelled", &detail);
                    self.m.error = Some(detail.clone());
                    return self.go(State::RolledBack, detail).await;
                }
            }
        }
        let reason = format!("stop {original} to image it (its guest shuts down normally, so the job can checkpoint)");
        let seq = self
            .intent(Action::MigrateToSpot, "spot_stop", &reason)
            .await?;
        let tagged = self
            .p
            .tag(
                &region,
                std::slice::from_ref(&original),
                &BTreeMap::from([(MIGRATING_TAG.to_string(), id)]),
            )
            .await;
        let stopped = match first_error(&tagged) {
            Some(e) => Err(e),
            None => {
                let report = self
                    .p
                    .stop(&region, std::slice::from_ref(&original), false)
                    .await;
                match first_error(&report) {
                    Some(e) => Err(e),
                    None => Ok(request_id(&report)),
                }
            }
        };
        match stopped {
            Ok(request) => {
                self.outcome(
                    seq,
                    Action::MigrateToSpot,
                    "spot_stop",
                    Ok(&format!("stopping {original}")),
                    request,
                );
                self.go(State::Stopping, format!("stopping {original}"))
                    .await
            }
            Err(e) => {
                self.outcome(seq, Action::MigrateToSpot, "spot_stop", Err(&e), None);
                self.roll_back(format!("stopping {original} failed: {e}"))
                    .await
            }
        }
    }

    /// `stopping`: once the original is stopped, images it.
    async fn stopping(&mut self) -> Result<(), StoreError> {
        let original = self.m.original.clone();
        let region = self.m.region.clone();
        let state = match self.status(&original).await {
            Ok(s) => s.map(|s| s.state),
            Err(e) => return self.wait(format!("cannot read {original}: {e}")),
        };
        match state {
            Some(InstanceState::Stopped) => {}
            Some(InstanceState::Terminated | InstanceState::ShuttingDown) | None => {
                return self
                    .fail(format!(
                        "{original} was terminated while it stopped; nothing to move or restore"
                    ))
                    .await;
            }
            Some(_) if self.now() - self.m.state_since > STOP_TIMEOUT => {
                return self
                    .roll_back(format!("{original} did not stop within 30 min"))
                    .await;
            }
            Some(s) => return self.wait(format!("{original} is {}", s.as_str())),
        }
        let name = format!("ebb-{original}-{}", self.m.id);
        let reason = format!("image {original} with all its volumes as {name}");
        let seq = self
            .intent(Action::MigrateToSpot, "spot_image", &reason)
            .await?;
        match self.p.create_image(&region, &original, &name).await {
            Ok(image) => {
                let detail = format!("imaging {original} as {image}");
                self.outcome(seq, Action::MigrateToSpot, "spot_image", Ok(&detail), None);
                self.m.image = Some(image);
                self.go(State::Imaging, detail).await
            }
            Err(e) => {
                self.outcome(seq, Action::MigrateToSpot, "spot_image", Err(&e), None);
                self.roll_back(format!("imaging {original} failed: {e}"))
                    .await
            }
        }
    }

    /// `imaging`: once the image is available, launches the first replacement on spot.
    async fn imaging(&mut self) -> Result<(), StoreError> {
        let image = self.m.image.clone().unwrap_or_default();
        let snapshots = match self.p.image(&self.m.region, &image).await {
            Ok(Some(found)) if found.state == ImageState::Available => found.snapshots,
            Ok(Some(found))
                if found.state == ImageState::Pending
                    && self.now() - self.m.state_since <= IMAGE_TIMEOUT =>
            {
                return self.wait(format!("image {image} is pending"));
            }
            Ok(Some(found)) if found.state == ImageState::Pending => {
                return self
                    .roll_back(format!("image {image} was not ready within 3 h"))
                    .await;
            }
            Ok(_) => {
                return self
                    .roll_back(format!("image {image} failed or is gone"))
                    .await;
            }
            Err(e) => return self.wait(format!("cannot read image {image}: {e}")),
        };
        // Marks the snapshots as ebb's, so that the IAM policy lets ebb delete them with the
        // image later (and nothing else). Repeating it is harmless.
        if !snapshots.is_empty() {
            let tags = BTreeMap::from([(IMAGE_OF_TAG.to_string(), self.m.original.clone())]);
            if let Some(e) = first_error(&self.p.tag(&self.m.region, &snapshots, &tags).await) {
                return self
                    .roll_back(format!("tagging the snapshots of {image} failed: {e}"))
                    .await;
            }
        }
        match self.spot_target().await {
            Ok(Some(target)) => {
                self.launch(Market::Spot, Some(target), Action::MigrateToSpot)
                    .await
            }
            Ok(None) => {
                self.roll_back(
                    "no acceptable spot offer any more (prices, savings or capacity changed)"
                        .into(),
                )
                .await
            }
            Err(e) => self.wait(format!("cannot read spot prices: {e}")),
        }
    }

    /// The cheapest acceptable spot offer now, away from recently reclaimed types and zones.
    async fn spot_target(&self) -> Result<Option<super::Target>, CloudError> {
        let Some(Json(spec)) = &self.m.launch_spec else {
            return Ok(None);
        };
        let types = match self.cx.rule {
            Some(rule) if !rule.instance_types.is_empty() => rule.instance_types.clone(),
            _ => vec![spec.instance_type.clone()],
        };
        let prices = self.p.prices(&self.m.region, &types, self.now()).await?;
        let on_demand = self.m.on_demand_price.or_else(|| {
            prices
                .iter()
                .find(|p| p.instance_type == spec.instance_type)
                .and_then(|p| p.on_demand)
        });
        let (Some(on_demand), Some(rule)) = (on_demand, self.cx.rule) else {
            return Ok(None);
        };
        let max_price = on_demand * (1.0 - rule.min_savings);
        let avoid = avoided(&self.m.interruptions.0, self.now());
        Ok(cheapest(
            &prices,
            &spec.subnets_by_zone,
            &avoid,
            &spec.zone,
            max_price,
        ))
    }

    /// Launches the next replacement (or finds it, when an earlier attempt launched it and
    /// died before recording it) and moves to `launching`.
    async fn launch(
        &mut self,
        market: Market,
        target: Option<super::Target>,
        action: Action,
    ) -> Result<(), StoreError> {
        let Some(Json(spec)) = self.m.launch_spec.clone() else {
            return self
                .fail("the launch settings of the original were never read".into())
                .await;
        };
        let region = self.m.region.clone();
        let n = self.m.launches + 1;
        // The original is in the value so that it is unique in the account, whatever database
        // the migration ids come from.
        let launch_id = format!("{}-{}-{n}", self.m.original, self.m.id);
        let (instance_type, subnet, zone, price) = match &target {
            Some(t) => (
                t.instance_type.clone(),
                t.subnet.clone(),
                t.zone.clone(),
                Some(t.price),
            ),
            None => (
                spec.instance_type.clone(),
                spec.subnet.clone(),
                spec.zone.clone(),
                self.m.on_demand_price,
            ),
        };
        let code = match action {
            Action::MigrateToSpot => "spot_launch",
            Action::RelaunchSpot => "spot_relaunch",
            _ => "spot_fallback",
        };
        let found = match self.p.find_tagged(&region, LAUNCH_TAG, &launch_id).await {
            Ok(found) => found,
            Err(e) => return self.wait(format!("cannot look for launch {launch_id}: {e}")),
        };
        let launched = match found {
            Some(s) => {
                self.event(
                    action,
                    code,
                    &format!(
                        "found {} from launch {launch_id} made before an interruption",
                        s.id
                    ),
                );
                Ok(s)
            }
            None => {
                let price_text = price.map_or(String::new(), |p| format!(" at ${p:.3}/h"));
                let reason = format!(
                    "launch {} {instance_type} in {zone} ({subnet}){price_text} from {}",
                    market.as_str(),
                    self.m.image.as_deref().unwrap_or("?")
                );
                let seq = self.intent(action, code, &reason).await?;
                let extra = BTreeMap::from([
                    (MIGRATION_TAG.to_string(), self.m.id.to_string()),
                    (LAUNCH_TAG.to_string(), launch_id.clone()),
                    (MIGRATED_FROM_TAG.to_string(), self.m.original.clone()),
                ]);
                let launch = Launch {
                    image: self.m.image.clone().unwrap_or_default(),
                    spec: without_ebb_state(spec.clone()),
                    instance_type: instance_type.clone(),
                    subnet: subnet.clone(),
                    market,
                    tags: extra,
                    client_token: format!("ebb-{launch_id}"),
                };
                let result = self.p.launch(&region, &launch).await;
                match &result {
                    Ok(s) => {
                        self.outcome(seq, action, code, Ok(&format!("launched {}", s.id)), None)
                    }
                    Err(e) => self.outcome(seq, action, code, Err(e), None),
                }
                result
            }
        };
        match launched {
            Ok(s) => {
                self.m.launches = n;
                self.m.current = Some(s.id.clone());
                self.m.market = market.as_str().to_string();
                self.m.instance_type = Some(instance_type.clone());
                self.m.zone = Some(zone.clone());
                self.m.subnet = Some(subnet);
                self.m.price = price;
                self.m.running_since = None;
                let detail = format!(
                    "launched {} as {} {instance_type} in {zone}",
                    s.id,
                    market.as_str()
                );
                self.go(State::Launching, detail).await
            }
            Err(e) => {
                self.launch_failed(format!("launch {launch_id} failed: {e}"))
                    .await
            }
        }
    }

    /// `launching` and `verifying`: the replacement must run, and still run a tick later.
    async fn launched(&mut self) -> Result<(), StoreError> {
        let current = self.m.current.clone().unwrap_or_default();
        let status = match self.status(&current).await {
            Ok(s) => s,
            Err(e) => return self.wait(format!("cannot read {current}: {e}")),
        };
        match (self.m.state(), status) {
            (State::Launching, Some(s)) if s.state == InstanceState::Running => {
                self.m.running_since = Some(self.now());
                let detail = format!("{current} is running");
                self.event(self.launch_action(), "spot_running", &detail);
                self.go(State::Verifying, detail).await
            }
            (State::Verifying, Some(s)) if s.state == InstanceState::Running => {
                let detail = format!(
                    "verified: {current} runs as {} {} in {}",
                    self.m.market,
                    self.m.instance_type.as_deref().unwrap_or("?"),
                    self.m.zone.as_deref().unwrap_or("?")
                );
                self.event(self.launch_action(), "spot_verified", &detail);
                self.go(State::Done, detail).await
            }
            (State::Launching, Some(s))
                if s.state == InstanceState::Pending
                    && self.now() - self.m.state_since <= LAUNCH_TIMEOUT =>
            {
                self.wait(format!("{current} is pending"))
            }
            // Reclaimed before the move was ever verified: it failed, undo it.
            (_, Some(s))
                if (s.reclaimed() || self.cx.warned) && self.first_verified().is_none() =>
            {
                self.roll_back(format!("{current} was reclaimed before it was verified"))
                    .await
            }
            (_, Some(s)) if s.reclaimed() || self.cx.warned => self.interrupted(s).await,
            (_, other) => {
                let what = other.map_or("gone".to_string(), |s| s.state.as_str().to_string());
                if let Some(id) = self.m.current.take() {
                    // A replacement stuck in pending is not left to run later unwatched.
                    let _ = self.p.terminate(&self.m.region, &[id]).await;
                }
                self.launch_failed(format!("{current} did not come up ({what})"))
                    .await
            }
        }
    }

    fn launch_action(&self) -> Action {
        match (self.m.market.as_str(), self.m.interruptions.0.is_empty()) {
            ("on-demand", _) => Action::FallbackOnDemand,
            (_, true) => Action::MigrateToSpot,
            (_, false) => Action::RelaunchSpot,
        }
    }

    /// A replacement could not be launched or did not come up. While the original exists, the
    /// migration rolls back to it; after that, a spot launch falls back to on-demand, and a
    /// failed on-demand launch needs people.
    async fn launch_failed(&mut self, why: String) -> Result<(), StoreError> {
        if self.m.holds_original() {
            return self.roll_back(why).await;
        }
        if self.m.market == Market::Spot.as_str() {
            self.m.market = Market::OnDemand.as_str().to_string();
            self.m.current = None;
            let detail = format!("{why}; falling back to on-demand at the next tick");
            self.event(Action::FallbackOnDemand, "spot_fallback", &detail);
            return self.go(State::Done, detail).await;
        }
        self.fail(format!(
            "{why}; the workload is not running: launch it from image {} by hand",
            self.m.image.as_deref().unwrap_or("?")
        ))
        .await
    }

    /// `done`: terminates the original once `keep_original_for` has passed, and watches the
    /// replacement for reclaims.
    async fn done(&mut self) -> Result<(), StoreError> {
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
                if self.m.market == Market::OnDemand.as_str() && !self.m.holds_original() {
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
    fn first_verified(&self) -> Option<DateTime<Utc>> {
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
                self.event(Action::MigrateToSpot, "spot_original_returned", &detail);
                self.m.original_returned_at = Some(self.now());
                return self.go(State::Done, detail).await;
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
            .intent(Action::MigrateToSpot, "spot_cleanup", &reason)
            .await?;
        let report = self
            .p
            .terminate(&self.m.region, std::slice::from_ref(&original))
            .await;
        match first_error(&report) {
            Some(e) => {
                self.outcome(seq, Action::MigrateToSpot, "spot_cleanup", Err(&e), None);
                self.go(State::Done, format!("terminating {original} failed: {e}"))
                    .await
            }
            None => {
                let detail = format!("terminated the original {original}");
                self.outcome(
                    seq,
                    Action::MigrateToSpot,
                    "spot_cleanup",
                    Ok(&detail),
                    request_id(&report),
                );
                self.m.original_terminated_at = Some(self.now());
                self.go(State::Done, detail).await
            }
        }
    }

    /// Spot capacity was reclaimed from `s`, or will be within two minutes (a warning): counts
    /// it and launches the next replacement. A warned instance is left to run out its two
    /// minutes, which its job may need to checkpoint; EC2 ends it.
    async fn interrupted(&mut self, s: InstanceStatus) -> Result<(), StoreError> {
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
            self.m.market = Market::OnDemand.as_str().to_string();
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
        self.event(Action::RelaunchSpot, "spot_interrupted", &detail);
        self.go(State::Done, detail).await?;
        self.relaunch().await
    }

    /// Launches a replacement for a reclaimed one: on spot, unless reclaims hit
    /// `max_interruptions` or no acceptable offer is left, then on-demand.
    async fn relaunch(&mut self) -> Result<(), StoreError> {
        if self.m.market == Market::Spot.as_str() {
            match self.spot_target().await {
                Ok(Some(target)) => {
                    return self
                        .launch(Market::Spot, Some(target), Action::RelaunchSpot)
                        .await
                }
                Ok(None) => self.m.market = Market::OnDemand.as_str().to_string(),
                Err(e) => return self.wait(format!("cannot read spot prices: {e}")),
            }
        }
        self.launch(Market::OnDemand, None, Action::FallbackOnDemand)
            .await
    }

    /// Undoes the migration: terminates the replacement, starts the original again, removes
    /// its `ebb:migrating` tag and the image.
    async fn roll_back(&mut self, why: String) -> Result<(), StoreError> {
        let original = self.m.original.clone();
        let region = self.m.region.clone();
        let reason = format!("roll back ({why}): start {original} again");
        let seq = self
            .intent(Action::MigrateToSpot, "spot_rollback", &reason)
            .await?;
        let mut errors: Vec<String> = Vec::new();
        if let Some(current) = self.m.current.take() {
            if let Some(e) = first_error(
                &self
                    .p
                    .terminate(&region, std::slice::from_ref(&current))
                    .await,
            ) {
                errors.push(format!("terminating {current}: {e}"));
                self.m.current = Some(current);
            }
        }
        if let Some(e) = first_error(&self.p.start(&region, std::slice::from_ref(&original)).await)
        {
            errors.push(format!("starting {original}: {e}"));
        }
        if let Some(e) = first_error(
            &self
                .p
                .untag(
                    &region,
                    std::slice::from_ref(&original),
                    &[MIGRATING_TAG.to_string()],
                )
                .await,
        ) {
            errors.push(format!("removing its {} tag: {e}", MIGRATING_TAG));
        }
        if let Some(image) = self.m.image.take() {
            if let Err(e) = self.p.delete_image(&region, &image).await {
                errors.push(format!("deleting image {image}: {e}"));
                self.m.image = Some(image);
            }
        }
        if errors.is_empty() {
            let detail = format!("rolled back: {original} started again ({why})");
            self.outcome(
                seq,
                Action::MigrateToSpot,
                "spot_rollback",
                Ok(&detail),
                None,
            );
            self.m.error = Some(why);
            return self.go(State::RolledBack, detail).await;
        }
        let error = CloudError {
            kind: crate::cloud::ErrorKind::Other,
            operation: "rollback",
            code: None,
            message: errors.join("; "),
            request_id: None,
        };
        self.outcome(
            seq,
            Action::MigrateToSpot,
            "spot_rollback",
            Err(&error),
            None,
        );
        self.fail(format!(
            "rolling back ({why}) failed: {}; finish it by hand",
            error.message
        ))
        .await
    }

    /// Ebb stops following the migration; the original loses its `ebb:migrating` tag if it
    /// is still there, so that the rules govern it again.
    async fn end(&mut self, why: String) -> Result<(), StoreError> {
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
        self.event(Action::MigrateToSpot, "spot_ended", &why);
        self.m.saved_before += current_savings(&self.m, self.now());
        self.m.running_since = None;
        self.m.ended_at = Some(self.now());
        self.go(State::Done, why).await
    }

    async fn delete_image(&mut self, image: String) -> Result<(), StoreError> {
        let reason =
            format!("delete image {image}: the workload runs on-demand and the original is gone");
        let seq = self
            .intent(Action::FallbackOnDemand, "spot_image_deleted", &reason)
            .await?;
        match self.p.delete_image(&self.m.region, &image).await {
            Ok(()) => {
                self.outcome(
                    seq,
                    Action::FallbackOnDemand,
                    "spot_image_deleted",
                    Ok(&format!("deleted image {image}")),
                    None,
                );
                self.m.image = None;
                self.go(State::Done, format!("deleted image {image}")).await
            }
            Err(e) => {
                self.outcome(
                    seq,
                    Action::FallbackOnDemand,
                    "spot_image_deleted",
                    Err(&e),
                    None,
                );
                self.go(State::Done, format!("deleting image {image} failed: {e}"))
                    .await
            }
        }
    }

    async fn fail(&mut self, why: String) -> Result<(), StoreError> {
        self.event(Action::MigrateToSpot, "spot_failed", &why);
        self.m.error = Some(why.clone());
        self.go(State::Failed, why).await
    }

    /// Nothing to do this tick.
    fn wait(&mut self, why: String) -> Result<(), StoreError> {
        tracing::debug!(migration = self.m.id, "waiting: {why}");
        Ok(())
    }
}

/// The original's settings for a replacement, without the tags that describe ebb's state of
/// the original.
fn without_ebb_state(mut spec: LaunchSpec) -> LaunchSpec {
    for key in [
        MIGRATING_TAG,
        STOP_AT_TAG,
        MIGRATION_TAG,
        LAUNCH_TAG,
        MIGRATED_FROM_TAG,
    ] {
        spec.tags.remove(key);
    }
    spec
}

fn first_error(report: &ActionReport) -> Option<CloudError> {
    report.failed.first().map(|f| f.error.clone())
}

fn request_id(report: &ActionReport) -> Option<String> {
    report.done.first().and_then(|d| d.request_id.clone())
}
