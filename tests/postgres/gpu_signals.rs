//! The GPU memory used and the count of busy GPUs kept beside each reading (migration 0025):
//! written in the same statement as the utilisation, replaced with their slot, read back by
//! every reader of the readings, pruned with them, and NULL (not twelve NULLs) for rows whose
//! source gave neither.

use crate::common;

use chrono::Duration;
use common::t;
use ebb::fleet::Sample;
use ebb::store::Store;
use sqlx::PgPool;

fn at(m: i64) -> chrono::DateTime<chrono::Utc> {
    t("2026-11-30T10:00:00Z") + Duration::minutes(m)
}

fn full(m: i64, percent: f64, memory: Option<u32>, busy: Option<u16>) -> Sample {
    Sample {
        at: at(m),
        percent,
        memory_mib: memory,
        gpus_busy: busy,
    }
}

/// A kept reading as (minute, percent, memory, busy).
type Kept = (i64, f64, Option<u32>, Option<u16>);

/// Each kept reading of `id`.
async fn kept(store: &Store, id: &str) -> Vec<Kept> {
    store
        .gpu_readings(id, at(0), at(180))
        .await
        .unwrap()
        .iter()
        .map(|s| {
            (
                (s.at - at(0)).num_minutes(),
                s.percent,
                s.memory_mib,
                s.gpus_busy,
            )
        })
        .collect()
}

#[sqlx::test]
async fn memory_and_busy_gpus_are_kept_replaced_with_their_slot_and_read_back(pool: PgPool) {
    let store = Store::from_pool(pool.clone());
    let first = [
        full(0, 30.0, Some(12_288), Some(1)),
        full(5, 2.0, Some(12_288), Some(0)),
        full(10, 1.0, None, None),
    ];
    store.record_gpu_readings(&[("i-1", &first)]).await.unwrap();
    // The next tick reads 10:05 again (now without memory: the agent restarted) and 10:15.
    let second = [
        full(5, 3.0, None, Some(0)),
        full(15, 90.0, Some(40_960), Some(8)),
    ];
    store
        .record_gpu_readings(&[("i-1", &second)])
        .await
        .unwrap();
    assert_eq!(
        kept(&store, "i-1").await,
        [
            (0, 30.0, Some(12_288), Some(1)),
            (5, 3.0, None, Some(0)),
            (10, 1.0, None, None),
            (15, 90.0, Some(40_960), Some(8)),
        ]
    );
    // The tick's reads and the export see them too.
    let of = store
        .gpu_readings_of(&["i-1".to_string()], at(0), at(60))
        .await
        .unwrap();
    assert_eq!(of["i-1"][3].memory_mib, Some(40_960));
    assert_eq!(store.instances_with_readings(at(0)).await.unwrap(), ["i-1"]);
    let exported: Vec<_> = of["i-1"]
        .iter()
        .map(|s| (s.memory_mib, s.gpus_busy))
        .collect();
    assert_eq!(exported[0], (Some(12_288), Some(1)));
    assert_eq!(exported.len(), 4);
    // Pruned with their hour.
    store
        .record_gpu_readings(&[("i-1", &[full(60, 5.0, Some(1), Some(1))])])
        .await
        .unwrap();
    store.prune(at(0), at(60)).await.unwrap();
    assert_eq!(kept(&store, "i-1").await, [(60, 5.0, Some(1), Some(1))]);
}

#[sqlx::test]
async fn a_source_without_memory_or_counts_keeps_null_not_twelve_nulls(pool: PgPool) {
    let store = Store::from_pool(pool.clone());
    let plain = [Sample::new(at(0), 10.0), Sample::new(at(5), 20.0)];
    store.record_gpu_readings(&[("i-1", &plain)]).await.unwrap();
    // A second tick of the same hour, still without them.
    store
        .record_gpu_readings(&[("i-1", &[Sample::new(at(10), 30.0)])])
        .await
        .unwrap();
    // Another instance with memory only.
    store
        .record_gpu_readings(&[("i-2", &[full(0, 1.0, Some(512), None)])])
        .await
        .unwrap();
    let rows: Vec<(String, bool, bool)> = sqlx::query_as(
        "SELECT instance, memory_mib IS NULL, gpus_busy IS NULL FROM gpu_readings ORDER BY instance",
    )
    .fetch_all(&pool)
    .await
    .unwrap();
    assert_eq!(
        rows,
        [
            ("i-1".to_string(), true, true),
            ("i-2".to_string(), false, true)
        ]
    );
    assert_eq!(
        kept(&store, "i-1").await,
        [
            (0, 10.0, None, None),
            (5, 20.0, None, None),
            (10, 30.0, None, None)
        ]
    );
}
