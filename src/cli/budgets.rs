//! `ebb budgets`: where each budget of the policy files stands in its period, from what the
//! store recorded ran (DATABASE_URL) and the price table, as the tick works it out; and
//! `ebb budgets raise`, a raise of one on record.

use super::args::{
    parse_future, price_table, ActorArg, CloudChoiceArg, DbArgs, PolicyDirs, PricesArg,
};
use crate::budget::{self, money, RaiseBy, Standing};
use crate::{policy, when};
use anyhow::{Context as _, Result};
use chrono::{DateTime, Utc};
use clap::{Args, ValueEnum};
use serde::Serialize;
use std::process::ExitCode;

/// The flags of `ebb budgets`.
#[derive(Args)]
pub(super) struct BudgetsArgs {
    #[command(flatten)]
    policies: PolicyDirs,
    /// What time it is, RFC 3339 (default: now): the periods are those holding it.
    #[arg(long, value_name = "TS", value_parser = when::parse_time)]
    at: Option<DateTime<Utc>>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = BudgetsFormat::Table)]
    format: BudgetsFormat,
    #[command(flatten)]
    prices: PricesArg,
    #[command(flatten)]
    cloud: CloudChoiceArg,
    #[command(flatten)]
    db: DbArgs,
}

#[derive(Clone, Copy, ValueEnum)]
enum BudgetsFormat {
    Table,
    Json,
}

/// One budget's standing as `--format json` writes it.
#[derive(Serialize)]
struct Row<'a> {
    budget: &'a str,
    key: Option<&'a str>,
    currency: &'a str,
    amount: f64,
    period_start: DateTime<Utc>,
    period_end: DateTime<Utc>,
    /// Spent so far; `null` when unknown, with `unknown` saying why.
    spent: Option<f64>,
    unknown: Option<&'a str>,
    per_hour: f64,
    forecast: Option<f64>,
    at_limit: &'a str,
    /// The boxes that spent most, most first.
    top_boxes: Vec<(&'a str, f64)>,
}

/// Runs `ebb budgets`.
pub(super) async fn run(args: BudgetsArgs) -> Result<ExitCode> {
    let now = args.at.unwrap_or_else(Utc::now);
    let set = policy::load(&args.policies.policies)
        .context("policies are not valid (run ebb validate)")?;
    let prices = price_table(args.prices.prices.as_deref(), &args.cloud.cloud)?;
    let cloud = args.cloud.cloud.billed_as();
    let store = args.db.open().await?;
    let Some((standings, _)) = store.budget_standings(&set, now, cloud, &prices).await? else {
        outln!("no budgets in the policy files");
        return Ok(ExitCode::SUCCESS);
    };
    let at_limit = |s: &Standing| {
        let b = set.budgets.iter().find(|b| b.name == s.budget);
        b.map_or("", |b| b.at_limit.as_str())
    };
    match args.format {
        BudgetsFormat::Json => {
            let rows: Vec<Row> = standings
                .iter()
                .map(|s| Row {
                    budget: &s.budget,
                    key: s.key.as_deref(),
                    currency: &s.currency,
                    amount: s.amount,
                    period_start: s.start,
                    period_end: s.end,
                    spent: s.spent.as_ref().ok().copied(),
                    unknown: s.spent.as_ref().err().map(String::as_str),
                    per_hour: s.per_hour,
                    forecast: s.forecast,
                    at_limit: at_limit(s),
                    top_boxes: s
                        .boxes
                        .iter()
                        .take(5)
                        .map(|(i, c)| (i.as_str(), *c))
                        .collect(),
                })
                .collect();
            outln!("{}", serde_json::to_string_pretty(&rows)?);
        }
        BudgetsFormat::Table => out!("{}", table(&standings, at_limit)),
    }
    Ok(ExitCode::SUCCESS)
}

/// The standings as an aligned table, a line each, then why any spend is unknown.
fn table<'a>(standings: &'a [Standing], at_limit: impl Fn(&'a Standing) -> &'a str) -> String {
    let mut rows = vec![[
        "budget",
        "period ends",
        "spent",
        "amount",
        "share",
        "forecast",
        "at_limit",
    ]
    .map(String::from)];
    let mut unknown = Vec::new();
    for s in standings {
        let (spent, share) = match &s.spent {
            Ok(v) => (
                money(*v, &s.currency),
                format!("{:.0}%", v / s.amount * 100.0),
            ),
            Err(why) => {
                unknown.push(format!("{}: spend unknown: {why}", s.label()));
                ("unknown".into(), "-".into())
            }
        };
        let forecast = s.forecast.map_or("-".into(), |f| money(f, &s.currency));
        rows.push([
            s.label(),
            s.until(),
            spent,
            money(s.amount, &s.currency),
            share,
            forecast,
            at_limit(s).to_string(),
        ]);
    }
    let widths: Vec<usize> = (0..7)
        .map(|c| rows.iter().map(|r| r[c].chars().count()).max().unwrap_or(0))
        .collect();
    let mut out = String::new();
    for r in &rows {
        let cells: Vec<String> = r
            .iter()
            .zip(&widths)
            .map(|(cell, w)| format!("{cell:<w$}"))
            .collect();
        out.push_str(cells.join("  ").trim_end());
        out.push('\n');
    }
    for line in unknown {
        out.push_str(&line);
        out.push('\n');
    }
    out
}

/// The flags of `ebb budgets raise`.
#[derive(Args)]
pub(super) struct RaiseArgs {
    /// The budget, by its name in the policy files.
    name: String,
    /// The value of its `per` tag whose budget to raise (one owner's); without it, every
    /// value's.
    #[arg(long, value_name = "VALUE")]
    per: Option<String>,
    /// By how much: a share of the amount the policy files give (20%) or an amount in the
    /// budget's currency (500).
    #[arg(long, value_name = "20%|AMOUNT", value_parser = RaiseBy::parse)]
    by: RaiseBy,
    /// Until when: a duration from now (3d) or an RFC 3339 time, at most 90 days ahead.
    #[arg(long, value_name = "TS|DURATION", value_parser = parse_future)]
    until: DateTime<Utc>,
    /// Why, for the audit log.
    #[arg(long)]
    reason: String,
    #[command(flatten)]
    policies: PolicyDirs,
    #[command(flatten)]
    actor: ActorArg,
    #[command(flatten)]
    db: DbArgs,
}

/// Runs `ebb budgets raise`: checks the budget and records the raise with its audit row.
pub(super) async fn raise(args: RaiseArgs) -> Result<ExitCode> {
    let now = Utc::now();
    let set = policy::load(&args.policies.policies)
        .context("policies are not valid (run ebb validate)")?;
    let raise = budget::raise(
        &set,
        &args.name,
        args.per,
        args.by,
        args.until,
        &args.reason,
        &args.actor.name(),
        now,
    )
    .map_err(anyhow::Error::msg)?;
    let store = args.db.open().await?;
    let id = store.raise_budget(&raise).await?;
    outln!(
        "raise {id}: {} raised until {} ({})",
        raise
            .key
            .as_ref()
            .map_or(raise.budget.clone(), |k| format!("{} ({k})", raise.budget)),
        raise
            .until
            .to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
        raise.reason
    );
    Ok(ExitCode::SUCCESS)
}
