//! A fault-injecting [`Provider`] wrapper: it numbers every call, fails the `k`th with an error
//! class of a test's choosing (or lets it through and loses its reply, or hangs after it as if
//! the process died), runs a test's hook right before a call, and records what each call that
//! changes the cloud did to what, with the facts a safety check needs at that moment.

use chrono::{DateTime, Utc};
use ebb::cloud::{
    ActionReport, Artifact, CloudError, ErrorKind, Failed, Image, ImageMade, InstanceStatus,
    Inventory, Launch, LaunchSpec, Provider, ScopeFailure, StopKind, TypePrice,
};
use ebb::fleet::{Instance, InstanceState, Sample};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::future::Future;
use std::pin::Pin;
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

    fn error(self, operation: &'static str) -> CloudError {
        let (kind, code, message) = match self {
            Class::Throttle => (
                ErrorKind::Throttled,
                "RequestLimitExceeded",
                "Request limit exceeded.",
            ),
            Class::AccessDenied => (
                ErrorKind::AccessDenied,
                "UnauthorizedOperation",
                "You are not authorized to perform this operation.",
            ),
            Class::NotFound => (
                ErrorKind::NotFound,
                "InvalidID.NotFound",
                "The ID does not exist",
            ),
            Class::Capacity => (
                ErrorKind::InsufficientCapacity,
                "InsufficientInstanceCapacity",
                "There is no capacity available that matches your request.",
            ),
            _ => (
                ErrorKind::Unavailable,
                "RequestTimeout",
                "the reply did not arrive in time",
            ),
        };
        CloudError {
            kind,
            operation,
            code: Some(code.to_string()),
            message: message.to_string(),
            request_id: None,
        }
    }
}

/// A step a test runs right before a call (with [`Class::Hook`]).
pub type Hook = Box<dyn FnOnce() -> Pin<Box<dyn Future<Output = ()> + Send>> + Send>;

/// One call as it reached the wrapper.
#[derive(Debug, Clone)]
pub struct Call {
    /// Its number, from 0.
    pub index: usize,
    /// The provider method.
    pub method: &'static str,
    /// The ids it names (instances, an image, a snapshot).
    pub ids: Vec<String>,
}

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
    calls: Vec<Call>,
    fault: Option<(usize, Class)>,
    hook: Option<Hook>,
    /// Images ebb made (CreateImage through this wrapper): image -> instance.
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
}

/// The wrapper; clones share everything.
pub struct Faulty<P> {
    /// The provider it wraps (the cloud itself, for the test's own look and changes).
    pub inner: Arc<P>,
    state: Arc<Mutex<State>>,
    /// Told when a call hangs for [`Class::Kill`].
    pub killed: Arc<tokio::sync::Notify>,
}

impl<P> Clone for Faulty<P> {
    fn clone(&self) -> Self {
        Faulty {
            inner: self.inner.clone(),
            state: self.state.clone(),
            killed: self.killed.clone(),
        }
    }
}

