//! One entry of `budgets`: its name, `match`, amount and currency, period, notices and what
//! happens at the limit.

use super::{child, keys, Checker};
use crate::fleet::Cloud;
use crate::policy::yaml::{Step, Value};
use crate::policy::{
    AtLimit, Budget, Match, Period, Source, DEFAULT_BUDGET_NOTICE, DEFAULT_NOTIFY_AT,
};
use std::path::PathBuf;

impl Checker {
    /// One entry of `budgets`; `None` when it has problems.
    pub(super) fn budget(&mut self, v: &Value, path: &[Step]) -> Option<Budget> {
        let f = self.fields(v, path, "a budget", keys::BUDGET)?;
        let before = self.problems.len();
        let at = |key: &str| child(path, Step::Value(key.into()));
        let name = match f.get("name") {
            Some((v, p)) => self.string(v, &p, "a budget name"),
            None => {
                self.missing(path, "name", "a budget needs a \"name\"".into());
                None
            }
        };
        if name.as_ref().is_some_and(|n| n.trim().is_empty()) {
            self.problem(&at("name"), "a budget name must not be empty".into());
        }
        let matcher = match f.get("match") {
            Some((v, p)) => self.matcher(v, &p),
            None => {
                self.missing(path, "match", "a budget needs \"match\" (which boxes' spend counts; \"match: {}\" for every box)".into());
                None
            }
        };
        let per = f
            .get("per")
            .and_then(|(v, p)| self.string(v, &p, "a tag key"));
        let amount = match f.get("amount") {
            Some((v, p)) => {
                match v.as_f64() {
                    Some(a) if a > 0.0 && a.is_finite() => Some(a),
                    _ => {
                        self.problem(&p, "amount must be a number above zero, in the budget's currency (like 2000)".into());
                        None
                    }
                }
            }
            None => {
                self.missing(
                    path,
                    "amount",
                    "a budget needs an \"amount\" (what the period may spend, like 2000)".into(),
                );
                None
            }
        };
        let currency = f.get("currency").and_then(|(v, p)| {
            let code = self.string(v, &p, "a currency code like \"USD\" or \"CNY\"")?;
            if code.len() != 3 || !code.chars().all(|c| c.is_ascii_uppercase()) {
                self.problem(
                    &p,
                    format!("currency \"{code}\" is not an ISO 4217 code like \"USD\" or \"CNY\""),
                );
                return None;
            }
            Some(code)
        });
        if let (Some(m), Some(code)) = (&matcher, &currency) {
            if let Some(cloud) = implied_clouds(m).into_iter().find(|c| c.currency() != code) {
                self.problem(&at("currency"), format!(
                    "currency {code} does not match the boxes this budget matches: they are on {}, billed in {}; write \"currency: {}\" or narrow the match",
                    cloud.display_name(),
                    cloud.currency(),
                    cloud.currency()
                ));
            }
        }
        let period = match f.get("period") {
            Some((v, p)) => self.choice(
                v,
                &p,
                "period",
                &[
                    ("day", Period::Day),
                    ("week", Period::Week),
                    ("month", Period::Month),
                ],
            ),
            None => {
                self.missing(
                    path,
                    "period",
                    "a budget needs a \"period\": day, week or month".into(),
                );
                None
            }
        };
        let timezone = self.timezone(&f, path, "a budget");
        let notify_at = match f.get("notify_at") {
            Some((v, p)) => self.thresholds(v, &p),
            None => Some(DEFAULT_NOTIFY_AT.to_vec()),
        };
        let notify = f
            .get("notify")
            .and_then(|(v, p)| self.strings(v, &p, "a list of addresses"))
            .unwrap_or_default();
        let forecast = f
            .get("forecast")
            .and_then(|(v, p)| self.boolean(v, &p))
            .unwrap_or(false);
        let at_limit = match f.get("at_limit") {
            Some((v, p)) => self.choice(
                v,
                &p,
                "at_limit",
                &[
                    ("notify", AtLimit::Notify),
                    ("refuse_starts", AtLimit::RefuseStarts),
                    ("stop_idle", AtLimit::StopIdle),
                    ("stop", AtLimit::Stop),
                ],
            ),
            None => Some(AtLimit::Notify),
        };
        let mut stop_only = |key: &str| {
            let (v, p) = f.get(key)?;
            if at_limit.is_some_and(|a| a != AtLimit::Stop) {
                self.problem(&p, format!("{key} is for at_limit: stop, which stops busy boxes after a notice; remove it or set at_limit: stop"));
                return None;
            }
            self.duration(v, &p, key)
        };
        let max_defer = stop_only("max_defer");
        let notify_before = stop_only("notify_before").unwrap_or(DEFAULT_BUDGET_NOTICE);
        if self.problems.len() != before {
            return None;
        }
        Some(Budget {
            name: name?,
            matcher: matcher?,
            per,
            amount: amount?,
            currency,
            period: period?,
            timezone: timezone?,
            notify_at: notify_at?,
            notify,
            forecast,
            at_limit: at_limit?,
            max_defer,
            notify_before,
            source: Source {
                file: PathBuf::new(),
                line: 0,
            },
        })
    }

    /// `notify_at`: percentages of the amount, each above zero; sorted, without repeats.
    fn thresholds(&mut self, v: &Value, path: &[Step]) -> Option<Vec<f64>> {
        let items = self.seq(v, path, "a list of percentages like [50%, 80%, 100%]")?;
        let mut out = Vec::new();
        for (i, item) in items.iter().enumerate() {
            let p = child(path, Step::Index(i));
            match self.percent(item, &p, "notify_at") {
                Some(n) if n > 0.0 => out.push(n),
                Some(_) => self.problem(&p, "notify_at must be above 0%".into()),
                None => {}
            }
        }
        out.sort_by(f64::total_cmp);
        out.dedup();
        Some(out)
    }
}

/// The clouds a match can only select boxes of, as far as its types and regions tell: an
/// `ecs.` type is Alibaba Cloud's, an upper-case one Tencent Cloud's, another AWS's; a region
/// without a trailing number is Alibaba Cloud's (`cn-hangzhou`) or Tencent Cloud's
/// (`ap-guangzhou`). A numbered region (`us-east-1`, `ap-southeast-1`) names several clouds
/// and tells nothing.
fn implied_clouds(m: &Match) -> Vec<Cloud> {
    let types = m.instance_types.iter().flatten().filter_map(|g| {
        let first = g.pattern.chars().next()?;
        if g.pattern.starts_with("ecs.") {
            Some(Cloud::Alibaba)
        } else if first.is_ascii_uppercase() {
            Some(Cloud::Tencent)
        } else if first.is_ascii_lowercase() {
            Some(Cloud::Aws)
        } else {
            None
        }
    });
    let regions = m.regions.iter().flatten().filter_map(|r| {
        if r.ends_with(|c: char| c.is_ascii_digit()) {
            None
        } else if r.starts_with("cn-") {
            Some(Cloud::Alibaba)
        } else {
            Some(Cloud::Tencent)
        }
    });
    types.chain(regions).collect()
}
