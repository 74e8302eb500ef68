//! What the capacity reservations ebb made for starts cost (`start.reserve_capacity`): each
//! held hour inside the window at its type's on-demand price, under the instance's policy. The
//! minutes the box ran in it count too, though AWS bills those once (as the reservation, not
//! the instance): an overcount of at most a tick or two per reservation.

use super::tally::Tally;
use super::{History, Measures, Window};
use crate::fleet::money::PriceTable;

/// Adds the reservations of `history` held inside `window` to `tally`.
pub(super) fn reservations(
    history: &History,
    window: Window,
    prices: &PriceTable,
    tally: &mut Tally,
) {
    for r in &history.reservations {
        let info = history.instances.get(&r.instance);
        let policy = info.and_then(|i| i.policy.as_deref());
        let Some(span) = window.clip(r.from, r.to.unwrap_or(window.until)) else {
            continue;
        };
        let rate = prices.get(&r.region, &r.instance_type).unwrap_or(0.0);
        tally.add_span(span, policy, info, |h| Measures {
            reservation_hours: h,
            reservation_cost_usd: h * rate,
            ..Measures::default()
        });
    }
}
