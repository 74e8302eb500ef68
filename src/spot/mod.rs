//! Moving interruptible training to spot capacity, and bringing it back when spot capacity is
//! reclaimed.
//!
//! A migration is a state machine persisted in `spot_migrations` and advanced one step per
//! tick by the leader ([`drive`]): `planned → stopping → imaging → launching → verifying →
//! done`, or `rolled_back` / `failed`. Every step is written before the cloud is asked and is
//! safe to repeat, so a crash at any point resumes without a second replacement.
//!
//! This module holds the decisions, which are pure: the acceptable type and zone of least
//! expected cost ([`rank`]), which reclaimed places to avoid, when to fall back to on-demand,
//! and what has been saved.

pub mod drive;
pub mod early;
pub mod orphans;
// The ranking is pure data work, shared with `ebb replay`: it lives in the pure core.
pub use crate::fleet::rank;
pub use crate::fleet::rank::{Target, AVOID_FOR, INTERRUPTION_WINDOW};

use crate::cloud::{Image, ImageState, InstanceStatus, Market};
use crate::engine::{governing_policy, Override};
use crate::fleet::Instance;
use crate::names::{IMAGE_OF_TAG, INTERRUPTIBLE_TAG, MIGRATION_TAG};
use crate::policy::PolicySet;
use crate::store::MigrationRecord;
use chrono::{DateTime, Duration, Utc};
use std::collections::BTreeMap;

// The persisted types of a migration belong to the store, which must not import this module.
pub use crate::store::spot::{Interruption, State, Step};

/// After a migration was rolled back or failed, the instance is not planned again for this long.
pub const RETRY_AFTER: Duration = Duration::hours(6);
/// The original must have stopped within this long, or the migration rolls back.
pub const STOP_TIMEOUT: Duration = Duration::minutes(30);
/// The image must be available within this long (large volumes take a while).
pub const IMAGE_TIMEOUT: Duration = Duration::hours(3);
/// A replacement must be running within this long.
pub const LAUNCH_TIMEOUT: Duration = Duration::minutes(15);

/// What this tick knows of the protections and the policy of a migration's original.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Hold {
    /// Nothing protects it and its policy still moves it: the move may go on.
    Free,
    /// A protection or the policy forbids moving it now: why.
    Protected(String),
    /// It was not listed this tick, so its tags are unknown: nothing that moves it is done.
    Unknown,
}

/// Whether the migration of `original` (not listed: `None`) under `policy` may go on at `now`:
/// not when it is tagged `ebb:skip=true`, kept by `ebb:keep-until` (or the tag is not a time),
/// protected by `protection` (an override), no longer `ebb:interruptible`, or no longer governed
/// by a policy of that name with a spot rule.
pub fn hold(
    original: Option<&Instance>,
    policies: &PolicySet,
    policy: &str,
    protection: Option<&Override>,
    now: DateTime<Utc>,
) -> Hold {
    let Some(inst) = original else {
        return Hold::Unknown;
    };
    // The same judgement of the tags as a stop's.
    let why = crate::engine::tags_forbid_stop(inst, now);
    let why = why
        .or_else(|| {
            protection.filter(|o| o.until > now).map(|o| {
                format!(
                    "an override by {} until {} protects it: {}",
                    if o.by.is_empty() { "someone" } else { &o.by },
                    o.until.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
                    o.reason
                )
            })
        })
        .or_else(|| {
            (inst.tag(INTERRUPTIBLE_TAG) != Some("true"))
                .then(|| "it is no longer tagged ebb:interruptible=true".to_string())
        })
        .or_else(|| match governing_policy(policies, inst) {
            None => Some(format!("policy {policy} no longer governs it")),
            Some(p) if p.name != policy => Some(format!("policy {} governs it now", p.name)),
            Some(p) if p.spot.is_none() => {
                Some(format!("policy {policy} has no spot rule any more"))
            }
            Some(_) => None,
        });
    why.map_or(Hold::Free, Hold::Protected)
}

/// The tags ebb puts on the image of migration `id` of `original` when it makes it.
pub fn image_tags(id: i64, original: &str) -> BTreeMap<String, String> {
    BTreeMap::from([
        (IMAGE_OF_TAG.to_string(), original.to_string()),
        (MIGRATION_TAG.to_string(), id.to_string()),
    ])
}

