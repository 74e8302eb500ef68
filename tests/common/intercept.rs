//! The one test layer over any [`Provider`]: every call is numbered and logged, then the hooks a
//! test set for its method run before it. The first that answers is the call's answer and the
//! inner provider is not called; a hook that answers nothing lets the call through. What the
//! inner provider answered then goes through the after-call hooks, which may change it. A hook
//! set later sees the call first and the answer last, as if it wrapped the layer again.
//!
//! Scenarios the tests share are named here ([`Intercept::refuse`], [`Intercept::refuse_next`]);
//! the EC2 rules of [`super::sim_ec2`] and the fault witness of [`super::faulty`] are hooks too.
//! The layer implements [`Provider`] and every capability trait, each capability offered only
//! when the provider under it has it. Adding a method to one of them means adding it here: to
//! [`Method`], [`Call`], [`Answer`], and to the trait's impl at the end, which the compiler
//! asks for (the traits have no default methods).

use chrono::{DateTime, Utc};
use ebb::cloud::{
    ActionReport, Artifact, CapacityReservations, CloudError, Failed, GpuReadings, Image,
    ImageMade, InstanceMetrics, InstanceStatus, Inventory, Launch, LaunchSpec, MetricAnswer,
    MetricQuery, NodeGroupUpdate, PlacementScores, PriceQuotes, Provider, Reservation,
    ReservationRequest, Resize, ScalingGroups, ScopeFailure, SpotMoves, StopKind, TypeCatalogue,
    TypePrice,
};
use ebb::fleet::{
    Capacity, HeldCapacity, Instance, NodeGroup, PriceQuote, ScalingGroup, TypeFacts,
};
use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};

/// A hook's work that waits.
pub type Pending<T> = Pin<Box<dyn Future<Output = T> + Send>>;

/// A method of [`Provider`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Method {
    Instances,
    Reread,
    GpuUtilisation,
    Prices,
    Stop,
    Start,
    SetType,
    Tag,
    Untag,
    LaunchSpec,
    UserData,
    Describe,
    InterruptionConfirmed,
    FindTagged,
    CreateImage,
    Image,
    Launch,
    Terminate,
    DeregisterImage,
    DeleteSnapshot,
    MigrationArtifacts,
    ScalingGroups,
    SetGroupCapacity,
    SetScaleInProtection,
    SetNodeGroupCapacity,
    NodeGroupUpdate,
    NodeGroupCapacity,
    ReserveCapacity,
    Reservations,
    TargetReservation,
    ReservationTarget,
    CancelReservation,
    HeldCapacity,
    PlacementScores,
    InstanceTypes,
    MetricMaxima,
    PriceQuotes,
}

impl Method {
    /// Every method.
    pub const ALL: [Method; 37] = [
        Method::Instances,
        Method::Reread,
        Method::GpuUtilisation,
        Method::Prices,
        Method::Stop,
        Method::Start,
        Method::SetType,
        Method::Tag,
        Method::Untag,
        Method::LaunchSpec,
        Method::UserData,
        Method::Describe,
        Method::InterruptionConfirmed,
        Method::FindTagged,
        Method::CreateImage,
        Method::Image,
        Method::Launch,
        Method::Terminate,
        Method::DeregisterImage,
        Method::DeleteSnapshot,
        Method::MigrationArtifacts,
        Method::ScalingGroups,
        Method::SetGroupCapacity,
        Method::SetScaleInProtection,
        Method::SetNodeGroupCapacity,
        Method::NodeGroupUpdate,
        Method::NodeGroupCapacity,
        Method::ReserveCapacity,
        Method::Reservations,
        Method::TargetReservation,
        Method::ReservationTarget,
        Method::CancelReservation,
        Method::HeldCapacity,
        Method::PlacementScores,
        Method::InstanceTypes,
        Method::MetricMaxima,
        Method::PriceQuotes,
    ];

