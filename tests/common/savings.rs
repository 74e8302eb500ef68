//! A history written through the store's own functions (syncs, audited actions, a spot
//! migration, an override) whose report is worked out by hand: for `ebb report`,
//! `GET /v1/report` and the console's `/savings`.

use super::{instance, t};
use ebb::cloud::Market;
use ebb::engine::{Action, Code, Decision};
use ebb::fleet::{Instance, InstanceState};
use ebb::store::spot::State;
use ebb::store::{ActionDone, NewAuditEntry, Outcome, Store};
use std::collections::BTreeMap;

/// The history's region.
pub const REGION: &str = "us-east-1";

/// $2/h for g.two and $10/h for g.ten; p.big's on-demand price is in its migration.
pub const PRICES: &str =
    "source: test\nas_of: today\nprices:\n  us-east-1:\n    g.two: 2.0\n    g.ten: 10.0\n";

/// [`PRICES`] as a table.
pub fn price_table() -> ebb::cloud::PriceTable {
    let prices = [("g.two", 2.0), ("g.ten", 10.0)]
        .into_iter()
        .map(|(ty, p)| (ty.to_string(), p))
        .collect();
    ebb::cloud::PriceTable {
        source: "test".into(),
        as_of: "today".into(),
        prices: [(REGION.to_string(), prices)].into(),
        ..Default::default()
    }
}

/// The fleet as the store syncs it, with each instance's state changed as the history goes.
pub struct Fleet {
    store: Store,
    /// The instances by id.
    pub instances: BTreeMap<&'static str, Instance>,
}

impl Fleet {
    /// The four instances of the history, running, not synced yet.
    pub fn new(store: Store) -> Fleet {
        let mut instances = BTreeMap::new();
        for (id, ty, team) in [
            ("i-early", "g.two", "ml"),
            ("i-ml", "g.two", "ml"),
            ("i-cv", "g.ten", "cv"),
            ("i-train", "p.big", "cv"),
        ] {
            let mut i = instance(id, &[("team", team), ("ebb:managed", "true")]);
            i.instance_type = ty.to_string();
            instances.insert(id, i);
        }
        Fleet { store, instances }
    }

    /// Syncs the fleet at `at`, `id` now in `state`.
    pub async fn seen(&mut self, at: &str, id: &str, state: InstanceState) {
        self.instances.get_mut(id).unwrap().state = state;
        self.sync(at).await;
    }

    /// Syncs the fleet as it is at `at`.
    pub async fn sync(&self, at: &str) {
        let listed: Vec<Instance> = self.instances.values().cloned().collect();
        self.store
            .sync_inventory(&[REGION.to_string()], &listed, t(at))
            .await
            .unwrap();
    }

    /// ebb's `action` on `id` at `at` for `policy`: its intent, then its outcome with what ebb
    /// remembers of it, as a tick writes them.
    pub async fn ebb_did(
        &self,
        at: &str,
        id: &str,
        action: Action,
        outcome: Outcome,
        policy: &str,
    ) {
        let intent = NewAuditEntry {
            instance: Some(id.to_string()),
            region: Some(REGION.to_string()),
            policy: Some(policy.to_string()),
            code: Some("outside_hours".into()),
            ..NewAuditEntry::event(
                t(at),
                "scheduler",
                action.as_str(),
                "outside work hours".into(),
            )
        };
        let intent = NewAuditEntry {
            outcome: Outcome::Intent,
            ..intent
        };
        let written = self
            .store
            .append_audit(std::slice::from_ref(&intent))
            .await
            .unwrap();
        let result = NewAuditEntry {
            outcome,
            intent_seq: Some(written[0].seq),
            ..intent
        };
        let done: Vec<ActionDone> = (outcome == Outcome::Succeeded)
            .then(|| ActionDone {
                instance: id.to_string(),
                action,
                at: t(at),
            })
            .into_iter()
            .collect();
        self.store.append_outcomes(&[result], &done).await.unwrap();
    }
}

