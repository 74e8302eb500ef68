//! One reconcile tick, as a short sequence of named phases:
//! policies → list (and resolve interrupted intents) → budgets → read → decide → migrations →
//! reclaims → act.
//!
//! Every action is written to the audit log as an intent, committed, before the cloud call, and
//! its outcome after. An intent left without an outcome (the process died between the two) is
//! resolved at the next tick by reading the instance's real state, never by acting again.
//! docs/ARCHITECTURE.md follows one tick from `main` to the cloud call.

mod act;
mod budgets;
mod calendars;
mod capacity_reads;
mod catalogue;
mod groups;
mod memo;
mod migrations;
mod node_groups;
mod quotes;
mod read;
mod reclaims;
mod report;
mod reservations;
mod resolve;
mod stopping;

/// The policy files a [`Reconciler`] is made with, re-exported for its callers.
pub use crate::policy::PolicySource;
pub use report::{
    ActionOutcome, GroupCounts, MigrationStep, ReadFailure, TickError, TickReport, TickSummary,
};

use crate::cloud::Provider;
use crate::engine::{self, Decision};
use crate::fleet::money::Attached;
use crate::fleet::Fleet;
use crate::names::ACTOR;
use crate::policy::PolicySet;
use crate::spot;
use crate::store::{Leadership, Store};
use chrono::{DateTime, SecondsFormat, Utc};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use tracing::Instrument as _;

/// How a reconciler acts.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// Decide and audit, never act.
    pub dry_run: bool,
    /// At most this many actions a tick; the rest wait for the next tick, decided afresh.
    pub max_actions: Option<usize>,
    /// Where notices are posted, beside the `ebb:stop-at` tag.
    pub webhook: Option<crate::webhook::Webhook>,
    /// The address people reach the console at (`EBB_PUBLIC_URL`): with it, each notice
    /// carries snooze links to it (`act/notice.rs`).
    pub public_url: Option<url::Url>,
    /// How long after its intent a cloud call may still be in flight: a tick reaches its last
    /// call within its deadline, and a call ends within the cloud's time limit. A leader that
    /// lost its session, or a tick abandoned at its deadline, may still have one on the wire.
    /// Until then its intent is not resolved from the instance's state (the call could land
    /// after it was called failed), and nothing else is done to the instance.
    pub in_flight_for: chrono::Duration,
    /// The token buckets the provider's calls wait for, when it paces them: a tick takes on
    /// only the actions they can serve within its wait, the rest waiting for the next tick.
    pub pacing: Option<Pacing>,
    /// The price table (`EBB_PRICES`): what the hours budgets count are priced at.
    pub prices: Arc<crate::fleet::money::PriceTable>,
    /// Where GPU utilisation is read from when not from the provider (CloudWatch).
    pub prometheus: Option<crate::cloud::prometheus::Prometheus>,
    /// The client that asks the boxes' Jupyter Servers, for `idle.activity`'s jupyter signals.
    pub jupyter: Option<crate::cloud::jupyter::Jupyter>,
    /// The clock that times what cannot be undone: the in-flight window before a lost
    /// answer is resolved, and the spot migrations' waits before an original is terminated or
    /// an image deleted.
    pub timers: Timers,
}

/// The clock a tick's irreversible timers run on.
///
/// Against a real cloud, replicas on several hosts write and read the same times: measured on
/// each host's own clock, a replica whose clock runs hours ahead would resolve another's
/// intent while its call may still land, or delete an image early. So every such time is the
/// database's, compared with the database's. The simulated fleet lives in one process on the
/// simulated clock, where a week passes in minutes, and its calls are never in flight: its
/// timers run on the tick's own time.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Timers {
    /// The tick's `now`: the simulated fleet, an EC2 emulator on this machine under `ebb tick
    /// --at` (whose tests set the time), and tests on a paused clock.
    #[default]
    Tick,
    /// The database's `now()`, read at the start of each tick; an intent's age is the
    /// database's now less the database's time when the intent was committed.
    Database,
}

/// How a tick keeps its actions within the cloud's rate limits.
#[derive(Debug, Clone)]
pub struct Pacing {
    /// The provider's buckets.
    pub pacer: Arc<crate::cloud::pacing::Pacer>,
    /// How long a tick's calls may wait for tokens in all: well inside the tick's deadline.
    pub within: std::time::Duration,
    /// Instances per call, as the provider batches them.
    pub batch: usize,
}

/// What the phases that act (migrations, act) share in one tick: its time, the policy version
/// in force, the leadership whose fence commits each call's intents, and the report they add to.
struct TickContext<'a> {
    /// The tick's time: of its decisions, audit rows and intents.
    now: DateTime<Utc>,
    /// The time its irreversible timers run on ([`Timers`]): the database's at the tick's
    /// start, or `now`. Spot migrations' steps are timed and recorded on it.
    timers: DateTime<Utc>,
    /// The version of the policy set in force, for the audit log.
    version: &'a str,
    /// The policy set in force.
    set: &'a PolicySet,
    /// The leadership the tick acts under.
    leader: &'a mut Leadership,
    /// What the tick did so far.
    report: &'a mut TickReport,
}

