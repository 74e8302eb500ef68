//! A simulation, not a timing: the Monday opening of a large fleet on the simulated EC2, which
//! meters calls with EC2's default token buckets (StartInstances: 5 calls refilled at 2 a
//! second, 1,000 instances refilled at 2 a second), through ebb's real reconciler and a real
//! Postgres (DATABASE_URL, as scripts/test sets it up), on paused time, a tick every simulated
//! minute. For each of: pacing on or off, `start_ahead` 0 or 80 minutes, it prints how many
//! boxes run at the 09:00 opening, when the last one runs, and how many start outcomes EC2
//! throttled. The figures are simulated time, the same in any build profile; BENCHMARKS.md
//! quotes them. `cargo bench --bench opening` runs 10,000 boxes; the test run (`cargo test
//! --benches`) 1,000.

#[allow(dead_code)] // this simulation uses a part of the shared helpers
mod common;

use common::{database, measuring, Database};
use ebb::clock::Clock;
use ebb::cloud::pacing::{Pacer, RateLimits};
use ebb::cloud::sim::SimProvider;
use ebb::cloud::Provider;
use ebb::engine::Action;
use ebb::fleet::InstanceState;
use ebb::reconcile::{Options, Pacing, PolicySource, Reconciler};
use ebb::store::{AuditFilter, Outcome, Store};
use std::sync::Arc;
use std::time::{Duration, Instant};

const DATABASE: Database = (
    "ebb_bench_opening",
    [
        "DROP DATABASE IF EXISTS ebb_bench_opening WITH (FORCE)",
        "CREATE DATABASE ebb_bench_opening",
    ],
);

/// What one opening came to.
struct Figures {
    running_at_opening: usize,
    last_running: Option<chrono::DateTime<chrono::Utc>>,
    throttled: usize,
    wall: Duration,
}

fn main() {
    let n = if measuring() { 10_000 } else { 1_000 };
    println!("opening of {n} stopped boxes at 09:00 UTC, EC2's default buckets, a tick a minute");
    println!(
        "| pacing | start_ahead | running at 09:00 | all running at | throttled starts | wall |"
    );
    for (paced, ahead) in [
        (true, None),
        (true, Some("80m")),
        (false, None),
        (false, Some("80m")),
    ] {
        let rt = tokio::runtime::Runtime::new().unwrap();
        let url = database(&rt, DATABASE);
        drop(rt);
        let f = on_paused_time(|| opening(&url, n, paced, ahead));
        println!(
            "| {} | {} | {} | {} | {} | {:.0} s |",
            if paced { "on" } else { "off" },
            ahead.unwrap_or("0"),
            f.running_at_opening,
            f.last_running.map_or("not by 12:00".to_string(), |t| t
                .format("%H:%M")
                .to_string()),
            f.throttled,
            f.wall.as_secs_f64()
        );
    }
}

/// Runs `work` on a current-thread runtime whose clock starts paused and moves only by
/// `tokio::time::advance` (a blocking task held meanwhile keeps tokio from moving it while it
/// waits on Postgres; see tests/common/time.rs).
fn on_paused_time<F: std::future::Future>(work: impl FnOnce() -> F) -> F::Output {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .start_paused(true)
        .build()
        .unwrap();
    runtime.block_on(async {
        let (_release, held) = std::sync::mpsc::channel::<()>();
        drop(tokio::task::spawn_blocking(move || {
            let _ = held.recv();
        }));
        work().await
    })
}

async fn opening(url: &str, n: usize, paced: bool, ahead: Option<&str>) -> Figures {
    let at = |hm: &str| ebb::when::parse_time(&format!("2026-11-30T{hm}:00Z")).unwrap();
    let clock = Clock::simulated(at("07:00"), 1.0);
    let (reconciler, store, _dir) = office(url, n, paced, ahead, clock).await;
    let mut leader = store.try_lead("bench").await.unwrap().unwrap();
    reconciler.tick(clock.now(), &mut leader).await.unwrap();
    let ids: Vec<String> = (0..n).map(|i| format!("i-{i:05}")).collect();
    store
        .record_action(&ids, Action::Stop, at("07:00") - chrono::Duration::days(3))
        .await
        .unwrap();
    let began = Instant::now();
    let (mut running_at_opening, mut last_running) = (0, None);
    while clock.now() < at("12:00") {
        tokio::time::advance(Duration::from_secs(60)).await;
        let up = running(reconciler.provider()).await;
        if clock.now() == at("09:00") {
            running_at_opening = up;
        }
        if up == n {
            last_running = Some(clock.now());
            break;
        }
        reconciler.tick(clock.now(), &mut leader).await.unwrap();
    }
    let throttled = store
        .audit(&AuditFilter::default())
        .await
        .unwrap()
        .iter()
        .filter(|r| r.entry.action == "start" && r.entry.outcome == Outcome::Failed)
        .filter(|r| {
            r.entry
                .error
                .as_deref()
                .is_some_and(|e| e.contains("RequestLimitExceeded"))
        })
        .count();
    Figures {
        running_at_opening: if last_running.is_some_and(|t| t <= at("09:00")) {
            n
        } else {
            running_at_opening
        },
        last_running,
        throttled,
        wall: began.elapsed(),
    }
}

/// How many of the simulated boxes run.
async fn running(provider: &SimProvider) -> usize {
    provider
        .instances()
        .await
        .instances
        .iter()
        .filter(|i| i.state == InstanceState::Running)
        .count()
}

/// `n` stopped research boxes on the simulated EC2 metered by EC2's default buckets, their
/// office-hours policy (with `start_ahead` when `ahead`), and a reconciler over them that paces
/// its calls when `paced`, on `clock`.
async fn office(
    url: &str,
    n: usize,
    paced: bool,
    ahead: Option<&str>,
    clock: Clock,
) -> (Reconciler<SimProvider>, Store, tempfile::TempDir) {
    let store = Store::connect(url).await.unwrap();
    store.migrate().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("policies")).unwrap();
    let ahead = ahead.map_or(String::new(), |a| format!("\n      start_ahead: {a}"));
    std::fs::write(
        dir.path().join("policies/office.yaml"),
        format!(
            "policies:\n  - name: office\n    match: {{tags: {{team: research}}}}\n    work_hours:\n      timezone: UTC\n      periods: [{{days: mon-fri, start: \"09:00\", stop: \"19:00\"}}]{ahead}\n"
        ),
    )
    .unwrap();
    let mut fleet = String::from("instances:\n");
    for i in 0..n {
        fleet.push_str(&format!(
            "  - {{id: i-{i:05}, region: us-east-1, type: g5.xlarge, state: stopped, tags: {{team: research}}}}\n"
        ));
    }
    std::fs::write(dir.path().join("fleet.yaml"), fleet).unwrap();
    let (fleet, behaviours) =
        ebb::snapshot::load_simulation(&dir.path().join("fleet.yaml")).unwrap();
    let mut provider = SimProvider::new(fleet, behaviours, clock).metered(RateLimits::default());
    let mut options = Options::default();
    if paced {
        let pacer = Arc::new(Pacer::new(RateLimits::default(), &clock));
        provider = provider.paced_by(pacer.clone());
        // Only what the buckets hold at the tick: tokio's clock moves only between ticks here.
        options.pacing = Some(Pacing {
            pacer,
            within: Duration::ZERO,
            batch: 100,
        });
    }
    let policies = Arc::new(PolicySource::new(vec![dir.path().join("policies")]));
    let reconciler = Reconciler::new(provider, store.clone(), policies, options);
    (reconciler, store, dir)
}