    /// Its name in the trait (`gpu_utilisation`).
    pub fn name(self) -> &'static str {
        match self {
            Method::Instances => "instances",
            Method::Reread => "reread",
            Method::GpuUtilisation => "gpu_utilisation",
            Method::Prices => "prices",
            Method::Stop => "stop",
            Method::Start => "start",
            Method::SetType => "set_type",
            Method::Tag => "tag",
            Method::Untag => "untag",
            Method::LaunchSpec => "launch_spec",
            Method::UserData => "user_data",
            Method::Describe => "describe",
            Method::InterruptionConfirmed => "interruption_confirmed",
            Method::FindTagged => "find_tagged",
            Method::CreateImage => "create_image",
            Method::Image => "image",
            Method::Launch => "launch",
            Method::Terminate => "terminate",
            Method::DeregisterImage => "deregister_image",
            Method::DeleteSnapshot => "delete_snapshot",
            Method::MigrationArtifacts => "migration_artifacts",
            Method::ScalingGroups => "scaling_groups",
            Method::SetGroupCapacity => "set_group_capacity",
            Method::SetScaleInProtection => "set_scale_in_protection",
            Method::SetNodeGroupCapacity => "set_node_group_capacity",
            Method::NodeGroupUpdate => "node_group_update",
            Method::NodeGroupCapacity => "node_group_capacity",
            Method::ReserveCapacity => "reserve_capacity",
            Method::Reservations => "reservations",
            Method::TargetReservation => "target_reservation",
            Method::ReservationTarget => "reservation_target",
            Method::CancelReservation => "cancel_reservation",
            Method::HeldCapacity => "held_capacity",
            Method::PlacementScores => "placement_scores",
            Method::InstanceTypes => "instance_types",
            Method::MetricMaxima => "metric_maxima",
            Method::PriceQuotes => "quote",
        }
    }

    /// The AWS API operation it makes, as its errors name it.
    pub fn operation(self) -> &'static str {
        match self {
            Method::Instances
            | Method::Reread
            | Method::LaunchSpec
            | Method::Describe
            | Method::FindTagged
            | Method::MigrationArtifacts
            | Method::ReservationTarget => "DescribeInstances",
            Method::GpuUtilisation | Method::MetricMaxima => "GetMetricData",
            Method::UserData => "DescribeInstanceAttribute",
            Method::InstanceTypes => "DescribeInstanceTypes",
            Method::Prices => "DescribeSpotPriceHistory",
            Method::InterruptionConfirmed => "DescribeSpotInstanceRequests",
            Method::Stop => "StopInstances",
            Method::Start => "StartInstances",
            Method::SetType => "ModifyInstanceAttribute",
            Method::Tag => "CreateTags",
            Method::Untag => "DeleteTags",
            Method::CreateImage => "CreateImage",
            Method::Image => "DescribeImages",
            Method::Launch => "RunInstances",
            Method::Terminate => "TerminateInstances",
            Method::DeregisterImage => "DeregisterImage",
            Method::DeleteSnapshot => "DeleteSnapshot",
            Method::ScalingGroups => "DescribeAutoScalingGroups",
            Method::SetGroupCapacity => "UpdateAutoScalingGroup",
            Method::SetScaleInProtection => "SetInstanceProtection",
            Method::SetNodeGroupCapacity => "UpdateNodegroupConfig",
            Method::NodeGroupUpdate => "DescribeUpdate",
            Method::NodeGroupCapacity => "DescribeNodegroup",
            Method::ReserveCapacity => "CreateCapacityReservation",
            Method::Reservations | Method::HeldCapacity => "DescribeCapacityReservations",
            Method::TargetReservation => "ModifyInstanceCapacityReservationAttributes",
            Method::CancelReservation => "CancelCapacityReservation",
            Method::PlacementScores => "GetSpotPlacementScores",
            Method::PriceQuotes => "DescribePrice",
        }
    }

    /// Whether it changes the cloud.
    pub fn changes(self) -> bool {
        matches!(
            self,
            Method::Stop
                | Method::Start
                | Method::SetType
                | Method::Tag
                | Method::Untag
                | Method::CreateImage
                | Method::Launch
                | Method::Terminate
                | Method::DeregisterImage
                | Method::DeleteSnapshot
                | Method::SetGroupCapacity
                | Method::SetScaleInProtection
                | Method::SetNodeGroupCapacity
                | Method::ReserveCapacity
                | Method::TargetReservation
                | Method::CancelReservation
        )
    }
}

impl std::fmt::Display for Method {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// One method, where hooks take several.
impl IntoIterator for Method {
    type Item = Method;
    type IntoIter = std::iter::Once<Method>;
    fn into_iter(self) -> Self::IntoIter {
        std::iter::once(self)
    }
}

/// A call with its arguments, as it reached the layer.
#[derive(Debug, Clone)]
pub enum Call {
    Instances,
    Reread {
        region: String,
        ids: Vec<String>,
    },
    GpuUtilisation {
        region: String,
        ids: Vec<String>,
        from: DateTime<Utc>,
        to: DateTime<Utc>,
    },
    Prices {
        region: String,
        types: Vec<String>,
        now: DateTime<Utc>,
    },
    Stop {
        region: String,
        ids: Vec<String>,
        kind: StopKind,
    },
    Start {
        region: String,
        ids: Vec<String>,
    },
    SetType {
        region: String,
        id: String,
        instance_type: String,
    },
    Tag {
        region: String,
        ids: Vec<String>,
        tags: BTreeMap<String, String>,
    },
    Untag {
        region: String,
        ids: Vec<String>,
        keys: Vec<String>,
    },
    LaunchSpec {
        region: String,
        id: String,
    },
    UserData {
        region: String,
        id: String,
    },
    Describe {
        region: String,
        ids: Vec<String>,
    },
    InterruptionConfirmed {
        region: String,
        id: String,
    },
    FindTagged {
        region: String,
        key: String,
        value: String,
    },
    CreateImage {
        region: String,
        id: String,
        name: String,
        tags: BTreeMap<String, String>,
    },
    Image {
        region: String,
        image: String,
    },
    Launch {
        region: String,
        launch: Box<Launch>,
    },
    Terminate {
        region: String,
        ids: Vec<String>,
    },
    DeregisterImage {
        region: String,
        image: String,
    },
    DeleteSnapshot {
        region: String,
        snapshot: String,
    },
    MigrationArtifacts {
        region: String,
    },
    ScalingGroups {
        region: String,
    },
    SetGroupCapacity {
        region: String,
        name: String,
        capacity: Capacity,
    },
    SetScaleInProtection {
        region: String,
        name: String,
        instances: Vec<String>,
        protected: bool,
    },
    SetNodeGroupCapacity {
        region: String,
        group: String,
        node_group: NodeGroup,
        capacity: Capacity,
    },
    NodeGroupUpdate {
        region: String,
        group: String,
        node_group: NodeGroup,
        update: String,
    },
    NodeGroupCapacity {
        region: String,
        group: String,
        node_group: NodeGroup,
    },
    ReserveCapacity {
        region: String,
        request: ReservationRequest,
    },
    Reservations {
        region: String,
        instance: String,
        token: String,
    },
    TargetReservation {
        region: String,
        instance: String,
        reservation: Option<String>,
    },
    ReservationTarget {
        region: String,
        instance: String,
    },
    CancelReservation {
        region: String,
        instance: String,
        reservation: String,
    },
    HeldCapacity {
        region: String,
    },
    PlacementScores {
        region: String,
        types: Vec<String>,
    },
    InstanceTypes,
    MetricMaxima {
        region: String,
        queries: Vec<MetricQuery>,
        from: DateTime<Utc>,
        to: DateTime<Utc>,
    },
    PriceQuotes {
        region: String,
        types: Vec<String>,
        now: DateTime<Utc>,
    },
}

impl Call {
    /// Its method.
    pub fn method(&self) -> Method {
        match self {
            Call::Instances => Method::Instances,
            Call::Reread { .. } => Method::Reread,
            Call::GpuUtilisation { .. } => Method::GpuUtilisation,
            Call::Prices { .. } => Method::Prices,
            Call::Stop { .. } => Method::Stop,
            Call::Start { .. } => Method::Start,
            Call::SetType { .. } => Method::SetType,
            Call::Tag { .. } => Method::Tag,
            Call::Untag { .. } => Method::Untag,
            Call::LaunchSpec { .. } => Method::LaunchSpec,
            Call::Describe { .. } => Method::Describe,
            Call::InterruptionConfirmed { .. } => Method::InterruptionConfirmed,
            Call::FindTagged { .. } => Method::FindTagged,
            Call::CreateImage { .. } => Method::CreateImage,
            Call::Image { .. } => Method::Image,
            Call::Launch { .. } => Method::Launch,
            Call::Terminate { .. } => Method::Terminate,
            Call::DeregisterImage { .. } => Method::DeregisterImage,
            Call::DeleteSnapshot { .. } => Method::DeleteSnapshot,
            Call::MigrationArtifacts { .. } => Method::MigrationArtifacts,
            Call::ScalingGroups { .. } => Method::ScalingGroups,
            Call::SetGroupCapacity { .. } => Method::SetGroupCapacity,
            Call::SetScaleInProtection { .. } => Method::SetScaleInProtection,
            Call::SetNodeGroupCapacity { .. } => Method::SetNodeGroupCapacity,
            Call::NodeGroupUpdate { .. } => Method::NodeGroupUpdate,
            Call::NodeGroupCapacity { .. } => Method::NodeGroupCapacity,
            Call::ReserveCapacity { .. } => Method::ReserveCapacity,
            Call::Reservations { .. } => Method::Reservations,
            Call::TargetReservation { .. } => Method::TargetReservation,
            Call::ReservationTarget { .. } => Method::ReservationTarget,
            Call::CancelReservation { .. } => Method::CancelReservation,
            Call::HeldCapacity { .. } => Method::HeldCapacity,
            Call::PlacementScores { .. } => Method::PlacementScores,
            Call::UserData { .. } => Method::UserData,
            Call::InstanceTypes => Method::InstanceTypes,
            Call::MetricMaxima { .. } => Method::MetricMaxima,
            Call::PriceQuotes { .. } => Method::PriceQuotes,
        }
    }

