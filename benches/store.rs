//! Store benchmarks against a real Postgres (DATABASE_URL, as scripts/test sets it up):
//! inventory sync of 100k instances (first time and unchanged) and audit appends per second.
//!
//! `cargo bench --bench store` measures 100k instances; the test run (`cargo test
//! --all-targets`, without `--bench`) does each once on 1k, so the bench keeps working.

use chrono::{DateTime, Duration, Utc};
use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use ebb::fleet::{Billing, Instance, InstanceState, Lifecycle, Sample};
use ebb::store::{NewAuditEntry, Outcome, Store};
use sqlx::{Connection, PgConnection};
use std::time::Instant;
use tokio::runtime::Runtime;

fn measuring() -> bool {
    std::env::args().any(|a| a == "--bench")
}

/// A fleet of `n` instances with a realistic spread of regions, types, states and tags.
fn fleet(n: usize) -> Vec<Instance> {
    let regions = ["us-east-1", "us-west-2", "eu-west-1", "ap-east-1"];
    let types = [
        "g5.xlarge",
        "g5.12xlarge",
        "p4d.24xlarge",
        "p5.48xlarge",
        "g4dn.xlarge",
    ];
    let now = DateTime::parse_from_rfc3339("2026-11-30T12:00:00Z")
        .unwrap()
        .with_timezone(&Utc);
    (0..n)
        .map(|i| Instance {
            id: format!("i-{i:017x}"),
            region: regions[i % regions.len()].to_string(),
            instance_type: types[i % types.len()].to_string(),
            state: if i % 3 == 0 {
                InstanceState::Stopped
            } else {
                InstanceState::Running
            },
            state_since: None,
            lifecycle: if i % 7 == 0 {
                Lifecycle::Spot
            } else {
                Lifecycle::OnDemand
            },
            launched_at: Some(now - Duration::minutes((i % 5000) as i64)),
            tags: [
                ("team".to_string(), format!("team-{}", i % 40)),
                (
                    "env".to_string(),
                    if i % 2 == 0 { "dev" } else { "prod" }.to_string(),
                ),
                ("Name".to_string(), format!("box-{i}")),
            ]
            .into_iter()
            .collect(),
            gpus: None,
            gpu_util: Vec::<Sample>::new(),
            via_role: None,
            billing: Billing::EC2,
            private_ip: None,
        })
        .collect()
}

/// A fresh database `ebb_bench` on the DATABASE_URL server, migrated.
fn database(rt: &Runtime) -> Store {
    let url =
        std::env::var("DATABASE_URL").expect("set DATABASE_URL (scripts/test starts a Postgres)");
    let (server, _) = url
        .rsplit_once('/')
        .expect("DATABASE_URL ends in /DATABASE");
    rt.block_on(async {
        let mut admin = PgConnection::connect(&url).await.unwrap();
        sqlx::query("DROP DATABASE IF EXISTS ebb_bench WITH (FORCE)")
            .execute(&mut admin)
            .await
            .unwrap();
        sqlx::query("CREATE DATABASE ebb_bench")
            .execute(&mut admin)
            .await
            .unwrap();
        let store = Store::connect(&format!("{server}/ebb_bench"))
            .await
            .unwrap();
        store.migrate().await.unwrap();
        store
    })
}

fn sync(c: &mut Criterion) {
    let rt = Runtime::new().unwrap();
    let store = database(&rt);
    let n = if measuring() { 100_000 } else { 1_000 };
    let instances = fleet(n);
    let regions: Vec<String> = ["us-east-1", "us-west-2", "eu-west-1", "ap-east-1"]
        .map(String::from)
        .to_vec();
    let now = Utc::now();
    let mut group = c.benchmark_group("inventory_sync");
    group
        .sample_size(10)
        .throughput(Throughput::Elements(n as u64));
    group.bench_function(format!("first/{n}"), |b| {
        b.iter_batched(
            || {
                rt.block_on(
                    sqlx::query("TRUNCATE instance_events, instances, region_syncs")
                        .execute(store.pool()),
                )
                .unwrap();
            },
            |()| {
                rt.block_on(store.sync_inventory(&regions, &instances, now))
                    .unwrap()
            },
            BatchSize::PerIteration,
        )
    });
    rt.block_on(store.sync_inventory(&regions, &instances, now))
        .unwrap();
    group.bench_function(format!("unchanged/{n}"), |b| {
        b.iter(|| {
            let report = rt
                .block_on(store.sync_inventory(&regions, &instances, now))
                .unwrap();
            assert_eq!(report.unchanged, n);
        })
    });
    group.finish();
}

fn entry(i: u64) -> NewAuditEntry {
    NewAuditEntry {
        at: Utc::now(),
        actor: "scheduler".into(),
        instance: Some(format!("i-{i:017x}")),
        region: Some("us-east-1".into()),
        action: "stop".into(),
        outcome: Outcome::Intent,
        policy: Some("research-dev-hours".into()),
        policy_version: Some("sha256:4172a170b61c".into()),
        code: Some("outside_hours".into()),
        reason: "outside work hours (closed 20:00 Asia/Shanghai)".into(),
        dry_run: false,
        request_id: None,
        error: None,
        intent_seq: None,
    }
}

fn audit(c: &mut Criterion) {
    let rt = Runtime::new().unwrap();
    let store = database(&rt);
    let mut group = c.benchmark_group("audit_append");
    for batch in [1u64, 100] {
        group.throughput(Throughput::Elements(batch));
        group.bench_function(format!("rows_per_call/{batch}"), |b| {
            b.iter_custom(|iters| {
                let entries: Vec<NewAuditEntry> = (0..batch).map(entry).collect();
                let start = Instant::now();
                for _ in 0..iters {
                    rt.block_on(store.append_audit(&entries)).unwrap();
                }
                start.elapsed()
            })
        });
    }
    group.finish();
}

criterion_group!(benches, sync, audit);
criterion_main!(benches);
