//! `/savings`: what ebb saved over a window, from `ebb report`'s calculation (the same as
//! `GET /v1/report`): dollars by policy and by a tag per day as stacked bar charts, and the
//! measures in tables.

use super::{given, ok, scale, scroll, window_select, Nav, PageError, PageResult};
use crate::api::ApiState;
use crate::report::{Measures, Report, Window, NO_POLICY, UNTAGGED};
use axum::extract::rejection::QueryRejection;
use axum::extract::{Query, State};
use maud::{html, Markup};
use serde::Deserialize;
use std::collections::{BTreeMap, HashMap, HashSet};

/// The windows offered; any `since` the API takes works in the address too.
const WINDOWS: [(&str, &str); 4] = [
    ("7d", "7 days"),
    ("30d", "30 days"),
    ("90d", "90 days"),
    ("365d", "a year"),
];

/// How many colours the bars' series have, and so the most series a chart draws: the largest
/// ones, and the rest summed as [`OTHERS`].
const COLOURS: usize = 6;

/// The series that sums those past the largest `COLOURS - 1`.
const OTHERS: &str = "(others)";

/// The drawing's size, in SVG units; it scales to the page's width.
const WIDTH: f64 = 960.0;
const HEIGHT: f64 = 160.0;

/// The page's parameters: `GET /v1/report`'s.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct SavingsQuery {
    since: Option<String>,
    until: Option<String>,
    by: Option<String>,
}

pub(super) async fn page(
    State(state): State<ApiState>,
    query: Result<Query<SavingsQuery>, QueryRejection>,
) -> PageResult {
    let Query(q) = query?;
    let since = given(q.since).unwrap_or_else(|| "30d".to_string());
    let until = given(q.until);
    let by = given(q.by);
    let window = Window::parse(&since, until.as_deref(), state.clock.now())
        .map_err(PageError::bad_request)?;
    let r = state.report(window, by.as_deref()).await?;
    let body = html! {
        (form(&since, until.as_deref(), by.as_deref(), &r.tag_keys))
        (headline(&r))
        h2 #by-policy { "Saved by policy, per day" }
        (bars("policy", &series(&r, |d| &d.saved_by_policy)))
        (scroll("Savings by policy", groups("Policy", r.policies.iter().map(|p| (p.policy.clone(), &p.measures)))))
        @if let Some(key) = &r.by {
            h2 #by-tag { "Saved by " (key) ", per day" }
            (bars(key, &series(&r, |d| &d.saved_by_tag)))
            (scroll(&format!("Savings by {key}"), groups(key, r.tags.iter().map(|t| {
                (t.value.clone().unwrap_or_else(|| UNTAGGED.to_string()), &t.measures)
            }))))
        }
        h2 #by-day { "Per day" }
        (scroll("Savings per day", groups("Day (UTC)", r.days.iter().map(|d| (d.day.to_string(), &d.measures)))))
        p.note {
            "Stopped hours run from ebb's stop until the instance next ran, was terminated, or the window ended, "
            "priced at the on-demand price table; spot savings are replacements' hours on spot times the "
            "difference to the original's on-demand price. The same figures: "
            code { "ebb report" } " and " code { "GET /v1/report" } "."
        }
    };
    Ok(ok("Savings", Nav::Savings, body))
}

/// The window and tag form.
fn form(since: &str, until: Option<&str>, by: Option<&str>, keys: &[String]) -> Markup {
    html! {
        form.filters method="get" action="/savings" {
            (window_select(&WINDOWS, since))
            @if let Some(u) = until { input type="hidden" name="until" value=(u); }
            div {
                label for="by" { "Group by tag" }
                select #by name="by" {
                    option value="" selected[by.is_none()] { "no tag" }
                    @for key in keys {
                        option value=(key) selected[by == Some(key.as_str())] { (key) }
                    }
                    @if let Some(b) = by.filter(|b| !keys.iter().any(|k| k == b)) {
                        option value=(b) selected { (b) }
                    }
                }
            }
            button type="submit" { "Show" }
        }
    }
}

