//! What ebb knows from before a decision: its facts about each instance, the overrides, the
//! refused starts, and the buckets starts wait for.

use super::{BudgetStanding, Override, StartRates};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use std::collections::{HashMap, HashSet};

/// What ebb remembers about an instance (from Postgres, or a snapshot file).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct InstanceFacts {
    /// When ebb last stopped it; cleared when it is seen running again, so a value means the
    /// last stop was ebb's.
    pub stopped_by_ebb_at: Option<DateTime<Utc>>,
    /// When ebb last started it.
    pub started_by_ebb_at: Option<DateTime<Utc>>,
    /// When ebb last gave notice of a stop.
    pub notified_at: Option<DateTime<Utc>>,
    /// When a person started it, if it is running since: it was seen stopped, then running,
    /// with no start of ebb's since the stop. Cleared when it stops again or ebb starts it.
    pub started_by_person_at: Option<DateTime<Utc>>,
    /// Since when its stop outside hours has waited for its busy GPU, while the last decision
    /// is still that wait (`busy_deferred`): what the stop's reason says it waited.
    #[serde(default)]
    pub busy_deferred_since: Option<DateTime<Utc>>,
}

/// Everything ebb knows from before this decision.
#[derive(Debug, Clone, Default)]
pub struct Prior {
    facts: HashMap<String, InstanceFacts>,
    overrides: HashMap<String, Vec<Override>>,
    /// The last start EC2 refused for lack of capacity, by region and instance type.
    capacity_failures: HashMap<(String, String), DateTime<Utc>>,
    /// The buckets starts wait for, when known: with them, starts that the buckets cannot all
    /// make by an opening begin early enough that they are.
    start_rates: Option<StartRates>,
    /// The instances ebb changed to a fallback type, which `start.restore_type` changes back
    /// (a ModifyInstanceAttribute call) before their start.
    moved_types: HashSet<String>,
    /// The starts EC2 refused for lack of capacity, by instance, oldest first, within
    /// [`MAX_CAPACITY_MEMORY`]: what `start.reserve_capacity` weighs.
    refused_starts: HashMap<String, Vec<DateTime<Utc>>>,
    /// Where each budget stands, by name and `per` value.
    budgets: HashMap<(String, Option<String>), BudgetStanding>,
}

impl Prior {
    /// Prior facts by instance id, and overrides (expired ones are ignored when deciding).
    pub fn new(facts: HashMap<String, InstanceFacts>, overrides: Vec<Override>) -> Self {
        let mut by_instance: HashMap<String, Vec<Override>> = HashMap::new();
        for o in overrides {
            by_instance.entry(o.instance.clone()).or_default().push(o);
        }
        Prior {
            facts,
            overrides: by_instance,
            capacity_failures: HashMap::new(),
            start_rates: None,
            moved_types: HashSet::new(),
            refused_starts: HashMap::new(),
            budgets: HashMap::new(),
        }
    }

    /// With where each budget stands in its period.
    pub fn with_budgets(mut self, standings: Vec<BudgetStanding>) -> Self {
        self.budgets = standings
            .into_iter()
            .map(|s| ((s.budget.clone(), s.key.clone()), s))
            .collect();
        self
    }

    /// Where the budget `name` stands (for its `per` value `key`), when worked out.
    pub fn budget(&self, name: &str, key: Option<&str>) -> Option<&BudgetStanding> {
        self.budgets
            .get(&(name.to_string(), key.map(str::to_string)))
    }

    /// With the starts EC2 refused for lack of capacity, by instance, oldest first.
    pub fn with_refused_starts(mut self, refused: HashMap<String, Vec<DateTime<Utc>>>) -> Self {
        self.refused_starts = refused;
        self
    }

    /// The starts of `instance` EC2 refused for lack of capacity, oldest first.
    pub fn refused_starts(&self, instance: &str) -> &[DateTime<Utc>] {
        self.refused_starts.get(instance).map_or(&[], Vec::as_slice)
    }

    /// With the buckets starts wait for in every account and region (EC2's StartInstances and
    /// ModifyInstanceAttribute), and the instances whose type is changed back before their
    /// start: what the early start of many starts due at one opening is worked out from.
    pub fn with_start_rates(mut self, rates: StartRates, moved_types: HashSet<String>) -> Self {
        self.start_rates = Some(rates);
        self.moved_types = moved_types;
        self
    }

    /// The buckets starts wait for, when known.
    pub fn start_rates(&self) -> Option<&StartRates> {
        self.start_rates.as_ref()
    }

    /// Whether ebb changed `instance` to a fallback type (its own type comes back before a
    /// start under `start.restore_type`).
    pub fn moved_type(&self, instance: &str) -> bool {
        self.moved_types.contains(instance)
    }

    /// With the last start EC2 refused for lack of capacity, by region and instance type: what
    /// `idle.min_gap` weighs before an idle stop.
    pub fn with_capacity_failures(
        mut self,
        failures: HashMap<(String, String), DateTime<Utc>>,
    ) -> Self {
        self.capacity_failures = failures;
        self
    }

    /// When EC2 last refused a start of `instance_type` in `region` for lack of capacity.
    pub fn last_capacity_failure(
        &self,
        region: &str,
        instance_type: &str,
    ) -> Option<DateTime<Utc>> {
        self.capacity_failures
            .get(&(region.to_string(), instance_type.to_string()))
            .copied()
    }

    /// Replaces what ebb remembers about `instance`: `ebb replay` models the facts its
    /// simulated actions leave, tick after tick.
    pub fn set_facts(&mut self, instance: &str, facts: InstanceFacts) {
        match self.facts.get_mut(instance) {
            Some(f) => *f = facts,
            None => {
                self.facts.insert(instance.to_string(), facts);
            }
        }
    }

    /// The facts about `instance` (all empty when ebb knows nothing).
    pub fn facts(&self, instance: &str) -> InstanceFacts {
        self.facts.get(instance).copied().unwrap_or_default()
    }

    /// The override protecting `instance` at `now` that lasts longest, if any.
    pub fn active_override(&self, instance: &str, now: DateTime<Utc>) -> Option<&Override> {
        self.overrides
            .get(instance)?
            .iter()
            .filter(|o| o.until > now)
            .max_by_key(|o| o.until)
    }
}
