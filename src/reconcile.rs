//! One reconcile tick: policies → inventory → store → decide → act → record.
//!
//! Every action is written to the audit log as an intent, committed, before the cloud call, and
//! its outcome after. An intent left without an outcome (the process died between the two) is
//! resolved at the next tick by reading the instance's real state, never by acting again.

use crate::clock::Clock;
use crate::cloud::{ActionReport, Inventory, Provider};
use crate::engine::{self, Action, Decision};
use crate::fleet::{Fleet, InstanceState, Lifecycle, Price};
use crate::metrics::Metrics;
use crate::names::{ACTOR, INTERRUPTIBLE_TAG, STOP_AT_TAG};
use crate::policy::{self, LoadError, PolicySet};
use crate::spot::{self, drive};
use crate::store::{
    AuditEntry, Leadership, NewAuditEntry, Outcome, Store, StoreError, INTERRUPTED,
};
use chrono::{DateTime, Duration, SecondsFormat, Utc};
use sha2::{Digest, Sha256};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use tokio::sync::Notify;

/// After a failed action, the same action on the same instance waits this long before it is
/// tried again, twice as long after each further failure in a row, up to [`RETRY_MAX`]: an
/// action that keeps failing (access denied, no capacity) is retried, but does not fill the
/// audit log and the cloud's rate limits at every tick.
const RETRY_FIRST: Duration = Duration::minutes(1);
/// The longest wait before a failed action is tried again.
const RETRY_MAX: Duration = Duration::hours(1);

/// GPU readings are read this much further back than the longest idle window, so that the
/// window's start is covered.
const READING_MARGIN: Duration = Duration::minutes(10);

/// How a reconciler acts.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// Decide and audit, never act.
    pub dry_run: bool,
    /// At most this many actions a tick; the rest wait for the next tick, decided afresh.
    pub max_actions: Option<usize>,
    /// Where notices are posted, beside the `ebb:stop-at` tag.
    pub webhook: Option<crate::webhook::Webhook>,
}

/// Why a tick could not run.
#[derive(Debug, thiserror::Error)]
pub enum TickError {
    /// The store failed; nothing after the failure was done.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The policies are invalid and no earlier valid set is known.
    #[error("policies are not valid (run ebb validate): {0}")]
    Policies(LoadError),
}

/// What one action came to.
#[derive(Debug, Clone)]
pub struct ActionOutcome {
    /// The decision acted on.
    pub decision: Decision,
    /// Succeeded, failed, or skipped (dry run).
    pub outcome: Outcome,
    /// What the outcome row says: the reason, and what was done instead or the error.
    pub detail: String,
}

/// What a tick did.
#[derive(Debug, Default)]
pub struct TickReport {
    /// The decision time.
    pub at: DateTime<Utc>,
    /// The policies failed to load and the last good set was used: why.
    pub policy_error: Option<String>,
    /// Instances listed.
    pub instances: usize,
    /// Regions or accounts that could not be listed, with why.
    pub inventory_failures: Vec<String>,
    /// Interrupted intents resolved from the instances' real state.
    pub resolved: Vec<AuditEntry>,
    /// The actions, each with its outcome.
    pub actions: Vec<ActionOutcome>,
    /// Actions left for the next tick by the cap.
    pub deferred: usize,
    /// Actions held back because they failed lately (see [`RETRY_FIRST`]).
    pub held_back: usize,
    /// How many instances got each decision, by action and code.
    pub decided: BTreeMap<(&'static str, &'static str), usize>,
    /// How many instances are in each state, by state and governing policy (`""` for none).
    pub instances_by_state: BTreeMap<(&'static str, String), usize>,
    /// Spot migrations planned or advanced, each with what happened.
    pub migrations: Vec<MigrationStep>,
}

/// What one spot migration did in a tick.
#[derive(Debug, Clone)]
pub struct MigrationStep {
    /// The migration's id.
    pub id: i64,
    /// The instance it moves.
    pub instance: String,
    /// Its state after the tick.
    pub state: spot::State,
    /// What happened.
    pub detail: String,
}

/// The policy files, and the last set of them that was valid.
#[derive(Debug)]
pub struct PolicySource {
    paths: Vec<PathBuf>,
    last_good: Mutex<Option<Arc<PolicySet>>>,
}

/// The policies a tick acts on.
#[derive(Debug, Clone)]
pub struct LoadedPolicies {
    /// The set: the files as they are, or the last valid set when they are invalid.
    pub set: Arc<PolicySet>,
    /// Why the files as they are could not be used, when the last valid set stands in.
    pub error: Option<String>,
}

impl PolicySource {
    /// The policies in `paths` (directories or files).
    pub fn new(paths: Vec<PathBuf>) -> Self {
        PolicySource {
            paths,
            last_good: Mutex::new(None),
        }
    }

