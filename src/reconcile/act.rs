//! Acting on decisions. What to act on this tick is chosen first (held back after recent
//! failures, capped); then dry runs are only audited, and real actions go intent (committed on
//! the leader's session) → cloud call → outcome → ebb's memory of what it did.

use super::{ActionOutcome, Reconciler, TickContext, TickReport};
use crate::cloud::{ActionReport, ErrorKind, Provider, StopKind};
use crate::engine::{self, Action, Code, Decision};
use crate::fleet::Instance;
use crate::names::{ACTOR, STOP_AT_TAG};
use crate::store::{ActionDone, FailureStreak, NewAuditEntry, Outcome, OverrideRecord, StoreError};
use chrono::{DateTime, Duration, SecondsFormat, Utc};
use std::collections::{BTreeMap, HashMap};
use tracing::Instrument as _;

mod fallback;

/// After a failed action, the same action on the same instance waits this long before it is
/// tried again, twice as long after each further failure in a row, up to [`RETRY_MAX`]: an
/// action that keeps failing (access denied, no capacity) is retried, but does not fill the
/// audit log and the cloud's rate limits at every tick.
const RETRY_FIRST: Duration = Duration::minutes(1);
/// The longest wait before a failed action is tried again.
const RETRY_MAX: Duration = Duration::hours(1);
/// A start EC2 refused for lack of capacity is tried again at every tick this many times in a
/// row: GPU capacity comes and goes within minutes, and people are waiting for the box.
const CAPACITY_EVERY_TICK: u32 = 10;
/// After that, it is tried again this often, still well short of [`RETRY_MAX`].
const CAPACITY_RETRY: Duration = Duration::minutes(5);

impl TickContext<'_> {
    /// The audit row of `d` with `outcome`, at the tick's time and policy version.
    fn entry(&self, d: &Decision, outcome: Outcome, dry_run: bool) -> NewAuditEntry {
        NewAuditEntry {
            at: self.now,
            actor: ACTOR.to_string(),
            instance: Some(d.instance.clone()),
            region: Some(d.region.clone()),
            action: d.action.as_str().to_string(),
            outcome,
            policy: d.policy.clone(),
            policy_version: Some(self.version.to_string()),
            code: Some(d.code.as_str().to_string()),
            reason: d.reason.clone(),
            dry_run,
            request_id: None,
            error: None,
            intent_seq: None,
        }
    }

    /// Reports `d` as skipped right before its call, with why: nothing was called, and no
    /// intent was written for it.
    fn not_done(&mut self, d: &Decision, why: String) {
        let done = ActionOutcome {
            decision: d.clone(),
            outcome: Outcome::Skipped,
            detail: format!("not done: {why}"),
        };
        done.log(self.now, false);
        self.report.actions.push(done);
    }
}

impl<P: Provider> Reconciler<P> {
    /// Carries out the decisions that change something, dry runs apart from real actions;
    /// reports them in `report`.
    pub(super) async fn act(
        &self,
        decisions: Vec<Decision>,
        tick: &mut TickContext<'_>,
    ) -> Result<(), StoreError> {
        let to_act = self.this_tick(decisions, tick.now, tick.report).await?;
        let (dry, real): (Vec<Decision>, Vec<Decision>) =
            to_act.into_iter().partition(|d| self.is_dry_run(d));
        if !dry.is_empty() {
            self.audit_dry_runs(dry, tick).await?;
        }
        if !real.is_empty() {
            self.act_for_real(real, tick).await?;
        }
        Ok(())
    }

    /// Whether `d` is only audited: its policy or the whole reconciler runs dry.
    fn is_dry_run(&self, d: &Decision) -> bool {
        d.dry_run || self.options.dry_run
    }

