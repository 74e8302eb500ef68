//! Calendars kept in public formats, which a calendar's `file` names: iCalendar (`.ics`, RFC
//! 5545), whose all-day events are days that open no window; and the JSON of the holiday-cn
//! data set (`{"days": [{"name", "date", "isOffDay"}]}`), whose off days are skipped and whose
//! other days are make-up working days (China's 调休). Pure: the text in, the dates out, or
//! what is wrong with it.

use super::DateRange;
use chrono::{Days, NaiveDate};
use serde::Deserialize;

/// The formats a calendar file may be in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum CalendarFormat {
    /// iCalendar: each all-day `VEVENT` is a date, or a range of dates, that opens no window.
    Ics,
    /// holiday-cn: each day with `isOffDay: true` opens no window; each with `false` is a
    /// working day whatever its weekday.
    HolidayCn,
}

impl CalendarFormat {
    /// Its name, as a calendar's `format` gives it.
    pub fn name(self) -> &'static str {
        match self {
            CalendarFormat::Ics => "ics",
            CalendarFormat::HolidayCn => "holiday-cn",
        }
    }

    /// The format `name` names (`ics`, `holiday-cn`).
    pub fn of(name: &str) -> Option<CalendarFormat> {
        [CalendarFormat::Ics, CalendarFormat::HolidayCn]
            .into_iter()
            .find(|f| f.name() == name)
    }

    /// The format a file's extension suggests: `.ics` or `.json`.
    pub fn of_extension(extension: &str) -> Option<CalendarFormat> {
        match extension.to_ascii_lowercase().as_str() {
            "ics" | "ical" => Some(CalendarFormat::Ics),
            "json" => Some(CalendarFormat::HolidayCn),
            _ => None,
        }
    }
}

/// What a calendar file says: the dates that open no window, and the working days.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CalendarFile {
    /// Dates that open no window.
    pub dates: Vec<DateRange>,
    /// Working days whatever their weekday.
    pub workdays: Vec<DateRange>,
}

impl CalendarFile {
    /// The years it names a date of: a copy fetched again that names fewer is partial.
    pub fn years(&self) -> std::collections::BTreeSet<i32> {
        use chrono::Datelike;
        self.dates
            .iter()
            .chain(&self.workdays)
            .flat_map(|d| d.first.year()..=d.last.year())
            .collect()
    }
}

/// Reads `text` as `format`.
pub fn read_calendar(format: CalendarFormat, text: &str) -> Result<CalendarFile, String> {
    match format {
        CalendarFormat::Ics => ics(text),
        CalendarFormat::HolidayCn => holiday_cn(text),
    }
}

/// The all-day events of an iCalendar text. A timed or recurring event is refused, not read
/// as a day: a holiday calendar names whole days, and a day read wrong opens or closes a
/// window wrongly.
fn ics(text: &str) -> Result<CalendarFile, String> {
    let mut file = CalendarFile::default();
    let mut calendars = 0;
    for calendar in ical::IcalParser::new(text.as_bytes()) {
        let calendar = calendar.map_err(|e| format!("not iCalendar: {e}"))?;
        calendars += 1;
        for (k, event) in calendar.events.iter().enumerate() {
            let property = |name: &str| event.properties.iter().find(|p| p.name == name);
            let summary = property("SUMMARY")
                .and_then(|p| p.value.clone())
                .unwrap_or_else(|| format!("event {}", k + 1));
            let what = |problem: &str| format!("event \"{summary}\": {problem}");
            if property("RRULE").is_some() || property("RDATE").is_some() {
                return Err(what(
                    "a recurring event is not read: give each year's dates as events of their own",
                ));
            }
            let start = property("DTSTART").ok_or_else(|| what("no DTSTART"))?;
            let first = all_day(start).map_err(|e| what(&e))?;
            // DTEND is the day after the last (exclusive); without one, the event is a day.
            let last = match property("DTEND") {
                Some(end) => {
                    let end = all_day(end).map_err(|e| what(&e))?;
                    end.checked_sub_days(Days::new(1))
                        .filter(|last| *last >= first)
                        .ok_or_else(|| what("DTEND is not after DTSTART"))?
                }
                None => first,
            };
            file.dates.push(DateRange { first, last });
        }
    }
    if calendars == 0 {
        return Err("not iCalendar: no BEGIN:VCALENDAR".to_string());
    }
    Ok(file)
}

