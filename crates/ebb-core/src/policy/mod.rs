//! Policies: the YAML files a team keeps in git, loaded into a checked [`PolicySet`].
//!
//! Loading reports every problem at once, one per line as `path:line:col: message`, so a pull
//! request shows all of them in one CI run.

mod budget;
mod check;
mod load;
pub mod schema;
mod source;
pub mod yaml;

pub use budget::{AtLimit, Budget, Period, DEFAULT_BUDGET_NOTICE, DEFAULT_NOTIFY_AT};
pub use load::{load, load_listing_urls, load_with, policy_files, CalendarCopies, LoadError};
pub use source::{LoadedPolicies, PolicySource};

use crate::schedule::{Calendar, Schedule};
use chrono::Duration;
use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use wildmatch::WildMatch;
use yaml::Position;

/// A checked set of policies with the version of the files it came from.
#[derive(Debug, Clone)]
pub struct PolicySet {
    /// Every policy of every file, in file order.
    pub policies: Vec<Policy>,
    /// Every budget of every file, in file order.
    pub budgets: Vec<Budget>,
    /// Calendars by name; every file can use every calendar.
    pub calendars: BTreeMap<String, Arc<Calendar>>,
    /// The calendar files the policy files name (`calendars.NAME.file`), as read.
    pub calendar_files: Vec<PathBuf>,
    /// Which files these are, for the audit log.
    pub version: PolicyVersion,
}

impl PolicySet {
    /// Why each calendar may have run out on `today` ([`Calendar::running_out`]), by name.
    pub fn calendars_running_out(&self, today: chrono::NaiveDate) -> Vec<String> {
        let warnings = self.calendars.values().filter_map(|c| c.running_out(today));
        warnings.collect()
    }
}

/// Identifies the exact policy files a decision was made with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PolicyVersion {
    /// sha256 over every file's name and content, hex.
    pub content_hash: String,
    /// `HEAD` of the git work tree the files are in, when they are in one.
    pub git_commit: Option<String>,
}

impl fmt::Display for PolicyVersion {
    /// `sha256:<12 hex>`, plus ` (git <12 hex>)` inside a git work tree.
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "sha256:{}", &self.content_hash[..12])?;
        if let Some(commit) = &self.git_commit {
            write!(f, " (git {})", &commit[..commit.len().min(12)])?;
        }
        Ok(())
    }
}

/// One problem in a policy file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// The file.
    pub file: PathBuf,
    /// Where in the file, when known.
    pub position: Option<Position>,
    /// What is wrong and what was expected.
    pub message: String,
}

impl Problem {
    /// A problem whose message stays on one line: control characters a file's own text brought
    /// in (a newline inside a quoted value, say) are escaped, so each problem is one line.
    pub fn new(file: &Path, position: Option<Position>, message: &str) -> Problem {
        let message = message
            .chars()
            .map(|c| {
                if c.is_control() {
                    c.escape_default().to_string()
                } else {
                    c.to_string()
                }
            })
            .collect();
        Problem {
            file: file.to_path_buf(),
            position,
            message,
        }
    }
}

impl fmt::Display for Problem {
    /// `path:line:col: message`, or `path: message` without a position.
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        match self.position {
            Some(p) => write!(
                f,
                "{}:{}:{}: {}",
                self.file.display(),
                p.line,
                p.column,
                self.message
            ),
            None => write!(f, "{}: {}", self.file.display(), self.message),
        }
    }
}

/// Where a policy is defined, for messages that point people at it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Source {
    /// The policy file.
    pub file: PathBuf,
    /// Line of the policy's `name`.
    pub line: usize,
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "{}:{}", self.file.display(), self.line)
    }
}

