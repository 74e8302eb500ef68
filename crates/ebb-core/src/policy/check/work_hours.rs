//! The `work_hours` section: time zone, periods or cron events, the calendars of skipped dates
//! and of working days, and what happens at the edges of the hours.

use super::{child, keys, suggest, CalendarRefs, Checker, Fields};
use crate::policy::yaml::{Step, Value};
use crate::policy::{LateStart, OutsideHours, StartAtOpen, WorkHours};
use crate::schedule::{CronEvents, DaySet, Hours, Period, Schedule, TimeOfDay};
use chrono::Duration;
use chrono_tz::Tz;
use std::str::FromStr;

/// The longest `start_ahead` a policy may ask for.
const MAX_START_AHEAD: Duration = Duration::hours(12);

/// Names people write for a zone that are not IANA names, and what they mean: the spelling
/// closest to one of them is often another zone altogether ("Asia/Beijing" is nearest to
/// "Asia/Brunei").
const ZONE_ALIASES: &[(&str, &str)] = &[
    ("Asia/Beijing", "\"Asia/Shanghai\", China's zone"),
    ("Beijing", "\"Asia/Shanghai\", China's zone"),
    ("China", "\"Asia/Shanghai\", China's zone"),
    (
        "CST",
        "\"Asia/Shanghai\" (China Standard Time) or \"America/Chicago\" (US Central)",
    ),
    ("China Standard Time", "\"Asia/Shanghai\", China's zone"),
    ("JST", "\"Asia/Tokyo\""),
    ("KST", "\"Asia/Seoul\""),
    ("PST", "\"America/Los_Angeles\""),
    ("PDT", "\"America/Los_Angeles\""),
    (
        "IST",
        "\"Asia/Kolkata\" (India), \"Europe/Dublin\" or \"Asia/Jerusalem\"",
    ),
];
impl Checker {
    /// A policy's `work_hours`; the calendar names of `skip` and `workdays` go to `calendars`,
    /// resolved later.
    pub(super) fn work_hours(
        &mut self,
        v: &Value,
        path: &[Step],
        calendars: &mut CalendarRefs,
    ) -> Option<WorkHours> {
        let f = self.fields(v, path, "work hours", keys::WORK_HOURS)?;
        let timezone = self.timezone(&f, path, "work_hours");
        let hours = self.hours(&f, path);
        calendars.skip = self.calendar_names(&f, "skip");
        calendars.workdays = self.calendar_names(&f, "workdays");
        if let (Some(Hours::Cron { .. }), Some((_, p))) = (&hours, f.get("workdays")) {
            self.problem(
                &p,
                "workdays is for periods: cron events open on the dates their expressions name (add the working days to them, or write periods)".into(),
            );
        }
        let outside_hours = f
            .get("outside_hours")
            .map_or(Some(OutsideHours::Stop), |(v, p)| {
                self.choice(
                    v,
                    &p,
                    "outside_hours",
                    &[
                        ("stop", OutsideHours::Stop),
                        ("hibernate", OutsideHours::Hibernate),
                        ("none", OutsideHours::None),
                    ],
                )
            });
        let start_at_open =
            f.get("start_at_open")
                .map_or(Some(StartAtOpen::StoppedByEbb), |(v, p)| {
                    self.choice(
                        v,
                        &p,
                        "start_at_open",
                        &[
                            ("stopped-by-ebb", StartAtOpen::StoppedByEbb),
                            ("all", StartAtOpen::All),
                            ("never", StartAtOpen::Never),
                        ],
                    )
                });
        let busy_defers_stop = f
            .get("busy_defers_stop")
            .map_or(Some(true), |(v, p)| self.boolean(v, &p));
        let max_defer = match f.get("max_defer") {
            Some((v, p)) => Some(self.duration(v, &p, "max_defer")?),
            None => None,
        };
        let start_ahead = match f.get("start_ahead") {
            Some((v, p)) => self.start_ahead(v, &p),
            None => Some(Duration::zero()),
        };
        let late_start = match f.get("late_start") {
            Some((v, p)) => self.late_start(v, &p),
            None => Some(LateStart::KeepUntilIdle { idle_for: None }),
        };
        Some(WorkHours {
            schedule: Schedule {
                timezone: timezone?,
                hours: hours?,
                skip: Vec::new(),
                workdays: Vec::new(),
            },
            outside_hours: outside_hours?,
            start_at_open: start_at_open?,
            busy_defers_stop: busy_defers_stop?,
            max_defer,
            start_ahead: start_ahead?,
            late_start: late_start?,
        })
    }

    /// The calendar names under `key`, each with its path.
    fn calendar_names(&mut self, f: &Fields, key: &str) -> Vec<(String, Vec<Step>)> {
        let Some((v, p)) = f.get(key) else {
            return Vec::new();
        };
        let names = self
            .strings(v, &p, "a list of calendar names")
            .unwrap_or_default();
        names
            .into_iter()
            .enumerate()
            .map(|(i, n)| (n, child(&p, Step::Index(i))))
            .collect()
    }

    /// `late_start`: `keep` (the default), `enforce`, or `{idle_for: 2h}` (kept, and idle
    /// after that long in a policy without an idle rule).
    fn late_start(&mut self, v: &Value, path: &[Step]) -> Option<LateStart> {
        if let Value::Mapping(_) = v {
            let f = self.fields(v, path, "late_start", keys::LATE_START)?;
            let idle_for = match f.get("idle_for") {
                Some((v, p)) => Some(self.duration(v, &p, "idle_for")?),
                None => None,
            };
            return Some(LateStart::KeepUntilIdle { idle_for });
        }
        self.choice(
            v,
            path,
            "late_start",
            &[
                ("keep", LateStart::KeepUntilIdle { idle_for: None }),
                ("enforce", LateStart::Enforce),
            ],
        )
    }

