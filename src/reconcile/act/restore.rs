//! Own types back (`start.restore_type`): before a start, an instance ebb changed to one of its
//! policy's fallback types for lack of capacity is changed back to the type it had, while it is
//! still stopped and still has the type ebb gave it. Its start then goes as any other; if its
//! own type still has no capacity, `fallback.rs` moves it on again, and it is tried again at
//! the next start.

use super::{Reconciler, TickContext};
use crate::cloud::{ActionReport, Provider, Resize};
use crate::engine::{Action, Code, Decision};
use crate::fleet::InstanceState;
use crate::policy::PolicySet;
use crate::store::StoreError;
use std::collections::HashSet;

impl<P: Provider> Reconciler<P> {
    /// Changes the instances of `group` (starts in one region) whose policy sets
    /// `start.restore_type` back to their own types, each change an action of its own; the
    /// ids changed back. A failed read or a failed change leaves an instance as it is: it
    /// starts as the type it has.
    pub(super) async fn restore_types(
        &self,
        group: &[&Decision],
        tick: &mut TickContext<'_>,
    ) -> Result<HashSet<String>, StoreError> {
        let mut restored = HashSet::new();
        let Some(resizer) = self.provider.resizer() else {
            // A cloud without resizes never had a type changed by ebb.
            return Ok(restored);
        };
        let Ok(loaded) = crate::policies::current(&self.policies).await else {
            return Ok(restored);
        };
        let ids: Vec<String> = group
            .iter()
            .filter(|d| restores(&loaded.set, d))
            .map(|d| d.instance.clone())
            .collect();
        if ids.is_empty() {
            return Ok(restored);
        }
        let moved = self.store.fallback_types(&ids).await?;
        if moved.is_empty() {
            return Ok(restored);
        }
        let region = group[0].region.as_str();
        let ids: Vec<String> = moved.keys().cloned().collect();
        // Its type is changed only while it is stopped, and from the type ebb gave it.
        let fresh = match self.provider.reread(region, &ids).await {
            Ok(fresh) => fresh,
            Err(err) => {
                tracing::warn!(
                    error = %err,
                    "no type changed back: the instances could not be read again"
                );
                return Ok(restored);
            }
        };
        for d in group {
            let Some(types) = moved.get(&d.instance) else {
                continue;
            };
            let Some(instance) = fresh
                .iter()
                .find(|i| i.id == d.instance && i.state == InstanceState::Stopped)
            else {
                continue;
            };
            if instance.instance_type != types.fallback {
                // A person changed its type since ebb's fallback: theirs stands.
                self.store.forget_fallback_type(&d.instance).await?;
                continue;
            }
            let resize = Decision {
                action: Action::Resize,
                code: Code::RestoreType,
                reason: format!(
                    "changed back from {} to its own type {} to start it (start.restore_type); \
                     ebb had moved it for lack of capacity",
                    types.fallback, types.own
                ),
                ..(*d).clone()
            };
            let call = || resizer.set_type(region, &d.instance, &types.own);
            if self.one_call(&resize, tick, call).await? == Some(Ok(())) {
                restored.insert(d.instance.clone());
            }
        }
        Ok(restored)
    }

    /// Forgets the own type of each instance of `restored` that `cloud` started: it runs as
    /// its own type again.
    pub(super) async fn settle_restored(
        &self,
        restored: &HashSet<String>,
        cloud: &ActionReport,
    ) -> Result<(), StoreError> {
        for done in cloud.done.iter().filter(|d| restored.contains(&d.instance)) {
            self.store.forget_fallback_type(&done.instance).await?;
        }
        Ok(())
    }
}

/// Whether `d`'s policy changes instances back to their own types.
fn restores(set: &PolicySet, d: &Decision) -> bool {
    set.policies
        .iter()
        .find(|p| d.policy.as_ref() == Some(&p.name))
        .and_then(|p| p.start.as_ref())
        .is_some_and(|s| s.restore_type)
}
