//! What some clouds can do and others cannot, one trait per capability. A cloud's provider
//! implements the ones it has and names [`Lacks`] for the others in [`super::Provider`]: nothing
//! refuses at run time because a cloud lacks a method, and the engine learns what each cloud
//! can do from [`super::levers`], data derived from those implementations.

use super::{
    ActionReport, Artifact, CloudError, Image, ImageMade, InstanceStatus, Launch, LaunchSpec,
    NodeGroupUpdate, PlacementScores, Reservation, ReservationRequest,
};
use crate::fleet::{Capacity, HeldCapacity, NodeGroup, PriceQuote, ScalingGroup, TypeFacts};
use chrono::{DateTime, Utc};
use std::collections::BTreeMap;
use std::future::Future;

/// The capability of a cloud that lacks it. It has no values, so a provider's accessor for it
/// can only answer `None` and its methods can never be called: they exist for the compiler.
#[derive(Debug)]
pub enum Lacks {}

/// In a `Provider` impl, names [`Lacks`] for capability `$capability` (the associated type)
/// and answers `None` from its accessor `$accessor`: `lacks!(SpotMoves, spot_moves);`.
macro_rules! lacks {
    ($capability:ident, $accessor:ident) => {
        type $capability = $crate::cloud::Lacks;

        fn $accessor(&self) -> Option<&$crate::cloud::Lacks> {
            None
        }
    };
}
pub(crate) use lacks;

/// In a `Provider` impl whose type implements capability `$capability` itself, names `Self`
/// for it and answers `Some(self)` from its accessor `$accessor`: `has!(SpotMoves, spot_moves);`.
macro_rules! has {
    ($capability:ident, $accessor:ident) => {
        type $capability = Self;

        fn $accessor(&self) -> Option<&Self> {
            Some(self)
        }
    };
}
pub(crate) use has;

/// A metric of one instance in the cloud's monitoring service: its namespace, its name, and
/// its dimensions beside the one that names the instance, which the provider adds.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct MetricQuery {
    /// The instance.
    pub instance: String,
    /// The metric's namespace (`CWAgent`).
    pub namespace: String,
    /// The metric's name.
    pub metric: String,
    /// Its other dimensions.
    pub dimensions: BTreeMap<String, String>,
}

/// One query's answer: its readings, oldest first, one per period; or why it could not be
/// read (then its instance's use by it is unknown).
pub type MetricAnswer = Result<Vec<(DateTime<Utc>, f64)>, String>;

/// Reading any metric of an instance from the cloud's monitoring service (CloudWatch): what an
/// idle rule's `cloudwatch` activity signal reads.
pub trait InstanceMetrics: Send + Sync {
    /// The `Maximum` of each of `queries` (instances of `region`) over each period of the GPU
    /// metric, from `from` to `to`: one answer per query, in order. A query the service
    /// answered only partly, or not at all, is an `Err` answer; a failed call is the `Err`.
    fn metric_maxima(
        &self,
        region: &str,
        queries: &[MetricQuery],
        from: DateTime<Utc>,
        to: DateTime<Utc>,
    ) -> impl Future<Output = Result<Vec<MetricAnswer>, CloudError>> + Send;
}

/// Changing a stopped instance's type: what `start.fallback_types` uses when a start finds no
/// capacity.
pub trait Resize: Send + Sync {
    /// Changes a stopped instance's type (EC2's ModifyInstanceAttribute), for a start that
    /// falls back to another type.
    fn set_type(
        &self,
        region: &str,
        id: &str,
        instance_type: &str,
    ) -> impl Future<Output = ActionReport> + Send;
}

/// Spot migration: what moves an on-demand instance to spot capacity and back (how it was
/// launched, its images and snapshots, the replacement's launch and end, and EC2's own word on
/// an interruption).
pub trait SpotMoves: Send + Sync {
    /// How instance `id` was launched: what a replacement copies, but its user data.
    fn launch_spec(
        &self,
        region: &str,
        id: &str,
    ) -> impl Future<Output = Result<LaunchSpec, CloudError>> + Send;

    /// The user data of instance `id`, base64, if it has any: read right before a launch
    /// copies it, since it is never stored.
    fn user_data(
        &self,
        region: &str,
        id: &str,
    ) -> impl Future<Output = Result<Option<String>, CloudError>> + Send;

    /// The current status of instances; an id EC2 no longer knows is absent.
    fn describe(
        &self,
        region: &str,
        ids: &[String],
    ) -> impl Future<Output = Result<Vec<InstanceStatus>, CloudError>> + Send;

