//! The rules, applied to one instance under its governing policy.
//!
//! [`Context::decide`] finds the governing policy (`matching`) and hands the instance to an
//! [`Eval`], which applies the policy's rules in their order (`order`): starts at the opening
//! (`start`), the runtime limits (`runtime`), stops outside work hours with their notices
//! (`stop`) unless a person started the instance after the close (`late_start`), the idle rule
//! (`idle`) and spot moves (`spot`), with what a spent budget asks (`budget`: starts refused,
//! the idle rule at any hour, or a stop), each subject to what protects an instance
//! (`protection`); then what the instance's billing allows (`billing`: no stop of a
//! subscription or of a family that cannot stop without charge, nothing on an instance being
//! recycled), and an instance something else owns is left alone whatever they asked (`owned`).

mod activity;
mod billing;
mod budget;
mod early;
mod eval;
mod idle;
mod late_start;
mod lead;
mod matching;
mod order;
mod owned;
mod protection;
mod runtime;
mod spot;
mod start;
mod stop;
mod text;

pub use activity::last_uses;
pub(crate) use activity::{activity_of, Activity};
pub use owned::owned_code;
pub use protection::tags_forbid_stop;
pub(crate) use protection::tags_protect;

use super::{Action, Brief, Code, Decision, InstanceFacts, Prior};
use crate::fleet::activity::ActivityReadings;
use crate::fleet::{Fleet, Instance, InstanceState, Levers, Lifecycle, Prices};
use crate::names::{MIGRATION_TAG, SKIP_TAG, STOP_AT_TAG};
use crate::policy::{Policy, PolicySet};
use crate::schedule::ScheduleStatus;
use chrono::{DateTime, Duration, Utc};
use eval::Eval;
use matching::mismatch;
use std::collections::HashMap;
use std::sync::Arc;

/// How far back a sample makes an instance busy, how large a gap in the samples may be, and how
/// old the newest may be, for the idle rule's coverage.
pub const RECENT: Duration = Duration::minutes(10);

/// How much later than its announced time a stop may still use a notice; after that the notice
/// is stale and a new one goes out.
const NOTICE_SLACK: Duration = Duration::minutes(10);

/// A checkpoint tag this far in the future is taken as a clock error, not as fresh.
const CLOCK_SKEW: Duration = Duration::minutes(5);

/// Collects a readable account of every verdict, for `ebb explain`; off when deciding in bulk.
pub enum Trace<'a> {
    /// Record nothing.
    Off,
    /// Record each line.
    On(&'a mut Vec<String>),
}

impl Trace<'_> {
    fn note(&mut self, line: impl FnOnce() -> String) {
        if let Trace::On(lines) = self {
            lines.push(line());
        }
    }
}

/// The inputs of one decision pass, with each policy's schedule evaluated once.
pub struct Context<'a> {
    now: DateTime<Utc>,
    policies: &'a PolicySet,
    statuses: Vec<Option<ScheduleStatus>>,
    prices: &'a Prices,
    levers: Levers,
    gpu_unread: &'a HashMap<String, Arc<str>>,
    activity: &'a ActivityReadings,
    prior: &'a Prior,
    /// Whether verdicts carry their reason text; without it (a replay, which prints none) they
    /// are the same verdicts with an empty reason.
    reasons: bool,
    /// Each policy's early start at its next opening, by position in the set (empty when the
    /// buckets are not known).
    early: Vec<Option<lead::Early>>,
}

/// The outcome of a rule before it becomes a [`Decision`].
pub(super) struct Verdict {
    action: Action,
    code: Code,
    reason: String,
    stop_at: Option<DateTime<Utc>>,
}

/// The reason text `text` makes when `reasons` are written, otherwise an empty one (which
/// allocates nothing).
fn reason(reasons: bool, text: impl FnOnce() -> String) -> String {
    match reasons {
        true => text(),
        false => String::new(),
    }
}

fn verdict(action: Action, code: Code, reason: String) -> Verdict {
    Verdict {
        action,
        code,
        reason,
        stop_at: None,
    }
}

