//! The instance page's snooze buttons: for a login that may make overrides, keep the instance
//! running for 2 hours, until the next opening of its work hours, or for a day, in one click
//! each. Each is the override form ([`super::override_forms`]) with its fields filled in, posted
//! to the same route, so the same CSRF check and the API's code path apply.

use super::instance_path;
use super::session::Session;
use crate::engine;
use crate::policy::PolicySet;
use crate::store::InstanceRecord;
use chrono::{DateTime, SecondsFormat, Utc};
use maud::{html, Markup};

/// The buttons for `instance` on a page seen by `session` at `now`; the next opening from its
/// policy in `set`. Nothing for a login that may not make overrides or an instance gone.
pub(super) fn buttons(
    instance: &InstanceRecord,
    session: Option<&Session>,
    set: Option<&PolicySet>,
    now: DateTime<Utc>,
) -> Markup {
    let Some(s) = session.filter(|s| s.may_override() && instance.gone_at.is_none()) else {
        return html! {};
    };
    let opening = set
        .and_then(|set| {
            set.policies
                .iter()
                .find(|p| instance.policy.as_ref() == Some(&p.name))
        })
        .and_then(|p| engine::next_opening(p, now));
    let choices = [
        Some(("2h".to_string(), "for 2 hours")),
        opening.map(|t| {
            let until = t.to_rfc3339_opts(SecondsFormat::Secs, true);
            (until, "until the next opening")
        }),
        Some(("1d".to_string(), "for a day")),
    ];
    let action = format!("{}/overrides", instance_path(&instance.id));
    html! {
        div.snooze role="group" aria-label="Keep it running" {
            @for (until, label) in choices.into_iter().flatten() {
                form.inline method="post" action=(action) {
                    input type="hidden" name="csrf" value=(s.csrf);
                    input type="hidden" name="until" value=(until);
                    input type="hidden" name="reason" value=(format!("snoozed from the console, {label}"));
                    button.secondary type="submit" { "Keep it running " (label) }
                }
            }
        }
    }
}
