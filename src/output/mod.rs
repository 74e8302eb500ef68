//! How decisions and audit rows are shown: JSON and CSV for other tools, aligned tables for
//! people.

use crate::engine::Decision;
use crate::fleet::money::{Attached, Volume};
use crate::fleet::{Charge, Cloud, HeldReservation, Instance, Owner, ReservationKind, StoppedMode};
use crate::reconcile::TickReport;
use crate::spot::{self, Interruption, Step};
use crate::store::{AuditEntry, MigrationRecord, OverrideRecord};
use chrono::{DateTime, SecondsFormat, TimeZone, Utc};
use serde::Serialize;
use std::collections::{BTreeMap, HashMap};

mod audit_export;
mod explain;
mod groups;
mod pools;

pub use audit_export::{
    audit_csv, audit_csv_rows, audit_json, audit_row_json, parse_audit_export, ExportError,
};
pub use explain::{explanation_json, group_explanation_json};
pub use groups::{group_explanation, plan_groups_table};
pub use pools::{pools_json, pools_table};

/// One element of `ebb plan --format json`: exactly the fields `ebb plan` promises in
/// docs/commands.md#policies-plans-and-the-fleet.
#[derive(Debug, Serialize)]
struct PlanItem<'a> {
    instance: &'a str,
    action: &'a str,
    policy: Option<&'a str>,
    code: &'a str,
    reason: &'a str,
    owner: Option<&'a Owner>,
}

/// The owner of each instance of `instances` that has one, by id.
fn owners(instances: &[Instance]) -> HashMap<&str, Owner> {
    instances
        .iter()
        .filter_map(|i| Some((i.id.as_str(), i.owner()?)))
        .collect()
}

/// The decisions as a JSON array of `{instance, action, policy, code, reason, owner}`, the
/// owner from `instances` (the fleet decided on).
pub fn plan_json(decisions: &[Decision], instances: &[Instance]) -> String {
    let owners = owners(instances);
    let items: Vec<PlanItem> = decisions
        .iter()
        .map(|d| PlanItem {
            instance: &d.instance,
            action: d.action.as_str(),
            policy: d.policy.as_deref(),
            code: d.code.as_str(),
            reason: &d.reason,
            owner: owners.get(d.instance.as_str()),
        })
        .collect();
    let mut text = serde_json::to_string_pretty(&items).unwrap_or_else(|_| "[]".into());
    text.push('\n');
    text
}

/// One spot migration as `ebb spot-moves --format json` and `GET /v1/migrations` show it.
#[derive(Debug, Serialize)]
pub struct MigrationView<'a> {
    /// Its id.
    pub id: i64,
    /// The on-demand instance that was moved.
    pub original: &'a str,
    /// Its region.
    pub region: &'a str,
    /// The policy whose spot rule moved it.
    pub policy: &'a str,
    /// `planned`, `stopping`, `imaging`, `launching`, `verifying`, `done`, `rolled_back`,
    /// `failed`.
    pub state: &'a str,
    /// The instance running the workload now.
    pub current: Option<&'a str>,
    /// `spot`, or `on-demand` after a fallback.
    pub market: &'a str,
    /// The current replacement's type and zone.
    pub instance_type: Option<&'a str>,
    /// Its zone.
    pub zone: Option<&'a str>,
    /// Dollars saved so far against the original's on-demand price.
    pub savings_so_far: f64,
    /// Spot reclaims.
    pub interruptions: &'a [Interruption],
    /// When the original was terminated (after `keep_original_for`).
    pub original_terminated_at: Option<DateTime<Utc>>,
    /// When the original was found running again (someone started it) and left to people.
    pub original_returned_at: Option<DateTime<Utc>>,
    /// When ebb stopped following it.
    pub ended_at: Option<DateTime<Utc>>,
    /// Why it rolled back or failed.
    pub error: Option<&'a str>,
    /// When it was planned.
    pub created_at: DateTime<Utc>,
    /// Every step.
    pub steps: &'a [Step],
}

impl<'a> MigrationView<'a> {
    /// The view of `m` at `now`.
    pub fn new(m: &'a MigrationRecord, now: DateTime<Utc>) -> Self {
        MigrationView {
            id: m.id,
            original: &m.original,
            region: &m.region,
            policy: &m.policy,
            state: m.state.as_str(),
            current: m.current.as_deref(),
            market: m.market.as_str(),
            instance_type: m.instance_type.as_deref(),
            zone: m.zone.as_deref(),
            savings_so_far: (spot::savings(m, now) * 100.0).round() / 100.0,
            interruptions: &m.interruptions.0,
            original_terminated_at: m.original_terminated_at,
            original_returned_at: m.original_returned_at,
            ended_at: m.ended_at,
            error: m.error.as_deref(),
            created_at: m.created_at,
            steps: &m.steps.0,
        }
    }
}