/// Whether `image`, found after a crash instead of recorded from the call that made it, is
/// provably migration `id`'s image of `original`: it carries the migration's tags, and every
/// one of its snapshots was taken from one of `volumes`, the original's (EC2 records a
/// snapshot's volume; whoever makes an image cannot choose it). Why not otherwise.
pub fn prove_image(
    image: &Image,
    id: i64,
    original: &str,
    volumes: &[String],
) -> Result<(), String> {
    for (key, value) in image_tags(id, original) {
        if image.tags.get(&key) != Some(&value) {
            return Err(format!("it is not tagged {key}={value}"));
        }
    }
    if image.snapshots.is_empty() {
        return Err("it has no EBS snapshot of the original's volumes".into());
    }
    for snapshot in &image.snapshots {
        match image.snapshot_volumes.get(snapshot) {
            Some(v) if volumes.contains(v) => {}
            Some(v) => {
                return Err(format!(
                    "its snapshot {snapshot} was taken from {v}, not a volume of {original}"
                ))
            }
            None => return Err(format!("the volume of its snapshot {snapshot} is unknown")),
        }
    }
    Ok(())
}

/// Whether `image` (`None`: EC2 does not know it), the migration's image `id`, still holds
/// the workload's disks, as it must before the original is terminated: it is available, and
/// each of its snapshots and each one the migration `recorded` when it was made is still part
/// of it and `completed`. An account-wide image clean-up, a lifecycle policy or a person may
/// have removed either since. Why not otherwise.
pub fn image_intact(image: Option<&Image>, id: &str, recorded: &[String]) -> Result<(), String> {
    let Some(image) = image else {
        return Err(format!("its image {id} is gone"));
    };
    match image.state {
        ImageState::Available => {}
        ImageState::Pending => return Err(format!("its image {id} is pending again")),
        ImageState::Failed => return Err(format!("its image {id} failed or was deregistered")),
    }
    for snapshot in recorded.iter().chain(&image.snapshots) {
        if !image.snapshots.contains(snapshot) {
            return Err(format!(
                "snapshot {snapshot} is no longer part of its image {id}"
            ));
        }
        if !image.completed_snapshots.contains(snapshot) {
            return Err(format!(
                "snapshot {snapshot} of its image {id} is gone or not completed"
            ));
        }
    }
    Ok(())
}

/// Something about a migration that a person must look at: ebb waits on it, and says so in
/// the metrics (`ebb_spot_alerts{kind}`), the log and a webhook notice.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Alert {
    /// The original is due for termination, but the image or one of its snapshots is gone or
    /// not complete: the original is kept.
    ImageMissing,
    /// The migration ended for a cause ebb cannot know (its replacement terminated by someone,
    /// or no longer known to EC2) with the original gone: the image may be the only copy of
    /// the workload's disks, and is kept until a person releases it
    /// (`ebb spot-moves release ID`).
    ImageOnlyCopy,
}

impl Alert {
    /// Every alert.
    pub const ALL: [Alert; 2] = [Alert::ImageMissing, Alert::ImageOnlyCopy];

    /// The alert's name, as the metric labels it.
    pub fn as_str(self) -> &'static str {
        match self {
            Alert::ImageMissing => "image_missing",
            Alert::ImageOnlyCopy => "image_only_copy",
        }
    }
}

/// Whether `found`, an instance carrying a migration's launch tag that ebb did not record
/// launching (found after a crash), runs the migration's `image`; why not otherwise.
pub fn prove_replacement(found: &InstanceStatus, image: Option<&str>) -> Result<(), String> {
    match (found.image.as_deref(), image) {
        (Some(runs), Some(ours)) if runs == ours => Ok(()),
        (runs, ours) => Err(format!(
            "it runs image {}, not the migration's {}",
            runs.unwrap_or("(unknown)"),
            ours.unwrap_or("(none)")
        )),
    }
}

/// After a failed attempt of a migration step that is retried (a roll-back, the clean-up of the
/// original), the next waits this long, twice as long after each further failure in a row, up
/// to [`RETRY_MAX`]: the figures of failed actions, so that a failure that persists (access
/// denied, no capacity) neither fills the audit log nor spends the cloud's rate limits.
pub const RETRY_FIRST: Duration = Duration::minutes(1);
/// The longest wait before a failed migration step is tried again.
pub const RETRY_MAX: Duration = Duration::hours(1);

