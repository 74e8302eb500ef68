//! The rules, applied to one instance under its governing policy.

use super::{Action, Code, Decision, InstanceFacts, Prior};
use crate::fleet::{Fleet, Instance, InstanceState, Lifecycle, Prices};
use crate::policy::{
    IdleAction, IdleRule, IdleWhen, MissingMetrics, OutsideHours, Policy, PolicySet, SpotRule,
    StartAtOpen, TagMatch, WorkHours,
};
use crate::names::{
    CHECKPOINT_AT_TAG, INTERRUPTIBLE_TAG, KEEP_UNTIL_TAG, MIGRATING_TAG, MIGRATION_TAG, SKIP_TAG,
};
use crate::schedule::ScheduleStatus;
use chrono::{DateTime, Duration, Utc};
use chrono_tz::Tz;

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
    prior: &'a Prior,
}

/// The outcome of a rule before it becomes a [`Decision`].
struct Verdict {
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

/// Formats `t` in `tz` for reasons: `20:00 Asia/Shanghai`, with the date when it is not the
/// local date of `now`.
pub fn local(t: DateTime<Utc>, tz: Tz, now: DateTime<Utc>) -> String {
    let lt = t.with_timezone(&tz);
    if lt.date_naive() == now.with_timezone(&tz).date_naive() {
        format!("{} {}", lt.format("%H:%M"), tz.name())
    } else {
        format!("{} {}", lt.format("%Y-%m-%d %H:%M"), tz.name())
    }
}

/// A duration in words: `45m`, `4h`, `1h30m`, `2d3h`.
pub fn span(d: Duration) -> String {
    let mins = d.num_minutes();
    let (days, hours, m) = (mins / 1440, mins / 60 % 24, mins % 60);
    let mut out = String::new();
    if days > 0 {
        out += &format!("{days}d");
    }
    if hours > 0 {
        out += &format!("{hours}h");
    }
    if m > 0 || out.is_empty() {
        out += &format!("{m}m");
    }
    out
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
        if inst.tag(SKIP_TAG) == Some("true") {
            trace.note(|| "tag ebb:skip=true: ebb leaves this instance alone".into());
            return decision(
                None,
                verdict(Action::None, Code::SkipTag, "tagged ebb:skip=true".into()),
            );
        }
        let mut top: Vec<usize> = Vec::new();
        for (i, p) in self.policies.policies.iter().enumerate() {
            match mismatch(p, inst) {
                Some(why) => trace.note(|| format!("policy {} does not match: {why}", p.name)),
                None => {
                    trace.note(|| format!("policy {} matches (priority {})", p.name, p.priority));
                    let best = top.first().map(|&j| self.policies.policies[j].priority);
                    match best {
                        Some(b) if p.priority < b => {}
                        Some(b) if p.priority == b => top.push(i),
                        _ => top = vec![i],
                    }
                }
            }
        }
        let Some(&first) = top.first() else {
            return decision(
                None,
                verdict(Action::None, Code::NoPolicy, "no policy matches".into()),
            );
        };
        if top.len() > 1 {
            let names: Vec<&str> = top
                .iter()
                .map(|&i| self.policies.policies[i].name.as_str())
                .collect();
            let priority = self.policies.policies[first].priority;
            let reason = format!(
                "policies {} all match at priority {priority}; set different priorities",
                names.join(", ")
            );
            trace.note(|| format!("conflict: {reason}"));
            return decision(None, verdict(Action::None, Code::Conflict, reason));
        }
        let policy = &self.policies.policies[first];
        trace.note(|| format!("governing policy: {}", policy.name));
        let eval = Eval {
            ctx: self,
            policy,
            status: self.statuses[first],
            inst,
            facts: self.prior.facts(&inst.id),
        };
        let mut v = eval.run(trace);
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
        decision(Some(policy), v)
    }
}

