//! A simulated GPU fleet (`EBB_CLOUD=sim:FLEET_FILE`), seeded from a fleet snapshot, so that
//! ebb can be seen working without a cloud account, and measured on fleets of any size.
//!
//! Stopping and starting take time on the simulated clock; a start can fail for lack of
//! capacity; GPU utilisation follows the pattern each instance's `sim:` block names (office-hours
//! notebook work, training runs, a box forgotten after lunch). Utilisation is a pure function
//! of the instance and the time, so a replay gives the same readings.

mod behaviour;
mod calls;
mod gpus;
mod groups;
mod reservations;
mod scaling;
mod spot;
mod workload;
mod zones;

pub use behaviour::{Behaviour, Run, Usage};
pub use workload::{write_utilisation, write_utilisation_in, RowOrder};
pub use zones::{reclaims, SpotZone, SpotZones};

use super::pacing::{Key, Pacer, RateLimits};
use super::{
    ActionReport, Artifact, CloudError, GpuReadings, Image, ImageMade, InstanceStatus, Inventory,
    Launch, LaunchSpec, PlacementScores, Provider, Reservation, StopKind, TypePrice,
};
use crate::clock::Clock;
use crate::cloud::capability::{has, lacks};
use crate::cloud::{Resize, SpotMoves};
use crate::fleet::{
    Fleet, HeldCapacity, Instance, InstanceState, Prices, Sample, ScalingGroup, StoppedMode,
};
use behaviour::seed;
use calls::{wrong_state, Metering, RateLimited};
use chrono::{DateTime, Duration, NaiveDate, Utc};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex};

/// How long a stop takes.
const STOP_TAKES: Duration = Duration::seconds(60);
/// How long a hibernation takes (memory is written to disk).
const HIBERNATE_TAKES: Duration = Duration::seconds(120);
/// How long a start takes.
const START_TAKES: Duration = Duration::seconds(45);
/// The period of GPU readings, as the CloudWatch agent is configured.
const READING_PERIOD: i64 = 300;

/// One simulated instance.
#[derive(Debug)]
struct Simulated {
    instance: Instance,
    behaviour: Behaviour,
    seed: u64,
    /// A state change under way: the state it ends in, and when.
    transition: Option<(InstanceState, DateTime<Utc>)>,
    /// Since when it has been running (readings exist from then on).
    running_since: Option<DateTime<Utc>>,
    /// Readings written in the snapshot, served as they are.
    recorded: Vec<Sample>,
    /// Starts still to fail for lack of capacity.
    start_failures: u32,
    /// The last day its owner came in.
    owner_came: Option<NaiveDate>,
    /// The code of the reason for its last state change, when EC2 would give one.
    reason: Option<&'static str>,
    /// The capacity reservation it starts into, when one is targeted.
    reservation: Option<String>,
    /// Its availability zone.
    zone: String,
    /// How often its zone reclaims spot capacity (`spot_zones:`): a spot instance is reclaimed.
    reclaim_every: Option<Duration>,
}

impl Simulated {
    /// Completes a state change that is due at `now`, and starts the instance if its owner
    /// arrives.
    fn advance(&mut self, now: DateTime<Utc>) {
        if let Some(at) = self.reclaim_due(now) {
            self.reclaimed(at);
        }
        if let Some(today) = self.behaviour.owner_arrives(now, self.owner_came) {
            self.owner_came = Some(today);
            if self.instance.state == InstanceState::Stopped {
                self.begin(
                    InstanceState::Pending,
                    InstanceState::Running,
                    now,
                    START_TAKES,
                );
            }
        }
        if let Some((to, at)) = self.transition {
            if at <= now {
                self.instance.state = to;
                self.instance.state_since = Some(at);
                self.instance.billing.stopped_mode =
                    (to == InstanceState::Stopped).then(|| self.stopped_mode());
                self.transition = None;
                if to == InstanceState::Running {
                    self.running_since = Some(at);
                    self.instance.launched_at = Some(at);
                }
            }
        }
    }

    /// How its cloud bills it once stopped: as its billing says a stop saves, unless its
    /// account keeps stopped instances billed (`stops_keep_charging`).
    fn stopped_mode(&self) -> StoppedMode {
        match self.instance.billing.stop_saves() && !self.behaviour.stops_keep_charging {
            true => StoppedMode::NoCharge,
            false => StoppedMode::Charging,
        }
    }

