//! The decision core: given the time, the policies, the fleet and what ebb did before, what
//! should happen to each instance, and why.
//!
//! [`decide`] is pure: no I/O, `now` is an argument, and the same inputs give the same
//! decisions. `ebb plan`, the reconciler and the tests all call it; [`explain`] runs the same
//! evaluation with a trace of every rule's verdict.

mod early;
mod explain;
mod group;
mod next;
mod prior;
mod reclaim;
mod reserve;
mod rules;
mod standing;

pub use early::{latest_starts, whole_minutes, StartRates, TokenRate, MAX_EARLY};
pub use explain::{explain, Explanation};
pub use group::{
    decide_group, GroupAction, GroupDecision, GroupMemory, NODE_GROUP_LEAST_MAX, OFF_CAPACITY,
};
pub use next::{next_change, next_opening, NextChange};
pub use prior::{InstanceFacts, Prior};
pub use reclaim::{reclaim_due, reclaim_hold, ReclaimHold};
pub use reserve::{reservations, Reserve, RESERVATION_LASTS};
pub use rules::{last_uses, owned_code, tags_forbid_stop, RECENT};
pub use standing::BudgetStanding;

use crate::fleet::{Fleet, Instance};
use crate::policy::{Policy, PolicySet};
use crate::schedule::ScheduleStatus;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use std::fmt;

/// What ebb does to an instance.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Action {
    /// Nothing.
    None,
    /// Start a stopped instance.
    Start,
    /// Stop a running instance.
    Stop,
    /// Hibernate a running instance.
    Hibernate,
    /// Announce a coming stop (tag `ebb:stop-at` and webhook).
    Notify,
    /// Take back a notice that no longer holds (remove `ebb:stop-at`).
    WithdrawNotice,
    /// Move an on-demand instance to spot capacity.
    MigrateToSpot,
    /// Relaunch a reclaimed spot instance on spot.
    RelaunchSpot,
    /// Relaunch a reclaimed spot instance on-demand.
    FallbackOnDemand,
    /// Change a stopped instance's type (a start falling back to another type).
    Resize,
    /// Make a capacity reservation for a stopped instance's start (`start.reserve_capacity`).
    ReserveCapacity,
    /// Make a stopped instance start into a capacity reservation, or into open capacity again.
    TargetReservation,
    /// Cancel a capacity reservation ebb made.
    CancelReservation,
    /// Reclaim a box stopped for long: its image made and proven, then the box terminated.
    Reclaim,
    /// Bring a reclaimed box back from its image (`ebb restore`).
    Restore,
}

impl Action {
    /// The stable name used in JSON, tables and the audit log.
    pub fn as_str(self) -> &'static str {
        match self {
            Action::None => "none",
            Action::Start => "start",
            Action::Stop => "stop",
            Action::Hibernate => "hibernate",
            Action::Notify => "notify",
            Action::WithdrawNotice => "withdraw_notice",
            Action::MigrateToSpot => "migrate_to_spot",
            Action::RelaunchSpot => "relaunch_spot",
            Action::FallbackOnDemand => "fallback_on_demand",
            Action::Resize => "resize",
            Action::ReserveCapacity => "reserve_capacity",
            Action::TargetReservation => "target_reservation",
            Action::CancelReservation => "cancel_reservation",
            Action::Reclaim => "reclaim",
            Action::Restore => "restore",
        }
    }

    /// The action named `name` (as [`Action::as_str`] writes it).
    pub fn parse(name: &str) -> Option<Action> {
        [
            Action::None,
            Action::Start,
            Action::Stop,
            Action::Hibernate,
            Action::Notify,
            Action::WithdrawNotice,
            Action::MigrateToSpot,
            Action::RelaunchSpot,
            Action::FallbackOnDemand,
            Action::Resize,
            Action::ReserveCapacity,
            Action::TargetReservation,
            Action::CancelReservation,
            Action::Reclaim,
            Action::Restore,
        ]
        .into_iter()
        .find(|a| a.as_str() == name)
    }

    /// Whether it stops the instance or announces a stop: what protections (`ebb:keep-until`,
    /// `ebb:skip`, overrides) forbid, and what ebb checks them again for right before the call.
    pub fn stops(self) -> bool {
        matches!(self, Action::Stop | Action::Hibernate | Action::Notify)
    }
}