impl TickContext<'_> {
    /// What a spot migration's step gets of this tick.
    fn for_migration(&mut self) -> spot::drive::Tick<'_> {
        spot::drive::Tick {
            at: self.now,
            now: self.timers,
            version: self.version,
            leader: self.leader,
        }
    }
}

/// Runs ticks against one provider, one store and one source of policies.
///
/// A tick ([`Reconciler::tick`]) runs these phases in order, each at home in one place of
/// `src/reconcile/`:
/// - **policies**, `crates/ebb-core/src/policy/source.rs`: the files, loaded again only when they change
///   ([`PolicySource`]);
/// - **list**, `mod.rs` (`list`): the listing, the inventory synced, the policy version recorded;
/// - **resolve**, `resolve.rs`: the intents an interrupted tick left open, from the instances'
///   real state, and the stops accepted before their instances had stopped (`stopping.rs`);
/// - **budgets**, `budgets.rs`: where each budget stands, its thresholds' notices sent once a
///   period;
/// - **read**, `read/`: what the policies and the spent budgets want read, GPU utilisation
///   (incrementally from CloudWatch, `read/incremental.rs`) and prices, the new readings kept;
/// - **decide**, `mod.rs` (`decide`): `engine::decide`, the decisions recorded;
/// - **migrations**, `migrations.rs`: each live spot migration one step, new ones planned, lost
///   launches swept;
/// - **reclaims**, `reclaims.rs`: each live reclaim of a box stopped for long one step, new
///   ones planned with their notices;
/// - **groups**, `groups.rs`: the Auto Scaling groups ebb manages, scaled through their
///   capacity, and their changes left pending resolved;
/// - **act**, `act/`: what is acted on this tick, dry runs, the cloud calls, their outcomes and
///   a refused start's fallback types;
/// - **catalogue**, `catalogue.rs`: the instance catalogue described again when the kept one is
///   a day old;
/// - **quotes**, `quotes.rs`: the cloud's prices of the types the fleet runs quoted again
///   where the kept quote is a day old;
/// - **report**, `report.rs`: what the tick did ([`TickReport`]).
///
/// What it remembers in memory between ticks (economies, and messages not told twice) is one
/// struct, `memo.rs`, with why each is kept.
pub struct Reconciler<P> {
    provider: P,
    store: Store,
    policies: Arc<PolicySource>,
    options: Options,
    /// Ticks begun by this reconciler, for the logs' spans.
    ticks: AtomicU64,
    /// What it remembers between ticks.
    memo: memo::Memo,
}

