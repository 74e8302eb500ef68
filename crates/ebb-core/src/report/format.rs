//! A report as an aligned table for people and as CSV for spreadsheets (JSON is the
//! [`Report`]'s own serialisation).

use super::{Measures, Report, UNTAGGED};
use crate::spreadsheet::safe_cell;
use std::fmt::Write as _;

/// How a column is read from the measures.
type Column = fn(&Measures) -> String;

/// The columns after a row's name, with how each is read from the measures.
const COLUMNS: [(&str, Column); 29] = [
    ("saved_usd", |m| format!("{:.2}", m.saved_usd)),
    ("stopped_saved_usd", |m| {
        format!("{:.2}", m.stopped_saved_usd)
    }),
    ("spot_saved_usd", |m| format!("{:.2}", m.spot_saved_usd)),
    ("stops", |m| m.stops.to_string()),
    ("hibernations", |m| m.hibernations.to_string()),
    ("stopped_hours", |m| format!("{:.2}", m.stopped_hours)),
    ("unpriced_stopped_hours", |m| {
        format!("{:.2}", m.unpriced_stopped_hours)
    }),
    ("charging_stopped_hours", |m| {
        format!("{:.2}", m.charging_stopped_hours)
    }),
    ("spot_moves", |m| m.spot_moves.to_string()),
    ("spot_hours", |m| format!("{:.2}", m.spot_hours)),
    ("overrides", |m| m.overrides.to_string()),
    ("override_hours", |m| format!("{:.2}", m.override_hours)),
    ("people_starts", |m| m.people_starts.to_string()),
    ("group_saved_usd", |m| format!("{:.2}", m.group_saved_usd)),
    ("group_scale_downs", |m| m.group_scale_downs.to_string()),
    ("group_hours", |m| format!("{:.2}", m.group_hours)),
    ("net_saved_usd", |m| format!("{:.2}", m.net_saved_usd)),
    ("commitment_covered_usd", |m| {
        format!("{:.2}", m.commitment_covered_usd)
    }),
    ("unused_commitment_usd", |m| {
        format!("{:.2}", m.unused_commitment_usd)
    }),
    ("reserved_covered_usd", |m| {
        format!("{:.2}", m.reserved_covered_usd)
    }),
    ("stopped_box_cost_usd", |m| {
        format!("{:.2}", m.stopped_box_cost_usd)
    }),
    ("unknown_box_cost_hours", |m| {
        format!("{:.2}", m.unknown_box_cost_hours)
    }),
    ("reservation_hours", |m| {
        format!("{:.2}", m.reservation_hours)
    }),
    ("reservation_cost_usd", |m| {
        format!("{:.2}", m.reservation_cost_usd)
    }),
    ("reclaimed_hours", |m| format!("{:.2}", m.reclaimed_hours)),
    ("reclaim_saved_usd", |m| {
        format!("{:.2}", m.reclaim_saved_usd)
    }),
    ("image_hours", |m| format!("{:.2}", m.image_hours)),
    ("image_storage_usd", |m| {
        format!("{:.2}", m.image_storage_usd)
    }),
    ("unpriced_reclaim_hours", |m| {
        format!("{:.2}", m.unpriced_reclaim_hours)
    }),
];

/// The rows of a report: (group, name, measures): the total, each policy, each tag value, each
/// Auto Scaling group (`asg`, named `region/name`).
fn rows(r: &Report) -> Vec<(String, String, &Measures)> {
    let mut rows = vec![("total".to_string(), "all".to_string(), &r.total)];
    for p in &r.policies {
        rows.push(("policy".into(), p.policy.clone(), &p.measures));
    }
    if let Some(key) = &r.by {
        for t in &r.tags {
            let value = t.value.clone().unwrap_or_else(|| UNTAGGED.to_string());
            rows.push((format!("tag:{key}"), value, &t.measures));
        }
    }
    for g in &r.groups {
        rows.push((
            "asg".into(),
            format!("{}/{}", g.region, g.group),
            &g.measures,
        ));
    }
    rows
}

