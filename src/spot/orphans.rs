//! Untracked spend: instances, images and snapshots carrying ebb's migration tags that no
//! migration tracks (`ebb spot-moves --orphans`). Pure: what the cloud listed and what the
//! store holds in, the orphans out.

use crate::cloud::{Artifact, ArtifactKind};
use crate::names::{LAUNCH_TAG, MIGRATION_TAG, RECLAIM_TAG};
use crate::spot::State;
use crate::store::MigrationRecord;
use chrono::{DateTime, Duration, Utc};
use serde::Serialize;
use std::collections::HashMap;

/// How often the leader looks for replacements ebb launched and lost track of (three
/// DescribeX calls per region of its migrations).
pub const SWEEP_EVERY: Duration = Duration::hours(1);

/// How long a replacement counted as interrupted is left to EC2: its two minutes' notice,
/// with room for EC2's own delay. One still running after that was not reclaimed (the warning
/// was wrong, or forged): it is an orphan, reported and never terminated, since its disks may
/// be newer than the image its successor was launched from.
pub const NOTICE_WINDOW: Duration = Duration::minutes(10);

/// The migration an artifact's `ebb:migration` tag names, among `migrations`.
pub fn migration_of<'a>(
    a: &Artifact,
    migrations: &'a [MigrationRecord],
) -> Option<&'a MigrationRecord> {
    let id = a.tags.get(MIGRATION_TAG)?.parse::<i64>().ok()?;
    migrations.iter().find(|m| m.id == id)
}

/// An artifact no migration tracks.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Orphan {
    /// What was found.
    #[serde(flatten)]
    pub artifact: Artifact,
    /// Whether it is a replacement ebb itself launched (its migration's launch id and
    /// ebb's client token for that launch) and lost track of: ebb's to terminate. Anything
    /// else is only reported.
    pub lost: bool,
    /// Why it is an orphan, for people.
    pub why: String,
}

/// The artifacts of `found` that none of `migrations` tracks at `now`: an instance that is no
/// migration's current replacement (nor the one an early move replaces, nor an interrupted one
/// within its [`NOTICE_WINDOW`]), an
/// image no migration keeps, a snapshot neither recorded by a migration nor of an image one
/// keeps.
pub fn orphans(
    found: Vec<Artifact>,
    migrations: &[MigrationRecord],
    now: DateTime<Utc>,
) -> Vec<Orphan> {
    let by_id: HashMap<i64, &MigrationRecord> = migrations.iter().map(|m| (m.id, m)).collect();
    let tracks_instance = |id: &str| {
        migrations.iter().any(|m| {
            m.current.as_deref() == Some(id)
                || m.outgoing.as_ref().is_some_and(|o| o.instance == id)
                || m.interruptions
                    .0
                    .iter()
                    .any(|i| i.instance == id && now - i.at < NOTICE_WINDOW)
        })
    };
    // Interrupted, and still running after its notice: never reclaimed.
    let outlived_notice = |id: &str| {
        migrations
            .iter()
            .flat_map(|m| m.interruptions.0.iter().map(move |i| (m.id, i)))
            .find(|(_, i)| i.instance == id)
            .map(|(m, i)| {
                format!(
                    "migration {m} counted it as interrupted at {}, and it still runs after its notice: the warning was wrong or forged; not terminated, its disks may be newer than the image",
                    i.at.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
                )
            })
    };
    let keeps_image = |id: &str| migrations.iter().any(|m| m.image.as_deref() == Some(id));
    found
        .into_iter()
        // A reclaim's image and snapshots (`crate::reclaim`) are its, not a migration's.
        .filter(|a| !a.tags.contains_key(RECLAIM_TAG))
        .filter_map(|a| {
            let verdict = match a.kind {
                ArtifactKind::Instance if tracks_instance(&a.id) => return None,
                ArtifactKind::Instance => match outlived_notice(&a.id) {
                    Some(why) => Err(why),
                    None => instance_verdict(&a, &by_id),
                },
                ArtifactKind::Image if keeps_image(&a.id) => return None,
                ArtifactKind::Image => Err("no migration keeps this image".to_string()),
                ArtifactKind::Snapshot
                    if migrations.iter().any(|m| m.snapshots.contains(&a.id))
                        || a.image.as_deref().is_some_and(keeps_image) =>
                {
                    return None
                }
                ArtifactKind::Snapshot => Err(match &a.image {
                    Some(image) => format!("no migration keeps its image {image}"),
                    None => "no migration records it".to_string(),
                }),
            };
            let (lost, why) = match verdict {
                Ok(why) => (true, why),
                Err(why) => (false, why),
            };
            Some(Orphan {
                artifact: a,
                lost,
                why,
            })
        })
        .collect()
}

/// An untracked instance tagged `ebb:launch`: `Ok` with why when it is ebb's own lost
/// launch, `Err` with why it is only reported.
fn instance_verdict(
    a: &Artifact,
    by_id: &HashMap<i64, &MigrationRecord>,
) -> Result<String, String> {
    let launch = a.tags.get(LAUNCH_TAG).map_or("", String::as_str);
    let tagged = a.tags.get(MIGRATION_TAG).map_or("", String::as_str);
    let m = tagged
        .parse::<i64>()
        .ok()
        .and_then(|id| by_id.get(&id))
        .ok_or_else(|| {
            format!("it carries {MIGRATION_TAG}={tagged:?}, and no such migration exists")
        })?;
    let n = launch
        .strip_prefix(&format!("{}-{}-", m.original, m.id))
        .and_then(|n| n.parse::<i32>().ok())
        .filter(|n| (1..=m.launches + 1).contains(n))
        .ok_or_else(|| {
            format!(
                "its {LAUNCH_TAG}={launch:?} is no launch migration {} made",
                m.id
            )
        })?;
    if a.client_token.as_deref() != Some(format!("ebb-{launch}").as_str()) {
        return Err(format!(
            "it was not launched with ebb's client token for launch {launch}: not proven ebb's"
        ));
    }
    let live = !matches!(m.state, State::RolledBack | State::Failed) && m.ended_at.is_none();
    if live && n == m.launches + 1 {
        return Err(format!(
            "launch {launch} is migration {}'s next: the migration adopts it (or refuses it)",
            m.id
        ));
    }
    Ok(format!(
        "ebb launched it (launch {launch} of migration {}, {}), and the migration does not track it",
        m.id,
        m.state.as_str()
    ))
}