impl<P: Provider> Reconciler<P> {
    /// A reconciler for the policies of `policies`.
    pub fn new(provider: P, store: Store, policies: Arc<PolicySource>, options: Options) -> Self {
        Reconciler {
            provider,
            store,
            policies,
            options,
            ticks: AtomicU64::new(0),
            memo: memo::Memo::default(),
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
        let number = self.ticks.fetch_add(1, Ordering::Relaxed) + 1;
        let span = tracing::info_span!(
            "tick",
            tick = number,
            at = %now.to_rfc3339_opts(SecondsFormat::Secs, true),
        );
        // Boxed: whoever holds a tick (serve's loop, `ebb tick`, a test) holds a pointer, not
        // every phase's state; a debug build's poll frames grow with the futures they move.
        Box::pin(self.phases(now, leader)).instrument(span).await
    }

    /// The phases of a tick, in order.
    async fn phases(
        &self,
        now: DateTime<Utc>,
        leader: &mut Leadership,
    ) -> Result<TickReport, TickError> {
        let mut report = TickReport {
            at: now,
            ..TickReport::default()
        };
        let loaded = crate::policies::current(&self.policies)
            .await
            .map_err(TickError::Policies)?;
        if let Some(err) = &loaded.error {
            tracing::error!(error = %err, "policies are not valid, acting on the last valid set");
        }
        report.policy_error = loaded.error;
        let set: &PolicySet = &loaded.set;
        let version = set.version.to_string();

        let timers = match self.options.timers {
            Timers::Tick => now,
            Timers::Database => self.store.database_now().await?,
        };
        let (mut fleet, resolution, complete) =
            self.list(&version, now, timers, &mut report).await?;
        let open = resolution.open;
        self.calendar_notices(set, now, &version).await?;
        let (standings, budgets) = self.budgets(set, &fleet, now, &version).await?;
        report.budgets = standings;
        report.gpu_read_failures = self.read(set, &mut fleet, &budgets, now).await?;
        let decisions = self.decide(set, &fleet, now, budgets, &mut report).await?;
        let mut acting = TickContext {
            now,
            timers,
            version: &version,
            set,
            leader,
            report: &mut report,
        };
        if !self.options.dry_run {
            let unanswered = resolution.migration_steps;
            self.migrations(set, &fleet, &decisions, &open, unanswered, &mut acting)
                .await?;
            self.reclaims(&fleet, &open, resolution.reclaim_steps, &mut acting)
                .await?;
        }
        self.groups(set, &fleet, &complete, &mut acting).await?;
        if !self.options.dry_run {
            self.reservations(&fleet, &complete, &mut acting).await?;
            // Hourly, one call a region; before the listing goes, which says what ran outside.
            self.read_held_capacity(&complete, &fleet.instances, now)
                .await;
        }
        let to_quote = self
            .quotes_due(now)
            .then(|| quotes::to_quote(&fleet.instances));
        // Acting needs only the decisions. The listing and its readings are the largest data of
        // a tick, and the first tick of a large fleet acts on tens of thousands of instances.
        drop(fleet);
        let decisions = decisions
            .into_iter()
            .filter(|d| !open.contains(&d.instance))
            .collect();
        self.act(decisions, &mut acting).await?;
        // After acting, so that a slow description never delays a stop.
        self.refresh_catalogue(now).await;
        if let Some(types) = to_quote {
            self.refresh_quotes(types, now).await;
        }
        report.pacing = self.options.pacing.as_ref().map(|p| p.pacer.counts());
        Ok(report)
    }

    /// Lists the instances and brings the store up to date with them: the inventory, the
    /// intents an interrupted tick left open, and the policy version in force. Returns the
    /// fleet, what is left of the resolution (the instances whose intents stay open, not acted
    /// on this tick, and the spot migrations' intents for their migrations to resolve), and
    /// the regions listed completely.
    async fn list(
        &self,
        version: &str,
        now: DateTime<Utc>,
        timers: DateTime<Utc>,
        report: &mut TickReport,
    ) -> Result<(Fleet, resolve::Resolution, Vec<String>), TickError> {
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
        self.keep_attached(&inventory.attached).await?;
        let mut resolution = self.resolve_interrupted(&inventory, now, timers).await?;
        report.resolved = std::mem::take(&mut resolution.resolved);
        report.awaiting = resolution.open.len();
        self.store
            .record_policy_version(version, ACTOR, now)
            .await?;
        let fleet = Fleet {
            instances: inventory.instances,
            levers: crate::cloud::levers(),
            ..Fleet::default()
        };
        Ok((fleet, resolution, inventory.complete_regions))
    }

    /// Keeps in Postgres the volumes and Elastic IPs read that changed since the last kept.
    async fn keep_attached(&self, read: &HashMap<String, Attached>) -> Result<(), TickError> {
        let changed: HashMap<String, Attached> = {
            let kept = self
                .memo
                .attached_kept
                .lock()
                .unwrap_or_else(|e| e.into_inner());
            read.iter()
                .filter(|(id, a)| kept.get(*id) != Some(*a))
                .map(|(id, a)| (id.clone(), a.clone()))
                .collect()
        };
        if changed.is_empty() {
            return Ok(());
        }
        self.store.keep_attached(&changed).await?;
        let mut kept = self
            .memo
            .attached_kept
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        kept.retain(|id, _| read.contains_key(id));
        kept.extend(changed);
        Ok(())
    }

    /// Decides for every listed instance from what ebb remembers, and records the decisions.
    async fn decide(
        &self,
        set: &PolicySet,
        fleet: &Fleet,
        now: DateTime<Utc>,
        budgets: Vec<engine::BudgetStanding>,
        report: &mut TickReport,
    ) -> Result<Vec<Decision>, TickError> {
        let mut prior = self.store.prior(now).await?.with_budgets(budgets);
        if let Some(pacing) = &self.options.pacing {
            let moved = self.store.moved_types().await?;
            prior = prior.with_start_rates(start_rates(pacing.pacer.limits()), moved);
        }
        let decisions = engine::decide(now, set, fleet, &prior);
        self.store.record_decisions(&decisions, now).await?;
        report.count(fleet, &decisions);
        Ok(decisions)
    }
}

/// The buckets a start waits for, from a cloud's rate limits, as the engine takes them: EC2
/// meters StartInstances by instance (its request bucket serves whole batches), and a type
/// changed back before a start is a ModifyInstanceAttribute call of its own.
pub fn start_rates(limits: &crate::cloud::pacing::RateLimits) -> engine::StartRates {
    let rate = |r: crate::cloud::pacing::Rate| engine::TokenRate::of(r.burst, r.per_second);
    let start = limits.of("StartInstances");
    engine::StartRates {
        start: rate(start.instances.unwrap_or(start.requests)),
        modify: rate(limits.of("ModifyInstanceAttribute").requests),
    }
}
