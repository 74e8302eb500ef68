//! ECS's answers read into ebb's instances: DescribeInstances (state, charge type, spot
//! strategy, operation locks, stopped mode, tags), DescribeInstanceTypes (GPUs), and the
//! per-instance results of StartInstances and StopInstances.

use crate::fleet::{
    Billing, Charge, Cloud, Gpus, Instance, InstanceState, Lifecycle, StoppedMode, Tags,
};
use chrono::{DateTime, NaiveDateTime, Utc};
use serde_json::Value;

/// The items of a list ECS wraps in an object (`{"Instances": {"Instance": [...]}}`).
pub(super) fn items<'a>(body: &'a Value, outer: &str, inner: &str) -> &'a [Value] {
    body.get(outer)
        .and_then(|o| o.get(inner))
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice)
}

/// The instance's first private address: in its VPC (`VpcAttributes.PrivateIpAddress`), or
/// on the classic network (`InnerIpAddress`).
fn private_ip(v: &Value) -> Option<std::net::IpAddr> {
    let vpc = v
        .get("VpcAttributes")
        .map_or(&[][..], |a| items(a, "PrivateIpAddress", "IpAddress"));
    let classic = items(v, "InnerIpAddress", "IpAddress");
    vpc.iter()
        .chain(classic)
        .find_map(|ip| crate::cloud::ip_of(ip.as_str()?))
}

fn text<'a>(v: &'a Value, key: &str) -> Option<&'a str> {
    v.get(key).and_then(Value::as_str)
}

/// An ECS state; `None` for one ebb does not know (such an instance is not listed).
fn state_of(status: &str) -> Option<InstanceState> {
    Some(match status {
        "Pending" | "Starting" => InstanceState::Pending,
        "Running" => InstanceState::Running,
        "Stopping" => InstanceState::Stopping,
        "Stopped" => InstanceState::Stopped,
        _ => return None,
    })
}

/// How the cloud bills a stopped instance, from DescribeInstances' `StoppedMode`.
pub(super) fn stopped_mode_of(mode: Option<&str>) -> StoppedMode {
    match mode {
        Some("StopCharging") => StoppedMode::NoCharge,
        // Not-applicable: the instance cannot stop without charge (a subscription, a local
        // disk family, classic network).
        Some("KeepCharging" | "Not-applicable") => StoppedMode::Charging,
        _ => StoppedMode::Unknown,
    }
}

/// ECS's times: `2017-12-10T04:04Z` (minutes) or with seconds.
fn time_of(text: &str) -> Option<DateTime<Utc>> {
    DateTime::parse_from_rfc3339(text)
        .map(|t| t.with_timezone(&Utc))
        .ok()
        .or_else(|| {
            NaiveDateTime::parse_from_str(text, "%Y-%m-%dT%H:%MZ")
                .ok()
                .map(|t| t.and_utc())
        })
}

/// One instance of a DescribeInstances answer, in `region`; `None` for one without an id,
/// type or known state.
pub(super) fn instance_of(region: &str, v: &Value) -> Option<Instance> {
    let id = text(v, "InstanceId")?;
    let instance_type = text(v, "InstanceType")?;
    let state = state_of(text(v, "Status")?)?;
    // `PostPaid` is paid by the hour; `PrePaid`, and a charge type missing or unknown, as a
    // subscription, which ebb never stops: unknown means no stop.
    let charge = match text(v, "InstanceChargeType") {
        Some("PostPaid") => Charge::PayAsYouGo,
        _ => Charge::Subscription,
    };
    let lifecycle = match text(v, "SpotStrategy") {
        Some("SpotWithPriceLimit" | "SpotAsPriceGo") => Lifecycle::Spot,
        _ => Lifecycle::OnDemand,
    };
    let recycling = items(v, "OperationLocks", "LockReason")
        .iter()
        .any(|l| text(l, "LockReason") == Some("Recycling"));
    let tags: Tags = items(v, "Tags", "Tag")
        .iter()
        .filter_map(|t| Some((text(t, "TagKey")?, text(t, "TagValue").unwrap_or(""))))
        .collect();
    let launched_at = text(v, "StartTime").and_then(time_of);
    let billing = Billing {
        stopped_mode: (state == InstanceState::Stopped)
            .then(|| stopped_mode_of(text(v, "StoppedMode"))),
        recycling,
        ..Billing::of(
            Cloud::Alibaba,
            charge,
            instance_type,
            text(v, "InstanceTypeFamily"),
        )
    };
    Some(Instance {
        id: id.to_string(),
        region: region.to_string(),
        instance_type: instance_type.to_string(),
        state,
        state_since: match state {
            InstanceState::Pending | InstanceState::Running => launched_at,
            _ => None,
        },
        lifecycle,
        launched_at,
        tags,
        gpus: None,
        gpu_util: Vec::new(),
        via_role: None,
        billing,
        private_ip: private_ip(v),
    })
}

/// The GPUs of one DescribeInstanceTypes item, with its type; `None` GPUs for a type without.
pub(super) fn gpus_of(v: &Value) -> Option<(String, Option<Gpus>)> {
    let instance_type = text(v, "InstanceTypeId")?.to_string();
    let count = v.get("GPUAmount").and_then(Value::as_u64).unwrap_or(0);
    let gpus = (count > 0).then(|| Gpus {
        count: u32::try_from(count).unwrap_or(u32::MAX),
        model: text(v, "GPUSpec").unwrap_or("unknown").to_string(),
        // GPUMemorySize is GiB per GPU.
        memory_mib: v
            .get("GPUMemorySize")
            .and_then(Value::as_f64)
            .map_or(0, |gib| (gib * 1024.0).round() as u32),
    });
    Some((instance_type, gpus))
}

