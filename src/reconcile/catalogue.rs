//! The instance catalogue kept fresh in Postgres: at most once an hour the leader looks at when
//! it was last described, and when that is a day old (or never), describes the accelerated
//! types again (`Provider::instance_types`) and keeps them. A failure is logged and changes
//! nothing else in the tick: `ebb advise` falls back on the catalogue shipped in the binary.

use super::Reconciler;
use crate::cloud::{Provider, TypeCatalogue};
use chrono::{DateTime, Duration, Utc};

/// How old the kept catalogue may be before it is described again.
pub const REFRESH_EVERY: Duration = Duration::days(1);

/// How often the leader looks at the kept catalogue's age.
const LOOK_EVERY: Duration = Duration::hours(1);

impl<P: Provider> Reconciler<P> {
    /// Describes the catalogue again when the kept one is [`REFRESH_EVERY`] old.
    pub(super) async fn refresh_catalogue(&self, now: DateTime<Utc>) {
        let Some(catalogue) = self.provider.type_catalogue() else {
            return;
        };
        {
            let mut looked = self
                .memo
                .catalogue_looked
                .lock()
                .expect("catalogue lock poisoned");
            if looked.is_some_and(|at| now - at < LOOK_EVERY) {
                return;
            }
            *looked = Some(now);
        }
        let described = match self.store.instance_types_described_at().await {
            Ok(at) => at,
            Err(err) => {
                tracing::warn!(error = %err, "cannot read the instance catalogue's age");
                return;
            }
        };
        if described.is_some_and(|at| now - at < REFRESH_EVERY) {
            return;
        }
        match catalogue.instance_types().await {
            Ok(types) if types.is_empty() => {}
            Ok(types) => {
                if let Err(err) = self.store.keep_instance_types(&types, now).await {
                    tracing::warn!(error = %err, "cannot keep the instance catalogue");
                }
            }
            Err(err) => tracing::warn!(error = %err, "cannot describe the instance catalogue"),
        }
    }
}
