//! What a report saved in each currency other than the dollar that the price table prices
//! regions in (`PriceTable::other_currencies`): the report worked out again with that
//! currency's table alone, and its stops' and groups' savings kept apart, never added to the
//! dollars.

use super::Report;
use crate::fleet::money::PriceTable;
use serde::Serialize;

/// What ebb saved in one currency other than the dollar: the stopped hours and the groups'
/// scale-downs of the regions priced in it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct InCurrency {
    /// Its ISO 4217 code (`CNY`).
    pub currency: String,
    /// Where its figures were taken from.
    pub source: String,
    /// When.
    pub as_of: String,
    /// Saved, gross: by stops and by groups' scale-downs.
    pub saved: f64,
    /// Saved by ebb's stops.
    pub stopped_saved: f64,
    /// Saved by scaling groups down.
    pub group_saved: f64,
    /// The stopped hours priced in it (stops the cloud still billed count none).
    pub priced_stopped_hours: f64,
}

impl InCurrency {
    /// What the report `priced`, worked out with `table` (the prices of `currency` alone),
    /// says was saved in it. Spot savings are left out: a spot move's prices are the
    /// dollars EC2 quoted, and are the dollar report's.
    fn of(currency: &str, table: &PriceTable, priced: &Report) -> InCurrency {
        let t = &priced.total;
        let saved = t.stopped_saved_usd + t.group_saved_usd;
        let priced_hours = t.stopped_hours - t.unpriced_stopped_hours - t.charging_stopped_hours;
        InCurrency {
            currency: currency.to_string(),
            source: table.source.clone(),
            as_of: table.as_of.clone(),
            saved: (saved * 100.0).round() / 100.0,
            stopped_saved: t.stopped_saved_usd,
            group_saved: t.group_saved_usd,
            priced_stopped_hours: (priced_hours.max(0.0) * 100.0).round() / 100.0,
        }
    }
}

/// What was saved in each of `prices`' other currencies, each worked out by `report_in` with
/// that currency's table.
pub(super) fn in_other_currencies(
    prices: &PriceTable,
    report_in: impl Fn(&PriceTable) -> Report,
) -> Vec<InCurrency> {
    prices
        .other_currencies
        .iter()
        .map(|(code, table)| InCurrency::of(code, table, &report_in(table)))
        .collect()
}
