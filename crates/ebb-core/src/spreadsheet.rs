//! CSV cells no spreadsheet runs as a formula, for every CSV ebb writes (`ebb audit`, the
//! console's `/audit.csv`, `ebb report`): text comes from tags, reasons and names people and
//! clouds choose.

/// A text cell that no spreadsheet runs as a formula: one beginning with `=`, `+`, `-`, `@`, a
/// tab or a carriage return gets a leading `'` (OWASP's advice), and so does one beginning
/// with `'`, so that [`cell_text`] reads every cell back exactly.
pub fn safe_cell(text: &str) -> String {
    match text.chars().next() {
        Some('=' | '+' | '-' | '@' | '\t' | '\r' | '\'') => format!("'{text}"),
        _ => text.to_string(),
    }
}

/// A text cell as [`safe_cell`] wrote it, back as it was.
pub fn cell_text(cell: String) -> String {
    match cell.strip_prefix('\'') {
        Some(text) => text.to_string(),
        None => cell,
    }
}
