//! The cloud as the reconciler sees it: a [`Provider`] lists instances, reads their GPU
//! utilisation and prices, and stops, hibernates, starts and tags them; it lists the Auto
//! Scaling groups ebb manages and sets their capacity, through EKS for a managed node group's.
//!
//! [`aws`] is the EC2 and CloudWatch implementation, [`alibaba`] the Alibaba Cloud ECS and
//! CloudMonitor one, [`tencent`] Tencent Cloud's (CVM and Cloud Monitor). Every call that
//! changes an instance
//! reports per instance ([`ActionReport`]): one instance EC2 refuses never blocks the others.

pub mod alibaba;
pub mod aws;
mod batches;
mod error;
mod launch;
mod node_groups;
pub mod pacing;
pub mod prices;
pub mod prometheus;
mod redact;
mod reservation;
pub mod sim;
pub mod tencent;

pub use error::{CloudError, ErrorKind};
pub use launch::{
    Artifact, ArtifactKind, Image, ImageMade, ImageState, InstanceStatus, Launch, LaunchSpec,
    Market, SPOT_TERMINATION,
};
pub use node_groups::{NodeGroupUpdate, UpdateStatus};
pub use prices::{PriceTable, PricesError};
pub use redact::{redact_secrets, redact_userinfo};
pub use reservation::{Reservation, ReservationRequest, ReservationState};

use crate::fleet::{Capacity, Instance, NodeGroup, Sample, ScalingGroup, StoppedMode, TypeFacts};
use chrono::{DateTime, Utc};
use std::collections::{BTreeMap, HashMap};
use std::future::Future;

/// The answer of one GPU read: readings by instance, and the instances that could not be read.
#[derive(Debug, Clone, Default)]
pub struct GpuReadings {
    /// Readings by instance id, oldest first.
    pub samples: HashMap<String, Vec<Sample>>,
    /// The instances whose query failed or was not answered, with why: their utilisation is
    /// unknown, never "no data" (a busy box must not pass for an idle one).
    pub unread: HashMap<String, String>,
}

/// What the provider saw in one listing.
#[derive(Debug, Clone, Default)]
pub struct Inventory {
    /// The instances, region by region.
    pub instances: Vec<Instance>,
    /// Regions listed completely, in every account: only in these may an instance that was
    /// not seen be taken as gone.
    pub complete_regions: Vec<String>,
    /// Regions (or accounts in them) that could not be listed, with why.
    pub failures: Vec<ScopeFailure>,
    /// What listed instances keep paying for while stopped (volumes, Elastic IPs), by id; an
    /// instance absent, or a fact `None`, was not read.
    pub attached: HashMap<String, crate::fleet::money::Attached>,
}

/// A region of one account that could not be listed.
#[derive(Debug, Clone)]
pub struct ScopeFailure {
    /// The region.
    pub region: String,
    /// The account (the role ARN), or `None` for ebb's own credentials.
    pub account: Option<String>,
    /// What went wrong.
    pub error: CloudError,
}

// The price data belong to the pure core, which the spot ranking and the replay share.
pub use crate::fleet::TypePrice;

/// How [`Provider::stop`] stops instances.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum StopKind {
    /// A plain stop: what runs in memory is lost.
    Stop,
    /// A hibernation, memory kept on the root volume, of the instances launched with
    /// hibernation configured; the others are stopped plainly, which [`Done::fallback`] says.
    Hibernate,
}

/// What a call that changes instances did, instance by instance.
#[derive(Debug, Default)]
pub struct ActionReport {
    /// The instances the cloud accepted the change for.
    pub done: Vec<Done>,
    /// The instances it refused, each with its own error.
    pub failed: Vec<Failed>,
}

impl ActionReport {
    /// Every id of `ids` failed with `error`: a call refused before it was made, or one the
    /// cloud refused as a whole.
    pub fn all_failed(ids: &[String], error: &CloudError) -> ActionReport {
        ActionReport {
            done: Vec::new(),
            failed: ids
                .iter()
                .map(|instance| Failed {
                    instance: instance.clone(),
                    error: error.clone(),
                })
                .collect(),
        }
    }
}

/// One instance the cloud accepted a change for.
#[derive(Debug, Clone, PartialEq)]
pub struct Done {
    /// The instance id.
    pub instance: String,
    /// The request id of the call that did it, for the audit log.
    pub request_id: Option<String>,
    /// Why something other than what was asked was done (a stop instead of a hibernation).
    pub fallback: Option<String>,
    /// The instance was already stopped when the stop arrived (EC2's previous state): the call
    /// changed nothing, so the stop is not ebb's.
    pub already: bool,
    /// For a stop: how the cloud says the instance is billed once stopped, read back after
    /// the call (EC2: always [`StoppedMode::NoCharge`]; Alibaba and Tencent report the mode
    /// the stop took, [`StoppedMode::Charging`] for a family or account that cannot stop
    /// without charge). `None` for every other call.
    pub stopped_mode: Option<StoppedMode>,
}

