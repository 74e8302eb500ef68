//! Instances something else owns (an Auto Scaling group, Karpenter, an ACK node pool, ...): whatever a rule asks,
//! ebb does nothing to one alone, since its owner would replace or break it. Applied to every
//! verdict under a policy, after the rules, so that no rule can get past it.

use super::{verdict, Action, Code, Context, Trace, Verdict};
use crate::fleet::{Instance, OwnerKind};

/// The decision code that names an owner of kind `kind`.
pub fn owned_code(kind: OwnerKind) -> Code {
    match kind {
        OwnerKind::Asg => Code::OwnedByAsg,
        OwnerKind::EksNodegroup => Code::OwnedByEksNodegroup,
        OwnerKind::Karpenter => Code::OwnedByKarpenter,
        OwnerKind::Skypilot => Code::OwnedBySkypilot,
        OwnerKind::Batch => Code::OwnedByBatch,
        OwnerKind::SpotFleet => Code::OwnedBySpotFleet,
        OwnerKind::Ec2Fleet => Code::OwnedByEc2Fleet,
        OwnerKind::Ess => Code::OwnedByEss,
        OwnerKind::AckNode => Code::OwnedByAck,
        OwnerKind::TencentAs => Code::OwnedByTencentAs,
        OwnerKind::TkeNode => Code::OwnedByTke,
        OwnerKind::Unknown => Code::OwnedByUnknown,
    }
}

/// `v` for an instance nothing else owns; for an owned one, no action with the code of its
/// owner, and a reason that names the owner, what the policy alone would do and what to do
/// instead.
pub(super) fn owned(v: Verdict, inst: &Instance, ctx: &Context, trace: &mut Trace) -> Verdict {
    let Some(owner) = inst.owner() else {
        return v;
    };
    trace.note(|| format!("owned by {owner}: ebb does not act on it alone"));
    let kind = owner.kind();
    verdict(
        Action::None,
        owned_code(kind),
        ctx.text(|| {
            let policy = match v.action {
                Action::None => format!("the policy asks for nothing now: {}", v.reason),
                action => format!("the policy alone would {action}: {}", v.reason),
            };
            format!(
                "owned by {owner}, which would replace or break an instance stopped under it: ebb does not act on it alone ({policy}); instead, {}",
                kind.instead()
            )
        }),
    )
}