/// The migrations as a JSON array of [`MigrationView`].
pub fn migrations_json(list: &[MigrationRecord], now: DateTime<Utc>) -> String {
    let items: Vec<MigrationView> = list.iter().map(|m| MigrationView::new(m, now)).collect();
    let mut text = serde_json::to_string_pretty(&items).unwrap_or_else(|_| "[]".into());
    text.push('\n');
    text
}

/// The migrations as an aligned table: state, where the workload runs, savings, reclaims, and
/// the last step.
pub fn migrations_table(list: &[MigrationRecord], now: DateTime<Utc>) -> String {
    if list.is_empty() {
        return "no spot migrations\n".to_string();
    }
    let rows: Vec<[String; 9]> = list
        .iter()
        .map(|m| {
            let state = if m.ended_at.is_some() {
                format!("{} (ended)", m.state.as_str())
            } else {
                m.state.as_str().to_string()
            };
            [
                m.id.to_string(),
                m.original.clone(),
                state,
                m.current.clone().unwrap_or_else(|| "-".into()),
                m.market.as_str().to_string(),
                m.instance_type.clone().unwrap_or_else(|| "-".into()),
                format!("${:.2}", spot::savings(m, now)),
                m.interruptions.0.len().to_string(),
                m.steps
                    .0
                    .last()
                    .map(|s| s.detail.clone())
                    .unwrap_or_default(),
            ]
        })
        .collect();
    table(
        &[
            "ID",
            "ORIGINAL",
            "STATE",
            "CURRENT",
            "MARKET",
            "TYPE",
            "SAVED",
            "RECLAIMS",
            "LAST STEP",
        ],
        &rows,
    )
}

/// The decisions as an aligned table, with each instance's owner from `instances` (the fleet
/// decided on); the reason comes last so long reasons don't push the columns apart. Dry-run
/// decisions are marked. Then, grouped by owner, the owned instances a policy governs but
/// ebb cannot act on, with what the owner offers instead.
pub fn plan_table(decisions: &[Decision], instances: &[Instance]) -> String {
    let owners = owners(instances);
    let rows: Vec<[String; 6]> = decisions
        .iter()
        .map(|d| {
            let action = if d.dry_run {
                format!("{} (dry run)", d.action)
            } else {
                d.action.to_string()
            };
            [
                d.instance.clone(),
                action,
                d.policy.clone().unwrap_or_else(|| "-".into()),
                d.code.to_string(),
                owners
                    .get(d.instance.as_str())
                    .map_or_else(|| "-".into(), owner_cell),
                d.reason.clone(),
            ]
        })
        .collect();
    let mut text = table(
        &["INSTANCE", "ACTION", "POLICY", "CODE", "OWNER", "REASON"],
        &rows,
    );
    let mut unreachable: BTreeMap<String, (&Owner, Vec<&str>)> = BTreeMap::new();
    for d in decisions.iter().filter(|d| d.policy.is_some()) {
        if let Some(owner) = owners.get(d.instance.as_str()) {
            unreachable
                .entry(owner_cell(owner))
                .or_insert((owner, Vec::new()))
                .1
                .push(&d.instance);
        }
    }
    if !unreachable.is_empty() {
        text.push_str(
            "\nowned by something else: policies match them, ebb does not act on them alone\n",
        );
        for (owner, ids) in unreachable.values() {
            text.push_str(&format!(
                "  {owner}: {}\n    instead, {}\n",
                ids.join(", "),
                owner.kind().instead()
            ));
        }
    }
    text
}

/// An owner in a table cell: `asg:inference`, `eks_nodegroup:prod/gpu`.
fn owner_cell(owner: &Owner) -> String {
    format!("{}:{}", owner.kind(), owner.name())
}

/// Left-aligned columns separated by two spaces; the last column is not padded.
pub fn table<const N: usize>(header: &[&str; N], rows: &[[String; N]]) -> String {
    let mut widths = header.map(|h| h.chars().count());
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let mut out = String::new();
    let mut line = |cells: &mut dyn Iterator<Item = &str>| {
        let mut text = String::new();
        for (i, cell) in cells.enumerate() {
            if i + 1 < N {
                text += &format!("{cell:<width$}  ", width = widths[i]);
            } else {
                text += cell;
            }
        }
        out += text.trim_end();
        out.push('\n');
    };
    line(&mut header.iter().copied());
    for row in rows {
        line(&mut row.iter().map(String::as_str));
    }
    out
}

