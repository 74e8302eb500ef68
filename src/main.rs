//! The `ebb` command: parses the command line and calls into the library.

use anyhow::{Context as _, Result};
use chrono::{DateTime, Utc};
use clap::{Parser, Subcommand, ValueEnum};
use ebb::{engine, fleet, output, policy};
use std::path::PathBuf;
use std::process::ExitCode;

/// ebb makes a GPU cloud bill follow real demand.
#[derive(Parser)]
#[command(name = "ebb", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Check policy files; print every problem as path:line:col: message.
    Validate {
        /// Directories (every *.yaml and *.yml in them) or single files.
        #[arg(required = true, value_name = "DIR")]
        dirs: Vec<PathBuf>,
    },
    /// Decide offline what ebb would do to a fleet snapshot at a given time.
    Plan {
        #[command(flatten)]
        input: Input,
        /// Output format.
        #[arg(long, value_enum, default_value_t = Format::Table)]
        format: Format,
    },
    /// Show why ebb decides what it decides for one instance of a fleet snapshot.
    Explain {
        /// The instance id.
        instance: String,
        #[command(flatten)]
        input: Input,
    },
    /// Print the JSON Schema of policy files.
    Schema,
}

/// The inputs of an offline decision.
#[derive(clap::Args)]
struct Input {
    /// Policy directories or files (repeatable).
    #[arg(
        long = "policies",
        value_name = "DIR",
        required = true,
        env = "EBB_POLICIES",
        value_delimiter = ','
    )]
    policies: Vec<PathBuf>,
    /// A fleet snapshot (YAML, or JSON when the name ends in .json).
    #[arg(long, value_name = "FILE")]
    fleet: PathBuf,
    /// The decision time, RFC 3339 (default: now).
    #[arg(long, value_name = "TS", value_parser = parse_time)]
    at: Option<DateTime<Utc>>,
}

#[derive(Clone, Copy, ValueEnum)]
enum Format {
    Table,
    Json,
}

fn parse_time(s: &str) -> Result<DateTime<Utc>, String> {
    DateTime::parse_from_rfc3339(s)
        .map(|t| t.with_timezone(&Utc))
        .map_err(|_| format!("\"{s}\" is not an RFC 3339 time (like 2026-11-30T20:05:00Z or 2026-11-30T20:05:00+08:00)"))
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(cli.command) {
        Ok(code) => code,
        Err(err) => {
            eprintln!("error: {err:#}");
            ExitCode::from(2)
        }
    }
}

fn run(command: Command) -> Result<ExitCode> {
    match command {
        Command::Validate { dirs } => match policy::load(&dirs) {
            Ok(set) => {
                let rules: usize = set.policies.len();
                println!(
                    "ok: {rules} {} and {} {} valid, version {}",
                    if rules == 1 { "policy" } else { "policies" },
                    set.calendars.len(),
                    if set.calendars.len() == 1 {
                        "calendar"
                    } else {
                        "calendars"
                    },
                    set.version
                );
                Ok(ExitCode::SUCCESS)
            }
            Err(policy::LoadError::Invalid { problems }) => {
                for p in &problems {
                    println!("{p}");
                }
                eprintln!(
                    "{} problem{} found",
                    problems.len(),
                    if problems.len() == 1 { "" } else { "s" }
                );
                Ok(ExitCode::from(1))
            }
            Err(err) => Err(err.into()),
        },
        Command::Plan { input, format } => {
            let (at, set, fleet, prior) = input.load()?;
            let decisions = engine::decide(at, &set, &fleet, &prior);
            let text = match format {
                Format::Json => output::plan_json(&decisions),
                Format::Table => output::plan_table(&decisions),
            };
            print!("{text}");
            Ok(ExitCode::SUCCESS)
        }
        Command::Explain { instance, input } => {
            let (at, set, fleet, prior) = input.load()?;
            let explanation = engine::explain(at, &set, &fleet, &prior, &instance)
                .with_context(|| format!("no instance {instance} in {}", input.fleet.display()))?;
            println!("{explanation}");
            Ok(ExitCode::SUCCESS)
        }
        Command::Schema => {
            print!("{}", policy::schema::schema_text());
            Ok(ExitCode::SUCCESS)
        }
    }
}

impl Input {
    fn load(
        &self,
    ) -> Result<(
        DateTime<Utc>,
        policy::PolicySet,
        fleet::Fleet,
        engine::Prior,
    )> {
        let set =
            policy::load(&self.policies).context("policies are not valid (run ebb validate)")?;
        let (fleet, prior) = fleet::load_snapshot(&self.fleet)?;
        Ok((self.at.unwrap_or_else(Utc::now), set, fleet, prior))
    }
}
