//! Changing a stopped instance's type, for a start that falls back to another type when EC2
//! has no capacity for its own.

use super::ec2::Accepted;
use super::{cloud_error, AwsProvider};
use crate::cloud::ActionReport;
use aws_sdk_ec2::operation::RequestId;
use aws_sdk_ec2::types::AttributeValue;

impl AwsProvider {
    /// ModifyInstanceAttribute of `id`'s instance type, with the clients of the account that
    /// listed it.
    pub(super) async fn modify_type(
        &self,
        region: &str,
        id: &str,
        instance_type: &str,
    ) -> ActionReport {
        let ids = [id.to_string()];
        self.in_scopes(
            region,
            &ids,
            "ModifyInstanceAttribute",
            |scope, batch| async move {
                self.count("ModifyInstanceAttribute");
                let out = scope
                    .ec2
                    .modify_instance_attribute()
                    .set_instance_id(batch.into_iter().next())
                    .instance_type(AttributeValue::builder().value(instance_type).build())
                    .send()
                    .await
                    .map_err(|e| cloud_error("ModifyInstanceAttribute", e))?;
                Ok(Accepted::of(out.request_id()))
            },
        )
        .await
    }
}
