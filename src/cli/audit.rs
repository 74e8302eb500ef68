//! `ebb audit keygen` and `ebb audit verify`, and the settings that publish checkpoints.

use crate::checkpoint::{self, Checkpoint, Finding, Publisher, Sink};
use crate::control::Tasks;
use crate::output;
use crate::store::{verify_rows, Store, Verification};
use anyhow::{bail, Context as _, Result};
use clap::{Args, Subcommand};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

#[derive(Subcommand)]
pub(super) enum AuditCommand {
    /// Recompute the hash chain (and check it against signed checkpoints, or verify an
    /// export); exit 1 naming the first row or checkpoint that does not match.
    Verify(VerifyArgs),
    /// Make an Ed25519 key for signing audit checkpoints: FILE (private, mode 0600) and
    /// FILE.pub (public, for `ebb audit verify --public-key`).
    Keygen {
        /// Where to write the private key; FILE.pub gets the public key.
        #[arg(long, value_name = "FILE")]
        out: PathBuf,
    },
}

/// The flags of `ebb audit verify`.
#[derive(Args)]
pub(super) struct VerifyArgs {
    /// Also check every checkpoint stored here (file:DIR or s3://BUCKET/PREFIX) against the log.
    #[arg(long, value_name = "SOURCE", requires = "public_key")]
    checkpoints: Option<String>,
    /// The checkpoints' public key (FILE.pub of `ebb audit keygen`).
    #[arg(long, value_name = "FILE", requires = "checkpoints")]
    public_key: Option<PathBuf>,
    /// Verify this export (`ebb audit --format json|csv`, or GET /v1/audit) offline instead
    /// of the database.
    #[arg(long, value_name = "EXPORT", conflicts_with = "checkpoints")]
    file: Option<PathBuf>,
    #[command(flatten)]
    db: super::db::DbArgs,
}

/// Where checkpoints are published; both or neither.
#[derive(Args, Clone, Debug)]
#[command(next_help_heading = "Audit checkpoints")]
pub(super) struct CheckpointArgs {
    /// The Ed25519 key (`ebb audit keygen`) that signs a checkpoint of the audit chain's head
    /// after every tick or change that appends rows.
    #[arg(
        long,
        env = "EBB_AUDIT_KEY_FILE",
        value_name = "FILE",
        requires = "audit_checkpoints"
    )]
    pub(super) audit_key_file: Option<PathBuf>,
    /// Where checkpoints go: file:DIR or s3://BUCKET/PREFIX (write-once); each is also logged.
    #[arg(
        long,
        env = "EBB_AUDIT_CHECKPOINTS",
        value_name = "DEST",
        requires = "audit_key_file"
    )]
    pub(super) audit_checkpoints: Option<String>,
}

impl CheckpointArgs {
    /// The publisher, when checkpoints are configured, reporting into `tasks` and counting
    /// failures in `failures`.
    pub(super) async fn publisher(
        &self,
        tasks: Tasks,
        failures: prometheus_client::metrics::counter::Counter,
    ) -> Result<Option<Arc<Publisher>>> {
        let (Some(key), Some(dest)) = (&self.audit_key_file, &self.audit_checkpoints) else {
            return Ok(None);
        };
        let key = checkpoint::signing_key(key).context("EBB_AUDIT_KEY_FILE")?;
        let sink = Sink::open(dest).await?;
        Ok(Some(Arc::new(Publisher::new(key, sink, tasks, failures))))
    }
}

/// Publishes a checkpoint after a command appended rows; a failure is printed, never the
/// command's failure.
pub(super) async fn publish_after(publisher: Option<&Publisher>, store: &Store) {
    if let Some(p) = publisher {
        if let Err(err) = p.publish(store, chrono::Utc::now()).await {
            eprintln!("warning: audit checkpoint not published: {err}");
        }
    }
}

