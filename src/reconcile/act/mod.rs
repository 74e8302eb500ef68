//! The act phase. What to act on this tick is chosen first (held back after recent failures,
//! capped, paced); then dry runs are only audited, and real actions go intent (committed on the
//! leader's session) → cloud call → outcome → ebb's memory of what it did.
//!
//! Here, the order of it; by concern: `choose.rs` what is acted on this tick, `dry_run.rs` the
//! dry runs' audit rows, `calls.rs` the cloud call each action makes and how calls are grouped,
//! `outcomes.rs` what a call did, written with what ebb remembers of it, and the notices it
//! posts, `stopped.rs` what the cloud says of a stopped instance's billing, `fallback.rs` a
//! start refused for lack of capacity, tried again on other types, `restore.rs` an instance
//! moved to another type that way changed back before a later start, `reserve.rs` a capacity
//! reservation made for a start that EC2 refused before.

use super::{ActionOutcome, Reconciler, TickContext};
use crate::cloud::Provider;
use crate::engine::{self, Decision};
use crate::fleet::Instance;
use crate::names::ACTOR;
use crate::store::{NewAuditEntry, Outcome, OverrideRecord, StoreError};
use calls::{groups, CloudCall};
use chrono::SecondsFormat;
use outcomes::{outcome_entries, Billings};
pub(super) use reserve::as_report;
use std::collections::HashMap;
use stopped::mark_stopped;
pub(super) use stopped::{add_note, stopped_note};
use tracing::Instrument as _;

mod calls;
mod choose;
mod dry_run;
mod fallback;
mod notice;
mod outcomes;
mod reserve;
mod restore;
mod stopped;

impl TickContext<'_> {
    /// The audit row of `d` with `outcome`, at the tick's time and policy version.
    fn entry(&self, d: &Decision, outcome: Outcome, dry_run: bool) -> NewAuditEntry {
        NewAuditEntry {
            at: self.now,
            actor: ACTOR.to_string(),
            instance: Some(d.instance.clone()),
            region: Some(d.region.clone()),
            action: d.action.as_str().to_string(),
            outcome,
            policy: d.policy.clone(),
            policy_version: Some(self.version.to_string()),
            code: Some(d.code.as_str().to_string()),
            reason: d.reason.clone(),
            dry_run,
            request_id: None,
            error: None,
            intent_seq: None,
        }
    }

    /// Reports `d` as skipped right before its call, with why: nothing was called, and no
    /// intent was written for it.
    fn not_done(&mut self, d: &Decision, why: String) {
        let done = ActionOutcome {
            decision: d.clone(),
            outcome: Outcome::Skipped,
            detail: format!("not done: {why}"),
        };
        done.log(self.now, false);
        self.report.actions.push(done);
    }
}

impl<P: Provider> Reconciler<P> {
    /// Carries out the decisions that change something, dry runs apart from real actions;
    /// reports them in the tick's report.
    pub(super) async fn act(
        &self,
        decisions: Vec<Decision>,
        tick: &mut TickContext<'_>,
    ) -> Result<(), StoreError> {
        let to_act = self.this_tick(decisions, tick.now, tick.report).await?;
        let (dry, real): (Vec<Decision>, Vec<Decision>) =
            to_act.into_iter().partition(|d| self.is_dry_run(d));
        if !dry.is_empty() {
            self.audit_dry_runs(dry, tick).await?;
        }
        if !real.is_empty() {
            self.act_for_real(real, tick).await?;
        }
        Ok(())
    }

    /// Whether `d` is only audited: its policy or the whole reconciler runs dry.
    fn is_dry_run(&self, d: &Decision) -> bool {
        d.dry_run || self.options.dry_run
    }

    /// Real actions, one cloud call per group, each fenced: its intents committed on the
    /// leader's session right before the call, then its outcomes.
    async fn act_for_real(
        &self,
        real: Vec<Decision>,
        tick: &mut TickContext<'_>,
    ) -> Result<(), StoreError> {
        for (call, group) in groups(&real) {
            let span = tracing::info_span!(
                "action",
                action = group[0].action.as_str(),
                region = group[0].region.as_str(),
                instances = group.len(),
            );
            self.act_on_group(call, group, tick)
                .instrument(span)
                .await?;
        }
        Ok(())
    }

