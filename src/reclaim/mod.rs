//! Reclaiming boxes stopped for long (`stopped.reclaim_after`), and bringing them back.
//!
//! A reclaim is a row of `reclaims` advanced one step per tick by the leader ([`drive`]):
//! `noticed → imaging → reclaimed`, then, when someone runs `ebb restore`, `restoring →
//! restored`; or `held` (something keeps the box) or `refused` (something of it would not be
//! in its image, or its image cannot be proven). The box is terminated only once an image of
//! all its volumes is available, every snapshot completed, and proven made from those volumes
//! by ebb for this reclaim. The image is deleted only when the policy sets `keep_image_for` and
//! the box restored from it has been up that long (its volumes are then a copy); otherwise it
//! is kept.
//!
//! When a reclaim is due, and what keeps a box, is the pure core's
//! (`crates/ebb-core/src/engine/reclaim.rs`); this module holds the proof of an image and the
//! steps.

pub mod drive;

use crate::cloud::{Image, LaunchSpec};
use crate::names::{IMAGE_OF_TAG, RECLAIM_TAG};
use crate::spot::drive::Unanswered;
use chrono::Duration;
use std::collections::BTreeMap;

/// A reclaim held or refused is not planned again for this long: a refusal (a volume kept at
/// termination, access denied) is not retried every tick, nor noticed again and again.
pub const QUIET_AFTER_END: Duration = Duration::days(1);

/// The image must be available within this long (large volumes take a while), or the reclaim
/// is refused and the box kept.
pub const IMAGE_TIMEOUT: Duration = Duration::hours(6);

/// The name of reclaim `id`'s image of `instance`: the same at every attempt, so that an image
/// made by an attempt whose answer was lost is found instead of made twice.
pub fn image_name(id: i64, instance: &str) -> String {
    format!("ebb-reclaim-{id}-{instance}")
}

/// The tags ebb puts on reclaim `id`'s image of `instance` and its snapshots: `ebb:image-of`,
/// which the IAM policy asks of every image ebb makes (and lets it delete), and the reclaim's.
pub fn image_tags(id: i64, instance: &str) -> BTreeMap<String, String> {
    BTreeMap::from([
        (IMAGE_OF_TAG.to_string(), instance.to_string()),
        (RECLAIM_TAG.to_string(), id.to_string()),
    ])
}

/// The reclaim an unanswered intent is a step of, from its reason (`reclaim {id}: ...`, as
/// every step writes it).
pub fn reclaim_of(u: &Unanswered) -> Option<i64> {
    let (head, _) = u.intent.entry.reason.split_once(": ")?;
    head.strip_prefix("reclaim ")?.parse().ok()
}

/// Why `spec`'s box cannot be reclaimed by an image, if it cannot: a volume that outlives the
/// termination would be left behind, still paid, and a box without EBS volumes has nothing an
/// image keeps.
pub fn refusal(spec: &LaunchSpec) -> Option<String> {
    if !spec.kept_at_termination.is_empty() {
        return Some(format!(
            "its volumes {} are not deleted at termination (DeleteOnTermination false), so they would be left behind and still paid; set it to true or detach them to let ebb reclaim the box",
            spec.kept_at_termination.join(", ")
        ));
    }
    if spec.volumes.is_empty() {
        return Some("it has no EBS volume for an image to keep".to_string());
    }
    if spec.hibernation {
        return Some("it was launched with hibernation enabled, and EC2 does not support images of such a box (one launched from them may not be reachable); it is left stopped, its disks paid".to_string());
    }
    None
}