/// The history, with its answers:
/// - i-early (ml, $2/h): stopped by ebb Sunday 18:00, before the window; a person starts it
///   Monday 08:00: 8 h inside, $16, no stop counted, a person's start.
/// - i-ml (ml, $2/h): stopped by ebb Monday 18:00, started by a person Tuesday 08:00: 14 h, $28,
///   a stop and a person's start. Its override Tuesday 09:00-13:00: 1 override, 4 h.
///   A failed stop Tuesday 18:00 counts nothing.
/// - i-cv (cv, $10/h): stopped by ebb Monday 20:00, started by ebb Tuesday 07:00: 11 h, $110, a
///   stop. A dry-run stop Tuesday 18:00 counts nothing.
/// - i-train (cv): moved to spot by policy to-spot, on spot from Monday 12:00 at $14/h against
///   $40/h on demand until the window ends: 36 h x $26 = $936. Its original's stop for the
///   move is the migration's, not a stop.
///
/// Totals: stopped 33 h, $154; spot $936; saved $1090; 2 stops; 2 people's starts.
/// By team: ml $44 (22 h, 1 stop, 2 starts, 1 override); cv $1046.
pub async fn history(store: &Store) {
    let mut fleet = Fleet::new(store.clone());
    fleet.sync("2026-11-29T12:00:00Z").await;
    // The policies the ticks found governing them (overrides count under these).
    let decisions: Vec<Decision> = fleet
        .instances
        .keys()
        .map(|id| Decision {
            instance: id.to_string(),
            region: REGION.into(),
            action: Action::None,
            policy: Some(
                if *id == "i-train" {
                    "to-spot"
                } else {
                    "office"
                }
                .into(),
            ),
            code: Code::InHours,
            reason: "in work hours".into(),
            dry_run: false,
            stop_at: None,
        })
        .collect();
    store
        .record_decisions(&decisions, t("2026-11-29T12:00:00Z"))
        .await
        .unwrap();
    fleet
        .ebb_did(
            "2026-11-29T18:00:00Z",
            "i-early",
            Action::Stop,
            Outcome::Succeeded,
            "office",
        )
        .await;
    fleet
        .seen("2026-11-29T18:05:00Z", "i-early", InstanceState::Stopped)
        .await;
    fleet
        .seen("2026-11-30T08:00:00Z", "i-early", InstanceState::Running)
        .await;

    let planned = NewAuditEntry {
        instance: Some("i-train".into()),
        region: Some(REGION.into()),
        policy: Some("to-spot".into()),
        ..NewAuditEntry::event(
            t("2026-11-30T10:00:00Z"),
            "scheduler",
            "migrate_to_spot",
            "spot saves 65%".into(),
        )
    };
    let mut m = store
        .plan_migration(
            "i-train",
            REGION,
            "to-spot",
            Some(40.0),
            t("2026-11-29T00:00:00Z"),
            planned,
        )
        .await
        .unwrap()
        .unwrap();
    fleet
        .ebb_did(
            "2026-11-30T10:30:00Z",
            "i-train",
            Action::MigrateToSpot,
            Outcome::Succeeded,
            "to-spot",
        )
        .await;
    fleet
        .seen("2026-11-30T10:35:00Z", "i-train", InstanceState::Stopped)
        .await;
    m.state = State::Done;
    m.current = Some("i-spot".into());
    m.market = Market::Spot;
    m.instance_type = Some("p.big".into());
    m.price = Some(14.0);
    m.running_since = Some(t("2026-11-30T12:00:00Z"));
    m.state_since = t("2026-11-30T12:00:00Z");
    store.save_migration(&m, &[]).await.unwrap();

    fleet
        .ebb_did(
            "2026-11-30T18:00:00Z",
            "i-ml",
            Action::Stop,
            Outcome::Succeeded,
            "office",
        )
        .await;
    fleet
        .seen("2026-11-30T18:05:00Z", "i-ml", InstanceState::Stopped)
        .await;
    fleet
        .ebb_did(
            "2026-11-30T20:00:00Z",
            "i-cv",
            Action::Stop,
            Outcome::Succeeded,
            "office",
        )
        .await;
    fleet
        .seen("2026-11-30T20:05:00Z", "i-cv", InstanceState::Stopped)
        .await;
    fleet
        .ebb_did(
            "2026-12-01T07:00:00Z",
            "i-cv",
            Action::Start,
            Outcome::Succeeded,
            "office",
        )
        .await;
    fleet
        .seen("2026-12-01T07:05:00Z", "i-cv", InstanceState::Running)
        .await;
    fleet
        .seen("2026-12-01T08:00:00Z", "i-ml", InstanceState::Running)
        .await;
    store
        .create_override(
            "i-ml",
            t("2026-12-01T13:00:00Z"),
            "demo",
            "alice",
            t("2026-12-01T09:00:00Z"),
        )
        .await
        .unwrap();
    fleet
        .ebb_did(
            "2026-12-01T18:00:00Z",
            "i-ml",
            Action::Stop,
            Outcome::Failed,
            "office",
        )
        .await;
    let dry = NewAuditEntry {
        instance: Some("i-cv".into()),
        region: Some(REGION.into()),
        policy: Some("office".into()),
        outcome: Outcome::Intent,
        dry_run: true,
        ..NewAuditEntry::event(
            t("2026-12-01T18:00:00Z"),
            "scheduler",
            "stop",
            "outside".into(),
        )
    };
    store.append_dry_runs(&[dry], "dry run").await.unwrap();
}
