//! Prometheus metrics of the control loop, served at `/metrics`.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;
use std::collections::BTreeMap;
use std::sync::atomic::AtomicU64;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Labels of a tick: `ok` or `error`.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct TickLabels {
    result: &'static str,
}

/// Labels of a decision.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct DecisionLabels {
    action: &'static str,
    code: &'static str,
}

/// Labels of an action carried out.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ActionLabels {
    action: &'static str,
    outcome: &'static str,
}

/// Labels of an instance count.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct InstanceLabels {
    state: &'static str,
    policy: String,
}

/// Labels of a region.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RegionLabels {
    region: String,
}

/// Labels of a budget: its name, the value of its `per` tag (`""` without), its currency.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct BudgetLabels {
    budget: String,
    key: String,
    currency: String,
}

/// Where one budget stood at a tick, for the metrics.
#[derive(Debug)]
pub struct BudgetCount {
    /// The budget's name.
    pub budget: String,
    /// The value of its `per` tag, `""` without.
    pub key: String,
    /// The currency of the figures.
    pub currency: String,
    /// What the period may spend.
    pub amount: f64,
    /// Spent so far in the period, when known.
    pub spent: Option<f64>,
    /// The forecast to the period's end, when known.
    pub forecast: Option<f64>,
}

/// What one tick counted, for the metrics.
#[derive(Debug)]
pub struct TickCounts<'a> {
    /// The policy files were invalid and the last valid set was used.
    pub policy_error: bool,
    /// Instances by decision: action and code.
    pub decided: &'a BTreeMap<(&'static str, &'static str), usize>,
    /// Instances by state and governing policy (`""` for none).
    pub instances_by_state: &'a BTreeMap<(&'static str, String), usize>,
    /// Actions carried out, by action and outcome.
    pub actions: BTreeMap<(&'static str, &'static str), u64>,
    /// The regions whose GPU utilisation could not be read, with how many instances each.
    pub gpu_unread: BTreeMap<&'a str, usize>,
    /// Untracked artifacts of spot migrations by kind, when the tick looked for them.
    pub orphans: Option<&'a BTreeMap<&'static str, usize>>,
    /// Spot migrations waiting on a person, by alert: every alert, 0 for one not raised.
    pub spot_alerts: &'a BTreeMap<&'static str, usize>,
    /// Actions left for the next tick because the cloud's rate limits could not serve them.
    pub backlog: usize,
    /// Throttle answers that came back through ebb's pacing since it started, when it paces.
    pub throttles: Option<u64>,
    /// Request tokens left, by region and API, when it paces.
    pub tokens: Option<&'a BTreeMap<(String, &'static str), f64>>,
    /// Where each budget stood.
    pub budgets: Vec<BudgetCount>,
}

/// Labels of an untracked artifact count.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct KindLabels {
    kind: &'static str,
}

/// Labels of a token bucket.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct BucketLabels {
    region: String,
    api: &'static str,
}

/// The metrics, and the registry that encodes them.
#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    ticks: Family<TickLabels, Counter>,
    tick_seconds: Histogram,
    last_tick: Gauge<f64, AtomicU64>,
    decisions: Family<DecisionLabels, Gauge>,
    actions: Family<ActionLabels, Counter>,
    instances: Family<InstanceLabels, Gauge>,
    policy_errors: Counter,
    gpu_read_failures: Family<RegionLabels, Counter>,
    gpu_unread: Gauge,
    leader: Gauge,
    spot_orphans: Family<KindLabels, Gauge>,
    spot_alerts: Family<KindLabels, Gauge>,
    backlog: Gauge,
    throttles: Gauge,
    tokens: Family<BucketLabels, Gauge<f64, AtomicU64>>,
    audit_checkpoint_failures: Counter,
    calendars_running_out: Gauge,
    budget_amount: Family<BudgetLabels, Gauge<f64, AtomicU64>>,
    budget_spent: Family<BudgetLabels, Gauge<f64, AtomicU64>>,
    budget_forecast: Family<BudgetLabels, Gauge<f64, AtomicU64>>,
}

