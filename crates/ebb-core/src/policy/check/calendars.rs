//! The `calendars` section: named lists of dates that work hours can skip, and of working days
//! that open whatever their weekday.

use super::{child, keys, CalendarDef, Checker, Fields};
use crate::policy::yaml::{self, Step, Value};
use crate::schedule::{
    parse_day, read_calendar, Calendar, CalendarFile, CalendarFormat, DateRange, Workday,
};
use chrono::Weekday;
use std::str::FromStr;
use std::sync::Arc;

/// What a `dates` or `workdays` list holds, for "expected ..." messages.
const DATE_LIST: &str = "a list of dates (YYYY-MM-DD or YYYY-MM-DD..YYYY-MM-DD)";

impl Checker {
    /// The file's `calendars`; a calendar with a problem is left out.
    pub(super) fn calendars(&mut self, v: &Value, path: &[Step]) -> Vec<CalendarDef> {
        let mut out = Vec::new();
        let Value::Mapping(m) = v else {
            self.expected(path, "a mapping of calendar names to calendars", v);
            return out;
        };
        for (k, body) in m {
            let Some(name) = yaml::key_text(k) else {
                self.problem(path, "a calendar name must be text".to_string());
                continue;
            };
            let cpath = child(path, Step::Value(name.clone()));
            if let Some(calendar) = self.calendar(name.clone(), body, &cpath) {
                out.push(CalendarDef {
                    calendar: Arc::new(calendar),
                    path: child(path, Step::Key(name)),
                });
            }
        }
        out
    }

    /// One calendar: `dates`, `workdays` (with `workday_as`), a `file` of them, or several.
    fn calendar(&mut self, name: String, body: &Value, path: &[Step]) -> Option<Calendar> {
        let f = self.fields(body, path, "a calendar", keys::CALENDAR)?;
        if let Some((v, p)) = f.get("description") {
            self.string(v, &p, "text");
        }
        if ["dates", "workdays", "file"]
            .iter()
            .all(|k| f.get(k).is_none())
        {
            if !["dates", "workdays", "file"]
                .iter()
                .any(|k| self.misspelt.contains(&(path.to_vec(), k.to_string())))
            {
                self.problem(
                    path,
                    format!("calendar \"{name}\" needs \"dates\" (days that open no window), \"workdays\" (working days whatever their weekday) or a \"file\" of them"),
                );
            }
            return None;
        }
        let dates = match f.get("dates") {
            Some((v, p)) => self.date_list(v, &p),
            None => Some(Vec::new()),
        };
        let workday_as = match f.get("workday_as") {
            Some((v, p)) => self.weekday(v, &p),
            None => Some(Weekday::Mon),
        };
        // The entries are checked even when workday_as is wrong, so every problem is reported.
        let default = workday_as.unwrap_or(Weekday::Mon);
        let workdays = match f.get("workdays") {
            Some((v, p)) => self.workdays(v, &p, default),
            None => Some(Vec::new()),
        };
        let kept = match f.get("file") {
            Some((v, p)) => self.calendar_file(v, &p, &f),
            None => Some(CalendarFile::default()),
        };
        let (mut dates, mut workdays, _, kept) = (dates?, workdays?, workday_as?, kept?);
        dates.extend(kept.dates);
        workdays.extend(kept.workdays.into_iter().map(|dates| Workday {
            dates,
            as_day: default,
        }));
        if !self.disjoint(&name, &f, &dates, &workdays) {
            return None;
        }
        Some(Calendar {
            name,
            dates,
            workdays,
        })
    }