/// One instance the cloud refused a change for.
#[derive(Debug, Clone)]
pub struct Failed {
    /// The instance id.
    pub instance: String,
    /// Why.
    pub error: CloudError,
}

/// A cloud ebb can watch and act on.
///
/// Methods that change instances take one region and many ids, and never fail as a whole:
/// each instance ends in [`ActionReport::done`] or [`ActionReport::failed`]. What only EC2 has
/// in ebb (spot migration's images and launches, scaling groups, capacity reservations,
/// placement scores) is refused by default, and lists nothing, for the clouds that lack it.
pub trait Provider: Send + Sync {
    /// Lists the instances ebb manages in every region and account it watches.
    fn instances(&self) -> impl Future<Output = Inventory> + Send;

    /// Instances `ids` of `region` read again, as [`Provider::instances`] would list them now
    /// (one gone or no longer managed is absent), without their GPU facts: what ebb checks right
    /// before it stops one, since people change tags between a listing and the calls.
    fn reread(
        &self,
        region: &str,
        ids: &[String],
    ) -> impl Future<Output = Result<Vec<Instance>, CloudError>> + Send;

    /// GPU utilisation of `instances` (ids in `region`) from `from` to `to`: one reading per
    /// period, the maximum over each instance's GPUs, oldest first. Instances read without
    /// data are absent from [`GpuReadings::samples`] or empty there; an instance whose own
    /// query failed, or got no answer, is in [`GpuReadings::unread`] (an error of the whole
    /// call is the `Err`).
    fn gpu_utilisation(
        &self,
        region: &str,
        instances: &[String],
        from: DateTime<Utc>,
        to: DateTime<Utc>,
    ) -> impl Future<Output = Result<GpuReadings, CloudError>> + Send;

    /// Current prices of `types` in `region`.
    fn prices(
        &self,
        region: &str,
        types: &[String],
        now: DateTime<Utc>,
    ) -> impl Future<Output = Result<Vec<TypePrice>, CloudError>> + Send;

    /// Stops instances, plainly or hibernating as `kind` says.
    fn stop(
        &self,
        region: &str,
        ids: &[String],
        kind: StopKind,
    ) -> impl Future<Output = ActionReport> + Send;

    /// Starts instances.
    fn start(&self, region: &str, ids: &[String]) -> impl Future<Output = ActionReport> + Send;

    /// Changes a stopped instance's type (EC2's ModifyInstanceAttribute), for a start that
    /// falls back to another type.
    fn set_type(
        &self,
        region: &str,
        id: &str,
        instance_type: &str,
    ) -> impl Future<Output = ActionReport> + Send;

    /// Sets tags on instances.
    fn tag(
        &self,
        region: &str,
        ids: &[String],
        tags: &BTreeMap<String, String>,
    ) -> impl Future<Output = ActionReport> + Send;

    /// Removes tags (by key) from instances.
    fn untag(
        &self,
        region: &str,
        ids: &[String],
        keys: &[String],
    ) -> impl Future<Output = ActionReport> + Send;

    /// How instance `id` was launched: what a replacement copies, but its user data.
    fn launch_spec(
        &self,
        region: &str,
        id: &str,
    ) -> impl Future<Output = Result<LaunchSpec, CloudError>> + Send {
        let _ = (region, id);
        async move { Err(aws_only("launch_spec")) }
    }

    /// The user data of instance `id`, base64, if it has any: read right before a launch
    /// copies it, since it is never stored.
    fn user_data(
        &self,
        region: &str,
        id: &str,
    ) -> impl Future<Output = Result<Option<String>, CloudError>> + Send {
        let _ = (region, id);
        async move { Err(aws_only("user_data")) }
    }

    /// The current status of instances; an id EC2 no longer knows is absent.
    fn describe(
        &self,
        region: &str,
        ids: &[String],
    ) -> impl Future<Output = Result<Vec<InstanceStatus>, CloudError>> + Send {
        let _ = (region, ids);
        async move { Err(aws_only("describe")) }
    }

