//! Tags through the Tag API: TagResources and UnTagResources name each instance by its
//! six-segment resource name, whose account STS gives (GetCallerIdentity, once).

use super::api::{Caller, TagAnswer, RESOURCES_PER_TAG_CALL};
use super::client::{kind_of, Answer, STS, TAG};
use super::{Accepted, TencentProvider};
use crate::cloud::{ActionReport, CloudError};
use crate::fleet::Cloud;
use serde_json::{json, Value};

impl TencentProvider {
    /// The account's UIN, asked of STS once.
    async fn account(&self, region: &str) -> Result<&str, CloudError> {
        self.account
            .get_or_try_init(|| async {
                let empty = json!({});
                let answer: Answer<Caller> = self
                    .paced(region, "GetCallerIdentity", 0, || {
                        self.client
                            .call(STS, "GetCallerIdentity", Some(region), &empty)
                    })
                    .await?;
                Ok::<_, CloudError>(answer.body.account_id)
            })
            .await
            .map(String::as_str)
    }

    /// TagResources or UnTagResources (`action`) of `ids` with `body` besides the resource
    /// list, nine resources a call; the resources the answer lists as failed fail alone.
    pub(super) async fn tag_call(
        &self,
        region: &str,
        ids: &[String],
        action: &'static str,
        body: Value,
    ) -> ActionReport {
        let account = match self.account(region).await {
            Ok(account) => account.to_string(),
            Err(error) => return ActionReport::all_failed(ids, &error),
        };
        let name = |id: &str| format!("qcs::cvm:{region}:uin/{account}:instance/{id}");
        self.batched(
            region,
            action,
            ids.to_vec(),
            RESOURCES_PER_TAG_CALL,
            |batch| {
                let mut body = body.clone();
                body["ResourceList"] = json!(batch.iter().map(|id| name(id)).collect::<Vec<_>>());
                async move {
                    let answer: Answer<TagAnswer> =
                        self.client.call(TAG, action, None, &body).await?;
                    let refused = answer
                        .body
                        .failed_resources
                        .into_iter()
                        .filter_map(|f| {
                            let id = f.resource.rsplit('/').next()?.to_string();
                            let error =
                                CloudError::coded(kind_of(&f.code), action, &f.code, f.message)
                                    .from_cloud(Cloud::Tencent);
                            Some((id, error))
                        })
                        .collect();
                    Ok(Accepted {
                        request_id: answer.request_id,
                        refused,
                    })
                }
            },
        )
        .await
    }
}