/// The date of an all-day `DTSTART` or `DTEND` (`VALUE=DATE`, `YYYYMMDD`).
fn all_day(property: &ical::property::Property) -> Result<NaiveDate, String> {
    let value = property.value.as_deref().unwrap_or_default().trim();
    NaiveDate::parse_from_str(value, "%Y%m%d").map_err(|_| {
        format!(
            "{} {value} is not a whole day (YYYYMMDD): only all-day events are read",
            property.name
        )
    })
}

/// holiday-cn's JSON of one year.
#[derive(Deserialize)]
struct HolidayCnYear {
    days: Vec<HolidayCnDay>,
}

#[derive(Deserialize)]
struct HolidayCnDay {
    date: NaiveDate,
    #[serde(rename = "isOffDay")]
    is_off_day: bool,
}

/// The off days and make-up working days of a holiday-cn year.
fn holiday_cn(text: &str) -> Result<CalendarFile, String> {
    let year: HolidayCnYear =
        serde_json::from_str(text).map_err(|e| format!("not holiday-cn's JSON: {e}"))?;
    let mut file = CalendarFile::default();
    for day in year.days {
        let range = DateRange {
            first: day.date,
            last: day.date,
        };
        match day.is_off_day {
            true => file.dates.push(range),
            false => file.workdays.push(range),
        }
    }
    Ok(file)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(s: &str) -> NaiveDate {
        s.parse().unwrap()
    }

    #[test]
    fn all_day_events_are_dates_with_dtend_exclusive() {
        let text = "BEGIN:VCALENDAR\r\nVERSION:2.0\r\nPRODID:-//test//EN\r\nBEGIN:VEVENT\r\nUID:1\r\nSUMMARY:春节\r\nDTSTART;VALUE=DATE:20260215\r\nDTEND;VALUE=DATE:20260224\r\nEND:VEVENT\r\nBEGIN:VEVENT\r\nUID:2\r\nSUMMARY:元旦\r\nDTSTART;VALUE=DATE:20260101\r\nEND:VEVENT\r\nEND:VCALENDAR\r\n";
        let file = read_calendar(CalendarFormat::Ics, text).unwrap();
        let ranges: Vec<(NaiveDate, NaiveDate)> =
            file.dates.iter().map(|r| (r.first, r.last)).collect();
        assert_eq!(
            ranges,
            [
                (d("2026-02-15"), d("2026-02-23")),
                (d("2026-01-01"), d("2026-01-01"))
            ]
        );
    }

    #[test]
    fn timed_recurring_and_malformed_events_are_refused() {
        let event = |body: &str| {
            format!("BEGIN:VCALENDAR\nVERSION:2.0\nBEGIN:VEVENT\nSUMMARY:x\n{body}\nEND:VEVENT\nEND:VCALENDAR\n")
        };
        for (body, says) in [
            ("DTSTART:20260215T090000Z", "not a whole day"),
            (
                "DTSTART;VALUE=DATE:20260101\nRRULE:FREQ=YEARLY",
                "recurring",
            ),
            (
                "DTSTART;VALUE=DATE:20260105\nDTEND;VALUE=DATE:20260105",
                "not after DTSTART",
            ),
            ("DTEND;VALUE=DATE:20260105", "no DTSTART"),
        ] {
            let err = read_calendar(CalendarFormat::Ics, &event(body)).unwrap_err();
            assert!(err.contains(says), "{body}: {err}");
        }
        let err = read_calendar(CalendarFormat::Ics, "holidays: []").unwrap_err();
        assert!(err.contains("not iCalendar"), "{err}");
    }

    #[test]
    fn holiday_cn_off_days_are_skipped_and_the_others_are_workdays() {
        let text = r#"{"year": 2026, "papers": [], "days": [
            {"name": "春节", "date": "2026-02-15", "isOffDay": true},
            {"name": "春节", "date": "2026-02-14", "isOffDay": false}]}"#;
        let file = read_calendar(CalendarFormat::HolidayCn, text).unwrap();
        assert_eq!(file.dates[0].first, d("2026-02-15"));
        assert_eq!(file.workdays[0].first, d("2026-02-14"));
        let err = read_calendar(
            CalendarFormat::HolidayCn,
            "{\"days\": [{\"date\": \"soon\"}]}",
        )
        .unwrap_err();
        assert!(err.contains("not holiday-cn's JSON"), "{err}");
    }
}
