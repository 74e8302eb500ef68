//! Budgets: what the boxes a `match` selects may spend in a calendar period, and what ebb does
//! once they have. They sit in the policy files beside the policies, reviewed like them.

use super::{Match, Source};
use chrono::Duration;
use chrono_tz::Tz;

/// One budget of a policy file's `budgets` list.
#[derive(Debug, Clone)]
pub struct Budget {
    /// Unique name across all files.
    pub name: String,
    /// Which boxes' spend counts (the matcher policies use).
    pub matcher: Match,
    /// A tag key: one budget of `amount` for each of its values (`ebb:owner`), instead of one
    /// for every matched box together.
    pub per: Option<String>,
    /// What the period may spend.
    pub amount: f64,
    /// The currency of `amount` (ISO 4217); `None`: the currency of the matched boxes' cloud
    /// (USD on AWS, CNY on Alibaba Cloud and Tencent Cloud).
    pub currency: Option<String>,
    /// The calendar period spend is counted over.
    pub period: Period,
    /// The zone the periods are calendar periods of.
    pub timezone: Tz,
    /// The shares of `amount` (percent, ascending) whose crossing sends a notice.
    pub notify_at: Vec<f64>,
    /// Who the notices go to besides the matched boxes' `ebb:owner` tags.
    pub notify: Vec<String>,
    /// Whether a threshold crossed by the forecast to the period's end (not only by spend
    /// so far) sends its notice.
    pub forecast: bool,
    /// What ebb does once spend reaches `amount`.
    pub at_limit: AtLimit,
    /// With `at_limit: stop`, how long a busy box's stop may wait after its notice.
    pub max_defer: Option<Duration>,
    /// With `at_limit: stop`, how long before the stop its notice goes out.
    pub notify_before: Duration,
    /// Where the budget is written.
    pub source: Source,
}

impl Budget {
    /// The value of its `per` tag a box in `region` of `instance_type`, whose tags `tag`
    /// looks up, counts under (`Some(None)` without `per`); `None` when the budget does not
    /// count the box: no match, or no `per` tag.
    pub fn key_for<'t>(
        &self,
        region: &str,
        instance_type: &str,
        tag: impl Fn(&str) -> Option<&'t str>,
    ) -> Option<Option<&'t str>> {
        if !self.matcher.matches(region, instance_type, &tag) {
            return None;
        }
        match &self.per {
            Some(per) => tag(per).map(Some),
            None => Some(None),
        }
    }
}

/// The calendar period a budget counts over.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Period {
    /// From midnight to midnight.
    Day,
    /// From Monday's midnight to the next.
    Week,
    /// From the first of the month's midnight to the next.
    Month,
}

impl Period {
    /// The name policy files use.
    pub fn as_str(self) -> &'static str {
        match self {
            Period::Day => "day",
            Period::Week => "week",
            Period::Month => "month",
        }
    }
}

/// What ebb does to the matched boxes once a budget is spent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AtLimit {
    /// Only the notice.
    Notify,
    /// No matched box is started, at the opening or otherwise.
    RefuseStarts,
    /// The matched boxes' idle rule applies at any hour.
    StopIdle,
    /// Every matched running box is stopped after its notice; a busy one waits at most
    /// `max_defer`.
    Stop,
}

impl AtLimit {
    /// The name policy files use.
    pub fn as_str(self) -> &'static str {
        match self {
            AtLimit::Notify => "notify",
            AtLimit::RefuseStarts => "refuse_starts",
            AtLimit::StopIdle => "stop_idle",
            AtLimit::Stop => "stop",
        }
    }
}

/// The default `notify_at`: half, four fifths, and all of the amount.
pub const DEFAULT_NOTIFY_AT: [f64; 3] = [50.0, 80.0, 100.0];

/// The default notice before a budget's stop.
pub const DEFAULT_BUDGET_NOTICE: Duration = Duration::hours(1);