    /// The dates of the calendar file `v` names (relative to the policy file), in the format
    /// its `format` or its extension gives.
    fn calendar_file(&mut self, v: &Value, path: &[Step], f: &Fields) -> Option<CalendarFile> {
        let name = self.string(v, path, "a file name")?;
        let file = self.dir.join(&name);
        let format = match f.get("format") {
            Some((v, p)) => {
                let given = self.string(v, &p, "ics or holiday-cn")?;
                let Some(format) = CalendarFormat::of(&given) else {
                    self.problem(
                        &p,
                        format!("unknown format \"{given}\": use ics or holiday-cn"),
                    );
                    return None;
                };
                format
            }
            None => {
                let extension = file.extension().and_then(|e| e.to_str()).unwrap_or("");
                let Some(format) = CalendarFormat::of_extension(extension) else {
                    self.problem(path, format!("say the format of {name} (format: ics or holiday-cn): its extension does not"));
                    return None;
                };
                format
            }
        };
        let text = match (self.read_file)(&file) {
            Ok(text) => text,
            Err(e) => {
                self.problem(
                    path,
                    format!("cannot read calendar file {}: {e}", file.display()),
                );
                return None;
            }
        };
        match read_calendar(format, &text) {
            Ok(kept) => Some(kept),
            Err(e) => {
                let format = format.name();
                self.problem(
                    path,
                    format!("calendar file {} ({format}): {e}", file.display()),
                );
                None
            }
        }
    }

    /// A list of dates and ranges; `None` when any item is not one.
    fn date_list(&mut self, v: &Value, path: &[Step]) -> Option<Vec<DateRange>> {
        let items = self.seq(v, path, DATE_LIST)?;
        let mut dates = Vec::new();
        let mut ok = true;
        for (i, item) in items.iter().enumerate() {
            match self.date_range(item, &child(path, Step::Index(i))) {
                Some(d) => dates.push(d),
                None => ok = false,
            }
        }
        ok.then_some(dates)
    }

    fn date_range(&mut self, v: &Value, path: &[Step]) -> Option<DateRange> {
        self.parsed(v, path, "a date", DateRange::from_str)
    }

    /// `workdays`: dates and ranges like `dates`, each opening as `default`, or mappings
    /// `{date: ..., as: sat}` that name their own weekday.
    fn workdays(&mut self, v: &Value, path: &[Step], default: Weekday) -> Option<Vec<Workday>> {
        let items = self.seq(v, path, DATE_LIST)?;
        let mut workdays = Vec::new();
        let mut ok = true;
        for (i, item) in items.iter().enumerate() {
            let ip = child(path, Step::Index(i));
            let workday = match item {
                Value::Mapping(_) => self.workday_entry(item, &ip, default),
                _ => self.date_range(item, &ip).map(|dates| Workday {
                    dates,
                    as_day: default,
                }),
            };
            match workday {
                Some(w) => workdays.push(w),
                None => ok = false,
            }
        }
        ok.then_some(workdays)
    }

    /// One `{date: ..., as: ...}` entry of `workdays`.
    fn workday_entry(&mut self, v: &Value, path: &[Step], default: Weekday) -> Option<Workday> {
        let f = self.fields(v, path, "a working day", keys::WORKDAY)?;
        let dates = match f.get("date") {
            Some((v, p)) => self.date_range(v, &p),
            None => {
                self.missing(
                    path,
                    "date",
                    "a working day needs \"date\" (YYYY-MM-DD or YYYY-MM-DD..YYYY-MM-DD)".into(),
                );
                None
            }
        };
        let as_day = match f.get("as") {
            Some((v, p)) => self.weekday(v, &p),
            None => Some(default),
        };
        Some(Workday {
            dates: dates?,
            as_day: as_day?,
        })
    }

    /// One day like `mon`.
    fn weekday(&mut self, v: &Value, path: &[Step]) -> Option<Weekday> {
        self.parsed(v, path, "a day like mon", parse_day)
    }

    /// Whether no date is both skipped and a working day in one calendar, which would say two
    /// things of one day; reported at `workdays` when it is.
    fn disjoint(
        &mut self,
        name: &str,
        f: &Fields,
        dates: &[DateRange],
        workdays: &[Workday],
    ) -> bool {
        let clash = workdays.iter().find_map(|w| {
            dates
                .iter()
                .find(|d| d.first <= w.dates.last && w.dates.first <= d.last)
                .map(|d| (*d, w.dates))
        });
        let Some((skipped, working)) = clash else {
            return true;
        };
        let at = f.get("workdays").map(|(_, p)| p).unwrap_or_default();
        self.problem(
            &at,
            format!("calendar \"{name}\": {working} is a working day and {skipped} a skipped date; a date is one or the other (remove it from \"dates\" or \"workdays\")"),
        );
        false
    }
}
