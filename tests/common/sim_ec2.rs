//! The simulated fleet with the parts of EC2 a spot migration's proofs rest on, which the
//! simulator leaves out: an image's tags and EBS snapshots (each with the volume it was taken
//! from), the image an instance runs, RunInstances' client-token idempotency, a snapshot EC2
//! will not delete while a registered image uses it, and a spot reclaim's state reason. All of
//! it as EC2 documents it; the instances themselves are the simulator's.

use chrono::{DateTime, Utc};
use ebb::cloud::sim::SimProvider;
use ebb::cloud::{
    ActionReport, Artifact, ArtifactKind, CloudError, Done, ErrorKind, Image, ImageMade,
    InstanceStatus, Inventory, Launch, LaunchSpec, Provider, StopKind, TypePrice, SPOT_TERMINATION,
};
use ebb::fleet::{Instance, Sample};
use ebb::names::{IMAGE_OF_TAG, LAUNCH_TAG, MIGRATION_TAG};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Mutex;

#[derive(Debug, Clone)]
struct ModelImage {
    /// How many images had this id before (the simulator derives an image's id from its name,
    /// where EC2 never reuses one): a snapshot belongs to one generation.
    generation: usize,
    tags: BTreeMap<String, String>,
    snapshots: Vec<String>,
    registered: bool,
}

#[derive(Debug, Clone)]
struct ModelSnapshot {
    image: String,
    generation: usize,
    volume: String,
    tags: BTreeMap<String, String>,
}

#[derive(Default)]
struct Model {
    images: HashMap<String, ModelImage>,
    snapshots: BTreeMap<String, ModelSnapshot>,
    /// The image each launched instance runs.
    runs: HashMap<String, String>,
    /// Client token -> (type, subnet, instance).
    tokens: HashMap<String, (String, String, String)>,
    reclaimed: HashSet<String>,
}

/// The simulated fleet with EC2's image and launch semantics.
pub struct SimEc2 {
    /// The simulator.
    pub sim: SimProvider,
    model: Mutex<Model>,
}

/// The root volume of instance `id`, as the model names it.
pub fn volume_of(id: &str) -> String {
    format!("vol-{}", id.trim_start_matches("i-"))
}

impl SimEc2 {
    /// `sim` with the model.
    pub fn new(sim: SimProvider) -> Self {
        SimEc2 {
            sim,
            model: Mutex::default(),
        }
    }

    fn model(&self) -> std::sync::MutexGuard<'_, Model> {
        self.model.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// EC2 takes the spot capacity of `id` back: terminated, with the spot reason.
    pub async fn reclaim(&self, region: &str, id: &str) {
        self.sim.terminate(region, &[id.to_string()]).await;
        self.model().reclaimed.insert(id.to_string());
    }

    /// Whether image `id` is registered.
    pub fn image_registered(&self, id: &str) -> bool {
        self.model().images.get(id).is_some_and(|i| i.registered)
    }

    /// The snapshots that exist, with the image each was made for.
    pub fn snapshots(&self) -> BTreeMap<String, String> {
        let model = self.model();
        model
            .snapshots
            .iter()
            .map(|(id, s)| (id.clone(), s.image.clone()))
            .collect()
    }

    /// The registered images.
    pub fn registered_images(&self) -> Vec<String> {
        let model = self.model();
        let mut found: Vec<String> = model
            .images
            .iter()
            .filter(|(_, i)| i.registered)
            .map(|(id, _)| id.clone())
            .collect();
        found.sort();
        found
    }

    fn fill(&self, mut s: InstanceStatus) -> InstanceStatus {
        let model = self.model();
        s.image = model.runs.get(&s.id).cloned();
        if model.reclaimed.contains(&s.id) {
            s.state_reason = Some(SPOT_TERMINATION.to_string());
        }
        s
    }
}

fn error(kind: ErrorKind, operation: &'static str, code: &str, message: String) -> CloudError {
    CloudError {
        kind,
        operation,
        code: Some(code.to_string()),
        message,
        request_id: None,
    }
}

impl Provider for SimEc2 {
    async fn instances(&self) -> Inventory {
        // As the AWS adapter asks EC2: instances not terminated (EC2 stops listing them within
        // the hour anyway).
        let mut inventory = self.sim.instances().await;
        inventory
            .instances
            .retain(|i| i.state != ebb::fleet::InstanceState::Terminated);
        inventory
    }