    /// Whether EC2 itself says that it is taking spot instance `id` back: its spot request's
    /// status is `marked-for-termination` (or `-stop`, `-hibernation`). What confirms an
    /// interruption warning, whose message anyone allowed to send to the queue could write.
    fn interruption_confirmed(
        &self,
        region: &str,
        id: &str,
    ) -> impl Future<Output = Result<bool, CloudError>> + Send;

    /// The instance carrying tag `key=value`, if one was launched (the newest, if several).
    fn find_tagged(
        &self,
        region: &str,
        key: &str,
        value: &str,
    ) -> impl Future<Output = Result<Option<InstanceStatus>, CloudError>> + Send;

    /// Creates an image named `name` of instance `id` with all its volumes, tagged `tags`;
    /// makes nothing when images of that name exist already, and returns their ids instead
    /// (the caller proves one is its own before adopting it).
    fn create_image(
        &self,
        region: &str,
        id: &str,
        name: &str,
        tags: &BTreeMap<String, String>,
    ) -> impl Future<Output = Result<ImageMade, CloudError>> + Send;

    /// An image's state and snapshots; `None` when it does not exist.
    fn image(
        &self,
        region: &str,
        image: &str,
    ) -> impl Future<Output = Result<Option<Image>, CloudError>> + Send;

    /// Launches one instance; returns its status.
    fn launch(
        &self,
        region: &str,
        launch: &Launch,
    ) -> impl Future<Output = Result<InstanceStatus, CloudError>> + Send;

    /// Terminates instances.
    fn terminate(&self, region: &str, ids: &[String]) -> impl Future<Output = ActionReport> + Send;

    /// Deregisters an image (its snapshots stay: [`SpotMoves::delete_snapshot`] each, after);
    /// an image already gone is not an error.
    fn deregister_image(
        &self,
        region: &str,
        image: &str,
    ) -> impl Future<Output = Result<(), CloudError>> + Send;

    /// Deletes an EBS snapshot (EC2 refuses while a registered image uses it); one already gone
    /// is not an error.
    fn delete_snapshot(
        &self,
        region: &str,
        snapshot: &str,
    ) -> impl Future<Output = Result<(), CloudError>> + Send;

    /// Every instance (not terminated), image and snapshot in `region` of ebb's own account
    /// that carries one of ebb's migration tags (`ebb:launch`, `ebb:migration`,
    /// `ebb:image-of`), whoever made it.
    fn migration_artifacts(
        &self,
        region: &str,
    ) -> impl Future<Output = Result<Vec<Artifact>, CloudError>> + Send;

    /// EC2's Spot Placement Scores (GetSpotPlacementScores, one zone each, a target capacity of
    /// one instance) of each of `types` in `region`: 1 (unlikely to succeed) to 10 (very
    /// likely), by type and zone name. A zone EC2 gives no score for is absent.
    fn placement_scores(
        &self,
        region: &str,
        types: &[String],
    ) -> impl Future<Output = Result<PlacementScores, CloudError>> + Send;
}

/// Scaling groups and the managed node groups over them: what ebb acts on through their owner,
/// never instance by instance.
pub trait ScalingGroups: Send + Sync {
    /// The Auto Scaling groups of `region` that carry ebb's opt-in tag (on the group, which
    /// also covers a tag it propagates to its members), in every account ebb watches there,
    /// with their capacity and members. A failure in any account is the `Err`: a group not
    /// listed is unknown, never gone.
    fn scaling_groups(
        &self,
        region: &str,
    ) -> impl Future<Output = Result<Vec<ScalingGroup>, CloudError>> + Send;

    /// Sets the capacity of group `name` in `region` (UpdateAutoScalingGroup), through the
    /// account that listed it; returns the call's request id.
    fn set_group_capacity(
        &self,
        region: &str,
        name: &str,
        capacity: Capacity,
    ) -> impl Future<Output = Result<Option<String>, CloudError>> + Send;

    /// Sets (`protected`) or clears the scale-in protection of the members `instances` of
    /// group `name` of `region` (SetInstanceProtection), through the account that listed it;
    /// returns the call's request id. Setting it again is harmless, so the call may be retried.
    fn set_scale_in_protection(
        &self,
        region: &str,
        name: &str,
        instances: &[String],
        protected: bool,
    ) -> impl Future<Output = Result<Option<String>, CloudError>> + Send;

    /// Sets the scaling config of EKS managed node group `node_group` (UpdateNodegroupConfig:
    /// min, desired and max), whose Auto Scaling group `group` of `region` was listed, through
    /// the account that listed it; returns EKS's update id, whose end
    /// [`ScalingGroups::node_group_update`] tells.
    fn set_node_group_capacity(
        &self,
        region: &str,
        group: &str,
        node_group: &NodeGroup,
        capacity: Capacity,
    ) -> impl Future<Output = Result<Option<String>, CloudError>> + Send;