/// One policy: which instances it governs and the rules it applies to them.
#[derive(Debug, Clone)]
pub struct Policy {
    /// Unique name across all files.
    pub name: String,
    /// Free text for people.
    pub description: Option<String>,
    /// Higher wins when several policies match an instance.
    pub priority: i64,
    /// Which instances this policy matches.
    pub matcher: Match,
    /// When instances may run; absent = always.
    pub work_hours: Option<WorkHours>,
    /// Stop instances whose GPUs sit idle.
    pub idle: Option<IdleRule>,
    /// Give notice before stopping.
    pub notify: Option<Notify>,
    /// Move interruptible work to spot capacity.
    pub spot: Option<SpotRule>,
    /// How starts go when EC2 has no capacity.
    pub start: Option<StartRule>,
    /// How stops go where a stop may keep charging (Alibaba, Tencent).
    pub stop: Option<StopRule>,
    /// How long a box may run from its last start before it is stopped, busy or not.
    pub runtime: Option<RuntimeLimit>,
    /// How an Auto Scaling group it governs is scaled down around protected members.
    pub group: Option<GroupRule>,
    /// What becomes of a box that stays stopped a long time.
    pub stopped: Option<StoppedRule>,
    /// Decide and audit, but never act.
    pub dry_run: bool,
    /// Where the policy is written.
    pub source: Source,
}

/// Which instances a policy matches; every given criterion must hold.
#[derive(Debug, Clone, Default)]
pub struct Match {
    /// Regions the instance may be in; absent = any.
    pub regions: Option<Vec<String>>,
    /// Tags the instance must carry.
    pub tags: BTreeMap<String, TagMatch>,
    /// Instance type globs (`g5.*`); absent = any.
    pub instance_types: Option<Vec<TypeGlob>>,
}

impl Match {
    /// Whether a box in `region` of `instance_type`, whose tags `tag` looks up, matches.
    pub fn matches<'t>(
        &self,
        region: &str,
        instance_type: &str,
        tag: impl Fn(&str) -> Option<&'t str>,
    ) -> bool {
        let region_ok = self
            .regions
            .as_ref()
            .is_none_or(|r| r.iter().any(|x| x == region));
        let tags_ok = self.tags.iter().all(|(key, want)| match (want, tag(key)) {
            (_, None) => false,
            (TagMatch::Present, Some(_)) => true,
            (TagMatch::Equals(v), Some(have)) => v == have,
        });
        let type_ok = self
            .instance_types
            .as_ref()
            .is_none_or(|g| g.iter().any(|g| g.matches(instance_type)));
        region_ok && tags_ok && type_ok
    }
}

/// What a tag in `match.tags` requires.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TagMatch {
    /// `"*"`: the key is present, with any value.
    Present,
    /// The tag has exactly this value.
    Equals(String),
}

/// An instance type pattern with `*` and `?` wildcards.
#[derive(Debug, Clone)]
pub struct TypeGlob {
    /// The pattern as written.
    pub pattern: String,
    glob: WildMatch,
}

impl TypeGlob {
    /// A glob for `pattern`.
    pub fn new(pattern: &str) -> Self {
        TypeGlob {
            pattern: pattern.to_string(),
            glob: WildMatch::new(pattern),
        }
    }

    /// Whether `instance_type` matches.
    pub fn matches(&self, instance_type: &str) -> bool {
        self.glob.matches(instance_type)
    }
}

/// What to do with a running instance outside work hours.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OutsideHours {
    /// Stop it.
    Stop,
    /// Hibernate it (EC2 falls back to a stop when the instance can't hibernate).
    Hibernate,
    /// Leave it running (work hours then only drive starts and idle rules).
    None,
}

/// Which stopped instances to start when work hours open.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StartAtOpen {
    /// Only those whose last stop was ebb's, before the window opened.
    StoppedByEbb,
    /// Every stopped matching instance, once per window.
    All,
    /// None.
    Never,
}

impl StartAtOpen {
    /// The name used in policy files.
    pub fn as_str(self) -> &'static str {
        match self {
            StartAtOpen::StoppedByEbb => "stopped-by-ebb",
            StartAtOpen::All => "all",
            StartAtOpen::Never => "never",
        }
    }
}

