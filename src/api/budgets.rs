//! Budgets that refill at a steady rate, one per key: of override changes per token (each
//! change, made or revoked by the API or the console, takes one from its token's bucket, so
//! that one token cannot flood the audit log, the checkpoints and the leader's wake-ups), and
//! of console logins and snooze-link uses per client address ([`super::attempts`]).
//!
//! A token bucket on tokio's clock rather than a rate-limiting crate: its time is then the
//! paused clock of the tests. Full buckets are dropped once many keys are kept, so that keys
//! from the network stay bounded.

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::Mutex;
use std::time::Duration;
use tokio::time::Instant;

/// The changes a token may make at once, and again per minute after that.
pub const CHANGES_PER_MINUTE: u32 = 30;

/// The most keys kept before the buckets that have refilled are dropped: a full bucket is
/// the same as none, and keys from the network (addresses) are not bounded otherwise.
const MAX_KEYS: usize = 65_536;

/// One bucket of `capacity` per key, refilled by `capacity` each `refill` after that.
#[derive(Debug)]
pub struct Buckets<K> {
    capacity: u32,
    refill: Duration,
    buckets: Mutex<HashMap<K, Bucket>>,
}

/// The override changes' budgets, one per token name.
pub type ChangeBudgets = Buckets<String>;

/// What is left of one key's budget, as of `at`.
#[derive(Debug, Clone, Copy)]
struct Bucket {
    left: f64,
    at: Instant,
}

impl Default for ChangeBudgets {
    fn default() -> Self {
        ChangeBudgets::new(CHANGES_PER_MINUTE)
    }
}

impl ChangeBudgets {
    /// Budgets of `per_minute` changes a minute (and as many at once) for each token.
    pub fn new(per_minute: u32) -> Self {
        Buckets::refilled(per_minute, Duration::from_secs(60))
    }
}

impl<K: Hash + Eq + Clone> Buckets<K> {
    /// Buckets of `capacity` (at least 1) each, refilled by as many each `refill`.
    pub fn refilled(capacity: u32, refill: Duration) -> Self {
        Buckets {
            capacity: capacity.max(1),
            refill,
            buckets: Mutex::default(),
        }
    }

    /// Takes one from `key`'s budget; when it is spent, how long until one is back.
    pub fn take(&self, key: &K) -> Result<(), Duration> {
        let now = Instant::now();
        let capacity = f64::from(self.capacity);
        let per_second = capacity / self.refill.as_secs_f64();
        let refilled = |b: &Bucket| b.left + now.duration_since(b.at).as_secs_f64() * per_second;
        let mut buckets = self.buckets.lock().unwrap_or_else(|e| e.into_inner());
        if buckets.len() >= MAX_KEYS && !buckets.contains_key(key) {
            buckets.retain(|_, b| refilled(b) < capacity);
        }
        let bucket = buckets.entry(key.clone()).or_insert(Bucket {
            left: capacity,
            at: now,
        });
        bucket.left = refilled(bucket).min(capacity);
        bucket.at = now;
        if bucket.left >= 1.0 {
            bucket.left -= 1.0;
            Ok(())
        } else {
            Err(Duration::from_secs_f64((1.0 - bucket.left) / per_second)
                .max(Duration::from_secs(1)))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn each_token_has_its_own_budget_that_refills_over_time() {
        let budgets = ChangeBudgets::new(6);
        for _ in 0..6 {
            assert_eq!(budgets.take(&"alice".into()), Ok(()));
        }
        let wait = budgets.take(&"alice".into()).unwrap_err();
        assert_eq!(wait, Duration::from_secs(10), "one change back every 10 s");
        assert_eq!(
            budgets.take(&"bob".into()),
            Ok(()),
            "another token's budget is whole"
        );
        tokio::time::advance(Duration::from_secs(10)).await;
        assert_eq!(budgets.take(&"alice".into()), Ok(()));
        assert!(budgets.take(&"alice".into()).is_err());
        tokio::time::advance(Duration::from_secs(3600)).await;
        for _ in 0..6 {
            assert_eq!(
                budgets.take(&"alice".into()),
                Ok(()),
                "refilled up to the budget, not past it"
            );
        }
        assert!(budgets.take(&"alice".into()).is_err());
    }
}
