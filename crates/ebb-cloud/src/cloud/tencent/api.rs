//! The requests and answers of the calls the provider makes, as Tencent Cloud's API reference
//! names their fields, and CVM's instances as ebb sees them.

use crate::fleet::{Billing, Charge, Cloud, Gpus, Instance, InstanceState, Lifecycle, StoppedMode};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Instances per DescribeInstances page and per StartInstances / StopInstances call: CVM's
/// limit for each.
pub(super) const INSTANCES_PER_CALL: usize = 100;
/// Resources per TagResources / UnTagResources call (the Tag API's `ResourceList.N`, N from 0
/// to 9: nine is within either reading of it).
pub(super) const RESOURCES_PER_TAG_CALL: usize = 9;
/// Instances per GetMonitorData call (Cloud Monitor's limit).
pub(super) const INSTANCES_PER_MONITOR_CALL: usize = 10;

/// A filter of DescribeInstances or DescribeInstanceTypeConfigs.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "PascalCase")]
pub(super) struct Filter {
    /// `tag:KEY`, `instance-type`, ...
    pub name: String,
    /// Any of these values.
    pub values: Vec<String>,
}

/// One page of DescribeInstances.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub(super) struct InstancePage {
    /// How many instances match in all.
    pub total_count: usize,
    /// This page's.
    #[serde(default)]
    pub instance_set: Vec<CvmInstance>,
}

/// A tag as CVM lists it.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub(super) struct CvmTag {
    /// Its key.
    pub key: String,
    /// Its value.
    #[serde(default)]
    pub value: String,
}

/// An instance as DescribeInstances lists it (the fields ebb reads).
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub(super) struct CvmInstance {
    /// `ins-...`.
    pub instance_id: String,
    /// `GN7.2XLARGE32`.
    pub instance_type: String,
    /// `RUNNING`, `STOPPED`, ...
    pub instance_state: String,
    /// `POSTPAID_BY_HOUR`, `PREPAID`, `SPOTPAID`, `CDHPAID`.
    #[serde(default)]
    pub instance_charge_type: String,
    /// How a stopped instance is billed: `KEEP_CHARGING`, `STOP_CHARGING`, `NOT_APPLICABLE`.
    #[serde(default)]
    pub stop_charging_mode: Option<String>,
    /// Its tags.
    #[serde(default)]
    pub tags: Option<Vec<CvmTag>>,
    /// Its private addresses in its VPC, the primary first.
    #[serde(default)]
    pub private_ip_addresses: Option<Vec<String>>,
}

impl CvmInstance {
    /// How it is paid for: `POSTPAID_BY_HOUR` and `SPOTPAID` by the hour; `PREPAID`, `CDHPAID`
    /// and an unknown charge type as a subscription, which ebb never stops.
    pub(super) fn charge(&self) -> Charge {
        match self.instance_charge_type.as_str() {
            "POSTPAID_BY_HOUR" | "SPOTPAID" => Charge::PayAsYouGo,
            _ => Charge::Subscription,
        }
    }

    /// How it is billed: its charge type, what a stop of its family saves (the families file),
    /// and, stopped, the stopped mode CVM reports.
    pub(super) fn billing(&self) -> Billing {
        let stopped = self.instance_state == "STOPPED";
        Billing {
            stopped_mode: stopped.then(|| stopped_mode(self.stop_charging_mode.as_deref())),
            ..Billing::of(Cloud::Tencent, self.charge(), &self.instance_type, None)
        }
    }

    /// Its tags as a map.
    pub(super) fn tag_map(&self) -> BTreeMap<String, String> {
        self.tags
            .iter()
            .flatten()
            .map(|t| (t.key.clone(), t.value.clone()))
            .collect()
    }

