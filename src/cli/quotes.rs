//! `ebb quotes`: the prices the clouds quoted, as Postgres keeps them, so that a figure of a
//! report, a budget or an advice can be traced to the quote it was priced at.

use super::args::{DbArgs, Format};
use crate::fleet::PriceQuote;
use crate::output::table;
use anyhow::Result;
use chrono::SecondsFormat;
use std::process::ExitCode;

/// `ebb quotes`: every kept quote, by region and type.
pub(super) async fn list(format: Format, db: &DbArgs) -> Result<ExitCode> {
    let store = db.open().await?;
    let quotes = store.quotes().await?;
    match format {
        Format::Table => out!("{}", quotes_table(&quotes)),
        Format::Json => outln!("{}", serde_json::to_string_pretty(&quotes)?),
    }
    Ok(ExitCode::SUCCESS)
}

fn quotes_table(quotes: &[PriceQuote]) -> String {
    if quotes.is_empty() {
        return "no quotes: ebb serve or ebb tick quotes the types the fleet runs daily, on clouds that quote prices (Alibaba Cloud, Tencent Cloud); elsewhere the price table (EBB_PRICES) prices everything\n".to_string();
    }
    let rows: Vec<[String; 7]> = quotes
        .iter()
        .map(|q| {
            let terms: Vec<String> = q
                .monthly
                .iter()
                .map(|(months, price)| format!("{months}: {price:.2}"))
                .collect();
            [
                q.region.clone(),
                q.instance_type.clone(),
                q.currency.clone(),
                q.hourly.map_or_else(|| "-".into(), |h| format!("{h:.4}")),
                if terms.is_empty() {
                    "-".into()
                } else {
                    terms.join(", ")
                },
                q.source.clone(),
                q.quoted_at.to_rfc3339_opts(SecondsFormat::Secs, true),
            ]
        })
        .collect();
    table(
        &[
            "REGION",
            "TYPE",
            "CURRENCY",
            "HOUR",
            "A MONTH OF EACH TERM (MONTHS: PRICE)",
            "QUOTED BY",
            "AT",
        ],
        &rows,
    )
}
