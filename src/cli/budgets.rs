//! `ebb budgets`: where each budget of the policy files stands in its period, from what the
//! store recorded ran (DATABASE_URL) and the price table, as the tick works it out; and
//! `ebb budgets raise`, a raise of one on record.

use super::args::{price_table, ActorArg, CloudChoiceArg, DbArgs, PolicyDirs, PricesArg};
use super::policy_files;
use super::store_clock::{self, parse_future, Future};
use crate::budget::{self, money, RaiseBy, Standing};
use crate::when;
use anyhow::{Context as _, Result};
use chrono::{DateTime, Utc};
use clap::{Args, ValueEnum};
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

/// Runs `ebb budgets`.
pub(super) async fn run(args: BudgetsArgs) -> Result<ExitCode> {
    let set = policy_files::load(&args.policies.policies)
        .context("policies are not valid (run ebb validate)")?;
    let prices = price_table(args.prices.prices.as_deref(), &args.cloud.cloud)?;
    let cloud = args.cloud.cloud.billed_as();
    let store = args.db.open().await?;
    let now = match args.at {
        Some(at) => at,
        None => store_clock::now(&store).await?,
    };
    let prices = store.quoted_table(prices).await?;
    let Some((standings, _)) = store.budget_standings(&set, now, cloud, &prices).await? else {
        outln!("no budgets in the policy files");
        return Ok(ExitCode::SUCCESS);
    };
    let at_limit = |s: &Standing| budget::at_limit_of(&set, s);
    match args.format {
        BudgetsFormat::Json => {
            let rows: Vec<_> = standings.iter().map(|s| s.row(at_limit(s))).collect();
            outln!("{}", serde_json::to_string_pretty(&rows)?);
        }
        BudgetsFormat::Table => out!("{}", table(&standings, at_limit)),
    }
    Ok(ExitCode::SUCCESS)
}

/// The standings as an aligned table, a line each, then why any spend is unknown.
fn table(standings: &[Standing], at_limit: impl Fn(&Standing) -> &'static str) -> String {
    let header = [
        "budget",
        "period ends",
        "spent",
        "amount",
        "share",
        "forecast",
        "at_limit",
    ];
    let mut unknown = String::new();
    let rows: Vec<[String; 7]> = standings
        .iter()
        .map(|s| {
            if s.spot_hours >= 0.005 {
                unknown += &format!(
                    "{}: not counted: {:.2} h on spot, whose price ebb does not keep\n",
                    s.label(),
                    s.spot_hours
                );
            }
            let (spent, share) = match &s.spent {
                Ok(v) => (
                    money(*v, &s.currency),
                    format!("{:.0}%", v / s.amount * 100.0),
                ),
                Err(why) => {
                    unknown += &format!("{}: spend unknown: {why}\n", s.label());
                    ("unknown".into(), "-".into())
                }
            };
            [
                s.label(),
                s.until(),
                spent,
                money(s.amount, &s.currency),
                share,
                s.forecast.map_or("-".into(), |f| money(f, &s.currency)),
                at_limit(s).to_string(),
            ]
        })
        .collect();
    crate::output::table(&header, &rows) + &unknown
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
    until: Future,
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
    let set = policy_files::load(&args.policies.policies)
        .context("policies are not valid (run ebb validate)")?;
    let store = args.db.open().await?;
    let now = store_clock::now(&store).await?;
    let raise = budget::raise(
        &set,
        &args.name,
        args.per,
        args.by,
        args.until.at(now)?,
        &args.reason,
        &args.actor.name(),
        now,
    )
    .map_err(anyhow::Error::msg)?;
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
