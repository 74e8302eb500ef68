//! How ebb reaches Alibaba Cloud (`EBB_CLOUD=alibaba`): the flags of its credentials and
//! endpoints, and which credentials they make.

use crate::cloud::alibaba::{CredentialSource, Credentials, OidcRole};
use anyhow::Result;
use clap::Args;
use std::path::PathBuf;

/// How ebb reaches Alibaba Cloud (`EBB_CLOUD=alibaba`).
#[derive(Args, Clone)]
pub(super) struct AlibabaArgs {
    /// Alibaba Cloud: the AccessKey id (without one, the ECS instance's RAM role).
    #[arg(long, env = "ALIBABA_CLOUD_ACCESS_KEY_ID", hide_env_values = true)]
    pub(super) alibaba_access_key_id: Option<String>,
    /// Alibaba Cloud: the AccessKey secret.
    #[arg(long, env = "ALIBABA_CLOUD_ACCESS_KEY_SECRET", hide_env_values = true)]
    pub(super) alibaba_access_key_secret: Option<String>,
    /// Alibaba Cloud: the STS token of temporary credentials.
    #[arg(long, env = "ALIBABA_CLOUD_SECURITY_TOKEN", hide_env_values = true)]
    pub(super) alibaba_security_token: Option<String>,
    /// Alibaba Cloud: the RAM role of the ECS instance ebb runs on, whose credentials the
    /// metadata server gives (default: the role the instance has).
    #[arg(long, env = "ALIBABA_CLOUD_ECS_METADATA", value_name = "ROLE")]
    pub(super) alibaba_ram_role: Option<String>,
    /// Alibaba Cloud: the metadata server that gives the RAM role's credentials.
    #[arg(
        long,
        env = "EBB_ALIBABA_METADATA_ENDPOINT",
        default_value = "http://100.100.100.200",
        value_name = "URL"
    )]
    pub(super) alibaba_metadata_endpoint: String,
    /// Alibaba Cloud: every API at this base URL instead of Alibaba's endpoints (for tests
    /// against a fake).
    #[arg(long, env = "EBB_ALIBABA_ENDPOINT", value_name = "URL")]
    pub(super) alibaba_endpoint: Option<reqwest::Url>,
    /// Alibaba Cloud on ACK with RRSA: the RAM role of ebb's service account, assumed with the
    /// OIDC token (set by the pod identity webhook, with the next two).
    #[arg(long, env = "ALIBABA_CLOUD_ROLE_ARN", value_name = "ARN")]
    pub(super) alibaba_role_arn: Option<String>,
    /// Alibaba Cloud on ACK with RRSA: the ARN of the cluster's OIDC identity provider.
    #[arg(long, env = "ALIBABA_CLOUD_OIDC_PROVIDER_ARN", value_name = "ARN")]
    pub(super) alibaba_oidc_provider_arn: Option<String>,
    /// Alibaba Cloud on ACK with RRSA: the file the service account's OIDC token is mounted at.
    #[arg(long, env = "ALIBABA_CLOUD_OIDC_TOKEN_FILE", value_name = "FILE")]
    pub(super) alibaba_oidc_token_file: Option<PathBuf>,
    /// Alibaba Cloud on ACK with RRSA: the name of the role's session.
    #[arg(
        long,
        env = "ALIBABA_CLOUD_ROLE_SESSION_NAME",
        default_value = "ebb",
        value_name = "NAME"
    )]
    pub(super) alibaba_role_session_name: String,
    /// Alibaba Cloud on ACK with RRSA: STS's endpoint, a host or an https URL (the pod identity
    /// webhook sets it from version 0.4.0; it wins over the next two).
    #[arg(long, env = "ALIBABA_CLOUD_STS_ENDPOINT", value_name = "HOST")]
    pub(super) alibaba_sts_endpoint: Option<String>,
    /// Alibaba Cloud on ACK with RRSA: the region whose STS endpoint assumes the role (default:
    /// the central sts.aliyuncs.com).
    #[arg(long, env = "ALIBABA_CLOUD_STS_REGION", value_name = "REGION")]
    pub(super) alibaba_sts_region: Option<String>,
    /// Alibaba Cloud on ACK with RRSA: `true` to reach STS at the region's VPC endpoint
    /// (sts-vpc.REGION.aliyuncs.com), which a cluster without Internet access needs.
    #[arg(
        long,
        env = "ALIBABA_CLOUD_VPC_ENDPOINT_ENABLED",
        default_value_t = false,
        value_name = "BOOL",
        action = clap::ArgAction::Set,
        value_parser = clap::builder::BoolishValueParser::new()
    )]
    pub(super) alibaba_vpc_endpoint_enabled: bool,
}

