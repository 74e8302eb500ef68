//! What a cloud's billing allows, applied to every verdict under a policy after the rules: a
//! stop that would save nothing is not made (a subscription, a family that keeps charging, a
//! box in a capacity reservation someone holds), and a preemptible instance the cloud is
//! taking back is left alone.

use super::{verdict, Action, Code, Context, Trace, Verdict};
use crate::fleet::{Charge, Instance, StopSaving};
use crate::policy::{InReservation, Policy};

/// `v` as the instance's billing allows it:
/// - under a recycling lock, nothing (the cloud releases it within minutes);
/// - on a subscription, no stop, hibernation or notice of one: a stop saves nothing;
/// - for a family that cannot stop without charge, no stop unless the policy sets
///   `stop.allow_charging_stop`;
/// - in a capacity reservation held outside ebb, no stop unless the policy sets
///   `stop.in_reservation: stop`.
pub(super) fn allowed(
    v: Verdict,
    inst: &Instance,
    policy: &Policy,
    ctx: &Context,
    trace: &mut Trace,
) -> Verdict {
    let billing = &inst.billing;
    let cloud = billing.cloud.display_name();
    let policy_asks = || match v.action {
        Action::None => format!("the policy asks for nothing now: {}", v.reason),
        action => format!("the policy alone would {action}: {}", v.reason),
    };
    if billing.recycling {
        trace.note(|| format!("{cloud} is recycling this preemptible instance"));
        return verdict(
            Action::None,
            Code::RecyclingWarned,
            ctx.text(|| {
                format!(
                    "{cloud} has locked this preemptible instance for recycling (an interruption warning): it will be released within minutes, ebb leaves it alone ({})",
                    policy_asks()
                )
            }),
        );
    }
    if v.action.stops() && billing.charge == Charge::Subscription {
        trace.note(|| format!("would {}, but it is a subscription", v.action));
        return verdict(
            Action::None,
            Code::SubscriptionNoSaving,
            ctx.text(|| {
                format!(
                    "a subscription instance (paid ahead for its term) on {cloud}: a stop saves nothing, so ebb never stops it ({}); switch it to pay-as-you-go for stops to save",
                    policy_asks()
                )
            }),
        );
    }
    if let (true, Some(held)) = (v.action.stops(), &billing.reservation) {
        let stop_anyway = policy
            .stop
            .as_ref()
            .is_some_and(|s| s.in_reservation == InReservation::Stop);
        trace.note(|| {
            format!(
                "runs in {}; stop.in_reservation is {}",
                held.describe(),
                if stop_anyway { "stop" } else { "keep" }
            )
        });
        if !stop_anyway {
            return verdict(
                Action::None,
                Code::ReservedNoSaving,
                ctx.text(|| {
                    format!(
                        "it runs in {}, held outside ebb and paid whether the box runs or not: a stop saves nothing, so ebb does not stop it ({}); set stop.in_reservation: stop in the policy to stop it anyway and free the capacity for other boxes",
                        held.describe(),
                        policy_asks()
                    )
                }),
            );
        }
    }
    if let (true, StopSaving::KeepsCharging { family }) = (v.action.stops(), billing.stop_saving) {
        let allowed = policy.stop.as_ref().is_some_and(|s| s.allow_charging_stop);
        trace.note(|| {
            format!(
                "family {family} cannot stop without charge; stop.allow_charging_stop is {allowed}"
            )
        });
        if !allowed {
            return verdict(
                Action::None,
                Code::ChargingStopRefused,
                ctx.text(|| {
                    format!(
                        "{} is of family {family}, which {cloud} cannot stop without charge (local disks or persistent memory): a stop would keep it billed, so ebb does not stop it ({}); set stop.allow_charging_stop: true in the policy to stop it anyway",
                        inst.instance_type,
                        policy_asks()
                    )
                }),
            );
        }
    }
    v
}
