//! Spot migrations on the simulated fleet: images take minutes, replacements start like any
//! instance, terminations take half a minute.

use super::{seed, SimProvider, Simulated, START_TAKES};
use crate::cloud::{
    ActionReport, Artifact, ArtifactKind, CloudError, Image, ImageMade, ImageState, InstanceStatus,
    Launch, LaunchSpec, Market,
};
use crate::fleet::{Billing, Instance, InstanceState, Lifecycle};
use crate::names::LAUNCH_TAG;
use chrono::{DateTime, Duration, Utc};

/// How long an image takes to become available.
const IMAGE_TAKES: Duration = Duration::minutes(5);
/// The simulated subnets are named after their zone: `subnet-sim-{zone}`.
pub(super) const SUBNET_PREFIX: &str = "subnet-sim-";
/// How long a termination takes.
pub(super) const TERMINATE_TAKES: Duration = Duration::seconds(30);

/// A simulated image.
#[derive(Debug)]
pub(super) struct SimImage {
    name: String,
    /// The instance it was made of (its replacements behave like it).
    source: String,
    ready_at: DateTime<Utc>,
}

fn status(sim: &Simulated) -> InstanceStatus {
    InstanceStatus {
        id: sim.instance.id.clone(),
        state: sim.instance.state,
        lifecycle: sim.instance.lifecycle,
        instance_type: sim.instance.instance_type.clone(),
        zone: sim.zone.clone(),
        state_reason: sim.reason.map(str::to_string),
        image: None,
    }
}

impl SimProvider {
    pub(super) fn sim_launch_spec(&self, region: &str, id: &str) -> Result<LaunchSpec, CloudError> {
        let fleet = self.fleet();
        let sim = fleet
            .by_id
            .get(id)
            .map(|&i| &fleet.instances[i])
            .filter(|s| s.instance.region == region)
            .ok_or_else(|| {
                CloudError::not_found(
                    "DescribeInstances",
                    "InvalidInstanceID.NotFound",
                    format!("The instance ID '{id}' does not exist"),
                )
            })?;
        let zone = sim.zone.clone();
        let subnet = format!("{SUBNET_PREFIX}{zone}");
        Ok(LaunchSpec {
            instance_type: sim.instance.instance_type.clone(),
            subnets_by_zone: self
                .zones_of(region, &zone)
                .into_iter()
                .map(|z| (z.clone(), format!("{SUBNET_PREFIX}{z}")))
                .collect(),
            zone,
            subnet,
            security_groups: vec!["sg-sim".to_string()],
            instance_profile: None,
            key_name: None,
            private_ip: None,
            hibernation: false,
            user_data: None,
            tags: sim
                .instance
                .tags
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            volumes: Vec::new(),
            kept_at_termination: Vec::new(),
        })
    }

    pub(super) fn sim_describe(&self, region: &str, ids: &[String]) -> Vec<InstanceStatus> {
        let now = self.clock.now();
        let mut fleet = self.fleet();
        let mut found = Vec::new();
        for id in ids {
            if let Some(&i) = fleet.by_id.get(id) {
                let sim = &mut fleet.instances[i];
                if sim.instance.region == region {
                    sim.advance(now);
                    found.push(status(sim));
                }
            }
        }
        found
    }

    pub(super) fn sim_find_tagged(
        &self,
        region: &str,
        key: &str,
        value: &str,
    ) -> Option<InstanceStatus> {
        let now = self.clock.now();
        let mut fleet = self.fleet();
        let sim = fleet
            .instances
            .iter_mut()
            .rev()
            .find(|s| s.instance.region == region && s.instance.tag(key) == Some(value))?;
        sim.advance(now);
        Some(status(sim))
    }

    pub(super) fn sim_create_image(
        &self,
        region: &str,
        id: &str,
        name: &str,
    ) -> Result<ImageMade, CloudError> {
        let now = self.clock.now();
        let mut fleet = self.fleet();
        let named: Vec<String> = fleet
            .images
            .iter()
            .filter(|(_, i)| i.name == name)
            .map(|(id, _)| id.clone())
            .collect();
        if !named.is_empty() {
            return Ok(ImageMade::Named(named));
        }
        if fleet
            .by_id
            .get(id)
            .is_none_or(|&i| fleet.instances[i].instance.region != region)
        {
            return Err(CloudError::not_found(
                "CreateImage",
                "InvalidInstanceID.NotFound",
                format!("The instance ID '{id}' does not exist"),
            ));
        }
        let image = format!("ami-{:017x}", seed(name) >> 4);
        fleet.images.insert(
            image.clone(),
            SimImage {
                name: name.to_string(),
                source: id.to_string(),
                ready_at: now + IMAGE_TAKES,
            },
        );
        Ok(ImageMade::Made(image))
    }

