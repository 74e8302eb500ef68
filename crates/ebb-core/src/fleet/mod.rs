//! The fleet as ebb sees it: instances, their owners, their GPU utilisation and prices. It
//! depends on no other module of ebb; the snapshot file a fleet can be read from has a module
//! of its own.

pub mod activity;
pub mod billing;
pub mod capacity_reads;
pub mod catalogue;
pub mod group;
pub mod levers;
pub mod money;
pub mod owner;
pub mod pools;
pub mod quotes;
pub mod rank;

pub use billing::{
    Billing, BillingModel, Charge, Cloud, HeldReservation, ReservationKind, ReservationTerms,
    StopSaving, StoppedMode,
};
pub use capacity_reads::{CapacityRead, HeldCapacity};
pub use catalogue::{Catalogue, TypeFacts};
pub use group::{Capacity, GroupMember, NodeGroup, ScalingGroup};
pub use levers::{Clouds, Levers};
pub use owner::{Owner, OwnerKind};
pub use pools::{Pool, PoolEvent, PoolEventKind, PoolHistory, PoolSummary};
pub use quotes::PriceQuote;
pub use rank::TypePrice;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

/// Every instance ebb can see, with current prices.
#[derive(Debug, Clone, Default)]
pub struct Fleet {
    /// The instances, in the order the provider listed them.
    pub instances: Vec<Instance>,
    /// Prices by region and instance type.
    pub prices: Prices,
    /// The instances whose GPU utilisation was wanted but could not be read (an error, a
    /// throttle, a denial, a timeout): instance id → why. Such an instance's `gpu_util` says
    /// nothing, unlike a read that succeeded and found no samples: whether it is idle or busy
    /// is unknown.
    pub gpu_unread: HashMap<String, Arc<str>>,
    /// What instances keep paying for while stopped (their volumes and Elastic IPs), by id,
    /// where known: from a snapshot's `volumes` and `elastic_ips`, or as Postgres keeps them.
    /// An instance absent, or a fact `None`, was not read.
    pub attached: HashMap<String, money::Attached>,
    /// What ebb can do on each cloud beyond stopping and starting (the default: nothing).
    pub levers: Levers,
    /// The activity signals read, beside the GPUs.
    pub activity: activity::ActivityReadings,
}

/// $/hour prices: region → instance type → price.
pub type Prices = BTreeMap<String, BTreeMap<String, Price>>;

/// The hourly price of one instance type in one region, in the currency the region's cloud
/// bills in (`Cloud::currency`: dollars on EC2, yuan on Alibaba Cloud and Tencent Cloud).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Price {
    /// On-demand, an hour.
    #[serde(default)]
    pub on_demand: Option<f64>,
    /// The current spot price of an hour (the cheapest availability zone).
    #[serde(default)]
    pub spot: Option<f64>,
}

/// An EC2 instance state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum InstanceState {
    /// Starting.
    Pending,
    /// Running.
    Running,
    /// Stopping (or hibernating).
    Stopping,
    /// Stopped.
    Stopped,
    /// Being terminated.
    ShuttingDown,
    /// Gone for good.
    Terminated,
}

impl InstanceState {
    /// The EC2 name of the state.
    pub fn as_str(self) -> &'static str {
        match self {
            InstanceState::Pending => "pending",
            InstanceState::Running => "running",
            InstanceState::Stopping => "stopping",
            InstanceState::Stopped => "stopped",
            InstanceState::ShuttingDown => "shutting-down",
            InstanceState::Terminated => "terminated",
        }
    }
}

/// How an instance is billed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Lifecycle {
    /// On-demand.
    OnDemand,
    /// Spot.
    Spot,
}

impl Lifecycle {
    /// The snapshot's name of the lifecycle.
    pub fn as_str(self) -> &'static str {
        match self {
            Lifecycle::OnDemand => "on-demand",
            Lifecycle::Spot => "spot",
        }
    }
}

/// A GPU at or above this utilisation, percent, counts in a reading's [`Sample::gpus_busy`]
/// (and is demand in `ebb replay`, unless `--busy-threshold` says otherwise).
pub const GPU_BUSY_PERCENT: f64 = 5.0;

/// One GPU reading of an instance: the busiest GPU's utilisation and, when the source gives
/// them, the GPU memory used and how many GPUs were busy.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Sample {
    /// When it was taken.
    pub at: DateTime<Utc>,
    /// The utilisation of the busiest GPU, percent, 0 to 100.
    pub percent: f64,
    /// The memory used on the GPU that held the most, MiB; `None` when the source does not
    /// say (the CloudWatch agent without its GPU memory metric, a CSV without the column).
    #[serde(default)]
    pub memory_mib: Option<u32>,
    /// How many of the instance's GPUs were busy (at or above [`GPU_BUSY_PERCENT`]); `None`
    /// when the source does not say.
    #[serde(default)]
    pub gpus_busy: Option<u16>,
}

impl Sample {
    /// A reading of the busiest GPU's utilisation alone (a source that gives nothing else).
    pub fn new(at: DateTime<Utc>, percent: f64) -> Sample {
        Sample {
            at,
            percent,
            memory_mib: None,
            gpus_busy: None,
        }
    }
}

