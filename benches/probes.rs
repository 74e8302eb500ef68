//! The health probe while another client holds the API's connections: the time from connect to
//! the last byte of `GET /healthz` on a new connection to `ebb serve` (in this process, as
//! `main` starts it, on the simulated demo fleet of 100 with a Postgres database of its own,
//! DATABASE_URL as scripts/test sets it up) while 600 idle connections are held open, more than
//! the cap of 512. Their timeouts are an hour, so the cap stays used up for the whole
//! measurement, and a request for anything else on a new connection is answered 503 (checked
//! before measuring). The target: under 100 ms, well within a Kubernetes probe's 1 s timeout.
//! `cargo test --benches` probes once, so the bench keeps working.

#[allow(dead_code)] // the benchmark uses a part of the shared helpers
mod common;

use common::{database, reconciler, snapshot, Database};
use criterion::{criterion_group, criterion_main, Criterion};
use ebb::api::{ApiLimits, Tokens};
use ebb::clock::Clock;
use ebb::control::Control;
use ebb::serve::{self, HttpLimits, Retention};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::time::Duration;
use tokio::runtime::Runtime;

const PROBES_DATABASE: Database = (
    "ebb_bench_probes",
    [
        "DROP DATABASE IF EXISTS ebb_bench_probes WITH (FORCE)",
        "CREATE DATABASE ebb_bench_probes",
    ],
);

/// The idle connections the other client holds.
const HELD: usize = 600;

/// `GET path` on a new connection to `addr`, read to its end (a connection past the cap is
/// closed after one answer; `Connection: close` closes any other).
fn ask(addr: SocketAddr, path: &str) -> String {
    let mut stream = TcpStream::connect(addr).unwrap();
    let head = format!("GET {path} HTTP/1.1\r\nHost: ebb\r\nConnection: close\r\n\r\n");
    stream.write_all(head.as_bytes()).unwrap();
    let mut answer = Vec::new();
    stream.read_to_end(&mut answer).unwrap();
    String::from_utf8_lossy(&answer).into_owned()
}

/// `ebb serve` on a free port of 127.0.0.1 with hour-long connection timeouts; its address.
fn serving(rt: &Runtime, dir: &std::path::Path) -> SocketAddr {
    let url = database(rt, PROBES_DATABASE);
    let fleet = snapshot(100, dir);
    let start = ebb::when::parse_time("2026-11-30T12:30:00Z").unwrap();
    // Leadership is serve's own to take.
    let (reconciler, leader) = reconciler(rt, &url, &fleet, Clock::Fixed(start));
    drop(leader);
    let listen = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let config = serve::Config {
        name: "bench".to_string(),
        interval: Duration::from_secs(60),
        deadline: Duration::from_secs(300),
        clock: Clock::Fixed(start),
        listen,
        http: HttpLimits {
            header_timeout: Duration::from_secs(3600),
            idle_timeout: Duration::from_secs(3600),
            max_connections: 512,
        },
        tokens: Tokens::default(),
        checkpoints: None,
        limits: ApiLimits::default(),
        interruptions: None,
        retention: Retention {
            history: chrono::Duration::days(90),
            readings: chrono::Duration::days(35),
        },
        prices: Default::default(),
        cloud: ebb::fleet::Cloud::Aws,
        events: None,
        trusted_proxies: Vec::new(),
    };
    let control = Arc::new(Control::default());
    rt.spawn(serve::run(
        reconciler,
        config,
        control,
        std::future::pending::<()>(),
    ));
    for _ in 0..600 {
        if TcpStream::connect(listen).is_ok() {
            return listen;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!("ebb serve did not listen on {listen}");
}

fn healthz_with_the_cap_used_up(c: &mut Criterion) {
    let rt = Runtime::new().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let addr = serving(&rt, dir.path());
    let held: Vec<TcpStream> = (0..HELD)
        .map(|_| TcpStream::connect(addr).unwrap())
        .collect();
    // The cap is used up: anything but a probe on a new connection is told to come back.
    let mut refused = String::new();
    for _ in 0..100 {
        refused = ask(addr, "/v1/status");
        if refused.starts_with("HTTP/1.1 503") {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(refused.starts_with("HTTP/1.1 503"), "{refused}");
    c.bench_function("healthz_with_600_idle_connections", |b| {
        b.iter(|| {
            let answer = ask(addr, "/healthz");
            assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
        })
    });
    drop(held);
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(50);
    targets = healthz_with_the_cap_used_up
}
criterion_main!(benches);