/// The wait before the next attempt after `failures` failed attempts in a row.
pub fn retry_wait(failures: i32) -> Duration {
    let doublings = failures.clamp(1, 12) - 1;
    (RETRY_FIRST * 2i32.pow(doublings as u32)).min(RETRY_MAX)
}

/// The types and zones reclaimed within [`AVOID_FOR`] before `now`.
pub fn avoided(interruptions: &[Interruption], now: DateTime<Utc>) -> Vec<(String, String)> {
    interruptions
        .iter()
        .filter(|i| now - i.at < AVOID_FOR)
        .map(|i| (i.instance_type.clone(), i.zone.clone()))
        .collect()
}

/// Reclaims within [`INTERRUPTION_WINDOW`] before `now`.
pub fn recent_interruptions(interruptions: &[Interruption], now: DateTime<Utc>) -> usize {
    interruptions
        .iter()
        .filter(|i| now - i.at < INTERRUPTION_WINDOW)
        .count()
}

/// Dollars the current replacement has saved from its start to `until`: spot hours times the
/// difference to the original's on-demand price.
pub fn current_savings(m: &MigrationRecord, until: DateTime<Utc>) -> f64 {
    match (m.market, m.running_since, m.on_demand_price, m.price) {
        (Market::Spot, Some(since), Some(on_demand), Some(price)) if until > since => {
            let hours = (until - since).num_seconds() as f64 / 3600.0;
            hours * (on_demand - price).max(0.0)
        }
        _ => 0.0,
    }
}