/// The report as aligned tables: a headline, then by policy and by tag.
pub fn table(r: &Report) -> String {
    let t = &r.total;
    let mut out = format!(
        "ebb saved ${:.2} from {} to {}: ${:.2} by keeping instances stopped {:.2} h ({}, {}), ${:.2} on spot ({:.2} h); people made {} ({:.2} h) and started {} ebb had stopped\n",
        t.saved_usd,
        r.since.format("%Y-%m-%dT%H:%M:%SZ"),
        r.until.format("%Y-%m-%dT%H:%M:%SZ"),
        t.stopped_saved_usd,
        t.stopped_hours,
        count(t.stops, "stop", "stops"),
        count(t.hibernations, "hibernation", "hibernations"),
        t.spot_saved_usd,
        t.spot_hours,
        count(t.overrides, "override", "overrides"),
        t.override_hours,
        count(t.people_starts, "instance", "instances"),
    );
    let _ = writeln!(out, "{}", gross_to_net(t));
    if t.group_scale_downs > 0 || t.group_hours > 0.0 {
        let _ = writeln!(
            out,
            "Auto Scaling groups: ${:.2} by scaling {} down ({}), {:.2} instance-hours their members did not run",
            t.group_saved_usd,
            count(r.groups.len() as u64, "group", "groups"),
            count(t.group_scale_downs, "scale-down", "scale-downs"),
            t.group_hours,
        );
    }
    if t.reservation_hours > 0.0 {
        let _ = writeln!(
            out,
            "capacity reservations for starts (start.reserve_capacity): {:.2} h held, ${:.2} at on-demand prices, taken off the net",
            t.reservation_hours, t.reservation_cost_usd,
        );
    }
    if t.reclaimed_hours > 0.0 || t.image_hours > 0.0 {
        let _ = writeln!(
            out,
            "reclaimed boxes (stopped.reclaim_after): ${:.2} of disks not paid in {:.2} h terminated (Elastic IPs stay allocated, still paid); their images kept {:.2} h stored up to ${:.2}, taken off the net{}",
            t.reclaim_saved_usd,
            t.reclaimed_hours,
            t.image_hours,
            t.image_storage_usd,
            match t.unpriced_reclaim_hours > 0.0 {
                true => format!("; {:.2} h count no dollars: their image's volumes were not recorded, or the price table lacks their EBS or snapshot price (while_stopped)", t.unpriced_reclaim_hours),
                false => String::new(),
            }
        );
    }
    if t.unpriced_stopped_hours > 0.0 {
        let _ = writeln!(
            out,
            "{:.2} stopped hours are of instance types the price table lacks and count no dollars (set EBB_PRICES){}",
            t.unpriced_stopped_hours,
            match r.other_currencies.is_empty() {
                true => "",
                false => "; those of regions priced in another currency are counted in it below",
            }
        );
    }
    if t.charging_stopped_hours > 0.0 {
        let _ = writeln!(
            out,
            "{:.2} stopped hours are of stops their cloud still billed (stopped, still charging) and count no dollars",
            t.charging_stopped_hours
        );
    }
    if let (Some(first), Some(last)) = (r.uncounted_days.first(), r.uncounted_days.last()) {
        let _ = writeln!(
            out,
            "not counted: {} from {first} to {last}, whose state changes were pruned (EBB_RETENTION) before the report's roll-up reached them",
            count(r.uncounted_days.len() as u64, "day", "days"),
        );
    }
    for c in &r.other_currencies {
        let _ = writeln!(
            out,
            "in {}, apart from the dollars (prices from {}, as of {}): {:.2} {} saved, {:.2} by keeping instances stopped {:.2} h, {:.2} by scaling groups down",
            c.currency, c.source, c.as_of, c.saved, c.currency, c.stopped_saved, c.priced_stopped_hours, c.group_saved,
        );
    }
    let header: Vec<String> = std::iter::once("GROUP".to_string())
        .chain(std::iter::once("NAME".to_string()))
        .chain(COLUMNS.iter().map(|(name, _)| name.to_uppercase()))
        .collect();
    let mut lines = vec![header];
    for (group, name, m) in rows(r) {
        let mut line = vec![group, name];
        line.extend(COLUMNS.iter().map(|(_, value)| value(m)));
        lines.push(line);
    }
    let widths: Vec<usize> = (0..lines[0].len())
        .map(|c| {
            lines
                .iter()
                .map(|l| l[c].chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    for line in &lines {
        let cells: Vec<String> = line
            .iter()
            .zip(&widths)
            .map(|(cell, w)| format!("{cell:<w$}"))
            .collect();
        out.push_str(cells.join("  ").trim_end());
        out.push('\n');
    }
    out
}

/// The report as CSV: `group,name,` then every measure; rows for the total, each policy, each
/// value of the tag (`tag:KEY`), each Auto Scaling group (`asg`) and each day (`day`, named by
/// its date).
pub fn csv(r: &Report) -> String {
    let mut out = String::from("group,name");
    for (name, _) in COLUMNS {
        out.push(',');
        out.push_str(name);
    }
    out.push('\n');
    let days = r
        .days
        .iter()
        .map(|d| ("day".to_string(), d.day.to_string(), &d.measures));
    for (group, name, m) in rows(r).into_iter().chain(days) {
        let _ = write!(out, "{},{}", field(&group), field(&name));
        for (_, value) in COLUMNS {
            out.push(',');
            out.push_str(&value(m));
        }
        out.push('\n');
    }
    out
}

/// How the report gets from gross to net, in a line: what commitments would have covered of
/// the stopped hours, and what reservations held outside ebb paid for; then what the stopped
/// boxes still paid, which is not taken off the net because a box pays for its disks whether
/// it runs or not.
pub fn gross_to_net(t: &Measures) -> String {
    let mut line = format!(
        "gross ${:.2}, net ${:.2}: less ${:.2} of stopped hours reservations and Savings Plans would have covered (${:.2} of commitment left unused by the stops)",
        t.saved_usd, t.net_saved_usd, t.commitment_covered_usd, t.unused_commitment_usd,
    );
    if t.reserved_covered_usd > 0.0 {
        let _ = write!(
            line,
            ", less ${:.2} of stopped hours capacity reservations held outside ebb paid for (stop.in_reservation: stop)",
            t.reserved_covered_usd
        );
    }
    if t.image_storage_usd > 0.0 {
        let _ = write!(
            line,
            ", less ${:.2} the images of reclaimed boxes stored",
            t.image_storage_usd
        );
    }
    let _ = write!(
        line,
        "\nstill paid while stopped: ${:.2} for the stopped boxes' volumes and Elastic IPs, paid whether they run or not, so not taken off the net",
        t.stopped_box_cost_usd
    );
    if t.unknown_box_cost_hours > 0.0 {
        let _ = write!(
            line,
            ", and unknown for {:.2} stopped hours of boxes whose volumes or Elastic IPs could not be read or are not priced (while_stopped in the price table)",
            t.unknown_box_cost_hours
        );
    }
    if t.stopped_box_cost_usd > 0.0 {
        line.push_str(
            "; a policy's stopped.reclaim_after ends that for boxes stopped long, after a proven image",
        );
    }
    line
}

/// "1 stop", "2 stops".
fn count(n: u64, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// A CSV field that no spreadsheet runs as a formula ([`safe_cell`]: tag values are anyone's
/// text), quoted when it holds a comma, a quote or a line break.
fn field(text: &str) -> String {
    let text = safe_cell(text);
    if text.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", text.replace('"', "\"\""))
    } else {
        text
    }
}

#[cfg(test)]
mod tests {
    use super::field;

    #[test]
    fn a_name_or_tag_value_a_spreadsheet_would_run_is_neutralised() {
        assert_eq!(
            field("=HYPERLINK(\"http://evil.example\",\"ml\")"),
            "\"'=HYPERLINK(\"\"http://evil.example\"\",\"\"ml\"\")\""
        );
        assert_eq!(field("@cmd"), "'@cmd");
        assert_eq!(field("ml"), "ml");
        assert_eq!(field("a,b"), "\"a,b\"");
    }
}
