//! Early moves (see [`crate::spot::early`]): on a rebalance recommendation for a spot
//! replacement, or back to spot after a fall back to on-demand, the next replacement is
//! launched beside the running one, which is kept as the migration's `outgoing` and terminated
//! only once the new one is verified. A new one that does not come up is terminated and the
//! workload stays on the old one.

use super::super::early::{checkpoint_fresh, due, Early};
use super::super::LAUNCH_TIMEOUT;
use super::Run;
use crate::cloud::{InstanceStatus, Market, Provider};
use crate::engine::{Action, Code};
use crate::fleet::InstanceState;
use crate::names::CHECKPOINT_AT_TAG;
use crate::spot::{Hold, State};
use crate::store::spot::Outgoing;
use crate::store::StoreError;
use sqlx::types::Json;

impl<P: Provider> Run<'_, P> {
    /// In `done`, with `s` (the current replacement, as EC2 describes it by id) running and no
    /// reclaim to handle: begins an early move when one is due; whether it did anything.
    pub(super) async fn early_move(&mut self, s: &InstanceStatus) -> Result<bool, StoreError> {
        let Some(rule) = self.cx.rule else {
            return Ok(false);
        };
        // A move that would need the original's consent waits while something protects it.
        if self.m.holds_original() && *self.cx.hold != Hold::Free {
            return Ok(false);
        }
        // Only the current replacement's own recommendation counts: the store keeps one only for
        // a live migration's current replacement, and EC2 has just described it running.
        let rebalance = match self.m.market {
            Market::Spot => self.store.spot_rebalance(&s.id).await?,
            Market::OnDemand => None,
        };
        let Some(early) = due(&self.m, rule, rebalance, self.now()) else {
            return Ok(false);
        };
        let why = early.describe(&s.id);
        // The job resumes from its last checkpoint: a move is worth it only when that is fresh.
        // Its tag is read again now (the job writes it as it goes).
        let found = match self
            .p
            .reread(&self.m.region, std::slice::from_ref(&s.id))
            .await
        {
            Ok(found) => found.into_iter().find(|i| i.id == s.id),
            Err(e) => {
                self.wait(format!("{why}; cannot read its checkpoint tag: {e}"))?;
                return Ok(false);
            }
        };
        let Some(found) = found else {
            self.wait(format!("{why}; it is no longer listed as managed"))?;
            return Ok(false);
        };
        let tag = found.tag(CHECKPOINT_AT_TAG);
        if let Err(stale) = checkpoint_fresh(tag, rule.checkpoint_max_age, self.tick_now()) {
            self.wait(format!("{why}; not moved early: {stale}"))?;
            return Ok(false);
        }
        let own_pool = self.own_pool();
        let target = match self.spot_target_avoiding(&own_pool).await {
            Ok(Some(target)) => target,
            Ok(None) => {
                self.wait(format!("{why}; no other acceptable spot pool"))?;
                return Ok(false);
            }
            Err(e) => {
                self.wait(format!("{why}; {e}"))?;
                return Ok(false);
            }
        };
        let detail = format!(
            "{why}; moving early to spot {} in {}, {} runs until the new one is verified",
            target.instance_type, target.zone, s.id
        );
        self.m.outgoing = Some(Json(Outgoing {
            instance: s.id.clone(),
            market: self.m.market,
            instance_type: self.m.instance_type.clone(),
            zone: self.m.zone.clone(),
            subnet: self.m.subnet.clone(),
            price: self.m.price,
            running_since: self.m.running_since,
            why: why.clone(),
        }));
        let code = early_code(early);
        self.event(Action::RelaunchSpot, code, &detail);
        // Saved before the launch: a crash from here on resumes the move, and finds the launch.
        self.go(State::Done, detail).await?;
        self.launch(Market::Spot, Some(target), Action::RelaunchSpot)
            .await?;
        Ok(true)
    }

    /// The type and zone the current spot replacement runs in, which an early move leaves.
    fn own_pool(&self) -> Vec<(String, String)> {
        match (self.m.market, &self.m.instance_type, &self.m.zone) {
            (Market::Spot, Some(ty), Some(zone)) => vec![(ty.clone(), zone.clone())],
            _ => Vec::new(),
        }
    }

    /// An early move under way: the new replacement is launched (again, when an earlier attempt
    /// died before recording it: its launch tag finds it), must run and still run a tick later,
    /// and only then is the outgoing one terminated.
    pub(super) async fn moving(&mut self) -> Result<(), StoreError> {
        let Some(Json(outgoing)) = self.m.outgoing.clone() else {
            return Ok(());
        };
        if self.backing_off() {
            return self.wait("the early move waits after a failed call".into());
        }
        let code = outgoing_code(&outgoing);
        let current = self.m.current.clone().unwrap_or_default();
        if current == outgoing.instance {
            // Begun, but no launch recorded.
            let own_pool = match (&outgoing.instance_type, &outgoing.zone) {
                (Some(ty), Some(zone)) if outgoing.market == Market::Spot => {
                    vec![(ty.clone(), zone.clone())]
                }
                _ => Vec::new(),
            };
            return match self.spot_target_avoiding(&own_pool).await {
                Ok(Some(target)) => {
                    self.launch(Market::Spot, Some(target), Action::RelaunchSpot)
                        .await
                }
                Ok(None) => {
                    self.abandon(format!(
                        "{}; no other acceptable spot pool any more",
                        outgoing.why
                    ))
                    .await
                }
                Err(e) => self.wait(e),
            };
        }
        let status = match self.status(&current).await {
            Ok(s) => s,
            Err(e) => return self.wait(format!("cannot read {current}: {e}")),
        };
        let runs = status
            .as_ref()
            .is_some_and(|s| s.state == InstanceState::Running);
        match self.m.state {
            State::Launching if runs => {
                self.m.running_since = Some(self.now());
                let detail = format!("{current} is running");
                self.event(Action::RelaunchSpot, Code::SpotRunning, &detail);
                self.go(State::Verifying, detail).await
            }
            State::Verifying if runs && !self.cx.warned => {
                let detail = format!(
                    "verified: {current} runs as spot {} in {}; {} is terminated now",
                    self.m.instance_type.as_deref().unwrap_or("?"),
                    self.m.zone.as_deref().unwrap_or("?"),
                    outgoing.instance
                );
                self.event(Action::RelaunchSpot, Code::SpotVerified, &detail);
                self.go(State::Done, detail).await?;
                self.retire(outgoing, code).await
            }
            State::Done if runs => self.retire(outgoing, code).await,
            State::Launching
                if status
                    .as_ref()
                    .is_some_and(|s| s.state == InstanceState::Pending)
                    && self.now() - self.m.state_since <= LAUNCH_TIMEOUT =>
            {
                self.wait(format!("{current} is pending"))
            }
            _ => {
                let what = match &status {
                    Some(s) if self.cx.warned => {
                        format!("{} (warned of an interruption)", s.state.as_str())
                    }
                    Some(s) => s.state.as_str().to_string(),
                    None => "unknown to EC2".to_string(),
                };
                self.abandon(format!("{current} did not come up or stay up ({what})"))
                    .await
            }
        }
    }

    /// The new replacement is verified and runs: the outgoing one is terminated, as an action.
    /// A failure keeps it recorded, tried again after a wait.
    async fn retire(&mut self, outgoing: Outgoing, code: Code) -> Result<(), StoreError> {
        let old = outgoing.instance.clone();
        let reason = format!(
            "terminate {old}: replaced early ({}) by {}, verified",
            outgoing.why,
            self.m.current.as_deref().unwrap_or("?")
        );
        if let Err(e) = self.terminate_replacement(&old, code, &reason).await? {
            self.back_off();
            return self
                .go(State::Done, format!("terminating {old} failed: {e}"))
                .await;
        }
        self.m.saved_before += saved_by(&outgoing, self.m.on_demand_price, self.now());
        self.m.outgoing = None;
        self.m.failures = 0;
        self.m.retry_at = None;
        let detail = format!("terminated {old}, replaced early");
        self.event(Action::RelaunchSpot, code, &detail);
        self.go(State::Done, detail).await
    }

    /// The early move is given up (`why`): the new replacement, if one was launched and still
    /// exists, is terminated first (as an action; on failure it stays recorded and is tried
    /// again after a wait), then the outgoing one serves the workload again, and the next early
    /// move waits. A launch whose answer was lost may still have made an instance: the launch
    /// number moves past it, so that the hourly sweep terminates it as a lost launch.
    pub(super) async fn abandon(&mut self, why: String) -> Result<(), StoreError> {
        let Some(Json(outgoing)) = self.m.outgoing.clone() else {
            return Ok(());
        };
        let code = outgoing_code(&outgoing);
        let current = self.m.current.clone().unwrap_or_default();
        if current != outgoing.instance {
            let alive = match self.status(&current).await {
                Ok(s) => s.is_some_and(|s| {
                    !matches!(
                        s.state,
                        InstanceState::Terminated | InstanceState::ShuttingDown
                    )
                }),
                Err(e) => return self.wait(format!("{why}; cannot read {current}: {e}")),
            };
            let reason = format!("terminate {current}: the early move is given up ({why})");
            if alive {
                if let Err(e) = self.terminate_replacement(&current, code, &reason).await? {
                    self.back_off();
                    return self.go(self.m.state, format!("{why}; {e}")).await;
                }
            }
        } else {
            self.m.launches += 1;
        }
        self.m.current = Some(outgoing.instance.clone());
        self.m.market = outgoing.market;
        self.m.instance_type = outgoing.instance_type;
        self.m.zone = outgoing.zone;
        self.m.subnet = outgoing.subnet;
        self.m.price = outgoing.price;
        self.m.running_since = outgoing.running_since;
        self.m.outgoing = None;
        self.back_off();
        let detail = format!(
            "{why}; the early move is given up, {} serves the workload still",
            outgoing.instance
        );
        self.event(Action::RelaunchSpot, code, &detail);
        self.go(State::Done, detail).await
    }
}

/// The audit code of an early move away from `outgoing`.
fn outgoing_code(outgoing: &Outgoing) -> Code {
    match outgoing.market {
        Market::Spot => Code::SpotRebalance,
        Market::OnDemand => Code::SpotBackToSpot,
    }
}

/// The audit code of `early`.
fn early_code(early: Early) -> Code {
    match early {
        Early::Rebalance(_) => Code::SpotRebalance,
        Early::BackToSpot(_) => Code::SpotBackToSpot,
    }
}

/// Dollars `outgoing` saved from when it ran to `until`, against `on_demand` $/hour.
fn saved_by(
    outgoing: &Outgoing,
    on_demand: Option<f64>,
    until: chrono::DateTime<chrono::Utc>,
) -> f64 {
    match (
        outgoing.market,
        outgoing.running_since,
        on_demand,
        outgoing.price,
    ) {
        (Market::Spot, Some(since), Some(on_demand), Some(price)) if until > since => {
            let hours = (until - since).num_seconds() as f64 / 3600.0;
            hours * (on_demand - price).max(0.0)
        }
        _ => 0.0,
    }
}
