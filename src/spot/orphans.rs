//! Untracked spend: instances, images and snapshots carrying ebb's migration tags that no
//! migration tracks (`ebb migrations --orphans`). Pure: what the cloud listed and what the
//! store holds in, the orphans out.

use crate::cloud::{Artifact, ArtifactKind};
use crate::names::{LAUNCH_TAG, MIGRATION_TAG};
use crate::spot::State;
use crate::store::MigrationRecord;
use chrono::Duration;
use serde::Serialize;
use std::collections::HashMap;

/// How often the leader looks for replacements ebb launched and lost track of (three
/// DescribeX calls per region of its migrations).
pub const SWEEP_EVERY: Duration = Duration::hours(1);

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

/// The artifacts of `found` that none of `migrations` tracks: an instance that is no
/// migration's current replacement (nor a warned one left to run out its two minutes), an
/// image no migration keeps, a snapshot neither recorded by a migration nor of an image one
/// keeps.
pub fn orphans(found: Vec<Artifact>, migrations: &[MigrationRecord]) -> Vec<Orphan> {
    let by_id: HashMap<i64, &MigrationRecord> = migrations.iter().map(|m| (m.id, m)).collect();
    let tracks_instance = |id: &str| {
        migrations.iter().any(|m| {
            m.current.as_deref() == Some(id) || m.interruptions.0.iter().any(|i| i.instance == id)
        })
    };
    let keeps_image = |id: &str| migrations.iter().any(|m| m.image.as_deref() == Some(id));
    found
        .into_iter()
        .filter_map(|a| {
            let verdict = match a.kind {
                ArtifactKind::Instance if tracks_instance(&a.id) => return None,
                ArtifactKind::Instance => instance_verdict(&a, &by_id),
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
