//! Every command but `serve`: what it reads, what it prints, and its exit code.

use super::args::Connected;
use super::args::{
    ActorArg, AuditArgs, AuditFormat, CloudArgs, DbArgs, Format, Input, OverrideArgs,
    ReconcileArgs, WEBHOOK_DRAIN,
};
use super::audit::{publish_after, CheckpointArgs};
use super::cloud::OnCloud;
use super::policy_files;
use super::serve::replica_name;
use super::store_clock::{self, Past};
use super::utilisation::ACTIVITY_PREFIX;
use crate::checkpoint::Publisher;
use crate::clock::Clock;
use crate::cloud::{Provider, SpotMoves};
use crate::control::Tasks;
use crate::replay::SignalRecording;
use crate::serve::{BackgroundTask, CalendarFetcher};
use crate::store::{Grant, MigrationRecord, Store};
use crate::{engine, output, policy};
use anyhow::{bail, Context as _, Result};
use chrono::{DateTime, Local, Utc};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

/// 0, or 1 when the command ran and found a problem.
fn found_problem(problem: bool) -> ExitCode {
    if problem {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    }
}

/// "1 policy", "2 policies".
fn count(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// `ebb validate`: every problem of the policy files, one per line.
pub(super) fn validate(dirs: &[PathBuf], at: DateTime<Utc>) -> Result<ExitCode> {
    match policy_files::load(dirs) {
        Ok(set) => {
            let budgets = match set.budgets.len() {
                0 => String::new(),
                n => format!(", {}", count(n, "budget", "budgets")),
            };
            outln!(
                "ok: {}{budgets} and {} valid, version {}",
                count(set.policies.len(), "policy", "policies"),
                count(set.calendars.len(), "calendar", "calendars"),
                set.version
            );
            warn_of_calendars(&set, at);
            Ok(ExitCode::SUCCESS)
        }
        Err(policy::LoadError::Invalid { problems }) => {
            for p in &problems {
                outln!("{p}");
            }
            eprintln!("{} found", count(problems.len(), "problem", "problems"));
            Ok(ExitCode::from(1))
        }
        Err(err) => Err(err.into()),
    }
}

/// Warns on stderr of each calendar of `set` that may have run out at `at`: valid policies
/// that quietly stop skipping holidays are the failure people do not see.
fn warn_of_calendars(set: &policy::PolicySet, at: DateTime<Utc>) {
    for why in set.calendars_running_out(at.date_naive()) {
        eprintln!("warning: {why}");
    }
}

/// Notes on stderr that `command`, on a snapshot without the database, cannot weigh the
/// budgets of `set`: it has no spend, so a spent budget's refusal or stop is not in it.
fn note_unweighed_budgets(set: &policy::PolicySet, command: &str) {
    if !set.budgets.is_empty() {
        eprintln!(
            "note: ebb {command} does not weigh the {}: a snapshot has no spend. `ebb budgets` and the console's Budgets page say where they stand, the console's instance page weighs them, and a decision a budget makes names it",
            count(set.budgets.len(), "budget", "budgets")
        );
    }
}

/// `ebb plan`: the decisions for a fleet snapshot.
pub(super) fn plan(input: &Input, format: Format) -> Result<ExitCode> {
    let (at, set, fleet, prior, groups) = input.load()?;
    warn_of_calendars(&set, at);
    note_unweighed_budgets(&set, "plan");
    let decisions = engine::decide(at, &set, &fleet, &prior);
    out!(
        "{}",
        match format {
            Format::Json => output::plan_json(&decisions, &fleet.instances),
            Format::Table => {
                let groups: Vec<engine::GroupDecision> = groups
                    .iter()
                    .map(|g| {
                        engine::decide_group(at, &set, &fleet, &prior, &g.group, g.memory.as_ref())
                    })
                    .collect();
                output::plan_table(&decisions, &fleet.instances)
                    + &output::plan_groups_table(&groups)
            }
        }
    );
    Ok(ExitCode::SUCCESS)
}

/// `ebb explain`: why one instance (or Auto Scaling group) of a snapshot gets its decision.
pub(super) fn explain(instance: &str, input: &Input, format: Format) -> Result<ExitCode> {
    let (at, set, fleet, prior, groups) = input.load()?;
    note_unweighed_budgets(&set, "explain");
    if let Some(explanation) = engine::explain(at, &set, &fleet, &prior, instance) {
        match format {
            Format::Table => outln!("{explanation}"),
            Format::Json => out!("{}", output::explanation_json(&explanation)),
        }
        return Ok(ExitCode::SUCCESS);
    }
    // Not an instance: an Auto Scaling group of that name.
    let g = groups
        .iter()
        .find(|g| g.group.name == instance)
        .with_context(|| {
            format!(
                "no instance {instance} in {} (nor an Auto Scaling group of that name)",
                input.fleet.display()
            )
        })?;
    let d = engine::decide_group(at, &set, &fleet, &prior, &g.group, g.memory.as_ref());
    match format {
        Format::Table => outln!("{}", output::group_explanation(&g.group, &d, at)),
        Format::Json => out!("{}", output::group_explanation_json(&d)),
    }
    Ok(ExitCode::SUCCESS)
}

/// `ebb migrate`: applies the database migrations, then grants the runtime and reader roles
/// their privileges.
pub(super) async fn migrate(
    runtime: &[String],
    readers: &[String],
    db: &DbArgs,
) -> Result<ExitCode> {
    let store = db.connect().await?;
    let applied = store.migrate().await?;
    outln!("ok: {applied} migration(s) applied; the schema is current");
    let grants = (runtime.iter().map(|r| (r, Grant::Runtime)))
        .chain(readers.iter().map(|r| (r, Grant::Reader)));
    for (role, grant) in grants {
        store.grant(role, grant).await?;
        outln!("ok: role {role:?} has the {} privileges", grant.as_str());
    }
    Ok(ExitCode::SUCCESS)
}

/// `ebb audit`: the rows that pass the filters.
pub(super) async fn audit(filter: &AuditArgs) -> Result<ExitCode> {
    let store = filter.db.open().await?;
    let now = match filter.counts_from_now() {
        true => store_clock::now(&store).await?,
        false => Utc::now(),
    };
    let rows = store.audit(&filter.to_filter(now)?).await?;
    let text = match filter.format {
        AuditFormat::Table => output::audit_table(&rows, &Local),
        AuditFormat::Json => output::audit_json(&rows),
        AuditFormat::Csv => output::audit_csv(&rows)?,
    };
    out!("{text}");
    Ok(ExitCode::SUCCESS)
}

/// `ebb override`: make, list or revoke overrides.
pub(super) async fn overrides(args: OverrideArgs) -> Result<ExitCode> {
    let store = args.db.open().await?;
    let actor = args.actor();
    let now = store_clock::now(&store).await?;
    let metrics = crate::metrics::Metrics::default();
    let publisher = args
        .checkpoints
        .publisher(Tasks::default(), metrics.audit_checkpoint_failures())
        .await?;
    if args.list {
        let list = if args.all {
            store.all_overrides().await?
        } else {
            store.active_overrides(now).await?
        };
        out!("{}", output::overrides_table(&list, &Local, now));
    } else if let Some(id) = args.revoke {
        // Whoever holds DATABASE_URL can write the table anyway: the CLI revokes any override.
        let o = store.revoke_override(id, &actor, now, true).await?;
        outln!("revoked override {} of {}", o.id, o.instance);
        publish_after(publisher.as_deref(), &store).await;
    } else if let (Some(instance), Some(until), Some(reason)) =
        (args.instance, args.until, args.reason)
    {
        let max = chrono::Duration::from_std(args.max_override.max_override)?;
        let request = store
            .override_request(&instance, until.at(now)?, &reason, now, max)
            .await??;
        let o = store
            .create_override(
                &request.instance,
                request.until,
                &request.reason,
                &actor,
                now,
            )
            .await?;
        outln!(
            "override {}: {} kept until {} ({})",
            o.id,
            o.instance,
            o.until.with_timezone(&Local).format("%Y-%m-%d %H:%M:%S%:z"),
            o.reason
        );
        publish_after(publisher.as_deref(), &store).await;
    }
    Ok(ExitCode::SUCCESS)
}

/// `ebb spot-moves`: every spot migration.
pub(super) async fn migrations(format: Format, db: &DbArgs) -> Result<ExitCode> {
    let store = db.open().await?;
    let list = store.migrations().await?;
    // Savings count at least up to the last step ebb recorded: a simulated fleet's serve that
    // has stopped may have run ahead of the system clock.
    let now = list
        .iter()
        .filter_map(|m| m.steps.0.last().map(|s| s.at))
        .fold(store_clock::now(&store).await?, DateTime::max);
    out!(
        "{}",
        match format {
            Format::Table => output::migrations_table(&list, now),
            Format::Json => output::migrations_json(&list, now),
        }
    );
    Ok(ExitCode::SUCCESS)
}

/// `ebb pools`: the pools' history counted back from `at` (default now).
pub(super) async fn pools(
    format: Format,
    at: Option<DateTime<Utc>>,
    db: &DbArgs,
) -> Result<ExitCode> {
    let store = db.open().await?;
    let now = at.unwrap_or_else(Utc::now);
    let pools = store.pool_history(now).await?.summaries(now);
    out!(
        "{}",
        match format {
            Format::Table => output::pools_table(&pools, now),
            Format::Json => output::pools_json(&pools),
        }
    );
    Ok(ExitCode::SUCCESS)
}

/// `ebb spot-moves release ID`: the image migration `id` keeps goes at the leader's next tick.
pub(super) async fn release(id: i64, actor: &ActorArg, db: &DbArgs) -> Result<ExitCode> {
    let store = db.open().await?;
    match store.release_image(id, &actor.name(), Utc::now()).await? {
        Ok(m) => {
            outln!(
                "released image {} of migration {id} ({}): the leader deletes it with its snapshots at its next tick",
                m.image.as_deref().unwrap_or_default(),
                m.original
            );
            Ok(ExitCode::SUCCESS)
        }
        Err(why) => bail!("{why}"),
    }
}

/// `ebb spot-moves --orphans`: what carries ebb's migration tags in EBB_REGIONS and every
/// migration's region that no migration tracks. Exits 1 when something is found or a region
/// cannot be read.
pub(super) async fn orphans(mut cloud: CloudArgs, format: Format, db: &DbArgs) -> Result<ExitCode> {
    let store = db.open().await?;
    let migrations = store.migrations().await?;
    let mut regions: Vec<String> = cloud.regions.clone();
    regions.extend(migrations.iter().map(|m| m.region.clone()));
    regions.sort();
    regions.dedup();
    if regions.is_empty() {
        bail!("no region to look in: no migration was made yet and EBB_REGIONS is not set");
    }
    cloud.regions.clone_from(&regions);
    let command = Orphans {
        regions,
        migrations,
        format,
    };
    cloud.run(Clock::System, command).await
}

/// `ebb spot-moves --orphans` once the migrations are read.
struct Orphans {
    regions: Vec<String>,
    migrations: Vec<MigrationRecord>,
    format: Format,
}

impl OnCloud for Orphans {
    type Output = ExitCode;

    async fn on<P: Provider>(self, cloud: Connected<P>) -> Result<ExitCode> {
        let mut found = Vec::new();
        let mut failed = false;
        // A cloud without spot moves has nothing ebb launched or imaged for a migration.
        if let Some(spot) = cloud.provider.spot_moves() {
            for region in &self.regions {
                match spot.migration_artifacts(region).await {
                    Ok(artifacts) => found.extend(artifacts),
                    Err(e) => {
                        eprintln!(
                            "error: cannot list what carries ebb's migration tags in {region}: {e}"
                        );
                        failed = true;
                    }
                }
            }
        }
        let orphans = crate::spot::orphans::orphans(found, &self.migrations, Utc::now());
        out!(
            "{}",
            match self.format {
                Format::Table => output::orphans_table(&orphans),
                Format::Json => output::orphans_json(&orphans),
            }
        );
        Ok(found_problem(failed || !orphans.is_empty()))
    }
}

/// `ebb tick`: one reconcile pass as the leader.
pub(super) async fn tick(
    at: Option<DateTime<Utc>>,
    reconcile: ReconcileArgs,
    checkpoints: CheckpointArgs,
) -> Result<ExitCode> {
    if at.is_some() && !reconcile.dry_run && reconcile.cloud.is_remote_alibaba() {
        bail!(
            "--at acts on Alibaba Cloud as if it were then: a past time stops and starts by old \
             hours; add --dry-run to see what that tick would decide, or point \
             EBB_ALIBABA_ENDPOINT at a fake on this machine"
        );
    }
    if at.is_some() && !reconcile.dry_run && reconcile.cloud.is_remote_aws() {
        bail!(
            "--at acts on AWS as if it were then: a future time ends spot originals and deletes \
             their images before their time, a past one stops and starts by old hours; add \
             --dry-run to see what that tick would decide, or point AWS_ENDPOINT_URL at an EC2 \
             emulator on this machine"
        );
    }
    if at.is_some() && !reconcile.dry_run && reconcile.cloud.is_remote_tencent() {
        bail!(
            "--at acts on Tencent Cloud as if it were then: a past or future time stops and \
             starts by other hours; add --dry-run to see what that tick would decide, or point \
             EBB_TENCENT_ENDPOINT at a test double on this machine"
        );
    }
    let time_given = at.is_some();
    let at = at.unwrap_or_else(Utc::now);
    let metrics = crate::metrics::Metrics::default();
    let publisher = checkpoints
        .publisher(Tasks::default(), metrics.audit_checkpoint_failures())
        .await?;
    let store = reconcile.db.open().await?;
    let cloud = reconcile.cloud.clone();
    let command = Tick {
        at,
        time_given,
        reconcile,
        store,
        publisher,
    };
    cloud.run(Clock::Fixed(at), command).await
}

/// `ebb tick` once the store is open.
struct Tick {
    at: DateTime<Utc>,
    /// `--at` set it.
    time_given: bool,
    reconcile: ReconcileArgs,
    store: Store,
    publisher: Option<Arc<Publisher>>,
}

impl OnCloud for Tick {
    type Output = ExitCode;

    async fn on<P: Provider>(self, cloud: Connected<P>) -> Result<ExitCode> {
        let (at, deadline) = (self.at, self.reconcile.tick_deadline);
        let (reconciler, poster) =
            self.reconcile
                .reconciler(self.store, cloud, Tasks::default(), self.time_given)?;
        let Some(mut leader) = reconciler.store().try_lead(&replica_name()).await? else {
            bail!("another ebb is the leader and acting (ebb serve?); this tick did nothing");
        };
        // As serve does at start: the calendars' addresses fetched, the last good copies kept.
        let clock = Clock::Fixed(at);
        let mut fetcher = CalendarFetcher::new(
            reconciler.store().clone(),
            reconciler.policies().clone(),
            clock,
        );
        if let Err(err) = fetcher.activate().await {
            eprintln!("warning: {err}");
        }
        let Ok(report) = tokio::time::timeout(deadline, reconciler.tick(at, &mut leader)).await
        else {
            bail!(
                "the tick was abandoned: still running after the tick deadline of {} \
                 (EBB_TICK_DEADLINE); an action it left without an outcome is resolved by a later tick",
                humantime::format_duration(deadline)
            );
        };
        // Rows a failed tick appended are checkpointed too.
        publish_after(self.publisher.as_deref(), reconciler.store()).await;
        // The queue closes with the reconciler; what it holds is posted before exit.
        drop(reconciler);
        if let Some(poster) = poster {
            poster.finish(WEBHOOK_DRAIN).await;
        }
        let report = report?;
        out!("{}", output::tick_summary(&report));
        if let Some(err) = &report.policy_error {
            eprintln!("error: {err}");
        }
        for failure in &report.inventory_failures {
            eprintln!("error: cannot list instances in {failure}");
        }
        Ok(found_problem(report.failed()))
    }
}

/// `ebb ready`: whether the local `ebb serve` answers `/readyz` with 200.
pub(super) async fn ready(mut listen: std::net::SocketAddr) -> Result<ExitCode> {
    if listen.ip().is_unspecified() {
        listen.set_ip(std::net::Ipv4Addr::LOCALHOST.into());
    }
    let url = format!("http://{listen}/readyz");
    let answer = reqwest::Client::builder()
        .timeout(std::time::Duration::from_secs(5))
        .build()?
        .get(&url)
        .send()
        .await
        .with_context(|| format!("cannot reach ebb serve at {url}"))?;
    let ready = answer.status().is_success();
    outln!("{}", answer.text().await.unwrap_or_default());
    Ok(found_problem(!ready))
}

/// `ebb inventory`: the managed instances as the cloud lists them now.
pub(super) async fn inventory(cloud: CloudArgs, format: Format) -> Result<ExitCode> {
    cloud.run(Clock::System, Inventory { format }).await
}

/// `ebb inventory` in a format.
struct Inventory {
    format: Format,
}

impl OnCloud for Inventory {
    type Output = ExitCode;

    async fn on<P: Provider>(self, cloud: Connected<P>) -> Result<ExitCode> {
        let inventory = cloud.provider.instances().await;
        out!(
            "{}",
            match self.format {
                Format::Json => output::snapshot_json(&inventory.instances, &inventory.attached),
                Format::Table => output::instances_table(&inventory.instances, &Local),
            }
        );
        for failure in &inventory.failures {
            eprintln!(
                "error: cannot list instances in {}{}: {}",
                failure.region,
                failure
                    .account
                    .as_deref()
                    .map(|a| format!(" as {a}"))
                    .unwrap_or_default(),
                failure.error
            );
        }
        Ok(found_problem(!inventory.failures.is_empty()))
    }
}

/// How many instances `ebb metrics export` reads at a time.
const EXPORT_CHUNK: usize = 100;

/// A time as the export writes it.
fn rfc3339(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

/// `ebb metrics export`: the GPU readings kept since `since`, as CSV on standard output, with
/// an `activity:NAME` column for each activity signal whose uses ebb kept (the latest use by
/// each row's time). Read [`EXPORT_CHUNK`] instances at a time, so a month of a large fleet is
/// never in memory at once.
pub(super) async fn export_readings(since: &Past, db: &DbArgs) -> Result<ExitCode> {
    let store = db.open().await?;
    let since = since.at(store_clock::now(&store).await?)?;
    let signals = store.activity_signals().await?;
    let mut out = csv::Writer::from_writer(std::io::stdout().lock());
    let mut header: Vec<String> = ["instance", "time", "gpu_util", "gpu_mem_mib", "gpus_busy"]
        .map(String::from)
        .to_vec();
    header.extend(signals.iter().map(|s| format!("{ACTIVITY_PREFIX}{s}")));
    out.write_record(&header)?;
    // Every reading kept, also past the system clock's now (a simulated fleet's clock may
    // run ahead of it).
    let until = chrono::NaiveDate::from_ymd_opt(9999, 12, 31)
        .and_then(|d| d.and_hms_opt(0, 0, 0))
        .map_or(DateTime::<Utc>::MAX_UTC, |t| t.and_utc());
    let instances = store.instances_with_readings(since).await?;
    // The first write error ends the export: quietly for a closed pipe (`| head`), with its
    // message for any other (a full disk).
    let mut failed: Option<csv::Error> = None;
    'chunks: for chunk in instances.chunks(EXPORT_CHUNK) {
        let mut readings = store.gpu_readings_of(chunk, since, until).await?;
        let mut uses = store.activity_uses_of(chunk, until).await?;
        for instance in chunk {
            let samples = readings.remove(instance).unwrap_or_default();
            let uses = uses.remove(instance).unwrap_or_default();
            let times: Vec<DateTime<Utc>> = samples.iter().map(|s| s.at).collect();
            let columns: Vec<Vec<String>> = signals
                .iter()
                .map(|name| {
                    let kept = uses.get(name).map_or(&[][..], |u| &u[..]);
                    let seen = SignalRecording::at_rows(name, &times, kept).seen;
                    seen.iter()
                        .map(|(_, last)| last.map(rfc3339).unwrap_or_default())
                        .collect()
                })
                .collect();
            for (k, s) in samples.iter().enumerate() {
                let mut row = vec![
                    instance.clone(),
                    rfc3339(s.at),
                    format!("{:.1}", s.percent),
                    // Empty when the source did not say.
                    s.memory_mib.map(|m| m.to_string()).unwrap_or_default(),
                    s.gpus_busy.map(|b| b.to_string()).unwrap_or_default(),
                ];
                row.extend(columns.iter().map(|c| c[k].clone()));
                if let Err(e) = out.write_record(&row) {
                    failed = Some(e);
                    break 'chunks;
                }
            }
        }
    }
    let closed = |e: &std::io::Error| e.kind() == std::io::ErrorKind::BrokenPipe;
    if let Some(e) = failed {
        if matches!(e.kind(), csv::ErrorKind::Io(io) if closed(io)) {
            return Err(super::StdoutClosed.into());
        }
        return Err(e).context("cannot write the readings");
    }
    match out.flush() {
        Err(e) if closed(&e) => Err(super::StdoutClosed.into()),
        flushed => Ok(flushed.map(|()| ExitCode::SUCCESS)?),
    }
}
