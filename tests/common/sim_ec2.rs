//! The simulated fleet with the parts of EC2 a spot migration's proofs rest on, which the
//! simulator leaves out: an image's tags and EBS snapshots (each with the volume it was taken
//! from), the image an instance runs, RunInstances' client-token idempotency, a snapshot EC2
//! will not delete while a registered image uses it, and a spot reclaim's state reason. All of
//! it as EC2 documents it; the instances themselves are the simulator's. The rules are hooks
//! on the [`Intercept`] layer over the simulator.

use super::intercept::{Answer, Call, Intercept, Method};
use ebb::cloud::sim::SimProvider;
use ebb::cloud::{
    Artifact, ArtifactKind, CloudError, Done, ErrorKind, Image, ImageMade, InstanceStatus, Launch,
    Provider, SpotMoves, SPOT_TERMINATION,
};
use ebb::fleet::InstanceState;
use ebb::names::{IMAGE_OF_TAG, LAUNCH_TAG, MIGRATION_TAG};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, Mutex};

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

/// The simulated fleet with EC2's image and launch semantics: the layer to call, as
/// [`SimEc2::new`] makes it.
pub type Ec2 = Intercept<SimProvider>;

/// The model of what the simulator leaves out, behind the rules' hooks; clones share it.
#[derive(Clone)]
pub struct SimEc2 {
    /// The simulator.
    pub sim: Arc<SimProvider>,
    model: Arc<Mutex<Model>>,
}

/// The root volume of instance `id`, as the model names it.
pub fn volume_of(id: &str) -> String {
    format!("vol-{}", id.trim_start_matches("i-"))
}

