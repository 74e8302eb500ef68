//! What a listed instance keeps paying for while stopped: its EBS volumes (DescribeVolumes)
//! and its Elastic IPs (DescribeAddresses), read with the listing. A call that fails leaves
//! those facts of the instances it was for unread (`None`), never empty: a report then says
//! their cost is unknown rather than zero. What was read in full is read again only after
//! [`READ_AGAIN_AFTER`]: disks and addresses change rarely, and a fleet of thousands would
//! otherwise cost two calls per 200 instances at every tick.

use super::{cloud_error, AwsProvider, Scope};
use crate::fleet::money::{Attached, Volume};
use aws_sdk_ec2::types::Filter;
use futures_util::FutureExt as _;
use std::collections::HashMap;

/// Instance ids per filter (EC2 takes at most 200 values in one filter).
const IDS_PER_CALL: usize = 200;

/// How long what was read of an instance's volumes and addresses is used before reading them
/// again.
const READ_AGAIN_AFTER: std::time::Duration = std::time::Duration::from_secs(3600);

impl AwsProvider {
    /// Scope `scope` listed, with its instances' volumes and Elastic IPs (none when the listing
    /// failed).
    pub(super) async fn list_with_attached(
        &self,
        scope: &Scope,
    ) -> (
        Result<Vec<(crate::fleet::Instance, bool)>, crate::cloud::CloudError>,
        HashMap<String, Attached>,
    ) {
        let listing = self.list_scope(scope).await;
        let attached = match &listing {
            Ok(instances) => {
                let ids: Vec<String> = instances.iter().map(|(i, _)| i.id.clone()).collect();
                self.attached(scope, &ids).await
            }
            Err(_) => HashMap::new(),
        };
        (listing, attached)
    }

    /// The volumes and Elastic IPs of `ids`, listed in `scope`: one entry per id, read again
    /// for those not read in full within [`READ_AGAIN_AFTER`].
    pub(super) async fn attached(
        &self,
        scope: &Scope,
        ids: &[String],
    ) -> HashMap<String, Attached> {
        let now = tokio::time::Instant::now();
        let mut fresh = HashMap::new();
        let mut stale = Vec::new();
        {
            let cache = self.attached.lock().expect("attachment cache poisoned");
            for id in ids {
                match cache.get(id) {
                    Some((at, a)) if now.duration_since(*at) < READ_AGAIN_AFTER => {
                        fresh.insert(id.clone(), a.clone());
                    }
                    _ => stale.push(id.clone()),
                }
            }
        }
        let read = self.read_attached(scope, &stale).await;
        let mut cache = self.attached.lock().expect("attachment cache poisoned");
        // What is due to be read again is let go: gone instances leave nothing behind.
        cache.retain(|_, (at, _)| now.duration_since(*at) < READ_AGAIN_AFTER);
        for (id, a) in &read {
            if a.volumes.is_some() && a.elastic_ips.is_some() {
                cache.insert(id.clone(), (now, a.clone()));
            }
        }
        fresh.extend(read);
        fresh
    }

    /// DescribeVolumes and DescribeAddresses of `ids`, 200 at a time.
    async fn read_attached(&self, scope: &Scope, ids: &[String]) -> HashMap<String, Attached> {
        let mut out: HashMap<String, Attached> = ids
            .iter()
            .map(|id| {
                let read = Attached {
                    volumes: Some(Vec::new()),
                    elastic_ips: Some(0),
                };
                (id.clone(), read)
            })
            .collect();
        for chunk in ids.chunks(IDS_PER_CALL) {
            match self.volumes_of(scope, chunk).await {
                Ok(found) => {
                    for (id, volume) in found {
                        if let Some(Some(list)) = out.get_mut(&id).map(|a| a.volumes.as_mut()) {
                            list.push(volume);
                        }
                    }
                }
                Err(error) => {
                    tracing::warn!(region = %scope.region, error = %error, "volumes unread");
                    for id in chunk {
                        out.entry(id.clone()).or_default().volumes = None;
                    }
                }
            }
            match self.addresses_of(scope, chunk).await {
                Ok(found) => {
                    for id in found {
                        if let Some(Some(n)) = out.get_mut(&id).map(|a| a.elastic_ips.as_mut()) {
                            *n += 1;
                        }
                    }
                }
                Err(error) => {
                    tracing::warn!(region = %scope.region, error = %error, "Elastic IPs unread");
                    for id in chunk {
                        out.entry(id.clone()).or_default().elastic_ips = None;
                    }
                }
            }
        }
        for attached in out.values_mut() {
            if let Some(volumes) = attached.volumes.as_mut() {
                volumes.sort_by(|a, b| {
                    (&a.volume_type, a.size_gib).cmp(&(&b.volume_type, b.size_gib))
                });
            }
        }
        out
    }

    /// Every page of DescribeVolumes attached to `ids`: (instance, volume) pairs. A page
    /// that fails fails the whole read: a partial answer is a failed read.
    async fn volumes_of(
        &self,
        scope: &Scope,
        ids: &[String],
    ) -> Result<Vec<(String, Volume)>, crate::cloud::CloudError> {
        let filter = Filter::builder()
            .name("attachment.instance-id")
            .set_values(Some(ids.to_vec()))
            .build();
        let mut pages = scope
            .ec2
            .describe_volumes()
            .filters(filter)
            .into_paginator()
            .send();
        let mut found = Vec::new();
        self.count("DescribeVolumes");
        while let Some(page) = pages.next().boxed().await {
            let page = page.map_err(|e| cloud_error("DescribeVolumes", e))?;
            for v in page.volumes() {
                let volume = Volume {
                    volume_type: v
                        .volume_type()
                        .map(|t| t.as_str().to_string())
                        .unwrap_or_default(),
                    size_gib: v.size().and_then(|s| u64::try_from(s).ok()).unwrap_or(0),
                };
                for attachment in v.attachments() {
                    if let Some(id) = attachment.instance_id() {
                        found.push((id.to_string(), volume.clone()));
                    }
                }
            }
            if page.next_token().is_some_and(|t| !t.is_empty()) {
                self.count("DescribeVolumes");
            }
        }
        Ok(found)
    }

    /// DescribeAddresses associated with `ids`: one instance id per Elastic IP.
    async fn addresses_of(
        &self,
        scope: &Scope,
        ids: &[String],
    ) -> Result<Vec<String>, crate::cloud::CloudError> {
        let filter = Filter::builder()
            .name("instance-id")
            .set_values(Some(ids.to_vec()))
            .build();
        self.count("DescribeAddresses");
        let answer = scope
            .ec2
            .describe_addresses()
            .filters(filter)
            .send()
            .boxed()
            .await
            .map_err(|e| cloud_error("DescribeAddresses", e))?;
        Ok(answer
            .addresses()
            .iter()
            .filter_map(|a| a.instance_id().map(str::to_string))
            .collect())
    }
}