    async fn reread(&self, region: &str, ids: &[String]) -> Result<Vec<Instance>, CloudError> {
        self.sim.reread(region, ids).await
    }

    async fn gpu_utilisation(
        &self,
        region: &str,
        instances: &[String],
        from: DateTime<Utc>,
        to: DateTime<Utc>,
    ) -> Result<HashMap<String, Vec<Sample>>, CloudError> {
        self.sim.gpu_utilisation(region, instances, from, to).await
    }

    async fn prices(
        &self,
        region: &str,
        types: &[String],
        now: DateTime<Utc>,
    ) -> Result<Vec<TypePrice>, CloudError> {
        self.sim.prices(region, types, now).await
    }

    async fn stop(&self, region: &str, ids: &[String], kind: StopKind) -> ActionReport {
        self.sim.stop(region, ids, kind).await
    }

    async fn start(&self, region: &str, ids: &[String]) -> ActionReport {
        self.sim.start(region, ids).await
    }

    async fn set_type(&self, region: &str, id: &str, instance_type: &str) -> ActionReport {
        self.sim.set_type(region, id, instance_type).await
    }

    async fn tag(
        &self,
        region: &str,
        ids: &[String],
        tags: &BTreeMap<String, String>,
    ) -> ActionReport {
        let (snapshots, instances): (Vec<String>, Vec<String>) =
            ids.iter().cloned().partition(|id| id.starts_with("snap-"));
        let mut report = self.sim.tag(region, &instances, tags).await;
        let mut model = self.model();
        for id in snapshots {
            match model.snapshots.get_mut(&id) {
                Some(s) => {
                    s.tags.extend(tags.clone());
                    report.done.push(Done {
                        instance: id,
                        request_id: None,
                        fallback: None,
                        already: false,
                    });
                }
                None => report.failed.push(ebb::cloud::Failed {
                    error: error(
                        ErrorKind::NotFound,
                        "CreateTags",
                        "InvalidSnapshot.NotFound",
                        format!("The snapshot '{id}' does not exist."),
                    ),
                    instance: id,
                }),
            }
        }
        report
    }

    async fn untag(&self, region: &str, ids: &[String], keys: &[String]) -> ActionReport {
        self.sim.untag(region, ids, keys).await
    }

    async fn launch_spec(&self, region: &str, id: &str) -> Result<LaunchSpec, CloudError> {
        let mut spec = self.sim.launch_spec(region, id).await?;
        spec.volumes = vec![volume_of(id)];
        Ok(spec)
    }

    async fn describe(
        &self,
        region: &str,
        ids: &[String],
    ) -> Result<Vec<InstanceStatus>, CloudError> {
        let found = self.sim.describe(region, ids).await?;
        Ok(found.into_iter().map(|s| self.fill(s)).collect())
    }

    async fn find_tagged(
        &self,
        region: &str,
        key: &str,
        value: &str,
    ) -> Result<Option<InstanceStatus>, CloudError> {
        let found = self.sim.find_tagged(region, key, value).await?;
        Ok(found.map(|s| self.fill(s)))
    }

    async fn create_image(
        &self,
        region: &str,
        id: &str,
        name: &str,
        tags: &BTreeMap<String, String>,
    ) -> Result<ImageMade, CloudError> {
        let made = self.sim.create_image(region, id, name, tags).await?;
        if let ImageMade::Made(image) = &made {
            let mut model = self.model();
            let generation = model.images.get(image).map_or(0, |i| i.generation + 1);
            let snapshot = format!("snap-{}-{generation}", image.trim_start_matches("ami-"));
            model.snapshots.insert(
                snapshot.clone(),
                ModelSnapshot {
                    image: image.clone(),
                    generation,
                    volume: volume_of(id),
                    tags: BTreeMap::new(),
                },
            );
            model.images.insert(
                image.clone(),
                ModelImage {
                    generation,
                    tags: tags.clone(),
                    snapshots: vec![snapshot],
                    registered: true,
                },
            );
        }
        Ok(made)
    }