    /// `start_ahead`: a lead time of at most [`MAX_START_AHEAD`], since a longer one would keep
    /// instances running through the nights it is meant to save.
    fn start_ahead(&mut self, v: &Value, path: &[Step]) -> Option<Duration> {
        let lead = self.duration(v, path, "start_ahead")?;
        if lead > MAX_START_AHEAD {
            self.problem(
                path,
                format!(
                    "start_ahead is at most {}h (the time instances need to boot, typically minutes)",
                    MAX_START_AHEAD.num_hours()
                ),
            );
            return None;
        }
        Some(lead)
    }

    /// The `timezone` of `section` (work hours, a budget), which it needs.
    pub(super) fn timezone(&mut self, f: &Fields, path: &[Step], section: &str) -> Option<Tz> {
        match f.get("timezone") {
            Some((v, p)) => self.parsed(v, &p, "an IANA time zone name", |s| {
                Tz::from_str(s).map_err(|_| {
                    let alias = ZONE_ALIASES
                        .iter()
                        .find(|(name, _)| name.eq_ignore_ascii_case(s.trim()));
                    match alias {
                        Some((_, meant)) => {
                            format!("unknown time zone \"{s}\" (did you mean {meant}?)")
                        }
                        None => format!(
                            "unknown time zone \"{s}\"{}",
                            suggest(s, chrono_tz::TZ_VARIANTS.iter().map(|z| z.name()))
                        ),
                    }
                })
            }),
            None => {
                self.missing(
                    path,
                    "timezone",
                    format!("{section} needs a \"timezone\" (an IANA name like \"Europe/Berlin\")"),
                );
                None
            }
        }
    }

    /// The windows of work hours: `periods` or `cron`, exactly one of them.
    fn hours(&mut self, f: &Fields, path: &[Step]) -> Option<Hours> {
        match (f.get("periods"), f.get("cron")) {
            (Some((v, p)), None) => self.periods(v, &p),
            (None, Some((v, p))) => self.cron(v, &p),
            (Some(_), Some((_, p))) => {
                self.problem(
                    &p,
                    "work_hours takes either \"periods\" or \"cron\", not both".into(),
                );
                None
            }
            (None, None) => {
                if !["periods", "cron"]
                    .iter()
                    .any(|k| self.misspelt.contains(&(path.to_vec(), k.to_string())))
                {
                    self.problem(path, "work_hours needs \"periods\" or \"cron\"".into());
                }
                None
            }
        }
    }

    fn periods(&mut self, v: &Value, path: &[Step]) -> Option<Hours> {
        let items = self.seq(v, path, "a list of periods")?;
        if items.is_empty() {
            self.problem(path, "periods must not be empty".into());
            return None;
        }
        let mut periods = Vec::new();
        let mut ok = true;
        for (i, item) in items.iter().enumerate() {
            let ip = child(path, Step::Index(i));
            match self.period(item, &ip) {
                Some(p) => periods.push(p),
                None => ok = false,
            }
        }
        ok.then_some(Hours::Periods(periods))
    }

    fn period(&mut self, v: &Value, path: &[Step]) -> Option<Period> {
        let f = self.fields(v, path, "a period", keys::PERIOD)?;
        let required = |key: &str, this: &mut Self| {
            let got = f.get(key);
            if got.is_none() {
                this.missing(path, key, format!("a period needs \"{key}\""));
            }
            got
        };
        let days = required("days", self);
        let start = required("start", self);
        let stop = required("stop", self);
        let days = days.and_then(|(v, p)| match v {
            Value::Sequence(_) => self.strings(v, &p, "days like \"mon-fri\"").and_then(|d| {
                self.parsed(&Value::String(d.join(",")), &p, "days", DaySet::from_str)
            }),
            _ => self.parsed(v, &p, "days like \"mon-fri\"", DaySet::from_str),
        });
        let time = |this: &mut Self, got: Option<(&Value, Vec<Step>)>| {
            got.and_then(|(v, p)| {
                this.parsed(v, &p, "a time of day like \"08:30\"", TimeOfDay::from_str)
            })
        };
        let start = time(self, start);
        let stop = time(self, stop);
        let (days, start, stop) = (days?, start?, stop?);
        if start == stop {
            self.problem(
                path,
                format!("start and stop are both {start}: the window would be empty (use 00:00 and 24:00 for a whole day)"),
            );
            return None;
        }
        if start.minutes() == 24 * 60 {
            self.problem(
                path,
                "start cannot be 24:00 (write 00:00 of the next day)".into(),
            );
            return None;
        }
        Some(Period { days, start, stop })
    }

    fn cron(&mut self, v: &Value, path: &[Step]) -> Option<Hours> {
        let f = self.fields(v, path, "cron events", keys::CRON)?;
        let event = |key: &str, this: &mut Self| match f.get(key) {
            Some((v, p)) => this.parsed(v, &p, "a 5-field cron expression", CronEvents::from_str),
            None => {
                this.missing(path, key, format!("cron needs \"{key}\""));
                None
            }
        };
        let start = event("start", self);
        let stop = event("stop", self);
        Some(Hours::Cron {
            start: start?,
            stop: stop?,
        })
    }
}