    /// Its region (`None` for the listing of every region).
    pub fn region(&self) -> Option<&str> {
        match self {
            Call::Instances | Call::InstanceTypes => None,
            Call::Reread { region, .. }
            | Call::GpuUtilisation { region, .. }
            | Call::Prices { region, .. }
            | Call::Stop { region, .. }
            | Call::Start { region, .. }
            | Call::SetType { region, .. }
            | Call::Tag { region, .. }
            | Call::Untag { region, .. }
            | Call::LaunchSpec { region, .. }
            | Call::UserData { region, .. }
            | Call::Describe { region, .. }
            | Call::InterruptionConfirmed { region, .. }
            | Call::FindTagged { region, .. }
            | Call::CreateImage { region, .. }
            | Call::Image { region, .. }
            | Call::Launch { region, .. }
            | Call::Terminate { region, .. }
            | Call::DeregisterImage { region, .. }
            | Call::DeleteSnapshot { region, .. }
            | Call::MigrationArtifacts { region }
            | Call::ScalingGroups { region }
            | Call::SetGroupCapacity { region, .. }
            | Call::SetScaleInProtection { region, .. }
            | Call::SetNodeGroupCapacity { region, .. }
            | Call::NodeGroupUpdate { region, .. }
            | Call::NodeGroupCapacity { region, .. }
            | Call::ReserveCapacity { region, .. }
            | Call::Reservations { region, .. }
            | Call::TargetReservation { region, .. }
            | Call::ReservationTarget { region, .. }
            | Call::CancelReservation { region, .. }
            | Call::HeldCapacity { region }
            | Call::PlacementScores { region, .. }
            | Call::MetricMaxima { region, .. }
            | Call::PriceQuotes { region, .. } => Some(region),
        }
    }

    /// The ids it names: instances, an image (a launch's), a snapshot, or `key=value` of a
    /// look-up by tag.
    pub fn ids(&self) -> Vec<String> {
        match self {
            Call::Instances
            | Call::InstanceTypes
            | Call::Prices { .. }
            | Call::PriceQuotes { .. }
            | Call::MigrationArtifacts { .. }
            | Call::ScalingGroups { .. }
            | Call::HeldCapacity { .. }
            | Call::PlacementScores { .. } => Vec::new(),
            Call::SetGroupCapacity { name, .. }
            | Call::SetScaleInProtection { name, .. }
            | Call::SetNodeGroupCapacity { group: name, .. }
            | Call::NodeGroupUpdate { group: name, .. }
            | Call::NodeGroupCapacity { group: name, .. } => vec![name.clone()],
            Call::Reread { ids, .. }
            | Call::GpuUtilisation { ids, .. }
            | Call::Stop { ids, .. }
            | Call::Start { ids, .. }
            | Call::Tag { ids, .. }
            | Call::Untag { ids, .. }
            | Call::Describe { ids, .. }
            | Call::Terminate { ids, .. } => ids.clone(),
            Call::SetType { id, .. }
            | Call::InterruptionConfirmed { id, .. }
            | Call::LaunchSpec { id, .. }
            | Call::UserData { id, .. }
            | Call::CreateImage { id, .. } => {
                vec![id.clone()]
            }
            Call::FindTagged { key, value, .. } => vec![format!("{key}={value}")],
            Call::ReserveCapacity { request, .. } => vec![request.instance.clone()],
            Call::Reservations { instance, .. }
            | Call::TargetReservation { instance, .. }
            | Call::ReservationTarget { instance, .. }
            | Call::CancelReservation { instance, .. } => vec![instance.clone()],
            Call::Image { image, .. } | Call::DeregisterImage { image, .. } => vec![image.clone()],
            Call::Launch { launch, .. } => vec![launch.image.clone()],
            Call::DeleteSnapshot { snapshot, .. } => vec![snapshot.clone()],
            Call::MetricMaxima { queries, .. } => {
                queries.iter().map(|q| q.instance.clone()).collect()
            }
        }
    }