    async fn image(&self, region: &str, image: &str) -> Result<Option<Image>, CloudError> {
        let Some(mut found) = self.sim.image(region, image).await? else {
            return Ok(None);
        };
        let model = self.model();
        if let Some(m) = model.images.get(image) {
            found.tags = m.tags.clone();
            for s in &m.snapshots {
                if let Some(snap) = model.snapshots.get(s) {
                    found.snapshots.push(s.clone());
                    found
                        .snapshot_volumes
                        .insert(s.clone(), snap.volume.clone());
                }
            }
        }
        Ok(Some(found))
    }

    async fn launch(&self, region: &str, launch: &Launch) -> Result<InstanceStatus, CloudError> {
        let seen = self.model().tokens.get(&launch.client_token).cloned();
        if let Some((instance_type, subnet, id)) = seen {
            // EC2's idempotency: the same request again answers with its instance; other
            // settings under the same token are refused.
            if (instance_type, subnet) != (launch.instance_type.clone(), launch.subnet.clone()) {
                return Err(error(
                    ErrorKind::Other,
                    "RunInstances",
                    "IdempotentParameterMismatch",
                    "the client token was used for a request with other parameters".into(),
                ));
            }
            let found = self.describe(region, std::slice::from_ref(&id)).await?;
            return found.into_iter().next().ok_or_else(|| {
                error(
                    ErrorKind::NotFound,
                    "RunInstances",
                    "InvalidInstanceID.NotFound",
                    id,
                )
            });
        }
        let made = self.sim.launch(region, launch).await?;
        let mut model = self.model();
        model.tokens.insert(
            launch.client_token.clone(),
            (
                launch.instance_type.clone(),
                launch.subnet.clone(),
                made.id.clone(),
            ),
        );
        model.runs.insert(made.id.clone(), launch.image.clone());
        drop(model);
        Ok(self.fill(made))
    }

    async fn terminate(&self, region: &str, ids: &[String]) -> ActionReport {
        self.sim.terminate(region, ids).await
    }

    async fn deregister_image(&self, region: &str, image: &str) -> Result<(), CloudError> {
        self.sim.deregister_image(region, image).await?;
        if let Some(i) = self.model().images.get_mut(image) {
            i.registered = false;
        }
        Ok(())
    }

    async fn delete_snapshot(&self, _region: &str, snapshot: &str) -> Result<(), CloudError> {
        let mut model = self.model();
        let Some(s) = model.snapshots.get(snapshot) else {
            return Ok(());
        };
        let in_use = model
            .images
            .get(&s.image)
            .is_some_and(|i| i.registered && i.generation == s.generation);
        if in_use {
            return Err(error(
                ErrorKind::InvalidState,
                "DeleteSnapshot",
                "InvalidSnapshot.InUse",
                format!("The snapshot {snapshot} is currently in use by {}", s.image),
            ));
        }
        model.snapshots.remove(snapshot);
        Ok(())
    }

    async fn migration_artifacts(&self, region: &str) -> Result<Vec<Artifact>, CloudError> {
        let listed = self.sim.migration_artifacts(region).await?;
        let model = self.model();
        let token_of: HashMap<&str, &str> = model
            .tokens
            .iter()
            .map(|(token, (_, _, id))| (id.as_str(), token.as_str()))
            .collect();
        let ebb_tag = |tags: &BTreeMap<String, String>| {
            [LAUNCH_TAG, MIGRATION_TAG, IMAGE_OF_TAG]
                .iter()
                .any(|k| tags.contains_key(*k))
        };
        let mut found: Vec<Artifact> = listed
            .into_iter()
            .filter(|a| a.kind == ArtifactKind::Instance)
            .map(|mut a| {
                a.client_token = token_of.get(a.id.as_str()).map(|t| t.to_string());
                a.image = model.runs.get(&a.id).cloned();
                a
            })
            .collect();
        for (id, i) in &model.images {
            if i.registered && ebb_tag(&i.tags) {
                found.push(Artifact {
                    kind: ArtifactKind::Image,
                    region: region.to_string(),
                    id: id.clone(),
                    tags: i.tags.clone(),
                    state: None,
                    image: None,
                    client_token: None,
                });
            }
        }
        for (id, s) in &model.snapshots {
            if ebb_tag(&s.tags) {
                found.push(Artifact {
                    kind: ArtifactKind::Snapshot,
                    region: region.to_string(),
                    id: id.clone(),
                    tags: s.tags.clone(),
                    state: None,
                    image: Some(s.image.clone()),
                    client_token: None,
                });
            }
        }
        Ok(found)
    }
}
