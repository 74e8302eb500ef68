//! EC2's Spot Placement Scores, which `spot.placement_scores` weighs into the chance of an
//! interruption (`spot::rank`).

use super::{cloud_error, AwsProvider};
use crate::cloud::{CloudError, PlacementScores};
use futures_util::FutureExt as _;
use std::collections::HashMap;

/// Results per page of GetSpotPlacementScores: more than a region has zones.
const PAGE: i32 = 100;

impl AwsProvider {
    /// The score of each of `types`, one call per type (a score is for the whole request, so
    /// several types in one call would give one figure for all), for one instance in a single
    /// zone of `region`, by type and zone name. EC2 names the zones by id (`use1-az4`), which
    /// DescribeAvailabilityZones maps to the account's names (`us-east-1a`).
    pub(super) async fn spot_placement_scores(
        &self,
        region: &str,
        types: &[String],
    ) -> Result<PlacementScores, CloudError> {
        let mut scores = PlacementScores::new();
        let Some((_, scope)) = self.scopes_in(region).next() else {
            return Ok(scores);
        };
        self.count("DescribeAvailabilityZones");
        let zones = scope
            .ec2
            .describe_availability_zones()
            .send()
            .boxed()
            .await
            .map_err(|e| cloud_error("DescribeAvailabilityZones", e))?;
        let names: HashMap<&str, &str> = zones
            .availability_zones()
            .iter()
            .filter_map(|z| Some((z.zone_id()?, z.zone_name()?)))
            .collect();
        for instance_type in types {
            let mut token: Option<String> = None;
            loop {
                self.count("GetSpotPlacementScores");
                let page = scope
                    .ec2
                    .get_spot_placement_scores()
                    .instance_types(instance_type)
                    .target_capacity(1)
                    .single_availability_zone(true)
                    .region_names(region)
                    .max_results(PAGE)
                    .set_next_token(token.take())
                    .send()
                    .boxed()
                    .await
                    .map_err(|e| cloud_error("GetSpotPlacementScores", e))?;
                for s in page.spot_placement_scores() {
                    let zone = s.availability_zone_id().and_then(|id| names.get(id));
                    if let (Some(zone), Some(score)) = (zone, s.score()) {
                        let score = score.clamp(1, 10) as u8;
                        scores.insert((instance_type.clone(), zone.to_string()), score);
                    }
                }
                match page.next_token() {
                    Some(next) if !next.is_empty() => token = Some(next.to_string()),
                    _ => break,
                }
            }
        }
        Ok(scores)
    }
}