    /// Whether EC2 itself says that it is taking spot instance `id` back: its spot request's
    /// status is `marked-for-termination` (or `-stop`, `-hibernation`). What confirms an
    /// interruption warning, whose message anyone allowed to send to the queue could write.
    fn interruption_confirmed(
        &self,
        region: &str,
        id: &str,
    ) -> impl Future<Output = Result<bool, CloudError>> + Send {
        let _ = (region, id);
        async move { Err(aws_only("interruption_confirmed")) }
    }

    /// The instance carrying tag `key=value`, if one was launched (the newest, if several).
    fn find_tagged(
        &self,
        region: &str,
        key: &str,
        value: &str,
    ) -> impl Future<Output = Result<Option<InstanceStatus>, CloudError>> + Send {
        let _ = (region, key, value);
        async move { Err(aws_only("find_tagged")) }
    }

    /// Creates an image named `name` of instance `id` with all its volumes, tagged `tags`;
    /// makes nothing when images of that name exist already, and returns their ids instead
    /// (the caller proves one is its own before adopting it).
    fn create_image(
        &self,
        region: &str,
        id: &str,
        name: &str,
        tags: &BTreeMap<String, String>,
    ) -> impl Future<Output = Result<ImageMade, CloudError>> + Send {
        let _ = (region, id, name, tags);
        async move { Err(aws_only("create_image")) }
    }

    /// An image's state and snapshots; `None` when it does not exist.
    fn image(
        &self,
        region: &str,
        image: &str,
    ) -> impl Future<Output = Result<Option<Image>, CloudError>> + Send {
        let _ = (region, image);
        async move { Err(aws_only("image")) }
    }

    /// Launches one instance; returns its status.
    fn launch(
        &self,
        region: &str,
        launch: &Launch,
    ) -> impl Future<Output = Result<InstanceStatus, CloudError>> + Send {
        let _ = (region, launch);
        async move { Err(aws_only("launch")) }
    }

    /// Terminates instances.
    fn terminate(&self, region: &str, ids: &[String]) -> impl Future<Output = ActionReport> + Send {
        let _ = region;
        let ids = ids.to_vec();
        async move { ActionReport::all_failed(&ids, &aws_only("terminate")) }
    }

    /// Deregisters an image (its snapshots stay: [`Provider::delete_snapshot`] each, after);
    /// an image already gone is not an error.
    fn deregister_image(
        &self,
        region: &str,
        image: &str,
    ) -> impl Future<Output = Result<(), CloudError>> + Send {
        let _ = (region, image);
        async move { Err(aws_only("deregister_image")) }
    }

    /// Deletes an EBS snapshot (EC2 refuses while a registered image uses it); one already gone
    /// is not an error.
    fn delete_snapshot(
        &self,
        region: &str,
        snapshot: &str,
    ) -> impl Future<Output = Result<(), CloudError>> + Send {
        let _ = (region, snapshot);
        async move { Err(aws_only("delete_snapshot")) }
    }

    /// Every instance (not terminated), image and snapshot in `region` of ebb's own account
    /// that carries one of ebb's migration tags (`ebb:launch`, `ebb:migration`,
    /// `ebb:image-of`), whoever made it.
    fn migration_artifacts(
        &self,
        region: &str,
    ) -> impl Future<Output = Result<Vec<Artifact>, CloudError>> + Send {
        let _ = region;
        async move { Ok(Vec::new()) }
    }

    /// The Auto Scaling groups of `region` that carry ebb's opt-in tag (on the group, which
    /// also covers a tag it propagates to its members), in every account ebb watches there,
    /// with their capacity and members. A failure in any account is the `Err`: a group not
    /// listed is unknown, never gone.
    fn scaling_groups(
        &self,
        region: &str,
    ) -> impl Future<Output = Result<Vec<ScalingGroup>, CloudError>> + Send {
        let _ = region;
        async move { Ok(Vec::new()) }
    }

    /// The accelerated instance types this cloud offers, type → facts, for the catalogue
    /// `ebb advise` chooses from. A cloud that cannot describe its types has none.
    fn instance_types(
        &self,
    ) -> impl Future<Output = Result<BTreeMap<String, TypeFacts>, CloudError>> + Send {
        async { Ok(BTreeMap::new()) }
    }

    /// Sets the capacity of group `name` in `region` (UpdateAutoScalingGroup), through the
    /// account that listed it; returns the call's request id.
    fn set_group_capacity(
        &self,
        region: &str,
        name: &str,
        capacity: Capacity,
    ) -> impl Future<Output = Result<Option<String>, CloudError>> + Send {
        let _ = (region, name, capacity);
        async move { Err(aws_only("set_group_capacity")) }
    }