impl<'a> Context<'a> {
    /// Evaluates every policy's schedule at `now`.
    pub fn new(
        now: DateTime<Utc>,
        policies: &'a PolicySet,
        fleet: &'a Fleet,
        prior: &'a Prior,
    ) -> Self {
        let statuses = policies
            .policies
            .iter()
            .map(|p| p.work_hours.as_ref().map(|wh| wh.schedule.status(now)))
            .collect();
        Context {
            now,
            policies,
            statuses,
            prices: &fleet.prices,
            levers: fleet.levers,
            gpu_unread: &fleet.gpu_unread,
            activity: &fleet.activity,
            prior,
            reasons: true,
            early: Vec::new(),
        }
        .with_early_starts(fleet)
    }

    /// A pass that writes no reasons, with `statuses` the schedules' status at `now` (one for
    /// each policy, `None` for one without work hours), as [`Context::new`] works them out.
    pub fn without_reasons(
        now: DateTime<Utc>,
        policies: &'a PolicySet,
        statuses: Vec<Option<ScheduleStatus>>,
        fleet: &'a Fleet,
        prior: &'a Prior,
    ) -> Self {
        Context {
            now,
            policies,
            statuses,
            prices: &fleet.prices,
            levers: fleet.levers,
            gpu_unread: &fleet.gpu_unread,
            activity: &fleet.activity,
            prior,
            reasons: false,
            early: Vec::new(),
        }
        .with_early_starts(fleet)
    }

    /// With each policy's early start worked out over `fleet`, when the buckets are known.
    fn with_early_starts(mut self, fleet: &Fleet) -> Self {
        if let Some(rates) = self.prior.start_rates() {
            self.early = early::plan(&self, &fleet.instances, rates);
        }
        self
    }

    /// The reason text `text` makes, or an empty one when this pass writes no reasons.
    pub(super) fn text(&self, text: impl FnOnce() -> String) -> String {
        reason(self.reasons, text)
    }

    /// Decides for one instance.
    pub fn decide(&self, inst: &Instance, trace: &mut Trace) -> Decision {
        let (policy, v) = self.verdict(inst, trace);
        Decision {
            instance: inst.id.clone(),
            region: inst.region.clone(),
            action: v.action,
            policy: policy.map(|p| p.name.clone()),
            code: v.code,
            reason: v.reason,
            dry_run: policy.is_some_and(|p| p.dry_run),
            stop_at: v.stop_at,
        }
    }

    /// Decides for one instance in a pass that writes no reasons, without its names, under the
    /// policy at `governing` in the set ([`governing_position`] finds it), or with the code of
    /// why none governs.
    pub fn brief(&self, inst: &Instance, governing: Result<usize, Code>) -> Brief {
        let governing = governing.map_err(|code| verdict(Action::None, code, String::new()));
        let (_, v) = self.verdict_under(inst, governing, &mut Trace::Off);
        Brief {
            action: v.action,
            code: v.code,
            stop_at: v.stop_at,
        }
    }

    /// The governing policy of `inst` and its verdict.
    fn verdict(&self, inst: &Instance, trace: &mut Trace) -> (Option<&'a Policy>, Verdict) {
        let governing = governing(self.policies, inst, self.reasons, trace).map(|(i, _)| i);
        self.verdict_under(inst, governing, trace)
    }

    /// The verdict for `inst` under the policy at `governing`, or, when none governs, the
    /// verdict that says why.
    fn verdict_under(
        &self,
        inst: &Instance,
        governing: Result<usize, Verdict>,
        trace: &mut Trace,
    ) -> (Option<&'a Policy>, Verdict) {
        let first = match governing {
            Ok(first) => first,
            Err(v) => return (None, withdrawn_notice(v, inst, self, trace)),
        };
        let policy = &self.policies.policies[first];
        trace.note(|| format!("governing policy: {}", policy.name));
        let eval = Eval {
            ctx: self,
            policy,
            status: self.statuses[first],
            inst,
            facts: self.prior.facts(&inst.id),
            early: self.early.get(first).copied().flatten(),
        };
        let v = one_time_spot(eval.run(trace), inst, self, trace);
        let v = billing::allowed(v, inst, policy, self, trace);
        let v = owned::owned(v, inst, self, trace);
        (Some(policy), withdrawn_notice(v, inst, self, trace))
    }
}

/// The position in `policies` of the policy that governs `inst`, or the code of why none does:
/// [`governing`] without reasons. It depends only on the instance's tags, region and type.
pub fn governing_position(policies: &PolicySet, inst: &Instance) -> Result<usize, Code> {
    governing(policies, inst, false, &mut Trace::Off)
        .map(|(position, _)| position)
        .map_err(|v| v.code)
}