/// When instances may run, and what happens at the edges.
#[derive(Debug, Clone)]
pub struct WorkHours {
    /// The windows, in the policy's zone.
    pub schedule: Schedule,
    /// What to do with running instances outside hours.
    pub outside_hours: OutsideHours,
    /// What to start at the opening.
    pub start_at_open: StartAtOpen,
    /// Whether a busy GPU delays the stop.
    pub busy_defers_stop: bool,
    /// The longest delay after the close; absent = while busy.
    pub max_defer: Option<Duration>,
    /// How long before each opening stopped instances are started, so that they are running
    /// at the opening; nothing is stopped for being outside hours meanwhile. Zero: at the
    /// opening.
    pub start_ahead: Duration,
    /// What becomes of an instance a person started outside work hours.
    pub late_start: LateStart,
}

/// What becomes of an instance a person started outside work hours (`work_hours.late_start`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LateStart {
    /// Not stopped for being outside hours until it has gone idle, counted from its start: for
    /// the idle rule's `for`, or `idle_for` (default [`LATE_START_IDLE_FOR`]) in a policy
    /// without an idle rule.
    KeepUntilIdle {
        /// How long it must be idle, as written (`late_start: {idle_for: 2h}`).
        idle_for: Option<Duration>,
    },
    /// Stopped like any running instance outside hours.
    Enforce,
}

/// How long a late start must be idle before it is stopped, in a policy without an idle rule
/// and without `late_start.idle_for`.
pub const LATE_START_IDLE_FOR: Duration = Duration::hours(1);

/// How an unknown GPU utilisation counts for the idle rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MissingMetrics {
    /// Unknown is busy: no stop.
    Busy,
    /// Unknown is idle: stop unless a sample says busy.
    Idle,
}

/// When the idle rule applies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IdleWhen {
    /// At any time.
    Always,
    /// Only outside work hours.
    OutsideHours,
}

/// What the idle rule does to an idle instance.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IdleAction {
    /// Stop it.
    Stop,
    /// Hibernate it.
    Hibernate,
}

/// Stop instances whose GPUs have been idle for a while.
#[derive(Debug, Clone)]
pub struct IdleRule {
    /// Utilisation threshold in percent; every sample must be below it.
    pub gpu_below: f64,
    /// GPU memory threshold, MiB: when set, every sample must also hold less than this on its
    /// fullest GPU (a notebook holding a model but computing nothing is not idle).
    pub gpu_memory_below: Option<u32>,
    /// How long the GPUs must have been below the threshold.
    pub window: Duration,
    /// No idle stop this soon after the instance started.
    pub grace_after_start: Duration,
    /// How a window not covered by data counts.
    pub missing_metrics: MissingMetrics,
    /// When the rule applies.
    pub when: IdleWhen,
    /// What to do.
    pub action: IdleAction,
    /// No idle stop when the next opening is closer than this and the instance's type had a
    /// start refused for lack of capacity in its region within `capacity_memory`: stopping it
    /// for so short a gap risks not getting it back.
    pub min_gap: Option<Duration>,
    /// How far back a start refused for lack of capacity counts for `min_gap`.
    pub capacity_memory: Duration,
    /// What else shows a person using the instance (`activity`): idle only when none of them
    /// showed use either, and one that cannot be read counts as in use.
    pub activity: Vec<Signal>,
}

/// A source of "this instance was in use at time t", beside its GPUs.
#[derive(Debug, Clone, PartialEq)]
pub struct Signal {
    /// What reasons, explain and replays call it: `name`, or the kind.
    pub name: String,
    /// Where its readings come from.
    pub source: SignalSource,
}

/// What a jupyter signal's `url` names its host, which each box's private IP replaces.
pub const PRIVATE_IP: &str = "{private_ip}";

/// `template`, a jupyter signal's `url`, with `ip` as its host.
pub fn jupyter_url(template: &str, ip: core::net::IpAddr) -> String {
    let host = match ip {
        core::net::IpAddr::V6(_) => format!("[{ip}]"),
        core::net::IpAddr::V4(_) => ip.to_string(),
    };
    template.replacen(PRIVATE_IP, &host, 1)
}

