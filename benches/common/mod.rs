//! What the benchmarks share: the demo fleet copied to any size, and databases made afresh on
//! the DATABASE_URL server.

use ebb::clock::Clock;
use ebb::cloud::sim::SimProvider;
use ebb::reconcile::{Options, PolicySource, Reconciler};
use ebb::store::{Leadership, Store};
use serde_yaml::Value;
use sqlx::{Connection, PgConnection};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use tokio::runtime::Runtime;

/// Whether criterion measures (`cargo bench`), rather than runs each benchmark once (`cargo test
/// --benches`).
pub fn measuring() -> bool {
    std::env::args().any(|a| a == "--bench")
}

/// The repository.
pub fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The demo fleet copied to `n` instances, as a JSON snapshot file in `dir`.
pub fn snapshot(n: usize, dir: &Path) -> PathBuf {
    let demo: Value = serde_yaml::from_str(
        &std::fs::read_to_string(root().join("deploy/demo-fleet.yaml")).unwrap(),
    )
    .unwrap();
    let templates = demo["instances"].as_sequence().unwrap();
    let instances: Vec<Value> = (0..n)
        .map(|i| {
            let mut instance = templates[i % templates.len()].clone();
            instance["id"] = Value::String(format!("i-{i:017x}"));
            instance
        })
        .collect();
    let mut fleet = demo.clone();
    fleet["instances"] = Value::Sequence(instances);
    let path = dir.join(format!("fleet-{n}.json"));
    std::fs::write(&path, serde_json::to_vec(&fleet).unwrap()).unwrap();
    path
}

/// A database of the benchmark: its name, and the statements that make it afresh (sqlx takes
/// only static SQL).
pub type Database = (&'static str, [&'static str; 2]);

/// `database` made afresh on the DATABASE_URL server; its URL.
pub fn database(rt: &Runtime, (name, statements): Database) -> String {
    let url =
        std::env::var("DATABASE_URL").expect("set DATABASE_URL (scripts/test starts a Postgres)");
    let (server, _) = url
        .rsplit_once('/')
        .expect("DATABASE_URL ends in /DATABASE");
    rt.block_on(async {
        let mut admin = PgConnection::connect(&url).await.unwrap();
        for sql in statements {
            sqlx::query(sql).execute(&mut admin).await.unwrap();
        }
    });
    format!("{server}/{name}")
}

/// A reconciler of the simulated fleet in the snapshot `fleet` on `clock`, with the example
/// policies, on the migrated database at `url`, and its leadership.
pub fn reconciler(
    rt: &Runtime,
    url: &str,
    fleet: &Path,
    clock: Clock,
) -> (Reconciler<SimProvider>, Leadership) {
    let (fleet, behaviours) = ebb::snapshot::load_simulation(fleet).unwrap();
    rt.block_on(async {
        let store = Store::connect(url).await.unwrap();
        store.migrate().await.unwrap();
        let leader = store.try_lead("bench").await.unwrap().unwrap();
        let policies = Arc::new(PolicySource::new(vec![root().join("policies")]));
        let provider = SimProvider::new(fleet, behaviours, clock);
        (
            Reconciler::new(provider, store, policies, Options::default()),
            leader,
        )
    })
}