/// The policy that governs `inst`, with its position in `policies`: the matching one of highest
/// priority. Otherwise the verdict: tagged `ebb:skip=true`, no policy matches, or several match
/// at the top priority (a conflict).
/// `reasons`: whether the verdict carries its reason text.
pub(super) fn governing<'p>(
    policies: &'p PolicySet,
    inst: &Instance,
    reasons: bool,
    trace: &mut Trace,
) -> Result<(usize, &'p Policy), Verdict> {
    if inst.tag(SKIP_TAG) == Some("true") {
        trace.note(|| "tag ebb:skip=true: ebb leaves this instance alone".into());
        return Err(verdict(
            Action::None,
            Code::SkipTag,
            reason(reasons, || "tagged ebb:skip=true".into()),
        ));
    }
    let mut top: Vec<usize> = Vec::new();
    for (i, p) in policies.policies.iter().enumerate() {
        match mismatch(p, inst) {
            Some(why) => trace.note(|| format!("policy {} does not match: {why}", p.name)),
            None => {
                trace.note(|| format!("policy {} matches (priority {})", p.name, p.priority));
                let best = top.first().map(|&j| policies.policies[j].priority);
                match best {
                    Some(b) if p.priority < b => {}
                    Some(b) if p.priority == b => top.push(i),
                    _ => top = vec![i],
                }
            }
        }
    }
    let Some(&first) = top.first() else {
        return Err(verdict(
            Action::None,
            Code::NoPolicy,
            reason(reasons, || "no policy matches".into()),
        ));
    };
    if top.len() > 1 {
        let why = reason(reasons, || conflict(policies, &top));
        trace.note(|| format!("conflict: {why}"));
        return Err(verdict(Action::None, Code::Conflict, why));
    }
    Ok((first, &policies.policies[first]))
}

/// Why `top`, the policies matching at the top priority, are a conflict.
fn conflict(policies: &PolicySet, top: &[usize]) -> String {
    let names: Vec<&str> = top
        .iter()
        .map(|&i| policies.policies[i].name.as_str())
        .collect();
    let priority = policies.policies[top[0]].priority;
    format!(
        "policies {} all match at priority {priority}; set different priorities",
        names.join(", ")
    )
}

/// Nothing to do for a running instance that carries an `ebb:stop-at` notice becomes taking
/// the notice back, unless the notice still stands (its stop waits for it): a notice people
/// read must not announce a stop that will not come, such as one left from before the last
/// stop, or one an override has called off.
fn withdrawn_notice(v: Verdict, inst: &Instance, ctx: &Context, trace: &mut Trace) -> Verdict {
    let Some(stop_at) = inst.tag(STOP_AT_TAG) else {
        return v;
    };
    // A notice waiting for its time, or a stop deferred while the GPU is busy (or unread),
    // still announces a stop that comes.
    let stands = matches!(
        v.code,
        Code::NoticePending | Code::BusyDeferred | Code::MetricsUnreadable
    );
    // An instance being recycled is left alone, notice and all.
    let alone = v.code == Code::RecyclingWarned;
    if v.action != Action::None || stands || alone || inst.state != InstanceState::Running {
        return v;
    }
    trace.note(|| format!("the notice {STOP_AT_TAG}={stop_at} no longer holds"));
    verdict(
        Action::WithdrawNotice,
        Code::NoticeWithdrawn,
        ctx.text(|| {
            format!(
                "{}; the notice of a stop at {stop_at} no longer holds: {STOP_AT_TAG} removed",
                v.reason
            )
        }),
    )
}

/// A stop (or its notice) of a spot migration's one-time spot instance becomes no action.
fn one_time_spot(mut v: Verdict, inst: &Instance, ctx: &Context, trace: &mut Trace) -> Verdict {
    if let (Action::Stop | Action::Hibernate | Action::Notify, Lifecycle::Spot, Some(id)) =
        (v.action, inst.lifecycle, inst.tag(MIGRATION_TAG))
    {
        // EC2 refuses to stop a one-time spot instance, which is what migrations launch.
        trace.note(|| format!("would {}, but it is a one-time spot instance", v.action));
        v = verdict(
                Action::None,
                Code::SpotCannotStop,
                ctx.text(|| format!(
                    "{} ({}), but it is the one-time spot instance of spot migration {id}, which EC2 cannot stop; it runs until reclaimed or terminated",
                    v.action, v.reason
                )),
            );
    }
    v
}