/// Why a policy does not match an instance; formatted only when someone asks (`explain`), since
/// most policies do not match most instances.
enum Mismatch<'a> {
    Region(&'a Instance, &'a [String]),
    NoTag(&'a str),
    TagValue(&'a str, &'a str, &'a str),
    Type(&'a Instance, &'a [crate::policy::TypeGlob]),
}

impl std::fmt::Display for Mismatch<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        match self {
            Mismatch::Region(i, regions) => {
                write!(f, "region {} is not in {}", i.region, regions.join(", "))
            }
            Mismatch::NoTag(key) => write!(f, "no tag {key}"),
            Mismatch::TagValue(key, have, want) => write!(f, "tag {key}={have}, wants {want}"),
            Mismatch::Type(i, globs) => {
                let names: Vec<&str> = globs.iter().map(|g| g.pattern.as_str()).collect();
                write!(f, "type {} is not in {}", i.instance_type, names.join(", "))
            }
        }
    }
}

/// Why `policy` does not match `inst`, or `None` when it does.
fn mismatch<'a>(policy: &'a Policy, inst: &'a Instance) -> Option<Mismatch<'a>> {
    let m = &policy.matcher;
    if let Some(regions) = &m.regions {
        if !regions.contains(&inst.region) {
            return Some(Mismatch::Region(inst, regions));
        }
    }
    for (key, want) in &m.tags {
        match (want, inst.tag(key)) {
            (_, None) => return Some(Mismatch::NoTag(key)),
            (TagMatch::Equals(v), Some(have)) if v != have => {
                return Some(Mismatch::TagValue(key, have, v))
            }
            _ => {}
        }
    }
    if let Some(globs) = &m.instance_types {
        if !globs.iter().any(|g| g.matches(&inst.instance_type)) {
            return Some(Mismatch::Type(inst, globs));
        }
    }
    None
}

/// What blocks stops of an instance.
struct Protection {
    code: Code,
    reason: String,
}

/// How a notice counts for a stop.
#[derive(Clone, Copy)]
enum NoticeFor {
    /// A stop at the close of work hours at this instant.
    Close(DateTime<Utc>),
    /// A stop for a reason that holds now (idle): only a recent notice counts.
    Now,
}

/// The evaluation of one instance under its governing policy.
struct Eval<'a> {
    ctx: &'a Context<'a>,
    policy: &'a Policy,
    status: Option<ScheduleStatus>,
    inst: &'a Instance,
    facts: InstanceFacts,
}