/// Where an activity signal's readings come from.
#[derive(Debug, Clone, PartialEq)]
pub enum SignalSource {
    /// The instance says it is in use: its tag `ebb:active-at` (RFC 3339), which keeps it while
    /// younger than `max_age`.
    Heartbeat {
        /// How long a heartbeat keeps the instance.
        max_age: Duration,
    },
    /// The instance's Jupyter Server, at its `ebb:jupyter` tag or else at `url` with the
    /// instance's private IP: in use while a kernel is busy, and at the last activity of a
    /// kernel or terminal.
    Jupyter {
        /// Where a box's server is, its host [`PRIVATE_IP`]
        /// (`http://{private_ip}:8888`), for boxes without the tag.
        url: Option<String>,
    },
    /// A PromQL query of the policy's own, one series per instance (labelled as the GPU
    /// source's): in use at each reading above `active_above`.
    Prometheus {
        /// The query.
        query: String,
        /// In use above this.
        active_above: f64,
    },
    /// A CloudWatch metric of the instance (its `InstanceId` dimension, which ebb adds, and
    /// `dimensions`), read as its `Maximum` over each five-minute period: in use at each
    /// reading above `active_above`.
    Cloudwatch {
        /// The metric's namespace (`CWAgent`, `AWS/EC2`).
        namespace: String,
        /// The metric's name (`procstat_lookup_pid_count`).
        metric: String,
        /// Its dimensions beside `InstanceId`, as the agent publishes them.
        dimensions: BTreeMap<String, String>,
        /// In use above this.
        active_above: f64,
    },
}

impl SignalSource {
    /// The kind, as policies write it.
    pub fn kind(&self) -> &'static str {
        match self {
            SignalSource::Heartbeat { .. } => "heartbeat",
            SignalSource::Jupyter { .. } => "jupyter",
            SignalSource::Prometheus { .. } => "prometheus",
            SignalSource::Cloudwatch { .. } => "cloudwatch",
        }
    }

    /// Above what a reading of a metric shows use; `None` for a signal that gives no values.
    pub fn active_above(&self) -> Option<f64> {
        match self {
            SignalSource::Prometheus { active_above, .. }
            | SignalSource::Cloudwatch { active_above, .. } => Some(*active_above),
            SignalSource::Heartbeat { .. } | SignalSource::Jupyter { .. } => None,
        }
    }
}

/// The default `idle.capacity_memory`.
pub const DEFAULT_CAPACITY_MEMORY: Duration = Duration::days(7);
/// The longest `idle.capacity_memory`: how far back ebb looks for refused starts.
pub const MAX_CAPACITY_MEMORY: Duration = Duration::days(30);

/// Notice before a stop.
#[derive(Debug, Clone)]
pub struct Notify {
    /// How long before the stop the notice goes out.
    pub before: Duration,
}

/// The default `runtime.notify_before`.
pub const DEFAULT_RUNTIME_NOTICE: Duration = Duration::hours(1);

/// How a group the policy governs treats members something protects (an override,
/// `ebb:keep-until`, `ebb:skip`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GroupRule {
    /// Scale the group down around them: protect them from the group's scale-in, then set its
    /// size to what they are. Without it a protected member holds the whole scale-down.
    pub protect_members: bool,
}

/// Hard limits on a run, for work that runs away: past one the box is stopped after its notice
/// whether its GPUs are busy or not. An override or `ebb:keep-until` keeps it.
#[derive(Debug, Clone)]
pub struct RuntimeLimit {
    /// The longest run from the last start.
    pub max: Option<Duration>,
    /// How long before a stop the notice goes out.
    pub notify_before: Duration,
    /// The longest a box may stay busy without its `ebb:checkpoint-at` tag moving: work that is
    /// not saving itself.
    pub max_busy_without_checkpoint: Option<Duration>,
}

