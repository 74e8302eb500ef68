//! The instance page's override fragments: the form that makes an override, the button that
//! revokes one, and what the page says after either. The routes they post to are in
//! [`super::overrides`].

use super::login;
use super::session::Session;
use super::{instance_path, time};
use crate::api::Scope;
use crate::store::{InstanceRecord, OverrideRecord, MAX_REASON};
use chrono::{DateTime, Utc};
use maud::{html, Markup};
use serde::Deserialize;

/// The override form's fields; all optional so that a missing CSRF value is refused as such.
#[derive(Debug, Default, Clone, Deserialize)]
pub(super) struct OverrideForm {
    /// An RFC 3339 time or a duration from now.
    #[serde(default)]
    pub until: String,
    /// Why.
    #[serde(default)]
    pub reason: String,
    /// The CSRF token, which the routes check before anything else.
    #[serde(default)]
    pub csrf: String,
}

/// `d` as people say it: "7 days", "12 hours", "90 minutes".
fn for_people(d: chrono::Duration) -> String {
    let minutes = d.num_minutes();
    let (n, unit) = match minutes {
        m if m % 1440 == 0 => (m / 1440, "day"),
        m if m % 60 == 0 => (m / 60, "hour"),
        m => (m, "minute"),
    };
    format!("{n} {unit}{}", if n == 1 { "" } else { "s" })
}

/// The form that makes an override of `instance`, showing what was typed in `form`.
pub(super) fn form(instance: &str, session: &Session, form: &OverrideForm, max: &str) -> Markup {
    html! {
        form.filters.override-form method="post" action=(format!("{}/overrides", instance_path(instance))) {
            input type="hidden" name="csrf" value=(session.csrf);
            div.field {
                label for="until" { "Keep it until" }
                input #until name="until" type="text" required placeholder="4h"
                    value=(form.until) aria-describedby="until-hint";
                span.note #until-hint {
                    "A duration from now (4h, 2d) or a time (2026-12-01T18:00:00Z); at most " (max) "."
                }
            }
            div.field.wide {
                label for="reason" { "Reason" }
                textarea #reason name="reason" required rows="2" maxlength=(MAX_REASON)
                    aria-describedby="reason-hint" { (form.reason) }
                span.note #reason-hint { "Recorded in the audit log; at most " (MAX_REASON) " characters." }
            }
            button type="submit" { "Keep it" }
        }
    }
}

/// The revoke button of override `o` for `session`, when its token may revoke it.
pub(super) fn revoke_button(
    o: &OverrideRecord,
    session: Option<&Session>,
    now: DateTime<Utc>,
) -> Markup {
    let in_force = o.revoked_at.is_none() && o.until > now;
    let Some(s) = session.filter(|s| in_force && s.may_override()) else {
        return html! {};
    };
    if o.created_by != s.caller.name && !s.caller.scopes.allow(Scope::Admin) {
        return html! { span.note { "only its maker or an admin token may revoke it" } };
    }
    html! {
        form.inline method="post" action=(format!("/overrides/{}/revoke", o.id)) {
            input type="hidden" name="csrf" value=(s.csrf);
            input type="hidden" name="instance" value=(o.instance);
            button.secondary type="submit" aria-label=(format!("Revoke override {}", o.id)) { "Revoke" }
        }
    }
}

/// What the page says after a change: the override made or revoked.
pub(super) fn done(
    list: &[OverrideRecord],
    made: Option<i64>,
    revoked: Option<i64>,
) -> Option<Markup> {
    let find = |id: i64| list.iter().find(|o| o.id == id);
    let said = if let Some(o) = made.and_then(find) {
        html! { "Override " (o.id) " made: ebb keeps the instance from being stopped until " (time(o.until)) "." }
    } else {
        let o = revoked.and_then(find)?;
        html! { "Override " (o.id) " revoked." }
    };
    Some(html! { p.done role="status" { (said) } })
}

/// Below the overrides: the form for a login that may make one, or how to get one.
pub(super) fn controls(
    instance: &InstanceRecord,
    session: Option<&Session>,
    typed: &OverrideForm,
    max: chrono::Duration,
) -> Markup {
    let back = instance_path(&instance.id);
    let max = for_people(max);
    html! {
        @match session {
            Some(s) if s.may_override() && instance.gone_at.is_none() => {
                h3 { "Keep it from being stopped" }
                (form(&instance.id, s, typed, &max))
            }
            Some(s) if s.may_override() => {
                p.note { "The cloud no longer lists it, so no override can be made." }
            }
            Some(s) => {
                p.note {
                    "The token " (s.caller.name) " " (login::rights(&s.caller))
                    ": making or revoking overrides needs a token with the override scope."
                }
            }
            None => {
                p.note {
                    a href=(format!("/login{}", super::query_string(&[("next", Some(&back))]))) { "Log in" }
                    " with a token that has the override scope to make or revoke overrides."
                }
            }
        }
        @if let Some(s) = session {
            div.session { "Logged in as " strong { (s.caller.name) } ". " (login::logout_form(s)) }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_longest_override_reads_as_people_say_it() {
        let said = |minutes| for_people(chrono::Duration::minutes(minutes));
        assert_eq!(said(7 * 1440), "7 days");
        assert_eq!(said(1440), "1 day");
        assert_eq!(said(12 * 60), "12 hours");
        assert_eq!(said(90), "90 minutes");
    }
}