/// Whether `image` (`name`), found or made for reclaim `id` of `instance`, holds the box's disks
/// as they are before it is terminated: available, carrying the reclaim's tags, every snapshot completed and
/// taken from one of `volumes` (EC2 records a snapshot's volume; whoever makes an image cannot
/// choose it), and one snapshot of each of `volumes`. Why not otherwise.
pub fn prove(
    image: &Image,
    name: &str,
    id: i64,
    instance: &str,
    volumes: &[String],
) -> Result<(), String> {
    for (key, value) in image_tags(id, instance) {
        if image.tags.get(&key) != Some(&value) {
            return Err(format!("image {name} is not tagged {key}={value}"));
        }
    }
    if image.state != crate::cloud::ImageState::Available {
        return Err(format!("image {name} is not available"));
    }
    for snapshot in &image.snapshots {
        if !image.completed_snapshots.contains(snapshot) {
            return Err(format!(
                "snapshot {snapshot} of image {name} is not completed"
            ));
        }
        match image.snapshot_volumes.get(snapshot) {
            Some(v) if volumes.contains(v) => {}
            Some(v) => {
                return Err(format!(
                "snapshot {snapshot} of image {name} was taken from {v}, not a volume of the box"
            ))
            }
            None => return Err(format!("the volume of snapshot {snapshot} is unknown")),
        }
    }
    for volume in volumes {
        if !image.snapshot_volumes.values().any(|v| v == volume) {
            return Err(format!("image {name} has no snapshot of volume {volume}"));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cloud::ImageState;

    fn image() -> Image {
        Image {
            state: ImageState::Available,
            snapshots: vec!["snap-1".into(), "snap-2".into()],
            snapshot_volumes: BTreeMap::from([
                ("snap-1".to_string(), "vol-root".to_string()),
                ("snap-2".to_string(), "vol-data".to_string()),
            ]),
            completed_snapshots: ["snap-1".to_string(), "snap-2".to_string()].into(),
            volumes: Vec::new(),
            tags: image_tags(7, "i-1"),
        }
    }

    #[test]
    fn an_image_is_proven_only_complete_tagged_and_of_every_volume() {
        let volumes = ["vol-root".to_string(), "vol-data".to_string()];
        assert_eq!(prove(&image(), "ami-1", 7, "i-1", &volumes), Ok(()));
        let why = |i: &Image, v: &[String]| prove(i, "ami-1", 7, "i-1", v).unwrap_err();
        assert!(why(&image(), &["vol-root".into()]).contains("vol-data"));
        let missing = [
            "vol-root".to_string(),
            "vol-data".into(),
            "vol-scratch".into(),
        ];
        assert!(why(&image(), &missing).contains("no snapshot of volume vol-scratch"));
        let other = Image {
            tags: image_tags(8, "i-1"),
            ..image()
        };
        assert!(why(&other, &volumes).contains("ebb:reclaim=7"));
        let pending = Image {
            completed_snapshots: ["snap-1".to_string()].into(),
            ..image()
        };
        assert!(why(&pending, &volumes).contains("snap-2"));
        let failed = Image {
            state: ImageState::Failed,
            ..image()
        };
        assert!(why(&failed, &volumes).contains("not available"));
    }

    #[test]
    fn a_box_with_a_volume_kept_at_termination_is_refused() {
        let spec = |volumes: &[&str], kept: &[&str]| LaunchSpec {
            instance_type: "g5.xlarge".into(),
            zone: "us-east-1a".into(),
            subnet: "subnet-1".into(),
            subnets_by_zone: BTreeMap::new(),
            security_groups: Vec::new(),
            instance_profile: None,
            key_name: None,
            user_data: None,
            tags: BTreeMap::new(),
            volumes: volumes.iter().map(|v| v.to_string()).collect(),
            kept_at_termination: kept.iter().map(|v| v.to_string()).collect(),
            private_ip: None,
            hibernation: false,
        };
        assert_eq!(refusal(&spec(&["vol-1"], &[])), None);
        assert!(refusal(&spec(&["vol-1", "vol-2"], &["vol-2"]))
            .unwrap()
            .contains("vol-2"));
        assert!(refusal(&spec(&[], &[])).unwrap().contains("no EBS volume"));
    }
}
