//! The tick's part in reclaims (see [`crate::reclaim`]): every live reclaim advanced by one
//! step, with what keeps its box now; then a reclaim planned, with its notice, for each box
//! stopped long enough under a policy with a `stopped` rule.

use super::{Reconciler, TickContext};
use crate::cloud::Provider;
use crate::engine::{
    governing_policy, reclaim_due, reclaim_hold, Action, Code, Decision, Override, ReclaimHold,
};
use crate::fleet::{Fleet, Instance, InstanceState};
use crate::names::ACTOR;
use crate::reclaim::{self, drive};
use crate::spot::drive::Unanswered;
use crate::store::{NewAuditEntry, StoreError};
use chrono::{Duration, SecondsFormat};
use std::collections::{HashMap, HashSet};
use tracing::Instrument as _;

impl<P: Provider> Reconciler<P> {
    /// Advances every live reclaim by one step (one whose box is `open`, a call of its step
    /// possibly still in flight, waits; one with `unanswered` intents resolves them first),
    /// then plans the reclaims now due or within their notice.
    pub(super) async fn reclaims(
        &self,
        fleet: &Fleet,
        open: &HashSet<String>,
        unanswered: Vec<Unanswered>,
        tick: &mut TickContext<'_>,
    ) -> Result<(), StoreError> {
        let Some(spot) = self.provider.spot_moves() else {
            // A cloud without images and terminations reclaims nothing.
            return Ok(());
        };
        let now = tick.now;
        let live = self.store.live_reclaims().await?;
        let reclaiming_policy = tick.set.policies.iter().any(|p| p.stopped.is_some());
        if live.is_empty() && !reclaiming_policy {
            return Ok(());
        }
        let overrides = self.overrides_in_force(now).await?;
        let listed: HashMap<&str, &Instance> =
            fleet.instances.iter().map(|i| (i.id.as_str(), i)).collect();
        let reclaiming: HashSet<String> = live.iter().map(|r| r.instance.clone()).collect();
        for r in live {
            if open.contains(&r.instance) {
                continue;
            }
            let mine: Vec<Unanswered> = unanswered
                .iter()
                .filter(|u| reclaim::reclaim_of(u) == Some(r.id))
                .cloned()
                .collect();
            let hold = reclaim_hold(
                listed.get(r.instance.as_str()).copied(),
                tick.set,
                &r.policy,
                r.stopped_since,
                overrides.get(&r.instance),
                now,
            );
            let span =
                tracing::info_span!("reclaim", reclaim = r.id, instance = r.instance.as_str());
            let (id, instance) = (r.id, r.instance.clone());
            let keep_image_for = tick
                .set
                .policies
                .iter()
                .find(|p| p.name == r.policy)
                .and_then(|p| p.stopped?.keep_image_for);
            let cx = drive::Context {
                hold: &hold,
                keep_image_for,
            };
            let step = tick.for_migration();
            let done = drive::advance(spot, &self.store, step, r, cx, &mine)
                .instrument(span)
                .await?;
            if !done.detail.is_empty() {
                tracing::info!(reclaim = id, instance, state = done.state.as_str(), detail = %done.detail, "reclaim");
            }
        }
        if !reclaiming_policy {
            return Ok(());
        }
        let stopped = fleet
            .instances
            .iter()
            .filter(|i| i.state == InstanceState::Stopped);
        for inst in stopped {
            if reclaiming.contains(&inst.id) || open.contains(&inst.id) {
                continue;
            }
            self.plan_reclaim(inst, &overrides, tick).await?;
        }
        Ok(())
    }

    /// Plans the reclaim of `inst` if its policy's `stopped` rule makes it due within the
    /// policy's notice, and nothing keeps it then; posts the notice.
    async fn plan_reclaim(
        &self,
        inst: &Instance,
        overrides: &HashMap<String, Override>,
        tick: &mut TickContext<'_>,
    ) -> Result<(), StoreError> {
        let now = tick.now;
        let Some(policy) = governing_policy(tick.set, inst) else {
            return Ok(());
        };
        let (Some(due), Some(since)) = (reclaim_due(policy, inst), inst.state_since) else {
            return Ok(());
        };
        let notice = policy
            .notify
            .as_ref()
            .map_or(Duration::zero(), |n| n.before);
        if now < due - notice {
            return Ok(());
        }
        let due_at = due.max(now + notice);
        // Judged as of when it is due: what keeps it then keeps it from a notice now.
        let hold = reclaim_hold(
            Some(inst),
            tick.set,
            &policy.name,
            since,
            overrides.get(&inst.id),
            due_at,
        );
        if hold != ReclaimHold::Free {
            return Ok(());
        }
        let stamp = |t: chrono::DateTime<chrono::Utc>| t.to_rfc3339_opts(SecondsFormat::Secs, true);
        let reason = format!(
            "stopped since {}: its image will be made with all its volumes and proven, then it is terminated, at {}",
            stamp(since),
            stamp(due_at)
        );
        let audit = NewAuditEntry {
            instance: Some(inst.id.clone()),
            region: Some(inst.region.clone()),
            policy: Some(policy.name.clone()),
            policy_version: Some(tick.version.to_string()),
            code: Some(Code::ReclaimNotice.as_str().to_string()),
            ..NewAuditEntry::event(now, ACTOR, Action::Reclaim.as_str(), String::new())
        };
        let planned = self
            .store
            .plan_reclaim(
                &inst.id,
                &inst.region,
                &policy.name,
                since,
                due_at,
                now - reclaim::QUIET_AFTER_END,
                NewAuditEntry {
                    reason: format!("reclaim planned: {reason}"),
                    ..audit
                },
            )
            .await?;
        let (Some(r), Some(webhook)) = (planned, &self.options.webhook) else {
            return Ok(());
        };
        if notice > Duration::zero() {
            let d = Decision {
                instance: inst.id.clone(),
                region: inst.region.clone(),
                action: Action::Reclaim,
                policy: Some(policy.name.clone()),
                code: Code::ReclaimNotice,
                reason: format!("reclaim {}: {reason}", r.id),
                dry_run: false,
                stop_at: Some(due_at),
            };
            webhook.send_message(self.notice(&d, None, tick).await);
        }
        Ok(())
    }
}