    /// The decisions acted on this tick, in order: those that change something, less those held
    /// back after recent failures, starts first (people are waiting for them), then notices,
    /// then stops, by instance id within each, up to the cap.
    async fn this_tick(
        &self,
        decisions: Vec<Decision>,
        now: DateTime<Utc>,
        report: &mut TickReport,
    ) -> Result<Vec<Decision>, StoreError> {
        let mut to_act: Vec<Decision> = decisions
            .into_iter()
            .filter(|d| match CloudCall::of(d.action) {
                Some(_) => true,
                // Real moves go through the spot migrations; dry runs are audited here.
                None => d.action == Action::MigrateToSpot && self.is_dry_run(d),
            })
            .collect();
        let real: Vec<String> = to_act
            .iter()
            .filter(|d| !self.is_dry_run(d))
            .map(|d| d.instance.clone())
            .collect();
        if !real.is_empty() {
            let streaks = self.store.failure_streaks(&real).await?;
            let before = to_act.len();
            to_act.retain(|d| match streaks.get(&d.instance) {
                Some(s) if s.action == d.action.as_str() && !self.is_dry_run(d) => {
                    now >= s.last_at + wait_after(s)
                }
                _ => true,
            });
            report.held_back = before - to_act.len();
        }
        to_act.sort_by_key(|d| (order(d.action), d.instance.clone()));
        let deferred = self
            .options
            .max_actions
            .map_or(0, |cap| to_act.len().saturating_sub(cap));
        to_act.truncate(to_act.len() - deferred);
        report.deferred = deferred;
        if deferred > 0 {
            tracing::warn!(
                deferred,
                "more actions than EBB_MAX_ACTIONS_PER_TICK allows; the rest wait"
            );
        }
        Ok(self.within_pace(to_act, report))
    }

