//! What carries ebb's migration tags in ebb's own account, for `ebb spot-moves --orphans`:
//! instances, images and snapshots, every page of each; and the deletion of an image and of a
//! snapshot.

use super::ec2::state_of;
use super::{cloud_error, tag_map, AwsProvider, Scope};
use crate::cloud::{Artifact, ArtifactKind, CloudError};
use crate::names::{IMAGE_OF_TAG, LAUNCH_TAG, MIGRATION_TAG};
use aws_sdk_ec2::error::ProvideErrorMetadata;
use aws_sdk_ec2::types::{Filter, Tag};
use futures_util::FutureExt as _;

/// The filter for resources that carry tag `key`, whatever its value.
fn tagged(key: &str) -> Filter {
    Filter::builder().name("tag-key").values(key).build()
}

/// The image a snapshot was taken for, from the description EC2 gives a snapshot CreateImage
/// took: `Created by CreateImage(i-...) for ami-...`.
fn image_of(description: &str) -> Option<String> {
    let rest = description.strip_prefix("Created by CreateImage(")?;
    let image = rest.split(" for ").nth(1)?.split_whitespace().next()?;
    image.starts_with("ami-").then(|| image.to_string())
}

/// An artifact of `kind` in `scope`'s region, with its tags, the rest unknown.
fn artifact(kind: ArtifactKind, scope: &Scope, id: &str, tags: &[Tag]) -> Artifact {
    Artifact {
        kind,
        region: scope.region.clone(),
        id: id.to_string(),
        tags: tag_map(tags),
        state: None,
        image: None,
        client_token: None,
    }
}

impl AwsProvider {
    /// DescribeImages first, then DeregisterImage.
    pub(super) async fn deregister(&self, region: &str, image: &str) -> Result<(), CloudError> {
        let scope = self.scope_of(region, "", "DeregisterImage")?;
        if self.image_by_id(scope, image).await?.is_none() {
            return Ok(());
        }
        self.count("DeregisterImage");
        scope
            .ec2
            .deregister_image()
            .image_id(image)
            .send()
            .boxed()
            .await
            .map_err(|e| cloud_error("DeregisterImage", e))?;
        Ok(())
    }

    /// DeleteSnapshot; `InvalidSnapshot.NotFound` is success.
    pub(super) async fn remove_snapshot(
        &self,
        region: &str,
        snapshot: &str,
    ) -> Result<(), CloudError> {
        let scope = self.scope_of(region, "", "DeleteSnapshot")?;
        self.count("DeleteSnapshot");
        match scope
            .ec2
            .delete_snapshot()
            .snapshot_id(snapshot)
            .send()
            .boxed()
            .await
        {
            Ok(_) => Ok(()),
            Err(e)
                if e.as_service_error().and_then(ProvideErrorMetadata::code)
                    == Some("InvalidSnapshot.NotFound") =>
            {
                Ok(())
            }
            Err(e) => Err(cloud_error("DeleteSnapshot", e)),
        }
    }

    /// DescribeInstances, every page: the instances not terminated that carry `ebb:launch`.
    pub(super) async fn tagged_launches(&self, scope: &Scope) -> Result<Vec<Artifact>, CloudError> {
        let live = Filter::builder()
            .name("instance-state-name")
            .set_values(Some(
                ["pending", "running", "stopping", "stopped", "shutting-down"]
                    .map(String::from)
                    .to_vec(),
            ))
            .build();
        let mut pages = scope
            .ec2
            .describe_instances()
            .filters(tagged(LAUNCH_TAG))
            .filters(live)
            .into_paginator()
            .send();
        let mut found = Vec::new();
        while let Some(page) = pages.next().await {
            self.count("DescribeInstances");
            let page = page.map_err(|e| cloud_error("DescribeInstances", e))?;
            for i in page.reservations().iter().flat_map(|r| r.instances()) {
                let Some(id) = i.instance_id() else { continue };
                found.push(Artifact {
                    state: state_of(i),
                    image: i.image_id().map(str::to_string),
                    client_token: i.client_token().map(str::to_string),
                    ..artifact(ArtifactKind::Instance, scope, id, i.tags())
                });
            }
        }
        Ok(found)
    }

    /// DescribeImages, once per key: this account's images that carry `ebb:image-of` (every
    /// image ebb makes: a migration's and a reclaim's) or `ebb:migration` (what claims to be a
    /// migration's).
    pub(super) async fn tagged_images(&self, scope: &Scope) -> Result<Vec<Artifact>, CloudError> {
        let mut found: Vec<Artifact> = Vec::new();
        for key in [IMAGE_OF_TAG, MIGRATION_TAG] {
            self.count("DescribeImages");
            let images = scope
                .ec2
                .describe_images()
                .owners("self")
                .filters(tagged(key))
                .send()
                .boxed()
                .await
                .map_err(|e| cloud_error("DescribeImages", e))?;
            for image in images.images() {
                let Some(id) = image.image_id() else { continue };
                if !found.iter().any(|a| a.id == id) {
                    found.push(artifact(ArtifactKind::Image, scope, id, image.tags()));
                }
            }
        }
        Ok(found)
    }

    /// DescribeSnapshots, every page: this account's snapshots that carry `ebb:image-of`.
    pub(super) async fn tagged_snapshots(
        &self,
        scope: &Scope,
    ) -> Result<Vec<Artifact>, CloudError> {
        let mut pages = scope
            .ec2
            .describe_snapshots()
            .owner_ids("self")
            .filters(tagged(IMAGE_OF_TAG))
            .into_paginator()
            .send();
        let mut found = Vec::new();
        while let Some(page) = pages.next().await {
            self.count("DescribeSnapshots");
            let page = page.map_err(|e| cloud_error("DescribeSnapshots", e))?;
            for snapshot in page.snapshots() {
                let Some(id) = snapshot.snapshot_id() else {
                    continue;
                };
                found.push(Artifact {
                    image: snapshot.description().and_then(image_of),
                    ..artifact(ArtifactKind::Snapshot, scope, id, snapshot.tags())
                });
            }
        }
        Ok(found)
    }
}

#[cfg(test)]
mod tests {
    use super::image_of;

    #[test]
    fn a_snapshots_image_is_read_from_its_description() {
        let d = "Created by CreateImage(i-0abc) for ami-0123 from vol-9";
        assert_eq!(image_of(d).as_deref(), Some("ami-0123"));
        assert_eq!(
            image_of("Created by CreateImage(i-0abc) for ami-0123"),
            Some("ami-0123".into())
        );
        assert_eq!(image_of("my backup"), None);
    }
}