impl fmt::Display for Action {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

macro_rules! codes {
    ($($(#[doc = $doc:literal])* $variant:ident = $name:literal,)*) => {
        /// Why a decision was made, which step of a spot migration an audit row records, or
        /// why an action failed: a stable machine code, documented in
        /// docs/policies.md#decision-codes.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
        pub enum Code {
            $($(#[doc = $doc])* #[serde(rename = $name)] $variant,)*
        }

        impl Code {
            /// Every code, for documentation and tests.
            pub const ALL: &'static [Code] = &[$(Code::$variant,)*];

            /// The stable name.
            pub fn as_str(self) -> &'static str {
                match self {
                    $(Code::$variant => $name,)*
                }
            }
        }
    };
}

codes! {
    /// The instance carries `ebb:skip=true`.
    SkipTag = "skip_tag",
    /// No policy matches the instance.
    NoPolicy = "no_policy",
    /// Several policies match at the same top priority.
    Conflict = "conflict",
    /// The instance is terminated.
    Terminated = "terminated",
    /// The instance is between states (pending, stopping, shutting down).
    InTransition = "in_transition",
    /// Running in work hours, nothing to do.
    InHours = "in_hours",
    /// Running and no rule asks for anything.
    NoRuleApplies = "no_rule_applies",
    /// Outside work hours: stop or hibernate.
    OutsideHours = "outside_hours",
    /// Outside work hours with `outside_hours: none`: left running.
    OutsideHoursKept = "outside_hours_kept",
    /// Stopped outside work hours: nothing to do.
    StoppedOutsideHours = "stopped_outside_hours",
    /// Stopped, and the policy has no work hours to start it in.
    StoppedNoHours = "stopped_no_hours",
    /// The `ebb:keep-until` tag protects the instance.
    KeepUntil = "keep_until",
    /// The `ebb:keep-until` tag is not a time; it protects the instance until fixed.
    KeepUntilInvalid = "keep_until_invalid",
    /// An override protects the instance.
    Override = "override",
    /// An Auto Scaling group's scale-down is held: a member has an override, `ebb:keep-until`
    /// in the future or `ebb:skip`, the group has `ebb:keep-until`, or a member was not listed
    /// (what protects it is unknown). The reason names the member and the protection.
    GroupMemberProtected = "group_member_protected",
    /// A member of an Auto Scaling group (`aws:autoscaling:groupName`): ebb never acts on it
    /// alone, the group would replace it.
    OwnedByAsg = "owned_by_asg",
    /// A node of an EKS managed node group (`eks:nodegroup-name`): never acted on alone.
    OwnedByEksNodegroup = "owned_by_eks_nodegroup",
    /// A node Karpenter launched (`karpenter.sh/nodepool`): never acted on alone.
    OwnedByKarpenter = "owned_by_karpenter",
    /// An instance of a SkyPilot cluster (`skypilot-cluster-name`): never acted on alone.
    OwnedBySkypilot = "owned_by_skypilot",
    /// An instance of an AWS Batch compute environment (`aws:batch:compute-environment`):
    /// never acted on alone.
    OwnedByBatch = "owned_by_batch",
    /// An instance of a Spot Fleet request (`aws:ec2spot:fleet-request-id`): never acted on
    /// alone.
    OwnedBySpotFleet = "owned_by_spot_fleet",
    /// An instance of an EC2 Fleet (`aws:ec2:fleet-id`): never acted on alone.
    OwnedByEc2Fleet = "owned_by_ec2_fleet",
    /// An instance of an Alibaba Cloud Auto Scaling (ESS) group
    /// (`acs:autoscaling:scalingGroupId`): never acted on alone.
    OwnedByEss = "owned_by_ess",
    /// A node of an ACK cluster or node pool (`ack.aliyun.com`,
    /// `ack.alibabacloud.com/nodepool-id`): never acted on alone.
    OwnedByAck = "owned_by_ack",
    /// An instance of a Tencent Cloud Auto Scaling group
    /// (`tencentcloud:autoscaling:auto-scaling-group-id`): never acted on alone.
    OwnedByTencentAs = "owned_by_tencent_as",
    /// A node of a TKE cluster or node pool (`tke-clusterId`, `tke-nodepool-id`): never acted
    /// on alone.
    OwnedByTke = "owned_by_tke",
    /// A system tag (`aws:`, `acs:`, `tencentcloud:`) that may mean an owner ebb does not know:
    /// never acted on alone.
    OwnedByUnknown = "owned_by_unknown",
    /// The GPU is busy; the scheduled stop waits.
    BusyDeferred = "busy_deferred",
    /// Busy past `max_defer` after the close: stop anyway.
    MaxDeferReached = "max_defer_reached",
    /// Work hours close soon: give notice.
    Notice = "notice",
    /// The box nears (or passed) its policy's `runtime.max` from its last start, or has been
    /// busy past `runtime.max_busy_without_checkpoint` without a checkpoint: give notice.
    RuntimeNotice = "runtime_notice",
    /// The box ran past its policy's `runtime.max` from its last start and its notice was
    /// served: stop, busy or not.
    RuntimeExceeded = "runtime_exceeded",
    /// The box has been busy for its policy's `runtime.max_busy_without_checkpoint` while its
    /// `ebb:checkpoint-at` tag is older than that, and its notice was served: stop.
    CheckpointOverdue = "checkpoint_overdue",
    /// The matched boxes' budget is spent (`budgets`, `at_limit`): a start refused, or a stop
    /// after its notice. The reason names the budget, the spend, the amount and the period.
    BudgetExhausted = "budget_exhausted",
    /// A budget with `at_limit: stop` is spent: give notice before the stop.
    BudgetNotice = "budget_notice",
    /// The notice before the close was missed: give it now, stop later.
    NoticeLate = "notice_late",
    /// Notice given; the stop waits until it is `before` old.
    NoticePending = "notice_pending",
    /// Idle: give notice before the idle stop.
    IdleNotice = "idle_notice",
    /// Running with an `ebb:stop-at` notice that no longer holds: take it back.
    NoticeWithdrawn = "notice_withdrawn",
    /// Work hours opened: start what the policy starts.
    StartAtOpen = "start_at_open",
    /// Work hours open within `start_ahead`: start what the policy starts, so that it is
    /// running at the opening.
    StartAhead = "start_ahead",
    /// Running outside hours within `start_ahead` of the opening: not stopped.
    StartAheadKept = "start_ahead_kept",
    /// A person started it outside work hours: not stopped for being outside hours until it
    /// has gone idle (`work_hours.late_start`).
    LateStartKept = "late_start_kept",
    /// A person started it outside work hours and it has gone idle since: stop (after the
    /// notice, if any).
    LateStartIdle = "late_start_idle",
    /// A start EC2 refused for lack of capacity (`InsufficientInstanceCapacity`): an outcome's
    /// code, retried sooner than other failures.
    InsufficientCapacity = "insufficient_capacity",
    /// A stop (or hibernation) that went through, but the stopped mode read back after it says
    /// the cloud still bills the instance (a family or account that cannot stop without
    /// charge): an outcome's code; the stop counts no saving.
    StoppedStillCharging = "stopped_still_charging",
    /// A stop that went through, but the cloud did not say how it bills the stopped instance:
    /// an outcome's code; the stop counts no saving.
    StoppedBillingUnknown = "stopped_billing_unknown",
    /// A stop that went through of a box running in a capacity reservation held outside ebb
    /// (`stop.in_reservation: stop`): an outcome's code; the reservation is paid whether the
    /// box runs or not, so the stop counts no saving.
    StoppedInReservation = "stopped_in_reservation",
    /// EC2 had no capacity for the instance's type: it is changed to the next of the policy's
    /// `start.fallback_types`, and started as that.
    FallbackType = "fallback_type",
    /// Idle, but not stopped: the next opening is within `idle.min_gap` and EC2 refused a start
    /// of its type for lack of capacity within `idle.capacity_memory`.
    CapacityRiskKept = "capacity_risk_kept",
    /// An instance ebb changed to a fallback type is changed back to its own type before a
    /// start (`start.restore_type`).
    RestoreType = "restore_type",
    /// A capacity reservation made for an instance whose start EC2 refused for lack of capacity
    /// within the capacity memory, and the instance made to start into it
    /// (`start.reserve_capacity`).
    CapacityReserved = "capacity_reserved",
    /// The capacity reservation ebb made for an instance's start cancelled: the instance runs,
    /// or the reservation's deadline passed.
    ReservationCancelled = "reservation_cancelled",
    /// An instance whose capacity reservation ebb cancelled made to start into open capacity
    /// again, before its next start.
    ReservationReleased = "reservation_released",
    /// `start_at_open: never`.
    StartNever = "start_never",
    /// Stopped by someone other than ebb: a person's stop sticks.
    StoppedByPerson = "stopped_by_person",
    /// ebb stopped it inside the current window (an idle stop): wait for the next opening.
    StoppedInWindow = "stopped_in_window",
    /// `start_at_open: all` already started it in this window.
    StartedThisWindow = "started_this_window",
    /// When it was stopped is unknown, so `start_at_open: all` leaves it alone.
    StopTimeUnknown = "stop_time_unknown",
    /// Idle: every sample of the window is below the threshold.
    Idle = "idle",
    /// Idle rule with `missing_metrics: idle` and the window not covered by data.
    IdleMetricsMissing = "idle_metrics_missing",
    /// The idle rule found a sample at or above the threshold.
    NotIdle = "not_idle",
    /// The idle window is not covered by data; counted as busy.
    MetricsMissing = "metrics_missing",
    /// GPU utilisation could not be read (an error, a throttle, a denial): whether the instance
    /// is idle or busy is unknown, so it is not stopped for idleness, nor while its stop would
    /// wait for a busy GPU.
    MetricsUnreadable = "metrics_unreadable",
    /// An activity signal of the idle rule (`idle.activity`) showed a person using the
    /// instance: not idle, and a stop outside hours that waits while busy waits for it too.
    InUse = "in_use",
    /// An activity signal could not be read, or answered only in part: whether a person is
    /// using the instance is unknown, so it is not stopped for idleness, nor while a stop
    /// would wait while busy.
    ActivityUnreadable = "activity_unreadable",
    /// Started too recently for the idle rule.
    IdleGrace = "idle_grace",
    /// Eligible for spot: move it.
    SpotSavings = "spot_savings",
    /// A spot migration is under way on it (tag `ebb:migrating`).
    Migrating = "migrating",
    /// A rule would stop it, but it is a spot migration's one-time spot instance.
    SpotCannotStop = "spot_cannot_stop",
    /// A spot migration was not started: the move no longer holds, or how the original was
    /// launched cannot be read.
    SpotCancelled = "spot_cancelled",
    /// A spot migration stops the original to image it.
    SpotStop = "spot_stop",
    /// A spot migration images the stopped original with all its volumes.
    SpotImage = "spot_image",
    /// A spot migration launches its first replacement on spot.
    SpotLaunch = "spot_launch",
    /// A spot migration launches a spot replacement for a reclaimed one.
    SpotRelaunch = "spot_relaunch",
    /// A spot migration falls back to (or launches) an on-demand replacement.
    SpotFallback = "spot_fallback",
    /// A spot migration's replacement is running.
    SpotRunning = "spot_running",
    /// A spot migration's replacement still runs a tick later: the move is done.
    SpotVerified = "spot_verified",
    /// A spot migration's original was started again by someone; it is left to the rules.
    SpotOriginalReturned = "spot_original_returned",
    /// A spot migration terminates the original after `keep_original_for`.
    SpotCleanup = "spot_cleanup",
    /// Spot capacity was reclaimed from a migration's replacement, or will be (a warning).
    SpotInterrupted = "spot_interrupted",
    /// A spot migration is undone: the replacement terminated, the original started again.
    SpotRollback = "spot_rollback",
    /// ebb stops following a spot migration (its replacement was stopped or terminated by
    /// someone).
    SpotEnded = "spot_ended",
    /// A spot migration deletes its image: the workload runs on-demand and the original is gone.
    SpotImageDeleted = "spot_image_deleted",
    /// A spot migration stopped half-way in a state ebb could not undo.
    SpotFailed = "spot_failed",
    /// A spot migration found an image or instance it cannot prove it made (after a crash):
    /// refused, never launched from or acted on.
    SpotRefused = "spot_refused",
    /// The spot rule would move it, but it is in another account (listed through a role of
    /// `EBB_ROLE_ARNS`), where ebb's images and launches do not reach: not moved, nothing is
    /// stopped.
    SpotOtherAccount = "spot_other_account",
    /// A replacement ebb launched (its migration's launch id and ebb's client token for it)
    /// that its migration does not track is terminated.
    SpotOrphan = "spot_orphan",
    /// EC2 recommended rebalancing a spot replacement whose job checkpointed recently: the next
    /// one is launched in another pool now, and the old one terminated once it is verified.
    SpotRebalance = "spot_rebalance",
    /// A migration that fell back to on-demand tries spot again after `back_to_spot_after`:
    /// the on-demand replacement is terminated once the spot one is verified.
    SpotBackToSpot = "spot_back_to_spot",
    /// A subscription instance (Alibaba `PrePaid`, Tencent `PREPAID`): a stop saves nothing, so
    /// it is never stopped, hibernated or given notice.
    SubscriptionNoSaving = "subscription_no_saving",
    /// Its family cannot stop without charge (local disks, persistent memory: the families
    /// file): not stopped unless the policy sets `stop.allow_charging_stop: true`.
    ChargingStopRefused = "charging_stop_refused",
    /// Its cloud has locked this preemptible instance for recycling (an interruption
    /// warning): left alone, and reported.
    RecyclingWarned = "recycling_warned",
    /// It runs in a capacity reservation or Capacity Block held outside ebb, paid whether it
    /// runs or not: not stopped unless the policy sets `stop.in_reservation: stop`.
    ReservedNoSaving = "reserved_no_saving",
    /// A box stopped for `stopped.reclaim_after` will be reclaimed: the notice.
    ReclaimNotice = "reclaim_notice",
    /// The image of a box being reclaimed is asked for, with all its volumes.
    ReclaimImage = "reclaim_image",
    /// A box is terminated once its image is proven complete and made from its volumes.
    Reclaimed = "reclaimed",
    /// A reclaim is given up before the termination: something keeps the box.
    ReclaimHeld = "reclaim_held",
    /// A box is not reclaimed: a volume outlives termination, or its image is not proven.
    ReclaimRefused = "reclaim_refused",
    /// A reclaimed box is launched again from its image (`ebb restore`).
    Restored = "restored",
    /// A reclaim's image and snapshots are deleted: the restored box ran `keep_image_for`.
    ReclaimImageDeleted = "reclaim_image_deleted",
}

impl fmt::Display for Code {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What should happen to one instance, and why.
#[derive(Debug, Clone, PartialEq)]
pub struct Decision {
    /// The instance id.
    pub instance: String,
    /// Its region.
    pub region: String,
    /// What to do.
    pub action: Action,
    /// The governing policy; `None` when none governs.
    pub policy: Option<String>,
    /// Stable machine code.
    pub code: Code,
    /// For people: the rule, its numbers and the local time.
    pub reason: String,
    /// The governing policy is in dry-run mode: decide and audit, never act.
    pub dry_run: bool,
    /// For `notify`: when the announced stop will happen.
    pub stop_at: Option<DateTime<Utc>>,
}

/// A [`Decision`] without the instance's names and the reason: what `ebb replay` needs to
/// carry it out on its modelled fleet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Brief {
    /// What to do.
    pub action: Action,
    /// Stable machine code.
    pub code: Code,
    /// For `notify`: when the announced stop will happen.
    pub stop_at: Option<DateTime<Utc>>,
}

/// A person's request to keep an instance from being stopped until a time.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Override {
    /// The instance id.
    pub instance: String,
    /// When the protection ends.
    pub until: DateTime<Utc>,
    /// Why, in the requester's words.
    pub reason: String,
    /// Who asked (user or API token name).
    pub by: String,
}

/// How far back a start refused for lack of capacity can count (`idle.capacity_memory` at
/// most): what the store loads for [`Prior::last_capacity_failure`].
pub use crate::policy::MAX_CAPACITY_MEMORY;

/// The policy that governs `instance`: the matching one of highest priority; none when the
/// instance is tagged `ebb:skip=true`, nothing matches, or several match at the top priority.
/// The same choice [`decide`] makes, without deciding: a tick uses it to know what to read.
pub fn governing_policy<'p>(policies: &'p PolicySet, instance: &Instance) -> Option<&'p Policy> {
    rules::governing(policies, instance, false, &mut rules::Trace::Off)
        .ok()
        .map(|(_, policy)| policy)
}

/// Below this many instances a single thread decides; above, the fleet is split over the cores
/// (each instance is decided independently, and the result keeps the fleet's order).
const PARALLEL_FROM: usize = 4096;

/// Decides what to do with every instance of `fleet` at `now`, in fleet order.
pub fn decide(
    now: DateTime<Utc>,
    policies: &PolicySet,
    fleet: &Fleet,
    prior: &Prior,
) -> Vec<Decision> {
    let ctx = rules::Context::new(now, policies, fleet, prior);
    let decide_all = |instances: &[Instance]| -> Vec<Decision> {
        instances
            .iter()
            .map(|i| ctx.decide(i, &mut rules::Trace::Off))
            .collect()
    };
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    if threads == 1 || fleet.instances.len() < PARALLEL_FROM {
        return decide_all(&fleet.instances);
    }
    let chunk = fleet.instances.len().div_ceil(threads);
    std::thread::scope(|scope| {
        let parts: Vec<_> = fleet
            .instances
            .chunks(chunk)
            .map(|part| scope.spawn(move || decide_all(part)))
            .collect();
        parts
            .into_iter()
            .flat_map(|part| {
                part.join()
                    .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
            })
            .collect()
    })
}

/// Decides at successive times under one policy set, as `ebb replay` does at every tick of a
/// month: the verdicts [`decide`] makes, without the reason text that nothing there shows, and
/// with each policy's work hours worked out again only once they may have changed.
pub struct Decider<'p> {
    policies: &'p PolicySet,
    /// Each policy's work hours (`None` without work hours), as at every instant of `held`.
    hours: Vec<Option<ScheduleStatus>>,
    /// `[from, until)`, where `hours` hold; `None` before the first decision.
    held: Option<(DateTime<Utc>, DateTime<Utc>)>,
    /// For each instance of the last fleet, by position: its governing policy, which changes
    /// only with its tags, region or type (and tags change rarely: a notice, a migration).
    governed: Vec<Governed>,
}