    /// One cloud `call` for `group` (one action in one region): the instances it would stop
    /// read again, then its intents, less the instances a tag or an override made since the
    /// decision protects; then the call; then its outcomes with what ebb remembers of it, and
    /// its notices.
    async fn act_on_group(
        &self,
        call: CloudCall,
        group: Vec<&Decision>,
        tick: &mut TickContext<'_>,
    ) -> Result<(), StoreError> {
        let restored = match call {
            CloudCall::Start => self.restore_types(&group, tick).await?,
            _ => Default::default(),
        };
        let group = match call {
            CloudCall::Start => {
                let waiting = self.reserve_for(&group, tick).await?;
                let (wait, go): (Vec<&Decision>, Vec<&Decision>) = group
                    .into_iter()
                    .partition(|d| waiting.contains(&d.instance));
                for d in wait {
                    let why = "its capacity reservation (start.reserve_capacity) is not ready: \
                               a step's answer is not in, or the instance changed since the \
                               listing; it starts at a later tick";
                    tick.not_done(d, why.to_string());
                }
                go
            }
            _ => group,
        };
        let (group, billings) = self.still_unprotected(call, group, tick).await;
        if group.is_empty() {
            return Ok(());
        }
        let intents = group
            .iter()
            .map(|d| tick.entry(d, Outcome::Intent, false))
            .collect();
        let fenced = tick.leader.fence(intents, tick.now).await?;
        let protected_by: HashMap<&str, &OverrideRecord> = fenced
            .protected
            .iter()
            .filter_map(|(e, by)| Some((e.instance.as_deref()?, by)))
            .collect();
        let (group, protected): (Vec<&Decision>, Vec<&Decision>) = group
            .into_iter()
            .partition(|d| !protected_by.contains_key(d.instance.as_str()));
        for d in protected {
            let by = protected_by[d.instance.as_str()];
            let detail = format!(
                "since the decision, an override by {} until {} protects it: {}",
                by.created_by,
                by.until.to_rfc3339_opts(SecondsFormat::Secs, true),
                by.reason
            );
            tick.not_done(d, detail);
        }
        if group.is_empty() {
            return Ok(());
        }
        let seq_of: HashMap<&str, i64> = fenced
            .written
            .iter()
            .filter_map(|i| Some((i.entry.instance.as_deref()?, i.seq)))
            .collect();
        let cloud = self.call(call, &group, tick.now).await;
        let mut answers = outcome_entries(&group, &cloud, |d, outcome| NewAuditEntry {
            intent_seq: seq_of.get(d.instance.as_str()).copied(),
            ..tick.entry(d, outcome, false)
        });
        mark_stopped(&group, &mut answers, &cloud, &billings);
        self.record(&group, answers, &billings, tick).await?;
        if call == CloudCall::Start {
            self.settle_restored(&restored, &cloud).await?;
            self.fall_back(&group, &cloud, tick).await?;
        }
        Ok(())
    }

    /// The decisions of `group` whose instances may still be acted on by `call`, with how the
    /// cloud bills them. For a stop (or its notice), the instances are read again from the
    /// cloud first, and those whose tags now forbid it (`ebb:keep-until`, `ebb:skip`), or that
    /// are no longer listed, are left out; a read that fails leaves the whole group out, since
    /// unknown means no stop.
    async fn still_unprotected<'d>(
        &self,
        call: CloudCall,
        group: Vec<&'d Decision>,
        tick: &mut TickContext<'_>,
    ) -> (Vec<&'d Decision>, Billings) {
        if !call.stops() {
            return (group, Billings::new());
        }
        let region = group[0].region.as_str();
        let ids: Vec<String> = group.iter().map(|d| d.instance.clone()).collect();
        let fresh = match self.provider.reread(region, &ids).await {
            Ok(fresh) => fresh,
            Err(err) => {
                for d in group {
                    let detail = format!(
                        "could not read it again right before the call ({err}); unknown means no stop"
                    );
                    tick.not_done(d, detail);
                }
                return (Vec::new(), Billings::new());
            }
        };
        let billings = fresh
            .iter()
            .map(|i| (i.id.clone(), i.billing.clone()))
            .collect();
        let fresh: HashMap<&str, &Instance> = fresh.iter().map(|i| (i.id.as_str(), i)).collect();
        let mut still = Vec::with_capacity(group.len());
        for d in group {
            match fresh.get(d.instance.as_str()) {
                None => tick.not_done(
                    d,
                    "no longer listed right before the call (gone, or no longer managed)".into(),
                ),
                Some(i) => match engine::tags_forbid_stop(i, tick.now) {
                    Some(why) => tick.not_done(d, format!("since the listing, {why}")),
                    None => still.push(d),
                },
            }
        }
        (still, billings)
    }
}
