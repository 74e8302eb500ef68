//! The spot pools' history for people (`ebb pools`): per account, region, zone and type, the
//! interruptions, rebalance recommendations and capacity errors ebb saw.

use super::table;
use crate::fleet::pools::Counts;
use crate::fleet::PoolSummary;
use chrono::{DateTime, SecondsFormat, Utc};

/// `day/week/month`, as the table shows a count.
fn counts(c: &Counts) -> String {
    format!("{}/{}/{}", c.day, c.week, c.month)
}

/// The pools as a table: counts in the last 24 h, 7 days and 30 days, and the last reclaim.
pub fn pools_table(pools: &[PoolSummary], now: DateTime<Utc>) -> String {
    if pools.is_empty() {
        return "no interruption, rebalance recommendation or capacity error in the last 30 days\n"
            .to_string();
    }
    let rows: Vec<[String; 8]> = pools
        .iter()
        .map(|p| {
            let last = p.last_reclaim.map_or("-".to_string(), |at| {
                format!(
                    "{} ({} min ago)",
                    at.to_rfc3339_opts(SecondsFormat::Secs, true),
                    (now - at).num_minutes()
                )
            });
            let or_dash = |s: &str| match s.is_empty() {
                true => "-".to_string(),
                false => s.to_string(),
            };
            [
                match p.pool.account.is_empty() {
                    true => "own".to_string(),
                    false => p.pool.account.clone(),
                },
                p.pool.region.clone(),
                or_dash(&p.pool.zone),
                p.pool.instance_type.clone(),
                counts(&p.interruptions),
                counts(&p.rebalances),
                counts(&p.capacity_errors),
                last,
            ]
        })
        .collect();
    let mut text = table(
        &[
            "ACCOUNT",
            "REGION",
            "ZONE",
            "TYPE",
            "INTERRUPTIONS",
            "REBALANCES",
            "CAPACITY ERRORS",
            "LAST RECLAIM",
        ],
        &rows,
    );
    text.push_str("counts: last 24 h / 7 days / 30 days; zone -: not known (a start's)\n");
    text
}

/// The pools as JSON: an array of summaries.
pub fn pools_json(pools: &[PoolSummary]) -> String {
    let mut text = serde_json::to_string_pretty(pools).unwrap_or_else(|_| "[]".into());
    text.push('\n');
    text
}
