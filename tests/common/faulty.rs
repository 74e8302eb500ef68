//! Fault injection and a safety witness for spot migrations, as hooks on the [`Intercept`]
//! layer: it fails the `k`th call with an error class of a test's choosing (or lets it through
//! and loses its reply, or hangs after it as if the process died), runs a test's hook right
//! before a call, and records what each call that changes the cloud did to what, with the facts
//! a safety check needs at that moment.

use super::intercept::{Answer, Call, Intercept, Method, Pending};
use chrono::{DateTime, Utc};
use ebb::cloud::{CloudError, ImageMade, Provider, SpotMoves};
use ebb::fleet::InstanceState;
use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

/// What is done to the call a fault is set for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Class {
    /// Refused: the API throttles (after every retry).
    Throttle,
    /// Refused: the credentials may not make it.
    AccessDenied,
    /// Refused: EC2 does not know the resource.
    NotFound,
    /// Refused: no capacity.
    Capacity,
    /// Carried out by the cloud, but the reply is lost: the caller sees a timeout.
    Lost,
    /// Carried out by the cloud; then the process dies before it sees the reply.
    Kill,
    /// Runs the test's hook (a protection, a forged artifact) right before the call, which then
    /// goes through.
    Hook,
}

impl Class {
    /// Every class.
    pub const ALL: [Class; 7] = [
        Class::Throttle,
        Class::AccessDenied,
        Class::NotFound,
        Class::Capacity,
        Class::Lost,
        Class::Kill,
        Class::Hook,
    ];

    /// The error the call is refused with (for [`Class::Lost`], the caller's timeout).
    fn error(self, operation: &'static str) -> CloudError {
        match self {
            Class::Throttle => CloudError::throttled(operation),
            Class::AccessDenied => CloudError::denied(operation),
            Class::NotFound => {
                CloudError::not_found(operation, "InvalidID.NotFound", "The ID does not exist")
            }
            Class::Capacity => CloudError::no_capacity(operation),
            _ => CloudError::timed_out(operation),
        }
    }

    /// Whether the call is refused before it reaches the cloud.
    fn refuses(self) -> bool {
        matches!(
            self,
            Class::Throttle | Class::AccessDenied | Class::NotFound | Class::Capacity
        )
    }
}

/// A step a test runs right before a call (with [`Class::Hook`]).
pub type Hook = Box<dyn FnOnce() -> Pending<()> + Send>;

/// A deletion of an image or snapshot, with what else held the workload's disks then.
#[derive(Debug, Clone)]
pub struct Deletion {
    /// The image or snapshot.
    pub id: String,
    /// The instance the image was made of.
    pub original: Option<String>,
    /// The original existed (not terminated).
    pub original_alive: bool,
    /// A replacement ebb launched from the image ran.
    pub replacement_running: bool,
    /// The test's time.
    pub at: DateTime<Utc>,
}

#[derive(Default)]
struct State {
    /// Calls numbered so far.
    calls: usize,
    fault: Option<(usize, Class)>,
    hook: Option<Hook>,
    /// The call the fault fired at, when it goes through: its method and ids.
    fired: Option<(Method, Vec<String>, Class)>,
    /// Images ebb made (CreateImage through this layer): image -> instance.
    images: HashMap<String, String>,
    /// Snapshots of ebb's images, as their reads told: snapshot -> image.
    snapshot_of: HashMap<String, String>,
    /// Instances ebb launched: id -> (migrated-from, image).
    launched: HashMap<String, (String, String)>,
    /// Originals, and from which call on a protection holds each.
    originals: HashMap<String, Option<usize>>,
    forged: HashSet<String>,
    deletions: Vec<Deletion>,
    violations: Vec<String>,
    now: Option<DateTime<Utc>>,
    /// Whether a termination of a running replacement is checked to leave another copy of
    /// the workload running ([`Faults::watch_copies`]).
    copies: bool,
}

/// The faults and the witness's record, on one layer; clones share them.
pub struct Faults<P> {
    /// The cloud behind the layer, for the witness's own looks.
    cloud: Arc<P>,
    state: Arc<Mutex<State>>,
    /// Told when a call hangs for [`Class::Kill`].
    pub killed: Arc<tokio::sync::Notify>,
}

impl<P> Clone for Faults<P> {
    fn clone(&self) -> Self {
        Faults {
            cloud: self.cloud.clone(),
            state: self.state.clone(),
            killed: self.killed.clone(),
        }
    }
}