impl Default for Metrics {
    fn default() -> Self {
        let mut registry = Registry::with_prefix("ebb");
        let m = Metrics {
            ticks: Family::default(),
            tick_seconds: Histogram::new(exponential_buckets(0.005, 2.0, 14)),
            last_tick: Gauge::default(),
            decisions: Family::default(),
            actions: Family::default(),
            instances: Family::default(),
            policy_errors: Counter::default(),
            gpu_read_failures: Family::default(),
            gpu_unread: Gauge::default(),
            leader: Gauge::default(),
            spot_orphans: Family::default(),
            spot_alerts: Family::default(),
            backlog: Gauge::default(),
            throttles: Gauge::default(),
            tokens: Family::default(),
            audit_checkpoint_failures: Counter::default(),
            calendars_running_out: Gauge::default(),
            budget_amount: Family::default(),
            budget_spent: Family::default(),
            budget_forecast: Family::default(),
            registry: Registry::default(),
        };
        registry.register("ticks", "Reconcile ticks, by result", m.ticks.clone());
        registry.register(
            "tick_duration_seconds",
            "How long a tick took",
            m.tick_seconds.clone(),
        );
        registry.register(
            "last_tick_timestamp_seconds",
            "When the last tick ended, in Unix seconds",
            m.last_tick.clone(),
        );
        registry.register(
            "decisions",
            "Instances by the last tick's decision (action and code)",
            m.decisions.clone(),
        );
        registry.register(
            "actions",
            "Actions carried out, by action and outcome",
            m.actions.clone(),
        );
        registry.register(
            "instances",
            "Instances at the last tick, by state and governing policy",
            m.instances.clone(),
        );
        registry.register(
            "policy_load_errors",
            "Ticks whose policy files were invalid (the last valid set was used, or none)",
            m.policy_errors.clone(),
        );
        registry.register(
            "gpu_read_failures",
            "Ticks whose GPU utilisation read failed, by region",
            m.gpu_read_failures.clone(),
        );
        registry.register(
            "gpu_unread_instances",
            "Instances whose GPU utilisation could not be read at the last tick (not stopped for idleness)",
            m.gpu_unread.clone(),
        );
        registry.register(
            "leader",
            "1 when this replica is the leader, 0 otherwise",
            m.leader.clone(),
        );
        registry.register(
            "spot_orphans",
            "Instances, images and snapshots carrying ebb's migration tags that no migration tracked, at the last look (hourly), by kind",
            m.spot_orphans.clone(),
        );
        registry.register(
            "spot_alerts",
            "Spot migrations waiting on a person at the last tick, by alert (image_missing: an original kept because its image or a snapshot is gone)",
            m.spot_alerts.clone(),
        );
        registry.register(
            "rate_limit_backlog",
            "Actions the last tick left for the next because EC2's rate limits could not serve them",
            m.backlog.clone(),
        );
        registry.register(
            "rate_limit_throttles",
            "Throttle answers (RequestLimitExceeded) that came back despite ebb's pacing, since it started",
            m.throttles.clone(),
        );
        registry.register(
            "rate_limit_tokens",
            "Request tokens left in ebb's bucket of each EC2 API, by region",
            m.tokens.clone(),
        );
        registry.register(
            "budget_amount",
            "What each budget's period may spend, in its currency (by budget, per value and currency)",
            m.budget_amount.clone(),
        );
        registry.register(
            "budget_spent",
            "What each budget's boxes spent so far in its period at the last tick (absent while unknown)",
            m.budget_spent.clone(),
        );
        registry.register(
            "budget_forecast",
            "What each budget's period will have spent at its end if what runs keeps running through its work hours",
            m.budget_forecast.clone(),
        );
        registry.register(
            "audit_checkpoint_failures",
            "Audit checkpoints that could not be published (EBB_AUDIT_CHECKPOINTS)",
            m.audit_checkpoint_failures.clone(),
        );
        registry.register(
            "calendars_running_out",
            "Calendars the policies use that name no date of the current year, or from 1 November of the next (the policy watcher's last look)",
            m.calendars_running_out.clone(),
        );
        Metrics { registry, ..m }
    }
}

impl Metrics {
    /// The counter of audit checkpoints that could not be published, for the publisher.
    pub fn audit_checkpoint_failures(&self) -> Counter {
        self.audit_checkpoint_failures.clone()
    }

    /// Records a tick that failed after `took`; `policies_invalid` when it failed because no
    /// valid policy set was known.
    pub fn tick_failed(&self, took: Duration, policies_invalid: bool) {
        self.tick_ended(took);
        if policies_invalid {
            self.policy_errors.inc();
        }
        self.ticks
            .get_or_create(&TickLabels { result: "error" })
            .inc();
    }

