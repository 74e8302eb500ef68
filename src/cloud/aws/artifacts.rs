//! What carries ebb's migration tags in ebb's own account, for `ebb migrations --orphans`:
//! instances, images and snapshots, every page of each.

use super::ec2::state_of;
use super::{cloud_error, AwsProvider};
use crate::cloud::{Artifact, ArtifactKind, CloudError};
use crate::names::{IMAGE_OF_TAG, LAUNCH_TAG, MIGRATION_TAG};
use aws_sdk_ec2::types::{Filter, Tag};
use std::collections::BTreeMap;

/// The filter for resources that carry tag `key`, whatever its value.
fn tagged(key: &str) -> Filter {
    Filter::builder().name("tag-key").values(key).build()
}

fn tag_map(tags: &[Tag]) -> BTreeMap<String, String> {
    tags.iter()
        .filter_map(|t| Some((t.key()?.to_string(), t.value().unwrap_or("").to_string())))
        .collect()
}

/// The image a snapshot was taken for, from the description EC2 gives a snapshot CreateImage
/// took: `Created by CreateImage(i-...) for ami-...`.
fn image_of(description: &str) -> Option<String> {
    let rest = description.strip_prefix("Created by CreateImage(")?;
    let image = rest.split(" for ").nth(1)?.split_whitespace().next()?;
    image.starts_with("ami-").then(|| image.to_string())
}

impl AwsProvider {
    /// DescribeInstances (tag `ebb:launch`, not terminated), DescribeImages (own, tag
    /// `ebb:migration`) and DescribeSnapshots (own, tag `ebb:image-of`) in ebb's own account.
    pub(super) async fn tagged_artifacts(&self, region: &str) -> Result<Vec<Artifact>, CloudError> {
        let scope = self.scope_of(region, "", "DescribeInstances")?;
        let artifact = |kind, id: &str, tags: &[Tag]| Artifact {
            kind,
            region: region.to_string(),
            id: id.to_string(),
            tags: tag_map(tags),
            state: None,
            image: None,
            client_token: None,
        };
        let mut found = Vec::new();
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
        while let Some(page) = pages.next().await {
            self.count("DescribeInstances");
            let page = page.map_err(|e| cloud_error("DescribeInstances", e))?;
            for i in page.reservations().iter().flat_map(|r| r.instances()) {
                let Some(id) = i.instance_id() else { continue };
                found.push(Artifact {
                    state: state_of(i),
                    image: i.image_id().map(str::to_string),
                    client_token: i.client_token().map(str::to_string),
                    ..artifact(ArtifactKind::Instance, id, i.tags())
                });
            }
        }
        self.count("DescribeImages");
        let images = scope
            .ec2
            .describe_images()
            .owners("self")
            .filters(tagged(MIGRATION_TAG))
            .send()
            .await
            .map_err(|e| cloud_error("DescribeImages", e))?;
        for image in images.images() {
            if let Some(id) = image.image_id() {
                found.push(artifact(ArtifactKind::Image, id, image.tags()));
            }
        }
        let mut pages = scope
            .ec2
            .describe_snapshots()
            .owner_ids("self")
            .filters(tagged(IMAGE_OF_TAG))
            .into_paginator()
            .send();
        while let Some(page) = pages.next().await {
            self.count("DescribeSnapshots");
            let page = page.map_err(|e| cloud_error("DescribeSnapshots", e))?;
            for snapshot in page.snapshots() {
                let Some(id) = snapshot.snapshot_id() else {
                    continue;
                };
                found.push(Artifact {
                    image: snapshot.description().and_then(image_of),
                    ..artifact(ArtifactKind::Snapshot, id, snapshot.tags())
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