    /// Sets the scaling config of EKS managed node group `node_group` (UpdateNodegroupConfig:
    /// min, desired and max), whose Auto Scaling group `group` of `region` was listed, through
    /// the account that listed it; returns EKS's update id, whose end
    /// [`Provider::node_group_update`] tells.
    fn set_node_group_capacity(
        &self,
        region: &str,
        group: &str,
        node_group: &NodeGroup,
        capacity: Capacity,
    ) -> impl Future<Output = Result<Option<String>, CloudError>> + Send {
        let _ = (region, group, node_group, capacity);
        async move { Err(aws_only("set_node_group_capacity")) }
    }

    /// What EKS says of update `update` of `node_group` (DescribeUpdate). An update EKS does
    /// not find, or a status it does not name, is the `Err`: unknown, never done.
    fn node_group_update(
        &self,
        region: &str,
        group: &str,
        node_group: &NodeGroup,
        update: &str,
    ) -> impl Future<Output = Result<NodeGroupUpdate, CloudError>> + Send {
        let _ = (region, group, node_group, update);
        async move { Err(aws_only("node_group_update")) }
    }

    /// The scaling config of `node_group` now (DescribeNodegroup): what a change whose update
    /// could not be followed is resolved from.
    fn node_group_capacity(
        &self,
        region: &str,
        group: &str,
        node_group: &NodeGroup,
    ) -> impl Future<Output = Result<Capacity, CloudError>> + Send {
        let _ = (region, group, node_group);
        async move { Err(aws_only("node_group_capacity")) }
    }

    /// Makes a targeted On-Demand Capacity Reservation for one instance of `request.instance`'s
    /// type, zone and platform (read from it first), ending at `request.ends_at`, tagged
    /// `ebb:reservation` with the token (EC2's CreateCapacityReservation, the token as its
    /// client token, the tags in the call). A cloud without reservations refuses.
    fn reserve_capacity(
        &self,
        region: &str,
        request: &ReservationRequest,
    ) -> impl Future<Output = Result<Reservation, CloudError>> + Send {
        let _ = (region, request);
        async move { Err(aws_only("reserve_capacity")) }
    }

    /// The reservations tagged `ebb:reservation=token`, in the account of `instance`
    /// (DescribeCapacityReservations): what a lost answer is resolved from.
    fn reservations(
        &self,
        region: &str,
        instance: &str,
        token: &str,
    ) -> impl Future<Output = Result<Vec<Reservation>, CloudError>> + Send {
        let _ = (region, instance, token);
        async move { Err(aws_only("reservations")) }
    }

    /// Makes stopped instance `instance` start into reservation `reservation`, or, with
    /// `None`, into any open capacity again (ModifyInstanceCapacityReservationAttributes).
    fn target_reservation(
        &self,
        region: &str,
        instance: &str,
        reservation: Option<&str>,
    ) -> impl Future<Output = ActionReport> + Send {
        let _ = (region, reservation);
        let instance = [instance.to_string()];
        async move { ActionReport::all_failed(&instance, &aws_only("target_reservation")) }
    }

    /// The reservation instance `instance` is made to start into, if one is targeted
    /// (DescribeInstances).
    fn reservation_target(
        &self,
        region: &str,
        instance: &str,
    ) -> impl Future<Output = Result<Option<String>, CloudError>> + Send {
        let _ = (region, instance);
        async move { Err(aws_only("reservation_target")) }
    }

    /// Cancels reservation `reservation`, made in the account of `instance`
    /// (CancelCapacityReservation).
    fn cancel_reservation(
        &self,
        region: &str,
        instance: &str,
        reservation: &str,
    ) -> impl Future<Output = Result<(), CloudError>> + Send {
        let _ = (region, instance, reservation);
        async move { Err(aws_only("cancel_reservation")) }
    }
    /// EC2's Spot Placement Scores (GetSpotPlacementScores, one zone each, a target capacity of
    /// one instance) of each of `types` in `region`: 1 (unlikely to succeed) to 10 (very
    /// likely), by type and zone name. A zone EC2 gives no score for is absent.
    fn placement_scores(
        &self,
        region: &str,
        types: &[String],
    ) -> impl Future<Output = Result<PlacementScores, CloudError>> + Send {
        let _ = (region, types);
        async move { Err(aws_only("placement_scores")) }
    }
}

/// Why a call only EC2 has is refused by a cloud whose provider leaves it to the default.
fn aws_only(operation: &'static str) -> CloudError {
    CloudError::other(
        operation,
        "not available on this cloud: spot migration, images, scaling groups and capacity \
         reservations are AWS-only in ebb",
    )
}

/// Spot Placement Scores (1 to 10) by instance type and zone name.
pub type PlacementScores = BTreeMap<(String, String), u8>;