/// The governing policy's position (or why none governs), and what it was found from.
struct Governed {
    /// A copy of the tags (it keeps their buffer, so a fleet sharing it has these tags).
    tags: crate::fleet::Tags,
    region: String,
    instance_type: String,
    position: Result<usize, Code>,
}

impl Governed {
    /// Whether this holds for `inst`: the same tags, region and type.
    fn holds_for(&self, inst: &Instance) -> bool {
        self.tags.shares_buffer(&inst.tags)
            && self.region == inst.region
            && self.instance_type == inst.instance_type
    }
}

impl<'p> Decider<'p> {
    /// A decider under `policies`.
    pub fn new(policies: &'p PolicySet) -> Self {
        Decider {
            policies,
            hours: Vec::new(),
            held: None,
            governed: Vec::new(),
        }
    }

    /// What to do with every instance of `fleet` at `now`, in fleet order, on one thread.
    pub fn decide(&mut self, now: DateTime<Utc>, fleet: &Fleet, prior: &Prior) -> Vec<Brief> {
        if !self
            .held
            .is_some_and(|(from, until)| from <= now && now < until)
        {
            self.hours = self
                .policies
                .policies
                .iter()
                .map(|p| p.work_hours.as_ref().map(|wh| wh.schedule.status(now)))
                .collect();
            self.held = Some((now, held_until(&self.hours, now)));
        }
        let ctx =
            rules::Context::without_reasons(now, self.policies, self.hours.clone(), fleet, prior);
        let (policies, governed) = (self.policies, &mut self.governed);
        governed.truncate(fleet.instances.len());
        fleet
            .instances
            .iter()
            .enumerate()
            .map(|(n, inst)| {
                let position = match governed.get(n) {
                    Some(g) if g.holds_for(inst) => g.position,
                    _ => {
                        let found = Governed {
                            tags: inst.tags.clone(),
                            region: inst.region.clone(),
                            instance_type: inst.instance_type.clone(),
                            position: rules::governing_position(policies, inst),
                        };
                        let position = found.position;
                        match governed.get_mut(n) {
                            Some(g) => *g = found,
                            None => governed.push(found),
                        }
                        position
                    }
                };
                ctx.brief(inst, position)
            })
            .collect()
    }
}

