//! What spot migrations need from the cloud beside listing and stopping: an instance's launch
//! settings, images, launches in a chosen market, and terminations.

use crate::fleet::{InstanceState, Lifecycle};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};

/// How an instance was launched, read from it so that its replacement is launched alike.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LaunchSpec {
    /// Its instance type.
    pub instance_type: String,
    /// Its availability zone.
    pub zone: String,
    /// Its subnet.
    pub subnet: String,
    /// A subnet of the same VPC in each zone (its own subnet for its own zone), where a
    /// replacement may go when another zone sells spot capacity cheaper.
    pub subnets_by_zone: BTreeMap<String, String>,
    /// Its security group ids.
    pub security_groups: Vec<String>,
    /// The ARN of its IAM instance profile.
    pub instance_profile: Option<String>,
    /// Its key pair.
    pub key_name: Option<String>,
    /// Its user data, base64 as EC2 returns and takes it. It often holds secrets, so it is
    /// never stored with the rest: [`crate::cloud::Provider::user_data`] reads it again from
    /// the instance right before each launch.
    #[serde(skip)]
    pub user_data: Option<String>,
    /// Its tags, without the ones AWS reserves (`aws:*`).
    pub tags: BTreeMap<String, String>,
    /// Its EBS volumes: an image found after a crash is adopted only if its snapshots were
    /// taken from these.
    #[serde(default)]
    pub volumes: Vec<String>,
    /// Those of its volumes that outlive its termination (`DeleteOnTermination` false): a
    /// reclaim refuses such a box, whose termination would leave them behind, still paid.
    #[serde(default)]
    pub kept_at_termination: Vec<String>,
    /// Its primary private IPv4 address: a restore asks for it again (a spot replacement
    /// cannot: its original still holds it).
    #[serde(default)]
    pub private_ip: Option<String>,
    /// It was launched with hibernation enabled. EC2 does not support images of such a box (one
    /// launched from them may not be reachable), so a reclaim refuses it.
    #[serde(default)]
    pub hibernation: bool,
}

/// One instance as a migration follows it.
#[derive(Debug, Clone, PartialEq)]
pub struct InstanceStatus {
    /// Its id.
    pub id: String,
    /// Its state.
    pub state: InstanceState,
    /// On-demand or spot.
    pub lifecycle: Lifecycle,
    /// Its instance type.
    pub instance_type: String,
    /// Its availability zone.
    pub zone: String,
    /// The code of EC2's reason for its last state change (`Server.SpotInstanceTermination`
    /// when spot capacity was reclaimed).
    pub state_reason: Option<String>,
    /// The image it was launched from.
    pub image: Option<String>,
}

impl InstanceStatus {
    /// Whether EC2 reclaimed it for spot capacity.
    pub fn reclaimed(&self) -> bool {
        matches!(
            self.state,
            InstanceState::ShuttingDown | InstanceState::Terminated
        ) && self
            .state_reason
            .as_deref()
            .is_some_and(|r| r.starts_with(SPOT_TERMINATION))
    }
}

/// EC2's state reason code when it takes spot capacity back.
pub const SPOT_TERMINATION: &str = "Server.SpotInstanceTermination";

/// An image, as a migration follows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Image {
    /// Where it is.
    pub state: ImageState,
    /// The EBS snapshots it consists of.
    pub snapshots: Vec<String>,
    /// The volume each snapshot was taken from, as EC2 records it (it cannot be set by whoever
    /// made the snapshot): snapshot id → volume id.
    pub snapshot_volumes: BTreeMap<String, String>,
    /// The snapshots EC2 reports `completed` (not pending, not in error); one EC2 no longer
    /// knows is not among them.
    pub completed_snapshots: BTreeSet<String>,
    /// The volumes its snapshots restore to, size and type, as its block device mappings say:
    /// the disks of the box it was made of, and at most what it stores.
    pub volumes: Vec<crate::fleet::money::Volume>,
    /// Its tags.
    pub tags: BTreeMap<String, String>,
}

/// What a request to create an image did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ImageMade {
    /// The image was made: its id.
    Made(String),
    /// Nothing was made: images of that name exist in the account already (made by an earlier
    /// attempt whose answer was lost, or by anyone): their ids, to prove before adopting one.
    Named(Vec<String>),
}

/// Where an image is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ImageState {
    /// Being created.
    Pending,
    /// Ready to launch from.
    Available,
    /// Creation failed (or the image was deregistered).
    Failed,
}

/// A market to launch in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Market {
    /// Spot capacity, reclaimable with two minutes' notice.
    Spot,
    /// On-demand capacity.
    OnDemand,
}

impl Market {
    /// The name in `spot_migrations.market` and in output.
    pub fn as_str(self) -> &'static str {
        match self {
            Market::Spot => "spot",
            Market::OnDemand => "on-demand",
        }
    }

    /// The market named `s`.
    pub fn parse(s: &str) -> Option<Market> {
        match s {
            "spot" => Some(Market::Spot),
            "on-demand" => Some(Market::OnDemand),
            _ => None,
        }
    }
}

/// One replacement instance to launch.
#[derive(Debug, Clone, PartialEq)]
pub struct Launch {
    /// The image to launch from.
    pub image: String,
    /// Settings copied from the original (its type and subnet are replaced below).
    pub spec: LaunchSpec,
    /// The instance type.
    pub instance_type: String,
    /// The subnet (its zone is the replacement's zone).
    pub subnet: String,
    /// Spot or on-demand.
    pub market: Market,
    /// Tags beside the copied ones; one of them names this launch, so that a launch repeated
    /// after a crash finds the instance instead of making a second one.
    pub tags: BTreeMap<String, String>,
    /// EC2's idempotency token for the call.
    pub client_token: String,
    /// The primary private IPv4 address to ask for; `None` lets EC2 choose.
    pub private_ip: Option<String>,
}

/// What kind of cloud resource an [`Artifact`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ArtifactKind {
    /// An instance tagged `ebb:launch` (a replacement, or something made to look like one).
    Instance,
    /// An image tagged `ebb:image-of`: a migration's, or a reclaim's.
    Image,
    /// An EBS snapshot tagged `ebb:image-of`.
    Snapshot,
}

impl ArtifactKind {
    /// The name shown.
    pub fn as_str(self) -> &'static str {
        match self {
            ArtifactKind::Instance => "instance",
            ArtifactKind::Image => "image",
            ArtifactKind::Snapshot => "snapshot",
        }
    }
}

/// A resource in ebb's own account carrying ebb's migration tags, whether or not a migration
/// tracks it (`ebb spot-moves --orphans`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Artifact {
    /// Instance, image or snapshot.
    pub kind: ArtifactKind,
    /// Its region.
    pub region: String,
    /// Its id.
    pub id: String,
    /// Its tags.
    pub tags: BTreeMap<String, String>,
    /// An instance's state.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub state: Option<InstanceState>,
    /// The image an instance runs, or the one a snapshot was made for (from EC2's description
    /// of a snapshot CreateImage took).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub image: Option<String>,
    /// The idempotency token an instance was launched with.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub client_token: Option<String>,
}
