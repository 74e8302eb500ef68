//! The control plane in process on the simulated fleet, as the in-process tests build it: a
//! migrated store, a directory the world owns with the policy files and the fleet, the
//! simulator (behind the test layer, or as a test wraps it), the reconciler and its leadership.

use super::intercept::Intercept;
use super::t;
use chrono::{DateTime, Utc};
use ebb::clock::Clock;
use ebb::cloud::sim::SimProvider;
use ebb::cloud::Provider;
use ebb::reconcile::{Options, PolicySource, Reconciler, TickReport};
use ebb::store::{Leadership, Store};
use std::sync::Arc;

/// A world of the simulated fleet, running.
pub struct SimWorld<P = Intercept<SimProvider>> {
    /// The store, migrated.
    pub store: Store,
    /// The reconciler over the simulated fleet.
    pub reconciler: Reconciler<P>,
    /// The reconciler's leadership.
    pub leader: Leadership,
    /// `policies/` with the policy files, and `fleet.yaml`: kept for as long as the world lives,
    /// since the reconciler reads the policies again at every tick.
    pub dir: tempfile::TempDir,
}

/// What a [`SimWorld`] is made of, before it starts.
pub struct Plan {
    fleet: String,
    policies: Vec<(String, String)>,
    clock: Clock,
    options: Options,
    leader: String,
}

impl SimWorld {
    /// A world of `fleet` (the simulator's YAML) with no policy yet, on a clock fixed at
    /// 2026-11-30 09:00 UTC, with default options, led as `test`.
    pub fn plan(fleet: &str) -> Plan {
        Plan {
            fleet: fleet.to_string(),
            policies: Vec::new(),
            clock: Clock::Fixed(t("2026-11-30T09:00:00Z")),
            options: Options::default(),
            leader: "test".to_string(),
        }
    }
}

impl Plan {
    /// A policy file `name` (in `policies/`) with `text`.
    pub fn policy(mut self, name: &str, text: &str) -> Plan {
        self.policies.push((name.to_string(), text.to_string()));
        self
    }

    /// The simulator's clock.
    pub fn clock(mut self, clock: Clock) -> Plan {
        self.clock = clock;
        self
    }

    /// The reconciler's options.
    pub fn options(mut self, options: Options) -> Plan {
        self.options = options;
        self
    }

    /// The name the reconciler leads as (its session's `application_name` is
    /// `ebb leader NAME`).
    pub fn leader(mut self, name: &str) -> Plan {
        self.leader = name.to_string();
        self
    }

    /// The world on `store`, migrated here, with the simulator behind the test layer.
    pub async fn start(self, store: Store) -> SimWorld {
        self.start_with(store, Intercept::new).await
    }

    /// The world on `store`, with the provider `wrap` makes of the simulator.
    pub async fn start_with<P: Provider>(
        self,
        store: Store,
        wrap: impl FnOnce(SimProvider) -> P,
    ) -> SimWorld<P> {
        store.migrate().await.unwrap();
        let dir = tempfile::tempdir().unwrap();
        let policies = dir.path().join("policies");
        std::fs::create_dir(&policies).unwrap();
        for (name, text) in &self.policies {
            std::fs::write(policies.join(name), text).unwrap();
        }
        let fleet = dir.path().join("fleet.yaml");
        std::fs::write(&fleet, &self.fleet).unwrap();
        let (fleet, behaviours) = ebb::snapshot::load_simulation(&fleet).unwrap();
        let provider = wrap(SimProvider::new(fleet, behaviours, self.clock));
        let source = Arc::new(PolicySource::new(vec![policies]));
        let reconciler = Reconciler::new(provider, store.clone(), source, self.options);
        let leader = store.try_lead(&self.leader).await.unwrap().unwrap();
        SimWorld {
            store,
            reconciler,
            leader,
            dir,
        }
    }
}

impl<P: Provider> SimWorld<P> {
    /// The provider the reconciler calls.
    pub fn cloud(&self) -> &P {
        self.reconciler.provider()
    }

    /// A tick at `at` (RFC 3339) as the leader, which must succeed on the policies of the
    /// world's directory: a tick on the last good set, with a policy error, fails here.
    pub async fn tick(&mut self, at: &str) -> TickReport {
        self.tick_at(t(at)).await
    }

    /// [`SimWorld::tick`] at `at`.
    pub async fn tick_at(&mut self, at: DateTime<Utc>) -> TickReport {
        let report = self
            .reconciler
            .tick(at, &mut self.leader)
            .await
            .unwrap_or_else(|e| panic!("tick at {at}: {e}"));
        assert_eq!(report.policy_error, None, "tick at {at}: {report:?}");
        report
    }
}

impl SimWorld {
    /// The state the simulated cloud lists `id` of `region` in now, read past the fault layer.
    pub async fn state(&self, region: &str, id: &str) -> ebb::fleet::InstanceState {
        let found = self.cloud().inner.reread(region, &[id.to_string()]).await;
        found.unwrap()[0].state
    }
}
