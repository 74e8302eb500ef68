//! The audit log as other tools read it: JSON and CSV exports, and reading an export back to
//! verify its hash chain.

use crate::spreadsheet::{cell_text, safe_cell};
use crate::store::{hex, unhex, AuditEntry, NewAuditEntry, Outcome};
use chrono::{DateTime, SecondsFormat, Utc};
use serde::{Deserialize, Serialize};

/// One element of `ebb audit --format json`, and one CSV record: the documented fields, with
/// the chain's (`seq`, `intent_seq`, `prev_hash`, `hash`) so that an export can be verified.
#[derive(Debug, Serialize)]
struct AuditItem<'a> {
    seq: i64,
    at: String,
    actor: &'a str,
    instance: Option<&'a str>,
    region: Option<&'a str>,
    action: &'a str,
    outcome: &'a str,
    policy: Option<&'a str>,
    policy_version: Option<&'a str>,
    code: Option<&'a str>,
    reason: &'a str,
    dry_run: bool,
    request_id: Option<&'a str>,
    error: Option<&'a str>,
    intent_seq: Option<i64>,
    prev_hash: String,
    hash: String,
}

/// The fields of [`AuditItem`], in its order: the CSV header.
const AUDIT_FIELDS: [&str; 17] = [
    "seq",
    "at",
    "actor",
    "instance",
    "region",
    "action",
    "outcome",
    "policy",
    "policy_version",
    "code",
    "reason",
    "dry_run",
    "request_id",
    "error",
    "intent_seq",
    "prev_hash",
    "hash",
];

fn audit_item(a: &AuditEntry) -> AuditItem<'_> {
    let e = &a.entry;
    AuditItem {
        seq: a.seq,
        at: e.at.to_rfc3339_opts(SecondsFormat::Micros, true),
        actor: &e.actor,
        instance: e.instance.as_deref(),
        region: e.region.as_deref(),
        action: &e.action,
        outcome: e.outcome.as_str(),
        policy: e.policy.as_deref(),
        policy_version: e.policy_version.as_deref(),
        code: e.code.as_deref(),
        reason: &e.reason,
        dry_run: e.dry_run,
        request_id: e.request_id.as_deref(),
        error: e.error.as_deref(),
        intent_seq: e.intent_seq,
        prev_hash: hex(&a.prev_hash),
        hash: hex(&a.hash),
    }
}

/// One row as `ebb audit --format json` writes it (with `seq` and the chain's hashes): the
/// `data` of the events sent to `EBB_EVENTS_URL`.
pub fn audit_row_json(entry: &AuditEntry) -> serde_json::Value {
    serde_json::to_value(audit_item(entry)).unwrap_or_default()
}

/// An exported row read back.
#[derive(Debug, Deserialize)]
struct ExportedRow {
    seq: i64,
    at: DateTime<Utc>,
    actor: String,
    instance: Option<String>,
    region: Option<String>,
    action: String,
    outcome: String,
    policy: Option<String>,
    policy_version: Option<String>,
    code: Option<String>,
    reason: String,
    dry_run: bool,
    request_id: Option<String>,
    error: Option<String>,
    intent_seq: Option<i64>,
    prev_hash: String,
    hash: String,
}

impl ExportedRow {
    /// The row with its text cells as they were before [`safe_cell`].
    fn restored(mut self) -> Self {
        for text in [&mut self.actor, &mut self.action, &mut self.reason] {
            *text = cell_text(std::mem::take(text));
        }
        for text in [
            &mut self.instance,
            &mut self.region,
            &mut self.policy,
            &mut self.policy_version,
            &mut self.code,
            &mut self.request_id,
            &mut self.error,
        ] {
            *text = text.take().map(cell_text);
        }
        self
    }
}

