//! A spot or preemptible box that ebb stops: its hours count, never at the on-demand price
//! (its hour costs a market price no table gives), from the history as from the rollups.

use super::*;

fn t(s: &str) -> DateTime<Utc> {
    s.parse().unwrap()
}

/// $10/h on demand for g.ten.
fn prices() -> PriceTable {
    PriceTable {
        prices: [(
            "us-east-1".to_string(),
            [("g.ten".to_string(), 10.0)].into(),
        )]
        .into(),
        ..PriceTable::default()
    }
}

fn window(since: &str, until: &str) -> Window {
    Window {
        since: t(since),
        until: t(until),
    }
}

#[test]
fn a_spot_box_stopped_counts_its_hours_and_no_dollars_by_day_or_rolled() {
    // i-spot is a g.ten on spot capacity, stopped 10:00 to 15:00: priced at on demand, the
    // saving would be several times what was saved.
    let info = |interruptible| InstanceInfo {
        region: "us-east-1".into(),
        instance_type: "g.ten".into(),
        policy: Some("office".into()),
        interruptible,
        ..InstanceInfo::default()
    };
    let stop = ActionRecord {
        instance: "i-spot".into(),
        at: t("2026-11-30T10:00:00Z"),
        action: EbbAction::Stop,
        policy: Some("office".into()),
        saved: StopSaved::Saved,
    };
    let mut h = History {
        actions: vec![stop],
        instances: [("i-spot".to_string(), info(true))].into(),
        ..History::default()
    };
    let five = window("2026-11-30T00:00:00Z", "2026-11-30T15:00:00Z");
    let r = compute(&h, five, None, &prices());
    assert_eq!(r.total.stopped_hours, 5.0);
    assert_eq!(r.total.unpriced_stopped_hours, 5.0);
    assert_eq!(r.total.saved_usd, 0.0);
    // The same box on demand is priced: the flag is what keeps the dollars out.
    h.instances.insert("i-spot".into(), info(false));
    assert_eq!(compute(&h, five, None, &prices()).total.saved_usd, 50.0);

    // A rolled day of it, as the store sums it.
    let rolled = RolledSum {
        day: chrono::NaiveDate::from_ymd_opt(2026, 11, 30).unwrap(),
        policy: Some("office".into()),
        region: "us-east-1".into(),
        instance_type: "g.ten".into(),
        tag: None,
        stops: 1,
        hibernations: 0,
        people_starts: 0,
        stopped_hours: 14.0,
        charging_hours: 0.0,
        reserved_hours: 0.0,
        attached: Default::default(),
        interruptible: true,
    };
    let day = window("2026-11-30T00:00:00Z", "2026-12-01T00:00:00Z");
    let parts = |rolled: RolledSum| Parts {
        rolled: vec![rolled],
        ..Parts::default()
    };
    let r = compute_parts(&parts(rolled.clone()), day, None, &prices());
    assert_eq!(r.total.stopped_hours, 14.0);
    assert_eq!(r.total.unpriced_stopped_hours, 14.0);
    assert_eq!(r.total.saved_usd, 0.0);
    let on_demand = RolledSum {
        interruptible: false,
        ..rolled
    };
    let r = compute_parts(&parts(on_demand), day, None, &prices());
    assert_eq!(r.total.saved_usd, 140.0);
}
