//! The fleet snapshot file format that `ebb plan`, `ebb explain` and the simulated provider
//! read: instances with what ebb remembers about them, prices, overrides, and the simulator's
//! `sim:` behaviour of each instance.
//!
//! It sits above [`crate::fleet`], [`crate::engine`] and [`crate::cloud::sim`] so that none of
//! them needs to know the file format.

use crate::cloud::sim::{Behaviour, SpotZones};
use crate::engine::{GroupMemory, InstanceFacts, Override, Prior};
use crate::fleet::activity::{ActivityReadings, SignalReading};
use crate::fleet::money::{Attached, Volume};
use crate::fleet::owner::ASG_TAG;
use crate::fleet::{
    Billing, Capacity, Charge, Cloud, Fleet, GroupMember, HeldCapacity, HeldReservation, Instance,
    InstanceState, Lifecycle, Owner, Prices, ReservationKind, ReservationTerms, Sample,
    ScalingGroup, StoppedMode, Tags,
};
use chrono::{DateTime, Utc};
use serde::Deserialize;
use std::collections::{BTreeMap, HashMap};
use std::path::Path;

/// A fleet snapshot file (docs/commands.md's "Fleet snapshot"): instances with prior facts,
/// prices, and overrides.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Snapshot {
    instances: Instances,
    #[serde(default)]
    prices: Prices,
    #[serde(default)]
    overrides: Vec<SnapshotOverride>,
    /// The simulated fleet's Auto Scaling groups; other readers ignore them.
    #[serde(default)]
    groups: Vec<SnapshotGroup>,
    /// The spot zones of each region, with their spot prices and reclaim rates: the simulated
    /// fleet's, and the pools `ebb replay --interruptions` prices spot moves in.
    #[serde(default)]
    spot_zones: SpotZones,
    /// Capacity reservations held outside ebb in the simulated fleet; other readers ignore
    /// them.
    #[serde(default)]
    held_reservations: Vec<SnapshotHeld>,
}

/// A capacity reservation someone else holds in the simulated fleet: the room no running
/// instance that names it (`capacity_reservation`) takes is unused.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct SnapshotHeld {
    id: String,
    region: String,
    /// Its zone (default: the region's first, `REGIONa`).
    #[serde(default)]
    zone: Option<String>,
    #[serde(rename = "type")]
    instance_type: String,
    /// How many instances it holds room for.
    size: u32,
    #[serde(default)]
    kind: Option<ReservationKind>,
    /// Whether only instances made to start into it use it.
    #[serde(default)]
    targeted: bool,
    #[serde(default)]
    end: Option<Timestamp>,
}

impl SnapshotHeld {
    /// The reservation as its region's read finds it before any instance takes room.
    fn held(self) -> (String, HeldCapacity) {
        let capacity = HeldCapacity {
            zone: self.zone.unwrap_or_else(|| format!("{}a", self.region)),
            id: self.id,
            instance_type: self.instance_type,
            platform: "Linux/UNIX".to_string(),
            kind: self.kind.unwrap_or(ReservationKind::CapacityReservation),
            total: self.size,
            available: self.size,
            targeted: self.targeted,
            end: self.end.map(|t| t.0),
        };
        (self.region, capacity)
    }
}

/// An Auto Scaling group of the simulated fleet: its members are the snapshot's instances
/// tagged `aws:autoscaling:groupName` with its name (or with `owner: {kind: asg, group: ...}`).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct SnapshotGroup {
    name: String,
    region: String,
    #[serde(default, deserialize_with = "scalar_tags")]
    tags: Tags,
    min: i32,
    desired: i32,
    max: i32,
    /// What ebb remembers of it, normally read from Postgres: the capacity the opening restores.
    #[serde(default)]
    up: Option<Capacity>,
    /// When ebb scaled it down (it is held down since).
    #[serde(default)]
    down_since: Option<Timestamp>,
}