    /// Loads the files. When they are invalid, the last valid set stands in, with the error;
    /// when none was ever valid, the error.
    pub fn load(&self) -> Result<LoadedPolicies, LoadError> {
        let loaded = policy::load(&self.paths);
        let mut last_good = self.last_good.lock().unwrap_or_else(|e| e.into_inner());
        match loaded {
            Ok(set) => Ok(LoadedPolicies {
                set: last_good.insert(Arc::new(set)).clone(),
                error: None,
            }),
            Err(err) => match &*last_good {
                Some(set) => Ok(LoadedPolicies {
                    set: set.clone(),
                    error: Some(err.to_string()),
                }),
                None => Err(err),
            },
        }
    }

    /// A hash of the policy files' names and contents, which changes when any of them does.
    pub fn fingerprint(&self) -> [u8; 32] {
        let mut h = Sha256::new();
        match policy::policy_files(&self.paths) {
            Ok(files) => {
                for file in files {
                    h.update(file.as_os_str().as_encoded_bytes());
                    match std::fs::read(&file) {
                        Ok(bytes) => h.update(bytes),
                        Err(err) => h.update(err.to_string()),
                    }
                }
            }
            Err(err) => h.update(err.to_string()),
        }
        h.finalize().into()
    }
}

/// What the control loop shares with the HTTP API: its metrics, its role, and a way to ask for
/// a tick now.
#[derive(Debug, Default)]
pub struct Control {
    /// Prometheus metrics.
    pub metrics: Metrics,
    /// Notified to tick now (SIGHUP, a policy change, an API call, a request from a replica).
    pub wake: Notify,
    leader: AtomicBool,
    last_tick: tokio::sync::watch::Sender<Option<DateTime<Utc>>>,
}

impl Control {
    /// Whether this replica is the leader.
    pub fn is_leader(&self) -> bool {
        self.leader.load(Ordering::Relaxed)
    }

    /// The decision time of this replica's last tick.
    pub fn last_tick(&self) -> Option<DateTime<Utc>> {
        *self.last_tick.borrow()
    }

    /// The decision time of this replica's last tick, updated as each tick finishes: a test
    /// on paused time waits on it for a tick to be done before it moves the clock on.
    pub fn ticks(&self) -> tokio::sync::watch::Receiver<Option<DateTime<Utc>>> {
        self.last_tick.subscribe()
    }

    fn set_leader(&self, leader: bool) {
        self.leader.store(leader, Ordering::Relaxed);
        self.metrics.leader(leader);
    }
}

/// Runs ticks against one provider, one store and one source of policies.
pub struct Reconciler<P> {
    provider: P,
    store: Store,
    policies: Arc<PolicySource>,
    options: Options,
}

impl<P: Provider> Reconciler<P> {
    /// A reconciler for the policies of `policies`.
    pub fn new(provider: P, store: Store, policies: Arc<PolicySource>, options: Options) -> Self {
        Reconciler {
            provider,
            store,
            policies,
            options,
        }
    }

    /// The cloud it acts on.
    pub fn provider(&self) -> &P {
        &self.provider
    }

    /// The store it records to.
    pub fn store(&self) -> &Store {
        &self.store
    }

    /// The policies it acts on.
    pub fn policies(&self) -> &Arc<PolicySource> {
        &self.policies
    }