    /// This call failed with `error`: every instance of a change refused with it, a listing
    /// whose every region failed, or the error of a read.
    pub fn fail(&self, error: CloudError) -> Answer {
        match self.method() {
            Method::Instances => Answer::Inventory(Inventory {
                failures: vec![ScopeFailure {
                    region: "*".to_string(),
                    account: None,
                    error,
                }],
                ..Inventory::default()
            }),
            Method::Stop
            | Method::Start
            | Method::SetType
            | Method::Tag
            | Method::Untag
            | Method::Terminate
            | Method::TargetReservation => Answer::Report(ActionReport {
                done: Vec::new(),
                failed: self
                    .ids()
                    .into_iter()
                    .map(|instance| Failed {
                        instance,
                        error: error.clone(),
                    })
                    .collect(),
            }),
            Method::Reread => Answer::Instances(Err(error)),
            Method::GpuUtilisation => Answer::Samples(Err(error)),
            Method::Prices => Answer::Prices(Err(error)),
            Method::LaunchSpec => Answer::Spec(Err(error)),
            Method::Describe => Answer::Statuses(Err(error)),
            Method::InterruptionConfirmed => Answer::Confirmed(Err(error)),
            Method::FindTagged => Answer::Found(Err(error)),
            Method::CreateImage => Answer::Made(Err(error)),
            Method::Image => Answer::Image(Err(error)),
            Method::Launch => Answer::Launched(Err(error)),
            Method::DeregisterImage | Method::DeleteSnapshot => Answer::Done(Err(error)),
            Method::MigrationArtifacts => Answer::Artifacts(Err(error)),
            Method::ScalingGroups => Answer::Groups(Err(error)),
            Method::SetGroupCapacity
            | Method::SetScaleInProtection
            | Method::SetNodeGroupCapacity => Answer::Requested(Err(error)),
            Method::NodeGroupUpdate => Answer::Update(Err(error)),
            Method::NodeGroupCapacity => Answer::Capacity(Err(error)),
            Method::ReserveCapacity => Answer::Reserved(Err(error)),
            Method::Reservations => Answer::Reservations(Err(error)),
            Method::ReservationTarget | Method::UserData => Answer::Requested(Err(error)),
            Method::CancelReservation => Answer::Done(Err(error)),
            Method::HeldCapacity => Answer::HeldCapacity(Err(error)),
            Method::PlacementScores => Answer::Scores(Err(error)),
            Method::InstanceTypes => Answer::Types(Err(error)),
            Method::MetricMaxima => Answer::Maxima(Err(error)),
            Method::PriceQuotes => Answer::Quotes(Err(error)),
        }
    }
}

/// What a call answers, one variant for each return type of [`Provider`].
#[derive(Debug)]
pub enum Answer {
    Inventory(Inventory),
    Instances(Result<Vec<Instance>, CloudError>),
    Samples(Result<GpuReadings, CloudError>),
    Prices(Result<Vec<TypePrice>, CloudError>),
    Report(ActionReport),
    Spec(Result<LaunchSpec, CloudError>),
    Statuses(Result<Vec<InstanceStatus>, CloudError>),
    Confirmed(Result<bool, CloudError>),
    Found(Result<Option<InstanceStatus>, CloudError>),
    Made(Result<ImageMade, CloudError>),
    Image(Result<Option<Image>, CloudError>),
    Launched(Result<InstanceStatus, CloudError>),
    Done(Result<(), CloudError>),
    Artifacts(Result<Vec<Artifact>, CloudError>),
    Groups(Result<Vec<ScalingGroup>, CloudError>),
    Requested(Result<Option<String>, CloudError>),
    Update(Result<NodeGroupUpdate, CloudError>),
    Capacity(Result<Capacity, CloudError>),
    Reserved(Result<Reservation, CloudError>),
    Reservations(Result<Vec<Reservation>, CloudError>),
    HeldCapacity(Result<Vec<HeldCapacity>, CloudError>),
    Scores(Result<PlacementScores, CloudError>),
    Types(Result<BTreeMap<String, TypeFacts>, CloudError>),
    Maxima(Result<Vec<MetricAnswer>, CloudError>),
    Quotes(Result<Vec<PriceQuote>, CloudError>),
}

/// A return type of [`Provider`], to and from its [`Answer`].
pub trait Answers: Sized {
    /// `answer`, if it is of this type.
    fn from_answer(answer: Answer) -> Result<Self, Box<Answer>>;
}

macro_rules! answers {
    ($($variant:ident: $ty:ty),* $(,)?) => {$(
        impl From<$ty> for Answer {
            fn from(value: $ty) -> Answer {
                Answer::$variant(value)
            }
        }
        impl Answers for $ty {
            fn from_answer(answer: Answer) -> Result<Self, Box<Answer>> {
                match answer {
                    Answer::$variant(value) => Ok(value),
                    other => Err(Box::new(other)),
                }
            }
        }
    )*};
}

answers! {
    Inventory: Inventory,
    Instances: Result<Vec<Instance>, CloudError>,
    Samples: Result<GpuReadings, CloudError>,
    Prices: Result<Vec<TypePrice>, CloudError>,
    Report: ActionReport,
    Spec: Result<LaunchSpec, CloudError>,
    Statuses: Result<Vec<InstanceStatus>, CloudError>,
    Confirmed: Result<bool, CloudError>,
    Found: Result<Option<InstanceStatus>, CloudError>,
    Made: Result<ImageMade, CloudError>,
    Image: Result<Option<Image>, CloudError>,
    Launched: Result<InstanceStatus, CloudError>,
    Done: Result<(), CloudError>,
    Artifacts: Result<Vec<Artifact>, CloudError>,
    Groups: Result<Vec<ScalingGroup>, CloudError>,
    Requested: Result<Option<String>, CloudError>,
    Update: Result<NodeGroupUpdate, CloudError>,
    Capacity: Result<Capacity, CloudError>,
    Reserved: Result<Reservation, CloudError>,
    Reservations: Result<Vec<Reservation>, CloudError>,
    HeldCapacity: Result<Vec<HeldCapacity>, CloudError>,
    Scores: Result<PlacementScores, CloudError>,
    Types: Result<BTreeMap<String, TypeFacts>, CloudError>,
    Maxima: Result<Vec<MetricAnswer>, CloudError>,
    Quotes: Result<Vec<PriceQuote>, CloudError>,
}

/// One call as the log keeps it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Logged {
    /// Its number, from 0.
    pub index: usize,
    /// Its method.
    pub method: Method,
    /// The ids it names ([`Call::ids`]).
    pub ids: Vec<String>,
}

