//! The shipped instance catalogue (`deploy/instance-types.yaml`) against DescribeInstanceTypes
//! as moto answers it (moto ships AWS's own descriptions): every row of a type moto knows is
//! what `ebb::cloud::aws::catalogue::type_facts` reads from the API, generation included.

use crate::common::moto::emulator;
use ebb::cloud::aws::catalogue::describe_types;

#[tokio::test]
async fn the_shipped_catalogue_matches_describe_instance_types() {
    // Read-only: no region of its own is needed, but one no other test uses keeps it apart.
    let ec2 = aws_sdk_ec2::Client::new(&emulator("il-central-1").await);
    let shipped = ebb::advise::catalogue::shipped();
    let mut compared = Vec::new();
    for (name, row) in &shipped.types {
        // One type a call: EC2 (and moto) refuse a whole call for one type they do not know.
        let Ok(described) = describe_types(&ec2, std::slice::from_ref(name)).await else {
            continue;
        };
        let facts = described
            .get(name)
            .unwrap_or_else(|| panic!("{name}: described without accelerators"));
        assert_eq!(
            facts, row,
            "{name}: the file's row against DescribeInstanceTypes"
        );
        compared.push(name.clone());
    }
    // moto lacks only the oldest family (p3 but for p3dn): every other row was compared.
    let unknown: Vec<&String> = shipped
        .types
        .keys()
        .filter(|t| !compared.contains(t))
        .collect();
    assert!(
        unknown.iter().all(|t| t.starts_with("p3.")),
        "not compared: {unknown:?}"
    );
    assert!(compared.len() >= 40, "{compared:?}");
    // A type without accelerators has no row.
    let plain = describe_types(&ec2, &["m5.large".to_string()])
        .await
        .unwrap();
    assert!(plain.is_empty(), "{plain:?}");
}

/// `ebb tick` describes the catalogue's families (DescribeInstanceTypes filtered by family)
/// and keeps them in Postgres when the kept ones are missing or a day old: a tick two hours
/// later leaves them as they are, one 25 hours later describes them again. What it keeps is
/// the shipped file's rows.
#[sqlx::test(migrations = false)]
async fn a_tick_keeps_the_catalogue_in_postgres_and_refreshes_it_daily(pool: sqlx::PgPool) {
    let f = crate::common::moto::Fixture::new("il-central-1").await;
    let url = crate::common::migrated_for_runtime(&pool).await;
    let policies = tempfile::tempdir().unwrap();
    std::fs::write(
        policies.path().join("p.yaml"),
        "policies:\n  - name: none\n    match: {tags: {team: nobody}}\n    idle: {gpu_below: 5, for: 1h}\n",
    )
    .unwrap();
    let tick = |at: &str| {
        let out = crate::common::Ebb::on(&url)
            .env("EBB_POLICIES", policies.path())
            .env("EBB_REGIONS", f.region)
            .env("EBB_MANAGED_TAG", format!("ebb:managed={}", f.managed))
            .run(&["tick", "--at", at]);
        assert!(out.status.success(), "tick at {at}: {out:?}");
    };
    let kept = || async {
        let rows: Vec<(String, serde_json::Value, chrono::DateTime<chrono::Utc>)> =
            sqlx::query_as("SELECT instance_type, facts, described_at FROM instance_types")
                .fetch_all(&pool)
                .await
                .unwrap();
        rows
    };
    let at = |s: &str| ebb::when::parse_time(s).unwrap();
    tick("2026-11-30T20:00:00Z");
    let first = kept().await;
    let shipped = ebb::advise::catalogue::shipped();
    assert!(first.len() >= 40, "{}", first.len());
    for (name, facts, described_at) in &first {
        assert_eq!(*described_at, at("2026-11-30T20:00:00Z"), "{name}");
        let facts: ebb::fleet::TypeFacts = serde_json::from_value(facts.clone()).unwrap();
        if let Some(row) = shipped.get(name) {
            assert_eq!(&facts, row, "{name}");
        }
    }
    assert!(first.iter().any(|(n, _, _)| n == "g5.xlarge"));
    tick("2026-11-30T22:00:00Z");
    assert!(kept()
        .await
        .iter()
        .all(|(_, _, d)| *d == at("2026-11-30T20:00:00Z")));
    tick("2026-12-01T21:00:00Z");
    assert!(kept()
        .await
        .iter()
        .all(|(_, _, d)| *d == at("2026-12-01T21:00:00Z")));
}

/// The catalogue phase of a tick through the test layer over the AWS provider: a refused
/// DescribeInstanceTypes keeps nothing and the tick goes on; the next look, an hour later, is
/// forwarded to EC2 and keeps what it describes. Without the layer's forwarding the phase would
/// get the trait's empty default and keep nothing either time.
#[sqlx::test]
async fn the_catalogue_phase_runs_under_the_fault_layer(pool: sqlx::PgPool) {
    use crate::common::intercept::{Intercept, Method};
    use ebb::cloud::CloudError;
    use ebb::reconcile::{Options, PolicySource, Reconciler};
    use ebb::store::Store;
    use std::sync::Arc;

    let f = crate::common::moto::Fixture::new("il-central-1").await;
    let store = Store::from_pool(pool.clone());
    store.migrate().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("p.yaml"),
        "policies:\n  - name: none\n    match: {tags: {team: nobody}}\n    idle: {gpu_below: 5, for: 1h}\n",
    )
    .unwrap();
    let policies = Arc::new(PolicySource::new(vec![dir.path().to_path_buf()]));
    let cloud = Intercept::new(f.provider().await);
    let throttled = CloudError::throttled("DescribeInstanceTypes");
    cloud.refuse_next(Method::InstanceTypes, 1, throttled);
    let reconciler = Reconciler::new(cloud.clone(), store.clone(), policies, Options::default());
    let mut leader = store.try_lead("test").await.unwrap().unwrap();
    let kept = || async {
        let count: (i64,) = sqlx::query_as("SELECT count(*) FROM instance_types")
            .fetch_one(&pool)
            .await
            .unwrap();
        count.0
    };
    let descriptions = || {
        let calls = cloud.calls();
        calls
            .iter()
            .filter(|c| c.method == Method::InstanceTypes)
            .count()
    };
    let t0 = ebb::when::parse_time("2026-11-30T20:00:00Z").unwrap();
    reconciler.tick(t0, &mut leader).await.unwrap();
    assert_eq!(descriptions(), 1);
    assert_eq!(kept().await, 0, "a refused description keeps nothing");
    reconciler
        .tick(t0 + chrono::Duration::hours(2), &mut leader)
        .await
        .unwrap();
    assert_eq!(descriptions(), 2);
    assert!(kept().await >= 40, "{} types kept", kept().await);
}
