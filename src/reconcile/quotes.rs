//! The clouds' price quotes kept fresh in Postgres: at most once an hour the leader looks at
//! which types the fleet runs in each region, and quotes again (`PriceQuotes::quote`) those
//! whose kept quote is a day old or missing. A failure is logged and changes nothing else in
//! the tick: the last good quotes stay, and the price table is the fallback beneath them.

use super::Reconciler;
use crate::cloud::{PriceQuotes, Provider};
use crate::fleet::Instance;
use chrono::{DateTime, Duration, Utc};
use std::collections::{BTreeMap, BTreeSet, HashMap};

/// How old a kept quote may be before it is asked again.
const REFRESH_EVERY: Duration = Duration::days(1);

/// How often the leader looks at the kept quotes' ages.
const LOOK_EVERY: Duration = Duration::hours(1);

/// Types quoted in a region at one look, the ones never quoted first, then the oldest: a tick
/// waits for the calls (five a type on Alibaba, paced at five a second), so a region of many
/// types is quoted over several looks rather than in one long tick.
const TYPES_PER_LOOK: usize = 10;

/// The types the fleet runs, by region: what is quoted.
pub(super) type Quoted = BTreeMap<String, BTreeSet<String>>;

/// The types of `instances`, by region.
pub(super) fn to_quote(instances: &[Instance]) -> Quoted {
    let mut types = Quoted::new();
    for i in instances {
        types
            .entry(i.region.clone())
            .or_default()
            .insert(i.instance_type.clone());
    }
    types
}

/// Of `types`, the ones to quote now: kept quotes [`REFRESH_EVERY`] old or none, at most
/// [`TYPES_PER_LOOK`], the never-quoted first, then the oldest.
fn stale(
    types: BTreeSet<String>,
    kept: &HashMap<String, DateTime<Utc>>,
    now: DateTime<Utc>,
) -> Vec<String> {
    let mut stale: Vec<(Option<DateTime<Utc>>, String)> = types
        .into_iter()
        .map(|t| (kept.get(&t).copied(), t))
        .filter(|(at, _)| at.is_none_or(|at| now - at >= REFRESH_EVERY))
        .collect();
    // `None` sorts first.
    stale.sort();
    stale
        .into_iter()
        .take(TYPES_PER_LOOK)
        .map(|(_, t)| t)
        .collect()
}

impl<P: Provider> Reconciler<P> {
    /// Whether this tick should look at the quotes: the cloud quotes prices and the last look
    /// is an hour old.
    pub(super) fn quotes_due(&self, now: DateTime<Utc>) -> bool {
        if self.provider.price_quotes().is_none() {
            return false;
        }
        let mut looked = self
            .memo
            .quotes_looked
            .lock()
            .expect("quotes lock poisoned");
        if looked.is_some_and(|at| now - at < LOOK_EVERY) {
            return false;
        }
        *looked = Some(now);
        true
    }

    /// Quotes again each type of `types` whose kept quote is [`REFRESH_EVERY`] old, region by
    /// region, at most [`TYPES_PER_LOOK`] of each.
    pub(super) async fn refresh_quotes(&self, types: Quoted, now: DateTime<Utc>) {
        let Some(quotes) = self.provider.price_quotes() else {
            return;
        };
        for (region, types) in types {
            let kept = match self.store.quoted_at(&region).await {
                Ok(kept) => kept,
                Err(err) => {
                    tracing::warn!(region, error = %err, "cannot read the kept price quotes");
                    return;
                }
            };
            let stale = stale(types, &kept, now);
            if stale.is_empty() {
                continue;
            }
            match quotes.quote(&region, &stale, now).await {
                Ok(got) => {
                    if let Err(err) = self.store.keep_quotes(&got).await {
                        tracing::warn!(region, error = %err, "cannot keep the price quotes");
                    }
                }
                Err(err) => {
                    tracing::warn!(region, error = %err, "cannot read the cloud's price quotes")
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_never_quoted_go_first_then_the_oldest_and_the_fresh_wait() {
        let now: DateTime<Utc> = "2026-12-08T12:00:00Z".parse().unwrap();
        let mut types: BTreeSet<String> = (0..12).map(|n| format!("never-{n:02}")).collect();
        types.extend(["old".to_string(), "older".to_string(), "fresh".to_string()]);
        let kept = HashMap::from([
            ("old".to_string(), now - Duration::days(1)),
            ("older".to_string(), now - Duration::days(3)),
            ("fresh".to_string(), now - Duration::hours(23)),
        ]);
        let first = stale(types.clone(), &kept, now);
        assert_eq!(first.len(), TYPES_PER_LOOK);
        assert!(first.iter().all(|t| t.starts_with("never-")), "{first:?}");
        // Once those are quoted, the last two never quoted, then the oldest first.
        let mut kept = kept;
        kept.extend(first.into_iter().map(|t| (t, now)));
        assert_eq!(
            stale(types, &kept, now),
            ["never-10", "never-11", "older", "old"]
        );
    }
}