type Before = Box<dyn FnMut(&Call) -> Pending<Option<Answer>> + Send>;
type After = Box<dyn FnMut(&Call, Answer) -> Pending<Answer> + Send>;

struct Hook<F> {
    methods: Vec<Method>,
    hook: F,
}

#[derive(Default)]
struct Shared {
    log: Vec<Logged>,
    /// Newest first.
    before: Vec<Hook<Before>>,
    /// Oldest first.
    after: Vec<Hook<After>>,
}

/// The layer over `P`; clones share the log and the hooks.
pub struct Intercept<P> {
    /// The provider it wraps: the cloud itself, for a test's own looks and changes.
    pub inner: Arc<P>,
    shared: Arc<Mutex<Shared>>,
}

impl<P> Clone for Intercept<P> {
    fn clone(&self) -> Self {
        Intercept {
            inner: self.inner.clone(),
            shared: self.shared.clone(),
        }
    }
}

impl<P: Provider> Intercept<P> {
    /// `inner` with no hooks: every call goes through.
    pub fn new(inner: P) -> Self {
        Intercept::over(Arc::new(inner))
    }

    /// `inner`, shared with the test, with no hooks.
    pub fn over(inner: Arc<P>) -> Self {
        Intercept {
            inner,
            shared: Arc::default(),
        }
    }

    fn shared(&self) -> std::sync::MutexGuard<'_, Shared> {
        self.shared.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Runs `hook` before each call of `methods`; what it answers is the call's answer.
    pub fn before(
        &self,
        methods: impl IntoIterator<Item = Method>,
        mut hook: impl FnMut(&Call) -> Option<Answer> + Send + 'static,
    ) {
        let hook: Before = Box::new(move |call: &Call| -> Pending<Option<Answer>> {
            Box::pin(std::future::ready(hook(call)))
        });
        let methods = methods.into_iter().collect();
        self.shared().before.insert(0, Hook { methods, hook });
    }

    /// [`Intercept::before`], for a hook that waits (on the store, on the cloud); it is handed
    /// a copy of the call.
    pub fn before_async<F>(
        &self,
        methods: impl IntoIterator<Item = Method>,
        mut hook: impl FnMut(Call) -> F + Send + 'static,
    ) where
        F: Future<Output = Option<Answer>> + Send + 'static,
    {
        let hook: Before = Box::new(move |call: &Call| -> Pending<Option<Answer>> {
            Box::pin(hook(call.clone()))
        });
        let methods = methods.into_iter().collect();
        self.shared().before.insert(0, Hook { methods, hook });
    }

    /// Runs `hook` on what the inner provider answered to each call of `methods`.
    pub fn after(
        &self,
        methods: impl IntoIterator<Item = Method>,
        mut hook: impl FnMut(&Call, &mut Answer) + Send + 'static,
    ) {
        let hook: After = Box::new(move |call: &Call, mut answer: Answer| -> Pending<Answer> {
            hook(call, &mut answer);
            Box::pin(std::future::ready(answer))
        });
        let methods = methods.into_iter().collect();
        self.shared().after.push(Hook { methods, hook });
    }

    /// [`Intercept::after`], for a hook that waits; it is handed a copy of the call, and the
    /// answer to hand on.
    pub fn after_async<F>(
        &self,
        methods: impl IntoIterator<Item = Method>,
        mut hook: impl FnMut(Call, Answer) -> F + Send + 'static,
    ) where
        F: Future<Output = Answer> + Send + 'static,
    {
        let hook: After = Box::new(move |call: &Call, answer: Answer| -> Pending<Answer> {
            Box::pin(hook(call.clone(), answer))
        });
        let methods = methods.into_iter().collect();
        self.shared().after.push(Hook { methods, hook });
    }

    /// Scenario: every call of `method` from now on fails with `error`.
    pub fn refuse(&self, method: Method, error: CloudError) {
        self.before(method, move |call| Some(call.fail(error.clone())));
    }

    /// Scenario: the next `times` calls of `method` fail with `error`.
    pub fn refuse_next(&self, method: Method, times: u32, error: CloudError) {
        let mut left = times;
        self.before(method, move |call| {
            let hit = left > 0;
            left = left.saturating_sub(1);
            hit.then(|| call.fail(error.clone()))
        });
    }

    /// Every call so far.
    pub fn calls(&self) -> Vec<Logged> {
        self.shared().log.clone()
    }

