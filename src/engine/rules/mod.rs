//! The rules, applied to one instance under its governing policy.
//!
//! [`Context::decide`] finds the governing policy (`matching`) and hands the instance to an
//! [`Eval`], which applies the policy's rules: starts at the opening (`start`), stops outside
//! work hours with their notices (`stop`), the idle rule (`idle`) and spot moves (`spot`), each
//! subject to what protects an instance (`protection`).

mod eval;
mod idle;
mod matching;
mod protection;
mod spot;
mod start;
mod stop;
mod text;

pub use protection::tags_forbid_stop;

use super::{Action, Code, Decision, InstanceFacts, Prior};
use crate::fleet::{Fleet, Instance, InstanceState, Lifecycle, Prices};
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
    gpu_unread: &'a HashMap<String, Arc<str>>,
    prior: &'a Prior,
}

/// The outcome of a rule before it becomes a [`Decision`].
pub(super) struct Verdict {
    action: Action,
    code: Code,
    reason: String,
    stop_at: Option<DateTime<Utc>>,
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
            gpu_unread: &fleet.gpu_unread,
            prior,
        }
    }

    /// Decides for one instance.
    pub fn decide(&self, inst: &Instance, trace: &mut Trace) -> Decision {
        let decision = |policy: Option<&Policy>, v: Verdict| Decision {
            instance: inst.id.clone(),
            region: inst.region.clone(),
            action: v.action,
            policy: policy.map(|p| p.name.clone()),
            code: v.code,
            reason: v.reason,
            dry_run: policy.is_some_and(|p| p.dry_run),
            stop_at: v.stop_at,
        };
        let (first, policy) = match governing(self.policies, inst, trace) {
            Ok(governing) => governing,
            Err(v) => return decision(None, withdrawn_notice(v, inst, trace)),
        };
        trace.note(|| format!("governing policy: {}", policy.name));
        let eval = Eval {
            ctx: self,
            policy,
            status: self.statuses[first],
            inst,
            facts: self.prior.facts(&inst.id),
        };
        let v = one_time_spot(eval.run(trace), inst, trace);
        decision(Some(policy), withdrawn_notice(v, inst, trace))
    }
}

/// The policy that governs `inst`, with its position in `policies`: the matching one of highest
/// priority. Otherwise the verdict: tagged `ebb:skip=true`, no policy matches, or several match
/// at the top priority (a conflict).
pub(super) fn governing<'p>(
    policies: &'p PolicySet,
    inst: &Instance,
    trace: &mut Trace,
) -> Result<(usize, &'p Policy), Verdict> {
    if inst.tag(SKIP_TAG) == Some("true") {
        trace.note(|| "tag ebb:skip=true: ebb leaves this instance alone".into());
        return Err(verdict(
            Action::None,
            Code::SkipTag,
            "tagged ebb:skip=true".into(),
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
            "no policy matches".into(),
        ));
    };
    if top.len() > 1 {
        let names: Vec<&str> = top
            .iter()
            .map(|&i| policies.policies[i].name.as_str())
            .collect();
        let priority = policies.policies[first].priority;
        let reason = format!(
            "policies {} all match at priority {priority}; set different priorities",
            names.join(", ")
        );
        trace.note(|| format!("conflict: {reason}"));
        return Err(verdict(Action::None, Code::Conflict, reason));
    }
    Ok((first, &policies.policies[first]))
}

/// Nothing to do for a running instance that carries an `ebb:stop-at` notice becomes taking
/// the notice back, unless the notice still stands (its stop waits for it): a notice people
/// read must not announce a stop that will not come, such as one left from before the last
/// stop, or one an override has called off.
fn withdrawn_notice(v: Verdict, inst: &Instance, trace: &mut Trace) -> Verdict {
    let Some(stop_at) = inst.tag(STOP_AT_TAG) else {
        return v;
    };
    // A notice waiting for its time, or a stop deferred while the GPU is busy (or unread),
    // still announces a stop that comes.
    let stands = matches!(
        v.code,
        Code::NoticePending | Code::BusyDeferred | Code::MetricsUnreadable
    );
    if v.action != Action::None || stands || inst.state != InstanceState::Running {
        return v;
    }
    trace.note(|| format!("the notice {STOP_AT_TAG}={stop_at} no longer holds"));
    verdict(
        Action::WithdrawNotice,
        Code::NoticeWithdrawn,
        format!(
            "{}; the notice of a stop at {stop_at} no longer holds: {STOP_AT_TAG} removed",
            v.reason
        ),
    )
}

/// A stop (or its notice) of a spot migration's one-time spot instance becomes no action.
fn one_time_spot(mut v: Verdict, inst: &Instance, trace: &mut Trace) -> Verdict {
    if let (Action::Stop | Action::Hibernate | Action::Notify, Lifecycle::Spot, Some(id)) =
        (v.action, inst.lifecycle, inst.tag(MIGRATION_TAG))
    {
        // EC2 refuses to stop a one-time spot instance, which is what migrations launch.
        trace.note(|| format!("would {}, but it is a one-time spot instance", v.action));
        v = verdict(
                Action::None,
                Code::SpotCannotStop,
                format!(
                    "{} ({}), but it is the one-time spot instance of spot migration {id}, which EC2 cannot stop; it runs until reclaimed or terminated",
                    v.action, v.reason
                ),
            );
    }
    v
}
