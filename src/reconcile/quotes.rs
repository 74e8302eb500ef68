//! The clouds' price quotes kept fresh in Postgres: at most once an hour the leader looks at
//! which types the fleet runs in each region, and quotes again (`PriceQuotes::quote`) those
//! whose kept quote is a day old or missing. A failure is logged and changes nothing else in
//! the tick: the last good quotes stay, and the price table is the fallback beneath them.

use super::Reconciler;
use crate::cloud::{PriceQuotes, Provider};
use crate::fleet::Instance;
use chrono::{DateTime, Duration, Utc};
use std::collections::{BTreeMap, BTreeSet};

/// How old a kept quote may be before it is asked again.
const REFRESH_EVERY: Duration = Duration::days(1);

/// How often the leader looks at the kept quotes' ages.
const LOOK_EVERY: Duration = Duration::hours(1);

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
    /// region.
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
            let stale: Vec<String> = types
                .into_iter()
                .filter(|t| kept.get(t).is_none_or(|at| now - *at >= REFRESH_EVERY))
                .collect();
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
