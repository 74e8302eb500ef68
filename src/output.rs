//! How decisions are shown: the JSON array other tools read, and an aligned table for people.

use crate::engine::Decision;
use serde::Serialize;

/// One element of `ebb plan --format json`: exactly the fields DESIGN.md promises.
#[derive(Debug, Serialize)]
struct PlanItem<'a> {
    instance: &'a str,
    action: &'a str,
    policy: Option<&'a str>,
    code: &'a str,
    reason: &'a str,
}

/// The decisions as a JSON array of `{instance, action, policy, code, reason}`.
pub fn plan_json(decisions: &[Decision]) -> String {
    let items: Vec<PlanItem> = decisions
        .iter()
        .map(|d| PlanItem {
            instance: &d.instance,
            action: d.action.as_str(),
            policy: d.policy.as_deref(),
            code: d.code.as_str(),
            reason: &d.reason,
        })
        .collect();
    let mut text = serde_json::to_string_pretty(&items).unwrap_or_else(|_| "[]".into());
    text.push('\n');
    text
}

/// The decisions as an aligned table; the reason comes last so long reasons don't push the
/// columns apart. Dry-run decisions are marked.
pub fn plan_table(decisions: &[Decision]) -> String {
    let rows: Vec<[String; 5]> = decisions
        .iter()
        .map(|d| {
            let action = if d.dry_run {
                format!("{} (dry run)", d.action)
            } else {
                d.action.to_string()
            };
            [
                d.instance.clone(),
                action,
                d.policy.clone().unwrap_or_else(|| "-".into()),
                d.code.to_string(),
                d.reason.clone(),
            ]
        })
        .collect();
    table(&["INSTANCE", "ACTION", "POLICY", "CODE", "REASON"], &rows)
}

/// Left-aligned columns separated by two spaces; the last column is not padded.
pub fn table<const N: usize>(header: &[&str; N], rows: &[[String; N]]) -> String {
    let mut widths = header.map(|h| h.chars().count());
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let mut out = String::new();
    let mut line = |cells: &mut dyn Iterator<Item = &str>| {
        let mut text = String::new();
        for (i, cell) in cells.enumerate() {
            if i + 1 < N {
                text += &format!("{cell:<width$}  ", width = widths[i]);
            } else {
                text += cell;
            }
        }
        out += text.trim_end();
        out.push('\n');
    };
    line(&mut header.iter().copied());
    for row in rows {
        line(&mut row.iter().map(String::as_str));
    }
    out
}