/// One instance's result of a StartInstances or StopInstances call made with
/// `BatchOptimization=SuccessFirst`: its id, and its error code and message unless `200`.
pub(super) fn outcomes(body: &Value) -> Vec<(String, Option<(String, String)>)> {
    items(body, "InstanceResponses", "InstanceResponse")
        .iter()
        .filter_map(|r| {
            let id = text(r, "InstanceId")?.to_string();
            let code = match r.get("Code") {
                Some(Value::String(c)) => c.clone(),
                Some(Value::Number(n)) => n.to_string(),
                _ => String::new(),
            };
            let error = (code != "200").then(|| {
                let message = text(r, "Message").unwrap_or("refused").to_string();
                (code, message)
            });
            Some((id, error))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_listed_instance_carries_its_billing_locks_and_tags() {
        let v = json!({
            "InstanceId": "i-bp1", "InstanceType": "ecs.gn7i-c8g1.2xlarge", "Status": "Stopped",
            "InstanceChargeType": "PostPaid", "SpotStrategy": "SpotAsPriceGo",
            "StoppedMode": "StopCharging", "StartTime": "2026-11-30T01:02Z",
            "OperationLocks": {"LockReason": [{"LockReason": "Recycling"}]},
            "Tags": {"Tag": [{"TagKey": "ebb:managed", "TagValue": "true"}]},
            "VpcAttributes": {"PrivateIpAddress": {"IpAddress": ["172.16.0.9"]}},
            "InnerIpAddress": {"IpAddress": []}
        });
        let i = instance_of("cn-hangzhou", &v).unwrap();
        assert_eq!(i.private_ip, "172.16.0.9".parse().ok());
        assert_eq!(i.state, InstanceState::Stopped);
        assert_eq!(i.lifecycle, Lifecycle::Spot);
        assert_eq!(i.billing.charge, Charge::PayAsYouGo);
        assert_eq!(i.billing.stopped_mode, Some(StoppedMode::NoCharge));
        assert!(i.billing.recycling);
        assert_eq!(i.tag("ebb:managed"), Some("true"));
        assert_eq!(i.launched_at, Some("2026-11-30T01:02:00Z".parse().unwrap()));
        let prepaid = json!({"InstanceId": "i-2", "InstanceType": "ecs.i2.xlarge",
            "Status": "Running", "InstanceChargeType": "PrePaid"});
        let i = instance_of("cn-hangzhou", &prepaid).unwrap();
        assert_eq!(i.private_ip, None, "ECS said no address");
        assert_eq!(i.billing.charge, Charge::Subscription);
        assert_eq!(i.billing.stopped_mode, None);
        for unknown in [json!(null), json!("SomethingNew")] {
            let said = json!({"InstanceId": "i-3", "InstanceType": "ecs.gn7i-c8g1.2xlarge",
                "Status": "Running", "InstanceChargeType": unknown});
            let i = instance_of("cn-hangzhou", &said).unwrap();
            assert_eq!(i.billing.charge, Charge::Subscription, "{said}");
        }
        assert!(matches!(
            i.billing.stop_saving,
            crate::fleet::StopSaving::KeepsCharging { .. }
        ));
        // The family ECS says, not one guessed from the type: a family named here is trusted
        // over the name (`ecs.gn5i-c4g1` is of `ecs.gn5i`, cloud disks only).
        let gn5 = json!({"InstanceId": "i-4", "InstanceType": "ecs.gn5-c4g1.xlarge",
            "InstanceTypeFamily": "ecs.gn5", "Status": "Running"});
        let i = instance_of("cn-hangzhou", &gn5).unwrap();
        assert_eq!(
            i.billing.stop_saving,
            crate::fleet::StopSaving::KeepsCharging { family: "ecs.gn5" }
        );
        let gn5i = json!({"InstanceId": "i-5", "InstanceType": "ecs.gn5i-c4g1.xlarge",
            "InstanceTypeFamily": "ecs.gn5i", "Status": "Running"});
        let i = instance_of("cn-hangzhou", &gn5i).unwrap();
        assert_eq!(
            i.billing.stop_saving,
            crate::fleet::StopSaving::InNoChargeMode
        );
        let unknown =
            json!({"InstanceId": "i-3", "InstanceType": "ecs.g7.large", "Status": "Deleted"});
        assert!(instance_of("cn-hangzhou", &unknown).is_none());
    }

    #[test]
    fn stopped_modes_and_batch_outcomes_are_read() {
        assert_eq!(stopped_mode_of(Some("KeepCharging")), StoppedMode::Charging);
        assert_eq!(
            stopped_mode_of(Some("Not-applicable")),
            StoppedMode::Charging
        );
        assert_eq!(stopped_mode_of(None), StoppedMode::Unknown);
        let body = json!({"InstanceResponses": {"InstanceResponse": [
            {"InstanceId": "i-1", "Code": "200", "Message": "success"},
            {"InstanceId": "i-2", "Code": "IncorrectInstanceStatus", "Message": "busy"}
        ]}});
        assert_eq!(
            outcomes(&body),
            [
                ("i-1".to_string(), None),
                (
                    "i-2".to_string(),
                    Some(("IncorrectInstanceStatus".to_string(), "busy".to_string()))
                )
            ]
        );
    }
}