impl SimEc2 {
    /// `sim` behind a layer with EC2's rules, and the model's handle.
    pub fn new(sim: SimProvider) -> (Ec2, SimEc2) {
        let cloud = Intercept::new(sim);
        let ec2 = SimEc2 {
            sim: cloud.inner.clone(),
            model: Arc::default(),
        };
        let rules = ec2.clone();
        let answered = [Method::Tag, Method::Launch, Method::DeleteSnapshot];
        cloud.before_async(answered, move |call| {
            let rules = rules.clone();
            async move { rules.answer(call).await }
        });
        let rules = ec2.clone();
        cloud.after(Method::ALL, move |call, answer| rules.amend(call, answer));
        (cloud, ec2)
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

    fn fill(&self, s: &mut InstanceStatus) {
        let model = self.model();
        s.image = model.runs.get(&s.id).cloned();
        if model.reclaimed.contains(&s.id) {
            s.state_reason = Some(SPOT_TERMINATION.to_string());
        }
    }

    /// The calls EC2's rules answer instead of the simulator, or with more than it.
    async fn answer(&self, call: Call) -> Option<Answer> {
        match call {
            Call::Tag { region, ids, tags } => {
                let (snapshots, instances): (Vec<String>, Vec<String>) =
                    ids.into_iter().partition(|id| id.starts_with("snap-"));
                if snapshots.is_empty() {
                    return None;
                }
                let mut report = self.sim.tag(&region, &instances, &tags).await;
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
                                read_back: None,
                            });
                        }
                        None => report.failed.push(ebb::cloud::Failed {
                            error: CloudError::not_found(
                                "CreateTags",
                                "InvalidSnapshot.NotFound",
                                format!("The snapshot '{id}' does not exist."),
                            ),
                            instance: id,
                        }),
                    }
                }
                Some(report.into())
            }
            Call::Launch { region, launch } => self.launched_before(&region, &launch).await,
            Call::DeleteSnapshot { snapshot, .. } => Some(self.delete_snapshot(&snapshot).into()),
            _ => None,
        }
    }

    /// EC2's idempotency: the same request again answers with its instance; other settings
    /// under the same token are refused.
    async fn launched_before(&self, region: &str, launch: &Launch) -> Option<Answer> {
        let seen = self.model().tokens.get(&launch.client_token).cloned();
        let (instance_type, subnet, id) = seen?;
        if (instance_type, subnet) != (launch.instance_type.clone(), launch.subnet.clone()) {
            let message = "the client token was used for a request with other parameters";
            let code = "IdempotentParameterMismatch";
            let e = CloudError::coded(ErrorKind::Other, "RunInstances", code, message);
            return Some(Answer::Launched(Err(e)));
        }
        let found = self.sim.describe(region, std::slice::from_ref(&id)).await;
        let found = found.and_then(|found| {
            let mut s = found.into_iter().next().ok_or_else(|| {
                CloudError::not_found("RunInstances", "InvalidInstanceID.NotFound", id)
            })?;
            self.fill(&mut s);
            Ok(s)
        });
        Some(found.into())
    }

    /// A snapshot EC2 will not delete while a registered image uses it; one already gone is no
    /// error.
    fn delete_snapshot(&self, snapshot: &str) -> Result<(), CloudError> {
        let mut model = self.model();
        let Some(s) = model.snapshots.get(snapshot) else {
            return Ok(());
        };
        let in_use = model
            .images
            .get(&s.image)
            .is_some_and(|i| i.registered && i.generation == s.generation);
        if in_use {
            return Err(CloudError::coded(
                ErrorKind::InvalidState,
                "DeleteSnapshot",
                "InvalidSnapshot.InUse",
                format!("The snapshot {snapshot} is currently in use by {}", s.image),
            ));
        }
        model.snapshots.remove(snapshot);
        Ok(())
    }

    /// What EC2 answers beyond the simulator's answer.
    fn amend(&self, call: &Call, answer: &mut Answer) {
        match (call, answer) {
            // As the AWS adapter asks EC2: instances not terminated (EC2 stops listing them
            // within the hour anyway).
            (Call::Instances, Answer::Inventory(inventory)) => inventory
                .instances
                .retain(|i| i.state != InstanceState::Terminated),
            (Call::LaunchSpec { id, .. }, Answer::Spec(Ok(spec))) => {
                spec.volumes = vec![volume_of(id)];
            }
            (Call::Describe { .. }, Answer::Statuses(Ok(found))) => {
                found.iter_mut().for_each(|s| self.fill(s));
            }
            (Call::FindTagged { .. }, Answer::Found(Ok(Some(s)))) => self.fill(s),
            (Call::CreateImage { id, tags, .. }, Answer::Made(Ok(ImageMade::Made(image)))) => {
                self.made(image, id, tags);
            }
            (Call::Image { image, .. }, Answer::Image(Ok(Some(found)))) => {
                self.describe_image(image, found);
            }
            (Call::Launch { launch, .. }, Answer::Launched(Ok(made))) => {
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
                self.fill(made);
            }
            (Call::DeregisterImage { image, .. }, Answer::Done(Ok(()))) => {
                if let Some(i) = self.model().images.get_mut(image) {
                    i.registered = false;
                }
            }
            (Call::MigrationArtifacts { region }, Answer::Artifacts(Ok(listed))) => {
                let all = std::mem::take(listed);
                *listed = self.artifacts(region, all);
            }
            _ => {}
        }
    }

    /// Image `image` made of instance `id`, with one snapshot of its root volume.
    fn made(&self, image: &str, id: &str, tags: &BTreeMap<String, String>) {
        let mut model = self.model();
        let generation = model.images.get(image).map_or(0, |i| i.generation + 1);
        let snapshot = format!("snap-{}-{generation}", image.trim_start_matches("ami-"));
        model.snapshots.insert(
            snapshot.clone(),
            ModelSnapshot {
                image: image.to_string(),
                generation,
                volume: volume_of(id),
                tags: BTreeMap::new(),
            },
        );
        model.images.insert(
            image.to_string(),
            ModelImage {
                generation,
                tags: tags.clone(),
                snapshots: vec![snapshot],
                registered: true,
            },
        );
    }

    /// An image's tags and snapshots, each with the volume it was taken from.
    fn describe_image(&self, image: &str, found: &mut Image) {
        let model = self.model();
        if let Some(m) = model.images.get(image) {
            found.tags = m.tags.clone();
            for s in &m.snapshots {
                if let Some(snap) = model.snapshots.get(s) {
                    found.snapshots.push(s.clone());
                    found
                        .snapshot_volumes
                        .insert(s.clone(), snap.volume.clone());
                    // The model's snapshots are complete once made.
                    found.completed_snapshots.insert(s.clone());
                }
            }
        }
    }

    /// The simulator's migration instances with their client tokens and images, and the
    /// model's images and snapshots that carry one of ebb's migration tags.
    fn artifacts(&self, region: &str, listed: Vec<Artifact>) -> Vec<Artifact> {
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
        found
    }
}