    /// The ids of every call of `method` so far, in order.
    pub fn ids_of(&self, method: Method) -> Vec<String> {
        let shared = self.shared();
        let of = shared.log.iter().filter(|c| c.method == method);
        of.flat_map(|c| c.ids.clone()).collect()
    }

    /// Logs `call`, runs the hooks around `forward` (the inner provider's call).
    async fn run<T: Answers + Into<Answer>>(
        &self,
        call: Call,
        forward: impl Future<Output = T>,
    ) -> T {
        let method = call.method();
        {
            let mut shared = self.shared();
            let index = shared.log.len();
            let ids = call.ids();
            shared.log.push(Logged { index, method, ids });
        }
        let mut at = 0;
        loop {
            let step = {
                let mut shared = self.shared();
                let Some(hook) = shared.before.get_mut(at) else {
                    break;
                };
                at += 1;
                if !hook.methods.contains(&method) {
                    continue;
                }
                (hook.hook)(&call)
            };
            if let Some(answer) = step.await {
                return expect(method, answer);
            }
        }
        let mut answer: Answer = forward.await.into();
        let mut at = 0;
        loop {
            let step = {
                let mut shared = self.shared();
                let Some(hook) = shared.after.get_mut(at) else {
                    break;
                };
                at += 1;
                if !hook.methods.contains(&method) {
                    continue;
                }
                // The answer goes to the hook and comes back from it.
                let answer = std::mem::replace(&mut answer, Answer::Done(Ok(())));
                (hook.hook)(&call, answer)
            };
            answer = step.await;
        }
        expect(method, answer)
    }
}

/// `answer` as the return type of `method`; a hook that answered with another is a test's bug.
fn expect<T: Answers>(method: Method, answer: Answer) -> T {
    T::from_answer(answer).unwrap_or_else(|a| panic!("a hook answered {method} with {a:?}"))
}

fn owned(ids: &[String]) -> Vec<String> {
    ids.to_vec()
}

impl<P: Provider> Provider for Intercept<P> {
    type Resize = Self;
    type SpotMoves = Self;
    type ScalingGroups = Self;
    type CapacityReservations = Self;
    type TypeCatalogue = Self;
    type InstanceMetrics = Self;
    type PriceQuotes = Self;

    fn resizer(&self) -> Option<&Self> {
        self.inner.resizer().map(|_| self)
    }

    fn spot_moves(&self) -> Option<&Self> {
        self.inner.spot_moves().map(|_| self)
    }

    fn groups(&self) -> Option<&Self> {
        self.inner.groups().map(|_| self)
    }

    fn capacity_reservations(&self) -> Option<&Self> {
        self.inner.capacity_reservations().map(|_| self)
    }

    fn type_catalogue(&self) -> Option<&Self> {
        self.inner.type_catalogue().map(|_| self)
    }

    fn instance_metrics(&self) -> Option<&Self> {
        self.inner.instance_metrics().map(|_| self)
    }

    fn price_quotes(&self) -> Option<&Self> {
        self.inner.price_quotes().map(|_| self)
    }

    async fn instances(&self) -> Inventory {
        self.run(Call::Instances, self.inner.instances()).await
    }

    async fn reread(&self, region: &str, ids: &[String]) -> Result<Vec<Instance>, CloudError> {
        let call = Call::Reread {
            region: region.into(),
            ids: owned(ids),
        };
        self.run(call, self.inner.reread(region, ids)).await
    }

    async fn gpu_utilisation(
        &self,
        region: &str,
        instances: &[String],
        from: DateTime<Utc>,
        to: DateTime<Utc>,
    ) -> Result<GpuReadings, CloudError> {
        let call = Call::GpuUtilisation {
            region: region.into(),
            ids: owned(instances),
            from,
            to,
        };
        let forward = self.inner.gpu_utilisation(region, instances, from, to);
        self.run(call, forward).await
    }

    async fn prices(
        &self,
        region: &str,
        types: &[String],
        now: DateTime<Utc>,
    ) -> Result<Vec<TypePrice>, CloudError> {
        let call = Call::Prices {
            region: region.into(),
            types: owned(types),
            now,
        };
        self.run(call, self.inner.prices(region, types, now)).await
    }

    async fn stop(&self, region: &str, ids: &[String], kind: StopKind) -> ActionReport {
        let call = Call::Stop {
            region: region.into(),
            ids: owned(ids),
            kind,
        };
        self.run(call, self.inner.stop(region, ids, kind)).await
    }

    async fn start(&self, region: &str, ids: &[String]) -> ActionReport {
        let call = Call::Start {
            region: region.into(),
            ids: owned(ids),
        };
        self.run(call, self.inner.start(region, ids)).await
    }

    async fn tag(
        &self,
        region: &str,
        ids: &[String],
        tags: &BTreeMap<String, String>,
    ) -> ActionReport {
        let call = Call::Tag {
            region: region.into(),
            ids: owned(ids),
            tags: tags.clone(),
        };
        self.run(call, self.inner.tag(region, ids, tags)).await
    }

    async fn untag(&self, region: &str, ids: &[String], keys: &[String]) -> ActionReport {
        let call = Call::Untag {
            region: region.into(),
            ids: owned(ids),
            keys: owned(keys),
        };
        self.run(call, self.inner.untag(region, ids, keys)).await
    }
}

impl<P: Provider> Intercept<P> {
    /// The provider's resizes: the layer offers them only when the provider has them.
    fn inner_resizer(&self) -> &P::Resize {
        self.inner
            .resizer()
            .expect("the layer offers only what its provider has")
    }

    /// The provider's spot moves: the layer offers them only when the provider has them.
    fn inner_spot_moves(&self) -> &P::SpotMoves {
        self.inner
            .spot_moves()
            .expect("the layer offers only what its provider has")
    }

    /// The provider's scaling groups: the layer offers them only when the provider has them.
    fn inner_groups(&self) -> &P::ScalingGroups {
        self.inner
            .groups()
            .expect("the layer offers only what its provider has")
    }