    /// `to_act` less the real actions the provider's token buckets cannot serve within the
    /// tick's wait (by API and region, in order): the backlog, decided afresh at the next
    /// tick. A tick that waited longer would run into its deadline with intents written for
    /// calls it never makes.
    fn within_pace(&self, to_act: Vec<Decision>, report: &mut TickReport) -> Vec<Decision> {
        let Some(pacing) = &self.options.pacing else {
            return to_act;
        };
        let mut room: HashMap<(&'static str, String), usize> = HashMap::new();
        let mut kept = Vec::with_capacity(to_act.len());
        for d in to_act {
            let call = CloudCall::of(d.action).filter(|_| !self.is_dry_run(&d));
            let Some(api) = call.map(CloudCall::api) else {
                kept.push(d);
                continue;
            };
            let left = room.entry((api, d.region.clone())).or_insert_with(|| {
                pacing
                    .pacer
                    .servable(&d.region, api, pacing.within, pacing.batch)
            });
            if *left == 0 {
                report.backlog += 1;
                continue;
            }
            *left -= 1;
            kept.push(d);
        }
        if report.backlog > 0 {
            tracing::warn!(
                backlog = report.backlog,
                "more actions than EC2's rate limits serve within the tick; the rest wait for the next"
            );
        }
        kept
    }

    /// Dry runs: the intent and a `skipped` outcome, so the log shows what would have been
    /// done; once, not at every tick while the same decision holds.
    async fn audit_dry_runs(
        &self,
        dry: Vec<Decision>,
        tick: &mut TickContext<'_>,
    ) -> Result<(), StoreError> {
        let ids: Vec<String> = dry.iter().map(|d| d.instance.clone()).collect();
        let noted = self.store.last_dry_runs(&ids).await?;
        let (repeated, new): (Vec<Decision>, Vec<Decision>) = dry.into_iter().partition(|d| {
            noted.get(&d.instance).is_some_and(|(action, code)| {
                action == d.action.as_str() && code.as_deref() == Some(d.code.as_str())
            })
        });
        let intents: Vec<NewAuditEntry> = new
            .iter()
            .map(|d| tick.entry(d, Outcome::Intent, true))
            .collect();
        self.store
            .append_dry_runs(&intents, "dry run, nothing done")
            .await?;
        let new = new.into_iter().map(|decision| ActionOutcome {
            detail: format!("{}; dry run, nothing done", decision.reason),
            decision,
            outcome: Outcome::Skipped,
        });
        let repeated = repeated.into_iter().map(|decision| ActionOutcome {
            detail: format!(
                "{}; dry run, nothing done (already in the audit log)",
                decision.reason
            ),
            decision,
            outcome: Outcome::Skipped,
        });
        for done in new.chain(repeated) {
            done.log(tick.now, self.options.dry_run);
            tick.report.actions.push(done);
        }
        Ok(())
    }

    /// Real actions, one cloud call per group, each fenced: its intents committed on the
    /// leader's session right before the call, then its outcomes.
    async fn act_for_real(
        &self,
        real: Vec<Decision>,
        tick: &mut TickContext<'_>,
    ) -> Result<(), StoreError> {
        for (call, group) in groups(&real) {
            let span = tracing::info_span!(
                "action",
                action = group[0].action.as_str(),
                region = group[0].region.as_str(),
                instances = group.len(),
            );
            self.act_on_group(call, group, tick)
                .instrument(span)
                .await?;
        }
        Ok(())
    }

    /// One cloud `call` for `group` (one action in one region): the instances it would stop
    /// read again, then its intents, less the instances a tag or an override made since the
    /// decision protects; then the call; then its outcomes with what ebb remembers of it, and
    /// its notices.
    async fn act_on_group(
        &self,
        call: CloudCall,
        group: Vec<&Decision>,
        tick: &mut TickContext<'_>,
    ) -> Result<(), StoreError> {
        let group = self.still_unprotected(call, group, tick).await;
        if group.is_empty() {
            return Ok(());
        }
        let intents = group
            .iter()
            .map(|d| tick.entry(d, Outcome::Intent, false))
            .collect();
        let fenced = tick.leader.fence(intents, tick.now).await?;
        let protected_by: HashMap<&str, &OverrideRecord> = fenced
            .protected
            .iter()
            .filter_map(|(e, by)| Some((e.instance.as_deref()?, by)))
            .collect();
        let (group, protected): (Vec<&Decision>, Vec<&Decision>) = group
            .into_iter()
            .partition(|d| !protected_by.contains_key(d.instance.as_str()));
        for d in protected {
            let by = protected_by[d.instance.as_str()];
            let detail = format!(
                "since the decision, an override by {} until {} protects it: {}",
                by.created_by,
                by.until.to_rfc3339_opts(SecondsFormat::Secs, true),
                by.reason
            );
            tick.not_done(d, detail);
        }
        if group.is_empty() {
            return Ok(());
        }
        let seq_of: HashMap<&str, i64> = fenced
            .written
            .iter()
            .filter_map(|i| Some((i.entry.instance.as_deref()?, i.seq)))
            .collect();
        let cloud = self.call(call, &group, tick.now).await;
        let outcomes = outcome_entries(&group, &cloud, |d, outcome| NewAuditEntry {
            intent_seq: seq_of.get(d.instance.as_str()).copied(),
            ..tick.entry(d, outcome, false)
        });
        self.record(&group, outcomes, tick).await?;
        if call == CloudCall::Start {
            self.fall_back(&group, &cloud, tick).await?;
        }
        Ok(())
    }

    /// The decisions of `group` whose instances may still be acted on by `call`. For a stop
    /// (or its notice), the instances are read again from the cloud first, and those whose tags
    /// now forbid it (`ebb:keep-until`, `ebb:skip`), or that are no longer listed, are left
    /// out; a read that fails leaves the whole group out, since unknown means no stop.
    async fn still_unprotected<'d>(
        &self,
        call: CloudCall,
        group: Vec<&'d Decision>,
        tick: &mut TickContext<'_>,
    ) -> Vec<&'d Decision> {
        if !call.stops() {
            return group;
        }
        let region = group[0].region.as_str();
        let ids: Vec<String> = group.iter().map(|d| d.instance.clone()).collect();
        let fresh = match self.provider.reread(region, &ids).await {
            Ok(fresh) => fresh,
            Err(err) => {
                for d in group {
                    let detail = format!(
                        "could not read it again right before the call ({err}); unknown means no stop"
                    );
                    tick.not_done(d, detail);
                }
                return Vec::new();
            }
        };
        let fresh: HashMap<&str, &Instance> = fresh.iter().map(|i| (i.id.as_str(), i)).collect();
        let mut still = Vec::with_capacity(group.len());
        for d in group {
            match fresh.get(d.instance.as_str()) {
                None => tick.not_done(
                    d,
                    "no longer listed right before the call (gone, or no longer managed)".into(),
                ),
                Some(i) => match engine::tags_forbid_stop(i, tick.now) {
                    Some(why) => tick.not_done(d, format!("since the listing, {why}")),
                    None => still.push(d),
                },
            }
        }
        still
    }

    /// Makes `call` for `group`: one action in one region.
    async fn call(&self, call: CloudCall, group: &[&Decision], now: DateTime<Utc>) -> ActionReport {
        let region = group[0].region.as_str();
        let ids: Vec<String> = group.iter().map(|d| d.instance.clone()).collect();
        match call {
            CloudCall::Start => self.provider.start(region, &ids).await,
            CloudCall::Stop(kind) => self.provider.stop(region, &ids, kind).await,
            CloudCall::Notice => {
                let at = group[0]
                    .stop_at
                    .unwrap_or(now)
                    .to_rfc3339_opts(SecondsFormat::Secs, true);
                let tags = BTreeMap::from([(STOP_AT_TAG.to_string(), at)]);
                self.provider.tag(region, &ids, &tags).await
            }
            CloudCall::Withdraw => {
                self.provider
                    .untag(region, &ids, &[STOP_AT_TAG.to_string()])
                    .await
            }
        }
    }

    /// Writes the outcomes of `group`'s call with what ebb remembers of it (one transaction),
    /// then posts its notices and reports it.
    async fn record(
        &self,
        group: &[&Decision],
        outcomes: Vec<NewAuditEntry>,
        tick: &mut TickContext<'_>,
    ) -> Result<(), StoreError> {
        let now = tick.now;
        let done: Vec<ActionDone> = group
            .iter()
            .zip(&outcomes)
            .filter(|(_, o)| o.outcome == Outcome::Succeeded)
            .map(|(d, _)| ActionDone {
                instance: d.instance.clone(),
                action: d.action,
                at: now,
            })
            .collect();
        self.store.append_outcomes(&outcomes, &done).await?;
        for (d, o) in group.iter().zip(&outcomes) {
            if let (Outcome::Succeeded, Action::Notify, Some(webhook)) =
                (o.outcome, d.action, &self.options.webhook)
            {
                webhook.send(notice(d));
            }
            if d.action == Action::Start {
                self.tell_of_capacity(d, o);
            }
            let done = ActionOutcome {
                decision: (*d).clone(),
                outcome: o.outcome,
                detail: o.error.clone().unwrap_or_else(|| o.reason.clone()),
            };
            done.log(now, false);
            tick.report.actions.push(done);
        }
        Ok(())
    }
}

