//! Launching a replacement (found again by its launch tag after a crash), and `launching` /
//! `verifying`: it must run, and still run a tick later.

use super::super::{prove_replacement, Target, LAUNCH_TIMEOUT};
use super::unknown::Landed;
use super::Run;
use crate::cloud::{
    CloudError, ErrorKind, InstanceStatus, Launch, LaunchSpec, Market, Provider, SpotMoves,
};
use crate::engine::{Action, Code};
use crate::fleet::{InstanceState, Lifecycle};
use crate::names::{LAUNCH_TAG, MIGRATED_FROM_TAG, MIGRATING_TAG, MIGRATION_TAG, STOP_AT_TAG};
use crate::spot::State;
use crate::store::StoreError;
use sqlx::types::Json;
use std::collections::BTreeMap;

/// Where and at what price a replacement goes: the spot offer chosen, or the original's own
/// type and subnet on-demand.
struct Placement {
    instance_type: String,
    subnet: String,
    zone: String,
    price: Option<f64>,
    /// Why there: the spot ranking, empty on-demand.
    why: String,
}

impl Placement {
    fn new(spec: &LaunchSpec, target: Option<Target>, on_demand_price: Option<f64>) -> Self {
        match target {
            Some(t) => Placement {
                instance_type: t.instance_type,
                subnet: t.subnet,
                zone: t.zone,
                price: Some(t.price),
                why: t.why,
            },
            None => Placement {
                instance_type: spec.instance_type.clone(),
                subnet: spec.subnet.clone(),
                zone: spec.zone.clone(),
                price: on_demand_price,
                why: String::new(),
            },
        }
    }
}

/// The audit code of a launch for `action`.
fn launch_code(action: Action) -> Code {
    match action {
        Action::MigrateToSpot => Code::SpotLaunch,
        Action::RelaunchSpot => Code::SpotRelaunch,
        _ => Code::SpotFallback,
    }
}