/// Move interruptible work to spot capacity.
#[derive(Debug, Clone)]
pub struct SpotRule {
    /// Least saving, as a fraction (0.4 = 40 %), of spot against on-demand.
    pub min_savings: f64,
    /// How fresh the `ebb:checkpoint-at` tag must be.
    pub checkpoint_max_age: Duration,
    /// Acceptable replacement types; empty = the instance's own type.
    pub instance_types: Vec<String>,
    /// Interruptions within 24 h after which ebb falls back to on-demand.
    pub max_interruptions: u32,
    /// How long the stopped original is kept for rollback.
    pub keep_original_for: Duration,
    /// How long the image is kept after the migration ended while it is the only copy of the
    /// workload's disks (the original gone).
    pub keep_image_for: Duration,
    /// A pool (type and zone) interrupted this recently is not launched into.
    pub avoid_reclaimed_for: Duration,
    /// Whether EC2's Spot Placement Scores inform the chance of an interruption.
    pub placement_scores: bool,
    /// How long a migration that fell back to on-demand (no capacity or acceptable offer, or
    /// `max_interruptions` passed) runs there before spot is tried again.
    pub back_to_spot_after: Duration,
}

/// The default `spot.back_to_spot_after`.
pub const DEFAULT_BACK_TO_SPOT_AFTER: Duration = Duration::hours(24);

/// How a start refused for lack of capacity goes on.
#[derive(Debug, Clone)]
pub struct StartRule {
    /// Instance types to change a stopped instance to, in order, when EC2 has no capacity for
    /// its own: the next one with capacity is started.
    pub fallback_types: Vec<String>,
    /// Whether an instance ebb changed to one of the fallback types is changed back to its own
    /// type at a later start (and falls back again if its own still has no capacity).
    pub restore_type: bool,
    /// Whether an instance whose start EC2 refused for lack of capacity within the capacity
    /// memory (`idle.capacity_memory`, by default 7 days) starts into a targeted On-Demand
    /// Capacity Reservation made for it at its start, cancelled once it runs.
    pub reserve_capacity: bool,
}

/// How stops go on clouds where a stop may keep the instance billed.
#[derive(Debug, Clone, Default)]
pub struct StopRule {
    /// Stop an instance even when its family cannot stop without charge (the families file:
    /// local disks, persistent memory), where the stop keeps it billed; otherwise such a stop
    /// is refused (`charging_stop_refused`).
    pub allow_charging_stop: bool,
    /// What to do with a box that runs in a capacity reservation held outside ebb, whose
    /// stop saves nothing while the reservation lasts.
    pub in_reservation: InReservation,
}

/// `stopped`: a box stopped this long, by ebb or by a person, is reclaimed: imaged with all its
/// volumes, the image proven, then terminated, after a notice the policy's `notify.before`
/// ahead. Only `reclaim: image` is built.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StoppedRule {
    /// How long a box must have been stopped.
    pub reclaim_after: Duration,
    /// How long a box restored from its image must have been up before the image (and its
    /// snapshots) are deleted; `None`: the image is kept until a person deletes it.
    pub keep_image_for: Option<Duration>,
}

/// `stop.in_reservation`: whether a box running in a capacity reservation someone else holds
/// (paid whether it runs or not) is stopped.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum InReservation {
    /// Not stopped (`reserved_no_saving`): the stop would save nothing.
    #[default]
    Keep,
    /// Stopped anyway, to free the capacity for other boxes.
    Stop,
}

/// The idle threshold in percent when a policy has no idle rule.
pub const DEFAULT_BUSY_THRESHOLD: f64 = 5.0;

impl Policy {
    /// The GPU utilisation (percent) at or above which an instance counts as busy.
    pub fn busy_threshold(&self) -> f64 {
        self.idle
            .as_ref()
            .map_or(DEFAULT_BUSY_THRESHOLD, |i| i.gpu_below)
    }

    /// How long an instance a person started outside work hours must be idle before it is
    /// stopped for being outside hours, and how a window without enough data counts; `None`
    /// when such a start is not kept (no work hours, `outside_hours: none`, or
    /// `late_start: enforce`).
    pub fn late_start_idle(&self) -> Option<(Duration, MissingMetrics)> {
        let wh = self.work_hours.as_ref()?;
        let LateStart::KeepUntilIdle { idle_for } = wh.late_start else {
            return None;
        };
        if wh.outside_hours == OutsideHours::None {
            return None;
        }
        Some(match &self.idle {
            Some(rule) => (rule.window, rule.missing_metrics),
            None => (
                idle_for.unwrap_or(LATE_START_IDLE_FOR),
                MissingMetrics::Busy,
            ),
        })
    }
}
