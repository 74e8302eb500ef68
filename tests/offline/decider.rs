//! `engine::Decider`, which `ebb replay` runs at every tick, decides as `engine::decide` does:
//! the same action, code and announced stop for every instance at every tick, although it
//! writes no reasons and works each policy's hours out again only once they may have changed.

use chrono::{DateTime, Duration, Utc};
use ebb::engine::{self, Brief, Decider, InstanceFacts, Prior};
use ebb::fleet::{Fleet, InstanceState, Sample};
use std::collections::HashMap;
use std::path::Path;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn at(s: &str) -> DateTime<Utc> {
    ebb::when::parse_time(s).unwrap()
}

/// The demo fleet, each instance with the samples of its simulated behaviour over the two hours
/// before `now` (the longest idle window of the example policies), stopped for a stretch now
/// and then so that the starts at the opening are decided too.
fn fleet_at(
    base: &Fleet,
    behaviours: &HashMap<String, ebb::cloud::sim::Behaviour>,
    now: DateTime<Utc>,
    tick: usize,
) -> Fleet {
    let mut fleet = base.clone();
    for (n, inst) in fleet.instances.iter_mut().enumerate() {
        if inst.state == InstanceState::Running && (tick / 30 + n) % 4 == 0 {
            inst.state = InstanceState::Stopped;
            inst.state_since = Some(now - Duration::minutes(((tick % 30) * 5) as i64));
        }
        let Some(behaviour) = behaviours.get(&inst.id) else {
            continue;
        };
        inst.gpu_util = (0..=25)
            .rev()
            .map(|back| now - Duration::minutes(5 * back))
            .filter_map(|t| {
                let percent = behaviour.percent(n as u64, t)?;
                Some(Sample::new(t, percent))
            })
            .collect();
    }
    fleet
}

#[test]
fn the_replays_decider_decides_as_decide_does_tick_after_tick() {
    let set = ebb::policy::load(&[root().join("policies")]).unwrap();
    let (base, behaviours) =
        ebb::snapshot::load_simulation(&root().join("deploy/demo-fleet.yaml")).unwrap();
    // Some instances stopped by ebb, some started by it, some notified, as a replay leaves them.
    let from = at("2026-11-30T00:00:00Z");
    let facts: HashMap<String, InstanceFacts> = base
        .instances
        .iter()
        .enumerate()
        .map(|(n, i)| {
            let t = from - Duration::hours(n as i64);
            let f = InstanceFacts {
                stopped_by_ebb_at: (n % 2 == 0).then_some(t),
                started_by_ebb_at: (n % 3 == 0).then_some(t),
                notified_at: (n % 5 == 0).then_some(t),
                started_by_person_at: (n % 7 == 0).then_some(t),
                busy_deferred_since: (n % 11 == 0).then_some(t),
            };
            (i.id.clone(), f)
        })
        .collect();
    let prior = Prior::new(facts, Vec::new());
    let mut decider = Decider::new(&set);
    let mut seen: HashMap<engine::Code, usize> = HashMap::new();
    // A week (Thanksgiving's end, a weekend, a working week) at 5-minute ticks.
    for tick in 0..7 * 24 * 12 {
        let now = from + Duration::minutes(5 * tick as i64);
        let fleet = fleet_at(&base, &behaviours, now, tick);
        let briefs = decider.decide(now, &fleet, &prior);
        let decisions = engine::decide(now, &set, &fleet, &prior);
        assert_eq!(briefs.len(), decisions.len());
        for (b, d) in briefs.iter().zip(&decisions) {
            let full = Brief {
                action: d.action,
                code: d.code,
                stop_at: d.stop_at,
            };
            assert_eq!(*b, full, "{} at {now}: {}", d.instance, d.reason);
            *seen.entry(d.code).or_default() += 1;
        }
    }
    // The comparison covered the rules a replay meets: hours, starts, idle stops, notices.
    for code in [
        engine::Code::InHours,
        engine::Code::StartAtOpen,
        engine::Code::StoppedOutsideHours,
        engine::Code::Idle,
        engine::Code::NotIdle,
        engine::Code::IdleNotice,
        engine::Code::Notice,
    ] {
        assert!(seen.contains_key(&code), "no decision {code} in {seen:?}");
    }
}
