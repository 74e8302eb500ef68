//! Early starts over the fleet: the stopped instances due to start at their policies' next
//! openings (what the start rule would decide at the start of `start_ahead`), grouped by the
//! account and region whose buckets they share, and how much earlier than `start_ahead` each
//! policy's starts begin so that all of them are made by their opening, in the order of the
//! openings (`engine::latest_starts`).

use super::lead::Early;
use super::start::Opening;
use super::{governing, Action, Context, Eval, Trace};
use crate::engine::early::{latest_starts, whole_minutes, StartRates, TokenRate, MAX_EARLY};
use crate::fleet::{Instance, InstanceState};
use crate::policy::StartAtOpen;
use chrono::{DateTime, Duration, Utc};
use std::collections::HashMap;

/// One start due in a bucket: whose policy, when it is due, whether a type change comes first.
struct Due {
    policy: usize,
    at: DateTime<Utc>,
    changes_type: bool,
}

/// Each policy's early start (by position in the set), for the fleet at `ctx`'s time.
pub(super) fn plan(
    ctx: &Context,
    instances: &[Instance],
    rates: &StartRates,
) -> Vec<Option<Early>> {
    let mut buckets: HashMap<(Option<&str>, &str), Vec<Due>> = HashMap::new();
    for inst in instances {
        if let Some(due) = due_start(ctx, inst) {
            buckets
                .entry((inst.via_role.as_deref(), inst.region.as_str()))
                .or_default()
                .push(due);
        }
    }
    let mut early: Vec<Option<Early>> = vec![None; ctx.policies.policies.len()];
    for mut dues in buckets.into_values() {
        dues.sort_by_key(|d| (d.at, d.policy));
        let mut consider = |api: &'static str, rate: TokenRate, dues: &[&Due]| {
            let at: Vec<DateTime<Utc>> = dues.iter().map(|d| d.at).collect();
            for (n, latest) in latest_starts(&at, rate).into_iter().enumerate() {
                let lead = whole_minutes(at[n] - latest);
                let policy = dues[n].policy;
                if lead <= Duration::zero() || early[policy].is_some_and(|e| e.lead >= lead) {
                    continue;
                }
                let Some(open) = ctx.statuses[policy].and_then(|st| st.next) else {
                    continue;
                };
                early[policy] = Some(Early {
                    open,
                    lead,
                    due: at.iter().filter(|&&t| t <= at[n]).count(),
                    api,
                    rate,
                });
            }
        };
        let all: Vec<&Due> = dues.iter().collect();
        consider("StartInstances", rates.start, &all);
        let changing: Vec<&Due> = dues.iter().filter(|d| d.changes_type).collect();
        consider("ModifyInstanceAttribute", rates.modify, &changing);
    }
    early
}

/// The start `inst` is due for at its policy's next opening, within [`MAX_EARLY`] of `ctx`'s
/// time: a stopped instance the start rule starts then, or one ebb started for that opening
/// already (its token is spent, and counts among the opening's).
fn due_start(ctx: &Context, inst: &Instance) -> Option<Due> {
    if inst.owner().is_some() {
        return None;
    }
    let (position, policy) = governing(ctx.policies, inst, false, &mut Trace::Off).ok()?;
    let wh = policy.work_hours.as_ref()?;
    let status = ctx.statuses[position].filter(|st| !st.in_hours)?;
    let open = status.next?;
    let at = open - wh.start_ahead;
    if wh.start_at_open == StartAtOpen::Never || at > ctx.now + MAX_EARLY {
        return None;
    }
    let facts = ctx.prior.facts(&inst.id);
    let due = match inst.state {
        InstanceState::Stopped => {
            let eval = Eval {
                ctx,
                policy,
                status: Some(status),
                inst,
                facts,
                early: None,
            };
            eval.start_at_open(wh, Opening::Ahead(open), &mut Trace::Off)
                .action
                == Action::Start
        }
        InstanceState::Pending | InstanceState::Running => {
            facts.started_by_ebb_at.is_some_and(|t| t >= at - MAX_EARLY)
        }
        _ => false,
    };
    due.then(|| Due {
        policy: position,
        at,
        changes_type: ctx.prior.moved_type(&inst.id)
            && policy.start.as_ref().is_some_and(|s| s.restore_type),
    })
}