impl Eval<'_> {
    fn now(&self) -> DateTime<Utc> {
        self.ctx.now
    }

    fn tz(&self) -> Tz {
        self.policy
            .work_hours
            .as_ref()
            .map_or(Tz::UTC, |wh| wh.schedule.timezone)
    }

    fn at(&self, t: DateTime<Utc>) -> String {
        local(t, self.tz(), self.now())
    }

    fn run(&self, trace: &mut Trace) -> Verdict {
        if let (Some(wh), Some(st)) = (&self.policy.work_hours, self.status) {
            trace.note(|| self.describe_hours(wh, st));
        }
        if let Some(id) = self.inst.tag(MIGRATING_TAG) {
            trace.note(|| {
                format!("tag ebb:migrating={id}: its spot migration acts on it, not the rules")
            });
            return verdict(
                Action::None,
                Code::Migrating,
                format!("spot migration {id} is under way (see ebb migrations)"),
            );
        }
        match self.inst.state {
            InstanceState::Terminated => {
                verdict(Action::None, Code::Terminated, "terminated".into())
            }
            InstanceState::Pending | InstanceState::Stopping | InstanceState::ShuttingDown => {
                verdict(
                    Action::None,
                    Code::InTransition,
                    format!("{}; waiting for it to settle", self.inst.state.as_str()),
                )
            }
            InstanceState::Stopped => self.stopped(trace),
            InstanceState::Running => self.running(trace),
        }
    }

    fn describe_hours(&self, wh: &WorkHours, st: ScheduleStatus) -> String {
        let when = |t: Option<DateTime<Utc>>| t.map_or("beyond the horizon".into(), |t| self.at(t));
        let tz = wh.schedule.timezone.name();
        if st.in_hours {
            format!(
                "work hours ({tz}): open since {}, close {}",
                when(st.since),
                when(st.next)
            )
        } else {
            format!(
                "work hours ({tz}): closed since {}, open {}",
                when(st.since),
                when(st.next)
            )
        }
    }

    fn stopped(&self, trace: &mut Trace) -> Verdict {
        let (Some(wh), Some(st)) = (&self.policy.work_hours, self.status) else {
            return verdict(
                Action::None,
                Code::StoppedNoHours,
                "stopped; the policy has no work hours to start it in".into(),
            );
        };
        if !st.in_hours {
            let closed = st
                .since
                .map_or(String::new(), |t| format!(" (closed {})", self.at(t)));
            return verdict(
                Action::None,
                Code::StoppedOutsideHours,
                format!("stopped, outside work hours{closed}"),
            );
        }
        let opened_text = st.since.map_or("always open".to_string(), |t| {
            format!("opened {}", self.at(t))
        });
        let before_opening = |t: DateTime<Utc>| st.since.is_none_or(|o| t < o);
        let f = self.facts;
        trace.note(|| {
            format!(
                "start_at_open: {}; stopped by ebb at {}, started by ebb at {}, stopped since {}",
                wh.start_at_open.as_str(),
                f.stopped_by_ebb_at.map_or("-".into(), |t| self.at(t)),
                f.started_by_ebb_at.map_or("-".into(), |t| self.at(t)),
                self.inst
                    .state_since
                    .map_or("unknown".into(), |t| self.at(t)),
            )
        });
        let start = |how: &str| {
            verdict(
                Action::Start,
                Code::StartAtOpen,
                format!("work hours {opened_text}; {how}"),
            )
        };
        match (wh.start_at_open, f.stopped_by_ebb_at) {
            (StartAtOpen::Never, _) => verdict(
                Action::None,
                Code::StartNever,
                "stopped; start_at_open is never".into(),
            ),
            (_, Some(s)) if !before_opening(s) => verdict(
                Action::None,
                Code::StoppedInWindow,
                format!(
                    "ebb stopped it at {} inside this window ({opened_text}); it starts at the next opening",
                    self.at(s)
                ),
            ),
            (_, Some(s)) => start(&format!("ebb stopped it at {}", self.at(s))),
            (StartAtOpen::StoppedByEbb, None) => verdict(
                Action::None,
                Code::StoppedByPerson,
                "stopped, not by ebb; a person's stop sticks".into(),
            ),
            (StartAtOpen::All, None) => match (f.started_by_ebb_at, self.inst.state_since) {
                (Some(s), _) if !before_opening(s) => verdict(
                    Action::None,
                    Code::StartedThisWindow,
                    format!("ebb already started it at {} in this window", self.at(s)),
                ),
                (_, Some(t)) if before_opening(t) => {
                    start(&format!("start_at_open is all; stopped since {}", self.at(t)))
                }
                (_, Some(t)) => verdict(
                    Action::None,
                    Code::StoppedByPerson,
                    format!(
                        "stopped at {}, after this window {opened_text}; a person's stop sticks",
                        self.at(t)
                    ),
                ),
                (_, None) => verdict(
                    Action::None,
                    Code::StopTimeUnknown,
                    "stopped at an unknown time, maybe by a person in this window; not started".into(),
                ),
            },
        }
    }

    fn running(&self, trace: &mut Trace) -> Verdict {
        let protection = self.protection(trace);
        let threshold = self.policy.busy_threshold();
        let busy = self.busy_sample(threshold);
        trace.note(|| match busy {
            Some((t, p)) => format!(
                "busy: {p}% at {} (threshold {threshold}%, last {})",
                self.at(t),
                span(RECENT)
            ),
            None => format!(
                "not busy: no sample at or above {threshold}% in the last {}",
                span(RECENT)
            ),
        });
        let outside = match (&self.policy.work_hours, self.status) {
            (Some(wh), Some(st)) if !st.in_hours => Some((wh, st)),
            _ => None,
        };
        if let Some((wh, st)) = outside {
            if wh.outside_hours != OutsideHours::None {
                return self.scheduled_stop(wh, st, protection, busy, threshold, trace);
            }
        }
        let mut idle_code = None;
        if let Some(rule) = &self.policy.idle {
            if rule.when == IdleWhen::Always || outside.is_some() {
                match self.idle(rule, trace) {
                    Ok(v) => {
                        return match protection {
                            Some(p) => verdict(Action::None, p.code, p.reason),
                            None => self.with_notice(v, NoticeFor::Now, trace),
                        }
                    }
                    Err(code) => idle_code = Some(code),
                }
            } else {
                trace.note(|| "idle rule: applies only outside work hours".into());
            }
        }
        if let (Some(wh), Some(st), Some(n)) =
            (&self.policy.work_hours, self.status, &self.policy.notify)
        {
            let close = st
                .next
                .filter(|c| st.in_hours && self.now() >= *c - n.before);
            if let (Some(close), true, None) =
                (close, wh.outside_hours != OutsideHours::None, &protection)
            {
                return self.notice_before_close(close, n.before);
            }
        }
        let mut not_spot = None;
        if let Some(rule) = &self.policy.spot {
            match self.spot(rule) {
                Ok(reason) => {
                    trace.note(|| format!("spot: eligible: {reason}"));
                    return match protection {
                        Some(p) => verdict(Action::None, p.code, p.reason),
                        None => verdict(Action::MigrateToSpot, Code::SpotSavings, reason),
                    };
                }
                Err(why) => {
                    trace.note(|| format!("spot: not eligible: {why}"));
                    not_spot = Some(why);
                }
            }
        }
        if let Some((code, reason)) = idle_code {
            return verdict(Action::None, code, reason);
        }
        match (outside, self.status) {
            (Some(_), _) => verdict(
                Action::None,
                Code::OutsideHoursKept,
                "outside work hours; outside_hours is none".into(),
            ),
            (None, Some(st)) => {
                let close = st
                    .next
                    .map_or(String::new(), |t| format!(" (close {})", self.at(t)));
                verdict(Action::None, Code::InHours, format!("in work hours{close}"))
            }
            (None, None) => verdict(
                Action::None,
                Code::NoRuleApplies,
                match not_spot {
                    Some(why) => format!("running; not moved to spot: {why}"),
                    None => "running; no rule asks for a change".into(),
                },
            ),
        }
    }

    /// `ebb:keep-until` or an override, when one protects the instance now.
    fn protection(&self, trace: &mut Trace) -> Option<Protection> {
        let now = self.now();
        let tag = self.inst.tag(KEEP_UNTIL_TAG).map(|raw| {
            (
                raw,
                DateTime::parse_from_rfc3339(raw.trim()).map(|t| t.with_timezone(&Utc)),
            )
        });
        let found = match tag {
            Some((raw, Err(_))) => Some(Protection {
                code: Code::KeepUntilInvalid,
                reason: format!(
                    "tag ebb:keep-until=\"{raw}\" is not an RFC 3339 time; no stop until it is fixed or removed"
                ),
            }),
            Some((_, Ok(until))) if until > now => Some(Protection {
                code: Code::KeepUntil,
                reason: format!("kept by tag ebb:keep-until until {}", self.at(until)),
            }),
            _ => None,
        };
        let found = found.or_else(|| {
            self.ctx
                .prior
                .active_override(&self.inst.id, now)
                .map(|o| Protection {
                    code: Code::Override,
                    reason: format!(
                        "override by {} until {}: {}",
                        if o.by.is_empty() { "someone" } else { &o.by },
                        self.at(o.until),
                        o.reason
                    ),
                })
        });
        trace.note(|| match &found {
            Some(p) => format!("protected: {}", p.reason),
            None => "not protected (no ebb:keep-until in the future, no active override)".into(),
        });
        found
    }

    /// The newest sample at or above `threshold` in the last [`RECENT`], ignoring samples after
    /// now.
    fn busy_sample(&self, threshold: f64) -> Option<(DateTime<Utc>, f64)> {
        let now = self.now();
        self.inst
            .gpu_util
            .iter()
            .rev()
            .filter(|s| s.at <= now)
            .take_while(|s| s.at >= now - RECENT)
            .find(|s| s.percent >= threshold)
            .map(|s| (s.at, s.percent))
    }

    fn scheduled_stop(
        &self,
        wh: &WorkHours,
        st: ScheduleStatus,
        protection: Option<Protection>,
        busy: Option<(DateTime<Utc>, f64)>,
        threshold: f64,
        trace: &mut Trace,
    ) -> Verdict {
        let closed = st
            .since
            .map_or(String::new(), |t| format!(" (closed {})", self.at(t)));
        if let Some(p) = protection {
            return verdict(Action::None, p.code, p.reason);
        }
        let action = match wh.outside_hours {
            OutsideHours::Hibernate => Action::Hibernate,
            _ => Action::Stop,
        };
        let mut v = verdict(
            action,
            Code::OutsideHours,
            format!("outside work hours{closed}"),
        );
        if let (Some((at, pct)), true) = (busy, wh.busy_defers_stop) {
            let pct = percent_text(pct);
            let deadline = match (wh.max_defer, st.since) {
                (Some(max), Some(close)) => Some(close + max),
                _ => None,
            };
            match deadline {
                Some(d) if self.now() >= d => {
                    v.code = Code::MaxDeferReached;
                    v.reason = format!(
                        "outside work hours{closed}; busy ({pct}% at {}) but max_defer {} has passed",
                        self.at(at),
                        span(wh.max_defer.unwrap_or_default())
                    );
                }
                _ => {
                    let until = deadline.map_or("until idle".to_string(), |d| {
                        format!("until idle or {}", self.at(d))
                    });
                    return verdict(
                        Action::None,
                        Code::BusyDeferred,
                        format!(
                            "outside work hours{closed}, but GPU busy ({pct}% at {} ≥ {threshold}%); stop deferred {until}",
                            self.at(at)
                        ),
                    );
                }
            }
        }
        let notice = st.since.map_or(NoticeFor::Now, NoticeFor::Close);
        self.with_notice(v, notice, trace)
    }

    /// Gates a stop behind the policy's notice: a stop happens only once a notice for it is
    /// `before` old; a missing notice is sent now, which delays the stop.
    fn with_notice(&self, stop: Verdict, notice_for: NoticeFor, trace: &mut Trace) -> Verdict {
        let Some(n) = &self.policy.notify else {
            return stop;
        };
        let now = self.now();
        let counts = |sent: DateTime<Utc>| match notice_for {
            NoticeFor::Close(close) => sent >= close - n.before,
            NoticeFor::Now => sent >= now - n.before - NOTICE_SLACK,
        };
        match self.facts.notified_at.filter(|t| counts(*t)) {
            Some(sent) if now >= sent + n.before => {
                trace.note(|| format!("notice sent {}, {} ago", self.at(sent), span(now - sent)));
                Verdict {
                    reason: format!("{}; notice sent {}", stop.reason, self.at(sent)),
                    ..stop
                }
            }
            Some(sent) => verdict(
                Action::None,
                Code::NoticePending,
                format!(
                    "{}; notice sent {}, stop at {}",
                    stop.reason,
                    self.at(sent),
                    self.at(sent + n.before)
                ),
            ),
            None => {
                let stop_at = now + n.before;
                let code = match (notice_for, stop.code) {
                    (_, Code::Idle | Code::IdleMetricsMissing) => Code::IdleNotice,
                    _ => Code::NoticeLate,
                };
                Verdict {
                    action: Action::Notify,
                    code,
                    reason: format!("{}; notice now, stop at {}", stop.reason, self.at(stop_at)),
                    stop_at: Some(stop_at),
                }
            }
        }
    }

    fn notice_before_close(&self, close: DateTime<Utc>, before: Duration) -> Verdict {
        match self.facts.notified_at.filter(|t| *t >= close - before) {
            Some(sent) => verdict(
                Action::None,
                Code::NoticePending,
                format!(
                    "work hours close {}; notice sent {}",
                    self.at(close),
                    self.at(sent)
                ),
            ),
            None => Verdict {
                action: Action::Notify,
                code: Code::Notice,
                reason: format!(
                    "work hours close {}; notice {} before the stop",
                    self.at(close),
                    span(before)
                ),
                stop_at: Some(close),
            },
        }
    }

    /// `Ok` with the stop when the idle rule stops the instance; `Err` with the code and reason
    /// why it does not.
    fn idle(&self, rule: &IdleRule, trace: &mut Trace) -> Result<Verdict, (Code, String)> {
        let now = self.now();
        let action = match rule.action {
            IdleAction::Stop => Action::Stop,
            IdleAction::Hibernate => Action::Hibernate,
        };
        if let Some(started) = self.inst.launched_at {
            if started + rule.grace_after_start > now {
                let why = format!(
                    "idle rule: started {}, within grace_after_start {}",
                    self.at(started),
                    span(rule.grace_after_start)
                );
                trace.note(|| why.clone());
                return Err((Code::IdleGrace, why));
            }
        }
        let coverage = idle_coverage(&self.inst.gpu_util, now, rule);
        trace.note(|| {
            format!(
                "idle rule ({}% for {}): {}",
                rule.gpu_below,
                span(rule.window),
                coverage.describe(self)
            )
        });
        let window = span(rule.window);
        match coverage {
            Coverage::Busy { at, percent } => Err((
                Code::NotIdle,
                format!("GPU at {}% at {}, not below {}% for {window}", percent_text(percent), self.at(at), rule.gpu_below),
            )),
            Coverage::Idle { samples, max } => Ok(verdict(
                action,
                Code::Idle,
                format!(
                    "GPU idle: {samples} samples over the last {window}, max {}% < {}%",
                    percent_text(max),
                    rule.gpu_below
                ),
            )),
            Coverage::Missing(why) => match rule.missing_metrics {
                MissingMetrics::Idle => Ok(verdict(
                    action,
                    Code::IdleMetricsMissing,
                    format!("GPU metrics incomplete ({why}) and missing_metrics is idle; no sample ≥ {}%", rule.gpu_below),
                )),
                MissingMetrics::Busy => Err((
                    Code::MetricsMissing,
                    format!("GPU metrics incomplete ({why}); counted as busy"),
                )),
            },
        }
    }

    /// `Ok` with the reason when the instance should move to spot now, `Err` with why not.
    fn spot(&self, rule: &SpotRule) -> Result<String, String> {
        let inst = self.inst;
        if inst.tag(INTERRUPTIBLE_TAG) != Some("true") {
            return Err("tag ebb:interruptible is not \"true\"".into());
        }
        if inst.lifecycle != Lifecycle::OnDemand {
            return Err("already spot".into());
        }
        if inst.tag(MIGRATING_TAG).is_some() {
            return Err("a migration is under way (tag ebb:migrating)".into());
        }
        if let Some(id) = inst.tag(MIGRATION_TAG) {
            // An on-demand fallback: its migration gave up on spot for it.
            return Err(format!(
                "it replaces an instance moved by spot migration {id}"
            ));
        }
        let prices = self.ctx.prices.get(&inst.region);
        let on_demand = prices
            .and_then(|p| p.get(&inst.instance_type))
            .and_then(|p| p.on_demand)
            .ok_or_else(|| {
                format!(
                    "no on-demand price for {} in {}",
                    inst.instance_type, inst.region
                )
            })?;
        let own = [inst.instance_type.clone()];
        let candidates = if rule.instance_types.is_empty() {
            &own[..]
        } else {
            &rule.instance_types[..]
        };
        let (best_type, spot) = candidates
            .iter()
            .filter_map(|t| Some((t, prices?.get(t)?.spot?)))
            .min_by(|a, b| a.1.total_cmp(&b.1))
            .ok_or_else(|| {
                format!(
                    "no spot price for {} in {}",
                    candidates.join(", "),
                    inst.region
                )
            })?;
        let savings = if on_demand > 0.0 {
            1.0 - spot / on_demand
        } else {
            0.0
        };
        let pct = |f: f64| format!("{:.0}%", f * 100.0);
        if savings < rule.min_savings {
            return Err(format!(
                "savings {} ({best_type} spot ${spot:.3}/h vs on-demand ${on_demand:.3}/h) below min_savings {}",
                pct(savings),
                pct(rule.min_savings)
            ));
        }
        let now = self.now();
        let checkpoint = inst
            .tag(CHECKPOINT_AT_TAG)
            .ok_or("no ebb:checkpoint-at tag: the job's checkpoint age is unknown")?;
        let at = DateTime::parse_from_rfc3339(checkpoint.trim())
            .map_err(|_| format!("tag ebb:checkpoint-at=\"{checkpoint}\" is not an RFC 3339 time"))?
            .with_timezone(&Utc);
        if at > now + CLOCK_SKEW {
            return Err(format!(
                "ebb:checkpoint-at {} is in the future",
                self.at(at)
            ));
        }
        if now - at > rule.checkpoint_max_age {
            return Err(format!(
                "last checkpoint {} ago, older than checkpoint_max_age {}",
                span(now - at),
                span(rule.checkpoint_max_age)
            ));
        }
        Ok(format!(
            "spot {best_type} ${spot:.3}/h vs on-demand {} ${on_demand:.3}/h saves {} (min {}); checkpoint {} ago",
            inst.instance_type,
            pct(savings),
            pct(rule.min_savings),
            span((now - at).max(Duration::zero()))
        ))
    }
}