impl AlibabaArgs {
    /// Where the credentials come from: the AccessKey when one is set, else the service
    /// account's RAM role when RRSA's three variables are, else the instance's RAM role (the
    /// official SDKs' order).
    pub(super) fn credentials(&self) -> Result<CredentialSource> {
        let rrsa = (
            &self.alibaba_role_arn,
            &self.alibaba_oidc_provider_arn,
            &self.alibaba_oidc_token_file,
        );
        let oidc = match rrsa {
            (None, None, None) => None,
            (Some(role_arn), Some(provider_arn), Some(token_file)) => Some(OidcRole {
                role_arn: role_arn.clone(),
                provider_arn: provider_arn.clone(),
                token_file: token_file.clone(),
                session_name: self.alibaba_role_session_name.clone(),
                sts: self.sts_endpoint(),
            }),
            _ => anyhow::bail!(
                "set all of ALIBABA_CLOUD_ROLE_ARN, ALIBABA_CLOUD_OIDC_PROVIDER_ARN and ALIBABA_CLOUD_OIDC_TOKEN_FILE (ACK's pod identity webhook sets them for a service account with RRSA), or none of them"
            ),
        };
        match (&self.alibaba_access_key_id, &self.alibaba_access_key_secret) {
            (Some(id), Some(secret)) => Ok(CredentialSource::AccessKey(Credentials {
                access_key_id: id.clone(),
                access_key_secret: secret.clone(),
                security_token: self.alibaba_security_token.clone(),
            })),
            (Some(_), None) | (None, Some(_)) => anyhow::bail!(
                "set both ALIBABA_CLOUD_ACCESS_KEY_ID and ALIBABA_CLOUD_ACCESS_KEY_SECRET, or neither to use the instance's RAM role"
            ),
            (None, None) => Ok(match oidc {
                Some(role) => CredentialSource::Oidc(role),
                None => CredentialSource::RamRole {
                    role: self.alibaba_ram_role.clone(),
                    metadata: self.alibaba_metadata_endpoint.clone(),
                },
            }),
        }
    }

    /// Where STS is: the fake's address in tests, else the endpoint given, else the region's
    /// (its VPC endpoint when asked), else the central endpoint.
    fn sts_endpoint(&self) -> String {
        if let Some(url) = &self.alibaba_endpoint {
            return url.as_str().trim_end_matches('/').to_string();
        }
        if let Some(endpoint) = self
            .alibaba_sts_endpoint
            .as_deref()
            .filter(|e| !e.is_empty())
        {
            return match endpoint.contains("://") {
                true => endpoint.to_string(),
                false => format!("https://{endpoint}"),
            };
        }
        let prefix = match self.alibaba_vpc_endpoint_enabled {
            true => "sts-vpc",
            false => "sts",
        };
        match &self.alibaba_sts_region {
            Some(region) => format!("https://{prefix}.{region}.aliyuncs.com"),
            None => "https://sts.aliyuncs.com".to_string(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Flags {
        #[command(flatten)]
        alibaba: AlibabaArgs,
    }

    fn sts(flags: &[&str]) -> String {
        let rrsa = [
            "ebb",
            "--alibaba-role-arn=acs:ram::1:role/ebb",
            "--alibaba-oidc-provider-arn=acs:ram::1:oidc-provider/ack",
            "--alibaba-oidc-token-file=/var/run/secrets/token",
        ];
        let args = Flags::try_parse_from(rrsa.iter().chain(flags)).unwrap();
        match args.alibaba.credentials().unwrap() {
            CredentialSource::Oidc(role) => role.sts,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn sts_is_the_endpoint_given_else_the_regions_else_the_central_one() {
        assert_eq!(sts(&[]), "https://sts.aliyuncs.com");
        assert_eq!(
            sts(&["--alibaba-sts-region=cn-hangzhou"]),
            "https://sts.cn-hangzhou.aliyuncs.com"
        );
        assert_eq!(
            sts(&[
                "--alibaba-sts-region=cn-hangzhou",
                "--alibaba-vpc-endpoint-enabled=true"
            ]),
            "https://sts-vpc.cn-hangzhou.aliyuncs.com"
        );
        assert_eq!(
            sts(&[
                "--alibaba-sts-region=cn-hangzhou",
                "--alibaba-sts-endpoint=sts-vpc.cn-beijing.aliyuncs.com"
            ]),
            "https://sts-vpc.cn-beijing.aliyuncs.com"
        );
    }
}
