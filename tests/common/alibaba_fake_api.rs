//! The fake Alibaba Cloud's actions (see `alibaba_fake.rs`), each as its API reference
//! describes its parameters, answer and refusals.

use super::alibaba_fake::{FakeInstance, FakeState};
use axum::http::StatusCode;
use serde_json::{json, Value};
use std::collections::BTreeMap;

/// A refusal: the HTTP status, the error code and the message.
pub type Refusal = (StatusCode, &'static str, String);

fn bad(code: &'static str, message: impl Into<String>) -> Refusal {
    (StatusCode::BAD_REQUEST, code, message.into())
}

/// The values of a numbered list parameter (`InstanceId.1`, `InstanceId.2`, ...), in order.
fn list(query: &BTreeMap<String, String>, name: &str) -> Vec<String> {
    (1..)
        .map_while(|n| query.get(&format!("{name}.{n}")).cloned())
        .collect()
}

fn describe(i: &FakeInstance) -> Value {
    json!({
        "InstanceId": i.id, "RegionId": i.region, "InstanceType": i.instance_type,
        "InstanceTypeFamily": i.family,
        "Status": i.status, "InstanceChargeType": i.charge_type,
        "SpotStrategy": i.spot_strategy, "StoppedMode": i.stopped_mode,
        "StartTime": "2026-11-30T01:00Z",
        "VpcAttributes": {"PrivateIpAddress": {"IpAddress": [format!("172.16.0.{}", i.id.len())]}},
        "OperationLocks": {"LockReason": i.locks.iter().map(|l| json!({"LockReason": l})).collect::<Vec<_>>()},
        "Tags": {"Tag": i.tags.iter().map(|(k, v)| json!({"TagKey": k, "TagValue": v})).collect::<Vec<_>>()},
    })
}

/// Carries out `action` with `query`; the answer's JSON, or the refusal.
pub fn act(
    state: &mut FakeState,
    action: &str,
    query: &BTreeMap<String, String>,
) -> Result<Value, Refusal> {
    let region = || {
        query
            .get("RegionId")
            .cloned()
            .ok_or_else(|| bad("MissingRegionId", "RegionId is mandatory for this action."))
    };
    match action {
        "DescribeInstances" => describe_instances(state, &region()?, query),
        "DescribeInstanceTypes" => Ok(describe_types(query)),
        "StopInstances" | "StartInstances" => start_or_stop(state, &region()?, action, query),
        "TagResources" | "UntagResources" => tags(state, &region()?, action, query),
        "DescribeMetricList" => metrics(state, query),
        "DescribePrice" => price(&region()?, query),
        _ => Err(bad(
            "InvalidAction.NotFound",
            format!("{action} is not an action"),
        )),
    }
}

fn describe_instances(
    state: &mut FakeState,
    region: &str,
    query: &BTreeMap<String, String>,
) -> Result<Value, Refusal> {
    let ids: Option<Vec<String>> = match query.get("InstanceIds") {
        Some(text) => Some(serde_json::from_str(text).map_err(|_| {
            bad(
                "InvalidInstanceIds.Malformed",
                "InstanceIds is not a JSON array",
            )
        })?),
        None => None,
    };
    if ids.as_ref().is_some_and(|ids| ids.len() > 100) {
        return Err(bad(
            "InvalidInstanceIds.ValueNotSupported",
            "at most 100 ids",
        ));
    }
    let tag = query
        .get("Tag.1.Key")
        .map(|k| (k.clone(), query.get("Tag.1.Value").cloned()));
    let page: usize = query
        .get("MaxResults")
        .map_or(Ok(10), |m| m.parse())
        .map_err(|_| bad("InvalidParameter", "MaxResults"))?;
    if !(1..=100).contains(&page) {
        return Err(bad("InvalidParameter", "MaxResults must be 1 to 100"));
    }
    let start: usize = query.get("NextToken").map_or(0, |t| t.parse().unwrap_or(0));
    // A listing of the region (its first page, not a read of named ids) is a new look at it:
    // a recycled instance shows its lock at the first look after the recycle began, and is
    // released before the next.
    if start == 0 && ids.is_none() {
        state
            .instances
            .retain(|i| i.region != region || i.recycled_after != Some(0));
        for i in state.instances.iter_mut().filter(|i| i.region == region) {
            i.recycled_after = i.recycled_after.map(|n| n.saturating_sub(1));
        }
    }
    let matching: Vec<usize> = state
        .instances
        .iter()
        .enumerate()
        .filter(|(_, i)| i.region == region)
        .filter(|(_, i)| ids.as_ref().is_none_or(|ids| ids.contains(&i.id)))
        .filter(|(_, i)| match &tag {
            Some((k, Some(v))) => i.tags.get(k) == Some(v),
            Some((k, None)) => i.tags.contains_key(k),
            None => true,
        })
        .map(|(n, _)| n)
        .collect();
    let mut shown = Vec::new();
    for &n in matching.iter().skip(start).take(page) {
        state.instances[n].read();
        shown.push(describe(&state.instances[n]));
    }
    let next = (start + page < matching.len()).then(|| (start + page).to_string());
    Ok(json!({
        "RequestId": "fake-describe", "TotalCount": matching.len(),
        "NextToken": next.unwrap_or_default(),
        "Instances": {"Instance": shown},
    }))
}

/// The GPU instance types of the fake's world (DescribeInstanceTypes' `GPUAmount`, `GPUSpec`,
/// `GPUMemorySize` in GiB).
fn describe_types(query: &BTreeMap<String, String>) -> Value {
    let types: Vec<Value> = list(query, "InstanceTypes")
        .into_iter()
        .map(|t| {
            let (count, spec, memory) = match t.as_str() {
                "ecs.gn7i-c8g1.2xlarge" => (1, "NVIDIA A10", 24.0),
                "ecs.gn6i-c4g1.xlarge" => (1, "NVIDIA T4", 16.0),
                "ecs.gn5.2xlarge" => (1, "NVIDIA P100", 16.0),
                _ => (0, "", 0.0),
            };
            json!({"InstanceTypeId": t, "GPUAmount": count, "GPUSpec": spec, "GPUMemorySize": memory})
        })
        .collect();
    json!({"RequestId": "fake-types", "InstanceTypes": {"InstanceType": types}})
}

/// The fake's price list in yuan: a type's hour pay-as-you-go, and a month of subscription
/// (test figures, not Alibaba's). Only these two are sold; a year is ten months' price.
fn list_price(instance_type: &str) -> Option<(f64, f64)> {
    match instance_type {
        "ecs.gn7i-c8g1.2xlarge" => Some((9.5, 4_000.0)),
        "ecs.gn5-c4g1.xlarge" => Some((7.0, 3_000.0)),
        _ => None,
    }
}

/// DescribePrice of an instance type (`ResourceType=instance`) for `PriceUnit` and `Period`:
/// the whole period's price, the instance's part beside a system disk's, as ECS answers it.
fn price(region: &str, query: &BTreeMap<String, String>) -> Result<Value, Refusal> {
    if query.get("ResourceType").map_or("instance", String::as_str) != "instance" {
        return Err(bad("InvalidResourceType.NotSupported", "only instance"));
    }
    let ty = query
        .get("InstanceType")
        .ok_or_else(|| bad("MissingInstanceType", "InstanceType is mandatory"))?;
    let Some((hour, month)) = list_price(ty) else {
        return Err(bad(
            "InvalidInstanceType.ValueNotSupported",
            format!("{ty} is not sold in {region}"),
        ));
    };
    let period: f64 = query
        .get("Period")
        .map_or(Ok(1.0), |p| p.parse())
        .map_err(|_| bad("InvalidPeriod", "Period"))?;
    let (instance, disk) = match query.get("PriceUnit").map_or("Hour", String::as_str) {
        "Hour" if period == 1.0 => (hour, 0.03),
        "Month" if (1.0..=9.0).contains(&period) => (month * period, 20.0 * period),
        "Year" if (1.0..=5.0).contains(&period) => (month * 10.0 * period, 200.0 * period),
        _ => {
            return Err(bad(
                "InvalidPriceUnit.ValueNotSupported",
                "PriceUnit or Period",
            ))
        }
    };
    let part = |resource: &str, price: f64| {
        json!({"Resource": resource, "OriginalPrice": price, "DiscountPrice": 0.0, "TradePrice": price,
               "SubRules": {"Rule": []}})
    };
    Ok(json!({
        "RequestId": "fake-price",
        "PriceInfo": {
            "Price": {
                "Currency": "CNY", "OriginalPrice": instance + disk, "DiscountPrice": 0.0,
                "TradePrice": instance + disk,
                "DetailInfos": {"DetailInfo": [part("instanceType", instance), part("systemDisk", disk)]},
            },
            "Rules": {"Rule": []},
        },
    }))
}

fn start_or_stop(
    state: &mut FakeState,
    region: &str,
    action: &str,
    query: &BTreeMap<String, String>,
) -> Result<Value, Refusal> {
    let ids = list(query, "InstanceId");
    if ids.is_empty() || ids.len() > 100 {
        return Err(bad(
            "InvalidInstanceIds.ValueNotSupported",
            "1 to 100 InstanceId.N",
        ));
    }
    let mode = query.get("StoppedMode").map(String::as_str);
    if action == "StopInstances" && !matches!(mode, None | Some("StopCharging" | "KeepCharging")) {
        return Err(bad(
            "InvalidStoppedMode",
            "StoppedMode is StopCharging or KeepCharging",
        ));
    }
    if query.get("BatchOptimization").map(String::as_str) != Some("SuccessFirst") {
        // AllTogether (the default): one instance that cannot be acted on refuses them all.
        let refused = ids.iter().find(|id| {
            !state
                .instances
                .iter()
                .any(|i| &i.id == *id && i.region == region && ready(i, action))
        });
        if let Some(id) = refused {
            return Err(bad(
                "IncorrectInstanceStatus",
                format!("{id} cannot be acted on"),
            ));
        }
    }
    let mut responses = Vec::new();
    for id in &ids {
        let found = state
            .instances
            .iter_mut()
            .find(|i| &i.id == id && i.region == region);
        let (code, message) = match found {
            None => (
                "InvalidInstanceId.NotFound",
                "The specified instance does not exist.",
            ),
            Some(i) if !ready(i, action) => (
                "IncorrectInstanceStatus",
                "The current status of the resource does not support this operation.",
            ),
            Some(i) if action == "StartInstances" => {
                i.begin("Starting", "Running", "Not-applicable");
                ("200", "success")
            }
            Some(i) => {
                // The economical mode's conditions: pay-as-you-go, no local storage. An
                // instance that does not meet them is still stopped, and keeps charging.
                let stopped_mode = match mode {
                    Some("KeepCharging") => "KeepCharging",
                    _ if i.charge_type == "PrePaid" || i.local_storage() => "Not-applicable",
                    _ => "StopCharging",
                };
                i.begin("Stopping", "Stopped", stopped_mode);
                ("200", "success")
            }
        };
        responses.push(json!({"InstanceId": id, "Code": code, "Message": message}));
    }
    Ok(
        json!({"RequestId": format!("fake-{action}"), "InstanceResponses": {"InstanceResponse": responses}}),
    )
}

/// Whether `action` applies to `i` in its state, and no security lock forbids it.
fn ready(i: &FakeInstance, action: &str) -> bool {
    let wanted = match action {
        "StartInstances" => "Stopped",
        _ => "Running",
    };
    i.status == wanted && !i.locks.iter().any(|l| l == "security")
}

fn tags(
    state: &mut FakeState,
    region: &str,
    action: &str,
    query: &BTreeMap<String, String>,
) -> Result<Value, Refusal> {
    let ids = list(query, "ResourceId");
    if ids.is_empty() || ids.len() > 50 {
        return Err(bad(
            "InvalidResourceId.ValueNotSupported",
            "1 to 50 ResourceId.N",
        ));
    }
    if query.get("ResourceType").map(String::as_str) != Some("instance") {
        return Err(bad(
            "InvalidResourceType.NotFound",
            "ResourceType is instance",
        ));
    }
    if let Some(gone) = ids.iter().find(|id| {
        !state
            .instances
            .iter()
            .any(|i| &i.id == *id && i.region == region)
    }) {
        return Err(bad(
            "InvalidResourceId.NotFound",
            format!("{gone} does not exist"),
        ));
    }
    for i in state.instances.iter_mut().filter(|i| ids.contains(&i.id)) {
        match action {
            "TagResources" => {
                for n in 1.. {
                    let Some(k) = query.get(&format!("Tag.{n}.Key")) else {
                        break;
                    };
                    let v = query
                        .get(&format!("Tag.{n}.Value"))
                        .cloned()
                        .unwrap_or_default();
                    i.tags.insert(k.clone(), v);
                }
            }
            _ => {
                for k in list(query, "TagKey") {
                    i.tags.remove(&k);
                }
            }
        }
    }
    Ok(json!({"RequestId": format!("fake-{action}")}))
}

fn metrics(state: &FakeState, query: &BTreeMap<String, String>) -> Result<Value, Refusal> {
    if query.get("Namespace").map(String::as_str) != Some("acs_ecs_dashboard") {
        return Err(bad("InvalidParameter", "unknown namespace"));
    }
    let number = |name: &str| {
        query
            .get(name)
            .and_then(|v| v.parse::<i64>().ok())
            .ok_or_else(|| bad("InvalidParameter", format!("{name} is a time in ms")))
    };
    let (from, to) = (number("StartTime")?, number("EndTime")?);
    let dims: Vec<Value> = query
        .get("Dimensions")
        .map_or(Ok(Vec::new()), |d| serde_json::from_str(d))
        .map_err(|_| bad("InvalidParameter", "Dimensions is a JSON array"))?;
    let ids: Vec<&str> = dims
        .iter()
        .filter_map(|d| d["instanceId"].as_str())
        .collect();
    let points: Vec<Value> = state
        .gpu_points
        .iter()
        .filter(|(id, _, at, _)| ids.contains(&id.as_str()) && from <= *at && *at <= to)
        .map(|(id, gpu, at, v)| json!({"timestamp": at, "instanceId": id, "gpuId": gpu, "Maximum": v, "Average": v, "Minimum": v}))
        .collect();
    Ok(
        json!({"RequestId": "fake-metrics", "Code": "200", "Success": true,
        "Period": query.get("Period"), "Datapoints": Value::from(points).to_string()}),
    )
}