    /// One pass at `now`, as the leader.
    pub async fn tick(
        &self,
        now: DateTime<Utc>,
        leader: &mut Leadership,
    ) -> Result<TickReport, TickError> {
        let mut report = TickReport {
            at: now,
            ..TickReport::default()
        };
        let loaded = self.policies.load().map_err(TickError::Policies)?;
        if let Some(err) = &loaded.error {
            tracing::error!("policies are not valid, acting on the last valid set: {err}");
        }
        report.policy_error = loaded.error;
        let set: &PolicySet = &loaded.set;

        let inventory = self.provider.instances().await;
        report.instances = inventory.instances.len();
        report.inventory_failures = inventory
            .failures
            .iter()
            .map(|f| match &f.account {
                Some(role) => format!("{} as {role}: {}", f.region, f.error),
                None => format!("{}: {}", f.region, f.error),
            })
            .collect();
        self.store
            .sync_inventory(&inventory.complete_regions, &inventory.instances, now)
            .await?;
        report.resolved = self.resolve_interrupted(&inventory, now).await?;
        let version = set.version.to_string();
        self.store
            .record_policy_version(&version, ACTOR, now)
            .await?;

        let mut fleet = Fleet {
            instances: inventory.instances,
            prices: Default::default(),
        };
        let prior = self.store.prior(now).await?;
        // Deciding once without readings and prices tells which are worth reading.
        let first = engine::decide(now, set, &fleet, &prior);
        let readings = readings_wanted(set, &fleet, &first);
        let prices = prices_wanted(set, &fleet, &first);
        let decisions = if readings.is_empty() && prices.is_empty() {
            first
        } else {
            // Freed before reading: a large fleet's decisions take tens of megabytes.
            drop(first);
            self.read_gpu_utilisation(readings, &mut fleet, now).await;
            self.read_prices(prices, &mut fleet, now).await;
            engine::decide(now, set, &fleet, &prior)
        };
        self.store.record_decisions(&decisions, now).await?;
        report.instances_by_state = instances_by_state(&fleet, &decisions);
        for d in &decisions {
            *report
                .decided
                .entry((d.action.as_str(), d.code.as_str()))
                .or_default() += 1;
        }

        let migrating: Vec<Decision> = decisions
            .iter()
            .filter(|d| d.action == Action::MigrateToSpot && !d.dry_run)
            .cloned()
            .collect();
        if !self.options.dry_run {
            self.advance_migrations(set, &decisions, &version, now, leader, &mut report)
                .await?;
            self.plan_migrations(&migrating, &fleet, now, &mut report)
                .await?;
        }
        // Acting needs only the decisions. The listing and its readings are the largest data of
        // a tick, and the first tick of a large fleet acts on tens of thousands of instances.
        drop(fleet);
        self.act(decisions, &version, now, leader, &mut report)
            .await?;
        Ok(report)
    }

    /// Reads the `wanted` prices (see [`prices_wanted`]) into `fleet`.
    async fn read_prices(
        &self,
        wanted: BTreeMap<String, BTreeSet<String>>,
        fleet: &mut Fleet,
        now: DateTime<Utc>,
    ) {
        for (region, types) in wanted {
            let types: Vec<String> = types.into_iter().collect();
            match self.provider.prices(&region, &types, now).await {
                Ok(found) => {
                    let table = fleet.prices.entry(region).or_default();
                    for p in found {
                        table.insert(
                            p.instance_type.clone(),
                            Price {
                                on_demand: p.on_demand,
                                spot: p.cheapest_spot(),
                            },
                        );
                    }
                }
                // Without prices no spot rule moves anything.
                Err(err) => tracing::warn!(region, "cannot read prices: {err}"),
            }
        }
    }

