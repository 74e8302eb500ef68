//! Prices from CVM's DescribeZoneInstanceConfigInfos, which lists each type's price in each
//! zone of a region by how it is paid: pay-as-you-go by the hour (`POSTPAID_BY_HOUR`, its
//! discounted unit price) and subscription (`PREPAID`: a month, and a year). The answer names
//! no currency; the account's is [`super::Settings::currency`] (CNY on the China site).

use super::api::Filter;
use super::client::{Answer, CVM};
use super::TencentProvider;
use crate::cloud::{CloudError, PriceQuotes};
use crate::fleet::PriceQuote;
use chrono::{DateTime, Utc};
use serde::Deserialize;
use std::collections::BTreeMap;

/// Values of one filter: CVM documents at most 5 for DescribeInstances' filters, and ebb keeps
/// to that here too.
const VALUES_PER_FILTER: usize = 5;

/// DescribeZoneInstanceConfigInfos' answer (the fields ebb reads).
#[derive(Debug, Deserialize)]
#[serde(rename_all = "PascalCase")]
struct ZoneConfigs {
    #[serde(default)]
    instance_type_quota_set: Vec<QuotaItem>,
}

/// One type in one zone, paid one way.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "PascalCase")]
struct QuotaItem {
    instance_type: String,
    instance_charge_type: String,
    price: Option<ItemPrice>,
}

/// Its price (CVM's `ItemPrice`): by the hour for pay-as-you-go, whole terms for subscription.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "PascalCase")]
struct ItemPrice {
    unit_price_discount: Option<f64>,
    unit_price_discount_second_step: Option<f64>,
    unit_price_discount_third_step: Option<f64>,
    discount_price: Option<f64>,
    discount_price_one_year: Option<f64>,
}

impl ItemPrice {
    /// The hour's price: the lowest of its steps (CVM may price the first 96 hours above the
    /// later ones), so that a saved hour is never priced above what it would have cost.
    fn hourly(&self) -> Option<f64> {
        [
            self.unit_price_discount,
            self.unit_price_discount_second_step,
            self.unit_price_discount_third_step,
        ]
        .into_iter()
        .flatten()
        .filter(|p| p.is_finite() && *p >= 0.0)
        .reduce(f64::min)
    }

    /// A month of each term: a month's price, and a year's over twelve.
    fn monthly(&self) -> BTreeMap<u32, f64> {
        [(1, self.discount_price), (12, self.discount_price_one_year)]
            .into_iter()
            .filter_map(|(months, total)| {
                let total = total.filter(|p| p.is_finite() && *p > 0.0)?;
                Some((months, total / f64::from(months)))
            })
            .collect()
    }
}

impl PriceQuotes for TencentProvider {
    /// DescribeZoneInstanceConfigInfos for the region's `types` (five a call), both ways of
    /// paying; a call that fails fails the region's quotes. Where zones price a type
    /// differently, the hour is the lowest of them and a subscription the highest: neither a
    /// saving by stopping nor one by subscribing is over-claimed.
    async fn quote(
        &self,
        region: &str,
        types: &[String],
        now: DateTime<Utc>,
    ) -> Result<Vec<PriceQuote>, CloudError> {
        let filter = |name: &str, values: &[String]| Filter {
            name: name.to_string(),
            values: values.to_vec(),
        };
        let mut items = Vec::new();
        for chunk in types.chunks(VALUES_PER_FILTER) {
            let body = serde_json::json!({ "Filters": [
                filter("instance-type", chunk),
                filter(
                    "instance-charge-type",
                    &["POSTPAID_BY_HOUR".to_string(), "PREPAID".to_string()],
                ),
            ]});
            let answer: Answer<ZoneConfigs> = self
                .paced(region, "DescribeZoneInstanceConfigInfos", 0, || {
                    self.client
                        .call(CVM, "DescribeZoneInstanceConfigInfos", Some(region), &body)
                })
                .await?;
            items.extend(answer.body.instance_type_quota_set);
        }
        let mut quotes: BTreeMap<&str, PriceQuote> = BTreeMap::new();
        for item in &items {
            if !types.contains(&item.instance_type) {
                continue;
            }
            let price = item.price.as_ref();
            let quote = quotes
                .entry(item.instance_type.as_str())
                .or_insert_with(|| PriceQuote {
                    region: region.to_string(),
                    instance_type: item.instance_type.clone(),
                    currency: self.settings.currency.clone(),
                    hourly: None,
                    monthly: BTreeMap::new(),
                    source: "DescribeZoneInstanceConfigInfos".to_string(),
                    quoted_at: now,
                });
            match item.instance_charge_type.as_str() {
                "POSTPAID_BY_HOUR" => {
                    if let Some(hourly) = price.and_then(ItemPrice::hourly) {
                        quote.hourly = Some(quote.hourly.map_or(hourly, |h| h.min(hourly)));
                    }
                }
                "PREPAID" => {
                    for (months, monthly) in price.map(ItemPrice::monthly).unwrap_or_default() {
                        let kept = quote.monthly.entry(months).or_insert(monthly);
                        *kept = kept.max(monthly);
                    }
                }
                _ => {}
            }
        }
        Ok(quotes
            .into_values()
            .filter(|q| q.hourly.is_some() || !q.monthly.is_empty())
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_hour_is_its_lowest_step_and_a_term_is_a_month_of_it() {
        let price = ItemPrice {
            unit_price_discount: Some(12.0),
            unit_price_discount_second_step: Some(10.0),
            unit_price_discount_third_step: Some(f64::NAN),
            discount_price: Some(5_000.0),
            discount_price_one_year: Some(48_000.0),
        };
        assert_eq!(price.hourly(), Some(10.0));
        assert_eq!(
            price.monthly(),
            BTreeMap::from([(1, 5_000.0), (12, 4_000.0)])
        );
        assert_eq!(ItemPrice::default().hourly(), None);
        assert!(ItemPrice::default().monthly().is_empty());
    }
}
