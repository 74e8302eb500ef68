//! Where each budget stands: what the boxes it matches spent since its period began, priced
//! from the price table in the budget's currency, what they burn an hour now, and the
//! forecast to the period's end. Pure: what ran is read before (`Store::ran`), `now` is an
//! argument. The decisions read the result as [`BudgetStanding`]s; the tick sends a budget's
//! notices from it.
//!
//! What a box costs is its on-demand price for every hour it ran (pending or running), as
//! `ebb report` prices hours; commitments are not netted out, so a budget may be reached
//! earlier than the bill says, never later.

mod period;
mod spend;

pub use period::{bounds, midnight};
pub use spend::{spent_by, standings, Ran, Standing};

use crate::engine::BudgetStanding;

/// `amount` in `currency` for people: `$1,234.50`, `¥152,310.00`, `1,234.50 EUR`.
pub fn money(amount: f64, currency: &str) -> String {
    let cents = (amount.abs() * 100.0).round() as u64;
    let whole = (cents / 100).to_string();
    let mut grouped = String::new();
    for (i, c) in whole.chars().enumerate() {
        if i > 0 && (whole.len() - i) % 3 == 0 {
            grouped.push(',');
        }
        grouped.push(c);
    }
    let sign = if amount < 0.0 && cents > 0 { "-" } else { "" };
    let figure = format!("{grouped}.{:02}", cents % 100);
    match currency {
        "USD" => format!("{sign}${figure}"),
        "CNY" => format!("{sign}¥{figure}"),
        other => format!("{sign}{figure} {other}"),
    }
}

impl Standing {
    /// The standing as the decisions read it.
    pub fn for_decisions(&self) -> BudgetStanding {
        BudgetStanding {
            budget: self.budget.clone(),
            key: self.key.clone(),
            spent: self.spent.clone(),
            amount: self.amount,
            summary: self.summary(),
            period_start: self.start,
            until: self.until(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::money;

    #[test]
    fn money_is_grouped_with_its_currency() {
        assert_eq!(money(152_310.0, "CNY"), "¥152,310.00");
        assert_eq!(money(1234.5, "USD"), "$1,234.50");
        assert_eq!(money(0.004, "USD"), "$0.00");
        assert_eq!(money(999.999, "EUR"), "1,000.00 EUR");
        assert_eq!(money(-12.0, "USD"), "-$12.00");
    }
}