    /// Plans a spot migration for each instance decided `migrate_to_spot`; the next tick
    /// checks again and starts it.
    async fn plan_migrations(
        &self,
        decisions: &[Decision],
        fleet: &Fleet,
        now: DateTime<Utc>,
        report: &mut TickReport,
    ) -> Result<(), StoreError> {
        for d in decisions {
            let Some(policy) = &d.policy else { continue };
            let on_demand = fleet
                .instances
                .iter()
                .find(|i| i.id == d.instance)
                .and_then(|i| {
                    fleet
                        .prices
                        .get(&i.region)?
                        .get(&i.instance_type)?
                        .on_demand
                });
            let audit = NewAuditEntry {
                instance: Some(d.instance.clone()),
                region: Some(d.region.clone()),
                policy: Some(policy.clone()),
                code: Some(d.code.as_str().to_string()),
                ..NewAuditEntry::event(
                    now,
                    ACTOR,
                    Action::MigrateToSpot.as_str(),
                    format!("planned: {}", d.reason),
                )
            };
            if let Some(m) = self
                .store
                .plan_migration(
                    &d.instance,
                    &d.region,
                    policy,
                    on_demand,
                    now - spot::RETRY_AFTER,
                    audit,
                )
                .await?
            {
                report.migrations.push(MigrationStep {
                    id: m.id,
                    instance: m.original,
                    state: spot::State::Planned,
                    detail: format!("planned: {}", d.reason),
                });
            }
        }
        Ok(())
    }

    /// Advances every live spot migration by one step.
    async fn advance_migrations(
        &self,
        set: &PolicySet,
        decisions: &[Decision],
        version: &str,
        now: DateTime<Utc>,
        leader: &mut Leadership,
        report: &mut TickReport,
    ) -> Result<(), StoreError> {
        let live = self.store.live_migrations().await?;
        if live.is_empty() {
            return Ok(());
        }
        let by_instance: HashMap<&str, &Decision> =
            decisions.iter().map(|d| (d.instance.as_str(), d)).collect();
        let current: Vec<String> = live.iter().filter_map(|m| m.current.clone()).collect();
        let warned = self.store.spot_warnings(&current).await?;
        for m in live {
            let rule = set
                .policies
                .iter()
                .find(|p| p.name == m.policy)
                .and_then(|p| p.spot.as_ref());
            let cx = drive::Context {
                rule,
                decision: by_instance.get(m.original.as_str()).copied(),
                warned: m.current.as_ref().is_some_and(|c| warned.contains(c)),
                version,
                now,
            };
            let (id, instance) = (m.id, m.original.clone());
            let (state, detail) =
                drive::advance(&self.provider, &self.store, leader, m, cx).await?;
            if !detail.is_empty() {
                report.migrations.push(MigrationStep {
                    id,
                    instance,
                    state,
                    detail,
                });
            }
        }
        Ok(())
    }

    /// Reads the `wanted` GPU utilisation (see [`readings_wanted`]) into `fleet`, one region
    /// at a time, so that a large fleet's readings are held once.
    async fn read_gpu_utilisation(
        &self,
        wanted: BTreeMap<String, (Vec<usize>, Duration)>,
        fleet: &mut Fleet,
        now: DateTime<Utc>,
    ) {
        for (region, (positions, window)) in wanted {
            let ids: Vec<String> = positions
                .iter()
                .map(|&i| fleet.instances[i].id.clone())
                .collect();
            match self
                .provider
                .gpu_utilisation(&region, &ids, now - window - READING_MARGIN, now)
                .await
            {
                Ok(mut found) => {
                    for i in positions {
                        let instance = &mut fleet.instances[i];
                        if let Some(samples) = found.remove(&instance.id) {
                            instance.gpu_util = samples;
                        }
                    }
                }
                // Idle rules then see no readings and follow their `missing_metrics`.
                Err(err) => tracing::warn!(region, "cannot read GPU utilisation: {err}"),
            }
        }
    }

