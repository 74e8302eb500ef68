//! EC2 rebalance recommendations: EC2 says a spot instance is at an elevated risk of being
//! reclaimed, often 10 to 20 minutes before its two-minute warning. Kept only for a live
//! migration's current spot replacement, which may then move early (`spot::early`).

use super::{Result, Store};
use chrono::{DateTime, Utc};

impl Store {
    /// Records rebalance recommendations (instance, region, when) of instances that are a
    /// live migration's current spot replacement in that region, and wakes the leader, so that
    /// those migrations can move early; returns the instances recorded. A recommendation for
    /// any other instance is not ebb's to act on and is left out, as a warning would be.
    pub async fn record_spot_rebalances(
        &self,
        recommendations: &[(String, String, DateTime<Utc>)],
    ) -> Result<Vec<String>> {
        self.record_for_live_replacements(
            "INSERT INTO spot_rebalances (instance, recommended_at)
             SELECT $1, $2 WHERE EXISTS (
                 SELECT 1 FROM spot_migrations
                 WHERE current = $1 AND region = $3 AND ended_at IS NULL AND market = 'spot'
                   AND state NOT IN ('rolling_back', 'rolled_back', 'failed'))
             ON CONFLICT (instance) DO UPDATE SET recommended_at = EXCLUDED.recommended_at",
            recommendations,
        )
        .await
    }

    /// When EC2 last recommended rebalancing `instance`, if it did.
    pub async fn spot_rebalance(&self, instance: &str) -> Result<Option<DateTime<Utc>>> {
        Ok(
            sqlx::query_scalar("SELECT recommended_at FROM spot_rebalances WHERE instance = $1")
                .bind(instance)
                .fetch_optional(&self.pool)
                .await?,
        )
    }
}
