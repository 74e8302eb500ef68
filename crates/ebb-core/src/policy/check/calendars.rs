//! The `calendars` section: named lists of dates that work hours can skip, and of working days
//! that open whatever their weekday.

use super::{child, keys, CalendarDef, CalendarSource, Checker, Fields};
use crate::policy::yaml::{self, Step, Value};
use crate::schedule::{
    parse_day, read_calendar, Calendar, CalendarFile, CalendarFormat, DateRange, Workday,
};
use chrono::Weekday;
use std::str::FromStr;
use std::sync::Arc;

/// The keys a calendar takes its days from, one at least.
const SOURCES: [&str; 4] = ["dates", "workdays", "file", "url"];

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

    /// One calendar: `dates`, `workdays` (with `workday_as`), a `file` or a `url` of them, or
    /// several.
    fn calendar(&mut self, name: String, body: &Value, path: &[Step]) -> Option<Calendar> {
        let f = self.fields(body, path, "a calendar", keys::CALENDAR)?;
        if let Some((v, p)) = f.get("description") {
            self.string(v, &p, "text");
        }
        if SOURCES.iter().all(|k| f.get(k).is_none()) {
            if !SOURCES
                .iter()
                .any(|k| self.misspelt.contains(&(path.to_vec(), k.to_string())))
            {
                self.problem(
                    path,
                    format!("calendar \"{name}\" needs \"dates\" (days that open no window), \"workdays\" (working days whatever their weekday), or a \"file\" or \"url\" of them"),
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
        let kept = match (f.get("file"), f.get("url")) {
            (Some(_), Some((_, p))) => {
                self.problem(
                    &p,
                    "a calendar takes its dates from a \"file\" or a \"url\", not both".into(),
                );
                None
            }
            (Some((v, p)), None) => self.calendar_file(v, &p, &f),
            (None, Some((v, p))) => self.calendar_url(v, &p, &f),
            (None, None) => Some(CalendarFile::default()),
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
        let extension = file.extension().and_then(|e| e.to_str()).unwrap_or("");
        let format = self.calendar_format(f, extension, &name, path)?;
        let what = format!("calendar file {}", file.display());
        let text = (self.read_source)(CalendarSource::File(&file))
            .map_err(|e| self.problem(path, format!("cannot read {what}: {e}")))
            .ok()?;
        self.calendar_text(format, &text, path, &what)
    }

    /// The dates of the copy of what the address `v` serves, in the format its `format` or
    /// its path's extension gives.
    fn calendar_url(&mut self, v: &Value, path: &[Step], f: &Fields) -> Option<CalendarFile> {
        let url = self.string(v, path, "an https:// or http:// address")?;
        if !(url.starts_with("https://") || url.starts_with("http://")) {
            self.problem(
                path,
                format!("\"{url}\" is not an https:// or http:// address"),
            );
            return None;
        }
        let file_name = url.split(['?', '#']).next().unwrap_or("");
        let file_name = file_name.rsplit('/').next().unwrap_or("");
        let extension = file_name.rsplit_once('.').map_or("", |(_, e)| e);
        let format = self.calendar_format(f, extension, &url, path)?;
        let what = format!("calendar url {url}");
        let text = (self.read_source)(CalendarSource::Url { url: &url, format })
            .map_err(|e| self.problem(path, format!("{what}: {e}")))
            .ok()?;
        self.calendar_text(format, &text, path, &what)
    }

    /// The format `format` gives, or else the `extension` of `name`.
    fn calendar_format(
        &mut self,
        f: &Fields,
        extension: &str,
        name: &str,
        path: &[Step],
    ) -> Option<CalendarFormat> {
        match f.get("format") {
            Some((v, p)) => {
                let given = self.string(v, &p, "ics or holiday-cn")?;
                let format = CalendarFormat::of(&given);
                if format.is_none() {
                    self.problem(
                        &p,
                        format!("unknown format \"{given}\": use ics or holiday-cn"),
                    );
                }
                format
            }
            None => {
                let format = CalendarFormat::of_extension(extension);
                if format.is_none() {
                    self.problem(path, format!("say the format of {name} (format: ics or holiday-cn): its extension does not"));
                }
                format
            }
        }
    }

    /// The dates of `text`, read as `format`, from `what`.
    fn calendar_text(
        &mut self,
        format: CalendarFormat,
        text: &str,
        path: &[Step],
        what: &str,
    ) -> Option<CalendarFile> {
        read_calendar(format, text)
            .map_err(|e| self.problem(path, format!("{what} ({}): {e}", format.name())))
            .ok()
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