    /// Resolves intents left without an outcome from what the inventory shows now.
    async fn resolve_interrupted(
        &self,
        inventory: &Inventory,
        now: DateTime<Utc>,
    ) -> Result<Vec<AuditEntry>, StoreError> {
        let pending = self.store.pending_intents().await?;
        if pending.is_empty() {
            return Ok(Vec::new());
        }
        let listed: HashMap<&str, &crate::fleet::Instance> = inventory
            .instances
            .iter()
            .map(|i| (i.id.as_str(), i))
            .collect();
        let mut outcomes = Vec::new();
        let mut done = Vec::new();
        for intent in pending {
            let e = &intent.entry;
            let Some(id) = e.instance.as_deref() else {
                continue;
            };
            let action = Action::parse(&e.action);
            let (outcome, detail) = match listed.get(id) {
                // A migration step repeats from the state its row records.
                _ if matches!(
                    action,
                    Some(Action::MigrateToSpot | Action::RelaunchSpot | Action::FallbackOnDemand)
                ) =>
                {
                    (
                        Outcome::Skipped,
                        format!("{INTERRUPTED}; the spot migration repeats the step from its recorded state"),
                    )
                }
                None if e
                    .region
                    .as_ref()
                    .is_some_and(|r| inventory.complete_regions.contains(r)) =>
                {
                    (Outcome::Skipped, "the instance is gone".to_string())
                }
                // Its region could not be listed: resolve it at a later tick.
                None => continue,
                Some(instance) => match (action, instance.state) {
                    (
                        Some(Action::Stop | Action::Hibernate),
                        InstanceState::Stopping | InstanceState::Stopped,
                    )
                    | (Some(Action::Start), InstanceState::Pending | InstanceState::Running) => (
                        Outcome::Succeeded,
                        format!("found {} after an interruption", instance.state.as_str()),
                    ),
                    (Some(Action::Notify), _) if instance.tag(STOP_AT_TAG).is_some() => (
                        Outcome::Succeeded,
                        format!("found the {STOP_AT_TAG} tag after an interruption"),
                    ),
                    (_, state) => (
                        Outcome::Failed,
                        format!(
                            "{INTERRUPTED}; the instance is {} (it is decided again from here)",
                            state.as_str()
                        ),
                    ),
                },
            };
            if outcome == Outcome::Succeeded {
                if let Some(action) = action {
                    done.push((id.to_string(), action, e.at));
                }
            }
            outcomes.push(NewAuditEntry {
                at: now,
                outcome,
                reason: format!("{}; {detail}", e.reason),
                error: (outcome == Outcome::Failed).then(|| detail.clone()),
                request_id: None,
                intent_seq: Some(intent.seq),
                ..e.clone()
            });
        }
        let written = self.store.append_audit(&outcomes).await?;
        for (id, action, at) in done {
            self.store.record_action(&[id], action, at).await?;
        }
        Ok(written)
    }