    /// Puts the instance `through` a state on its way `to` another, for `takes`.
    fn begin(
        &mut self,
        through: InstanceState,
        to: InstanceState,
        now: DateTime<Utc>,
        takes: Duration,
    ) {
        self.instance.state = through;
        self.instance.state_since = Some(now);
        self.instance.billing.stopped_mode = None;
        self.transition = Some((to, now + takes));
        if to == InstanceState::Stopped {
            self.running_since = None;
        }
    }
}

/// The simulated fleet.
#[derive(Debug)]
pub struct SimProvider {
    clock: Clock,
    prices: Prices,
    /// The spot zones of each region (`spot_zones:`).
    zones: SpotZones,
    fleet: Mutex<SimFleet>,
    /// Its Auto Scaling groups.
    groups: Mutex<Vec<ScalingGroup>>,
    /// The members their groups' scale-in leaves alone (instance protection), by id.
    protected: Mutex<std::collections::BTreeSet<String>>,
    /// The ids of the EKS node group updates it made, all done.
    updates: Mutex<Vec<String>>,
    /// Capacity reservations someone else holds, by region (`held_reservations:`).
    held: Vec<(String, HeldCapacity)>,
    /// EC2's rate limits and ebb's pacing, when either is on (boxed: rarely on, and the
    /// reconciler holds the provider inline).
    limited: Box<RateLimited>,
}

#[derive(Debug)]
struct SimFleet {
    instances: Vec<Simulated>,
    by_id: HashMap<String, usize>,
    requests: u64,
    /// Images made by spot migrations, by id.
    images: HashMap<String, spot::SimImage>,
    /// Capacity reservations, in the order they were made.
    reservations: Vec<Reservation>,
}

impl SimProvider {
    /// A simulated fleet of `fleet`'s instances, behaving as `behaviours` says (by instance
    /// id; instances without one report no GPU metrics), on `clock`.
    pub fn new(fleet: Fleet, mut behaviours: HashMap<String, Behaviour>, clock: Clock) -> Self {
        let now = clock.now();
        let instances: Vec<Simulated> = fleet
            .instances
            .into_iter()
            .map(|mut instance| {
                let behaviour = behaviours.remove(&instance.id).unwrap_or_default();
                // An owner due in before the clock starts has come in already.
                let owner_came = behaviour.owner_arrives(now, None);
                let running = instance.state == InstanceState::Running;
                let running_since =
                    running.then(|| instance.launched_at.unwrap_or(now - Duration::days(1)));
                Simulated {
                    seed: seed(&instance.id),
                    start_failures: behaviour.start_failures,
                    behaviour,
                    transition: None,
                    running_since,
                    recorded: std::mem::take(&mut instance.gpu_util),
                    owner_came,
                    reason: None,
                    reservation: None,
                    zone: zones::default_zone(&instance.region, &SpotZones::new()),
                    reclaim_every: None,
                    instance,
                }
            })
            .collect();
        let by_id = instances
            .iter()
            .enumerate()
            .map(|(i, s)| (s.instance.id.clone(), i))
            .collect();
        SimProvider {
            clock,
            prices: fleet.prices,
            zones: SpotZones::new(),
            fleet: Mutex::new(SimFleet {
                instances,
                by_id,
                requests: 0,
                images: HashMap::new(),
                reservations: Vec::new(),
            }),
            groups: Mutex::default(),
            protected: Mutex::default(),
            updates: Mutex::default(),
            held: Vec::new(),
            limited: Box::default(),
        }
    }

    /// The fleet, refusing calls over EC2's token buckets `limits` with `RequestLimitExceeded`
    /// (calls that change instances go in batches of 100, as the AWS provider sends them).
    pub fn metered(mut self, limits: RateLimits) -> Self {
        self.limited.metering = Some(Metering::new(limits));
        self
    }

    /// The pacer of ebb's calls, when they are paced.
    pub fn pacer(&self) -> Option<Arc<Pacer>> {
        self.limited.pacer.clone()
    }

    /// The fleet, with ebb's calls to it paced by `pacer`.
    pub fn paced_by(mut self, pacer: Arc<Pacer>) -> Self {
        self.limited.pacer = Some(pacer);
        self
    }

