//! The cloud as the reconciler sees it: a [`Provider`] lists instances, reads their GPU
//! utilisation and prices, and stops, hibernates, starts and tags them. What only some clouds
//! can do (spot moves, scaling groups, capacity reservations, resizes, a type catalogue) is a
//! trait of [`capability`] each cloud implements or lacks.
//!
//! [`aws`] is the EC2 and CloudWatch implementation, [`alibaba`] the Alibaba Cloud ECS and
//! CloudMonitor one, [`tencent`] Tencent Cloud's (CVM and Cloud Monitor). Every call that
//! changes an instance reports per instance ([`ActionReport`]): one instance a cloud refuses
//! never blocks the others.

pub mod alibaba;
pub mod aws;
mod batches;
pub mod capability;
mod error;
pub mod jupyter;
mod launch;
mod node_groups;
pub mod pacing;
pub mod prices;
pub mod prometheus;
mod redact;
mod reservation;
pub mod sim;
pub mod tencent;

pub use capability::{
    CapacityReservations, InstanceMetrics, Lacks, MetricAnswer, MetricQuery, PriceQuotes, Resize,
    ScalingGroups, SpotMoves, TypeCatalogue,
};
pub use error::{CloudError, ErrorKind};
pub use launch::{
    Artifact, ArtifactKind, Image, ImageMade, ImageState, InstanceStatus, Launch, LaunchSpec,
    Market, SPOT_TERMINATION,
};
pub use node_groups::{NodeGroupUpdate, UpdateStatus};
pub use prices::{PriceTable, PricesError};
pub use redact::{redact_secrets, redact_userinfo};
pub use reservation::{Reservation, ReservationRequest, ReservationState};

use crate::fleet::{Cloud, Instance, Levers, Sample, StoppedMode};
use chrono::{DateTime, Utc};
use std::any::TypeId;
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
    /// For a stop: what a read right after the call found (EC2: always stopped without
    /// charge; Alibaba and Tencent report the mode the stop took once it has stopped,
    /// [`StoppedMode::Charging`] for a family or account that cannot stop without charge).
    /// `None` for every other call.
    pub read_back: Option<StopReadBack>,
}

/// What a read right after a stop found of the instance.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum StopReadBack {
    /// Stopped, billed as the cloud says.
    Stopped(StoppedMode),
    /// Not stopped yet, or not read: Alibaba and Tencent say how a stopped instance is billed
    /// only once it has stopped, so that is read from a later listing, and the stop's outcome
    /// is written then (`reconcile/resolve.rs`).
    Later,
}

impl StopReadBack {
    /// What a read found from the stopped mode it listed, `None` while not stopped.
    pub fn of(listed: Option<StoppedMode>) -> StopReadBack {
        listed.map_or(StopReadBack::Later, StopReadBack::Stopped)
    }
}

/// One instance the cloud refused a change for.
#[derive(Debug, Clone)]
pub struct Failed {
    /// The instance id.
    pub instance: String,
    /// Why.
    pub error: CloudError,
}

/// A cloud ebb can watch and act on: what every cloud does (list, read again, read GPUs and
/// prices, stop, start, tag), and an accessor for each capability some clouds have (in
/// [`capability`]), which answers `None` on a cloud whose type for it is [`Lacks`].
///
/// Methods that change instances take one region and many ids, and never fail as a whole:
/// each instance ends in [`ActionReport::done`] or [`ActionReport::failed`].
pub trait Provider: Send + Sync {
    /// Changing a stopped instance's type.
    type Resize: Resize;
    /// Spot migration's calls.
    type SpotMoves: SpotMoves;
    /// Scaling groups and node groups.
    type ScalingGroups: ScalingGroups;
    /// Capacity reservations.
    type CapacityReservations: CapacityReservations;
    /// The type catalogue.
    type TypeCatalogue: TypeCatalogue;
    /// Metrics of instances beside the GPUs'.
    type InstanceMetrics: InstanceMetrics;
    /// The prices it quotes.
    type PriceQuotes: PriceQuotes;

    /// Its resizes, if it has them.
    fn resizer(&self) -> Option<&Self::Resize>;

    /// Its spot moves, if it has them.
    fn spot_moves(&self) -> Option<&Self::SpotMoves>;

    /// Its scaling groups, if it has them.
    fn groups(&self) -> Option<&Self::ScalingGroups>;

    /// Its capacity reservations, if it has them.
    fn capacity_reservations(&self) -> Option<&Self::CapacityReservations>;

    /// Its type catalogue, if it can describe its types.
    fn type_catalogue(&self) -> Option<&Self::TypeCatalogue>;

    /// Its instances' metrics in the cloud's monitoring service, if ebb reads them.
    fn instance_metrics(&self) -> Option<&Self::InstanceMetrics>;

    /// Its price quotes, if it quotes prices.
    fn price_quotes(&self) -> Option<&Self::PriceQuotes>;

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
}

/// What ebb can do on each cloud, from what the cloud's provider implements: a provider whose
/// [`Provider::SpotMoves`] is not [`Lacks`] moves instances to spot capacity.
pub fn levers() -> Levers {
    let mut levers = Levers::default();
    for (cloud, moves) in [
        (
            Cloud::Aws,
            has::<<aws::AwsProvider as Provider>::SpotMoves>(),
        ),
        (
            Cloud::Alibaba,
            has::<<alibaba::AlibabaProvider as Provider>::SpotMoves>(),
        ),
        (
            Cloud::Tencent,
            has::<<tencent::TencentProvider as Provider>::SpotMoves>(),
        ),
    ] {
        if moves {
            levers.spot_moves.insert(cloud);
        }
    }
    levers
}

/// `text` as an instance's private IP address; `None` when a cloud's answer holds something
/// that is not an address (then no URL is made from it).
pub(crate) fn ip_of(text: &str) -> Option<std::net::IpAddr> {
    text.trim().parse().ok()
}

/// Whether capability type `C` is one a provider has.
fn has<C: 'static>() -> bool {
    TypeId::of::<C>() != TypeId::of::<Lacks>()
}

/// Spot Placement Scores (1 to 10) by instance type and zone name.
pub type PlacementScores = BTreeMap<(String, String), u8>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_levers_are_what_each_clouds_provider_implements() {
        let spot_moves = levers().spot_moves;
        assert!(spot_moves.contains(Cloud::Aws));
        assert!(!spot_moves.contains(Cloud::Alibaba));
        assert!(!spot_moves.contains(Cloud::Tencent));
    }
}
