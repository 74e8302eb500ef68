//! The capacity reservations held outside ebb, read hourly: for each region listed completely,
//! at most once per [`READ_EVERY`] the leader reads every active reservation there with its
//! size and use (`CapacityReservations::held_capacity`) and keeps the read in Postgres with the
//! listed boxes of the types they hold that ran outside any reservation, where `ebb advise`
//! counts the reserved hours no instance used. A failed read is logged and kept as nothing:
//! that hour is unread, never counted as unused. Decisions do not use these reads (an
//! instance's own listing names its reservation).

use super::Reconciler;
use crate::cloud::{CapacityReservations, Provider};
use crate::fleet::capacity_reads::READ_EVERY;
use crate::fleet::{CapacityRead, Instance};
use chrono::{DateTime, Utc};

impl<P: Provider> Reconciler<P> {
    /// Reads and keeps the held reservations of each of `regions` not read for
    /// [`READ_EVERY`], with what of `listed` ran outside them.
    pub(super) async fn read_held_capacity(
        &self,
        regions: &[String],
        listed: &[Instance],
        now: DateTime<Utc>,
    ) {
        let Some(reservations) = self.provider.capacity_reservations() else {
            return;
        };
        for region in regions {
            {
                let mut read = self
                    .memo
                    .capacity_read
                    .lock()
                    .unwrap_or_else(|e| e.into_inner());
                if read.get(region).is_some_and(|at| now - *at < READ_EVERY) {
                    continue;
                }
                read.insert(region.clone(), now);
            }
            let held = match reservations.held_capacity(region).await {
                Ok(held) => held,
                Err(err) => {
                    tracing::warn!(
                        %region,
                        error = %err,
                        "cannot read the capacity reservations held outside ebb: this hour of them is unread in ebb advise"
                    );
                    continue;
                }
            };
            let read = CapacityRead {
                ran_outside: CapacityRead::outside(
                    &held,
                    listed.iter().filter(|i| i.region == *region),
                ),
                region: region.clone(),
                at: now,
                reservations: held,
            };
            if let Err(err) = self.store.keep_capacity_read(&read).await {
                tracing::warn!(%region, error = %err, "cannot keep the read of the capacity reservations");
            }
        }
    }
}