    /// Carries out the decisions that change something: intents (committed), cloud calls,
    /// outcomes, then ebb's memory of what it did; reports them in `report`.
    async fn act(
        &self,
        decisions: Vec<Decision>,
        version: &str,
        now: DateTime<Utc>,
        leader: &mut Leadership,
        report: &mut TickReport,
    ) -> Result<(), StoreError> {
        let mut to_act: Vec<Decision> = decisions
            .into_iter()
            .filter(|d| match d.action {
                Action::Start | Action::Stop | Action::Hibernate | Action::Notify => true,
                // Real moves go through `plan_migrations`; dry runs are audited here.
                Action::MigrateToSpot => d.dry_run || self.options.dry_run,
                _ => false,
            })
            .collect();
        let dry_run = |d: &Decision| d.dry_run || self.options.dry_run;
        let real: Vec<String> = to_act
            .iter()
            .filter(|d| !dry_run(d))
            .map(|d| d.instance.clone())
            .collect();
        if !real.is_empty() {
            let streaks = self.store.failure_streaks(&real, ACTOR).await?;
            let before = to_act.len();
            to_act.retain(|d| match streaks.get(&d.instance) {
                Some(s) if s.action == d.action.as_str() && !dry_run(d) => {
                    now >= s.last_at + retry_after(s.failures)
                }
                _ => true,
            });
            report.held_back = before - to_act.len();
        }
        // Starts first (people are waiting for them), then notices, then stops; by instance id
        // within each. The cap keeps that order.
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
        if to_act.is_empty() {
            return Ok(());
        }
        let entry = |d: &Decision, outcome: Outcome, dry_run: bool| NewAuditEntry {
            at: now,
            actor: ACTOR.to_string(),
            instance: Some(d.instance.clone()),
            region: Some(d.region.clone()),
            action: d.action.as_str().to_string(),
            outcome,
            policy: d.policy.clone(),
            policy_version: Some(version.to_string()),
            code: Some(d.code.as_str().to_string()),
            reason: d.reason.clone(),
            dry_run,
            request_id: None,
            error: None,
            intent_seq: None,
        };
        let (dry, real): (Vec<Decision>, Vec<Decision>) = to_act.into_iter().partition(dry_run);
        let results = &mut report.actions;

        // Dry runs: the intent and a `skipped` outcome, so the log shows what would have been
        // done; once, not at every tick while the same decision holds.
        let ids: Vec<String> = dry.iter().map(|d| d.instance.clone()).collect();
        let noted = self.store.last_dry_runs(&ids).await?;
        let (repeated, new): (Vec<Decision>, Vec<Decision>) = dry.into_iter().partition(|d| {
            noted.get(&d.instance).is_some_and(|(action, code)| {
                action == d.action.as_str() && code.as_deref() == Some(d.code.as_str())
            })
        });
        let intents = self
            .store
            .append_audit(
                &new.iter()
                    .map(|d| entry(d, Outcome::Intent, true))
                    .collect::<Vec<_>>(),
            )
            .await?;
        let skipped: Vec<NewAuditEntry> = new
            .iter()
            .zip(&intents)
            .map(|(d, intent)| NewAuditEntry {
                intent_seq: Some(intent.seq),
                reason: format!("{}; dry run, nothing done", d.reason),
                ..entry(d, Outcome::Skipped, true)
            })
            .collect();
        self.store.append_audit(&skipped).await?;
        results.extend(new.into_iter().map(|decision| ActionOutcome {
            detail: format!("{}; dry run, nothing done", decision.reason),
            decision,
            outcome: Outcome::Skipped,
        }));
        results.extend(repeated.into_iter().map(|decision| ActionOutcome {
            detail: format!(
                "{}; dry run, nothing done (already in the audit log)",
                decision.reason
            ),
            decision,
            outcome: Outcome::Skipped,
        }));

        // Real actions: every intent committed, on the leader's session, before any cloud call.
        // Only their numbers are kept: the first tick of a large fleet has tens of thousands.
        let intents = real
            .iter()
            .map(|d| entry(d, Outcome::Intent, false))
            .collect::<Vec<_>>();
        let appended = leader.append_intents(&intents).await?;
        drop(intents);
        let seq_of: HashMap<&str, i64> = real
            .iter()
            .zip(appended)
            .map(|(d, i)| (d.instance.as_str(), i.seq))
            .collect();
        for group in groups(&real) {
            let (action, region, stop_at) =
                (group[0].action, group[0].region.as_str(), group[0].stop_at);
            let ids: Vec<String> = group.iter().map(|d| d.instance.clone()).collect();
            let cloud = match action {
                Action::Start => self.provider.start(region, &ids).await,
                Action::Stop => self.provider.stop(region, &ids, false).await,
                Action::Hibernate => self.provider.stop(region, &ids, true).await,
                _ => {
                    let at = stop_at
                        .unwrap_or(now)
                        .to_rfc3339_opts(SecondsFormat::Secs, true);
                    let tags = BTreeMap::from([(STOP_AT_TAG.to_string(), at)]);
                    self.provider.tag(region, &ids, &tags).await
                }
            };
            let outcomes = outcome_entries(&group, &cloud, |d, outcome| NewAuditEntry {
                intent_seq: seq_of.get(d.instance.as_str()).copied(),
                ..entry(d, outcome, false)
            });
            self.store.append_audit(&outcomes).await?;
            let succeeded: Vec<String> = group
                .iter()
                .zip(&outcomes)
                .filter(|(_, o)| o.outcome == Outcome::Succeeded)
                .map(|(d, _)| d.instance.clone())
                .collect();
            self.store.record_action(&succeeded, action, now).await?;
            for (d, o) in group.iter().zip(&outcomes) {
                if let (Outcome::Succeeded, Action::Notify, Some(webhook)) =
                    (o.outcome, d.action, &self.options.webhook)
                {
                    webhook.send(notice(d));
                }
                results.push(ActionOutcome {
                    decision: (*d).clone(),
                    outcome: o.outcome,
                    detail: o.error.clone().unwrap_or_else(|| o.reason.clone()),
                });
            }
        }
        Ok(())
    }
}

/// The GPU utilisation a tick reads, by region: the positions in `fleet` of the running
/// instances whose governing policy looks at it (an idle rule, or work hours whose stop waits
/// while the GPU is busy), and the longest window needed. Other instances are not read:
/// CloudWatch bills every metric read.
fn readings_wanted(
    set: &PolicySet,
    fleet: &Fleet,
    decisions: &[Decision],
) -> BTreeMap<String, (Vec<usize>, Duration)> {
    let windows: HashMap<&str, Duration> = set
        .policies
        .iter()
        .filter_map(|p| {
            let idle = p.idle.as_ref().map(|i| i.window);
            let busy = p
                .work_hours
                .as_ref()
                .filter(|w| w.busy_defers_stop)
                .map(|_| engine::RECENT);
            Some((p.name.as_str(), idle.into_iter().chain(busy).max()?))
        })
        .collect();
    let governed: HashMap<&str, Duration> = decisions
        .iter()
        .filter_map(|d| Some((d.instance.as_str(), *windows.get(d.policy.as_deref()?)?)))
        .collect();
    let mut by_region: BTreeMap<String, (Vec<usize>, Duration)> = BTreeMap::new();
    for (i, instance) in fleet.instances.iter().enumerate() {
        if instance.state != InstanceState::Running {
            continue;
        }
        if let Some(window) = governed.get(instance.id.as_str()) {
            let entry = match by_region.get_mut(&instance.region) {
                Some(entry) => entry,
                None => by_region.entry(instance.region.clone()).or_default(),
            };
            entry.0.push(i);
            entry.1 = entry.1.max(*window);
        }
    }
    by_region
}

/// The prices a tick reads, by region: for the running instances a spot rule may move (tagged
/// `ebb:interruptible=true`, on-demand), their own type and the rule's acceptable types.
fn prices_wanted(
    set: &PolicySet,
    fleet: &Fleet,
    decisions: &[Decision],
) -> BTreeMap<String, BTreeSet<String>> {
    let rules: HashMap<&str, &policy::SpotRule> = set
        .policies
        .iter()
        .filter_map(|p| Some((p.name.as_str(), p.spot.as_ref()?)))
        .collect();
    let governed: HashMap<&str, &policy::SpotRule> = decisions
        .iter()
        .filter_map(|d| Some((d.instance.as_str(), *rules.get(d.policy.as_deref()?)?)))
        .collect();
    let mut by_region: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for instance in &fleet.instances {
        let Some(rule) = governed.get(instance.id.as_str()) else {
            continue;
        };
        if instance.state != InstanceState::Running
            || instance.lifecycle != Lifecycle::OnDemand
            || instance.tag(INTERRUPTIBLE_TAG) != Some("true")
        {
            continue;
        }
        let types = by_region.entry(instance.region.clone()).or_default();
        types.insert(instance.instance_type.clone());
        types.extend(rule.instance_types.iter().cloned());
    }
    by_region
}

/// How many instances are in each state, by governing policy (`""` for none).
fn instances_by_state(
    fleet: &Fleet,
    decisions: &[Decision],
) -> BTreeMap<(&'static str, String), usize> {
    let policy_of: HashMap<&str, &str> = decisions
        .iter()
        .map(|d| (d.instance.as_str(), d.policy.as_deref().unwrap_or("")))
        .collect();
    let mut by_state: BTreeMap<(&'static str, &str), usize> = BTreeMap::new();
    for instance in &fleet.instances {
        let policy = policy_of.get(instance.id.as_str()).copied().unwrap_or("");
        *by_state
            .entry((instance.state.as_str(), policy))
            .or_default() += 1;
    }
    by_state
        .into_iter()
        .map(|((state, policy), n)| ((state, policy.to_string()), n))
        .collect()
}

/// How long after `failures` failures in a row an action waits before it is tried again.
fn retry_after(failures: u32) -> Duration {
    let doublings = failures.saturating_sub(1).min(16);
    (RETRY_FIRST * 2i32.pow(doublings)).min(RETRY_MAX)
}

/// Runs the control loop until `shutdown` resolves: every `interval` of `clock`'s time, and
/// whenever `control.wake` is notified, a replica that leads (or can become the leader) ticks
/// at `clock`'s now; the others wait. A tick in flight always finishes before shutdown: its
/// intents are committed and its outcomes written.
pub async fn control_loop<P: Provider>(
    reconciler: &Reconciler<P>,
    name: &str,
    interval: std::time::Duration,
    clock: Clock,
    control: &Control,
    shutdown: impl std::future::Future<Output = ()>,
) {
    let mut ticker = tokio::time::interval(clock.real(interval));
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    tokio::pin!(shutdown);
    let mut leader: Option<Leadership> = None;
    loop {
        tokio::select! {
            biased;
            () = &mut shutdown => break,
            _ = ticker.tick() => {}
            () = control.wake.notified() => {}
        }
        if let Some(held) = leader.as_mut() {
            if !held.held().await {
                tracing::error!("lost the leadership (database session ended)");
                leader = None;
                control.set_leader(false);
            }
        }
        if leader.is_none() {
            match reconciler.store.try_lead(name).await {
                Ok(Some(won)) => {
                    tracing::info!(replica = name, "became the leader");
                    leader = Some(won);
                    control.set_leader(true);
                }
                Ok(None) => continue,
                Err(err) => {
                    tracing::error!("cannot reach the database to elect a leader: {err}");
                    continue;
                }
            }
        }
        let Some(held) = leader.as_mut() else {
            continue;
        };
        let started = std::time::Instant::now();
        let now = clock.now();
        let result = reconciler.tick(now, held).await;
        control.metrics.tick(&result, started.elapsed());
        control.last_tick.send_replace(Some(now));
        match result {
            Ok(report) => {
                for failure in &report.inventory_failures {
                    tracing::error!("cannot list instances in {failure}");
                }
                for a in &report.actions {
                    tracing::info!(
                        at = %report.at.to_rfc3339_opts(SecondsFormat::Secs, true),
                        instance = a.decision.instance,
                        action = a.decision.action.as_str(),
                        outcome = a.outcome.as_str(),
                        policy = a.decision.policy.as_deref(),
                        dry_run = a.decision.dry_run || reconciler.options.dry_run,
                        detail = a.detail,
                        "action"
                    );
                }
                for m in &report.migrations {
                    tracing::info!(
                        at = %report.at.to_rfc3339_opts(SecondsFormat::Secs, true),
                        migration = m.id,
                        instance = m.instance,
                        state = m.state.as_str(),
                        detail = m.detail,
                        "migration"
                    );
                }
                tracing::info!(
                    at = %report.at.to_rfc3339_opts(SecondsFormat::Secs, true),
                    instances = report.instances,
                    actions = report.actions.len(),
                    failed = report
                        .actions
                        .iter()
                        .filter(|a| a.outcome == Outcome::Failed)
                        .count(),
                    deferred = report.deferred,
                    held_back = report.held_back,
                    resolved = report.resolved.len(),
                    policy_error = report.policy_error.as_deref(),
                    "tick"
                )
            }
            Err(err) => tracing::error!("tick failed: {err}"),
        }
    }
    tracing::info!("shut down");
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

/// The order actions are carried out in.
fn order(action: Action) -> u8 {
    match action {
        Action::Start => 0,
        Action::Notify => 1,
        _ => 2,
    }
}

/// Decisions grouped into cloud calls: by action, region and (for notices) the announced
/// time, in the order [`order`] gives.
fn groups(decisions: &[Decision]) -> Vec<Vec<&Decision>> {
    let mut groups: BTreeMap<_, Vec<&Decision>> = BTreeMap::new();
    for d in decisions {
        let key = (
            order(d.action),
            d.action.as_str(),
            d.stop_at,
            d.region.as_str(),
        );
        groups.entry(key).or_default().push(d);
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
                (Some(done), _) => NewAuditEntry {
                    request_id: done.request_id.clone(),
                    reason: match &done.fallback {
                        Some(fallback) => format!("{}; {fallback}", d.reason),
                        None => d.reason.clone(),
                    },
                    ..entry(d, Outcome::Succeeded)
                },
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
