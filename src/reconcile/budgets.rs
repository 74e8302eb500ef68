//! The budgets phase, before the decisions: where each budget stands in its period
//! (`budget::standings`, from what ran as Postgres recorded it and the price table), and the
//! notice of each threshold crossed, once a period: an audit row (which the events task posts
//! as a CloudEvent) and a webhook post to the budget's `notify` list and the boxes' owners;
//! under `--dry-run`, the row marked a dry run, and no post.

use super::{Reconciler, TickError};
use crate::budget::{self, Standing};
use crate::cloud::Provider;
use crate::engine::BudgetStanding;
use crate::fleet::{Cloud, Fleet};
use crate::names::{ACTOR, OWNER_TAG};
use crate::policy::{AtLimit, Budget, PolicySet};
use crate::store::{Crossed, NewAuditEntry};
use chrono::{DateTime, Utc};
use std::collections::BTreeSet;

impl<P: Provider> Reconciler<P> {
    /// Where each budget of `set` stands at `now`, its thresholds' notices sent; the
    /// standings as the decisions read them.
    pub(super) async fn budgets(
        &self,
        set: &PolicySet,
        fleet: &Fleet,
        now: DateTime<Utc>,
        version: &str,
    ) -> Result<(Vec<Standing>, Vec<BudgetStanding>), TickError> {
        let Some(since) = set
            .budgets
            .iter()
            .map(|b| budget::bounds(b.period, b.timezone, now).0)
            .min()
        else {
            return Ok(Default::default());
        };
        let ran = self.store.ran(since, now).await?;
        let raises = self.store.budget_raises(now).await?;
        // One provider lists one cloud; a fleet without boxes spends nothing whatever its cloud.
        let cloud = fleet
            .instances
            .first()
            .map_or(Cloud::Aws, |i| i.billing.cloud);
        // The clouds' quotes over the table, as the report prices the same hours.
        let prices = self
            .store
            .quoted_table((*self.options.prices).clone())
            .await?;
        let standings = budget::standings(set, now, cloud, &ran, fleet, &prices, &raises);
        for standing in &standings {
            let Some(b) = set.budgets.iter().find(|b| b.name == standing.budget) else {
                continue;
            };
            let crossed = standing.crossed(b);
            for by_forecast in [false, true] {
                let percents: Vec<f64> = crossed
                    .iter()
                    .filter(|(_, forecast)| *forecast == by_forecast)
                    .map(|(percent, _)| *percent)
                    .collect();
                if !percents.is_empty() {
                    self.budget_notice(b, standing, &percents, by_forecast, fleet, version)
                        .await?;
                }
            }
        }
        let for_decisions = standings.iter().map(Standing::for_decisions).collect();
        Ok((standings, for_decisions))
    }

    /// The notice of the highest of `percents` of `b`'s amount newly reached (by its
    /// forecast when `by_forecast`), unless each went out this period.
    async fn budget_notice(
        &self,
        b: &Budget,
        standing: &Standing,
        percents: &[f64],
        by_forecast: bool,
        fleet: &Fleet,
        version: &str,
    ) -> Result<(), TickError> {
        let crossed = Crossed {
            budget: &b.name,
            key: standing.key.as_deref(),
            period_start: standing.start,
            percents,
            by_forecast,
        };
        let entry = |percent: f64| {
            let reason = notice_text(b, standing, percent, by_forecast);
            let limit = reason.1;
            let mut entry = NewAuditEntry::event(standing.now, ACTOR, "budget_notice", reason.0);
            entry.code = Some(
                if limit {
                    "budget_exhausted"
                } else {
                    "budget_threshold"
                }
                .into(),
            );
            entry.policy_version = Some(version.to_string());
            // A dry run records its notices as dry runs (no CloudEvent) and posts none.
            entry.dry_run = self.options.dry_run;
            entry
        };
        let Some(sent) = self
            .store
            .record_budget_notice(crossed, standing.now, entry)
            .await?
        else {
            return Ok(());
        };
        tracing::warn!(budget = %b.name, reason = %sent.reason, "a budget threshold was crossed");
        if let Some(webhook) = self.options.webhook.as_ref().filter(|_| !sent.dry_run) {
            let to = recipients(b, standing, fleet);
            let to = match to.is_empty() {
                true => String::new(),
                false => format!(" (to {})", to.into_iter().collect::<Vec<_>>().join(", ")),
            };
            webhook.send(format!("Budget {}{to}", sent.reason));
        }
        Ok(())
    }
}

/// The notice of `percent` of `b`'s amount reached (by the forecast when `by_forecast`), and
/// whether the amount is spent.
fn notice_text(b: &Budget, standing: &Standing, percent: f64, by_forecast: bool) -> (String, bool) {
    let limit = !by_forecast && standing.spent.as_ref().is_ok_and(|s| *s >= b.amount);
    let forecast = standing.forecast.map_or(String::new(), |f| {
        format!(
            "; forecast {} by {}",
            budget::money(f, &standing.currency),
            standing.until()
        )
    });
    let reached = match by_forecast {
        true => format!("{percent}% of the amount forecast to be reached"),
        false => format!("{percent}% of the amount reached"),
    };
    let consequence = match (limit, b.at_limit) {
        (false, _) => String::new(),
        (true, AtLimit::Notify) => "; at_limit: notify, nothing else is done".into(),
        (true, AtLimit::RefuseStarts) => format!("; starts refused until {}", standing.until()),
        (true, AtLimit::StopIdle) => format!(
            "; idle boxes stopped at any hour until {}",
            standing.until()
        ),
        (true, AtLimit::Stop) => format!(
            "; running boxes stopped after their notice until {}",
            standing.until()
        ),
    };
    let text = format!("{}; {reached}{forecast}{consequence}", standing.summary());
    (text, limit)
}

/// Who a budget's notice is for: its `notify` list, and the owners (`ebb:owner`) of the boxes
/// that spent in its period.
fn recipients(b: &Budget, standing: &Standing, fleet: &Fleet) -> BTreeSet<String> {
    let owners = standing.boxes.iter().filter_map(|(id, _)| {
        let inst = fleet.instances.iter().find(|i| &i.id == id)?;
        inst.tag(OWNER_TAG).map(str::to_string)
    });
    b.notify.iter().cloned().chain(owners).collect()
}