    /// The provider's capacity reservations: the layer offers them only when the provider has them.
    fn inner_capacity_reservations(&self) -> &P::CapacityReservations {
        self.inner
            .capacity_reservations()
            .expect("the layer offers only what its provider has")
    }

    /// The provider's type catalogue: the layer offers them only when the provider has them.
    fn inner_type_catalogue(&self) -> &P::TypeCatalogue {
        self.inner
            .type_catalogue()
            .expect("the layer offers only what its provider has")
    }

    /// The provider's instance metrics: the layer offers them only when the provider has them.
    fn inner_instance_metrics(&self) -> &P::InstanceMetrics {
        self.inner
            .instance_metrics()
            .expect("the layer offers only what its provider has")
    }

    /// The provider's price quotes: the layer offers them only when the provider has them.
    fn inner_price_quotes(&self) -> &P::PriceQuotes {
        self.inner
            .price_quotes()
            .expect("the layer offers only what its provider has")
    }
}

impl<P: Provider> Resize for Intercept<P> {
    async fn set_type(&self, region: &str, id: &str, instance_type: &str) -> ActionReport {
        let call = Call::SetType {
            region: region.into(),
            id: id.into(),
            instance_type: instance_type.into(),
        };
        self.run(
            call,
            self.inner_resizer().set_type(region, id, instance_type),
        )
        .await
    }
}

impl<P: Provider> SpotMoves for Intercept<P> {
    async fn launch_spec(&self, region: &str, id: &str) -> Result<LaunchSpec, CloudError> {
        let call = Call::LaunchSpec {
            region: region.into(),
            id: id.into(),
        };
        self.run(call, self.inner_spot_moves().launch_spec(region, id))
            .await
    }

    async fn user_data(&self, region: &str, id: &str) -> Result<Option<String>, CloudError> {
        let call = Call::UserData {
            region: region.into(),
            id: id.into(),
        };
        self.run(call, self.inner_spot_moves().user_data(region, id))
            .await
    }

    async fn describe(
        &self,
        region: &str,
        ids: &[String],
    ) -> Result<Vec<InstanceStatus>, CloudError> {
        let call = Call::Describe {
            region: region.into(),
            ids: owned(ids),
        };
        self.run(call, self.inner_spot_moves().describe(region, ids))
            .await
    }

    async fn interruption_confirmed(&self, region: &str, id: &str) -> Result<bool, CloudError> {
        let call = Call::InterruptionConfirmed {
            region: region.into(),
            id: id.into(),
        };
        self.run(
            call,
            self.inner_spot_moves().interruption_confirmed(region, id),
        )
        .await
    }

    async fn find_tagged(
        &self,
        region: &str,
        key: &str,
        value: &str,
    ) -> Result<Option<InstanceStatus>, CloudError> {
        let call = Call::FindTagged {
            region: region.into(),
            key: key.into(),
            value: value.into(),
        };
        self.run(
            call,
            self.inner_spot_moves().find_tagged(region, key, value),
        )
        .await
    }

    async fn create_image(
        &self,
        region: &str,
        id: &str,
        name: &str,
        tags: &BTreeMap<String, String>,
    ) -> Result<ImageMade, CloudError> {
        let call = Call::CreateImage {
            region: region.into(),
            id: id.into(),
            name: name.into(),
            tags: tags.clone(),
        };
        self.run(
            call,
            self.inner_spot_moves().create_image(region, id, name, tags),
        )
        .await
    }

    async fn image(&self, region: &str, image: &str) -> Result<Option<Image>, CloudError> {
        let call = Call::Image {
            region: region.into(),
            image: image.into(),
        };
        self.run(call, self.inner_spot_moves().image(region, image))
            .await
    }

    async fn launch(&self, region: &str, launch: &Launch) -> Result<InstanceStatus, CloudError> {
        let call = Call::Launch {
            region: region.into(),
            launch: Box::new(launch.clone()),
        };
        self.run(call, self.inner_spot_moves().launch(region, launch))
            .await
    }

    async fn terminate(&self, region: &str, ids: &[String]) -> ActionReport {
        let call = Call::Terminate {
            region: region.into(),
            ids: owned(ids),
        };
        self.run(call, self.inner_spot_moves().terminate(region, ids))
            .await
    }

    async fn deregister_image(&self, region: &str, image: &str) -> Result<(), CloudError> {
        let call = Call::DeregisterImage {
            region: region.into(),
            image: image.into(),
        };
        self.run(
            call,
            self.inner_spot_moves().deregister_image(region, image),
        )
        .await
    }

    async fn delete_snapshot(&self, region: &str, snapshot: &str) -> Result<(), CloudError> {
        let call = Call::DeleteSnapshot {
            region: region.into(),
            snapshot: snapshot.into(),
        };
        self.run(
            call,
            self.inner_spot_moves().delete_snapshot(region, snapshot),
        )
        .await
    }

    async fn migration_artifacts(&self, region: &str) -> Result<Vec<Artifact>, CloudError> {
        let call = Call::MigrationArtifacts {
            region: region.into(),
        };
        self.run(call, self.inner_spot_moves().migration_artifacts(region))
            .await
    }

    async fn placement_scores(
        &self,
        region: &str,
        types: &[String],
    ) -> Result<PlacementScores, CloudError> {
        let call = Call::PlacementScores {
            region: region.into(),
            types: types.to_vec(),
        };
        let forward = self.inner_spot_moves().placement_scores(region, types);
        self.run(call, forward).await
    }
}

impl<P: Provider> ScalingGroups for Intercept<P> {
    async fn scaling_groups(&self, region: &str) -> Result<Vec<ScalingGroup>, CloudError> {
        let call = Call::ScalingGroups {
            region: region.into(),
        };
        self.run(call, self.inner_groups().scaling_groups(region))
            .await
    }