/// An Auto Scaling group of a snapshot, as `ebb plan` and `ebb explain` decide it: the group
/// with its members (the snapshot's instances tagged with its name, not ending or ended), and
/// what ebb remembers of it when the snapshot says.
#[derive(Debug, Clone)]
pub struct GroupSnapshot {
    /// The group.
    pub group: ScalingGroup,
    /// Its `up` capacity and `down_since`, when given.
    pub memory: Option<GroupMemory>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct SnapshotOverride {
    instance: String,
    until: Timestamp,
    #[serde(default)]
    reason: String,
    #[serde(default)]
    by: String,
}

/// An RFC 3339 time read strictly (four-digit years): chrono's lenient parser also takes years
/// up to ±262142, which no fleet has and which would overflow the engine's arithmetic.
#[derive(Debug, Clone, Copy)]
struct Timestamp(DateTime<Utc>);

impl<'de> Deserialize<'de> for Timestamp {
    fn deserialize<D: serde::Deserializer<'de>>(de: D) -> Result<Self, D::Error> {
        // A visitor, not a String: a large snapshot holds millions of times.
        struct Rfc3339;
        impl serde::de::Visitor<'_> for Rfc3339 {
            type Value = Timestamp;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("an RFC 3339 time")
            }
            fn visit_str<E: serde::de::Error>(self, text: &str) -> Result<Timestamp, E> {
                DateTime::parse_from_rfc3339(text)
                    .map(|t| Timestamp(t.with_timezone(&Utc)))
                    .map_err(|_| {
                        E::custom(format!(
                            "\"{text}\" is not an RFC 3339 time (like 2026-11-30T20:05:00Z)"
                        ))
                    })
            }
        }
        de.deserialize_str(Rfc3339)
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct SnapshotInstance {
    id: String,
    region: String,
    #[serde(rename = "type")]
    instance_type: String,
    state: InstanceState,
    #[serde(default)]
    state_since: Option<Timestamp>,
    #[serde(default = "on_demand")]
    lifecycle: Lifecycle,
    #[serde(default)]
    launched_at: Option<Timestamp>,
    /// Its private IP address, where a Jupyter URL template finds its server.
    #[serde(default)]
    private_ip: Option<std::net::IpAddr>,
    #[serde(default, deserialize_with = "scalar_tags")]
    tags: Tags,
    /// What owns it besides ebb; without it, its tags say (an owner given here adds the tags
    /// that mean it).
    #[serde(default)]
    owner: Option<Owner>,
    #[serde(default)]
    gpu_util: Vec<(Timestamp, f64)>,
    /// Why its GPU utilisation could not be read, to replay a tick whose read failed.
    #[serde(default)]
    gpu_read_error: Option<String>,
    /// The readings of its activity signals read by the tick (Prometheus, CloudWatch), by signal name; a
    /// signal absent here was not read, which counts as in use.
    #[serde(default)]
    activity: BTreeMap<String, Vec<(Timestamp, f64)>>,
    #[serde(default)]
    stopped_by_ebb_at: Option<Timestamp>,
    #[serde(default)]
    started_by_ebb_at: Option<Timestamp>,
    #[serde(default)]
    notified_at: Option<Timestamp>,
    /// When a person started it, while it runs since (what the inventory sync records).
    #[serde(default)]
    started_by_person_at: Option<Timestamp>,
    /// Since when its stop outside hours has waited for its busy GPU, while it still waits.
    #[serde(default)]
    busy_deferred_since: Option<Timestamp>,
    /// The role of `EBB_ROLE_ARNS` that listed it: an instance of another account.
    #[serde(default)]
    via_role: Option<String>,
    /// The cloud it is in (`aws` by default).
    #[serde(default = "aws")]
    cloud: Cloud,
    /// How it is paid for (`pay-as-you-go` by default).
    #[serde(default = "pay_as_you_go")]
    charge: Charge,
    /// For a stopped instance, how its cloud says it is billed (for EC2, `no-charge` when
    /// not given).
    #[serde(default)]
    stopped_mode: Option<StoppedMode>,
    /// Its cloud is taking this preemptible instance back (a recycling lock).
    #[serde(default)]
    recycling: bool,
    /// Its EBS volumes, what it still pays for while stopped (`ebb replay`'s net, and the
    /// simulated cloud's listing when its `sim:` gives none); not given, unknown.
    #[serde(default)]
    volumes: Option<Vec<Volume>>,
    /// How many Elastic IPs are associated with it; not given, unknown.
    #[serde(default)]
    elastic_ips: Option<u32>,
    /// The capacity reservation held outside ebb that it runs in.
    #[serde(default)]
    capacity_reservation: Option<SnapshotReservation>,
    /// How the simulated provider makes it behave; other readers ignore it.
    #[serde(default)]
    sim: Option<Behaviour>,
}

