//! Auto Scaling groups: the listing of those ebb manages, and the change of a group's capacity.

use super::errors::group_change_once_sent;
use super::{cloud_error, AwsProvider, Scope};
use crate::cloud::CloudError;
use crate::fleet::{Capacity, GroupMember, ScalingGroup, Tags};
use aws_sdk_autoscaling::operation::RequestId;
use aws_sdk_autoscaling::types::AutoScalingGroup;
use futures_util::FutureExt as _;

/// Groups per DescribeAutoScalingGroups page (the API's most).
const GROUPS_PER_PAGE: i32 = 100;

impl AwsProvider {
    /// DescribeAutoScalingGroups, every page, in every account watched in `region`; the groups
    /// carrying the opt-in tag are kept, and the account that listed each is remembered for
    /// [`AwsProvider::update_group`].
    pub(super) async fn list_groups(&self, region: &str) -> Result<Vec<ScalingGroup>, CloudError> {
        let mut groups = Vec::new();
        let mut listed_by = Vec::new();
        for (index, scope) in self.scopes_in(region) {
            let mut token: Option<String> = None;
            loop {
                self.count("DescribeAutoScalingGroups");
                let page = scope
                    .autoscaling
                    .describe_auto_scaling_groups()
                    .max_records(GROUPS_PER_PAGE)
                    .set_next_token(token.take())
                    .send()
                    .boxed()
                    .await
                    .map_err(|e| cloud_error("DescribeAutoScalingGroups", e))?;
                for group in page.auto_scaling_groups() {
                    if let Some(group) = self.managed_group(region, group) {
                        // One group, one decision: the first account (ebb's own) keeps it.
                        if !listed_by
                            .iter()
                            .any(|(_, n): &(usize, String)| *n == group.name)
                        {
                            listed_by.push((index, group.name.clone()));
                            groups.push(group);
                        }
                    }
                }
                match page.next_token() {
                    Some(next) if !next.is_empty() => token = Some(next.to_string()),
                    _ => break,
                }
            }
        }
        let mut known = self.groups.write().expect("group map poisoned");
        known.retain(|(r, _), _| r != region);
        known.extend(
            listed_by
                .into_iter()
                .map(|(index, name)| ((region.to_string(), name), index)),
        );
        Ok(groups)
    }

    /// `group` as ebb sees it, when it carries the opt-in tag and says its whole capacity: a
    /// group whose sizes are missing is left out (unknown, never acted on).
    fn managed_group(&self, region: &str, group: &AutoScalingGroup) -> Option<ScalingGroup> {
        let tags: Tags = group
            .tags()
            .iter()
            .filter_map(|t| Some((t.key()?, t.value().unwrap_or_default())))
            .collect();
        if let Some((key, value)) = &self.settings.managed_tag {
            if tags.get(key) != Some(value.as_str()) {
                return None;
            }
        }
        Some(ScalingGroup {
            name: group.auto_scaling_group_name()?.to_string(),
            region: region.to_string(),
            tags,
            capacity: Capacity {
                min: group.min_size()?,
                desired: group.desired_capacity()?,
                max: group.max_size()?,
            },
            members: group
                .instances()
                .iter()
                .filter_map(|i| {
                    Some(GroupMember {
                        id: i.instance_id()?.to_string(),
                        instance_type: i.instance_type().unwrap_or_default().to_string(),
                        protected_from_scale_in: i.protected_from_scale_in().unwrap_or(false),
                    })
                })
                .collect(),
        })
    }

    /// The clients of the account that listed group `name` of `region` (ebb's own for a group
    /// never listed), for `operation`.
    pub(super) fn scope_of_group(
        &self,
        region: &str,
        name: &str,
        operation: &'static str,
    ) -> Result<&Scope, CloudError> {
        let listed_by = self
            .groups
            .read()
            .expect("group map poisoned")
            .get(&(region.to_string(), name.to_string()))
            .copied();
        match listed_by {
            Some(index) => Ok(&self.scopes[index]),
            None => match self.scopes_in(region).next().map(|(index, _)| index) {
                Some(index) => Ok(&self.scopes[index]),
                None => {
                    let message = format!("region {region} is not watched; add it to EBB_REGIONS");
                    Err(CloudError::other(operation, message))
                }
            },
        }
    }

    /// UpdateAutoScalingGroup of `name`'s min, desired and max, through the account that
    /// listed it (ebb's own for a group never listed).
    pub(super) async fn update_group(
        &self,
        region: &str,
        name: &str,
        capacity: Capacity,
    ) -> Result<Option<String>, CloudError> {
        const OPERATION: &str = "UpdateAutoScalingGroup";
        let scope = self.scope_of_group(region, name, OPERATION)?;
        self.count(OPERATION);
        let out = scope
            .autoscaling
            .update_auto_scaling_group()
            .auto_scaling_group_name(name)
            .min_size(capacity.min)
            .desired_capacity(capacity.desired)
            .max_size(capacity.max)
            .customize()
            .config_override(group_change_once_sent())
            .send()
            .boxed()
            .await
            .map_err(|e| cloud_error(OPERATION, e))?;
        Ok(out.request_id().map(str::to_string))
    }

    /// SetInstanceProtection of `instances` of group `name`, through the account that listed
    /// it.
    pub(super) async fn protect_members(
        &self,
        region: &str,
        name: &str,
        instances: &[String],
        protected: bool,
    ) -> Result<Option<String>, CloudError> {
        const OPERATION: &str = "SetInstanceProtection";
        let scope = self.scope_of_group(region, name, OPERATION)?;
        self.count(OPERATION);
        let out = scope
            .autoscaling
            .set_instance_protection()
            .auto_scaling_group_name(name)
            .set_instance_ids(Some(instances.to_vec()))
            .protected_from_scale_in(protected)
            .send()
            .boxed()
            .await
            .map_err(|e| cloud_error(OPERATION, e))?;
        Ok(out.request_id().map(str::to_string))
    }
}
