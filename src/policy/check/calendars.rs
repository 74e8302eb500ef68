//! The `calendars` section: named lists of dates that work hours can skip.

use super::{child, keys, CalendarDef, Checker};
use crate::policy::yaml::{self, Step, Value};
use crate::schedule::{Calendar, DateRange};
use std::str::FromStr;
use std::sync::Arc;

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
            let Some(f) = self.fields(body, &cpath, "a calendar", keys::CALENDAR) else {
                continue;
            };
            if let Some((v, p)) = f.get("description") {
                self.string(v, &p, "text");
            }
            let Some((dv, dp)) = f.get("dates") else {
                self.missing(
                    &cpath,
                    "dates",
                    format!("calendar \"{name}\" needs \"dates\""),
                );
                continue;
            };
            let Some(items) = self.seq(
                dv,
                &dp,
                "a list of dates (YYYY-MM-DD or YYYY-MM-DD..YYYY-MM-DD)",
            ) else {
                continue;
            };
            let mut dates = Vec::new();
            let mut ok = true;
            for (i, item) in items.iter().enumerate() {
                match self.parsed(
                    item,
                    &child(&dp, Step::Index(i)),
                    "a date",
                    DateRange::from_str,
                ) {
                    Some(d) => dates.push(d),
                    None => ok = false,
                }
            }
            if ok {
                let key = Step::Key(name.clone());
                out.push(CalendarDef {
                    calendar: Arc::new(Calendar { name, dates }),
                    path: child(path, key),
                });
            }
        }
        out
    }
}