/// A capacity reservation held outside ebb that an instance runs in, as a snapshot gives it.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct SnapshotReservation {
    id: String,
    /// `capacity-reservation` or `capacity-block`; not given, what it is and its end were not
    /// read.
    #[serde(default)]
    kind: Option<ReservationKind>,
    /// When it ends; not given with a kind, it is held until cancelled.
    #[serde(default)]
    end: Option<Timestamp>,
}

impl SnapshotReservation {
    fn held(self) -> HeldReservation {
        HeldReservation {
            id: self.id,
            terms: self.kind.map(|kind| ReservationTerms {
                kind,
                end: self.end.map(|t| t.0),
            }),
        }
    }
}

/// Tag values are text, but `true` or `3` written unquoted in YAML mean the same.
fn scalar_tags<'de, D: serde::Deserializer<'de>>(de: D) -> Result<Tags, D::Error> {
    // A visitor straight into the pairs: a map per instance would only be thrown away.
    struct Pairs;
    impl<'de> serde::de::Visitor<'de> for Pairs {
        type Value = Tags;
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("a map")
        }
        fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Tags, A::Error> {
            let mut pairs = Vec::with_capacity(map.size_hint().unwrap_or(0));
            while let Some((k, v)) = map.next_entry::<String, TagValue>()? {
                pairs.push((k, v.0));
            }
            Ok(pairs.into_iter().collect())
        }
    }
    de.deserialize_map(Pairs)
}

/// A tag value read from any scalar, without buffering (large fleets have millions of tags).
struct TagValue(String);

impl<'de> Deserialize<'de> for TagValue {
    fn deserialize<D: serde::Deserializer<'de>>(de: D) -> Result<Self, D::Error> {
        struct Scalar;
        impl serde::de::Visitor<'_> for Scalar {
            type Value = TagValue;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a tag value (text, a number or a boolean)")
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<TagValue, E> {
                Ok(TagValue(v.to_string()))
            }
            fn visit_string<E: serde::de::Error>(self, v: String) -> Result<TagValue, E> {
                Ok(TagValue(v))
            }
            fn visit_bool<E: serde::de::Error>(self, v: bool) -> Result<TagValue, E> {
                Ok(TagValue(v.to_string()))
            }
            fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<TagValue, E> {
                Ok(TagValue(v.to_string()))
            }
            fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<TagValue, E> {
                Ok(TagValue(v.to_string()))
            }
            fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<TagValue, E> {
                Ok(TagValue(v.to_string()))
            }
        }
        de.deserialize_any(Scalar)
    }
}

fn on_demand() -> Lifecycle {
    Lifecycle::OnDemand
}

fn aws() -> Cloud {
    Cloud::Aws
}

fn pay_as_you_go() -> Charge {
    Charge::PayAsYouGo
}

/// Why a snapshot could not be read.
#[derive(Debug, thiserror::Error)]
pub enum SnapshotError {
    /// The file could not be read.
    #[error("cannot read fleet file {}: {source}", path.display())]
    Read {
        /// The file.
        path: std::path::PathBuf,
        /// The operating system's reason.
        source: std::io::Error,
    },
    /// The file is not a valid snapshot.
    #[error("{}: not a valid fleet snapshot: {message}", path.display())]
    Invalid {
        /// The file.
        path: std::path::PathBuf,
        /// What is wrong, with its position.
        message: String,
    },
}

/// Reads a snapshot: JSON when the file ends in `.json` (fast for large fleets), YAML otherwise.
pub fn load_snapshot(path: &Path) -> Result<(Fleet, Prior), SnapshotError> {
    let (fleet, prior, _, _, _, _) = read_snapshot(path)?;
    Ok((fleet, prior))
}

/// Reads a snapshot with its spot zones (`spot_zones:`), for `ebb replay --interruptions`.
pub fn load_snapshot_zones(path: &Path) -> Result<(Fleet, Prior, SpotZones), SnapshotError> {
    let (fleet, prior, _, _, zones, _) = read_snapshot(path)?;
    Ok((fleet, prior, zones))
}

/// Reads a snapshot with its Auto Scaling groups (`groups:`).
pub fn load_snapshot_groups(
    path: &Path,
) -> Result<(Fleet, Prior, Vec<GroupSnapshot>), SnapshotError> {
    let (fleet, prior, _, groups, _, _) = read_snapshot(path)?;
    Ok((fleet, prior, groups))
}

/// Reads a snapshot with the `sim:` behaviour of its instances, by instance id: the seed of
/// the simulated provider.
pub fn load_simulation(path: &Path) -> Result<(Fleet, HashMap<String, Behaviour>), SnapshotError> {
    let sim = load_simulated(path)?;
    Ok((sim.fleet, sim.behaviours))
}