impl<P: Provider> Run<'_, P> {
    /// Launches the next replacement (or finds it, when an earlier attempt launched it and
    /// died before recording it) and moves to `launching`.
    pub(super) async fn launch(
        &mut self,
        market: Market,
        target: Option<Target>,
        action: Action,
    ) -> Result<(), StoreError> {
        let Some(Json(spec)) = self.m.launch_spec.clone() else {
            return self
                .fail("the launch settings of the original were never read".into())
                .await;
        };
        let n = self.m.launches + 1;
        // The original is in the value so that it is unique in the account, whatever database
        // the migration ids come from.
        let launch_id = format!("{}-{}-{n}", self.m.original, self.m.id);
        let place = Placement::new(&spec, target, self.m.on_demand_price);
        // Found by its tag and proven when its lost answer was resolved (`unknown.rs`), with
        // its outcome written: recorded as it was launched.
        if let Some(Landed::Launch(s)) = self.took(|l| matches!(l, Landed::Launch(_))) {
            let (market, place) = as_launched(&s, &spec, place);
            return self.record_launch(s, n, market, place).await;
        }
        let found = match self
            .spot
            .find_tagged(&self.m.region, LAUNCH_TAG, &launch_id)
            .await
        {
            Ok(found) => found,
            Err(e) => return self.wait(format!("cannot look for launch {launch_id}: {e}")),
        };
        let found = match found {
            Some(s) => match prove_replacement(&s, self.m.image.as_deref()) {
                Ok(()) => Some(s),
                Err(why) => {
                    // Launched by someone else with this launch's tag: never adopted or acted
                    // on. ebb's own launch (its client token) is made, or found, below.
                    let detail = format!(
                        "refused {} tagged {LAUNCH_TAG}={launch_id}: {why}; not adopted, not acted on",
                        s.id
                    );
                    tracing::warn!(
                        migration = self.m.id,
                        instance = %s.id,
                        error = %why,
                        "refused an instance with this launch's tag; not adopted, not acted on"
                    );
                    self.event(action, Code::SpotRefused, &detail);
                    None
                }
            },
            None => None,
        };
        if let Some(s) = found {
            let detail = format!(
                "found {} from launch {launch_id} made before an interruption",
                s.id
            );
            self.event(action, launch_code(action), &detail);
            // Recorded as it was launched, which may differ from what this tick would choose.
            let (market, place) = as_launched(&s, &spec, place);
            return self.record_launch(s, n, market, place).await;
        }
        let source = self.user_data_source();
        let user_data = match self.spot.user_data(&self.m.region, &source).await {
            Ok(user_data) => user_data,
            // Gone from EC2 (a replacement reclaimed long ago): the workload's disks are in
            // the image; what its user data did at first boot is done on them.
            Err(e) if e.kind == ErrorKind::NotFound => None,
            Err(e) => {
                return self.wait(format!(
                    "cannot read the user data of {source} to launch with: {e}"
                ))
            }
        };
        let spec_for_launch = LaunchSpec {
            user_data,
            ..spec.clone()
        };
        match self
            .launch_new(spec_for_launch, &place, market, action, &launch_id)
            .await?
        {
            Ok(Ok(s)) => self.record_launch(s, n, market, place).await,
            Ok(Err(e)) if e.code.as_deref() == Some(IDEMPOTENT_MISMATCH) => {
                // EC2 made this launch already, for an earlier attempt whose answer was lost
                // and whose settings differ (a changed spot offer): it runs, so it is looked
                // for again by its tag and adopted, never launched a second time or dropped.
                let detail = format!(
                    "launch {launch_id} was made by an earlier attempt with other settings ({e}); looking for it again by its {LAUNCH_TAG} tag"
                );
                self.go(self.m.state, detail).await
            }
            // Made or not, it is looked for by its tag when the step is repeated, and launched
            // again under the same client token only when not found.
            Ok(Err(e)) if e.kind.may_have_landed() => {
                self.unanswered(format!("launch {launch_id}"), &e).await
            }
            Ok(Err(e)) => {
                self.launch_failed(format!("launch {launch_id} failed: {e}"))
                    .await
            }
            Err(why) => self.roll_back(format!("{why}; the move is undone")).await,
        }
    }

    /// The instance whose user data a launch copies (it is never stored): the original while
    /// ebb holds it, else the newest replacement, which was launched with it.
    fn user_data_source(&self) -> String {
        let newest = self
            .m
            .current
            .clone()
            .or_else(|| self.m.interruptions.0.last().map(|i| i.instance.clone()));
        match newest {
            Some(replacement) if !self.m.holds_original() => replacement,
            _ => self.m.original.clone(),
        }
    }

    /// Launches a replacement from the image, with the intent written first; `Err` with why
    /// when an override made since protects the original from the move (the first launch).
    async fn launch_new(
        &mut self,
        spec: LaunchSpec,
        place: &Placement,
        market: Market,
        action: Action,
        launch_id: &str,
    ) -> Result<Result<Result<InstanceStatus, CloudError>, String>, StoreError> {
        let code = launch_code(action);
        let price_text = place
            .price
            .map_or(String::new(), |p| format!(" at ${p:.3}/h"));
        let ranked = match place.why.is_empty() {
            true => String::new(),
            false => format!("; ranked by expected cost: {}", place.why),
        };
        let reason = format!(
            "launch {} {} in {} ({}){price_text} from {}{ranked}",
            market.as_str(),
            place.instance_type,
            place.zone,
            place.subnet,
            self.m.image.as_deref().unwrap_or("?")
        );
        let seq = match self.intent(action, code, &reason).await? {
            Ok(seq) => seq,
            Err(why) => return Ok(Err(why)),
        };
        let tags = BTreeMap::from([
            (MIGRATION_TAG.to_string(), self.m.id.to_string()),
            (LAUNCH_TAG.to_string(), launch_id.to_string()),
            (MIGRATED_FROM_TAG.to_string(), self.m.original.clone()),
        ]);
        let launch = Launch {
            image: self.m.image.clone().unwrap_or_default(),
            spec: without_ebb_state(spec),
            instance_type: place.instance_type.clone(),
            subnet: place.subnet.clone(),
            market,
            tags,
            client_token: format!("ebb-{launch_id}"),
            // The original holds its address while its replacement launches.
            private_ip: None,
        };
        let result = self.spot.launch(&self.m.region, &launch).await;
        match &result {
            Ok(s) => self.outcome(seq, action, code, Ok(&format!("launched {}", s.id)), None),
            Err(e) => self.outcome(seq, action, code, Err(e), None),
        }
        Ok(Ok(result))
    }

    /// Records the `n`th replacement `s` and moves to `launching`.
    async fn record_launch(
        &mut self,
        s: InstanceStatus,
        n: i32,
        market: Market,
        place: Placement,
    ) -> Result<(), StoreError> {
        let detail = format!(
            "launched {} as {} {} in {}",
            s.id,
            market.as_str(),
            place.instance_type,
            place.zone
        );
        self.m.launches = n;
        self.m.current = Some(s.id);
        self.m.failures = 0;
        self.m.retry_at = None;
        self.m.market = market;
        self.m.instance_type = Some(place.instance_type);
        self.m.zone = Some(place.zone);
        self.m.subnet = Some(place.subnet);
        self.m.price = place.price;
        self.m.running_since = None;
        self.go(State::Launching, detail).await
    }

    /// `launching` and `verifying`: the replacement must run, and still run a tick later.
    pub(super) async fn launched(&mut self) -> Result<(), StoreError> {
        let current = self.m.current.clone().unwrap_or_default();
        let status = match self.status(&current).await {
            Ok(s) => s,
            Err(e) => return self.wait(format!("cannot read {current}: {e}")),
        };
        match (self.m.state, status) {
            (State::Launching, Some(s)) if s.state == InstanceState::Running => {
                self.m.running_since = Some(self.now());
                let detail = format!("{current} is running");
                self.event(self.launch_action(), Code::SpotRunning, &detail);
                self.go(State::Verifying, detail).await
            }
            (State::Verifying, Some(s)) if s.state == InstanceState::Running => {
                let detail = format!(
                    "verified: {current} runs as {} {} in {}",
                    self.m.market.as_str(),
                    self.m.instance_type.as_deref().unwrap_or("?"),
                    self.m.zone.as_deref().unwrap_or("?")
                );
                self.event(self.launch_action(), Code::SpotVerified, &detail);
                self.go(State::Done, detail).await
            }
            (State::Launching, Some(s))
                if s.state == InstanceState::Pending
                    && self.now() - self.m.state_since <= LAUNCH_TIMEOUT =>
            {
                self.wait(format!("{current} is pending"))
            }
            // Reclaimed before the move was ever verified: it failed, undo it.
            (_, Some(s))
                if (s.reclaimed() || self.cx.warned) && self.first_verified().is_none() =>
            {
                self.roll_back(format!("{current} was reclaimed before it was verified"))
                    .await
            }
            (_, Some(s)) if s.reclaimed() || self.cx.warned => self.interrupted(s).await,
            (_, None) => {
                self.m.current = None;
                self.launch_failed(format!("{current} did not come up (EC2 does not know it)"))
                    .await
            }
            (_, Some(s)) => {
                let what = s.state.as_str();
                // A replacement stuck in pending is not left to run later unwatched: until its
                // termination is accepted it stays recorded, and is tried again.
                let reason = format!("terminate {current}: it did not come up ({what})");
                let code = launch_code(self.launch_action());
                if let Err(e) = self.terminate_replacement(&current, code, &reason).await? {
                    self.back_off();
                    return self.go(self.m.state, e).await;
                }
                self.launch_failed(format!("{current} did not come up ({what})"))
                    .await
            }
        }
    }

    /// The action the current replacement's launch was for.
    fn launch_action(&self) -> Action {
        match (self.m.market, self.m.interruptions.0.is_empty()) {
            (Market::OnDemand, _) => Action::FallbackOnDemand,
            (Market::Spot, true) => Action::MigrateToSpot,
            (Market::Spot, false) => Action::RelaunchSpot,
        }
    }

    /// A replacement could not be launched or did not come up. While the original exists, the
    /// migration rolls back to it; after that, a spot launch falls back to on-demand, and a
    /// failed on-demand launch is tried again after a wait.
    async fn launch_failed(&mut self, why: String) -> Result<(), StoreError> {
        if self.m.outgoing.is_some() {
            return self.abandon(why).await;
        }
        if self.m.holds_original() {
            return self.roll_back(why).await;
        }
        if self.m.market == Market::Spot {
            self.m.market = Market::OnDemand;
            self.m.current = None;
            // The on-demand launch gets a launch id (and client token) of its own: under this
            // one's, EC2 would answer with the spot launch, or refuse the changed settings.
            // Should the failed one have made an instance after all, it is a lost launch
            // (`spot::lost_replacement`) and terminated.
            self.m.launches += 1;
            let detail = format!("{why}; falling back to on-demand at the next tick");
            self.event(Action::FallbackOnDemand, Code::SpotFallback, &detail);
            return self.go(State::Done, detail).await;
        }
        // The original is gone and the image is the workload's only copy: the on-demand launch
        // is tried again after a growing wait (under the same launch id, so that one whose
        // answer was lost is found, not made twice), never given up.
        self.m.current = None;
        self.back_off();
        let detail = format!(
            "{why}; the workload is not running: the on-demand launch from image {} is tried again after {} min",
            self.m.image.as_deref().unwrap_or("?"),
            super::super::retry_wait(self.m.failures).num_minutes()
        );
        self.event(Action::FallbackOnDemand, Code::SpotFallback, &detail);
        self.go(State::Done, detail).await
    }
}

