//! The tick's part in spot migrations: a new migration planned for each instance decided
//! `migrate_to_spot`, and every live migration advanced by one step (see [`crate::spot`]).

use super::{MigrationStep, Reconciler, TickContext};
use crate::cloud::{Provider, SpotMoves};
use crate::engine::{Action, Decision, Override};
use crate::fleet::{Fleet, Instance};
use crate::names::{ACTOR, CHECKPOINT_AT_TAG};
use crate::policy::PolicySet;
use crate::spot;
use crate::spot::drive::{self, Unanswered};
use crate::store::{MigrationRecord, NewAuditEntry, StoreError};
use chrono::{DateTime, Utc};
use std::collections::{BTreeMap, HashMap, HashSet};
use tracing::Instrument as _;

/// The job's last checkpoint (tag `ebb:checkpoint-at`) on the instance running `m`'s workload
/// as listed: the current replacement, else the original. `None` when neither is listed or
/// tagged with a time.
fn checkpoint_at(listed: &HashMap<&str, &Instance>, m: &MigrationRecord) -> Option<DateTime<Utc>> {
    [m.current.as_deref(), Some(m.original.as_str())]
        .into_iter()
        .flatten()
        .filter_map(|id| listed.get(id)?.tag(CHECKPOINT_AT_TAG))
        .find_map(|t| DateTime::parse_from_rfc3339(t.trim()).ok())
        .map(|t| t.with_timezone(&Utc))
}

/// What crash resolution left to the migrations: the originals whose step's call may still
/// land, and the intents past that window, each for its migration to resolve.
struct Waiting<'a> {
    open: &'a HashSet<String>,
    unanswered: Vec<Unanswered>,
}

impl<P: Provider> Reconciler<P> {
    /// Advances every live spot migration by one step, then plans a migration for each
    /// instance decided `migrate_to_spot` (the next tick checks again and starts it). A
    /// migration whose original is `open` (a call of its step may still land) waits; one with
    /// `unanswered` intents resolves them first.
    pub(super) async fn migrations(
        &self,
        set: &PolicySet,
        fleet: &Fleet,
        decisions: &[Decision],
        open: &HashSet<String>,
        unanswered: Vec<Unanswered>,
        tick: &mut TickContext<'_>,
    ) -> Result<(), StoreError> {
        let Some(spot) = self.provider.spot_moves() else {
            // The engine plans no move on a cloud without spot moves, so none is under way.
            return Ok(());
        };
        let waiting = Waiting { open, unanswered };
        self.advance_migrations(spot, set, fleet, decisions, waiting, tick)
            .await?;
        let moving: Vec<&Decision> = decisions
            .iter()
            .filter(|d| d.action == Action::MigrateToSpot && !d.dry_run)
            .collect();
        self.plan_migrations(&moving, fleet, tick).await?;
        self.sweep_lost_launches(spot, tick).await
    }

    /// At most once per [`spot::orphans::SWEEP_EVERY`], after the migrations moved on:
    /// terminates every replacement ebb launched that no migration tracks (in the regions of
    /// its migrations); anything else carrying ebb's migration tags is only logged, and
    /// listed by `ebb spot-moves --orphans`. A region that cannot be read is tried again at
    /// the next sweep.
    async fn sweep_lost_launches(
        &self,
        spot: &P::SpotMoves,
        tick: &mut TickContext<'_>,
    ) -> Result<(), StoreError> {
        // A warned replacement's notice window ends on the timers' clock, like every wait
        // before a termination.
        let now = tick.timers;
        {
            let mut swept = self.memo.orphans_swept.lock().expect("sweep time poisoned");
            if swept.is_some_and(|t| now - t < spot::orphans::SWEEP_EVERY && now >= t) {
                return Ok(());
            }
            *swept = Some(now);
        }
        let migrations = self.store.migrations().await?;
        let mut regions: Vec<&str> = migrations.iter().map(|m| m.region.as_str()).collect();
        regions.sort_unstable();
        regions.dedup();
        let mut found = Vec::new();
        for region in regions {
            match spot.migration_artifacts(region).await {
                Ok(artifacts) => found.extend(artifacts),
                Err(e) => tracing::warn!(region, error = %e, "cannot look for lost launches"),
            }
        }
        let orphans = spot::orphans::orphans(found, &migrations, now);
        let mut counts: BTreeMap<&'static str, usize> = BTreeMap::new();
        for orphan in &orphans {
            *counts.entry(orphan.artifact.kind.as_str()).or_default() += 1;
        }
        tick.report.orphans = Some(counts);
        for orphan in orphans {
            let a = &orphan.artifact;
            let m = orphan
                .lost
                .then(|| spot::orphans::migration_of(a, &migrations))
                .flatten();
            let Some(m) = m else {
                tracing::warn!(
                    kind = a.kind.as_str(),
                    id = a.id.as_str(),
                    why = %orphan.why,
                    "untracked"
                );
                continue;
            };
            let (id, instance) = (m.id, m.original.clone());
            let detail = drive::terminate_lost(
                &self.provider,
                spot,
                &self.store,
                tick.for_migration(),
                m.clone(),
                &orphan,
            )
            .await?;
            let state = m.state;
            tick.report.migrations.push(MigrationStep {
                id,
                instance,
                state,
                detail,
            });
        }
        Ok(())
    }

