//! A budget of override changes per token: each change (made or revoked, by the API or the
//! console) takes one from its token's bucket, which refills at a steady rate, so that one
//! token cannot flood the audit log, the checkpoints and the leader's wake-ups.
//!
//! A token bucket on tokio's clock rather than a rate-limiting crate: its time is then the
//! paused clock of the tests, and its keys are the configured token names, so it stays small.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;
use tokio::time::Instant;

/// The changes a token may make at once, and again per minute after that.
pub const CHANGES_PER_MINUTE: u32 = 30;

/// One bucket per token name.
#[derive(Debug)]
pub struct ChangeBudgets {
    per_minute: u32,
    buckets: Mutex<HashMap<String, Bucket>>,
}

/// What is left of one token's budget, as of `at`.
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
        ChangeBudgets {
            per_minute: per_minute.max(1),
            buckets: Mutex::default(),
        }
    }

    /// Takes one change from `name`'s budget; when it is spent, how long until one is back.
    pub fn take(&self, name: &str) -> Result<(), Duration> {
        let now = Instant::now();
        let capacity = f64::from(self.per_minute);
        let per_second = capacity / 60.0;
        let mut buckets = self.buckets.lock().unwrap_or_else(|e| e.into_inner());
        let bucket = buckets.entry(name.to_string()).or_insert(Bucket {
            left: capacity,
            at: now,
        });
        let refilled = bucket.left + now.duration_since(bucket.at).as_secs_f64() * per_second;
        bucket.left = refilled.min(capacity);
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
            assert_eq!(budgets.take("alice"), Ok(()));
        }
        let wait = budgets.take("alice").unwrap_err();
        assert_eq!(wait, Duration::from_secs(10), "one change back every 10 s");
        assert_eq!(
            budgets.take("bob"),
            Ok(()),
            "another token's budget is whole"
        );
        tokio::time::advance(Duration::from_secs(10)).await;
        assert_eq!(budgets.take("alice"), Ok(()));
        assert!(budgets.take("alice").is_err());
        tokio::time::advance(Duration::from_secs(3600)).await;
        for _ in 0..6 {
            assert_eq!(
                budgets.take("alice"),
                Ok(()),
                "refilled up to the budget, not past it"
            );
        }
        assert!(budgets.take("alice").is_err());
    }
}
