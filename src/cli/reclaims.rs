//! `ebb reclaims` and `ebb restore`: the boxes reclaimed after a long stop, and asking for one
//! back (the leader launches it from its image at its next tick).

use super::args::{ActorArg, DbArgs, Format};
use crate::output::table;
use crate::store::ReclaimRecord;
use anyhow::{bail, Result};
use chrono::{SecondsFormat, Utc};
use std::process::ExitCode;

/// `ebb reclaims`: every reclaim, newest first.
pub(super) async fn list(format: Format, db: &DbArgs) -> Result<ExitCode> {
    let store = db.open().await?;
    let reclaims = store.reclaims().await?;
    match format {
        Format::Table => out!("{}", reclaims_table(&reclaims)),
        Format::Json => outln!("{}", serde_json::to_string_pretty(&reclaims)?),
    }
    Ok(ExitCode::SUCCESS)
}

/// `ebb restore INSTANCE`: asks for reclaimed box `instance` back.
pub(super) async fn restore(instance: &str, actor: &ActorArg, db: &DbArgs) -> Result<ExitCode> {
    let store = db.open().await?;
    match store
        .ask_restore(instance, &actor.name(), Utc::now())
        .await?
    {
        Ok(r) => {
            outln!(
                "restore of {instance} asked for (reclaim {}): the leader launches it from image {} at its next tick; `ebb reclaims` shows the new box",
                r.id,
                r.image.as_deref().unwrap_or("-")
            );
            Ok(ExitCode::SUCCESS)
        }
        Err(why) => bail!("cannot restore {instance}: {why}"),
    }
}

fn reclaims_table(list: &[ReclaimRecord]) -> String {
    if list.is_empty() {
        return "no reclaims\n".to_string();
    }
    let stamp = |t: chrono::DateTime<Utc>| t.to_rfc3339_opts(SecondsFormat::Secs, true);
    let rows: Vec<[String; 9]> = list
        .iter()
        .map(|r| {
            [
                r.id.to_string(),
                r.instance.clone(),
                r.state.as_str().to_string(),
                r.policy.clone(),
                stamp(r.stopped_since),
                stamp(r.due_at),
                r.image.clone().unwrap_or_else(|| "-".into()),
                r.image_volumes.as_ref().map_or_else(
                    || "-".into(),
                    |v| format!("{} GiB", v.iter().map(|v| v.size_gib).sum::<u64>()),
                ),
                r.restored_as
                    .clone()
                    .or_else(|| r.error.clone())
                    .unwrap_or_default(),
            ]
        })
        .collect();
    table(
        &[
            "ID",
            "INSTANCE",
            "STATE",
            "POLICY",
            "STOPPED",
            "DUE",
            "IMAGE",
            "IMAGE HOLDS",
            "RESTORED / WHY",
        ],
        &rows,
    )
}