    fn fleet(&self) -> std::sync::MutexGuard<'_, SimFleet> {
        self.fleet.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Provider for SimProvider {
    has!(Resize, resizer);
    has!(SpotMoves, spot_moves);
    has!(ScalingGroups, groups);
    has!(CapacityReservations, capacity_reservations);
    lacks!(TypeCatalogue, type_catalogue);
    lacks!(InstanceMetrics, instance_metrics);
    lacks!(PriceQuotes, price_quotes);

    async fn instances(&self) -> Inventory {
        let now = self.clock.now();
        let mut fleet = self.fleet();
        let mut regions = BTreeSet::new();
        let mut attached = HashMap::with_capacity(fleet.instances.len());
        let instances = fleet
            .instances
            .iter_mut()
            .map(|sim| {
                sim.advance(now);
                attached.insert(sim.instance.id.clone(), sim.behaviour.attached());
                if !regions.contains(&sim.instance.region) {
                    regions.insert(sim.instance.region.clone());
                }
                // Cheap but for the three strings: the tags are shared, not copied.
                sim.instance.clone()
            })
            .collect();
        Inventory {
            instances,
            complete_regions: regions.into_iter().collect(),
            failures: Vec::new(),
            attached,
        }
    }

    async fn reread(&self, region: &str, ids: &[String]) -> Result<Vec<Instance>, CloudError> {
        let now = self.clock.now();
        let mut fleet = self.fleet();
        let mut found = Vec::with_capacity(ids.len());
        for id in ids {
            let Some(&i) = fleet.by_id.get(id) else {
                continue;
            };
            let sim = &mut fleet.instances[i];
            sim.advance(now);
            if sim.instance.region == region && sim.instance.state != InstanceState::Terminated {
                found.push(sim.instance.clone());
            }
        }
        Ok(found)
    }

    async fn gpu_utilisation(
        &self,
        region: &str,
        instances: &[String],
        from: DateTime<Utc>,
        to: DateTime<Utc>,
    ) -> Result<GpuReadings, CloudError> {
        let now = self.clock.now();
        let to = to.min(now);
        let fleet = self.fleet();
        let mut readings = HashMap::new();
        for id in instances {
            let Some(sim) = fleet.by_id.get(id).map(|&i| &fleet.instances[i]) else {
                continue;
            };
            if sim.instance.region != region {
                continue;
            }
            let mut samples: Vec<Sample> = sim
                .recorded
                .iter()
                .filter(|s| from <= s.at && s.at <= to)
                .copied()
                .collect();
            if let Some(since) = sim.running_since {
                let shape = gpus::shape_of(&sim.instance.instance_type);
                // Readings at the end of each period in which the instance ran.
                let first = from.max(since).timestamp().div_euclid(READING_PERIOD) + 1;
                let mut slot = first * READING_PERIOD;
                // Room for them at once: they are kept for the whole tick, and growing a
                // vector by doubling leaves up to half of it empty.
                let slots = (to.timestamp() - slot).div_euclid(READING_PERIOD) + 1;
                samples.reserve_exact(usize::try_from(slots).unwrap_or(0));
                while slot <= to.timestamp() {
                    let at = DateTime::from_timestamp(slot, 0).unwrap_or(to);
                    if let Some(s) = gpus::reading(&sim.behaviour, sim.seed, at, shape) {
                        samples.push(s);
                    }
                    slot += READING_PERIOD;
                }
            }
            if !samples.is_empty() {
                samples.sort_by_key(|s| s.at);
                readings.insert(id.clone(), samples);
            }
        }
        Ok(GpuReadings {
            samples: readings,
            unread: HashMap::new(),
        })
    }

    async fn prices(
        &self,
        region: &str,
        types: &[String],
        _now: DateTime<Utc>,
    ) -> Result<Vec<TypePrice>, CloudError> {
        let in_region = self.prices.get(region);
        Ok(types
            .iter()
            .map(|t| {
                let price = in_region
                    .and_then(|p| p.get(t))
                    .copied()
                    .unwrap_or_default();
                TypePrice {
                    instance_type: t.clone(),
                    on_demand: price.on_demand,
                    spot_by_zone: self.spot_by_zone(region, t, price.spot),
                }
            })
            .collect())
    }

    async fn stop(&self, region: &str, ids: &[String], kind: StopKind) -> ActionReport {
        let takes = match kind {
            StopKind::Stop => STOP_TAKES,
            StopKind::Hibernate => HIBERNATE_TAKES,
        };
        self.act("StopInstances", region, ids, |sim, now| {
            match sim.instance.state {
                InstanceState::Running | InstanceState::Pending => {
                    sim.begin(InstanceState::Stopping, InstanceState::Stopped, now, takes);
                    Ok(())
                }
                InstanceState::Stopping | InstanceState::Stopped => Ok(()),
                _ => Err(wrong_state(sim)),
            }
        })
        .await
    }

    async fn start(&self, region: &str, ids: &[String]) -> ActionReport {
        let held = self.held();
        self.act("StartInstances", region, ids, |sim, now| match sim.instance.state {
            InstanceState::Stopped
                if !sim.reserved(&held)
                    && (sim.start_failures > 0
                        || sim.behaviour.no_capacity_for.contains(&sim.instance.instance_type)) =>
            {
                sim.start_failures = sim.start_failures.saturating_sub(1);
                Err((
                    "InsufficientInstanceCapacity",
                    format!(
                        "We currently do not have sufficient {} capacity in the Availability Zone you requested",
                        sim.instance.instance_type
                    ),
                ))
            }
            InstanceState::Stopped => {
                sim.begin(InstanceState::Pending, InstanceState::Running, now, START_TAKES);
                Ok(())
            }
            InstanceState::Pending | InstanceState::Running => Ok(()),
            _ => Err(wrong_state(sim)),
        })
        .await
    }

    async fn tag(
        &self,
        region: &str,
        ids: &[String],
        tags: &BTreeMap<String, String>,
    ) -> ActionReport {
        self.act("CreateTags", region, ids, |sim, _| {
            sim.instance.tags.extend(tags);
            Ok(())
        })
        .await
    }

    async fn untag(&self, region: &str, ids: &[String], keys: &[String]) -> ActionReport {
        self.act("DeleteTags", region, ids, |sim, _| {
            for key in keys {
                sim.instance.tags.remove(key);
            }
            Ok(())
        })
        .await
    }
}

impl Resize for SimProvider {
    async fn set_type(&self, region: &str, id: &str, instance_type: &str) -> ActionReport {
        let ids = [id.to_string()];
        self.act(
            "ModifyInstanceAttribute",
            region,
            &ids,
            |sim, _| match sim.instance.state {
                InstanceState::Stopped => {
                    sim.instance.instance_type = instance_type.to_string();
                    Ok(())
                }
                _ => Err(wrong_state(sim)),
            },
        )
        .await
    }
}

impl SpotMoves for SimProvider {
    async fn launch_spec(&self, region: &str, id: &str) -> Result<LaunchSpec, CloudError> {
        self.sim_launch_spec(region, id)
    }

