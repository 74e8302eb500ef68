//! Fallback types: a start EC2 refused for lack of capacity, of an instance whose policy lists
//! `start.fallback_types`, goes on in the same tick with the instance changed to the next of
//! those types, until one has capacity. Each change is an action of its own (`resize`, code
//! `fallback_type`), and so is each start after it: an intent committed on the leader's session
//! before the call, one outcome after it. The type it had is remembered for
//! `start.restore_type` (`restore.rs`).

use super::outcomes::outcome_entries;
use super::{Reconciler, TickContext};
use crate::cloud::{ActionReport, ErrorKind, Provider, Resize};
use crate::engine::{Action, Code, Decision};
use crate::fleet::InstanceState;
use crate::policy::PolicySet;
use crate::store::{NewAuditEntry, Outcome, StoreError};
use std::future::Future;

impl<P: Provider> Reconciler<P> {
    /// For each start of `group` that `cloud` reports refused for lack of capacity and whose
    /// policy lists fallback types: the instance, read again and still stopped, changed to each
    /// of those types in turn (other than its own) and started, until a start succeeds or a
    /// call fails for another reason.
    pub(super) async fn fall_back(
        &self,
        group: &[&Decision],
        cloud: &ActionReport,
        tick: &mut TickContext<'_>,
    ) -> Result<(), StoreError> {
        let Some(resizer) = self.provider.resizer() else {
            // A cloud without resizes has no other type to start an instance as.
            return Ok(());
        };
        if !cloud
            .failed
            .iter()
            .any(|f| f.error.kind == ErrorKind::InsufficientCapacity)
        {
            return Ok(());
        }
        let set = match crate::policies::current(&self.policies).await {
            Ok(loaded) => loaded.set,
            Err(err) => {
                tracing::error!(error = %err, "no fallback types: the policies cannot be read");
                return Ok(());
            }
        };
        let plans = fallback_plans(group, cloud, &set);
        if plans.is_empty() {
            return Ok(());
        }
        let region = group[0].region.as_str();
        let ids: Vec<String> = plans.iter().map(|(d, _)| d.instance.clone()).collect();
        // Its type is changed only while it is stopped, and from the type it has now.
        let fresh = match self.provider.reread(region, &ids).await {
            Ok(fresh) => fresh,
            Err(err) => {
                tracing::warn!(
                    error = %err,
                    "no fallback types: the instances could not be read again"
                );
                return Ok(());
            }
        };
        for (d, types) in plans {
            let Some(instance) = fresh
                .iter()
                .find(|i| i.id == d.instance && i.state == InstanceState::Stopped)
            else {
                continue;
            };
            let mut from = instance.instance_type.clone();
            for to in types.iter().filter(|t| **t != instance.instance_type) {
                let resize = Decision {
                    action: Action::Resize,
                    code: Code::FallbackType,
                    reason: format!(
                        "EC2 has no capacity for {from}: changed to {to} (start.fallback_types) to start it"
                    ),
                    ..d.clone()
                };
                let call = || resizer.set_type(region, &d.instance, to);
                if self.one_call(&resize, tick, call).await? != Some(Ok(())) {
                    break;
                }
                // What `start.restore_type` changes it back from, at a later start.
                self.store
                    .remember_fallback_type(&d.instance, &from, to)
                    .await?;
                let start = Decision {
                    reason: format!("{}; as {to}, after {from} had no capacity", d.reason),
                    ..d.clone()
                };
                let call = || {
                    self.provider
                        .start(region, std::slice::from_ref(&d.instance))
                };
                match self.one_call(&start, tick, call).await? {
                    Some(Err(ErrorKind::InsufficientCapacity)) => from = to.clone(),
                    _ => break,
                }
            }
        }
        Ok(())
    }

    /// One fenced action on `d`'s instance: its intent, the `call`, its outcome. `None` when
    /// no intent could be written; otherwise whether the call succeeded, or the kind of its
    /// error.
    pub(in crate::reconcile) async fn one_call<F, Fut>(
        &self,
        d: &Decision,
        tick: &mut TickContext<'_>,
        call: F,
    ) -> Result<Option<Result<(), ErrorKind>>, StoreError>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = ActionReport>,
    {
        let fenced = tick
            .leader
            .fence(vec![tick.entry(d, Outcome::Intent, false)], tick.now)
            .await?;
        let Some(intent) = fenced.written.first() else {
            return Ok(None);
        };
        let cloud = call().await;
        let answers = outcome_entries(&[d], &cloud, |d, outcome| NewAuditEntry {
            intent_seq: Some(intent.seq),
            ..tick.entry(d, outcome, false)
        });
        // A lost answer ends the fallback too: what the call did is known only later.
        let result = match answers[0].outcome() {
            Some(Outcome::Succeeded) => Ok(()),
            _ => Err(cloud
                .failed
                .first()
                .map_or(ErrorKind::Other, |f| f.error.kind)),
        };
        self.record(&[d], answers, &super::outcomes::Billings::new(), tick)
            .await?;
        Ok(Some(result))
    }
}

/// The decisions of `group` whose start EC2 refused for capacity, each with its policy's
/// fallback types; those without any are left out.
fn fallback_plans<'d>(
    group: &[&'d Decision],
    cloud: &ActionReport,
    set: &PolicySet,
) -> Vec<(&'d Decision, Vec<String>)> {
    group
        .iter()
        .copied()
        .filter(|d| {
            cloud.failed.iter().any(|f| {
                f.instance == d.instance && f.error.kind == ErrorKind::InsufficientCapacity
            })
        })
        .filter_map(|d| {
            let policy = set
                .policies
                .iter()
                .find(|p| d.policy.as_ref() == Some(&p.name))?;
            let types = policy.start.as_ref()?.fallback_types.clone();
            (!types.is_empty()).then_some((d, types))
        })
        .collect()
}