impl<P: Provider> Reconciler<P> {
    /// Posts to the webhook, once until the instance starts, that a start of `d` was refused for
    /// lack of capacity (`outcome`): people are waiting for the box, and it may stay stopped
    /// for a while.
    fn tell_of_capacity(&self, d: &Decision, outcome: &NewAuditEntry) {
        let mut told = self.capacity_told.lock().unwrap_or_else(|e| e.into_inner());
        let refused = outcome.outcome == Outcome::Failed
            && outcome.code.as_deref() == Some(Code::InsufficientCapacity.as_str());
        if !refused {
            if outcome.outcome == Outcome::Succeeded {
                told.remove(&d.instance);
            }
            return;
        }
        let Some(webhook) = &self.options.webhook else {
            return;
        };
        if told.insert(d.instance.clone()) {
            webhook.send(format!(
                "ebb could not start {} ({}), policy {}: EC2 has no capacity for it now. ebb tries again at every tick ({CAPACITY_EVERY_TICK} times, then every {} minutes), and the policy's start.fallback_types if it lists any; no further notice until it starts.",
                d.instance,
                d.region,
                d.policy.as_deref().unwrap_or("-"),
                CAPACITY_RETRY.num_minutes()
            ));
        }
    }
}

/// How long after the failures of `streak` its action waits before it is tried again: not at
/// all for a start refused for lack of capacity, for its first [`CAPACITY_EVERY_TICK`] attempts,
/// then [`CAPACITY_RETRY`]; after any other failure, [`retry_after`].
fn wait_after(streak: &FailureStreak) -> Duration {
    if streak.code.as_deref() != Some(Code::InsufficientCapacity.as_str()) {
        return retry_after(streak.failures);
    }
    if streak.failures < CAPACITY_EVERY_TICK {
        Duration::zero()
    } else {
        CAPACITY_RETRY
    }
}