    /// Plans a spot migration for each of `decisions`.
    async fn plan_migrations(
        &self,
        decisions: &[&Decision],
        fleet: &Fleet,
        tick: &mut TickContext<'_>,
    ) -> Result<(), StoreError> {
        // The row's times are what its steps are later timed from.
        let now = tick.timers;
        for d in decisions {
            let Some(policy) = &d.policy else { continue };
            let on_demand = fleet
                .instances
                .iter()
                .find(|i| i.id == d.instance)
                .and_then(|i| {
                    fleet
                        .prices
                        .get(&i.region)?
                        .get(&i.instance_type)?
                        .on_demand
                });
            let audit = NewAuditEntry {
                instance: Some(d.instance.clone()),
                region: Some(d.region.clone()),
                policy: Some(policy.clone()),
                code: Some(d.code.as_str().to_string()),
                ..NewAuditEntry::event(
                    now,
                    ACTOR,
                    Action::MigrateToSpot.as_str(),
                    format!("planned: {}", d.reason),
                )
            };
            if let Some(m) = self
                .store
                .plan_migration(
                    &d.instance,
                    &d.region,
                    policy,
                    on_demand,
                    now - spot::RETRY_AFTER,
                    audit,
                )
                .await?
            {
                tick.report.migrations.push(MigrationStep {
                    id: m.id,
                    instance: m.original,
                    state: spot::State::Planned,
                    detail: format!("planned: {}", d.reason),
                });
            }
        }
        Ok(())
    }

    /// Advances every live spot migration by one step, each with what protects its original
    /// now (its tags as listed, the overrides in force, its policy), and resolves the intents
    /// of `waiting` first (also of a migration that ended or rolled back since).
    async fn advance_migrations(
        &self,
        spot: &P::SpotMoves,
        set: &PolicySet,
        fleet: &Fleet,
        decisions: &[Decision],
        waiting: Waiting<'_>,
        tick: &mut TickContext<'_>,
    ) -> Result<(), StoreError> {
        let now = tick.now;
        let mut live = self.store.live_migrations().await?;
        let of: HashSet<i64> = waiting
            .unanswered
            .iter()
            .filter_map(Unanswered::migration)
            .filter(|id| !live.iter().any(|m| m.id == *id))
            .collect();
        if !of.is_empty() {
            let others = self.store.migrations().await?;
            live.extend(others.into_iter().filter(|m| of.contains(&m.id)));
        }
        if live.is_empty() {
            return Ok(());
        }
        let by_instance: HashMap<&str, &Decision> =
            decisions.iter().map(|d| (d.instance.as_str(), d)).collect();
        let current: Vec<String> = live.iter().filter_map(|m| m.current.clone()).collect();
        let warned = self.store.spot_warnings(&current).await?;
        let overrides = self.overrides_in_force(now).await?;
        let listed: HashMap<&str, &Instance> =
            fleet.instances.iter().map(|i| (i.id.as_str(), i)).collect();
        for m in live {
            if waiting.open.contains(&m.original) {
                // A call of its step may still land: nothing is done to it until it cannot.
                continue;
            }
            let unanswered: Vec<Unanswered> = waiting
                .unanswered
                .iter()
                .filter(|u| u.migration() == Some(m.id))
                .cloned()
                .collect();
            let hold = spot::hold(
                listed.get(m.original.as_str()).copied(),
                set,
                &m.policy,
                overrides.get(&m.original),
                now,
            );
            let rule = set
                .policies
                .iter()
                .find(|p| p.name == m.policy)
                .and_then(|p| p.spot.as_ref());
            let cx = drive::Context {
                rule,
                decision: by_instance.get(m.original.as_str()).copied(),
                warned: m.current.as_ref().is_some_and(|c| warned.contains(c)),
                hold: &hold,
                checkpoint_at: checkpoint_at(&listed, &m),
            };
            let (id, instance) = (m.id, m.original.clone());
            let span = tracing::info_span!(
                "migration",
                migration = id,
                instance = instance.as_str(),
                policy = m.policy.as_str(),
                state = m.state.as_str(),
            );
            let step = tick.for_migration();
            let done = drive::advance(&self.provider, spot, &self.store, step, m, cx, &unanswered)
                .instrument(span)
                .await?;
            self.tell_of_alert(id, done.alert.as_ref());
            if let Some((alert, _)) = done.alert {
                *tick.report.spot_alerts.entry(alert.as_str()).or_default() += 1;
            }
            if !done.detail.is_empty() {
                tick.report.migrations.push(MigrationStep {
                    id,
                    instance,
                    state: done.state,
                    detail: done.detail,
                });
            }
        }
        Ok(())
    }

    /// The overrides in force at `now`, by instance: what protects a migration's original or
    /// a box being reclaimed.
    pub(super) async fn overrides_in_force(
        &self,
        now: DateTime<Utc>,
    ) -> Result<HashMap<String, Override>, StoreError> {
        let active = self.store.active_overrides(now).await?;
        let by_instance = active.into_iter().map(|o| {
            let o = Override {
                instance: o.instance,
                until: o.until,
                reason: o.reason,
                by: o.created_by,
            };
            (o.instance.clone(), o)
        });
        Ok(by_instance.collect())
    }

    /// Posts migration `id`'s alert to the webhook once, until a step of it comes without
    /// that alert (kept in memory: a restart may tell once more).
    fn tell_of_alert(&self, id: i64, alert: Option<&(spot::Alert, String)>) {
        let mut told = self
            .memo
            .alerts_told
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        for kind in spot::Alert::ALL {
            if alert.is_none_or(|(a, _)| *a != kind) {
                told.remove(&(id, kind));
            }
        }
        let (Some((kind, text)), Some(webhook)) = (alert, &self.options.webhook) else {
            return;
        };
        if told.insert((id, *kind)) {
            webhook.send(format!("ebb spot migration {id}: {text}"));
        }
    }
}
