//! Spot pools and what ebb saw happen in them: a pool is an instance type in one availability
//! zone of one account, and its history is the spot interruptions, the rebalance
//! recommendations and the capacity errors ebb saw there. Plain data: the store reads it, the
//! spot ranking (`spot::rank`) and `ebb pools` use it.

use chrono::{DateTime, Duration, Utc};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// One capacity pool: an instance type in one availability zone of one account and region.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Pool {
    /// The account; empty for ebb's own (the one its credentials and queue belong to).
    pub account: String,
    /// The region.
    pub region: String,
    /// The availability zone; empty when the event did not say and ebb could not tell.
    pub zone: String,
    /// The instance type.
    pub instance_type: String,
}

/// What happened in a pool.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PoolEventKind {
    /// EC2 reclaimed spot capacity (a two-minute warning, or a reclaim ebb saw).
    Interruption,
    /// EC2 recommended rebalancing: the instance is at elevated risk of interruption.
    Rebalance,
    /// A start or launch was refused for lack of capacity.
    CapacityError,
}

impl PoolEventKind {
    /// Every kind.
    pub const ALL: [PoolEventKind; 3] = [
        PoolEventKind::Interruption,
        PoolEventKind::Rebalance,
        PoolEventKind::CapacityError,
    ];

    /// The name stored and shown.
    pub fn as_str(self) -> &'static str {
        match self {
            PoolEventKind::Interruption => "interruption",
            PoolEventKind::Rebalance => "rebalance",
            PoolEventKind::CapacityError => "capacity_error",
        }
    }

    /// The kind named `s`.
    pub fn parse(s: &str) -> Option<PoolEventKind> {
        PoolEventKind::ALL.into_iter().find(|k| k.as_str() == s)
    }
}

/// One thing ebb saw in a pool.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PoolEvent {
    /// Where.
    pub pool: Pool,
    /// What.
    pub kind: PoolEventKind,
    /// When.
    pub at: DateTime<Utc>,
    /// The instance concerned, when known.
    pub instance: Option<String>,
}

/// Counts over the last day, week and 30 days.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Counts {
    /// In the last 24 hours.
    pub day: u32,
    /// In the last 7 days.
    pub week: u32,
    /// In the last 30 days.
    pub month: u32,
}

impl Counts {
    /// Counts one event `age` old.
    fn add(&mut self, age: Duration) {
        if age < Duration::zero() || age >= Duration::days(30) {
            return;
        }
        self.month += 1;
        if age < Duration::days(7) {
            self.week += 1;
        }
        if age < Duration::days(1) {
            self.day += 1;
        }
    }
}

/// A pool's history summed up, as `ebb pools` and the console show it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PoolSummary {
    /// The pool.
    #[serde(flatten)]
    pub pool: Pool,
    /// Spot interruptions.
    pub interruptions: Counts,
    /// Rebalance recommendations.
    pub rebalances: Counts,
    /// Starts and launches refused for lack of capacity.
    pub capacity_errors: Counts,
    /// The newest interruption.
    pub last_reclaim: Option<DateTime<Utc>>,
}

/// Everything ebb saw in the pools over a window (the store reads the last 30 days).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PoolHistory {
    /// The events, in any order.
    pub events: Vec<PoolEvent>,
}

impl PoolHistory {
    /// The events of `kind` in `pool`.
    pub fn of<'a>(
        &'a self,
        pool: &'a Pool,
        kind: PoolEventKind,
    ) -> impl Iterator<Item = &'a PoolEvent> + 'a {
        self.events
            .iter()
            .filter(move |e| e.kind == kind && &e.pool == pool)
    }

    /// The newest event of `kind` in `pool` at or before `now`.
    pub fn last(
        &self,
        pool: &Pool,
        kind: PoolEventKind,
        now: DateTime<Utc>,
    ) -> Option<DateTime<Utc>> {
        self.of(pool, kind)
            .map(|e| e.at)
            .filter(|at| *at <= now)
            .max()
    }

    /// Events of `kind` in `pool` within `window` before `now`.
    pub fn count(
        &self,
        pool: &Pool,
        kind: PoolEventKind,
        window: Duration,
        now: DateTime<Utc>,
    ) -> usize {
        self.of(pool, kind)
            .filter(|e| e.at <= now && now - e.at < window)
            .count()
    }

    /// Each pool with an event in the 30 days before `now`, in the order of [`Pool`].
    pub fn summaries(&self, now: DateTime<Utc>) -> Vec<PoolSummary> {
        let mut by_pool: BTreeMap<&Pool, PoolSummary> = BTreeMap::new();
        for e in &self.events {
            let age = now - e.at;
            if age < Duration::zero() || age >= Duration::days(30) {
                continue;
            }
            let summary = by_pool.entry(&e.pool).or_insert_with(|| PoolSummary {
                pool: e.pool.clone(),
                interruptions: Counts::default(),
                rebalances: Counts::default(),
                capacity_errors: Counts::default(),
                last_reclaim: None,
            });
            match e.kind {
                PoolEventKind::Interruption => {
                    summary.interruptions.add(age);
                    summary.last_reclaim = summary.last_reclaim.max(Some(e.at));
                }
                PoolEventKind::Rebalance => summary.rebalances.add(age),
                PoolEventKind::CapacityError => summary.capacity_errors.add(age),
            }
        }
        by_pool.into_values().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: &str) -> DateTime<Utc> {
        s.parse().unwrap()
    }

    fn event(zone: &str, kind: PoolEventKind, when: &str) -> PoolEvent {
        PoolEvent {
            pool: Pool {
                account: String::new(),
                region: "us-east-1".into(),
                zone: zone.into(),
                instance_type: "p4d.24xlarge".into(),
            },
            kind,
            at: at(when),
            instance: None,
        }
    }

    #[test]
    fn a_pools_summary_counts_the_day_the_week_and_the_month() {
        use PoolEventKind::*;
        let history = PoolHistory {
            events: vec![
                event("us-east-1a", Interruption, "2026-12-04T10:00:00Z"),
                event("us-east-1a", Interruption, "2026-12-01T10:00:00Z"),
                event("us-east-1a", Interruption, "2026-11-10T10:00:00Z"),
                // Older than 30 days: not counted.
                event("us-east-1a", Interruption, "2026-10-01T10:00:00Z"),
                event("us-east-1a", Rebalance, "2026-12-04T09:50:00Z"),
                event("us-east-1b", CapacityError, "2026-12-03T12:00:00Z"),
            ],
        };
        let now = at("2026-12-04T12:00:00Z");
        let all = history.summaries(now);
        assert_eq!(all.len(), 2);
        let a = &all[0];
        assert_eq!(a.pool.zone, "us-east-1a");
        assert_eq!(
            a.interruptions,
            Counts {
                day: 1,
                week: 2,
                month: 3
            }
        );
        assert_eq!(
            a.rebalances,
            Counts {
                day: 1,
                week: 1,
                month: 1
            }
        );
        assert_eq!(a.last_reclaim, Some(at("2026-12-04T10:00:00Z")));
        let b = &all[1];
        assert_eq!(
            b.capacity_errors,
            Counts {
                day: 0,
                week: 1,
                month: 1
            }
        );
        assert_eq!(b.last_reclaim, None);
        assert_eq!(
            history.count(&a.pool, Interruption, Duration::days(7), now),
            2
        );
        assert_eq!(
            history.last(&a.pool, Interruption, now),
            Some(at("2026-12-04T10:00:00Z"))
        );
    }
}
