//! `imaging`: once the image of the original is available, the first replacement goes to the
//! acceptable spot offer of least expected cost.

use super::super::rank::{rank, Inputs};
use super::super::{avoided, Target, IMAGE_TIMEOUT};
use super::Run;
use crate::cloud::{ImageState, Market, Provider, SpotMoves};
use crate::engine::Action;
use crate::names::CHECKPOINT_AT_TAG;
use crate::store::StoreError;
use chrono::{DateTime, Utc};
use sqlx::types::Json;

impl<P: Provider> Run<'_, P> {
    /// `imaging`: once the image is available, launches the first replacement on spot.
    pub(super) async fn imaging(&mut self) -> Result<(), StoreError> {
        let image = self.m.image.clone().unwrap_or_default();
        let snapshots = match self.spot.image(&self.m.region, &image).await {
            Ok(Some(found)) if found.state == ImageState::Available => found.snapshots,
            Ok(Some(found))
                if found.state == ImageState::Pending
                    && self.now() - self.m.state_since <= IMAGE_TIMEOUT =>
            {
                return self.wait(format!("image {image} is pending"));
            }
            Ok(Some(found)) if found.state == ImageState::Pending => {
                return self
                    .roll_back(format!("image {image} was not ready within 3 h"))
                    .await;
            }
            Ok(_) => {
                return self
                    .roll_back(format!("image {image} failed or is gone"))
                    .await;
            }
            Err(e) => return self.wait(format!("cannot read image {image}: {e}")),
        };
        // Kept with the row from now on: once the image is deregistered, only the row knows
        // them.
        self.m.snapshots = snapshots;
        match self.spot_target().await {
            Ok(Some(target)) => {
                self.launch(Market::Spot, Some(target), Action::MigrateToSpot)
                    .await
            }
            Ok(None) => {
                self.roll_back(
                    "no acceptable spot offer any more (prices, savings or capacity changed)"
                        .into(),
                )
                .await
            }
            Err(e) => self.wait(format!("cannot rank the spot offers: {e}")),
        }
    }

    /// The acceptable spot offer of least expected cost now (`spot::rank`), away from the
    /// pools reclaimed recently; why not when the prices, the pools' history or the placement
    /// scores asked for cannot be read (nothing is launched on a partial view).
    pub(super) async fn spot_target(&self) -> Result<Option<Target>, String> {
        self.spot_target_avoiding(&[]).await
    }

    /// [`Self::spot_target`] away from the types and zones of `also` too (an early move's own
    /// pool).
    pub(super) async fn spot_target_avoiding(
        &self,
        also: &[(String, String)],
    ) -> Result<Option<Target>, String> {
        let Some(Json(spec)) = &self.m.launch_spec else {
            return Ok(None);
        };
        let types = match self.cx.rule {
            Some(rule) if !rule.instance_types.is_empty() => rule.instance_types.clone(),
            _ => vec![spec.instance_type.clone()],
        };
        let prices = self
            .p
            .prices(&self.m.region, &types, self.tick_now())
            .await
            .map_err(|e| format!("cannot read spot prices: {e}"))?;
        let on_demand = self.m.on_demand_price.or_else(|| {
            prices
                .iter()
                .find(|p| p.instance_type == spec.instance_type)
                .and_then(|p| p.on_demand)
        });
        let (Some(on_demand), Some(rule)) = (on_demand, self.cx.rule) else {
            return Ok(None);
        };
        let history = self
            .store
            .pool_history(self.tick_now())
            .await
            .map_err(|e| format!("cannot read the pools' history: {e}"))?;
        let scores = match rule.placement_scores {
            true => Some(
                self.spot
                    .placement_scores(&self.m.region, &types)
                    .await
                    .map_err(|e| format!("cannot read spot placement scores: {e}"))?,
            ),
            false => None,
        };
        // The job's last checkpoint as listed, else as the original was tagged when it was
        // moved; unknown, the most the rule accepts.
        let checkpoint = self.cx.checkpoint_at.or_else(|| {
            spec.tags
                .get(CHECKPOINT_AT_TAG)
                .and_then(|t| DateTime::parse_from_rfc3339(t.trim()).ok())
                .map(|t| t.with_timezone(&Utc))
        });
        let since_checkpoint =
            checkpoint.map_or(rule.checkpoint_max_age, |at| self.tick_now() - at);
        let mut avoid = avoided(&self.m.interruptions.0, self.now());
        avoid.extend_from_slice(also);
        let ranking = rank(&Inputs {
            region: &self.m.region,
            prices: &prices,
            subnets_by_zone: &spec.subnets_by_zone,
            own_zone: &spec.zone,
            max_price: on_demand * (1.0 - rule.min_savings),
            on_demand,
            since_checkpoint,
            history: &history,
            avoid: &avoid,
            avoid_reclaimed_for: rule.avoid_reclaimed_for,
            scores: scores.as_ref(),
            now: self.tick_now(),
        });
        Ok(ranking.best())
    }
}