/// The totals in words and as facts.
fn headline(r: &Report) -> Markup {
    let t = &r.total;
    html! {
        p.headline {
            "ebb saved " strong { (usd(t.saved_usd)) } " from " (super::time(r.since)) " to " (super::time(r.until)) "."
        }
        dl.facts {
            dt { "Gross" } dd { (usd(t.saved_usd)) ": every stopped hour at its on-demand price" }
            dt { "Covered by commitments" } dd { (less_usd(t.commitment_covered_usd)) ": stopped hours reservations and Savings Plans would have covered, paid anyway (" (usd(t.unused_commitment_usd)) " of commitment left unused by the stops)" }
            @if t.reserved_covered_usd > 0.0 {
                dt { "Paid by reservations" } dd { (less_usd(t.reserved_covered_usd)) ": stopped hours of boxes stopped inside capacity reservations held outside ebb (stop.in_reservation: stop), paid anyway" }
            }
            @if t.image_storage_usd > 0.0 {
                dt { "Images of reclaimed boxes" } dd { (less_usd(t.image_storage_usd)) ": what they stored in " (hours(t.image_hours)) ", at most (snapshots at their volumes' full size)" }
            }
            dt { "Net" } dd { strong { (usd(t.net_saved_usd)) } }
            dt { "Still paid while stopped" } dd {
                (usd(t.stopped_box_cost_usd)) ": the stopped boxes' volumes and Elastic IPs, paid whether they run or not, so not taken off the net"
                @if t.unknown_box_cost_hours > 0.0 {
                    "; unknown for " (hours(t.unknown_box_cost_hours)) " stopped of boxes whose volumes or Elastic IPs could not be read or are not priced (while_stopped in the price table)"
                }
                @if t.stopped_box_cost_usd > 0.0 {
                    ". A policy's stopped.reclaim_after ends that for boxes stopped long, after a proven image"
                }
            }
            @if t.reclaimed_hours > 0.0 || t.image_hours > 0.0 {
                dt { "Reclaimed" } dd {
                    (usd(t.reclaim_saved_usd)) ": disks not paid in " (hours(t.reclaimed_hours)) " boxes stayed terminated after a proven image (Elastic IPs stay allocated, still paid)"
                    @if t.unpriced_reclaim_hours > 0.0 {
                        "; " (hours(t.unpriced_reclaim_hours)) " count no dollars: the image's volumes were not recorded, or the price table lacks their EBS or snapshot price"
                    }
                }
            }
            dt { "Kept stopped" } dd { (usd(t.stopped_saved_usd)) ": " (hours(t.stopped_hours)) " after " (count(t.stops, "stop", "stops")) " and " (count(t.hibernations, "hibernation", "hibernations")) }
            @if t.unpriced_stopped_hours > 0.0 {
                dt { "Not priced" } dd { (hours(t.unpriced_stopped_hours)) " of instance types the price table lacks (EBB_PRICES)" }
            }
            @for c in &r.other_currencies {
                dt { "In " (c.currency) } dd { (c.currency) " " (format!("{:.2}", c.saved)) ": " (hours(c.priced_stopped_hours)) " kept stopped in regions priced in " (c.currency) " (" (c.source) ", as of " (c.as_of) "), never added to the dollars" }
            }
            @if let (Some(first), Some(last)) = (r.uncounted_days.first(), r.uncounted_days.last()) {
                dt { "Not counted" } dd { (count(r.uncounted_days.len() as u64, "day", "days")) " from " (first) " to " (last) ": their state changes were pruned (EBB_RETENTION) before the report's roll-up reached them" }
            }
            @if t.charging_stopped_hours > 0.0 {
                dt { "Still charging" } dd { (hours(t.charging_stopped_hours)) " of stops their cloud still billed: no saving" }
            }
            dt { "On spot" } dd { (usd(t.spot_saved_usd)) ": " (hours(t.spot_hours)) " of replacements on spot, " (count(t.spot_moves, "move", "moves")) }
            dt { "People's overrides" } dd { (t.overrides) " made, " (hours(t.override_hours)) " in force" }
            dt { "People's starts" } dd { (count(t.people_starts, "instance", "instances")) " started by someone else while ebb's stop was ebb's last action on it" }
        }
    }
}