    /// The instance as ebb sees it in `region`; `None` in a state ebb does not follow (a launch
    /// that failed).
    pub(super) fn to_instance(&self, region: &str) -> Option<Instance> {
        let state = match self.instance_state.as_str() {
            "PENDING" | "STARTING" => InstanceState::Pending,
            "RUNNING" | "REBOOTING" => InstanceState::Running,
            "STOPPING" => InstanceState::Stopping,
            "STOPPED" => InstanceState::Stopped,
            "SHUTDOWN" | "TERMINATING" => InstanceState::ShuttingDown,
            _ => return None,
        };
        Some(Instance {
            id: self.instance_id.clone(),
            region: region.to_string(),
            instance_type: self.instance_type.clone(),
            state,
            // CVM says neither when an instance stopped nor when it last started.
            state_since: None,
            lifecycle: match self.instance_charge_type.as_str() {
                "SPOTPAID" => Lifecycle::Spot,
                _ => Lifecycle::OnDemand,
            },
            launched_at: None,
            tags: self.tag_map().into_iter().collect(),
            gpus: None,
            gpu_util: Vec::new(),
            via_role: None,
            billing: self.billing(),
            private_ip: self
                .private_ip_addresses
                .iter()
                .flatten()
                .find_map(|ip| crate::cloud::ip_of(ip)),
        })
    }
}

/// CVM's `StopChargingMode` of a stopped instance as ebb counts it.
pub(super) fn stopped_mode(mode: Option<&str>) -> StoppedMode {
    match mode {
        Some("STOP_CHARGING") => StoppedMode::NoCharge,
        Some("KEEP_CHARGING") => StoppedMode::Charging,
        _ => StoppedMode::Unknown,
    }
}

/// DescribeInstanceTypeConfigs' answer.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub(super) struct TypeConfigs {
    /// One entry per type and zone.
    #[serde(default)]
    pub instance_type_config_set: Vec<TypeConfig>,
}

/// One instance type in one zone.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub(super) struct TypeConfig {
    /// `GN7.2XLARGE32`.
    pub instance_type: String,
    /// `GN7`.
    #[serde(default)]
    pub instance_family: String,
    /// GPU cores.
    #[serde(rename = "GPU", default)]
    pub gpu: u32,
    /// Physical GPU cards (below 1 for a vGPU type).
    #[serde(default)]
    pub gpu_count: f64,
}

/// The GPU model and memory of the GPU families, which DescribeInstanceTypeConfigs does not
/// give (from the CVM "GPU Computing Instance" page): family, model, memory per GPU in MiB.
const GPU_FAMILIES: &[(&str, &str, u32)] = &[
    ("GN6", "NVIDIA Tesla P4", 8 * 1024),
    ("GN6S", "NVIDIA Tesla P4", 8 * 1024),
    ("GN7", "NVIDIA Tesla T4", 16 * 1024),
    ("GN8", "NVIDIA Tesla P40", 24 * 1024),
    ("GN10X", "NVIDIA Tesla V100", 32 * 1024),
    ("GN10XP", "NVIDIA Tesla V100", 32 * 1024),
    ("GT4", "NVIDIA A100", 40 * 1024),
    ("PNV4", "NVIDIA A10", 24 * 1024),
];

impl TypeConfig {
    /// Its GPUs; `None` for a type without.
    pub(super) fn gpus(&self) -> Option<Gpus> {
        let count = if self.gpu_count > 0.0 {
            self.gpu_count.ceil() as u32
        } else {
            self.gpu
        };
        if count == 0 {
            return None;
        }
        let family = self.instance_family.to_ascii_uppercase();
        let (model, memory_mib) = GPU_FAMILIES
            .iter()
            .find(|(f, _, _)| *f == family)
            .map_or((format!("{family} GPU"), 0), |(_, m, mib)| {
                (m.to_string(), *mib)
            });
        Some(Gpus {
            count,
            model,
            memory_mib,
        })
    }
}

/// A tag to bind (TagResources).
#[derive(Debug, Serialize)]
#[serde(rename_all = "PascalCase")]
pub(super) struct TagPair {
    /// Its key.
    pub tag_key: String,
    /// Its value.
    pub tag_value: String,
}

/// TagResources' and UnTagResources' answer: the resources it did not change.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub(super) struct TagAnswer {
    /// The resources refused, with why.
    #[serde(default)]
    pub failed_resources: Vec<FailedResource>,
}

/// A resource a tag call refused.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub(super) struct FailedResource {
    /// Its six-segment name.
    pub resource: String,
    /// The error code.
    pub code: String,
    /// The message.
    #[serde(default)]
    pub message: String,
}

/// GetCallerIdentity's answer.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub(super) struct Caller {
    /// The account's root UIN, the six-segment names' account.
    pub account_id: String,
}

