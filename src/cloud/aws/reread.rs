//! Instances read again right before ebb stops them: the tags people change between a tick's
//! listing and its calls (`ebb:keep-until`, `ebb:skip`, the management tag) count.

use super::ec2::from_ec2;
use super::{cloud_error, AwsProvider};
use crate::cloud::CloudError;
use crate::fleet::Instance;
use aws_sdk_ec2::types::Filter;
use std::sync::Arc;

/// Instance ids per DescribeInstances filter (EC2 takes at most 200 values in one filter).
const IDS_PER_CALL: usize = 200;

impl AwsProvider {
    /// DescribeInstances of `ids` in `region`, by the account that listed each, with the
    /// listing's filters: an instance gone, terminated or no longer managed is absent.
    pub(super) async fn reread_instances(
        &self,
        region: &str,
        ids: &[String],
    ) -> Result<Vec<Instance>, CloudError> {
        let (groups, unwatched) = self.group_by_scope(region, ids, "DescribeInstances");
        if let Some(failed) = unwatched.failed.into_iter().next() {
            return Err(failed.error);
        }
        let mut found = Vec::with_capacity(ids.len());
        for (index, ids) in groups {
            let scope = &self.scopes[index];
            let via_role: Option<Arc<str>> = scope.account.as_deref().map(Arc::from);
            for batch in ids.chunks(IDS_PER_CALL) {
                let mut filters = self.listing_filters();
                filters.push(
                    Filter::builder()
                        .name("instance-id")
                        .set_values(Some(batch.to_vec()))
                        .build(),
                );
                self.count("DescribeInstances");
                let out = scope
                    .ec2
                    .describe_instances()
                    .set_filters(Some(filters))
                    .send()
                    .await
                    .map_err(|e| cloud_error("DescribeInstances", e))?;
                let listed = out.reservations().iter().flat_map(|r| r.instances());
                found.extend(
                    listed
                        .filter_map(|i| from_ec2(region, via_role.as_ref(), i))
                        .map(|(i, _)| i),
                );
            }
        }
        Ok(found)
    }
}
