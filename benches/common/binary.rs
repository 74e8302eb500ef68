//! What the benchmarks of the binary over a generated recording share (`replay.rs`,
//! `advise.rs`): the demo fleet's recording and prices, and a run of the binary measured.

use super::common::root;
use ebb::cloud::sim::RowOrder;
use std::io::BufWriter;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Monday 2026-11-30, the demo fleet's first day.
pub const FROM: &str = "2026-11-30T00:00:00Z";

/// The shipped on-demand table's us-east-1 prices for every region of the demo fleet.
pub fn demo_prices(dir: &Path) -> PathBuf {
    let table: serde_yaml::Value =
        serde_yaml::from_str(&std::fs::read_to_string(root().join("deploy/prices.yaml")).unwrap())
            .unwrap();
    let us = &table["prices"]["us-east-1"];
    let mut regions = serde_yaml::Mapping::new();
    for region in ["ap-east-1", "eu-central-1", "us-east-1", "us-west-2"] {
        regions.insert(region.into(), us.clone());
    }
    let mut out = serde_yaml::Mapping::new();
    out.insert("source".into(), "deploy/prices.yaml, us-east-1".into());
    out.insert("as_of".into(), "2025-05-01".into());
    out.insert("prices".into(), regions.into());
    let path = dir.join("prices.yaml");
    std::fs::write(&path, serde_yaml::to_string(&out).unwrap()).unwrap();
    path
}

/// Writes the generated recording of `fleet` over `days` with its rows in `order` (instance by
/// instance as `ebb metrics export` writes, or in time order as Prometheus dumps); how many
/// samples.
pub fn demo_recording_in(fleet: &Path, days: i64, path: &Path, order: RowOrder) -> u64 {
    let (fleet, behaviours) = ebb::snapshot::load_simulation(fleet).unwrap();
    let from = ebb::when::parse_time(FROM).unwrap();
    let mut out = BufWriter::new(std::fs::File::create(path).unwrap());
    let span = (from, from + chrono::Duration::days(days));
    ebb::cloud::sim::write_utilisation_in(order, &fleet, &behaviours, span, &mut out).unwrap()
}

/// The inputs of a run over the demo fleet copied to `n` instances and `days` days of its
/// generated recording, written to `dir` (`fleet-N.json`, `util.csv` with its rows in `order`,
/// `prices.yaml`): the arguments `--fleet … --utilisation … --prices … --from … --to …`, and
/// how many samples the recording holds.
pub fn write_inputs(dir: &Path, n: usize, days: i64, order: RowOrder) -> (Vec<String>, u64) {
    let fleet = super::common::snapshot(n, dir);
    let util = dir.join("util.csv");
    let started = Instant::now();
    let samples = demo_recording_in(&fleet, days, &util, order);
    eprintln!(
        "{n} instances × {days} days ({order:?}): {samples} samples generated in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    let from = ebb::when::parse_time(FROM).unwrap();
    let to = (from + chrono::Duration::days(days)).to_rfc3339();
    let path = |p: &Path| p.to_str().unwrap().to_string();
    let args = [
        "--fleet",
        &path(&fleet),
        "--utilisation",
        &path(&util),
        "--prices",
        &path(&demo_prices(dir)),
        "--from",
        FROM,
        "--to",
        &to,
    ];
    (args.iter().map(|s| s.to_string()).collect(), samples)
}

/// `EBB_BENCH_INPUTS=DIR`: the directory to write a benchmark's inputs to (and print its
/// command line for `/usr/bin/time` or `hyperfine`) instead of running criterion.
pub fn inputs_only() -> Option<PathBuf> {
    std::env::var_os("EBB_BENCH_INPUTS").map(PathBuf::from)
}

/// Prints the command line of the bench-profile binary with `args`, as a shell would take it.
pub fn print_command(args: &[String]) {
    println!("{} {}", env!("CARGO_BIN_EXE_ebb"), args.join(" "));
}

/// The CPU seconds (user and system, all threads) process `pid` has used so far.
fn cpu_seconds(pid: u32) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // After the command name in parentheses: state is field 3, utime 14, stime 15.
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    let ticks: f64 = fields.get(11)?.parse::<f64>().ok()? + fields.get(12)?.parse::<f64>().ok()?;
    // Linux counts them at USER_HZ, 100 a second.
    Some(ticks / 100.0)
}

/// One run of the binary: how long it took, its peak resident memory in MiB (VmHWM, read
/// until it exits), the CPU seconds it used (as last read before it exited: the machine is
/// shared, so this says more than the wall time), and what it printed.
pub fn run_binary(args: &[String], dir: &Path) -> (Duration, f64, f64, String) {
    let out = dir.join("report.json");
    let started = Instant::now();
    let mut child = Command::new(env!("CARGO_BIN_EXE_ebb"))
        .args(args)
        .stdout(std::fs::File::create(&out).unwrap())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let mut peak_kib = 0.0f64;
    let mut cpu = 0.0f64;
    let status = loop {
        if let Ok(status) = std::fs::read_to_string(format!("/proc/{}/status", child.id())) {
            let hwm = status
                .lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok());
            peak_kib = peak_kib.max(hwm.unwrap_or(0.0));
        }
        cpu = cpu_seconds(child.id()).unwrap_or(cpu);
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let took = started.elapsed();
    assert!(status.success(), "ebb {} failed", args[0]);
    (
        took,
        peak_kib / 1024.0,
        cpu,
        std::fs::read_to_string(out).unwrap(),
    )
}
