//! `ebb explain`: the decision for one instance with every verdict that led to it.

use super::{decide_traced, Decision, Prior};
use crate::fleet::{Fleet, Owner};
use crate::policy::PolicySet;
use chrono::{DateTime, Utc};
use std::fmt;

/// One instance's decision and the trace of the rules that made it.
#[derive(Debug, Clone)]
pub struct Explanation {
    /// The decision, the same `decide` makes.
    pub decision: Decision,
    /// Each step: which policies matched, which governs, each rule's verdict with its numbers.
    pub steps: Vec<String>,
    /// The decision time.
    pub at: DateTime<Utc>,
    /// What owns the instance besides ebb, from its tags.
    pub owner: Option<Owner>,
}

/// Explains the decision for `instance`, or `None` when the fleet has no such instance.
pub fn explain(
    now: DateTime<Utc>,
    policies: &PolicySet,
    fleet: &Fleet,
    prior: &Prior,
    instance: &str,
) -> Option<Explanation> {
    let inst = fleet.instances.iter().find(|i| i.id == instance)?;
    let (decision, steps) = decide_traced(now, policies, fleet, prior, inst);
    Some(Explanation {
        decision,
        steps,
        at: now,
        owner: inst.owner(),
    })
}

impl fmt::Display for Explanation {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        let d = &self.decision;
        writeln!(
            f,
            "instance {} ({}) at {}",
            d.instance,
            d.region,
            self.at.to_rfc3339()
        )?;
        if let Some(owner) = &self.owner {
            writeln!(f, "owned by {owner}")?;
        }
        for step in &self.steps {
            writeln!(f, "  - {step}")?;
        }
        write!(
            f,
            "decision: {} [{}] by {}: {}{}",
            d.action,
            d.code,
            d.policy.as_deref().unwrap_or("no policy"),
            d.reason,
            if d.dry_run { " (dry run)" } else { "" }
        )
    }
}