    /// What EKS says of update `update` of `node_group` (DescribeUpdate). An update EKS does
    /// not find, or a status it does not name, is the `Err`: unknown, never done.
    fn node_group_update(
        &self,
        region: &str,
        group: &str,
        node_group: &NodeGroup,
        update: &str,
    ) -> impl Future<Output = Result<NodeGroupUpdate, CloudError>> + Send;

    /// The scaling config of `node_group` now (DescribeNodegroup): what a change whose update
    /// could not be followed is resolved from.
    fn node_group_capacity(
        &self,
        region: &str,
        group: &str,
        node_group: &NodeGroup,
    ) -> impl Future<Output = Result<Capacity, CloudError>> + Send;
}

/// Capacity reservations ebb makes for the boxes whose start found no capacity
/// (`start.reserve_capacity`).
pub trait CapacityReservations: Send + Sync {
    /// Makes a targeted On-Demand Capacity Reservation for one instance of `request.instance`'s
    /// type, zone and platform (read from it first), ending at `request.ends_at`, tagged
    /// `ebb:reservation` with the token (EC2's CreateCapacityReservation, the token as its
    /// client token, the tags in the call).
    fn reserve_capacity(
        &self,
        region: &str,
        request: &ReservationRequest,
    ) -> impl Future<Output = Result<Reservation, CloudError>> + Send;

    /// The reservations tagged `ebb:reservation=token`, in the account of `instance`
    /// (DescribeCapacityReservations): what a lost answer is resolved from.
    fn reservations(
        &self,
        region: &str,
        instance: &str,
        token: &str,
    ) -> impl Future<Output = Result<Vec<Reservation>, CloudError>> + Send;

    /// Makes stopped instance `instance` start into reservation `reservation`, or, with
    /// `None`, into any open capacity again (ModifyInstanceCapacityReservationAttributes).
    fn target_reservation(
        &self,
        region: &str,
        instance: &str,
        reservation: Option<&str>,
    ) -> impl Future<Output = ActionReport> + Send;

    /// The reservation instance `instance` is made to start into, if one is targeted
    /// (DescribeInstances).
    fn reservation_target(
        &self,
        region: &str,
        instance: &str,
    ) -> impl Future<Output = Result<Option<String>, CloudError>> + Send;

    /// Cancels reservation `reservation`, made in the account of `instance`
    /// (CancelCapacityReservation).
    fn cancel_reservation(
        &self,
        region: &str,
        instance: &str,
        reservation: &str,
    ) -> impl Future<Output = Result<(), CloudError>> + Send;

    /// Every active reservation held outside ebb (not made by ebb) in `region`, in every
    /// account ebb watches there, with its size and how much of it is in use
    /// (DescribeCapacityReservations): what `ebb advise` counts unused reserved hours from. A
    /// failure in any account is the `Err`.
    fn held_capacity(
        &self,
        region: &str,
    ) -> impl Future<Output = Result<Vec<HeldCapacity>, CloudError>> + Send;
}

/// The accelerated instance types a cloud offers, which `ebb advise` chooses from.
pub trait TypeCatalogue: Send + Sync {
    /// The accelerated instance types this cloud offers, type → facts, for the catalogue
    /// `ebb advise` chooses from. A cloud that cannot describe its types has none.
    fn instance_types(
        &self,
    ) -> impl Future<Output = Result<BTreeMap<String, TypeFacts>, CloudError>> + Send;
}

/// The prices a cloud quotes for its instance types, which `ebb report`, `/savings` and
/// `ebb advise` price its hours at before the price table (`fleet::quotes`).
pub trait PriceQuotes: Send + Sync {
    /// What the cloud quotes now for each of `types` in `region`: pay-as-you-go by the hour
    /// and each subscription term by the month, in the currency the account is billed in,
    /// quoted at `now`. A type or a term the cloud refuses to quote is left out; a call that
    /// could not be made or was not answered is the `Err`, and nothing of the region is
    /// quoted (a partial answer would read as the cloud's word on what it left out).
    fn quote(
        &self,
        region: &str,
        types: &[String],
        now: DateTime<Utc>,
    ) -> impl Future<Output = Result<Vec<PriceQuote>, CloudError>> + Send;
}

impl PriceQuotes for Lacks {
    async fn quote(
        &self,
        _region: &str,
        _types: &[String],
        _now: DateTime<Utc>,
    ) -> Result<Vec<PriceQuote>, CloudError> {
        match *self {}
    }
}

impl Resize for Lacks {
    async fn set_type(&self, _region: &str, _id: &str, _instance_type: &str) -> ActionReport {
        match *self {}
    }
}