/// Dollars saved so far: earlier replacements, and the current one until `now` (or until the
/// migration ended).
pub fn savings(m: &MigrationRecord, now: DateTime<Utc>) -> f64 {
    let until = m.ended_at.unwrap_or(now);
    m.saved_before + current_savings(m, until)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(s).unwrap().with_timezone(&Utc)
    }

    fn trainer(tags: &[(&str, &str)]) -> Instance {
        let mut all = vec![("workload", "training"), ("ebb:interruptible", "true")];
        all.extend_from_slice(tags);
        Instance {
            id: "i-1".into(),
            region: "us-east-1".into(),
            instance_type: "g5.xlarge".into(),
            state: crate::fleet::InstanceState::Stopped,
            state_since: None,
            lifecycle: crate::fleet::Lifecycle::OnDemand,
            launched_at: None,
            tags: all.into_iter().collect(),
            gpus: None,
            gpu_util: Vec::new(),
            via_role: None,
            billing: crate::fleet::Billing::ec2(true),
            private_ip: None,
        }
    }

    fn policies(text: &str) -> PolicySet {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("p.yaml"), text).unwrap();
        crate::policy::load(&[dir.path().to_path_buf()]).unwrap()
    }

    #[test]
    fn every_protection_and_a_changed_policy_hold_a_move() {
        let with_spot = policies(
            "policies:\n  - name: to-spot\n    match: {tags: {workload: training}}\n    spot: {min_savings: 40%, checkpoint_max_age: 30m}\n",
        );
        let now = at("2026-11-30T12:00:00Z");
        let held = |inst: Option<&Instance>, set: &PolicySet, o: Option<&Override>| {
            hold(inst, set, "to-spot", o, now)
        };
        let free = trainer(&[]);
        assert_eq!(held(Some(&free), &with_spot, None), Hold::Free);
        assert_eq!(held(None, &with_spot, None), Hold::Unknown);
        let reason = |h: Hold| match h {
            Hold::Protected(why) => why,
            other => panic!("not protected: {other:?}"),
        };
        let skip = trainer(&[("ebb:skip", "true")]);
        assert!(reason(held(Some(&skip), &with_spot, None)).contains("ebb:skip"));
        let kept = trainer(&[("ebb:keep-until", "2026-11-30T13:00:00Z")]);
        assert!(reason(held(Some(&kept), &with_spot, None)).contains("ebb:keep-until"));
        let expired = trainer(&[("ebb:keep-until", "2026-11-30T11:00:00Z")]);
        assert_eq!(held(Some(&expired), &with_spot, None), Hold::Free);
        let garbled = trainer(&[("ebb:keep-until", "tomorrow")]);
        assert!(reason(held(Some(&garbled), &with_spot, None)).contains("not an RFC 3339"));
        let o = Override {
            instance: "i-1".into(),
            until: at("2026-11-30T20:00:00Z"),
            reason: "final epoch".into(),
            by: "li".into(),
        };
        assert!(reason(held(Some(&free), &with_spot, Some(&o))).contains("final epoch"));
        let past = Override {
            until: at("2026-11-30T11:00:00Z"),
            ..o.clone()
        };
        assert_eq!(held(Some(&free), &with_spot, Some(&past)), Hold::Free);
        let mut not_interruptible = free.clone();
        not_interruptible.tags.remove("ebb:interruptible");
        assert!(reason(held(Some(&not_interruptible), &with_spot, None)).contains("interruptible"));
        let no_spot =
            policies("policies:\n  - name: to-spot\n    match: {tags: {workload: training}}\n");
        assert!(reason(held(Some(&free), &no_spot, None)).contains("no spot rule"));
        let other = policies(
            "policies:\n  - name: other\n    match: {tags: {workload: training}}\n    spot: {min_savings: 40%, checkpoint_max_age: 30m}\n",
        );
        assert!(reason(held(Some(&free), &other, None)).contains("policy other governs"));
    }

    #[test]
    fn an_owner_found_during_a_move_holds_it() {
        let with_spot = policies(
            "policies:\n  - name: to-spot\n    match: {tags: {workload: training}}\n    spot: {min_savings: 40%, checkpoint_max_age: 30m}\n",
        );
        let now = at("2026-11-30T12:00:00Z");
        // Karpenter launches through EC2 Fleet; the node is Karpenter's.
        let adopted = trainer(&[
            ("karpenter.sh/nodepool", "train"),
            ("aws:ec2:fleet-id", "fleet-1"),
        ]);
        match hold(Some(&adopted), &with_spot, "to-spot", None, now) {
            Hold::Protected(why) => assert!(why.contains("Karpenter NodePool train"), "{why}"),
            other => panic!("not held: {other:?}"),
        }
    }

    #[test]
    fn an_image_is_intact_only_when_available_with_every_snapshot_completed() {
        let image = Image {
            state: ImageState::Available,
            snapshots: vec!["snap-1".into(), "snap-2".into()],
            snapshot_volumes: BTreeMap::new(),
            completed_snapshots: ["snap-1".to_string(), "snap-2".to_string()].into(),
            volumes: Vec::new(),
            tags: BTreeMap::new(),
        };
        let recorded = ["snap-1".to_string(), "snap-2".to_string()];
        assert_eq!(image_intact(Some(&image), "ami-1", &recorded), Ok(()));
        assert!(image_intact(None, "ami-1", &recorded)
            .unwrap_err()
            .contains("gone"));
        let failed = Image {
            state: ImageState::Failed,
            ..image.clone()
        };
        assert!(image_intact(Some(&failed), "ami-1", &recorded).is_err());
        let pending_snapshot = Image {
            completed_snapshots: ["snap-1".to_string()].into(),
            ..image.clone()
        };
        let why = image_intact(Some(&pending_snapshot), "ami-1", &recorded).unwrap_err();
        assert!(why.contains("snap-2"), "{why}");
        // A snapshot recorded when the image was made, no longer part of it.
        let shrunk = Image {
            snapshots: vec!["snap-1".into()],
            ..image.clone()
        };
        let why = image_intact(Some(&shrunk), "ami-1", &recorded).unwrap_err();
        assert!(why.contains("snap-2"), "{why}");
    }

    #[test]
    fn a_failing_step_waits_twice_as_long_each_time_up_to_an_hour() {
        assert_eq!(retry_wait(1), Duration::minutes(1));
        assert_eq!(retry_wait(2), Duration::minutes(2));
        assert_eq!(retry_wait(4), Duration::minutes(8));
        assert_eq!(retry_wait(7), RETRY_MAX);
        assert_eq!(retry_wait(1000), RETRY_MAX);
    }

    #[test]
    fn reclaims_are_avoided_for_a_while_and_counted_for_a_day() {
        let i = |t: &str| Interruption {
            at: at(t),
            instance: "i-1".into(),
            instance_type: "p4d".into(),
            zone: "z-a".into(),
        };
        let list = [i("2026-11-30T00:00:00Z"), i("2026-11-30T10:00:00Z")];
        let now = at("2026-11-30T12:00:00Z");
        assert_eq!(avoided(&list, now).len(), 1);
        assert_eq!(recent_interruptions(&list, now), 2);
        assert_eq!(recent_interruptions(&list, at("2026-12-01T06:00:00Z")), 1);
    }
}
