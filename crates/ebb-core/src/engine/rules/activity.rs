//! The idle rule's activity signals (`idle.activity`): whether anything beside the GPUs showed a
//! person using the instance over a span ending now. A signal that cannot be read, or whose
//! readings do not cover the span, leaves that unknown, which counts as in use.

use super::eval::Eval;
use super::text::span;
use super::{CLOCK_SKEW, RECENT};
use crate::fleet::activity::{ActivityReadings, SignalReading};
use crate::fleet::Instance;
use crate::names::ACTIVE_AT_TAG;
use crate::policy::{Policy, Signal, SignalSource};
use chrono::{DateTime, Duration, Utc};

/// What the signals say of a span.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Activity<'a> {
    /// None showed use (or there are none): each signal with its last use seen, if any.
    Unused(Vec<(&'a Signal, Option<DateTime<Utc>>)>),
    /// This signal showed use at this time.
    Used(&'a Signal, DateTime<Utc>),
    /// This signal could not be read, for this reason.
    Unread(&'a Signal, String),
}

impl<'a> Eval<'a> {
    /// What the policy's signals say of the instance over `[now - length, now]`.
    pub(super) fn activity(&self, length: Duration) -> Activity<'a> {
        activity_of(
            self.policy,
            self.ctx.activity,
            self.inst,
            self.now(),
            length,
        )
    }

    /// What each signal says of the instance over `[now - length, now]`, a line each.
    pub(super) fn activity_lines(&self, length: Duration) -> Vec<String> {
        let at = |t| self.at(t);
        signal_lines(
            self.policy,
            self.ctx.activity,
            self.inst,
            self.now(),
            length,
            at,
        )
    }
}

/// What `policy`'s signals say of `inst` over `[now - length, now]`, from its tags and the
/// `readings` taken: the first that could not be read or showed use, in the policy's order,
/// else every signal's last use. A heartbeat is in use while younger than its `max_age`,
/// whatever `length`.
pub(crate) fn activity_of<'a>(
    policy: &'a Policy,
    readings: &ActivityReadings,
    inst: &Instance,
    now: DateTime<Utc>,
    length: Duration,
) -> Activity<'a> {
    let mut unused = Vec::new();
    for (signal, state) in each_signal(policy, readings, inst, now, length) {
        match state {
            Activity::Unused(_) => unused.push((signal, state_last(&state))),
            decided => return decided,
        }
    }
    Activity::Unused(unused)
}

/// The last use an unused signal's state holds.
fn state_last(state: &Activity) -> Option<DateTime<Utc>> {
    match state {
        Activity::Unused(v) => v.first().and_then(|(_, last)| *last),
        _ => None,
    }
}

/// Each of `policy`'s signals with what it alone says (an `Unused` holding just itself).
fn each_signal<'a, 'r>(
    policy: &'a Policy,
    readings: &'r ActivityReadings,
    inst: &'r Instance,
    now: DateTime<Utc>,
    length: Duration,
) -> impl Iterator<Item = (&'a Signal, Activity<'a>)> + 'r
where
    'a: 'r,
{
    let signals = policy.idle.as_ref().map_or(&[][..], |r| &r.activity[..]);
    signals
        .iter()
        .map(move |signal| (signal, one(signal, readings, inst, now, length)))
}

/// What `signal` says of `inst` over `[now - length, now]`.
fn one<'a>(
    signal: &'a Signal,
    readings: &ActivityReadings,
    inst: &Instance,
    now: DateTime<Utc>,
    length: Duration,
) -> Activity<'a> {
    let last = match &signal.source {
        SignalSource::Heartbeat { max_age } => {
            // The tag, or what the instance posted through the API, whichever is later.
            let posted = match readings.get(&inst.id).and_then(|r| r.get(&signal.name)) {
                Some(SignalReading::LastUse(at)) => at.map(|t| t.min(now)),
                Some(SignalReading::Unread(why)) => {
                    return Activity::Unread(signal, why.to_string())
                }
                _ => None,
            };
            match heartbeat(inst, now).map(|tag| tag.max(posted)) {
                Err(why) => return Activity::Unread(signal, why),
                Ok(Some(at)) if now - at <= *max_age => return Activity::Used(signal, at),
                Ok(last) => last,
            }
        }
        SignalSource::Jupyter { .. }
        | SignalSource::Prometheus { .. }
        | SignalSource::Cloudwatch { .. } => {
            let reading = readings.get(&inst.id).and_then(|r| r.get(&signal.name));
            let points = match reading {
                None => return Activity::Unread(signal, "not read".to_string()),
                Some(SignalReading::Unread(why)) => {
                    return Activity::Unread(signal, why.to_string())
                }
                Some(SignalReading::LastUse(last)) => {
                    if let Some(at) = last.filter(|at| *at >= now - length) {
                        return Activity::Used(signal, at);
                    }
                    return Activity::Unused(vec![(signal, *last)]);
                }
                Some(SignalReading::Points(points)) => points,
            };
            let above = signal.source.active_above().unwrap_or(0.0);
            let points = &points[..points.partition_point(|(at, _)| *at <= now)];
            let last = points
                .iter()
                .rev()
                .find(|(_, v)| *v > above)
                .map(|(at, _)| *at);
            if let Some(at) = last.filter(|at| *at >= now - length) {
                return Activity::Used(signal, at);
            }
            if let Some(gap) = uncovered(points, now, length) {
                return Activity::Unread(signal, format!("readings incomplete: {gap}"));
            }
            last
        }
    };
    Activity::Unused(vec![(signal, last)])
}

