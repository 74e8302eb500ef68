//! Where each budget stands in its period, as the decisions read it: worked out before them
//! (`crate::budget`) from what ran and the price table.

use chrono::{DateTime, Utc};

/// One budget's standing in its current period (for a budget with `per`, one value's).
#[derive(Debug, Clone, PartialEq)]
pub struct BudgetStanding {
    /// The budget's name.
    pub budget: String,
    /// The value of the budget's `per` tag this standing is for.
    pub key: Option<String>,
    /// What the matched boxes spent so far in the period, or why that is unknown (a box
    /// without a price, a box billed in another currency): then nothing is done for it.
    pub spent: Result<f64, String>,
    /// What the period may spend.
    pub amount: f64,
    /// The figures for people: `research-monthly: ¥152,310.00 of ¥150,000.00 spent by
    /// 2026-12-19 18:00 Asia/Shanghai`.
    pub summary: String,
    /// When the period began: a notice sent since counts for the budget's stop.
    pub period_start: DateTime<Utc>,
    /// When the period ends, as people read it (`2027-01-01 00:00 Asia/Shanghai`).
    pub until: String,
}

impl BudgetStanding {
    /// Whether the period's spend has reached the amount (never when it is unknown).
    pub fn exhausted(&self) -> bool {
        matches!(self.spent, Ok(s) if s >= self.amount)
    }
}