impl<P: Provider> Faulty<P> {
    /// A wrapper of `inner` that lets every call through.
    pub fn new(inner: Arc<P>) -> Self {
        Faulty {
            inner,
            state: Arc::default(),
            killed: Arc::default(),
        }
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

    /// Every call so far.
    pub fn calls(&self) -> Vec<Call> {
        self.st().calls.clone()
    }

    /// `id` is an original of a migration: its termination is checked.
    pub fn original(&self, id: &str) {
        self.st().originals.insert(id.to_string(), None);
    }

    /// A protection of original `id` was made right before the call now under way: it holds
    /// from the next call on (the call under way had its checks already).
    pub fn protected(&self, id: &str) {
        let mut st = self.st();
        let next = st.calls.len();
        st.originals.insert(id.to_string(), Some(next));
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

    /// Numbers the call; what is to be done to it.
    async fn begin(&self, method: &'static str, ids: &[String]) -> Option<Class> {
        let (class, hook) = {
            let mut st = self.st();
            let index = st.calls.len();
            st.calls.push(Call {
                index,
                method,
                ids: ids.to_vec(),
            });
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
            if !touched.is_empty() && is_change(method) {
                let v = format!("call {index} {method} acted on forged {touched:?}");
                st.violations.push(v);
            }
            (class, hook)
        };
        if let Some(hook) = hook {
            hook().await;
        }
        class
    }

    /// After the cloud carried the call out: hangs for [`Class::Kill`].
    async fn after(&self, class: Option<Class>) {
        if class == Some(Class::Kill) {
            self.killed.notify_one();
            std::future::pending::<()>().await;
        }
    }

    async fn running(&self, id: &str, region: &str) -> bool {
        let found = self.inner.describe(region, &[id.to_string()]).await;
        found.is_ok_and(|f| {
            f.iter()
                .any(|s| s.id == id && s.state == InstanceState::Running)
        })
    }

    async fn alive(&self, id: &str, region: &str) -> bool {
        let found = self.inner.describe(region, &[id.to_string()]).await;
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

    /// Checks a termination before it is carried out.
    async fn witness_terminate(&self, region: &str, ids: &[String]) {
        for id in ids {
            let protection = {
                let st = self.st();
                st.originals.get(id).copied()
            };
            let Some(protected_from) = protection else {
                continue;
            };
            let index = self.st().calls.len() - 1;
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

fn is_change(method: &str) -> bool {
    matches!(
        method,
        "stop"
            | "start"
            | "set_type"
            | "tag"
            | "untag"
            | "create_image"
            | "launch"
            | "terminate"
            | "deregister_image"
            | "delete_snapshot"
    )
}

/// The call's every instance refused with `e`.
fn refused(ids: &[String], e: CloudError) -> ActionReport {
    ActionReport {
        done: Vec::new(),
        failed: ids
            .iter()
            .map(|id| Failed {
                instance: id.clone(),
                error: e.clone(),
            })
            .collect(),
    }
}

/// Runs a call that answers an [`ActionReport`] under the fault `class`.
macro_rules! report_call {
    ($self:ident, $method:literal, $op:literal, $ids:expr, $call:expr) => {{
        let class = $self.begin($method, $ids).await;
        match class {
            Some(
                c @ (Class::Throttle | Class::AccessDenied | Class::NotFound | Class::Capacity),
            ) => {
                return refused($ids, c.error($op));
            }
            _ => {}
        }
        let report = $call.await;
        $self.after(class).await;
        if class == Some(Class::Lost) {
            return refused($ids, Class::Lost.error($op));
        }
        report
    }};
}

/// Runs a call that answers a `Result` under the fault `class`.
macro_rules! result_call {
    ($self:ident, $method:literal, $op:literal, $ids:expr, $call:expr) => {{
        let class = $self.begin($method, $ids).await;
        match class {
            Some(
                c @ (Class::Throttle | Class::AccessDenied | Class::NotFound | Class::Capacity),
            ) => {
                return Err(c.error($op));
            }
            _ => {}
        }
        let result = $call.await;
        $self.after(class).await;
        if class == Some(Class::Lost) {
            return Err(Class::Lost.error($op));
        }
        result
    }};
}

impl<P: Provider> Provider for Faulty<P> {
    async fn instances(&self) -> Inventory {
        let class = self.begin("instances", &[]).await;
        if let Some(
            c @ (Class::Throttle | Class::AccessDenied | Class::NotFound | Class::Capacity),
        ) = class
        {
            return unlisted(c.error("DescribeInstances"));
        }
        let inventory = self.inner.instances().await;
        self.after(class).await;
        if class == Some(Class::Lost) {
            return unlisted(Class::Lost.error("DescribeInstances"));
        }
        inventory
    }

    async fn reread(&self, region: &str, ids: &[String]) -> Result<Vec<Instance>, CloudError> {
        result_call!(
            self,
            "reread",
            "DescribeInstances",
            ids,
            self.inner.reread(region, ids)
        )
    }

    async fn gpu_utilisation(
        &self,
        region: &str,
        instances: &[String],
        from: DateTime<Utc>,
        to: DateTime<Utc>,
    ) -> Result<HashMap<String, Vec<Sample>>, CloudError> {
        result_call!(
            self,
            "gpu_utilisation",
            "GetMetricData",
            instances,
            self.inner.gpu_utilisation(region, instances, from, to)
        )
    }

    async fn prices(
        &self,
        region: &str,
        types: &[String],
        now: DateTime<Utc>,
    ) -> Result<Vec<TypePrice>, CloudError> {
        result_call!(
            self,
            "prices",
            "DescribeSpotPriceHistory",
            &[],
            self.inner.prices(region, types, now)
        )
    }

    async fn stop(&self, region: &str, ids: &[String], kind: StopKind) -> ActionReport {
        report_call!(
            self,
            "stop",
            "StopInstances",
            ids,
            self.inner.stop(region, ids, kind)
        )
    }

    async fn start(&self, region: &str, ids: &[String]) -> ActionReport {
        report_call!(
            self,
            "start",
            "StartInstances",
            ids,
            self.inner.start(region, ids)
        )
    }

    async fn set_type(&self, region: &str, id: &str, instance_type: &str) -> ActionReport {
        let ids = [id.to_string()];
        report_call!(
            self,
            "set_type",
            "ModifyInstanceAttribute",
            &ids,
            self.inner.set_type(region, id, instance_type)
        )
    }

    async fn tag(
        &self,
        region: &str,
        ids: &[String],
        tags: &BTreeMap<String, String>,
    ) -> ActionReport {
        report_call!(
            self,
            "tag",
            "CreateTags",
            ids,
            self.inner.tag(region, ids, tags)
        )
    }

    async fn untag(&self, region: &str, ids: &[String], keys: &[String]) -> ActionReport {
        report_call!(
            self,
            "untag",
            "DeleteTags",
            ids,
            self.inner.untag(region, ids, keys)
        )
    }

    async fn launch_spec(&self, region: &str, id: &str) -> Result<LaunchSpec, CloudError> {
        let ids = [id.to_string()];
        result_call!(
            self,
            "launch_spec",
            "DescribeInstances",
            &ids,
            self.inner.launch_spec(region, id)
        )
    }

    async fn describe(
        &self,
        region: &str,
        ids: &[String],
    ) -> Result<Vec<InstanceStatus>, CloudError> {
        result_call!(
            self,
            "describe",
            "DescribeInstances",
            ids,
            self.inner.describe(region, ids)
        )
    }

    async fn find_tagged(
        &self,
        region: &str,
        key: &str,
        value: &str,
    ) -> Result<Option<InstanceStatus>, CloudError> {
        let ids = [format!("{key}={value}")];
        result_call!(
            self,
            "find_tagged",
            "DescribeInstances",
            &ids,
            self.inner.find_tagged(region, key, value)
        )
    }

    async fn create_image(
        &self,
        region: &str,
        id: &str,
        name: &str,
        tags: &BTreeMap<String, String>,
    ) -> Result<ImageMade, CloudError> {
        let ids = [id.to_string()];
        let made = result_call!(self, "create_image", "CreateImage", &ids, async {
            let made = self.inner.create_image(region, id, name, tags).await;
            if let Ok(ImageMade::Made(image)) = &made {
                self.st().images.insert(image.clone(), id.to_string());
            }
            made
        });
        made
    }

    async fn image(&self, region: &str, image: &str) -> Result<Option<Image>, CloudError> {
        let ids = [image.to_string()];
        let found = result_call!(self, "image", "DescribeImages", &ids, async {
            let found = self.inner.image(region, image).await;
            if let Ok(Some(i)) = &found {
                let mut st = self.st();
                if st.images.contains_key(image) {
                    for s in &i.snapshots {
                        st.snapshot_of.insert(s.clone(), image.to_string());
                    }
                }
            }
            found
        });
        found
    }

    async fn launch(&self, region: &str, launch: &Launch) -> Result<InstanceStatus, CloudError> {
        let ids = [launch.image.clone()];
        let index = self.st().calls.len();
        let launched = result_call!(self, "launch", "RunInstances", &ids, async {
            let bad = {
                let st = self.st();
                !st.images.contains_key(&launch.image) || st.forged.contains(&launch.image)
            };
            if bad {
                let v = format!(
                    "call {index} launched from {}, an image ebb did not make",
                    launch.image
                );
                self.st().violations.push(v);
            }
            let made = self.inner.launch(region, launch).await;
            if let Ok(s) = &made {
                let of = launch
                    .tags
                    .get(ebb::names::MIGRATED_FROM_TAG)
                    .cloned()
                    .unwrap_or_default();
                self.st()
                    .launched
                    .insert(s.id.clone(), (of, launch.image.clone()));
            }
            made
        });
        launched
    }

    async fn terminate(&self, region: &str, ids: &[String]) -> ActionReport {
        report_call!(self, "terminate", "TerminateInstances", ids, async {
            self.witness_terminate(region, ids).await;
            self.inner.terminate(region, ids).await
        })
    }

    async fn deregister_image(&self, region: &str, image: &str) -> Result<(), CloudError> {
        let ids = [image.to_string()];
        result_call!(self, "deregister_image", "DeregisterImage", &ids, async {
            self.witness_delete(region, image, Some(image.to_string()))
                .await;
            self.inner.deregister_image(region, image).await
        })
    }

    async fn delete_snapshot(&self, region: &str, snapshot: &str) -> Result<(), CloudError> {
        let ids = [snapshot.to_string()];
        result_call!(self, "delete_snapshot", "DeleteSnapshot", &ids, async {
            self.witness_delete(region, snapshot, None).await;
            self.inner.delete_snapshot(region, snapshot).await
        })
    }

    async fn migration_artifacts(&self, region: &str) -> Result<Vec<Artifact>, CloudError> {
        result_call!(
            self,
            "migration_artifacts",
            "DescribeInstances",
            &[],
            self.inner.migration_artifacts(region)
        )
    }
}

/// A listing whose every region failed with `e`.
fn unlisted(e: CloudError) -> Inventory {
    Inventory {
        instances: Vec::new(),
        complete_regions: Vec::new(),
        failures: vec![ScopeFailure {
            region: "*".to_string(),
            account: None,
            error: e,
        }],
    }
}
