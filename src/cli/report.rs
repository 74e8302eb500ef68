//! `ebb report`: what ebb saved over a window, from the store's history (DATABASE_URL).

use super::args::{price_table, CloudChoiceArg, DbArgs, PricesArg};
use super::store_clock;
use crate::budget;
use crate::report::{self, Window};
use crate::when;
use anyhow::{bail, Context as _, Result};
use chrono::{DateTime, Utc};
use clap::{Args, ValueEnum};
use std::process::ExitCode;

/// The flags of `ebb report`.
#[derive(Args)]
pub(super) struct ReportArgs {
    /// The window's start: a duration back from --at (30d) or an RFC 3339 time.
    #[arg(long, value_name = "30d|TS", default_value = "30d")]
    since: String,
    /// The window's end: a duration back from --at or an RFC 3339 time (default: --at).
    #[arg(long, value_name = "DURATION|TS")]
    until: Option<String>,
    /// What time it is, RFC 3339 (default: now, or the simulated time of an `ebb serve` on a
    /// simulated clock that publishes it in this database); for tests and reports of the past.
    #[arg(long, value_name = "TS", value_parser = when::parse_time)]
    at: Option<DateTime<Utc>>,
    /// Also group by the values of this tag (team, say).
    #[arg(long, value_name = "TAG")]
    by: Option<String>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = ReportFormat::Table)]
    format: ReportFormat,
    /// Also what each budget of these policy files spent in each of its periods in the
    /// window.
    #[arg(long = "policies", value_name = "DIR", value_delimiter = ',')]
    policies: Vec<std::path::PathBuf>,
    #[command(flatten)]
    prices: PricesArg,
    #[command(flatten)]
    cloud: CloudChoiceArg,
    #[command(flatten)]
    db: DbArgs,
}

#[derive(Clone, Copy, ValueEnum)]
enum ReportFormat {
    Table,
    Json,
    Csv,
}

/// Runs `ebb report`.
pub(super) async fn run(args: ReportArgs) -> Result<ExitCode> {
    let prices = price_table(args.prices.prices.as_deref(), &args.cloud.cloud)?;
    let store = args.db.open().await?;
    let now = match args.at {
        Some(at) => at,
        None => store_clock::now(&store).await?,
    };
    let window = match Window::parse(&args.since, args.until.as_deref(), now) {
        Ok(w) => w,
        Err(e) => bail!(e),
    };
    let by = args.by.as_deref().map(str::trim).filter(|b| !b.is_empty());
    // The clouds' quotes over the table, as the tick prices budgets.
    let prices = store.quoted_table(prices).await?;
    let parts = store.report_parts(window, by, &prices.commitments).await?;
    let r = report::compute_parts(&parts, window, by, &prices);
    let budgets = match args.policies.is_empty() {
        true => Vec::new(),
        false => {
            let set = super::policy_files::load(&args.policies)
                .context("--policies are not valid (run ebb validate)")?;
            let ran = store.ran(window.since, window.until).await?;
            let cloud = args.cloud.cloud.billed_as();
            budget::spent_in_periods(&set, cloud, &ran, &prices, (window.since, window.until))
        }
    };
    match args.format {
        ReportFormat::Table => out!("{}{}", report::table(&r), budgets_table(&budgets)),
        ReportFormat::Csv => out!("{}", report::csv(&r)),
        ReportFormat::Json => {
            let mut value = serde_json::to_value(&r)?;
            if !args.policies.is_empty() {
                value["budgets"] = serde_json::to_value(&budgets)?;
            }
            outln!("{}", serde_json::to_string_pretty(&value)?)
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// What each budget spent in each of its periods of the window, a line each.
fn budgets_table(periods: &[budget::PeriodSpend]) -> String {
    let mut out = String::new();
    if !periods.is_empty() {
        out.push_str("\nbudget spend by period\n");
    }
    for p in periods {
        let label = p
            .key
            .as_ref()
            .map_or(p.budget.clone(), |k| format!("{} ({k})", p.budget));
        let spent = match (p.spent, &p.unknown) {
            (Some(s), _) => {
                let reached = if s >= p.amount { ", reached" } else { "" };
                format!(
                    "{} of {}{reached}",
                    budget::money(s, &p.currency),
                    budget::money(p.amount, &p.currency)
                )
            }
            (None, why) => format!("unknown: {}", why.as_deref().unwrap_or("")),
        };
        let spot = match p.spot_hours >= 0.005 {
            true => format!(" (and {:.2} h on spot, not priced)", p.spot_hours),
            false => String::new(),
        };
        out.push_str(&format!(
            "  {label}  {} to {}  {spent}{spot}\n",
            p.from.format("%Y-%m-%d %H:%M UTC"),
            p.to.format("%Y-%m-%d %H:%M UTC")
        ));
    }
    out
}
