//! `imaging`: once the image of the original is available, the first replacement goes to the
//! cheapest acceptable spot offer.

use super::super::{avoided, cheapest, Target, IMAGE_TIMEOUT};
use super::Run;
use crate::cloud::{CloudError, ImageState, Market, Provider};
use crate::engine::Action;
use crate::store::StoreError;
use sqlx::types::Json;

impl<P: Provider> Run<'_, P> {
    /// `imaging`: once the image is available, launches the first replacement on spot.
    pub(super) async fn imaging(&mut self) -> Result<(), StoreError> {
        let image = self.m.image.clone().unwrap_or_default();
        let snapshots = match self.p.image(&self.m.region, &image).await {
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
            Err(e) => self.wait(format!("cannot read spot prices: {e}")),
        }
    }

    /// The cheapest acceptable spot offer now, away from recently reclaimed types and zones.
    pub(super) async fn spot_target(&self) -> Result<Option<Target>, CloudError> {
        self.spot_target_avoiding(&[]).await
    }

    /// The cheapest acceptable spot offer now, away from recently reclaimed types and zones and
    /// from the types and zones of `also` (an early move's own pool).
    pub(super) async fn spot_target_avoiding(
        &self,
        also: &[(String, String)],
    ) -> Result<Option<Target>, CloudError> {
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
            .await?;
        let on_demand = self.m.on_demand_price.or_else(|| {
            prices
                .iter()
                .find(|p| p.instance_type == spec.instance_type)
                .and_then(|p| p.on_demand)
        });
        let (Some(on_demand), Some(rule)) = (on_demand, self.cx.rule) else {
            return Ok(None);
        };
        let max_price = on_demand * (1.0 - rule.min_savings);
        let mut avoid = avoided(&self.m.interruptions.0, self.now());
        avoid.extend_from_slice(also);
        Ok(cheapest(
            &prices,
            &spec.subnets_by_zone,
            &avoid,
            &spec.zone,
            max_price,
        ))
    }
}