impl SpotMoves for Lacks {
    async fn launch_spec(&self, _region: &str, _id: &str) -> Result<LaunchSpec, CloudError> {
        match *self {}
    }

    async fn user_data(&self, _region: &str, _id: &str) -> Result<Option<String>, CloudError> {
        match *self {}
    }

    async fn describe(
        &self,
        _region: &str,
        _ids: &[String],
    ) -> Result<Vec<InstanceStatus>, CloudError> {
        match *self {}
    }

    async fn interruption_confirmed(&self, _region: &str, _id: &str) -> Result<bool, CloudError> {
        match *self {}
    }

    async fn find_tagged(
        &self,
        _region: &str,
        _key: &str,
        _value: &str,
    ) -> Result<Option<InstanceStatus>, CloudError> {
        match *self {}
    }

    async fn create_image(
        &self,
        _region: &str,
        _id: &str,
        _name: &str,
        _tags: &BTreeMap<String, String>,
    ) -> Result<ImageMade, CloudError> {
        match *self {}
    }

    async fn image(&self, _region: &str, _image: &str) -> Result<Option<Image>, CloudError> {
        match *self {}
    }

    async fn launch(&self, _region: &str, _launch: &Launch) -> Result<InstanceStatus, CloudError> {
        match *self {}
    }

    async fn terminate(&self, _region: &str, _ids: &[String]) -> ActionReport {
        match *self {}
    }

    async fn deregister_image(&self, _region: &str, _image: &str) -> Result<(), CloudError> {
        match *self {}
    }

    async fn delete_snapshot(&self, _region: &str, _snapshot: &str) -> Result<(), CloudError> {
        match *self {}
    }

    async fn migration_artifacts(&self, _region: &str) -> Result<Vec<Artifact>, CloudError> {
        match *self {}
    }

    async fn placement_scores(
        &self,
        _region: &str,
        _types: &[String],
    ) -> Result<PlacementScores, CloudError> {
        match *self {}
    }
}

impl ScalingGroups for Lacks {
    async fn scaling_groups(&self, _region: &str) -> Result<Vec<ScalingGroup>, CloudError> {
        match *self {}
    }

    async fn set_group_capacity(
        &self,
        _region: &str,
        _name: &str,
        _capacity: Capacity,
    ) -> Result<Option<String>, CloudError> {
        match *self {}
    }

    async fn set_scale_in_protection(
        &self,
        _region: &str,
        _name: &str,
        _instances: &[String],
        _protected: bool,
    ) -> Result<Option<String>, CloudError> {
        match *self {}
    }

    async fn set_node_group_capacity(
        &self,
        _region: &str,
        _group: &str,
        _node_group: &NodeGroup,
        _capacity: Capacity,
    ) -> Result<Option<String>, CloudError> {
        match *self {}
    }

    async fn node_group_update(
        &self,
        _region: &str,
        _group: &str,
        _node_group: &NodeGroup,
        _update: &str,
    ) -> Result<NodeGroupUpdate, CloudError> {
        match *self {}
    }

    async fn node_group_capacity(
        &self,
        _region: &str,
        _group: &str,
        _node_group: &NodeGroup,
    ) -> Result<Capacity, CloudError> {
        match *self {}
    }
}

impl CapacityReservations for Lacks {
    async fn reserve_capacity(
        &self,
        _region: &str,
        _request: &ReservationRequest,
    ) -> Result<Reservation, CloudError> {
        match *self {}
    }

    async fn reservations(
        &self,
        _region: &str,
        _instance: &str,
        _token: &str,
    ) -> Result<Vec<Reservation>, CloudError> {
        match *self {}
    }

    async fn target_reservation(
        &self,
        _region: &str,
        _instance: &str,
        _reservation: Option<&str>,
    ) -> ActionReport {
        match *self {}
    }

    async fn reservation_target(
        &self,
        _region: &str,
        _instance: &str,
    ) -> Result<Option<String>, CloudError> {
        match *self {}
    }

    async fn cancel_reservation(
        &self,
        _region: &str,
        _instance: &str,
        _reservation: &str,
    ) -> Result<(), CloudError> {
        match *self {}
    }

    async fn held_capacity(&self, _region: &str) -> Result<Vec<HeldCapacity>, CloudError> {
        match *self {}
    }
}

impl TypeCatalogue for Lacks {
    async fn instance_types(&self) -> Result<BTreeMap<String, TypeFacts>, CloudError> {
        match *self {}
    }
}

impl InstanceMetrics for Lacks {
    async fn metric_maxima(
        &self,
        _region: &str,
        _queries: &[MetricQuery],
        _from: DateTime<Utc>,
        _to: DateTime<Utc>,
    ) -> Result<Vec<MetricAnswer>, CloudError> {
        match *self {}
    }
}
