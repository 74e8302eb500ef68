//! Where each budget stands: what the boxes it matches spent since its period began, priced
//! from the price table in the budget's currency, what they burn an hour now, and the
//! forecast to the period's end. Pure: what ran is read before (`Store::ran`), `now` is an
//! argument. The decisions read the result as [`BudgetStanding`]s; the tick sends a budget's
//! notices from it.
//!
//! What a box costs is its on-demand price for every hour it ran (pending or running), as
//! `ebb report` prices hours, less what the commitments held pay of that hour (`covered`):
//! an hour a reserved instance or a Savings Plan pays is paid whether the box runs or not.
//! A spot box's hours are counted apart (`Standing::spot_hours`), never priced: ebb keeps no
//! spot prices, and the on-demand one would make the budget act on money never paid.

mod covered;
mod period;
mod spend;

pub use period::{bounds, midnight, periods};
pub use spend::{
    spent_by, spent_in_periods, standings, PeriodSpend, Raise, RaiseBy, Ran, Standing, StandingRow,
};

use crate::engine::BudgetStanding;
use crate::policy::PolicySet;
use chrono::{DateTime, Duration, Utc};

/// The longest a raise may last: a raise is for a deadline, not a new budget (the policy
/// files are where a budget changes for good).
pub const LONGEST_RAISE: Duration = Duration::days(90);

/// A raise of budget `name` (of its `per` value `per`, or every value's) by `by` until
/// `until`, made at `now` by `by_whom` for `reason`; or why it cannot be made: no such budget
/// in `set`, `per` for a budget without one, an end not ahead or more than [`LONGEST_RAISE`]
/// ahead, no reason.
#[allow(clippy::too_many_arguments)]
pub fn raise(
    set: &PolicySet,
    name: &str,
    per: Option<String>,
    by: RaiseBy,
    until: DateTime<Utc>,
    reason: &str,
    by_whom: &str,
    now: DateTime<Utc>,
) -> Result<Raise, String> {
    let Some(b) = set.budgets.iter().find(|b| b.name == name) else {
        let names: Vec<&str> = set.budgets.iter().map(|b| b.name.as_str()).collect();
        let have = match names.is_empty() {
            true => "none".to_string(),
            false => names.join(", "),
        };
        return Err(format!(
            "no budget \"{name}\" in the policy files (they have: {have})"
        ));
    };
    if let (Some(value), None) = (&per, &b.per) {
        return Err(format!(
            "budget {name} has no \"per\" tag, so there is no budget of {value} to raise: leave out per"
        ));
    }
    if until <= now || until > now + LONGEST_RAISE {
        return Err(
            "a raise ends within 90 days from now: for longer, raise the amount in the policy files"
                .into(),
        );
    }
    let valid = match by {
        RaiseBy::Percent(n) | RaiseBy::Amount(n) => n > 0.0 && n.is_finite(),
    };
    if !valid {
        return Err(
            "a raise is above zero: a share of the amount like 20% or an amount like 500".into(),
        );
    }
    let reason = reason.trim();
    if reason.is_empty() {
        return Err("say why the budget is raised, for the audit log".into());
    }
    Ok(Raise {
        budget: name.to_string(),
        key: per,
        by,
        made_at: now,
        until,
        by_whom: by_whom.to_string(),
        reason: reason.to_string(),
    })
}

impl RaiseBy {
    /// `20%` or `500`, as people write it; above zero.
    pub fn parse(s: &str) -> Result<RaiseBy, String> {
        let text = s.trim();
        let (number, by): (&str, fn(f64) -> RaiseBy) = match text.strip_suffix('%') {
            Some(n) => (n.trim(), RaiseBy::Percent),
            None => (text, RaiseBy::Amount),
        };
        match number.parse::<f64>() {
            Ok(n) if n > 0.0 && n.is_finite() => Ok(by(n)),
            _ => Err(format!(
                "\"{s}\" is not a raise: give a share of the amount like 20% or an amount like 500, above zero"
            )),
        }
    }
}

/// What the budget of `standing` does at its limit (`at_limit`), as the files name it.
pub fn at_limit_of(set: &PolicySet, standing: &Standing) -> &'static str {
    let b = set.budgets.iter().find(|b| b.name == standing.budget);
    b.map_or("", |b| b.at_limit.as_str())
}

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
