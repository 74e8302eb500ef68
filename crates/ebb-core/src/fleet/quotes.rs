//! The prices a cloud quotes for its instance types (Alibaba's DescribePrice, Tencent's
//! DescribeZoneInstanceConfigInfos), read daily by the tick and kept in Postgres: laid over the
//! price table, a quote wins over the table's figure for its region and type, and the table
//! stays the fallback for what no quote covers and for the commands that read no database.

use super::money::PriceTable;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// What a cloud quoted for one instance type in one region, in the currency its account is
/// billed in. Only the instance's own price: disks and bandwidth, paid whether it runs or
/// not, are left out.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PriceQuote {
    /// The region.
    pub region: String,
    /// The instance type.
    pub instance_type: String,
    /// The currency, by its ISO 4217 code (`CNY` on the clouds' China sites).
    pub currency: String,
    /// Pay-as-you-go, per hour; `None` when the cloud quoted none.
    pub hourly: Option<f64>,
    /// Subscription (包年包月): the term's months → what a month of it costs.
    pub monthly: BTreeMap<u32, f64>,
    /// The call that quoted it (`DescribePrice`).
    pub source: String,
    /// When.
    pub quoted_at: DateTime<Utc>,
}

impl PriceQuote {
    /// Whether it is usable: a currency named by its code, and figures that are prices.
    fn is_valid(&self) -> bool {
        let price = |p: f64| p.is_finite() && p >= 0.0;
        self.currency.len() == 3
            && self.currency.bytes().all(|b| b.is_ascii_uppercase())
            && self.hourly.is_none_or(price)
            && self.monthly.values().all(|p| price(*p))
            && (self.hourly.is_some() || !self.monthly.is_empty())
    }
}

/// How a table whose figures some quotes replaced names them as its source.
const QUOTED: &str = "the cloud's quotes";

impl PriceTable {
    /// Names `quote` in the table's source, which the report shows beside its figures: the
    /// source of a table made for quotes, or added to the file's once.
    fn say_quoted(&mut self, quote: &PriceQuote) {
        let date = quote.quoted_at.date_naive().to_string();
        let quoted = format!("{QUOTED} ({}, {date})", quote.source);
        if self.source.is_empty() {
            self.source = quoted;
            self.as_of = date;
        } else if !self.source.contains(QUOTED) {
            self.source = format!("{}; {quoted} where it quoted", self.source);
        }
    }

