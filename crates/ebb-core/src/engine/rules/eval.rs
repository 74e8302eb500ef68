//! The evaluation of one instance under its governing policy: what every rule reads of the
//! instance, its policy and the pass. Each rule's file adds its own methods to [`Eval`];
//! the order in which they judge is in `order.rs`.

use super::lead::Early;
use super::text::local;
use super::{Context, InstanceFacts, CLOCK_SKEW};
use crate::fleet::Instance;
use crate::names::CHECKPOINT_AT_TAG;
use crate::policy::Policy;
use crate::schedule::{day_name, zone, DateRule, Schedule, ScheduleStatus};
use chrono::{DateTime, Duration, Utc};
use chrono_tz::Tz;

/// The evaluation of one instance under its governing policy.
pub(super) struct Eval<'a> {
    /// The decision pass.
    pub(super) ctx: &'a Context<'a>,
    /// The governing policy.
    pub(super) policy: &'a Policy,
    /// The policy's work hours at `now`, when it has work hours.
    pub(super) status: Option<ScheduleStatus>,
    /// The instance.
    pub(super) inst: &'a Instance,
    /// What ebb remembers about it.
    pub(super) facts: InstanceFacts,
    /// How much earlier than `start_ahead` its policy's starts at the next opening begin, when
    /// the buckets cannot make them all by it (`early.rs`).
    pub(super) early: Option<Early>,
}

impl Eval<'_> {
    /// The decision time.
    pub(super) fn now(&self) -> DateTime<Utc> {
        self.ctx.now
    }

    /// The policy's time zone, for reasons; UTC without work hours.
    fn tz(&self) -> Tz {
        self.policy
            .work_hours
            .as_ref()
            .map_or(Tz::UTC, |wh| wh.schedule.timezone)
    }

    /// Why the instance's GPU utilisation could not be read, when it could not: then whether
    /// it is idle or busy is unknown.
    pub(super) fn gpu_unread(&self) -> Option<&str> {
        self.ctx.gpu_unread.get(&self.inst.id).map(|why| &**why)
    }

    /// The next opening, when `now` is outside hours but within the policy's `start_ahead` of
    /// it: the lead time in which stopped instances start and running ones are not stopped
    /// for being outside hours.
    pub(super) fn opening_ahead(&self) -> Option<DateTime<Utc>> {
        let st = self.status?;
        let lead = self.lead();
        let open = st
            .next
            .filter(|_| !st.in_hours && lead > Duration::zero())?;
        (self.now() >= open - lead).then_some(open)
    }

    /// How long before the next opening stopped instances start: `start_ahead`, and earlier
    /// when the buckets cannot make all the starts due by the opening.
    pub(super) fn lead(&self) -> Duration {
        let ahead = self
            .policy
            .work_hours
            .as_ref()
            .map_or(Duration::zero(), |wh| wh.start_ahead);
        ahead + self.early.map_or(Duration::zero(), |e| e.lead)
    }

    /// `; started 4m early: ...` when the starts at the next opening begin early, else empty.
    pub(super) fn early_note(&self) -> String {
        self.early
            .map_or(String::new(), |e| format!("; {}", e.text(|t| self.at(t))))
    }

    /// What a calendar makes of the day of the hours, for reasons: `; 2026-09-20 (sun) is a
    /// working day (调休) by cn-workdays: hours as on mon`, or empty. The day is the one the
    /// current window opened on, in hours, and today outside them.
    pub(super) fn day_note(&self) -> String {
        let (Some(wh), Some(st)) = (&self.policy.work_hours, self.status) else {
            return String::new();
        };
        let schedule = &wh.schedule;
        let day = match st.since {
            Some(opened) if st.in_hours => opened,
            _ => self.now(),
        };
        let date = zone::local_date(schedule.timezone, day);
        let weekday = day_name(chrono::Datelike::weekday(&date));
        match schedule.date_rule(date) {
            Some(DateRule::WorkingDay { calendar, as_day }) => format!(
                "; {date} ({weekday}) is a working day (调休) by {calendar}: hours as on {}",
                day_name(as_day)
            ),
            Some(DateRule::Skipped { calendar }) => {
                format!("; {date} ({weekday}) is skipped by {calendar}")
            }
            None => unwritten_note(schedule, date),
        }
    }

    /// `t` as reasons show it, in the policy's time zone.
    pub(super) fn at(&self, t: DateTime<Utc>) -> String {
        local(t, self.tz(), self.now())
    }

    /// When the instance's job last saved itself (tag `ebb:checkpoint-at`), or why that is
    /// unknown: no tag, one that is not a time, or one in the future (a clock error).
    pub(super) fn last_checkpoint(&self) -> Result<DateTime<Utc>, String> {
        let checkpoint = self.inst.tag(CHECKPOINT_AT_TAG).ok_or_else(|| {
            self.text(|| "no ebb:checkpoint-at tag: the job's checkpoint age is unknown".into())
        })?;
        let at = DateTime::parse_from_rfc3339(checkpoint.trim())
            .map_err(|_| {
                self.text(|| {
                    format!("tag ebb:checkpoint-at=\"{checkpoint}\" is not an RFC 3339 time")
                })
            })?
            .with_timezone(&Utc);
        if at > self.now() + CLOCK_SKEW {
            return Err(self.text(|| format!("ebb:checkpoint-at {} is in the future", self.at(at))));
        }
        Ok(at)
    }

    /// The reason text `text` makes, or an empty one in a pass that writes no reasons.
    pub(super) fn text(&self, text: impl FnOnce() -> String) -> String {
        self.ctx.text(text)
    }
}

/// `; calendar cn-holidays names no date in 2027: ...` when a calendar the schedule skips or
/// opens by has no date in `date`'s year, so the day is taken as an ordinary one; else empty.
fn unwritten_note(schedule: &Schedule, date: chrono::NaiveDate) -> String {
    let year = chrono::Datelike::year(&date);
    let mut unwritten: Vec<&str> = schedule
        .skip
        .iter()
        .chain(&schedule.workdays)
        .filter(|c| !c.names_year(year))
        .map(|c| c.name.as_str())
        .collect();
    unwritten.sort_unstable();
    unwritten.dedup();
    match unwritten.len() {
        0 => String::new(),
        1 => format!(
            "; calendar {} names no date in {year}: {date} is taken as an ordinary day (add {year}'s dates)",
            unwritten[0]
        ),
        _ => format!(
            "; calendars {} name no date in {year}: {date} is taken as an ordinary day (add {year}'s dates)",
            unwritten.join(", ")
        ),
    }
}