/// When each of `policy`'s signals last showed `inst` in use, as read by `now` (a signal
/// unread, or that never showed use, is left out): what ebb keeps for `ebb metrics export`.
pub fn last_uses<'a>(
    policy: &'a Policy,
    readings: &ActivityReadings,
    inst: &Instance,
    now: DateTime<Utc>,
) -> Vec<(&'a str, DateTime<Utc>)> {
    let signals = policy.idle.as_ref().map_or(&[][..], |r| &r.activity[..]);
    let read = |signal: &Signal| readings.get(&inst.id).and_then(|r| r.get(&signal.name));
    let last = |signal: &Signal| match (&signal.source, read(signal)) {
        (_, Some(SignalReading::Unread(_))) => None,
        (SignalSource::Heartbeat { .. }, posted) => {
            let posted = match posted {
                Some(SignalReading::LastUse(at)) => *at,
                _ => None,
            };
            heartbeat(inst, now).ok().flatten().max(posted)
        }
        (_, Some(SignalReading::LastUse(at))) => *at,
        (source, Some(SignalReading::Points(points))) => {
            let above = source.active_above().unwrap_or(0.0);
            let points = &points[..points.partition_point(|(at, _)| *at <= now)];
            points.iter().rev().find(|(_, v)| *v > above).map(|p| p.0)
        }
        (_, None) => None,
    };
    signals
        .iter()
        .filter_map(|signal| Some((signal.name.as_str(), last(signal)?.min(now))))
        .collect()
}

/// Each signal of `policy` on its own line, for explain: what it says of `inst` over
/// `[now - length, now]`.
pub(crate) fn signal_lines(
    policy: &Policy,
    readings: &ActivityReadings,
    inst: &Instance,
    now: DateTime<Utc>,
    length: Duration,
    at: impl Fn(DateTime<Utc>) -> String,
) -> Vec<String> {
    each_signal(policy, readings, inst, now, length)
        .map(|(_, state)| state.text(&at))
        .collect()
}

/// The time of the instance's heartbeat, if it has one; why it is unusable, if it is.
fn heartbeat(inst: &Instance, now: DateTime<Utc>) -> Result<Option<DateTime<Utc>>, String> {
    let Some(raw) = inst.tag(ACTIVE_AT_TAG) else {
        return Ok(None);
    };
    let at = DateTime::parse_from_rfc3339(raw.trim())
        .map_err(|_| format!("{ACTIVE_AT_TAG}={raw:?} is not an RFC 3339 time"))?
        .with_timezone(&Utc);
    if at > now + CLOCK_SKEW {
        return Err(format!(
            "{ACTIVE_AT_TAG}={raw} is in the future: a clock is wrong"
        ));
    }
    Ok(Some(at.min(now)))
}

/// Why `points` (up to now, oldest first) do not cover `[now - length, now]`, as the GPU's
/// coverage is judged: the first within [`RECENT`] of the start, no gap over it, the newest
/// no older than it.
fn uncovered(
    points: &[(DateTime<Utc>, f64)],
    now: DateTime<Utc>,
    length: Duration,
) -> Option<String> {
    let start = now - length;
    let window = &points[points.partition_point(|(at, _)| *at < start)..];
    let (Some(first), Some(last)) = (window.first(), window.last()) else {
        return Some(format!("no readings in the last {}", span(length)));
    };
    if first.0 - start > RECENT {
        return Some(format!(
            "first reading {} after the span starts",
            span(first.0 - start)
        ));
    }
    if let Some(w) = window.windows(2).find(|w| w[1].0 - w[0].0 > RECENT) {
        return Some(format!(
            "a gap of {} in the readings",
            span(w[1].0 - w[0].0)
        ));
    }
    (now - last.0 > RECENT).then(|| format!("newest reading {} old", span(now - last.0)))
}

impl Activity<'_> {
    /// In words, with times as `at` writes them: why not idle, or, when unused, each signal's
    /// last use (empty without signals).
    pub(crate) fn text(&self, at: impl Fn(DateTime<Utc>) -> String) -> String {
        match self {
            Activity::Used(signal, t) => match signal.source {
                SignalSource::Heartbeat { max_age } => format!(
                    "in use: {} heard at {}, within max_age {}",
                    signal.name,
                    at(*t),
                    span(max_age)
                ),
                SignalSource::Jupyter { .. } => {
                    format!("in use: {} showed activity at {}", signal.name, at(*t))
                }
                SignalSource::Prometheus { active_above, .. }
                | SignalSource::Cloudwatch { active_above, .. } => {
                    format!("in use: {} above {active_above} at {}", signal.name, at(*t))
                }
            },
            Activity::Unread(signal, why) => format!(
                "activity signal {} could not be read ({why}): in use or not is unknown",
                signal.name
            ),
            Activity::Unused(signals) => signals
                .iter()
                .map(|(signal, last)| {
                    let last =
                        last.map_or("no use seen".to_string(), |t| format!("last use {}", at(t)));
                    format!("{}: {last}", signal.name)
                })
                .collect::<Vec<_>>()
                .join(", "),
        }
    }
}