/// Until when `hours`, worked out at `now`, hold. A status holds until its next transition:
/// between two transitions the last is the same and so is the next. Not past the horizon's
/// reach from the last transition (beyond it `since` would become unknown), and only at `now`
/// when a transition is not known on both sides.
fn held_until(hours: &[Option<ScheduleStatus>], now: DateTime<Utc>) -> DateTime<Utc> {
    let reach = chrono::Duration::days(crate::schedule::HORIZON_DAYS - 1);
    hours
        .iter()
        .flatten()
        .map(|st| match (st.since, st.next) {
            (Some(since), Some(next)) => since
                .checked_add_signed(reach)
                .map_or(next, |r| r.min(next)),
            _ => now
                .checked_add_signed(chrono::Duration::nanoseconds(1))
                .unwrap_or(now),
        })
        .min()
        .unwrap_or(DateTime::<Utc>::MAX_UTC)
}

/// The decision for one instance, with its trace; used by [`explain`].
fn decide_traced(
    now: DateTime<Utc>,
    policies: &PolicySet,
    fleet: &Fleet,
    prior: &Prior,
    instance: &Instance,
) -> (Decision, Vec<String>) {
    let ctx = rules::Context::new(now, policies, fleet, prior);
    let mut lines = Vec::new();
    let decision = ctx.decide(instance, &mut rules::Trace::On(&mut lines));
    (decision, lines)
}