impl<P: Provider + SpotMoves + 'static> Faults<P> {
    /// The faults and the witness on `layer`, which no call has gone through yet (calls are
    /// numbered as its log numbers them). Every call goes through until a fault is set.
    pub fn on(layer: &Intercept<P>) -> Self {
        let faults = Faults {
            cloud: layer.inner.clone(),
            state: Arc::default(),
            killed: Arc::default(),
        };
        let f = faults.clone();
        layer.after(Method::ALL, move |call, answer| {
            f.witness_after(call, answer)
        });
        let f = faults.clone();
        layer.after_async(Method::ALL, move |call, answer| {
            let f = f.clone();
            async move {
                if f.spend(&call, Class::Kill) {
                    f.killed.notify_one();
                    std::future::pending::<()>().await;
                }
                answer
            }
        });
        let f = faults.clone();
        layer.before_async(Method::ALL, move |call| {
            let f = f.clone();
            async move { f.before(call).await }
        });
        faults
    }

    fn st(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Sets the one fault: call number `at` meets `class`.
    pub fn set_fault(&self, at: usize, class: Class) {
        self.st().fault = Some((at, class));
    }

    /// Clears the fault, if it has not fired.
    pub fn clear_fault(&self) {
        self.st().fault = None;
    }

    /// The hook [`Class::Hook`] runs.
    pub fn set_hook(&self, hook: Hook) {
        self.st().hook = Some(hook);
    }

    /// The test's time, for the deletions it records.
    pub fn set_now(&self, now: DateTime<Utc>) {
        self.st().now = Some(now);
    }

    /// `id` is an original of a migration: its termination is checked.
    pub fn original(&self, id: &str) {
        self.st().originals.insert(id.to_string(), None);
    }

    /// A protection of original `id` was made right before the call now under way: it holds
    /// from the next call on (the call under way had its checks already).
    pub fn protected(&self, id: &str) {
        let mut st = self.st();
        let next = st.calls;
        st.originals.insert(id.to_string(), Some(next));
    }

    /// From now on, a termination of a running replacement ebb launched must leave another
    /// copy of its workload (the original, or another replacement of it) running: a
    /// replacement is replaced only once its successor runs.
    pub fn watch_copies(&self) {
        self.st().copies = true;
    }

    /// `id` was made by someone else: ebb must never act on it or launch from it.
    pub fn forged(&self, id: &str) {
        self.st().forged.insert(id.to_string());
    }

    /// The images ebb made, and the instance each is of.
    pub fn images(&self) -> HashMap<String, String> {
        self.st().images.clone()
    }

    /// The instances ebb launched.
    pub fn launched(&self) -> HashMap<String, (String, String)> {
        self.st().launched.clone()
    }

    /// The image and snapshot deletions.
    pub fn deletions(&self) -> Vec<Deletion> {
        self.st().deletions.clone()
    }

    /// What ebb did that it must never do.
    pub fn violations(&self) -> Vec<String> {
        self.st().violations.clone()
    }

    /// Numbers the call and meets its fault: refused, or checked by the witness and let
    /// through.
    async fn before(&self, call: Call) -> Option<Answer> {
        let method = call.method();
        let ids = call.ids();
        let (index, class, hook) = {
            let mut st = self.st();
            let index = st.calls;
            st.calls += 1;
            let class = match st.fault {
                Some((at, class)) if at == index => {
                    st.fault = None;
                    Some(class)
                }
                _ => None,
            };
            let hook = if class == Some(Class::Hook) {
                st.hook.take()
            } else {
                None
            };
            let touched: Vec<&String> = ids.iter().filter(|i| st.forged.contains(*i)).collect();
            if !touched.is_empty() && method.changes() {
                let v = format!("call {index} {method} acted on forged {touched:?}");
                st.violations.push(v);
            }
            if let Some(c @ (Class::Lost | Class::Kill)) = class {
                st.fired = Some((method, ids.clone(), c));
            }
            (index, class, hook)
        };
        if let Some(hook) = hook {
            hook().await;
        }
        if let Some(c) = class.filter(|c| c.refuses()) {
            return Some(call.fail(c.error(method.operation())));
        }
        match &call {
            Call::Terminate { region, ids } => self.witness_terminate(index, region, ids).await,
            Call::DeregisterImage { region, image } => {
                self.witness_delete(region, image, Some(image.clone()))
                    .await;
            }
            Call::DeleteSnapshot { region, snapshot } => {
                self.witness_delete(region, snapshot, None).await;
            }
            Call::Launch { launch, .. } => {
                let mut st = self.st();
                if !st.images.contains_key(&launch.image) || st.forged.contains(&launch.image) {
                    let v = format!(
                        "call {index} launched from {}, an image ebb did not make",
                        launch.image
                    );
                    st.violations.push(v);
                }
            }
            _ => {}
        }
        None
    }

    /// Whether the fault that fired at `call` (which went through) is of `class`; it is spent
    /// then.
    fn spend(&self, call: &Call, class: Class) -> bool {
        let mut st = self.st();
        let hit = st
            .fired
            .as_ref()
            .is_some_and(|(m, ids, c)| *m == call.method() && *ids == call.ids() && *c == class);
        if hit {
            st.fired = None;
        }
        hit
    }

    /// Records what a call that went through made, and loses the reply of a [`Class::Lost`].
    fn witness_after(&self, call: &Call, answer: &mut Answer) {
        {
            let mut st = self.st();
            match (call, &*answer) {
                (Call::CreateImage { id, .. }, Answer::Made(Ok(ImageMade::Made(image)))) => {
                    st.images.insert(image.clone(), id.clone());
                }
                (Call::Image { image, .. }, Answer::Image(Ok(Some(i))))
                    if st.images.contains_key(image) =>
                {
                    for s in &i.snapshots {
                        st.snapshot_of.insert(s.clone(), image.clone());
                    }
                }
                (Call::Launch { launch, .. }, Answer::Launched(Ok(s))) => {
                    let of = launch
                        .tags
                        .get(ebb::names::MIGRATED_FROM_TAG)
                        .cloned()
                        .unwrap_or_default();
                    st.launched.insert(s.id.clone(), (of, launch.image.clone()));
                }
                _ => {}
            }
        }
        if self.spend(call, Class::Lost) {
            *answer = call.fail(Class::Lost.error(call.method().operation()));
        }
    }

    async fn running(&self, id: &str, region: &str) -> bool {
        let found = self.cloud.describe(region, &[id.to_string()]).await;
        found.is_ok_and(|f| {
            f.iter()
                .any(|s| s.id == id && s.state == InstanceState::Running)
        })
    }

    async fn alive(&self, id: &str, region: &str) -> bool {
        let found = self.cloud.describe(region, &[id.to_string()]).await;
        found.is_ok_and(|f| {
            f.iter().any(|s| {
                s.id == id
                    && !matches!(
                        s.state,
                        InstanceState::Terminated | InstanceState::ShuttingDown
                    )
            })
        })
    }

    /// Whether a replacement ebb launched for `original` (from `image`, when given) runs.
    async fn replacement_runs(&self, region: &str, original: &str, image: Option<&str>) -> bool {
        let launched = self.launched();
        for (id, (of, from)) in launched {
            if of == original && image.is_none_or(|i| i == from) && self.running(&id, region).await
            {
                return true;
            }
        }
        false
    }

    /// Whether another copy of the workload of `original` than `but` (the original itself, or a
    /// replacement ebb launched for it) runs.
    async fn another_copy(&self, region: &str, original: &str, but: &str) -> bool {
        let launched = self.launched();
        let others = launched
            .iter()
            .filter(|(id, (of, _))| of == original && id.as_str() != but)
            .map(|(id, _)| id.clone())
            .chain((original != but).then(|| original.to_string()));
        for id in others {
            if self.running(&id, region).await {
                return true;
            }
        }
        false
    }

    /// Checks termination call `index` before it is carried out.
    async fn witness_terminate(&self, index: usize, region: &str, ids: &[String]) {
        let (copies, launched) = {
            let st = self.st();
            (st.copies, st.launched.clone())
        };
        for id in ids.iter().filter(|_| copies) {
            let Some((original, _)) = launched.get(id) else {
                continue;
            };
            if self.running(id, region).await && !self.another_copy(region, original, id).await {
                self.st().violations.push(format!(
                    "call {index} terminated running replacement {id} while no other copy of {original} ran"
                ));
            }
        }
        for id in ids {
            let protection = {
                let st = self.st();
                st.originals.get(id).copied()
            };
            let Some(protected_from) = protection else {
                continue;
            };
            if protected_from.is_some_and(|from| from <= index) {
                self.st()
                    .violations
                    .push(format!("call {index} terminated protected original {id}"));
            }
            if !self.replacement_runs(region, id, None).await {
                self.st().violations.push(format!(
                    "call {index} terminated original {id} while no replacement ebb launched ran"
                ));
            }
        }
    }

    /// Records a deletion of `id` (an image, or a snapshot of `image`).
    async fn witness_delete(&self, region: &str, id: &str, image: Option<String>) {
        let (original, now) = {
            let st = self.st();
            let image = image.or_else(|| st.snapshot_of.get(id).cloned());
            let original = image.as_ref().and_then(|i| st.images.get(i).cloned());
            (original.map(|o| (o, image)), st.now)
        };
        let (original_alive, replacement_running, original) = match &original {
            Some((o, image)) => (
                self.alive(o, region).await,
                self.replacement_runs(region, o, image.as_deref()).await,
                Some(o.clone()),
            ),
            None => (false, false, None),
        };
        let mut st = self.st();
        if st.forged.contains(id) {
            st.violations.push(format!("deleted forged {id}"));
        }
        st.deletions.push(Deletion {
            id: id.to_string(),
            original,
            original_alive,
            replacement_running,
            at: now.unwrap_or_default(),
        });
    }
}