/// Audit rows as an aligned table in the local time of `tz`, newest last. The detail column
/// holds the reason, then the error, request id and dry-run mark when present.
pub fn audit_table<Tz: TimeZone>(entries: &[AuditEntry], tz: &Tz) -> String
where
    Tz::Offset: std::fmt::Display,
{
    let rows: Vec<[String; 7]> = entries
        .iter()
        .map(|a| {
            let e = &a.entry;
            let mut detail = e.reason.clone();
            if let Some(err) = &e.error {
                detail += &format!(" | error: {err}");
            }
            if let Some(id) = &e.request_id {
                detail += &format!(" | request {id}");
            }
            if e.dry_run {
                detail += " | dry run";
            }
            [
                e.at.with_timezone(tz)
                    .format("%Y-%m-%d %H:%M:%S%:z")
                    .to_string(),
                e.actor.clone(),
                e.instance.clone().unwrap_or_else(|| "-".into()),
                e.action.clone(),
                e.outcome.to_string(),
                e.policy.clone().unwrap_or_else(|| "-".into()),
                detail,
            ]
        })
        .collect();
    table(
        &[
            "TIME", "ACTOR", "INSTANCE", "ACTION", "OUTCOME", "POLICY", "DETAIL",
        ],
        &rows,
    )
}

/// Overrides as an aligned table in the local time of `tz`, with their status at `now`.
pub fn overrides_table<Tz: TimeZone>(list: &[OverrideRecord], tz: &Tz, now: DateTime<Utc>) -> String
where
    Tz::Offset: std::fmt::Display,
{
    let at = |t: DateTime<Utc>| {
        t.with_timezone(tz)
            .format("%Y-%m-%d %H:%M:%S%:z")
            .to_string()
    };
    let rows: Vec<[String; 6]> = list
        .iter()
        .map(|o| {
            let status = match (&o.revoked_at, &o.revoked_by) {
                (Some(t), by) => format!("revoked {} by {}", at(*t), by.as_deref().unwrap_or("?")),
                (None, _) if o.until <= now => "expired".to_string(),
                (None, _) => "active".to_string(),
            };
            [
                o.id.to_string(),
                o.instance.clone(),
                at(o.until),
                o.created_by.clone(),
                status,
                o.reason.clone(),
            ]
        })
        .collect();
    table(
        &["ID", "INSTANCE", "UNTIL", "BY", "STATUS", "REASON"],
        &rows,
    )
}

/// One instance of a fleet snapshot (docs/commands.md's "Fleet snapshot"), as
/// `ebb inventory --format json` writes it.
#[derive(Debug, Serialize)]
struct SnapshotItem<'a> {
    id: &'a str,
    region: &'a str,
    #[serde(rename = "type")]
    instance_type: &'a str,
    state: &'a str,
    lifecycle: &'a str,
    launched_at: Option<String>,
    state_since: Option<String>,
    tags: &'a crate::fleet::Tags,
    #[serde(skip_serializing_if = "Option::is_none")]
    owner: Option<Owner>,
    #[serde(skip_serializing_if = "Option::is_none")]
    via_role: Option<&'a str>,
    /// Written for clouds other than EC2.
    #[serde(skip_serializing_if = "Option::is_none")]
    cloud: Option<Cloud>,
    /// Written for a subscription.
    #[serde(skip_serializing_if = "Option::is_none")]
    charge: Option<Charge>,
    #[serde(skip_serializing_if = "Option::is_none")]
    stopped_mode: Option<StoppedMode>,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    recycling: bool,
    /// Written when read: what it pays for while stopped, for `ebb replay`'s net.
    #[serde(skip_serializing_if = "Option::is_none")]
    volumes: Option<&'a [Volume]>,
    #[serde(skip_serializing_if = "Option::is_none")]
    elastic_ips: Option<u32>,
    /// Written when it runs in a capacity reservation held outside ebb.
    #[serde(skip_serializing_if = "Option::is_none")]
    capacity_reservation: Option<ReservationItem<'a>>,
}

/// A held capacity reservation as a fleet snapshot gives it: without `kind` when what it is
/// could not be read.
#[derive(Debug, Serialize)]
struct ReservationItem<'a> {
    id: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    kind: Option<ReservationKind>,
    #[serde(skip_serializing_if = "Option::is_none")]
    end: Option<String>,
}

