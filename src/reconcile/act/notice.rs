//! The notice of a coming stop, as the webhook posts it: which instance stops when and why,
//! whom it is for (its `ebb:owner` tag), and how to keep it running: with `EBB_PUBLIC_URL`,
//! snooze links to the console (`crates/ebb-core/src/snooze.rs`), otherwise the command that makes an override.

use super::stopped::public_ip_text;
use super::Reconciler;
use crate::cloud::Provider;
use crate::engine::{self, Action, Decision};
use crate::fleet::Billing;
use crate::names::{ACTOR, OWNER_TAG};
use crate::reconcile::TickContext;
use crate::snooze::{self, Keep, Link};
use crate::webhook::{Button, Message};
use chrono::{DateTime, Duration, SecondsFormat, Utc};

impl<P: Provider> Reconciler<P> {
    /// The notice of `d`'s coming stop, given at the tick's time, with its snooze links; for an
    /// instance billed as `billing` whose stop releases its public IP, it says so.
    pub(in crate::reconcile) async fn notice(
        &self,
        d: &Decision,
        billing: Option<&Billing>,
        tick: &TickContext<'_>,
    ) -> Message {
        let owner = self.owner_of(&d.instance).await;
        let buttons = match &self.options.public_url {
            Some(base) => self.snooze_links(base, d, owner.as_deref(), tick).await,
            None => Vec::new(),
        };
        let mut text = notice_text(d, owner.as_deref(), !buttons.is_empty());
        if let Some(b) = billing.filter(|b| b.stop_releases_public_ip()) {
            text.push_str(&format!(" When it stops, {}.", public_ip_text(b)));
        }
        Message { text, buttons }
    }

    /// The instance's `ebb:owner` tag as last listed, if it has one.
    async fn owner_of(&self, instance: &str) -> Option<String> {
        match self.store.instance(instance).await {
            Ok(record) => record?
                .tags
                .0
                .get(OWNER_TAG)
                .map(|o| o.trim().to_string())
                .filter(|o| !o.is_empty()),
            Err(err) => {
                tracing::warn!(instance, error = %err, "the notice's addressee could not be read");
                None
            }
        }
    }

    /// The snooze links of `d`'s notice under `base`: for 2 hours, until the next opening
    /// (when the policy has work hours) and for a day. None when the key cannot be read: the
    /// notice then says how to keep it by command.
    async fn snooze_links(
        &self,
        base: &url::Url,
        d: &Decision,
        owner: Option<&str>,
        tick: &TickContext<'_>,
    ) -> Vec<Button> {
        let key = match self.store.snooze_key_seed().await {
            Ok(seed) => snooze::Key::from_stored(&seed),
            Err(err) => {
                tracing::error!(error = %err, "the snooze links' key could not be read");
                None
            }
        };
        let Some(key) = key else {
            return Vec::new();
        };
        let stop_at = d.stop_at.unwrap_or(tick.now);
        let opening = d
            .policy
            .as_deref()
            .and_then(|name| tick.set.policies.iter().find(|p| p.name == name))
            .and_then(|p| engine::next_opening(p, stop_at));
        let keeps = [
            Some(Keep::For(Duration::hours(2))),
            opening.map(Keep::Until),
            Some(Keep::For(Duration::days(1))),
        ];
        keeps
            .into_iter()
            .flatten()
            .map(|keep| {
                let link = Link {
                    instance: d.instance.clone(),
                    addressee: addressee(owner),
                    keep,
                    notice_at: tick.now,
                    expires_at: stop_at + snooze::MARGIN,
                };
                Button {
                    label: keep.label(),
                    url: link_url(base, &link.sign(&key)),
                }
            })
            .collect()
    }
}

/// Whom a link's override is made by: the owner, unless it would pass for the control loop.
fn addressee(owner: Option<&str>) -> String {
    match owner {
        Some(o) if o != ACTOR => o.to_string(),
        _ => snooze::NO_ADDRESSEE.to_string(),
    }
}

/// The console's page of link `token` under `base` (which may have a path of its own).
fn link_url(base: &url::Url, token: &str) -> String {
    format!("{}/snooze/{token}", base.as_str().trim_end_matches('/'))
}

/// The notice's text: which instance stops when and why, for whom, and, when it offers no
/// snooze `links`, how to keep it by command.
fn notice_text(d: &Decision, owner: Option<&str>, links: bool) -> String {
    let when = d
        .stop_at
        .map_or_else(|| "soon".to_string(), |t| format!("at {}", stamp(t)));
    let verb = match d.action {
        Action::Reclaim => "image and then terminate",
        _ => "stop",
    };
    let mut text = format!(
        "ebb will {verb} {} ({}) {when}, policy {}: {}.",
        d.instance,
        d.region,
        d.policy.as_deref().unwrap_or("-"),
        d.reason,
    );
    if let Some(owner) = owner {
        text.push_str(&format!(" For {owner}."));
    }
    if !links {
        text.push_str(&format!(
            " To keep it running: ebb override {} --until 4h --reason '...', or tag it ebb:keep-until.",
            d.instance
        ));
    }
    text
}

fn stamp(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Secs, true)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::Code;

    fn decision() -> Decision {
        Decision {
            instance: "i-0a".into(),
            region: "us-east-1".into(),
            action: Action::Notify,
            policy: Some("office".into()),
            code: Code::OutsideHours,
            reason: "outside work hours".into(),
            dry_run: false,
            stop_at: Some("2026-11-30T19:00:00Z".parse().unwrap()),
        }
    }

    #[test]
    fn a_notice_names_its_addressee_and_says_how_to_keep_it_without_links() {
        let plain = notice_text(&decision(), None, false);
        assert!(plain.contains("ebb override i-0a --until 4h"), "{plain}");
        assert!(!plain.contains(" For "), "{plain}");
        let linked = notice_text(&decision(), Some("mei@example.com"), true);
        assert!(linked.ends_with("For mei@example.com."), "{linked}");
        assert!(!linked.contains("ebb override"), "{linked}");
        let reclaim = Decision {
            action: Action::Reclaim,
            ..decision()
        };
        let text = notice_text(&reclaim, None, true);
        assert!(
            text.starts_with("ebb will image and then terminate i-0a"),
            "{text}"
        );
    }

    #[test]
    fn links_live_under_the_public_urls_path_and_never_pass_for_the_scheduler() {
        let base: url::Url = "https://example.com/ebb/".parse().unwrap();
        assert_eq!(link_url(&base, "t.s"), "https://example.com/ebb/snooze/t.s");
        let base: url::Url = "https://ebb.example.com".parse().unwrap();
        assert_eq!(link_url(&base, "t.s"), "https://ebb.example.com/snooze/t.s");
        assert_eq!(addressee(Some("mei")), "mei");
        assert_eq!(addressee(Some(ACTOR)), snooze::NO_ADDRESSEE);
        assert_eq!(addressee(None), snooze::NO_ADDRESSEE);
    }
}