    async fn set_group_capacity(
        &self,
        region: &str,
        name: &str,
        capacity: Capacity,
    ) -> Result<Option<String>, CloudError> {
        let call = Call::SetGroupCapacity {
            region: region.into(),
            name: name.into(),
            capacity,
        };
        self.run(
            call,
            self.inner_groups()
                .set_group_capacity(region, name, capacity),
        )
        .await
    }

    async fn set_scale_in_protection(
        &self,
        region: &str,
        name: &str,
        instances: &[String],
        protected: bool,
    ) -> Result<Option<String>, CloudError> {
        let call = Call::SetScaleInProtection {
            region: region.into(),
            name: name.into(),
            instances: instances.to_vec(),
            protected,
        };
        let forward = self
            .inner_groups()
            .set_scale_in_protection(region, name, instances, protected);
        self.run(call, forward).await
    }

    async fn set_node_group_capacity(
        &self,
        region: &str,
        group: &str,
        node_group: &NodeGroup,
        capacity: Capacity,
    ) -> Result<Option<String>, CloudError> {
        let call = Call::SetNodeGroupCapacity {
            region: region.into(),
            group: group.into(),
            node_group: node_group.clone(),
            capacity,
        };
        let forward = self
            .inner_groups()
            .set_node_group_capacity(region, group, node_group, capacity);
        self.run(call, forward).await
    }

    async fn node_group_update(
        &self,
        region: &str,
        group: &str,
        node_group: &NodeGroup,
        update: &str,
    ) -> Result<NodeGroupUpdate, CloudError> {
        let call = Call::NodeGroupUpdate {
            region: region.into(),
            group: group.into(),
            node_group: node_group.clone(),
            update: update.into(),
        };
        let forward = self
            .inner_groups()
            .node_group_update(region, group, node_group, update);
        self.run(call, forward).await
    }

    async fn node_group_capacity(
        &self,
        region: &str,
        group: &str,
        node_group: &NodeGroup,
    ) -> Result<Capacity, CloudError> {
        let call = Call::NodeGroupCapacity {
            region: region.into(),
            group: group.into(),
            node_group: node_group.clone(),
        };
        let forward = self
            .inner_groups()
            .node_group_capacity(region, group, node_group);
        self.run(call, forward).await
    }
}

impl<P: Provider> CapacityReservations for Intercept<P> {
    async fn reserve_capacity(
        &self,
        region: &str,
        request: &ReservationRequest,
    ) -> Result<Reservation, CloudError> {
        let call = Call::ReserveCapacity {
            region: region.into(),
            request: request.clone(),
        };
        self.run(
            call,
            self.inner_capacity_reservations()
                .reserve_capacity(region, request),
        )
        .await
    }

    async fn reservations(
        &self,
        region: &str,
        instance: &str,
        token: &str,
    ) -> Result<Vec<Reservation>, CloudError> {
        let call = Call::Reservations {
            region: region.into(),
            instance: instance.into(),
            token: token.into(),
        };
        self.run(
            call,
            self.inner_capacity_reservations()
                .reservations(region, instance, token),
        )
        .await
    }

    async fn target_reservation(
        &self,
        region: &str,
        instance: &str,
        reservation: Option<&str>,
    ) -> ActionReport {
        let call = Call::TargetReservation {
            region: region.into(),
            instance: instance.into(),
            reservation: reservation.map(str::to_string),
        };
        let forward =
            self.inner_capacity_reservations()
                .target_reservation(region, instance, reservation);
        self.run(call, forward).await
    }

    async fn reservation_target(
        &self,
        region: &str,
        instance: &str,
    ) -> Result<Option<String>, CloudError> {
        let call = Call::ReservationTarget {
            region: region.into(),
            instance: instance.into(),
        };
        self.run(
            call,
            self.inner_capacity_reservations()
                .reservation_target(region, instance),
        )
        .await
    }

    async fn cancel_reservation(
        &self,
        region: &str,
        instance: &str,
        reservation: &str,
    ) -> Result<(), CloudError> {
        let call = Call::CancelReservation {
            region: region.into(),
            instance: instance.into(),
            reservation: reservation.into(),
        };
        let forward =
            self.inner_capacity_reservations()
                .cancel_reservation(region, instance, reservation);
        self.run(call, forward).await
    }

    async fn held_capacity(&self, region: &str) -> Result<Vec<HeldCapacity>, CloudError> {
        let call = Call::HeldCapacity {
            region: region.into(),
        };
        self.run(
            call,
            self.inner_capacity_reservations().held_capacity(region),
        )
        .await
    }
}

impl<P: Provider> PriceQuotes for Intercept<P> {
    async fn quote(
        &self,
        region: &str,
        types: &[String],
        now: DateTime<Utc>,
    ) -> Result<Vec<PriceQuote>, CloudError> {
        let call = Call::PriceQuotes {
            region: region.into(),
            types: owned(types),
            now,
        };
        let forward = self.inner_price_quotes().quote(region, types, now);
        self.run(call, forward).await
    }
}

impl<P: Provider> TypeCatalogue for Intercept<P> {
    async fn instance_types(&self) -> Result<BTreeMap<String, TypeFacts>, CloudError> {
        self.run(
            Call::InstanceTypes,
            self.inner_type_catalogue().instance_types(),
        )
        .await
    }
}

impl<P: Provider> InstanceMetrics for Intercept<P> {
    async fn metric_maxima(
        &self,
        region: &str,
        queries: &[MetricQuery],
        from: DateTime<Utc>,
        to: DateTime<Utc>,
    ) -> Result<Vec<MetricAnswer>, CloudError> {
        let call = Call::MetricMaxima {
            region: region.into(),
            queries: queries.to_vec(),
            from,
            to,
        };
        let forward = self
            .inner_instance_metrics()
            .metric_maxima(region, queries, from, to);
        self.run(call, forward).await
    }
}