/// What the GPU samples say over an idle rule's window.
#[derive(Debug, Clone, PartialEq)]
pub enum Coverage {
    /// A sample at or above the threshold.
    Busy {
        /// When.
        at: DateTime<Utc>,
        /// How busy.
        percent: f64,
    },
    /// Every sample below the threshold and the window covered.
    Idle {
        /// How many samples.
        samples: usize,
        /// The highest.
        max: f64,
    },
    /// No sample at or above the threshold, but the window is not covered; why.
    Missing(String),
}

impl Coverage {
    fn describe(&self, e: &Eval) -> String {
        match self {
            Coverage::Busy { at, percent } => format!("busy, {percent}% at {}", e.at(*at)),
            Coverage::Idle { samples, max } => {
                format!("idle, {samples} samples, max {}%", percent_text(*max))
            }
            Coverage::Missing(why) => format!("not covered by data: {why}"),
        }
    }
}

/// Evaluates an idle rule's window `[now - for, now]` over `samples` (oldest first). Covered
/// means: the first sample no later than [`RECENT`] after the window starts, no gap over
/// [`RECENT`], the newest no older than [`RECENT`]. Samples after `now` are ignored.
pub fn idle_coverage(
    samples: &[crate::fleet::Sample],
    now: DateTime<Utc>,
    rule: &IdleRule,
) -> Coverage {
    let start = now - rule.window;
    let lo = samples.partition_point(|s| s.at < start);
    let hi = samples.partition_point(|s| s.at <= now);
    let window = &samples[lo..hi.max(lo)];
    if let Some(s) = window.iter().rev().find(|s| s.percent >= rule.gpu_below) {
        return Coverage::Busy {
            at: s.at,
            percent: s.percent,
        };
    }
    let (Some(first), Some(last)) = (window.first(), window.last()) else {
        return Coverage::Missing(format!("no samples in the last {}", span(rule.window)));
    };
    if first.at - start > RECENT {
        return Coverage::Missing(format!(
            "first sample {} after the window starts",
            span(first.at - start)
        ));
    }
    if let Some(w) = window.windows(2).find(|w| w[1].at - w[0].at > RECENT) {
        return Coverage::Missing(format!(
            "a gap of {} in the samples",
            span(w[1].at - w[0].at)
        ));
    }
    if now - last.at > RECENT {
        return Coverage::Missing(format!("newest sample {} old", span(now - last.at)));
    }
    Coverage::Idle {
        samples: window.len(),
        max: window.iter().map(|s| s.percent).fold(0.0, f64::max),
    }
}

/// A GPU percentage for people: at most one decimal (CloudWatch reports many).
fn percent_text(percent: f64) -> String {
    let text = format!("{percent:.1}");
    text.strip_suffix(".0").map(str::to_string).unwrap_or(text)
}