    /// Records a tick that took `took`, and what it counted.
    pub fn tick_done(&self, took: Duration, counts: &TickCounts) {
        self.tick_ended(took);
        self.ticks.get_or_create(&TickLabels { result: "ok" }).inc();
        if counts.policy_error {
            self.policy_errors.inc();
        }
        self.decisions.clear();
        for (&(action, code), &n) in counts.decided {
            self.decisions
                .get_or_create(&DecisionLabels { action, code })
                .set(n as i64);
        }
        self.instances.clear();
        for ((state, policy), &n) in counts.instances_by_state {
            self.instances
                .get_or_create(&InstanceLabels {
                    state,
                    policy: policy.clone(),
                })
                .set(n as i64);
        }
        for &region in counts.gpu_unread.keys() {
            self.gpu_read_failures
                .get_or_create(&RegionLabels {
                    region: region.to_string(),
                })
                .inc();
        }
        self.gpu_unread
            .set(counts.gpu_unread.values().sum::<usize>() as i64);
        if let Some(orphans) = counts.orphans {
            for kind in ["instance", "image", "snapshot"] {
                let n = orphans.get(kind).copied().unwrap_or(0);
                self.spot_orphans
                    .get_or_create(&KindLabels { kind })
                    .set(n as i64);
            }
        }
        for (&kind, &n) in counts.spot_alerts {
            self.spot_alerts
                .get_or_create(&KindLabels { kind })
                .set(n as i64);
        }
        self.backlog.set(counts.backlog as i64);
        if let Some(throttles) = counts.throttles {
            self.throttles.set(throttles as i64);
        }
        if let Some(tokens) = counts.tokens {
            self.tokens.clear();
            for ((region, api), &n) in tokens {
                self.tokens
                    .get_or_create(&BucketLabels {
                        region: region.clone(),
                        api,
                    })
                    .set(n);
            }
        }
        self.budget_amount.clear();
        self.budget_spent.clear();
        self.budget_forecast.clear();
        for b in &counts.budgets {
            let labels = BudgetLabels {
                budget: b.budget.clone(),
                key: b.key.clone(),
                currency: b.currency.clone(),
            };
            self.budget_amount.get_or_create(&labels).set(b.amount);
            if let Some(spent) = b.spent {
                self.budget_spent.get_or_create(&labels).set(spent);
            }
            if let Some(forecast) = b.forecast {
                self.budget_forecast.get_or_create(&labels).set(forecast);
            }
        }
        for (&(action, outcome), &n) in &counts.actions {
            self.actions
                .get_or_create(&ActionLabels { action, outcome })
                .inc_by(n);
        }
    }

    fn tick_ended(&self, took: Duration) {
        self.tick_seconds.observe(took.as_secs_f64());
        self.last_tick.set(
            SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0.0, |d| d.as_secs_f64()),
        );
    }

    /// Records how many calendars of the policies may have run out.
    pub fn calendars_running_out(&self, calendars: usize) {
        self.calendars_running_out
            .set(i64::try_from(calendars).unwrap_or(i64::MAX));
    }

    /// Records whether this replica leads.
    pub fn leader(&self, leader: bool) {
        self.leader.set(i64::from(leader));
    }

    /// The metrics in the OpenMetrics text format.
    pub fn encode(&self) -> String {
        let mut text = String::new();
        // Writing to a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut text, &self.registry);
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rate_limit_figures_are_exported() {
        let metrics = Metrics::default();
        let tokens = BTreeMap::from([(("us-east-1".to_string(), "StartInstances"), 2.5)]);
        metrics.tick_done(
            Duration::from_millis(10),
            &TickCounts {
                policy_error: false,
                decided: &BTreeMap::new(),
                instances_by_state: &BTreeMap::new(),
                actions: BTreeMap::new(),
                gpu_unread: BTreeMap::new(),
                backlog: 9500,
                throttles: Some(3),
                tokens: Some(&tokens),
                orphans: None,
                spot_alerts: &BTreeMap::new(),
                budgets: Vec::new(),
            },
        );
        let text = metrics.encode();
        assert!(text.contains("ebb_rate_limit_backlog 9500"), "{text}");
        assert!(text.contains("ebb_rate_limit_throttles 3"), "{text}");
        assert!(
            text.contains(r#"ebb_rate_limit_tokens{region="us-east-1",api="StartInstances"} 2.5"#),
            "{text}"
        );
    }

    #[test]
    fn each_budget_exports_its_amount_and_what_is_known_of_its_spend() {
        let metrics = Metrics::default();
        let budget = |key: &str, spent, forecast| BudgetCount {
            budget: "research".into(),
            key: key.into(),
            currency: "CNY".into(),
            amount: 150000.0,
            spent,
            forecast,
        };
        metrics.tick_done(
            Duration::from_millis(10),
            &TickCounts {
                policy_error: false,
                decided: &BTreeMap::new(),
                instances_by_state: &BTreeMap::new(),
                actions: BTreeMap::new(),
                gpu_unread: BTreeMap::new(),
                backlog: 0,
                throttles: None,
                tokens: None,
                orphans: None,
                spot_alerts: &BTreeMap::new(),
                budgets: vec![
                    budget("mei", Some(152310.5), Some(160000.0)),
                    budget("ali", None, None),
                ],
            },
        );
        let text = metrics.encode();
        let labels = |key: &str| format!(r#"{{budget="research",key="{key}",currency="CNY"}}"#);
        for line in [
            format!("ebb_budget_amount{} 150000", labels("mei")),
            format!("ebb_budget_spent{} 152310.5", labels("mei")),
            format!("ebb_budget_forecast{} 160000", labels("mei")),
            format!("ebb_budget_amount{} 150000", labels("ali")),
        ] {
            assert!(text.contains(&line), "{line}\n{text}");
        }
        assert!(
            !text.contains(&format!("ebb_budget_spent{}", labels("ali"))),
            "{text}"
        );
    }
}