/// GetMonitorData's answer.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub(super) struct MonitorData {
    /// One series per instance that has data.
    #[serde(default)]
    pub data_points: Vec<DataPoint>,
}

/// The series of one instance.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub(super) struct DataPoint {
    /// Its dimensions (`InstanceId`).
    #[serde(default)]
    pub dimensions: Vec<Dimension>,
    /// Seconds since 1970, one per value.
    #[serde(default)]
    pub timestamps: Vec<f64>,
    /// The values, percent.
    #[serde(default)]
    pub values: Vec<f64>,
}

/// A metric's dimension.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub(super) struct Dimension {
    /// `InstanceId`.
    pub name: String,
    /// The instance's id.
    pub value: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn listed(json: &str) -> CvmInstance {
        serde_json::from_str(json).unwrap()
    }

    #[test]
    fn an_instance_is_read_as_cvm_lists_it() {
        let cvm = listed(
            r#"{"InstanceId":"ins-1","InstanceType":"GN7.2XLARGE32","InstanceState":"STOPPED",
                "InstanceChargeType":"SPOTPAID","StopChargingMode":"STOP_CHARGING",
                "Tags":[{"Key":"team","Value":"research"}],"PublicIpAddresses":null,
                "PrivateIpAddresses":["10.0.3.17"]}"#,
        );
        let instance = cvm.to_instance("ap-guangzhou").unwrap();
        assert_eq!(instance.private_ip, "10.0.3.17".parse().ok());
        assert_eq!(instance.state, InstanceState::Stopped);
        assert_eq!(instance.lifecycle, Lifecycle::Spot);
        assert_eq!(instance.billing.cloud, Cloud::Tencent);
        assert_eq!(instance.billing.charge, Charge::PayAsYouGo);
        assert_eq!(instance.billing.stopped_mode, Some(StoppedMode::NoCharge));
        assert!(instance.billing.stop_saves());
        assert_eq!(instance.tag("team"), Some("research"));
    }

    #[test]
    fn a_stop_that_still_charges_is_read_as_such() {
        assert_eq!(stopped_mode(Some("KEEP_CHARGING")), StoppedMode::Charging);
        assert_eq!(stopped_mode(Some("NOT_APPLICABLE")), StoppedMode::Unknown);
        assert_eq!(stopped_mode(None), StoppedMode::Unknown);
        let local: CvmInstance = serde_json::from_str(
            r#"{"InstanceId":"ins-1","InstanceType":"IT5.4XLARGE64","InstanceState":"RUNNING",
                "InstanceChargeType":"POSTPAID_BY_HOUR"}"#,
        )
        .unwrap();
        let billing = local.billing();
        assert_eq!(billing.stopped_mode, None, "not stopped");
        assert!(!billing.stop_saves(), "a local-disk family keeps charging");
    }

    #[test]
    fn an_unknown_charge_type_is_never_taken_for_pay_as_you_go() {
        for (charge, expected) in [
            ("POSTPAID_BY_HOUR", Charge::PayAsYouGo),
            ("SPOTPAID", Charge::PayAsYouGo),
            ("PREPAID", Charge::Subscription),
            ("CDHPAID", Charge::Subscription),
            ("SOMETHING_NEW", Charge::Subscription),
        ] {
            let cvm = listed(&format!(
                r#"{{"InstanceId":"ins-1","InstanceType":"S5.LARGE8","InstanceState":"RUNNING",
                    "InstanceChargeType":"{charge}"}}"#
            ));
            assert_eq!(cvm.charge(), expected, "{charge}");
        }
    }

    #[test]
    fn gpus_come_from_the_type_and_the_family_table() {
        let t4: TypeConfig = serde_json::from_str(
            r#"{"InstanceType":"GN7.5XLARGE80","InstanceFamily":"GN7","GPU":1,"GpuCount":1}"#,
        )
        .unwrap();
        assert_eq!(
            t4.gpus(),
            Some(Gpus {
                count: 1,
                model: "NVIDIA Tesla T4".to_string(),
                memory_mib: 16384
            })
        );
        let cpu: TypeConfig =
            serde_json::from_str(r#"{"InstanceType":"S5.LARGE8","InstanceFamily":"S5","GPU":0}"#)
                .unwrap();
        assert_eq!(cpu.gpus(), None);
    }
}
