//! Prices from ECS's DescribePrice: for each instance type, pay-as-you-go by the hour and the
//! subscription terms ebb's advice compares (1, 3 and 6 months, a year), each the trade price
//! (after the account's discounts) of the instance alone: the `instanceType` part of the
//! answer, without the system disk and bandwidth it prices beside it.

use super::client::Product;
use super::AlibabaProvider;
use crate::cloud::{CloudError, ErrorKind, PriceQuotes};
use crate::fleet::PriceQuote;
use chrono::{DateTime, Utc};
use serde_json::Value;
use std::collections::BTreeMap;

/// The terms quoted: DescribePrice's `PriceUnit` and `Period`, and the months they make (0
/// for the hour).
const TERMS: [(&str, u32, u32); 5] = [
    ("Hour", 1, 0),
    ("Month", 1, 1),
    ("Month", 3, 3),
    ("Month", 6, 6),
    ("Year", 1, 12),
];

impl PriceQuotes for AlibabaProvider {
    /// DescribePrice once for each type and term. A term ECS refuses to quote for a type (not
    /// sold that way there) is left out; any other failure fails the region's quotes.
    async fn quote(
        &self,
        region: &str,
        types: &[String],
        now: DateTime<Utc>,
    ) -> Result<Vec<PriceQuote>, CloudError> {
        let mut quotes = Vec::new();
        for instance_type in types {
            let mut quote = PriceQuote {
                region: region.to_string(),
                instance_type: instance_type.clone(),
                currency: String::new(),
                hourly: None,
                monthly: BTreeMap::new(),
                source: "DescribePrice".to_string(),
                quoted_at: now,
            };
            for (unit, period, months) in TERMS {
                let params = BTreeMap::from([
                    ("RegionId".to_string(), region.to_string()),
                    ("ResourceType".to_string(), "instance".to_string()),
                    ("InstanceType".to_string(), instance_type.clone()),
                    ("PriceUnit".to_string(), unit.to_string()),
                    ("Period".to_string(), period.to_string()),
                ]);
                let answer = match self
                    .call(Product::Ecs, region, "DescribePrice", &params)
                    .await
                {
                    Ok(answer) => answer,
                    Err(e) if e.kind == ErrorKind::Other => {
                        tracing::debug!(region, instance_type, term = unit, period, error = %e, "ECS quotes no price");
                        continue;
                    }
                    Err(e) => return Err(e),
                };
                let Some((currency, price)) = instance_price(&answer) else {
                    continue;
                };
                if !quote.currency.is_empty() && quote.currency != currency {
                    return Err(CloudError::other(
                        "DescribePrice",
                        format!(
                            "{instance_type} in {region} was quoted in both {} and {currency}",
                            quote.currency
                        ),
                    ));
                }
                quote.currency = currency;
                // A term's price is for the whole term.
                match months {
                    0 => quote.hourly = Some(price),
                    months => {
                        quote.monthly.insert(months, price / f64::from(months));
                    }
                }
            }
            if !quote.currency.is_empty() {
                quotes.push(quote);
            }
        }
        Ok(quotes)
    }
}

/// The answer's currency and the trade price of its `instanceType` part; `None` when it has
/// no such part or its figures are not prices.
fn instance_price(answer: &Value) -> Option<(String, f64)> {
    let price = &answer["PriceInfo"]["Price"];
    let currency = price["Currency"].as_str()?.to_string();
    let part = price["DetailInfos"]["DetailInfo"]
        .as_array()?
        .iter()
        .find(|d| d["Resource"] == "instanceType")?;
    let trade = part["TradePrice"].as_f64()?;
    (trade.is_finite() && trade >= 0.0).then_some((currency, trade))
}
