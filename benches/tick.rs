//! The control plane on large simulated fleets (DATABASE_URL, as scripts/test sets it up): the
//! duration of a steady-state tick (inventory, sync, decide, GPU readings, actions, audit) in
//! process, and the resident memory and tick duration of the `ebb serve` binary itself.
//!
//! The fleets are the demo fleet (`deploy/demo-fleet.yaml`) copied to 10k and 100k instances,
//! with the example policies. `cargo bench --bench tick` measures both sizes; the test run
//! (`cargo test --benches`) does one tick and one short `serve` on 1k, so the bench keeps
//! working.

mod common;

use common::{database, measuring, reconciler, root, snapshot, Database};
use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use ebb::clock::Clock;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use tokio::runtime::Runtime;

/// Monday 12:30 UTC: Shanghai has closed, Berlin and New York are at work.
const START: &str = "2026-11-30T12:30:00Z";

const TICK_DATABASE: Database = (
    "ebb_bench_tick",
    [
        "DROP DATABASE IF EXISTS ebb_bench_tick WITH (FORCE)",
        "CREATE DATABASE ebb_bench_tick",
    ],
);

const SERVE_DATABASE: Database = (
    "ebb_bench_serve",
    [
        "DROP DATABASE IF EXISTS ebb_bench_serve WITH (FORCE)",
        "CREATE DATABASE ebb_bench_serve",
    ],
);

fn tick(c: &mut Criterion) {
    let rt = Runtime::new().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let sizes: &[usize] = if measuring() {
        &[10_000, 100_000]
    } else {
        &[1_000]
    };
    let mut group = c.benchmark_group("tick");
    group.sample_size(10);
    for &n in sizes {
        let url = database(&rt, TICK_DATABASE);
        let fleet = snapshot(n, dir.path());
        let start = ebb::when::parse_time(START).unwrap();
        // A tick takes a few seconds at 100k: at 20 times real speed each measured tick covers
        // about a simulated minute, the fleet's change between two ticks in production
        // (EBB_TICK=60s).
        let clock = Clock::simulated(start, 20.0);
        let (reconciler, mut leader) = reconciler(&rt, &url, &fleet, clock);
        // The first tick writes every instance; the ones measured are the steady state.
        let first = rt
            .block_on(reconciler.tick(clock.now(), &mut leader))
            .unwrap();
        assert_eq!(first.instances, n);
        group.throughput(Throughput::Elements(n as u64));
        group.bench_function(format!("steady/{n}"), |b| {
            b.iter_custom(|iters| {
                let started = Instant::now();
                for _ in 0..iters {
                    rt.block_on(reconciler.tick(clock.now(), &mut leader))
                        .unwrap();
                }
                started.elapsed()
            })
        });
        drop(leader);
        serve_memory(&rt, n, dir.path());
    }
    group.finish();
}

/// Runs `ebb serve` on the fleet of `n` for a few ticks and prints its peak resident memory and
/// its own mean tick duration after the first (which writes every instance), from `/metrics`.
fn serve_memory(rt: &Runtime, n: usize, dir: &Path) {
    let url = database(rt, SERVE_DATABASE);
    // The migrate step of a deployment: serve does not migrate.
    let migrated = Command::new(env!("CARGO_BIN_EXE_ebb"))
        .arg("migrate")
        .env("DATABASE_URL", &url)
        .output()
        .unwrap();
    assert!(migrated.status.success(), "{migrated:?}");
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut serve = Command::new(env!("CARGO_BIN_EXE_ebb"))
        .args([
            "serve",
            "--tick",
            "1m",
            "--clock-start",
            START,
            "--clock-speed",
            "60",
        ])
        .env("DATABASE_URL", &url)
        .env(
            "EBB_CLOUD",
            format!("sim:{}", dir.join(format!("fleet-{n}.json")).display()),
        )
        .env("EBB_POLICIES", root().join("policies"))
        .env("EBB_LISTEN", format!("127.0.0.1:{port}"))
        .env("EBB_LOG", "warn")
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let ticks = if measuring() { 6.0 } else { 2.0 };
    let metric = |text: &str, name: &str| -> f64 {
        text.lines()
            .find_map(|l| l.strip_prefix(name)?.trim().parse().ok())
            .unwrap_or(0.0)
    };
    let started = Instant::now();
    let wait_for = |ticks: f64| loop {
        std::thread::sleep(Duration::from_millis(200));
        let text = rt
            .block_on(async {
                reqwest::get(format!("http://127.0.0.1:{port}/metrics"))
                    .await?
                    .text()
                    .await
            })
            .unwrap_or_default();
        if metric(&text, "ebb_tick_duration_seconds_count") >= ticks {
            break text;
        }
        assert!(
            started.elapsed() < Duration::from_secs(600),
            "serve did not tick"
        );
    };
    let first = wait_for(1.0);
    let text = wait_for(ticks);
    let status = std::fs::read_to_string(format!("/proc/{}/status", serve.id())).unwrap();
    let kib = |field: &str| -> f64 {
        status
            .lines()
            .find_map(|l| {
                l.strip_prefix(field)?
                    .trim()
                    .trim_end_matches(" kB")
                    .parse()
                    .ok()
            })
            .unwrap_or(0.0)
    };
    let _ = serve.kill();
    let _ = serve.wait();
    let (count, sum) = (
        "ebb_tick_duration_seconds_count",
        "ebb_tick_duration_seconds_sum",
    );
    let later = metric(&text, count) - metric(&first, count);
    println!(
        "serve/{n}: first tick {:.3} s, then {later} ticks of {:.3} s on average; resident {:.0} MB now, {:.0} MB at most (VmHWM)",
        metric(&first, sum) / metric(&first, count),
        (metric(&text, sum) - metric(&first, sum)) / later,
        kib("VmRSS:") / 1024.0,
        kib("VmHWM:") / 1024.0,
    );
}

criterion_group!(benches, tick);
criterion_main!(benches);