impl<'a> ReservationItem<'a> {
    fn of(held: &'a HeldReservation) -> ReservationItem<'a> {
        ReservationItem {
            id: &held.id,
            kind: held.terms.map(|t| t.kind),
            end: held
                .terms
                .and_then(|t| t.end)
                .map(|t| t.to_rfc3339_opts(SecondsFormat::Secs, true)),
        }
    }
}

/// Instances as a fleet snapshot that `ebb plan --fleet` reads (without GPU readings), with
/// the volumes and Elastic IPs of `attached` where they were read.
pub fn snapshot_json(instances: &[Instance], attached: &HashMap<String, Attached>) -> String {
    let rfc3339 =
        |t: Option<DateTime<Utc>>| t.map(|t| t.to_rfc3339_opts(SecondsFormat::Secs, true));
    let items: Vec<SnapshotItem> = instances
        .iter()
        .map(|i| SnapshotItem {
            id: &i.id,
            region: &i.region,
            instance_type: &i.instance_type,
            state: i.state.as_str(),
            lifecycle: i.lifecycle.as_str(),
            launched_at: rfc3339(i.launched_at),
            state_since: rfc3339(i.state_since),
            tags: &i.tags,
            owner: i.owner(),
            via_role: i.via_role.as_deref(),
            cloud: (i.billing.cloud != Cloud::Aws).then_some(i.billing.cloud),
            charge: (i.billing.charge != Charge::PayAsYouGo).then_some(i.billing.charge),
            stopped_mode: i.billing.stopped_mode,
            recycling: i.billing.recycling,
            volumes: attached.get(&i.id).and_then(|a| a.volumes.as_deref()),
            elastic_ips: attached.get(&i.id).and_then(|a| a.elastic_ips),
            capacity_reservation: i.billing.reservation.as_deref().map(ReservationItem::of),
        })
        .collect();
    let mut text = serde_json::to_string_pretty(&serde_json::json!({ "instances": items }))
        .unwrap_or_else(|_| "{}".into());
    text.push('\n');
    text
}

/// Instances as a table for people: GPUs, state and since when, in `zone`.
pub fn instances_table<Z: TimeZone>(instances: &[Instance], zone: &Z) -> String
where
    Z::Offset: std::fmt::Display,
{
    let rows: Vec<[String; 8]> = instances
        .iter()
        .map(|i| {
            [
                i.id.clone(),
                i.region.clone(),
                i.instance_type.clone(),
                i.gpus
                    .as_ref()
                    .map_or_else(|| "-".into(), |g| format!("{} × {}", g.count, g.model)),
                i.state.as_str().to_string(),
                i.state_since.map_or_else(
                    || "-".into(),
                    |t| t.with_timezone(zone).format("%Y-%m-%d %H:%M").to_string(),
                ),
                i.lifecycle.as_str().to_string(),
                i.owner().map_or_else(|| "-".into(), |o| owner_cell(&o)),
            ]
        })
        .collect();
    table(
        &[
            "INSTANCE",
            "REGION",
            "TYPE",
            "GPUS",
            "STATE",
            "SINCE",
            "LIFECYCLE",
            "OWNER",
        ],
        &rows,
    )
}

/// What a tick did, for its log: a summary line, then a table of actions and outcomes.
pub fn tick_summary(report: &TickReport) -> String {
    let mut text = format!("{}\n", report.headline());
    for failure in &report.gpu_read_failures {
        text += &format!("{}\n", failure.describe());
    }
    if !report.actions.is_empty() {
        let rows: Vec<[String; 5]> = report
            .actions
            .iter()
            .map(|a| {
                [
                    a.decision.instance.clone(),
                    a.decision.action.to_string(),
                    a.label().to_string(),
                    a.decision.policy.clone().unwrap_or_else(|| "-".into()),
                    a.detail.clone(),
                ]
            })
            .collect();
        text += &table(
            &["INSTANCE", "ACTION", "OUTCOME", "POLICY", "DETAIL"],
            &rows,
        );
    }
    if !report.migrations.is_empty() {
        let rows: Vec<[String; 4]> = report
            .migrations
            .iter()
            .map(|m| {
                [
                    m.id.to_string(),
                    m.instance.clone(),
                    m.state.as_str().to_string(),
                    m.detail.clone(),
                ]
            })
            .collect();
        text += &table(&["MIGRATION", "INSTANCE", "STATE", "STEP"], &rows);
    }
    text
}

/// Untracked artifacts as a table for people (`ebb spot-moves --orphans`).
pub fn orphans_table(orphans: &[crate::spot::orphans::Orphan]) -> String {
    if orphans.is_empty() {
        return "nothing carries ebb's migration tags untracked\n".to_string();
    }
    let rows: Vec<[String; 5]> = orphans
        .iter()
        .map(|o| {
            [
                o.artifact.kind.as_str().to_string(),
                o.artifact.id.clone(),
                o.artifact.region.clone(),
                if o.lost { "yes" } else { "no" }.to_string(),
                o.why.clone(),
            ]
        })
        .collect();
    table(&["KIND", "ID", "REGION", "EBB'S LOST LAUNCH", "WHY"], &rows)
}

/// Untracked artifacts as JSON: kind, region, id, tags, state, image, client_token, lost, why.
pub fn orphans_json(orphans: &[crate::spot::orphans::Orphan]) -> String {
    let mut text = serde_json::to_string_pretty(orphans).unwrap_or_else(|_| "[]".into());
    text.push('\n');
    text
}