/// What a snapshot seeds the simulated provider with.
#[derive(Debug)]
pub struct Simulation {
    /// The instances and prices.
    pub fleet: Fleet,
    /// The `sim:` behaviour of its instances, by instance id.
    pub behaviours: HashMap<String, Behaviour>,
    /// Its Auto Scaling groups (`groups:`); the simulator finds their members by tag as they
    /// change.
    pub groups: Vec<ScalingGroup>,
    /// Its spot zones (`spot_zones:`).
    pub zones: SpotZones,
    /// The capacity reservations held outside ebb (`held_reservations:`), by region.
    pub held: Vec<(String, HeldCapacity)>,
}

/// Reads a snapshot as the seed of the simulated provider: [`load_simulation`] and the groups.
pub fn load_simulated(path: &Path) -> Result<Simulation, SnapshotError> {
    let (fleet, _, behaviours, groups, zones, held) = read_snapshot(path)?;
    Ok(Simulation {
        fleet,
        behaviours,
        groups: groups.into_iter().map(|g| g.group).collect(),
        zones,
        held,
    })
}

/// A snapshot's fleet, prior facts, behaviours, groups, spot zones and held reservations.
type Read = (
    Fleet,
    Prior,
    HashMap<String, Behaviour>,
    Vec<GroupSnapshot>,
    SpotZones,
    Vec<(String, HeldCapacity)>,
);

fn read_snapshot(path: &Path) -> Result<Read, SnapshotError> {
    let text = std::fs::read_to_string(path).map_err(|source| SnapshotError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    let invalid = |message: String| SnapshotError::Invalid {
        path: path.to_path_buf(),
        message,
    };
    let snapshot: Snapshot = if path.extension().is_some_and(|e| e == "json") {
        serde_json::from_str(&text).map_err(|e| invalid(e.to_string()))?
    } else {
        crate::policy::yaml::from_str(&text).map_err(invalid)?
    };
    Ok(snapshot.into_fleet())
}

/// A snapshot's instances and what it says of each beyond the listing, each converted as it
/// is read: a 100,000-instance file held whole, then converted, was `ebb serve`'s largest
/// allocation (BENCHMARKS.md).
#[derive(Debug, Default)]
struct Instances {
    instances: Vec<Instance>,
    facts: HashMap<String, InstanceFacts>,
    behaviours: HashMap<String, Behaviour>,
    gpu_unread: HashMap<String, std::sync::Arc<str>>,
    attached: HashMap<String, Attached>,
    activity: ActivityReadings,
}

impl Instances {
    /// Converts `i` and keeps it.
    fn add(&mut self, i: SnapshotInstance) {
        let f = InstanceFacts {
            stopped_by_ebb_at: i.stopped_by_ebb_at.map(|t| t.0),
            started_by_ebb_at: i.started_by_ebb_at.map(|t| t.0),
            notified_at: i.notified_at.map(|t| t.0),
            started_by_person_at: i.started_by_person_at.map(|t| t.0),
            busy_deferred_since: i.busy_deferred_since.map(|t| t.0),
        };
        if f != InstanceFacts::default() {
            self.facts.insert(i.id.clone(), f);
        }
        if let Some(b) = i.sim {
            self.behaviours.insert(i.id.clone(), b);
        }
        if let Some(why) = i.gpu_read_error {
            self.gpu_unread.insert(i.id.clone(), why.into());
        }
        if !i.activity.is_empty() {
            let readings = i.activity.into_iter().map(|(name, points)| {
                let mut points: Vec<_> = points.into_iter().map(|(t, v)| (t.0, v)).collect();
                points.sort_by_key(|(t, _)| *t);
                (name, SignalReading::Points(points))
            });
            self.activity.insert(i.id.clone(), readings.collect());
        }
        if i.volumes.is_some() || i.elastic_ips.is_some() {
            let a = Attached {
                volumes: i.volumes,
                elastic_ips: i.elastic_ips,
            };
            // The simulated cloud lists them too, unless its `sim:` says otherwise.
            let b = self.behaviours.entry(i.id.clone()).or_default();
            b.attached.get_or_insert_with(|| a.clone());
            self.attached.insert(i.id.clone(), a);
        }
        let mut gpu_util: Vec<Sample> = i
            .gpu_util
            .into_iter()
            .map(|(at, percent)| Sample::new(at.0, percent))
            .collect();
        gpu_util.sort_by_key(|s| s.at);
        let mut tags = i.tags;
        if let Some(owner) = i.owner.filter(|o| Owner::of(&tags).as_ref() != Some(o)) {
            // Added, never replacing: an owner's tags only ever hold actions back.
            let absent: Vec<(String, String)> = owner
                .tags()
                .into_iter()
                .filter(|(k, _)| tags.get(k).is_none())
                .collect();
            tags.extend(absent);
        }
        let billing = Billing {
            stopped_mode: match (i.state, i.cloud) {
                (InstanceState::Stopped, Cloud::Aws) => {
                    Some(i.stopped_mode.unwrap_or(StoppedMode::NoCharge))
                }
                (InstanceState::Stopped, _) => Some(i.stopped_mode.unwrap_or(StoppedMode::Unknown)),
                _ => None,
            },
            recycling: i.recycling,
            reservation: i.capacity_reservation.map(|r| Box::new(r.held())),
            ..Billing::of(i.cloud, i.charge, &i.instance_type, None)
        };
        self.instances.push(Instance {
            id: i.id,
            region: i.region,
            instance_type: i.instance_type,
            state: i.state,
            state_since: i.state_since.map(|t| t.0),
            lifecycle: i.lifecycle,
            launched_at: i.launched_at.map(|t| t.0),
            tags,
            gpus: None,
            gpu_util,
            via_role: i.via_role.map(Into::into),
            billing,
            private_ip: i.private_ip,
        });
    }
}

impl<'de> Deserialize<'de> for Instances {
    fn deserialize<D: serde::Deserializer<'de>>(de: D) -> Result<Instances, D::Error> {
        struct OneByOne;
        impl<'de> serde::de::Visitor<'de> for OneByOne {
            type Value = Instances;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a list of instances")
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                mut seq: A,
            ) -> Result<Instances, A::Error> {
                let mut read = Instances::default();
                read.instances.reserve(seq.size_hint().unwrap_or(0));
                while let Some(i) = seq.next_element::<SnapshotInstance>()? {
                    read.add(i);
                }
                Ok(read)
            }
        }
        de.deserialize_seq(OneByOne)
    }
}

