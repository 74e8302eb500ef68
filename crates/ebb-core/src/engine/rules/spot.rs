//! The spot rule: whether a running on-demand instance should move to spot capacity now.

use super::text::span;
use super::Eval;
use crate::fleet::Lifecycle;
use crate::names::{INTERRUPTIBLE_TAG, MIGRATING_TAG, MIGRATION_TAG};
use crate::policy::SpotRule;
use chrono::{DateTime, Duration, Utc};

/// The cheapest acceptable spot price for an instance, against its on-demand price.
struct Offer<'a> {
    /// The replacement type with the cheapest spot price.
    instance_type: &'a str,
    /// Its spot $/hour.
    spot: f64,
    /// The instance's own on-demand $/hour.
    on_demand: f64,
    /// `1 - spot / on_demand`; zero when on-demand is free.
    savings: f64,
}

impl Eval<'_> {
    /// `Ok` with the reason when the instance should move to spot now, `Err` with why not.
    pub(super) fn spot(&self, rule: &SpotRule) -> Result<String, String> {
        let inst = self.inst;
        if !self.ctx.levers.spot_moves.contains(inst.billing.cloud) {
            return Err(self.text(|| {
                format!(
                    "spot migration is not available for {}: ebb cannot move its instances",
                    inst.billing.cloud.display_name()
                )
            }));
        }
        if inst.tag(INTERRUPTIBLE_TAG) != Some("true") {
            return Err(self.text(|| "tag ebb:interruptible is not \"true\"".into()));
        }
        if inst.lifecycle != Lifecycle::OnDemand {
            return Err(self.text(|| "already spot".into()));
        }
        if inst.tag(MIGRATING_TAG).is_some() {
            return Err(self.text(|| "a migration is under way (tag ebb:migrating)".into()));
        }
        if let Some(id) = inst.tag(MIGRATION_TAG) {
            // An on-demand fallback: its migration gave up on spot for it.
            return Err(
                self.text(|| format!("it replaces an instance moved by spot migration {id}"))
            );
        }
        let Offer {
            instance_type: best_type,
            spot,
            on_demand,
            savings,
        } = self.spot_offer(rule)?;
        let pct = |f: f64| format!("{:.0}%", f * 100.0);
        if savings < rule.min_savings {
            return Err(self.text(|| format!(
                "savings {} ({best_type} spot ${spot:.3}/h vs on-demand ${on_demand:.3}/h) below min_savings {}",
                pct(savings),
                pct(rule.min_savings)
            )));
        }
        let now = self.now();
        let at = self.checkpoint(rule)?;
        Ok(self.text(|| format!(
            "spot {best_type} ${spot:.3}/h vs on-demand {} ${on_demand:.3}/h saves {} (min {}); checkpoint {} ago",
            inst.instance_type,
            pct(savings),
            pct(rule.min_savings),
            span((now - at).max(Duration::zero()))
        )))
    }

    /// The cheapest spot price among the rule's types (the instance's own when it names none),
    /// or why there is none to compare.
    fn spot_offer<'r>(&'r self, rule: &'r SpotRule) -> Result<Offer<'r>, String> {
        let inst = self.inst;
        let prices = self.ctx.prices.get(&inst.region);
        let on_demand = prices
            .and_then(|p| p.get(&inst.instance_type))
            .and_then(|p| p.on_demand)
            .ok_or_else(|| {
                self.text(|| {
                    format!(
                        "no on-demand price for {} in {}",
                        inst.instance_type, inst.region
                    )
                })
            })?;
        let candidates = if rule.instance_types.is_empty() {
            std::slice::from_ref(&inst.instance_type)
        } else {
            &rule.instance_types[..]
        };
        let (best_type, spot) = candidates
            .iter()
            .filter_map(|t| Some((t, prices?.get(t)?.spot?)))
            .min_by(|a, b| a.1.total_cmp(&b.1))
            .ok_or_else(|| {
                self.text(|| {
                    format!(
                        "no spot price for {} in {}",
                        candidates.join(", "),
                        inst.region
                    )
                })
            })?;
        let savings = if on_demand > 0.0 {
            1.0 - spot / on_demand
        } else {
            0.0
        };
        Ok(Offer {
            instance_type: best_type,
            spot,
            on_demand,
            savings,
        })
    }

    /// When the job last checkpointed (tag `ebb:checkpoint-at`), when that is recent enough for
    /// the rule; otherwise why not.
    fn checkpoint(&self, rule: &SpotRule) -> Result<DateTime<Utc>, String> {
        let now = self.now();
        let at = self.last_checkpoint()?;
        if now - at > rule.checkpoint_max_age {
            return Err(self.text(|| {
                format!(
                    "last checkpoint {} ago, older than checkpoint_max_age {}",
                    span(now - at),
                    span(rule.checkpoint_max_age)
                )
            }));
        }
        Ok(at)
    }
}