/// How long after `failures` failures in a row an action waits before it is tried again.
fn retry_after(failures: u32) -> Duration {
    let doublings = failures.saturating_sub(1).min(16);
    (RETRY_FIRST * 2i32.pow(doublings)).min(RETRY_MAX)
}

/// A notice for people: which instance stops when, and why.
fn notice(d: &Decision) -> String {
    let when = d.stop_at.map_or_else(
        || "soon".to_string(),
        |t| format!("at {}", t.to_rfc3339_opts(SecondsFormat::Secs, true)),
    );
    format!(
        "ebb will stop {} ({}) {when}, policy {}: {}. To keep it running: ebb override {} --until 4h --reason '...', or tag it ebb:keep-until.",
        d.instance,
        d.region,
        d.policy.as_deref().unwrap_or("-"),
        d.reason,
        d.instance
    )
}

/// The cloud call that carries out an action of this phase. [`CloudCall::of`] maps every
/// action the engine decides to one call or to none, without a catch-all: a new action does
/// not compile until it says what it calls.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum CloudCall {
    /// StartInstances.
    Start,
    /// StopInstances, plain or hibernating.
    Stop(StopKind),
    /// CreateTags of `ebb:stop-at`: the notice of a coming stop.
    Notice,
    /// DeleteTags of `ebb:stop-at`: a notice taken back.
    Withdraw,
}

impl CloudCall {
    /// The call `action` makes in this phase; `None` for the actions carried out elsewhere or
    /// not at all.
    fn of(action: Action) -> Option<CloudCall> {
        match action {
            Action::Start => Some(CloudCall::Start),
            Action::Stop => Some(CloudCall::Stop(StopKind::Stop)),
            Action::Hibernate => Some(CloudCall::Stop(StopKind::Hibernate)),
            Action::Notify => Some(CloudCall::Notice),
            Action::WithdrawNotice => Some(CloudCall::Withdraw),
            // Spot moves and relaunches are the migrations' (a dry run of a move is audited
            // here), a resize is a refused start's fallback's, and nothing calls nothing.
            Action::MigrateToSpot
            | Action::RelaunchSpot
            | Action::FallbackOnDemand
            | Action::Resize
            | Action::None => None,
        }
    }

    /// The EC2 API whose token buckets it waits for.
    fn api(self) -> &'static str {
        match self {
            CloudCall::Start => "StartInstances",
            CloudCall::Stop(_) => "StopInstances",
            CloudCall::Notice => "CreateTags",
            CloudCall::Withdraw => "DeleteTags",
        }
    }

    /// Whether it stops the instances or announces that it will: they are read again right
    /// before it.
    fn stops(self) -> bool {
        match self {
            CloudCall::Stop(_) | CloudCall::Notice => true,
            CloudCall::Start | CloudCall::Withdraw => false,
        }
    }

    /// Its rank in the order calls are made: starts first (people are waiting for them), then
    /// notices, then stops.
    fn rank(self) -> u8 {
        match self {
            CloudCall::Start => 0,
            CloudCall::Notice | CloudCall::Withdraw => 1,
            CloudCall::Stop(_) => 2,
        }
    }
}