impl Snapshot {
    fn into_fleet(self) -> Read {
        let Instances {
            instances,
            facts,
            behaviours,
            gpu_unread,
            attached,
            activity,
        } = self.instances;
        let groups = self
            .groups
            .into_iter()
            .map(|g| g.decidable(&instances))
            .collect();
        (
            Fleet {
                instances,
                prices: self.prices,
                gpu_unread,
                attached,
                levers: crate::cloud::levers(),
                activity,
            },
            Prior::new(
                facts,
                self.overrides
                    .into_iter()
                    .map(|o| Override {
                        instance: o.instance,
                        until: o.until.0,
                        reason: o.reason,
                        by: o.by,
                    })
                    .collect(),
            ),
            behaviours,
            groups,
            self.spot_zones,
            self.held_reservations
                .into_iter()
                .map(SnapshotHeld::held)
                .collect(),
        )
    }
}

impl SnapshotGroup {
    /// The group with its members among `instances`, and what ebb remembers of it.
    fn decidable(self, instances: &[Instance]) -> GroupSnapshot {
        let members: Vec<GroupMember> = instances
            .iter()
            .filter(|i| {
                i.region == self.region
                    && i.tag(ASG_TAG) == Some(self.name.as_str())
                    && !matches!(
                        i.state,
                        InstanceState::ShuttingDown | InstanceState::Terminated
                    )
            })
            .map(|i| GroupMember {
                id: i.id.clone(),
                instance_type: i.instance_type.clone(),
                protected_from_scale_in: false,
            })
            .collect();
        let capacity = Capacity {
            min: self.min,
            desired: self.desired,
            max: self.max,
        };
        let down_since = self.down_since.map(|t| t.0);
        let memory = (self.up.is_some() || down_since.is_some()).then(|| {
            let mut types: Vec<String> = members.iter().map(|m| m.instance_type.clone()).collect();
            types.sort();
            types.dedup();
            GroupMemory {
                up: self.up.unwrap_or(capacity),
                types,
                down_since,
                protected: Vec::new(),
            }
        });
        GroupSnapshot {
            group: ScalingGroup {
                name: self.name,
                region: self.region,
                tags: self.tags,
                capacity,
                members,
            },
            memory,
        }
    }
}