/// Why an export cannot be read back.
#[derive(Debug, thiserror::Error)]
pub enum ExportError {
    /// Not the JSON `ebb audit --format json` writes.
    #[error("{0}")]
    Json(#[from] serde_json::Error),
    /// Not the CSV `ebb audit --format csv` writes.
    #[error("{0}")]
    Csv(#[from] csv::Error),
    /// A field holds what no row holds.
    #[error("row {seq}: {problem}")]
    Field {
        /// The row.
        seq: i64,
        /// What is wrong.
        problem: String,
    },
}

/// The rows of an export (`ebb audit --format json` or `csv`, `GET /v1/audit`), sorted by
/// `seq`. In CSV an empty field reads as absent.
pub fn parse_audit_export(text: &str) -> Result<Vec<AuditEntry>, ExportError> {
    let rows: Vec<ExportedRow> = if text.trim_start().starts_with('[') {
        serde_json::from_str(text)?
    } else {
        let rows: Vec<ExportedRow> = csv::Reader::from_reader(text.as_bytes())
            .deserialize()
            .collect::<Result<_, _>>()?;
        rows.into_iter().map(ExportedRow::restored).collect()
    };
    let mut entries = rows
        .into_iter()
        .map(|r| {
            let field = |problem: String| ExportError::Field {
                seq: r.seq,
                problem,
            };
            let bytes = |name: &str, v: &str| {
                unhex(v).ok_or_else(|| field(format!("{name} \"{v}\" is not hex")))
            };
            Ok(AuditEntry {
                seq: r.seq,
                prev_hash: bytes("prev_hash", &r.prev_hash)?,
                hash: bytes("hash", &r.hash)?,
                entry: NewAuditEntry {
                    outcome: Outcome::parse(&r.outcome)
                        .ok_or_else(|| field(format!("outcome \"{}\" is unknown", r.outcome)))?,
                    at: r.at,
                    actor: r.actor,
                    instance: r.instance,
                    region: r.region,
                    action: r.action,
                    policy: r.policy,
                    policy_version: r.policy_version,
                    code: r.code,
                    reason: r.reason,
                    dry_run: r.dry_run,
                    request_id: r.request_id,
                    error: r.error,
                    intent_seq: r.intent_seq,
                },
            })
        })
        .collect::<Result<Vec<_>, ExportError>>()?;
    entries.sort_by_key(|e| e.seq);
    Ok(entries)
}

/// Audit rows as a JSON array of `{seq, at, actor, instance, region, action, outcome, policy,
/// policy_version, code, reason, dry_run, request_id, error, intent_seq, prev_hash, hash}`.
pub fn audit_json(entries: &[AuditEntry]) -> String {
    let items: Vec<AuditItem> = entries.iter().map(audit_item).collect();
    let mut text = serde_json::to_string_pretty(&items).unwrap_or_else(|_| "[]".into());
    text.push('\n');
    text
}

/// Audit rows as CSV with a header row, the same fields as the JSON. Text cells a spreadsheet
/// would read as a formula are neutralised ([`safe_cell`]).
pub fn audit_csv(entries: &[AuditEntry]) -> Result<String, csv::Error> {
    audit_csv_rows(entries, true)
}

/// Audit rows as CSV, with the header row or without it (a later part of one download).
pub fn audit_csv_rows(entries: &[AuditEntry], header: bool) -> Result<String, csv::Error> {
    let mut w = csv::WriterBuilder::new()
        .has_headers(header)
        .from_writer(Vec::new());
    for e in entries {
        w.serialize(audit_item(&for_csv(e)))?;
    }
    if entries.is_empty() && header {
        w.write_record(AUDIT_FIELDS)?;
    }
    let bytes = w.into_inner().map_err(|e| e.into_error())?;
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

/// `entry` with each text cell as [`safe_cell`] writes it.
fn for_csv(entry: &AuditEntry) -> AuditEntry {
    let mut entry = entry.clone();
    let e = &mut entry.entry;
    for text in [&mut e.actor, &mut e.action, &mut e.reason] {
        *text = safe_cell(text);
    }
    for text in [
        &mut e.instance,
        &mut e.region,
        &mut e.policy,
        &mut e.policy_version,
        &mut e.code,
        &mut e.request_id,
        &mut e.error,
    ]
    .into_iter()
    .flatten()
    {
        *text = safe_cell(text);
    }
    entry
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(seq: i64, actor: &str, reason: &str, error: Option<&str>) -> AuditEntry {
        AuditEntry {
            seq,
            entry: NewAuditEntry {
                outcome: Outcome::Succeeded,
                at: "2026-03-02T10:00:00Z".parse().unwrap(),
                actor: actor.to_string(),
                instance: Some("i-1".to_string()),
                region: Some("us-east-1".to_string()),
                action: "override".to_string(),
                policy: Some("-gpu".to_string()),
                policy_version: None,
                code: None,
                reason: reason.to_string(),
                dry_run: false,
                request_id: None,
                error: error.map(str::to_string),
                intent_seq: None,
            },
            prev_hash: vec![0; 32],
            hash: vec![1; 32],
        }
    }

    #[test]
    fn csv_cells_a_spreadsheet_would_run_are_neutralised_and_read_back_whole() {
        let rows = vec![
            row(
                1,
                "@alice",
                "=HYPERLINK(\"http://evil.example\")",
                Some("+1"),
            ),
            row(2, "bob", "'quoted", Some("\tlead")),
            row(3, "carol", "plain - text", None),
        ];
        let text = audit_csv(&rows).unwrap();
        for cell in [
            "'@alice",
            "'=HYPERLINK",
            "'+1",
            "'-gpu",
            "''quoted",
            "'\tlead",
        ] {
            assert!(text.contains(cell), "{cell} in {text}");
        }
        assert!(text.contains(",plain - text,"), "{text}");
        for line in text.lines().skip(1) {
            for cell in line.split(',') {
                let cell = cell.trim_start_matches('"');
                assert!(
                    !cell.starts_with(['=', '+', '-', '@']),
                    "{cell:?} in {line}"
                );
            }
        }
        assert_eq!(parse_audit_export(&text).unwrap(), rows);
    }

    #[test]
    fn later_parts_of_a_csv_download_have_no_header() {
        let rows = vec![row(1, "a", "r", None)];
        let first = audit_csv_rows(&rows, true).unwrap();
        let later = audit_csv_rows(&rows, false).unwrap();
        assert!(first.starts_with("seq,at,"));
        assert_eq!(first.lines().nth(1), later.lines().next());
        assert_eq!(later.lines().count(), 1);
        assert_eq!(audit_csv_rows(&[], false).unwrap(), "");
    }
}
