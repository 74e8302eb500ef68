//! Reclaims of long-stopped boxes, worked by hand: the disks not paid while a box stayed
//! terminated are in the gross, what its image stored comes off the net, day by day and by
//! policy; a reclaim whose volumes or prices are unknown counts hours, never dollars.

use super::*;
use crate::fleet::money::{StoppedCosts, Volume};

fn t(s: &str) -> DateTime<Utc> {
    s.parse().unwrap()
}

fn volume(volume_type: &str, size_gib: u64) -> Volume {
    Volume {
        volume_type: volume_type.into(),
        size_gib,
    }
}

/// In `r`: gp3 at $0.073 and io2 at $0.146 per GB-month (100 GiB of gp3 is $0.01/h, 200 GiB of
/// io2 $0.04/h), snapshots at $0.0365 (300 GiB is $0.015/h). In `s`: gp3 only, no snapshot
/// price.
fn prices() -> PriceTable {
    PriceTable {
        while_stopped: Some(StoppedCosts {
            ebs_gb_month: [
                (
                    "r".to_string(),
                    [("gp3".to_string(), 0.073), ("io2".to_string(), 0.146)].into(),
                ),
                ("s".to_string(), [("gp3".to_string(), 0.073)].into()),
            ]
            .into(),
            snapshot_gb_month: [("r".to_string(), 0.0365)].into(),
            ..StoppedCosts::default()
        }),
        ..PriceTable::default()
    }
}

/// i-a (office, in `r`, 100 GiB gp3 and 200 GiB io2): its notice ended 11-30 10:00, terminated
/// 11-30 12:00, restore asked 12-02 12:00, image deregistered 12-03 12:00. i-b (lab): its
/// volumes never recorded, terminated 11-30 00:00 and never restored. i-c (lab, in `s`, no
/// snapshot price): terminated 12-01 00:00.
fn history() -> History {
    let span = |instance: &str, policy: &str, region: &str| ReclaimSpan {
        instance: instance.into(),
        policy: policy.into(),
        region: region.into(),
        volumes: None,
        imaged_from: t("2026-11-29T00:00:00Z"),
        terminated_at: None,
        restore_asked_at: None,
        image_deleted_at: None,
    };
    History {
        reclaims: vec![
            ReclaimSpan {
                volumes: Some(vec![volume("gp3", 100), volume("io2", 200)]),
                imaged_from: t("2026-11-30T10:00:00Z"),
                terminated_at: Some(t("2026-11-30T12:00:00Z")),
                restore_asked_at: Some(t("2026-12-02T12:00:00Z")),
                image_deleted_at: Some(t("2026-12-03T12:00:00Z")),
                ..span("i-a", "office", "r")
            },
            ReclaimSpan {
                terminated_at: Some(t("2026-11-30T00:00:00Z")),
                ..span("i-b", "lab", "r")
            },
            ReclaimSpan {
                volumes: Some(vec![volume("gp3", 100)]),
                imaged_from: t("2026-12-01T00:00:00Z"),
                terminated_at: Some(t("2026-12-01T00:00:00Z")),
                ..span("i-c", "lab", "s")
            },
        ],
        ..History::default()
    }
}

fn window() -> Window {
    Window {
        since: t("2026-11-30T00:00:00Z"),
        until: t("2026-12-04T00:00:00Z"),
    }
}

fn day<'r>(report: &'r Report, d: &str) -> &'r Measures {
    let d: NaiveDate = d.parse().unwrap();
    &report.days.iter().find(|m| m.day == d).unwrap().measures
}

#[test]
fn a_reclaimed_box_saves_its_disks_and_its_image_costs_its_snapshots() {
    let report = compute(&history(), window(), None, &prices());
    let total = &report.total;
    // i-a: 48 h terminated at $0.05/h; its image kept 74 h at $0.015/h.
    assert_eq!(total.reclaim_saved_usd, 2.40);
    assert_eq!(total.saved_usd, 2.40);
    assert_eq!(total.image_storage_usd, 1.11);
    assert_eq!(total.net_saved_usd, 1.29);
    // i-b 96 h and i-c 72 h terminated; their images as long: hours without dollars.
    assert_eq!(total.reclaimed_hours, 48.0 + 96.0 + 72.0);
    assert_eq!(total.image_hours, 74.0 + 96.0 + 72.0);
    assert_eq!(total.unpriced_reclaim_hours, 2.0 * 96.0 + 2.0 * 72.0);
    let policy = |name: &str| {
        &report
            .policies
            .iter()
            .find(|p| p.policy == name)
            .unwrap()
            .measures
    };
    assert_eq!(policy("office").reclaim_saved_usd, 2.40);
    assert_eq!(policy("office").unpriced_reclaim_hours, 0.0);
    // i-c's disks are priced, its image is not: no saving without its cost.
    assert_eq!(policy("lab").reclaim_saved_usd, 0.0);
    assert_eq!(policy("lab").saved_usd, 0.0);
    assert_eq!(policy("lab").unpriced_reclaim_hours, 336.0);
    // Day by day: 12 h, 24 h, 12 h and none of i-a terminated; 14 h, 24 h, 24 h, 12 h imaged.
    let days: Vec<(f64, f64)> = ["2026-11-30", "2026-12-01", "2026-12-02", "2026-12-03"]
        .iter()
        .map(|d| {
            let m = day(&report, d);
            (m.reclaim_saved_usd, m.image_storage_usd)
        })
        .collect();
    assert_eq!(
        days,
        [(0.60, 0.21), (1.20, 0.36), (0.60, 0.36), (0.0, 0.18)]
    );
}

#[test]
fn the_rollups_count_reclaims_as_the_history_does() {
    let parts = Parts {
        rest: history(),
        ..Parts::default()
    };
    let rolled = compute_parts(&parts, window(), None, &prices());
    let whole = compute(&history(), window(), None, &prices());
    assert_eq!(rolled.total, whole.total);
    assert_eq!(rolled.days, whole.days);
    assert_eq!(rolled.total.reclaim_saved_usd, 2.40);
}

#[test]
fn the_table_says_what_reclaims_saved_and_what_their_images_cost() {
    let report = compute(&history(), window(), None, &prices());
    let text = table(&report);
    assert!(
        text.contains(", less $1.11 the images of reclaimed boxes stored"),
        "{text}"
    );
    assert!(
        text.contains("reclaimed boxes (stopped.reclaim_after): $2.40 of disks not paid in 216.00 h terminated"),
        "{text}"
    );
    assert!(text.contains("336.00 h count no dollars"), "{text}");
    let csv = csv(&report);
    let header = csv.lines().next().unwrap();
    assert!(header.ends_with(
        ",reclaimed_hours,reclaim_saved_usd,image_hours,image_storage_usd,unpriced_reclaim_hours"
    ));
}