    pub(super) fn sim_image(&self, image: &str) -> Option<Image> {
        let now = self.clock.now();
        let fleet = self.fleet();
        fleet.images.get(image).map(|i| Image {
            state: if now >= i.ready_at {
                ImageState::Available
            } else {
                ImageState::Pending
            },
            snapshots: Vec::new(),
            snapshot_volumes: Default::default(),
            completed_snapshots: Default::default(),
            volumes: Vec::new(),
            tags: Default::default(),
        })
    }

    pub(super) fn sim_launch(
        &self,
        region: &str,
        launch: &Launch,
    ) -> Result<InstanceStatus, CloudError> {
        let now = self.clock.now();
        let mut fleet = self.fleet();
        let source = fleet
            .images
            .get(&launch.image)
            .map(|i| i.source.clone())
            .ok_or_else(|| {
                CloudError::not_found(
                    "RunInstances",
                    "InvalidAMIID.NotFound",
                    format!("The image id '[{}]' does not exist", launch.image),
                )
            })?;
        let original = fleet.by_id.get(&source).map(|&i| &fleet.instances[i]);
        let behaviour = original.map(|s| s.behaviour.clone()).unwrap_or_default();
        let gpus = original.and_then(|s| s.instance.gpus.clone());
        let id = format!("i-{:017x}", seed(&launch.client_token) >> 4);
        let (zone, every) = self.launch_zone(region, &launch.subnet, &launch.spec.subnets_by_zone);
        let mut tags = launch.spec.tags.clone();
        tags.extend(launch.tags.clone());
        let mut sim = Simulated {
            seed: seed(&id),
            start_failures: 0,
            behaviour,
            transition: None,
            running_since: None,
            recorded: Vec::new(),
            owner_came: None,
            reason: None,
            reservation: None,
            zone,
            reclaim_every: every.filter(|_| launch.market == Market::Spot),
            instance: Instance {
                id: id.clone(),
                region: region.to_string(),
                instance_type: launch.instance_type.clone(),
                state: InstanceState::Pending,
                state_since: Some(now),
                lifecycle: match launch.market {
                    Market::Spot => Lifecycle::Spot,
                    Market::OnDemand => Lifecycle::OnDemand,
                },
                launched_at: Some(now),
                tags: tags.into_iter().collect(),
                gpus,
                gpu_util: Vec::new(),
                via_role: None,
                billing: Billing::EC2,
                private_ip: None,
            },
        };
        sim.begin(
            InstanceState::Pending,
            InstanceState::Running,
            now,
            START_TAKES,
        );
        let found = status(&sim);
        let index = fleet.instances.len();
        fleet.instances.push(sim);
        fleet.by_id.insert(id, index);
        Ok(found)
    }

    pub(super) async fn sim_terminate(&self, region: &str, ids: &[String]) -> ActionReport {
        self.act("TerminateInstances", region, ids, |sim, now| {
            if !matches!(
                sim.instance.state,
                InstanceState::ShuttingDown | InstanceState::Terminated
            ) {
                sim.begin(
                    InstanceState::ShuttingDown,
                    InstanceState::Terminated,
                    now,
                    TERMINATE_TAKES,
                );
                sim.running_since = None;
                sim.reason = Some("Client.UserInitiatedShutdown");
            }
            Ok(())
        })
        .await
    }

    /// The simulated replacements (tagged `ebb:launch`, not terminated) and images of
    /// `region`; the simulated images have no tags or snapshots.
    pub(super) fn sim_artifacts(&self, region: &str) -> Vec<Artifact> {
        let fleet = self.fleet();
        let instances = fleet.instances.iter().filter(|s| {
            s.instance.region == region
                && s.instance.tag(LAUNCH_TAG).is_some()
                && s.instance.state != InstanceState::Terminated
        });
        let mut found: Vec<Artifact> = instances
            .map(|s| Artifact {
                kind: ArtifactKind::Instance,
                region: region.to_string(),
                id: s.instance.id.clone(),
                tags: s
                    .instance
                    .tags
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect(),
                state: Some(s.instance.state),
                // The simulator does not keep them (its statuses have no image either).
                image: None,
                client_token: None,
            })
            .collect();
        found.extend(fleet.images.keys().map(|id| Artifact {
            kind: ArtifactKind::Image,
            region: region.to_string(),
            id: id.clone(),
            tags: Default::default(),
            state: None,
            image: None,
            client_token: None,
        }));
        found
    }

    pub(super) fn sim_delete_image(&self, image: &str) {
        self.fleet().images.remove(image);
    }
}