    async fn user_data(&self, region: &str, id: &str) -> Result<Option<String>, CloudError> {
        // The simulated instances have none; an unknown one is an error, as in EC2.
        self.sim_launch_spec(region, id).map(|spec| spec.user_data)
    }

    async fn describe(
        &self,
        region: &str,
        ids: &[String],
    ) -> Result<Vec<InstanceStatus>, CloudError> {
        Ok(self.sim_describe(region, ids))
    }

    /// The simulator reclaims without warning: nothing is ever marked for termination.
    async fn interruption_confirmed(&self, _region: &str, _id: &str) -> Result<bool, CloudError> {
        Ok(false)
    }

    async fn find_tagged(
        &self,
        region: &str,
        key: &str,
        value: &str,
    ) -> Result<Option<InstanceStatus>, CloudError> {
        Ok(self.sim_find_tagged(region, key, value))
    }

    async fn create_image(
        &self,
        region: &str,
        id: &str,
        name: &str,
        _tags: &BTreeMap<String, String>,
    ) -> Result<ImageMade, CloudError> {
        self.sim_create_image(region, id, name)
    }

    async fn image(&self, _region: &str, image: &str) -> Result<Option<Image>, CloudError> {
        Ok(self.sim_image(image))
    }

    async fn launch(&self, region: &str, launch: &Launch) -> Result<InstanceStatus, CloudError> {
        let key = Key {
            account: None,
            region: region.to_string(),
            api: "RunInstances",
        };
        let launch_one = || {
            std::future::ready(
                self.admit(region, "RunInstances", 1)
                    .and_then(|()| self.sim_launch(region, launch)),
            )
        };
        match &self.limited.pacer {
            Some(pacer) => pacer.call(&key, 1, launch_one).await,
            None => launch_one().await,
        }
    }

    async fn terminate(&self, region: &str, ids: &[String]) -> ActionReport {
        self.sim_terminate(region, ids).await
    }

    async fn deregister_image(&self, _region: &str, image: &str) -> Result<(), CloudError> {
        self.sim_delete_image(image);
        Ok(())
    }

    async fn delete_snapshot(&self, _region: &str, _snapshot: &str) -> Result<(), CloudError> {
        // The simulated images list no snapshots (`image`), so none is ever asked for.
        Ok(())
    }

    async fn migration_artifacts(&self, region: &str) -> Result<Vec<Artifact>, CloudError> {
        Ok(self.sim_artifacts(region))
    }

    /// The simulated fleet has no placement scores: an empty answer, every pool unscored.
    async fn placement_scores(
        &self,
        _region: &str,
        _types: &[String],
    ) -> Result<PlacementScores, CloudError> {
        Ok(PlacementScores::new())
    }
}