/// "1 stop", "2 stops".
fn count(n: u64, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

fn usd(v: f64) -> String {
    format!("${v:.2}")
}

/// Dollars taken off the gross: with a minus sign, except for none (no "−$0.00").
fn less_usd(v: f64) -> String {
    let shown = usd(v);
    if shown == "$0.00" {
        shown
    } else {
        format!("−{shown}")
    }
}

fn hours(v: f64) -> String {
    format!("{v:.2} h")
}

/// Each day's dollars by series name, the names in order of their total (largest first), at
/// most [`COLOURS`] of them, and each name's colour.
struct Series {
    days: Vec<(String, BTreeMap<String, f64>)>,
    names: Vec<String>,
    colours: HashMap<String, usize>,
}

/// The series `of` each day of `r`: the [`COLOURS`] largest, or the largest but one and
/// [`OTHERS`] for the rest, so that a tag with thousands of values draws a handful of series.
fn series(
    r: &Report,
    of: impl Fn(&crate::report::DayMeasures) -> &BTreeMap<String, f64>,
) -> Series {
    let mut totals: HashMap<&str, f64> = HashMap::new();
    for d in &r.days {
        for (name, v) in of(d) {
            *totals.entry(name).or_default() += v;
        }
    }
    let mut names: Vec<(&str, f64)> = totals.into_iter().collect();
    names.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(b.0)));
    let others = names.len() > COLOURS;
    if others {
        names.truncate(COLOURS - 1);
    }
    let shown: HashSet<&str> = names.iter().map(|(n, _)| *n).collect();
    let days = r
        .days
        .iter()
        .map(|d| {
            let mut values: BTreeMap<String, f64> = BTreeMap::new();
            for (name, v) in of(d) {
                let series = if shown.contains(name.as_str()) {
                    name.as_str()
                } else {
                    OTHERS
                };
                *values.entry(series.to_string()).or_default() += v;
            }
            (d.day.format("%d %b").to_string(), values)
        })
        .collect();
    let mut names: Vec<String> = names.into_iter().map(|(n, _)| n.to_string()).collect();
    if others {
        names.push(OTHERS.to_string());
    }
    let colours = names
        .iter()
        .enumerate()
        .map(|(n, name)| (name.clone(), n % COLOURS))
        .collect();
    Series {
        days,
        names,
        colours,
    }
}

/// One series' part of one day's bar.
struct Block {
    class: String,
    x: f64,
    y: f64,
    height: f64,
    title: String,
}

/// A stacked bar per day of the dollars of each series, with a legend and the figures in
/// words for screen readers.
fn bars(what: &str, s: &Series) -> Markup {
    let most = s
        .days
        .iter()
        .map(|(_, v)| v.values().sum::<f64>())
        .fold(0.0, f64::max);
    let slot = WIDTH / s.days.len().max(1) as f64;
    let step = scale::step(most);
    let scale = HEIGHT / scale::top(step);
    let colour = |name: &str| format!("series-{}", s.colours.get(name).copied().unwrap_or(0));
    let words: Vec<String> = s
        .names
        .iter()
        .map(|n| {
            let total: f64 = s.days.iter().filter_map(|(_, v)| v.get(n)).sum();
            format!("{n} {}", usd(total))
        })
        .collect();
    let summary = if words.is_empty() {
        "Nothing saved in this window.".to_string()
    } else {
        format!("Dollars saved by {what}: {}.", words.join(", "))
    };
    let mut blocks = Vec::new();
    for (n, (day, values)) in s.days.iter().enumerate() {
        let mut top = HEIGHT;
        for name in &s.names {
            if let Some(v) = values.get(name).filter(|v| **v > 0.0) {
                let height = v * scale;
                top -= height;
                blocks.push(Block {
                    class: colour(name),
                    x: n as f64 * slot + slot * 0.1,
                    y: top,
                    height,
                    title: format!("{day}: {name} {}", usd(*v)),
                });
            }
        }
    }
    let id = format!("bars-{}", super::percent_encode(what));
    html! {
        figure.chart.bars {
            div.plot {
            (scale::labels(step, "USD"))
            svg viewBox=(format!("0 0 {WIDTH} {HEIGHT}")) role="img" preserveAspectRatio="none"
                aria-labelledby=(format!("{id}-title {id}-desc")) {
                title #(format!("{id}-title")) { "Dollars saved per day by " (what) }
                desc #(format!("{id}-desc")) { (summary) }
                (scale::grid(WIDTH, HEIGHT))
                @for b in &blocks {
                    rect class=(b.class) x=(format!("{:.1}", b.x)) y=(format!("{:.1}", b.y))
                        width=(format!("{:.1}", slot * 0.8)) height=(format!("{:.1}", b.height)) {
                        title { (b.title) }
                    }
                }
            }
            div.axis aria-hidden="true" {
                @if let Some((first, _)) = s.days.first() { span { (first) } }
                @if let Some((last, _)) = s.days.last() { span { (last) } }
            }
            }
            figcaption {
                ul.legend {
                    @for name in &s.names {
                        li { span class=(format!("swatch {}", colour(name))) {} (name) }
                    }
                }
                p.visually-hidden { (summary) }
            }
        }
    }
}