/// EC2's answer to a launch whose client token an earlier launch with other settings used.
const IDEMPOTENT_MISMATCH: &str = "IdempotentParameterMismatch";

/// The market and placement of `s` as EC2 launched it; `chosen`'s price only when it was
/// launched as chosen.
fn as_launched(s: &InstanceStatus, spec: &LaunchSpec, chosen: Placement) -> (Market, Placement) {
    let market = match s.lifecycle {
        Lifecycle::Spot => Market::Spot,
        Lifecycle::OnDemand => Market::OnDemand,
    };
    let same = s.instance_type == chosen.instance_type && s.zone == chosen.zone;
    let place = Placement {
        subnet: match spec.subnets_by_zone.get(&s.zone) {
            Some(subnet) if !same => subnet.clone(),
            _ => chosen.subnet,
        },
        price: chosen.price.filter(|_| same),
        instance_type: s.instance_type.clone(),
        zone: s.zone.clone(),
        why: String::new(),
    };
    (market, place)
}

/// The original's settings for a replacement, without the tags that describe ebb's state of
/// the original.
fn without_ebb_state(mut spec: LaunchSpec) -> LaunchSpec {
    for key in [
        MIGRATING_TAG,
        STOP_AT_TAG,
        MIGRATION_TAG,
        LAUNCH_TAG,
        MIGRATED_FROM_TAG,
    ] {
        spec.tags.remove(key);
    }
    spec
}
