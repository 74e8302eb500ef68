//! The calendars phase: a calendar the policies use that names no date of the current year
//! (or, from 1 November, of the next) is noticed once, however many ticks and replicas see it:
//! an audit row (action `calendar_notice`, which the events task posts as a CloudEvent) and a
//! webhook post, so that the people who keep the calendars hear of it before the holidays are
//! taken as ordinary days. Under `--dry-run` the row is marked a dry run and nothing is posted.

use super::{Reconciler, TickError};
use crate::cloud::Provider;
use crate::names::ACTOR;
use crate::policy::PolicySet;
use crate::store::NewAuditEntry;
use chrono::{DateTime, Utc};

impl<P: Provider> Reconciler<P> {
    /// Notices, once each, the calendars of `set` that may have run out at `now`.
    pub(super) async fn calendar_notices(
        &self,
        set: &PolicySet,
        now: DateTime<Utc>,
        version: &str,
    ) -> Result<(), TickError> {
        for warning in set.calendars_running_out(now.date_naive()) {
            let mut entry = NewAuditEntry::event(now, ACTOR, "calendar_notice", warning.clone());
            entry.code = Some("calendar_running_out".into());
            entry.policy_version = Some(version.to_string());
            entry.dry_run = self.options.dry_run;
            // A dry run's notice is its own: the real one still goes out once it is over.
            let key = match entry.dry_run {
                true => format!("(dry run) {warning}"),
                false => warning.clone(),
            };
            if !self.store.record_calendar_notice(&key, now, &entry).await? {
                continue;
            }
            tracing::warn!(notice = %warning, "a calendar may have run out; noticed");
            if let Some(webhook) = self.options.webhook.as_ref().filter(|_| !entry.dry_run) {
                webhook.send(format!("Calendar: {warning}"));
            }
        }
        Ok(())
    }
}
