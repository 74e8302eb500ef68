//! Stops inside capacity reservations held outside ebb (`stopped_in_reservation`), worked by
//! hand: their hours count at on-demand prices in the gross and come off the net whole as
//! `reserved_covered_usd`, never also as commitments; from the rollups as from the history.

use super::*;
use crate::fleet::money::{CommitmentRates, HeldCommitments, ReservedInstances, Term, TermRates};

fn t(s: &str) -> DateTime<Utc> {
    s.parse().unwrap()
}

fn stop(instance: &str, at: &str, saved: StopSaved) -> ActionRecord {
    ActionRecord {
        instance: instance.into(),
        at: t(at),
        action: EbbAction::Stop,
        policy: Some("office".into()),
        saved,
    }
}

fn info() -> InstanceInfo {
    InstanceInfo {
        region: "r".into(),
        instance_type: "g.ten".into(),
        policy: Some("office".into()),
        ..InstanceInfo::default()
    }
}

/// i-held stopped inside a held reservation at 10:00, i-plain stopped at 10:00; both g.ten.
fn history() -> History {
    History {
        actions: vec![
            stop("i-held", "2026-11-30T10:00:00Z", StopSaved::Reserved),
            stop("i-plain", "2026-11-30T10:00:00Z", StopSaved::Saved),
        ],
        instances: [
            ("i-held".to_string(), info()),
            ("i-plain".to_string(), info()),
        ]
        .into(),
        ..History::default()
    }
}

/// g.ten at $10/h, and one g.ten reserved instance ($6/h) held.
fn prices() -> PriceTable {
    PriceTable {
        prices: [("r".to_string(), [("g.ten".to_string(), 10.0)].into())].into(),
        reserved: Some(CommitmentRates {
            rates: [(
                "r".to_string(),
                [(
                    "g.ten".to_string(),
                    TermRates {
                        one_year: Some(6.0),
                        three_years: None,
                    },
                )]
                .into(),
            )]
            .into(),
            ..CommitmentRates::default()
        }),
        commitments: HeldCommitments {
            reserved_instances: vec![ReservedInstances {
                instance_type: "g.ten".into(),
                region: "r".into(),
                count: 1,
                term: Term::OneYear,
            }],
            savings_plans: vec![],
        },
        ..PriceTable::default()
    }
}

#[test]
fn a_stop_inside_a_held_reservation_is_gross_but_not_net_and_takes_no_commitment() {
    // 10:00 to 15:00: 5 h each at $10/h, $100 gross. i-held's $50 were paid by its
    // reservation. The reserved instance covers one g.ten stopped hour each hour: only
    // i-plain's are left to it (i-held's are not saved to begin with), $50 covered, $30 of it
    // unused. Net: $100 − $50 − $50 = $0.
    let window = Window {
        since: t("2026-11-30T00:00:00Z"),
        until: t("2026-11-30T15:00:00Z"),
    };
    let r = compute(&history(), window, None, &prices());
    assert_eq!(r.total.saved_usd, 100.0);
    assert_eq!(r.total.stopped_hours, 10.0);
    assert_eq!(r.total.reserved_covered_usd, 50.0);
    assert_eq!(r.total.commitment_covered_usd, 50.0);
    assert_eq!(r.total.unused_commitment_usd, 30.0);
    assert_eq!(r.total.net_saved_usd, 0.0);
    assert!(
        table(&r).contains(
            "less $50.00 of stopped hours capacity reservations held outside ebb paid for"
        ),
        "{}",
        table(&r)
    );
}

#[test]
fn a_rolled_day_keeps_the_hours_a_held_reservation_paid_for_apart() {
    let h = history();
    let day = chrono::NaiveDate::from_ymd_opt(2026, 11, 30).unwrap();
    let (rows, hours) = roll_up(&h, day);
    let of = |id: &str| {
        let row = rows.iter().find(|r| r.instance == id).unwrap();
        (row.stopped_hours, row.charging_hours, row.reserved_hours)
    };
    assert_eq!(of("i-held"), (0.0, 0.0, 14.0));
    assert_eq!(of("i-plain"), (14.0, 0.0, 0.0));
    // Summed as the store sums them, the day gives the report the history gives.
    let sum = |id: &str| {
        let row = rows.iter().find(|r| r.instance == id).unwrap();
        RolledSum {
            day,
            policy: row.policy.clone(),
            region: "r".into(),
            instance_type: "g.ten".into(),
            tag: None,
            stops: row.stops,
            hibernations: row.hibernations,
            people_starts: row.people_starts,
            stopped_hours: row.stopped_hours,
            charging_hours: row.charging_hours,
            reserved_hours: row.reserved_hours,
            attached: Default::default(),
            interruptible: false,
        }
    };
    let window = Window {
        since: t("2026-11-30T00:00:00Z"),
        until: t("2026-12-01T00:00:00Z"),
    };
    let parts = Parts {
        rolled: vec![sum("i-held"), sum("i-plain")],
        hours,
        ..Parts::default()
    };
    let rolled = compute_parts(&parts, window, None, &prices());
    let by_day = compute(&h, window, None, &prices());
    assert_eq!(rolled.total, by_day.total);
    assert_eq!(rolled.total.reserved_covered_usd, 140.0);
}

#[test]
fn a_day_after_a_long_stop_inside_a_held_reservation_ended_has_none_of_it() {
    // i-held stopped from 11-30 10:00 until a person starts it on 12-02 10:00: 14 h, 24 h
    // and 10 h of it, $10/h each; nothing on 12-03, the day after the run of whole days.
    let mut h = history();
    h.actions.retain(|a| a.instance == "i-held");
    h.changes.push(StateChange {
        instance: "i-held".into(),
        at: t("2026-12-02T10:00:00Z"),
        to_state: "running".into(),
    });
    let window = Window {
        since: t("2026-11-30T00:00:00Z"),
        until: t("2026-12-04T00:00:00Z"),
    };
    let r = compute(&h, window, None, &prices());
    let covered: Vec<f64> = r
        .days
        .iter()
        .map(|d| d.measures.reserved_covered_usd)
        .collect();
    assert_eq!(covered, [140.0, 240.0, 100.0, 0.0]);
    assert_eq!(r.total.reserved_covered_usd, 480.0);
}
