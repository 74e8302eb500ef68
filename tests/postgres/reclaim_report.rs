//! `ebb report` on reclaims written through the store's own functions: the disks a reclaimed
//! box no longer paid are in the gross, what its image stored comes off the net, by day and by
//! policy; a reclaim whose image was never proven counts nothing. Worked out by hand beside
//! each check.

use crate::common;

use chrono::{DateTime, Utc};
use common::database_url;
use ebb::fleet::money::Volume;
use ebb::store::{NewAuditEntry, ReclaimState, Store};
use serde_json::Value;
use sqlx::PgPool;

/// gp3 at $0.08 and snapshots at $0.05 per GB-month (730 hours): 730 GiB is $0.08/h of disk
/// and $0.05/h of image.
const PRICES: &str = "source: test
as_of: today
prices:
  us-east-1: {g.ten: 10.0}
while_stopped:
  source: test
  as_of: today
  ebs_gb_month:
    us-east-1: {gp3: 0.08}
  snapshot_gb_month:
    us-east-1: 0.05
";

const SINCE: &str = "2026-11-30T00:00:00Z";
const UNTIL: &str = "2026-12-02T00:00:00Z";

fn t(s: &str) -> DateTime<Utc> {
    s.parse().unwrap()
}

/// Plans the reclaim of `instance` under the policy `office`, due at `due`.
async fn planned(store: &Store, instance: &str, due: &str) -> ebb::store::ReclaimRecord {
    let audit = NewAuditEntry {
        instance: Some(instance.into()),
        ..NewAuditEntry::event(t(SINCE), "scheduler", "reclaim", "planned".into())
    };
    let since = t("2026-10-01T00:00:00Z");
    store
        .plan_reclaim(instance, "us-east-1", "office", since, t(due), since, audit)
        .await
        .unwrap()
        .unwrap()
}

/// i-a: its notice ended Monday 10:00, its image of 730 GiB of gp3 proven and the box
/// terminated 12:00, its restore asked Tuesday 12:00; the image kept. i-b: held before its
/// image was proven.
async fn history(store: &Store) {
    let mut a = planned(store, "i-a", "2026-11-30T10:00:00Z").await;
    a.state = ReclaimState::Reclaimed;
    a.image = Some("ami-a".into());
    a.image_volumes = Some(vec![Volume {
        volume_type: "gp3".into(),
        size_gib: 730,
    }]);
    a.terminated_at = Some(t("2026-11-30T12:00:00Z"));
    a.restore_asked_at = Some(t("2026-12-01T12:00:00Z"));
    store.save_reclaim(&a, &[]).await.unwrap();
    let mut b = planned(store, "i-b", "2026-11-30T10:00:00Z").await;
    b.state = ReclaimState::Held;
    b.image = Some("ami-b".into());
    b.ended_at = Some(t("2026-11-30T11:00:00Z"));
    store.save_reclaim(&b, &[]).await.unwrap();
}

fn report(pool: &PgPool, format: &str) -> String {
    let dir = tempfile::tempdir().unwrap();
    let prices = dir.path().join("prices.yaml");
    std::fs::write(&prices, PRICES).unwrap();
    let out = common::Ebb::on(&database_url(pool))
        .env("EBB_PRICES", &prices)
        .env_remove("EBB_CLOUD")
        .run(&[
            "report", "--since", SINCE, "--until", UNTIL, "--format", format, "--at", UNTIL,
        ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

#[sqlx::test]
async fn a_reclaim_saves_its_disks_in_the_gross_and_its_image_comes_off_the_net(pool: PgPool) {
    let store = Store::from_pool(pool.clone());
    history(&store).await;
    let json: Value = serde_json::from_str(&report(&pool, "json")).unwrap();
    let total = &json["total"];
    // Terminated Monday 12:00 to Tuesday 12:00: 24 h × $0.08 = $1.92 of disk not paid.
    assert_eq!(total["reclaimed_hours"], 24.0, "{json:#}");
    assert_eq!(total["reclaim_saved_usd"], 1.92);
    assert_eq!(total["saved_usd"], 1.92);
    // Its image from Monday 10:00 to the window's end: 38 h × $0.05 = $1.90. i-b's image was
    // never proven: nothing of it.
    assert_eq!(total["image_hours"], 38.0);
    assert_eq!(total["image_storage_usd"], 1.9);
    assert_eq!(total["unpriced_reclaim_hours"], 0.0);
    assert_eq!(total["net_saved_usd"], 0.02);
    assert_eq!(json["policies"][0]["policy"], "office");
    assert_eq!(json["policies"][0]["reclaim_saved_usd"], 1.92);
    // Monday: 12 h terminated ($0.96), 14 h of image ($0.70); Tuesday 12 h ($0.96), 24 h
    // ($1.20).
    let days: Vec<(f64, f64)> = json["days"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| {
            (
                d["reclaim_saved_usd"].as_f64().unwrap(),
                d["image_storage_usd"].as_f64().unwrap(),
            )
        })
        .collect();
    assert_eq!(days, [(0.96, 0.7), (0.96, 1.2)]);
    // `ebb reclaims` says what each proven image holds.
    let listed = common::ebb_on(&database_url(&pool), &["reclaims"]);
    let listed = String::from_utf8(listed.stdout).unwrap();
    let row = listed.lines().find(|l| l.contains("i-a")).unwrap();
    assert!(
        row.contains(" ami-a ") && row.contains(" 730 GiB"),
        "{listed}"
    );
    let text = report(&pool, "table");
    assert!(
        text.contains("gross $1.92, net $0.02: less $0.00 of stopped hours reservations and Savings Plans would have covered ($0.00 of commitment left unused by the stops), less $1.90 the images of reclaimed boxes stored"),
        "{text}"
    );
}