/// The order `action` is carried out in: its call's rank.
fn order(action: Action) -> u8 {
    match CloudCall::of(action) {
        Some(call) => call.rank(),
        // A dry run of a spot move, only audited, goes with the stops.
        None => CloudCall::Stop(StopKind::Stop).rank(),
    }
}

/// Decisions grouped into cloud calls: by action, region and (for notices) the announced
/// time, in the order [`order`] gives. A decision without a call is left out: only dry runs
/// have none, and they are audited apart.
fn groups(decisions: &[Decision]) -> Vec<(CloudCall, Vec<&Decision>)> {
    let mut groups: BTreeMap<_, (CloudCall, Vec<&Decision>)> = BTreeMap::new();
    for d in decisions {
        let Some(call) = CloudCall::of(d.action) else {
            continue;
        };
        let key = (call.rank(), d.action.as_str(), d.stop_at, d.region.as_str());
        groups.entry(key).or_insert((call, Vec::new())).1.push(d);
    }
    groups.into_values().collect()
}

/// One outcome row per decision of `group`, in order, from what the cloud reported.
fn outcome_entries(
    group: &[&Decision],
    cloud: &ActionReport,
    entry: impl Fn(&Decision, Outcome) -> NewAuditEntry,
) -> Vec<NewAuditEntry> {
    let done: HashMap<&str, _> = cloud
        .done
        .iter()
        .map(|d| (d.instance.as_str(), d))
        .collect();
    let failed: HashMap<&str, _> = cloud
        .failed
        .iter()
        .map(|f| (f.instance.as_str(), f))
        .collect();
    group
        .iter()
        .map(|d| {
            match (
                done.get(d.instance.as_str()),
                failed.get(d.instance.as_str()),
            ) {
                // A person's stop landed between the decision and ebb's call: crediting it to
                // ebb would have `start_at_open: stopped-by-ebb` start what a person stopped.
                (Some(done), _) if done.already => NewAuditEntry {
                    request_id: done.request_id.clone(),
                    reason: format!(
                        "{}; already stopped when ebb's call arrived: not ebb's stop",
                        d.reason
                    ),
                    ..entry(d, Outcome::Skipped)
                },
                (Some(done), _) => NewAuditEntry {
                    request_id: done.request_id.clone(),
                    reason: match &done.fallback {
                        Some(fallback) => format!("{}; {fallback}", d.reason),
                        None => d.reason.clone(),
                    },
                    ..entry(d, Outcome::Succeeded)
                },
                (None, Some(failed)) if failed.error.kind == ErrorKind::InsufficientCapacity => {
                    NewAuditEntry {
                        request_id: failed.error.request_id.clone(),
                        error: Some(failed.error.to_string()),
                        code: Some(Code::InsufficientCapacity.as_str().to_string()),
                        reason: format!(
                            "{}; EC2 has no capacity for it now: tried again at every tick, {CAPACITY_EVERY_TICK} times, then every {} minutes",
                            d.reason,
                            CAPACITY_RETRY.num_minutes()
                        ),
                        ..entry(d, Outcome::Failed)
                    }
                }
                (None, Some(failed)) => NewAuditEntry {
                    request_id: failed.error.request_id.clone(),
                    error: Some(failed.error.to_string()),
                    ..entry(d, Outcome::Failed)
                },
                (None, None) => NewAuditEntry {
                    error: Some("the cloud did not report on this instance".to_string()),
                    ..entry(d, Outcome::Failed)
                },
            }
        })
        .collect()
}
