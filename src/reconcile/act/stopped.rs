//! After a stop: what the cloud says of the stopped instance's billing, read back after the
//! call ([`Done::read_back`]), or, when it had not stopped yet, from a later tick's listing
//! (`reconcile/stopping.rs`). A stop that still charges is audited as such ("stopped, still
//! charging", code `stopped_still_charging`), which `ebb report` counts as no saving, and is
//! told to the webhook once per instance; a stop without charge on a cloud that then releases
//! the instance's public IP says so; a stop inside a capacity reservation held outside ebb is
//! audited as saving nothing (code `stopped_in_reservation`).

use super::outcomes::{Answer, Billings};
use super::Reconciler;
use crate::cloud::{ActionReport, Done, Provider, StopReadBack};
use crate::engine::{Action, Code, Decision};
use crate::fleet::{Billing, StoppedMode};
use crate::store::{NewAuditEntry, Outcome};
use std::collections::HashMap;

/// What a notice or a stop's outcome says of the public IP of an instance billed as `billing`.
pub(super) fn public_ip_text(billing: &Billing) -> String {
    if billing.public_ip_from_pool {
        return "the public IP will change; use an Elastic IP to keep one (EC2 gives up an instance's public IPv4 address from Amazon's pool at every stop)".to_string();
    }
    format!(
        "the public IP will change; use an EIP to keep one ({} releases the public IP of an instance stopped without charge)",
        billing.cloud.display_name()
    )
}

/// The code and the note after the reason of the outcome of a stop that `cloud` read back as
/// `mode`, of an instance billed as `billing`: still charging or not said, the code says so;
/// without charge, on a cloud that releases the public IP, the note says it; otherwise none.
pub(in crate::reconcile) fn stopped_note(
    mode: StoppedMode,
    billing: Option<&Billing>,
) -> Option<(Option<Code>, String)> {
    let name = billing.map_or("the cloud", |b| b.cloud.display_name());
    match mode {
        StoppedMode::Charging => Some((
            Some(Code::StoppedStillCharging),
            format!("stopped, still charging: {name} reports the stopped instance billed as if it ran (its family or account cannot stop without charge), so this stop saves nothing"),
        )),
        StoppedMode::Unknown => Some((
            Some(Code::StoppedBillingUnknown),
            format!("stopped, billing unknown: {name} did not say how it bills the stopped instance, so this stop counts no saving"),
        )),
        StoppedMode::NoCharge if billing.is_some_and(Billing::stop_releases_public_ip) => Some((
            None,
            format!(
                "stopped without charge; {}",
                billing.map(public_ip_text).unwrap_or_default()
            ),
        )),
        StoppedMode::NoCharge => None,
    }
}

/// The code and note of a stop of an instance billed as `billing` inside a capacity
/// reservation held outside ebb: it went through, and saves nothing while the reservation is
/// paid.
fn in_reservation_note(billing: Option<&Billing>) -> Option<(Option<Code>, String)> {
    let held = billing?.reservation.as_ref()?;
    Some((
        Some(Code::StoppedInReservation),
        format!(
            "stopped inside {}, held outside ebb and paid whether the box runs or not: this stop frees the capacity for other boxes and saves nothing itself",
            held.describe()
        ),
    ))
}

/// Adds to `outcome` what `note` says (`stopped_note`).
pub(in crate::reconcile) fn add_note(
    outcome: &mut NewAuditEntry,
    note: Option<(Option<Code>, String)>,
) {
    let Some((code, note)) = note else {
        return;
    };
    if let Some(code) = code {
        outcome.code = Some(code.as_str().to_string());
    }
    outcome.reason = format!("{}; {note}", outcome.reason);
}

/// The succeeded stops and hibernations of `answers` (one per decision of `group`), marked by
/// what `cloud` read back of each: stopped, its stopped mode (`stopped_note`); not stopped yet,
/// the outcome waits for a later tick's listing ([`Answer::Stopping`]).
pub(super) fn mark_stopped(
    group: &[&Decision],
    answers: &mut [Answer],
    cloud: &ActionReport,
    billings: &Billings,
) {
    let done: HashMap<&str, &Done> = cloud
        .done
        .iter()
        .map(|d| (d.instance.as_str(), d))
        .collect();
    for (d, answer) in group.iter().zip(answers.iter_mut()) {
        let Answer::Outcome(o) = answer else {
            continue;
        };
        let stopped = matches!(d.action, Action::Stop | Action::Hibernate);
        if !stopped || o.outcome != Outcome::Succeeded {
            continue;
        }
        let billing = billings.get(&d.instance);
        add_note(o, in_reservation_note(billing));
        match done.get(d.instance.as_str()).and_then(|x| x.read_back) {
            Some(StopReadBack::Stopped(mode)) => add_note(o, stopped_note(mode, billing)),
            Some(StopReadBack::Later) => {
                let row = o.clone();
                *answer = Answer::Stopping(row);
            }
            None => {}
        }
    }
}

impl<P: Provider> Reconciler<P> {
    /// Posts to the webhook, once until a stop of it saves again, that a stop went through
    /// but its cloud still bills the instance (`outcome`, the stop's outcome row): its people
    /// believe it saves.
    pub(in crate::reconcile) fn tell_of_charging(&self, outcome: &NewAuditEntry) {
        let stopped = matches!(
            Action::parse(&outcome.action),
            Some(Action::Stop | Action::Hibernate)
        );
        let Some(instance) = outcome.instance.as_deref() else {
            return;
        };
        if !stopped || outcome.outcome != Outcome::Succeeded {
            return;
        }
        let mut told = self
            .memo
            .charging_told
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        if outcome.code.as_deref() != Some(Code::StoppedStillCharging.as_str()) {
            told.remove(instance);
            return;
        }
        let Some(webhook) = &self.options.webhook else {
            return;
        };
        if told.insert(instance.to_string()) {
            webhook.send(format!(
                "ebb stopped {instance} ({}), policy {}, but it is still charging: its cloud bills it while stopped, so the stop saves nothing. Its family or account cannot stop without charge (Alibaba's economical mode, Tencent's stop without charge); exclude it from the policy, or change its type or billing. No further notice until a stop of it saves.",
                outcome.region.as_deref().unwrap_or("-"),
                outcome.policy.as_deref().unwrap_or("-"),
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_ec2_stop_of_a_box_with_an_address_from_amazons_pool_says_it_will_change() {
        let pooled = Billing {
            public_ip_from_pool: true,
            ..Billing::EC2
        };
        let (code, note) = stopped_note(StoppedMode::NoCharge, Some(&pooled)).unwrap();
        assert_eq!(code, None);
        assert!(note.contains("use an Elastic IP to keep one"), "{note}");
        // An Elastic IP, or no public address: nothing to say.
        assert_eq!(
            stopped_note(StoppedMode::NoCharge, Some(&Billing::EC2)),
            None
        );
    }
}