/// Runs `ebb audit keygen` or `ebb audit verify`.
pub(super) async fn run(command: AuditCommand) -> Result<ExitCode> {
    match command {
        AuditCommand::Keygen { out } => {
            let public = checkpoint::keygen(&out)?;
            outln!(
                "ok: private key {} (keep it secret; EBB_AUDIT_KEY_FILE), public key {} \
                 (for ebb audit verify --public-key)",
                out.display(),
                public.display()
            );
            Ok(ExitCode::SUCCESS)
        }
        AuditCommand::Verify(args) => verify(args).await,
    }
}

async fn verify(args: VerifyArgs) -> Result<ExitCode> {
    if let Some(file) = &args.file {
        return verify_export(file);
    }
    let store = args.db.open().await?;
    let (rows, head) = match store.verify_audit().await? {
        Verification::Intact { rows, head } => (rows, head),
        Verification::Broken { seq, problem } => {
            outln!("audit row {seq} does not match: {problem}");
            return Ok(ExitCode::from(1));
        }
    };
    let mut problems = overrides_unaudited(&store).await?;
    let mut covered = String::new();
    if let (Some(source), Some(key)) = (&args.checkpoints, &args.public_key) {
        let (found, newest) = check_checkpoints(&store, source, key, rows).await?;
        problems.extend(found);
        covered = match newest {
            Some(seq) => format!("; checkpoints hold up to row {seq}"),
            None => String::new(),
        };
    }
    if problems.is_empty() {
        outln!("ok: {rows} audit rows, hash chain intact, head {head}{covered}");
        return Ok(ExitCode::SUCCESS);
    }
    for p in &problems {
        outln!("{p}");
    }
    Ok(ExitCode::from(1))
}

/// Each override without the audit row of its making (or of its revoking), described.
async fn overrides_unaudited(store: &Store) -> Result<Vec<String>> {
    Ok(store
        .unaudited_overrides()
        .await?
        .into_iter()
        .map(|(o, missing)| {
            format!(
                "override {} of {} (by {}) has no audit row of its {missing}: it was written \
                 to the database directly",
                o.id, o.instance, o.created_by
            )
        })
        .collect())
}

/// Every checkpoint in `source` that the log contradicts, described; and the newest `seq` the
/// checkpoints vouch for.
async fn check_checkpoints(
    store: &Store,
    source: &str,
    key: &Path,
    rows: u64,
) -> Result<(Vec<String>, Option<i64>)> {
    let key = checkpoint::verifying_key(key)?;
    let stored: Vec<(String, Checkpoint)> = Sink::open(source).await?.read_all().await?;
    if stored.is_empty() {
        if rows == 0 {
            return Ok((Vec::new(), None));
        }
        bail!("no checkpoints in {source}: check the source, or that EBB_AUDIT_CHECKPOINTS is set where ebb runs");
    }
    let seqs: Vec<i64> = stored.iter().map(|(_, c)| c.seq).collect();
    let hashes: std::collections::BTreeMap<i64, String> =
        store.audit_hashes(&seqs).await?.into_iter().collect();
    let last = i64::try_from(rows).unwrap_or(i64::MAX);
    let mut problems = Vec::new();
    let mut newest = None;
    for (name, c) in &stored {
        let finding = Finding::of(c, &key, hashes.get(&c.seq).map(String::as_str), last);
        if finding == Finding::Holds {
            newest = Some(c.seq);
        } else {
            problems.push(finding.describe(name, c));
        }
    }
    Ok((problems, newest))
}

/// `ebb audit verify --file`: each row of an export against its hashes, offline.
fn verify_export(file: &Path) -> Result<ExitCode> {
    let text = std::fs::read_to_string(file).with_context(|| format!("{}", file.display()))?;
    let rows = output::parse_audit_export(&text)
        .with_context(|| format!("{} is not an ebb audit export", file.display()))?;
    match verify_rows(&rows) {
        Verification::Intact { rows, head } => {
            outln!("ok: {rows} exported audit rows match their hashes, last {head}");
            Ok(ExitCode::SUCCESS)
        }
        Verification::Broken { seq, problem } => {
            outln!("exported audit row {seq} does not match: {problem}");
            Ok(ExitCode::from(1))
        }
    }
}