    /// This table with `quotes` laid over it: each quote's figures replace the table's for its
    /// region and type, in the table of its currency (the dollars, or one of
    /// `other_currencies`, made when missing). A region quoted in one currency leaves every
    /// other currency's table, since an account is billed in one: figures for it there would
    /// be counted twice, or in the wrong money. A quote that is not usable is left out.
    pub fn with_quotes(mut self, quotes: &[PriceQuote]) -> PriceTable {
        for quote in quotes.iter().filter(|q| q.is_valid()) {
            let region = quote.region.as_str();
            let forget = |table: &mut PriceTable| {
                table.prices.remove(region);
                table.subscription.remove(region);
            };
            if quote.currency != "USD" {
                forget(&mut self);
            }
            for (_, other) in self
                .other_currencies
                .iter_mut()
                .filter(|(code, _)| **code != quote.currency)
            {
                forget(other);
            }
            let table = if quote.currency == "USD" {
                &mut self
            } else {
                self.other_currencies
                    .entry(quote.currency.clone())
                    .or_default()
            };
            table.say_quoted(quote);
            if let Some(hourly) = quote.hourly {
                table
                    .prices
                    .entry(quote.region.clone())
                    .or_default()
                    .insert(quote.instance_type.clone(), hourly);
            }
            if !quote.monthly.is_empty() {
                table
                    .subscription
                    .entry(quote.region.clone())
                    .or_default()
                    .entry(quote.instance_type.clone())
                    .or_default()
                    .extend(&quote.monthly);
            }
        }
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn quote(region: &str, ty: &str, currency: &str, hourly: f64) -> PriceQuote {
        PriceQuote {
            region: region.to_string(),
            instance_type: ty.to_string(),
            currency: currency.to_string(),
            hourly: Some(hourly),
            monthly: BTreeMap::from([(1, 5_000.0), (12, 4_000.0)]),
            source: "DescribePrice".to_string(),
            quoted_at: "2026-12-08T02:00:00Z".parse().unwrap(),
        }
    }

    fn table(text: &str) -> PriceTable {
        serde_json::from_str(text).unwrap()
    }

    #[test]
    fn a_quote_wins_over_the_tables_figure_and_fills_in_what_it_lacks() {
        let shipped = table(
            r#"{"source": "s", "as_of": "2026-01-01", "prices": {},
                "other_currencies": {"CNY": {"source": "t", "as_of": "2026-01-01",
                  "prices": {"cn-hangzhou": {"ecs.gn7i-c8g1.2xlarge": 9.0, "ecs.gn6i-c4g1.xlarge": 7.0}},
                  "subscription": {"cn-hangzhou": {"ecs.gn7i-c8g1.2xlarge": {"3": 4500.0}}}}}}"#,
        );
        let quoted = shipped.with_quotes(&[
            quote("cn-hangzhou", "ecs.gn7i-c8g1.2xlarge", "CNY", 10.5),
            quote("cn-hangzhou", "ecs.gn8is.2xlarge", "CNY", 30.0),
        ]);
        let cny = &quoted.other_currencies["CNY"];
        assert_eq!(cny.get("cn-hangzhou", "ecs.gn7i-c8g1.2xlarge"), Some(10.5));
        assert_eq!(cny.get("cn-hangzhou", "ecs.gn8is.2xlarge"), Some(30.0));
        // What no quote covers stays the table's.
        assert_eq!(cny.get("cn-hangzhou", "ecs.gn6i-c4g1.xlarge"), Some(7.0));
        assert_eq!(
            cny.source,
            "t; the cloud's quotes (DescribePrice, 2026-12-08) where it quoted"
        );
        assert_eq!(cny.as_of, "2026-01-01");
        let terms = &cny.subscription["cn-hangzhou"]["ecs.gn7i-c8g1.2xlarge"];
        assert_eq!(
            terms,
            &BTreeMap::from([(1, 5_000.0), (3, 4_500.0), (12, 4_000.0)])
        );
        assert!(quoted.prices.is_empty());
    }

    #[test]
    fn a_region_quoted_in_one_currency_leaves_the_others() {
        let shipped = table(
            r#"{"source": "s", "as_of": "2026-01-01",
                "prices": {"ap-guangzhou": {"GN7.2XLARGE32": 1.2}, "us-east-1": {"g5.xlarge": 1.006}}}"#,
        );
        let quoted = shipped.with_quotes(&[quote("ap-guangzhou", "GN7.5XLARGE80", "CNY", 20.0)]);
        // Its dollars would be counted beside its yuan: the region is the quote's currency's.
        assert_eq!(quoted.get("ap-guangzhou", "GN7.2XLARGE32"), None);
        assert_eq!(quoted.get("us-east-1", "g5.xlarge"), Some(1.006));
        let cny = &quoted.other_currencies["CNY"];
        assert_eq!(cny.get("ap-guangzhou", "GN7.5XLARGE80"), Some(20.0));
        assert_eq!(cny.source, "the cloud's quotes (DescribePrice, 2026-12-08)");
        assert_eq!(cny.as_of, "2026-12-08");
        // A quote in dollars goes into the dollars.
        let usd = quoted.with_quotes(&[quote("ap-singapore", "GN7.2XLARGE32", "USD", 1.5)]);
        assert_eq!(usd.get("ap-singapore", "GN7.2XLARGE32"), Some(1.5));
        assert_eq!(usd.other_currencies["CNY"].prices.len(), 1);
    }

    #[test]
    fn a_quote_that_is_not_a_price_is_left_out() {
        let bad = [
            quote("cn-hangzhou", "a", "yuan", 1.0),
            quote("cn-hangzhou", "b", "CNY", f64::NAN),
            quote("cn-hangzhou", "c", "CNY", -1.0),
            PriceQuote {
                hourly: None,
                monthly: BTreeMap::new(),
                ..quote("cn-hangzhou", "d", "CNY", 1.0)
            },
        ];
        let quoted = PriceTable::default().with_quotes(&bad);
        assert!(quoted.other_currencies.is_empty(), "{quoted:?}");
        assert!(quoted.prices.is_empty());
    }
}