/// A table of measures, a row per group named in its first column.
fn groups<'a>(first: &str, rows: impl Iterator<Item = (String, &'a Measures)>) -> Markup {
    const COLUMNS: [&str; 11] = [
        "Saved",
        "By stops",
        "On spot",
        "Stops",
        "Hibernations",
        "Hours stopped",
        "Spot moves",
        "Hours on spot",
        "Overrides",
        "Override hours",
        "People's starts",
    ];
    let figures = |m: &Measures| -> [String; 11] {
        [
            usd(m.saved_usd),
            usd(m.stopped_saved_usd),
            usd(m.spot_saved_usd),
            m.stops.to_string(),
            m.hibernations.to_string(),
            format!("{:.2}", m.stopped_hours),
            m.spot_moves.to_string(),
            format!("{:.2}", m.spot_hours),
            m.overrides.to_string(),
            format!("{:.2}", m.override_hours),
            m.people_starts.to_string(),
        ]
    };
    html! {
        table.cards {
            thead {
                tr {
                    th scope="col" { (first) }
                    @for column in COLUMNS { th scope="col" { (column) } }
                }
            }
            tbody {
                @for (name, m) in rows {
                    tr {
                        th scope="row" { @if name == NO_POLICY { span.note { (name) } } @else { (name) } }
                        @for (column, figure) in COLUMNS.iter().zip(figures(m)) {
                            td.num data-label=(column) { (figure) }
                        }
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::{DayMeasures, Window};

    #[test]
    fn a_tag_with_many_values_draws_the_largest_and_the_others() {
        // 40 values of a tag on each of two days: value k saved $k a day.
        let day = |d: &str| DayMeasures {
            day: d.parse().unwrap(),
            measures: Measures::default(),
            saved_by_policy: BTreeMap::new(),
            saved_by_tag: (1..=40)
                .map(|k| (format!("team-{k:02}"), k as f64))
                .collect(),
        };
        let window = Window::parse(
            "2026-11-30T00:00:00Z",
            Some("2026-12-02T00:00:00Z"),
            "2026-12-02T00:00:00Z".parse().unwrap(),
        )
        .unwrap();
        let r = Report {
            since: window.since,
            until: window.until,
            by: Some("team".into()),
            total: Measures::default(),
            policies: Vec::new(),
            tags: Vec::new(),
            days: vec![day("2026-11-30"), day("2026-12-01")],
            groups: Vec::new(),
            tag_keys: Vec::new(),
            other_currencies: Vec::new(),
            uncounted_days: Vec::new(),
        };
        let s = series(&r, |d| &d.saved_by_tag);
        assert_eq!(
            s.names,
            ["team-40", "team-39", "team-38", "team-37", "team-36", OTHERS]
        );
        // The others are $1 + ... + $35 = $630 a day; every series has its own colour.
        assert_eq!(s.days[0].1[OTHERS], 630.0);
        assert_eq!(s.days[1].1.len(), COLOURS);
        let mut colours: Vec<usize> = s.colours.values().copied().collect();
        colours.sort();
        assert_eq!(colours, [0, 1, 2, 3, 4, 5]);
        let chart = bars("team", &s).into_string();
        assert_eq!(chart.matches("<rect").count(), 2 * COLOURS);
        assert!(chart.contains("(others) $1260.00"), "{chart}");
        // The tallest bar is $630 + $36 + ... + $40 = $820: the scale goes to $1,000.
        for tick in ["$0", "$250", "$500", "$750", "$1,000"] {
            assert!(chart.contains(&format!(">{tick}</span>")), "{chart}");
        }
    }

    #[test]
    fn nothing_taken_off_shows_no_minus() {
        assert_eq!(less_usd(0.001), "$0.00");
        assert_eq!(less_usd(12.5), "−$12.50");
    }
}