/// The GPUs of an instance type.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Gpus {
    /// How many.
    pub count: u32,
    /// The model, with its maker (`NVIDIA A10G`).
    pub model: String,
    /// Memory per GPU, MiB.
    pub memory_mib: u32,
}

/// One instance and what the cloud says about it.
#[derive(Debug, Clone)]
pub struct Instance {
    /// The instance id (`i-...`).
    pub id: String,
    /// Its region.
    pub region: String,
    /// Its instance type (`g5.xlarge`).
    pub instance_type: String,
    /// Its state.
    pub state: InstanceState,
    /// When it entered that state, when known.
    pub state_since: Option<DateTime<Utc>>,
    /// On-demand or spot.
    pub lifecycle: Lifecycle,
    /// When it last started (EC2 resets the launch time on every start).
    pub launched_at: Option<DateTime<Utc>>,
    /// Its tags.
    pub tags: Tags,
    /// Its GPUs, when the provider knows them (`None` also for a type without GPUs).
    pub gpus: Option<Gpus>,
    /// GPU utilisation readings, oldest first.
    pub gpu_util: Vec<Sample>,
    /// The role (one of `EBB_ROLE_ARNS`) whose credentials listed it, or `None` when ebb's own
    /// did: an instance listed through a role is in another account, where ebb's images and
    /// launches do not reach (shared with every instance that role listed).
    pub via_role: Option<Arc<str>>,
    /// How its cloud bills it and what a stop of it saves ([`Billing::EC2`] for EC2).
    pub billing: Billing,
    /// Its primary private IP address in its network (`10.0.3.17`, `fd00::17`), when the cloud
    /// gives one: where a policy's Jupyter URL template finds its server.
    pub private_ip: Option<core::net::IpAddr>,
}

impl Instance {
    /// The value of tag `key`.
    pub fn tag(&self, key: &str) -> Option<&str> {
        self.tags.get(key)
    }

    /// Whether it entered its current state at or after `at`, by the cloud's state transition
    /// time (EC2 gives it to the second); not when that time is unknown. What tells a stop made
    /// by a call since an intent from one made earlier, by a person.
    pub fn in_state_since(&self, at: DateTime<Utc>) -> bool {
        self.state_since
            .is_some_and(|t| t.timestamp() >= at.timestamp())
    }

    /// What owns it besides ebb (an Auto Scaling group, Karpenter, ...), from its tags: ebb
    /// never acts on such an instance alone.
    pub fn owner(&self) -> Option<Owner> {
        Owner::of(&self.tags)
    }
}

/// An instance's tags: text keys with text values, in key order, serialized as a map.
///
/// Large fleets hold two listings of every instance at once (the simulated cloud's own and the
/// one a tick works on), and a map of separately allocated strings cost about 540 bytes for an
/// instance's few short tags. Here the keys and values of an instance share one buffer, and a
/// copy shares the buffer: tags change rarely (a notice, a removal), so a change builds anew.
#[derive(Clone, Default)]
pub struct Tags {
    /// Each key followed by its value, keys in order, one after the other.
    text: Arc<str>,
    /// Where each key and each value ends in `text`.
    ends: Arc<[u32]>,
}

impl Tags {
    /// The value of `key`.
    pub fn get(&self, key: &str) -> Option<&str> {
        let n = self.ends.len() / 2;
        // Binary search: an instance may carry up to 50 tags.
        let (mut low, mut high) = (0, n);
        while low < high {
            let mid = (low + high) / 2;
            match self.key(mid).cmp(key) {
                std::cmp::Ordering::Less => low = mid + 1,
                std::cmp::Ordering::Greater => high = mid,
                std::cmp::Ordering::Equal => return Some(self.value(mid)),
            }
        }
        None
    }

    /// Whether `other` is a copy of these tags, sharing their buffer, and so holds the same
    /// ones (a `false` says nothing). Buffers are never changed in place.
    pub fn shares_buffer(&self, other: &Tags) -> bool {
        Arc::ptr_eq(&self.text, &other.text) && Arc::ptr_eq(&self.ends, &other.ends)
    }

    /// The tags, in key order.
    pub fn iter(&self) -> TagsIter<'_> {
        TagsIter {
            tags: self,
            next: 0,
        }
    }

    /// Sets tag `key` to `value` (owned, as a map's `insert` takes them).
    pub fn insert(&mut self, key: String, value: String) {
        self.extend([(key, value)]);
    }

    /// Removes tag `key`, if it is there.
    pub fn remove(&mut self, key: &str) {
        if self.get(key).is_some() {
            *self = self.iter().filter(|(k, _)| *k != key).collect();
        }
    }

    fn part(&self, index: usize) -> &str {
        let start = match index {
            0 => 0,
            _ => self.ends[index - 1] as usize,
        };
        &self.text[start..self.ends[index] as usize]
    }

    fn key(&self, index: usize) -> &str {
        self.part(2 * index)
    }

    fn value(&self, index: usize) -> &str {
        self.part(2 * index + 1)
    }
}

/// The tags of a [`Tags`], in key order.
#[derive(Debug, Clone)]
pub struct TagsIter<'a> {
    tags: &'a Tags,
    next: usize,
}

impl<'a> Iterator for TagsIter<'a> {
    type Item = (&'a str, &'a str);

    fn next(&mut self) -> Option<Self::Item> {
        if 2 * self.next >= self.tags.ends.len() {
            return None;
        }
        let i = self.next;
        self.next += 1;
        Some((self.tags.key(i), self.tags.value(i)))
    }
}

impl<'a> IntoIterator for &'a Tags {
    type Item = (&'a str, &'a str);
    type IntoIter = TagsIter<'a>;

    fn into_iter(self) -> TagsIter<'a> {
        self.iter()
    }
}

/// A later value of the same key wins, as in a map.
impl<K: AsRef<str>, V: AsRef<str>> FromIterator<(K, V)> for Tags {
    fn from_iter<I: IntoIterator<Item = (K, V)>>(pairs: I) -> Self {
        let mut pairs: Vec<(K, V)> = pairs.into_iter().collect();
        // Stable: of equal keys, the last is the one kept.
        pairs.sort_by(|a, b| a.0.as_ref().cmp(b.0.as_ref()));
        let mut kept: Vec<(&str, &str)> = Vec::with_capacity(pairs.len());
        for (k, v) in &pairs {
            match kept.last_mut() {
                Some(last) if last.0 == k.as_ref() => last.1 = v.as_ref(),
                _ => kept.push((k.as_ref(), v.as_ref())),
            }
        }
        let mut text = String::with_capacity(kept.iter().map(|(k, v)| k.len() + v.len()).sum());
        let mut ends = Vec::with_capacity(2 * kept.len());
        for (k, v) in kept {
            for part in [k, v] {
                text.push_str(part);
                // EC2 allows 50 tags of at most 128 + 256 bytes: far from 4 GiB.
                ends.push(u32::try_from(text.len()).expect("tags under 4 GiB"));
            }
        }
        Tags {
            text: text.into(),
            ends: ends.into(),
        }
    }
}

/// Sets each tag, as in a map.
impl<K: AsRef<str>, V: AsRef<str>> Extend<(K, V)> for Tags {
    fn extend<I: IntoIterator<Item = (K, V)>>(&mut self, pairs: I) {
        let new: Vec<(K, V)> = pairs.into_iter().collect();
        if new.is_empty() {
            return;
        }
        let old = self.iter();
        *self = old
            .chain(new.iter().map(|(k, v)| (k.as_ref(), v.as_ref())))
            .collect();
    }
}

/// Equal when they hold the same tags: the buffers are built in key order, without repeats.
impl PartialEq for Tags {
    fn eq(&self, other: &Tags) -> bool {
        self.text == other.text && self.ends == other.ends
    }
}

impl std::fmt::Debug for Tags {
    fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}

impl Serialize for Tags {
    fn serialize<S: serde::Serializer>(&self, ser: S) -> Result<S::Ok, S::Error> {
        ser.collect_map(self.iter())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tags_behave_as_a_map_in_key_order() {
        let mut tags: Tags = [("team", "ml"), ("env", "dev"), ("team", "research")]
            .into_iter()
            .collect();
        assert_eq!(tags.get("team"), Some("research"), "the later value wins");
        assert_eq!(tags.get("owner"), None);
        tags.insert("owner".into(), "mei".into());
        tags.insert("env".into(), "prod".into());
        tags.remove("team");
        tags.remove("absent");
        let pairs: Vec<(&str, &str)> = tags.iter().collect();
        assert_eq!(pairs, [("env", "prod"), ("owner", "mei")]);
        assert_eq!(
            serde_json::to_string(&tags).unwrap(),
            r#"{"env":"prod","owner":"mei"}"#
        );
        assert_eq!(format!("{tags:?}"), r#"{"env": "prod", "owner": "mei"}"#);
        let same: Tags = [("owner", "mei"), ("env", "prod")].into_iter().collect();
        assert_eq!(tags, same, "equal by what they hold, not by their buffers");
        assert!(!tags.shares_buffer(&same));
        assert_ne!(tags, [("owner", "mei")].into_iter().collect());
        assert_ne!(
            tags,
            [("env", "prodowner"), ("", "mei")].into_iter().collect()
        );
        let empty = Tags::default();
        assert_eq!(empty.get(""), None);
        assert_eq!(empty.iter().count(), 0);
        assert_eq!(serde_json::to_string(&empty).unwrap(), "{}");
    }

    #[test]
    fn tags_keep_empty_keys_and_values_apart() {
        let tags: Tags = [("", "x"), ("a", ""), ("b", "")].into_iter().collect();
        assert_eq!(tags.get(""), Some("x"));
        assert_eq!(tags.get("a"), Some(""));
        assert_eq!(tags.get("b"), Some(""));
        assert_eq!(tags.iter().count(), 3);
    }
}
