//! The instance catalogue from DescribeInstanceTypes: each type's GPUs (GpuInfo) or Neuron
//! devices (NeuronInfo), their memory and generation, its vCPUs and memory.

use super::cloud_error;
use crate::cloud::CloudError;
use crate::fleet::catalogue::nvidia_generation;
use crate::fleet::TypeFacts;
use aws_sdk_ec2::types::{InstanceType, InstanceTypeInfo};
use futures_util::FutureExt as _;
use std::collections::BTreeMap;

/// The facts of one type as the API describes it; `None` for a type without accelerators, or
/// one whose answer lacks a figure (a partial answer is not guessed at).
pub fn type_facts(info: &InstanceTypeInfo) -> Option<TypeFacts> {
    let vcpus = u32::try_from(info.v_cpu_info()?.default_v_cpus()?).ok()?;
    let memory_mib = u64::try_from(info.memory_info()?.size_in_mib()?).ok()?;
    let (gpus, maker, model, gpu_memory_mib, generation) =
        match (info.gpu_info(), info.neuron_info()) {
            (Some(g), _) => {
                let first = g.gpus().first()?;
                let model = first.name()?.to_string();
                let count: i32 = g.gpus().iter().filter_map(|d| d.count()).sum();
                let memory = first.memory_info()?.size_in_mib()?;
                let generation = nvidia_generation(&model)?;
                (
                    count,
                    first.manufacturer()?.to_string(),
                    model,
                    memory,
                    generation,
                )
            }
            (None, Some(n)) => {
                let first = n.neuron_devices().first()?;
                let count: i32 = n.neuron_devices().iter().filter_map(|d| d.count()).sum();
                let memory = first.memory_info()?.size_in_mib()?;
                let generation = u32::try_from(first.core_info()?.version()?).ok()?;
                (
                    count,
                    "AWS".to_string(),
                    first.name()?.to_string(),
                    memory,
                    generation,
                )
            }
            (None, None) => return None,
        };
    Some(TypeFacts {
        gpus: u32::try_from(gpus).ok()?,
        maker,
        model,
        gpu_memory_mib: u32::try_from(gpu_memory_mib).ok()?,
        vcpus,
        memory_mib,
        generation,
    })
}

/// DescribeInstanceTypes for `types` (at most 100, the API's limit) through `ec2`: the facts of
/// each accelerated one.
pub async fn describe_types(
    ec2: &aws_sdk_ec2::Client,
    types: &[String],
) -> Result<BTreeMap<String, TypeFacts>, CloudError> {
    let answer = ec2
        .describe_instance_types()
        .set_instance_types(Some(
            types
                .iter()
                .map(|t| InstanceType::from(t.as_str()))
                .collect(),
        ))
        .send()
        .boxed()
        .await
        .map_err(|e| cloud_error("DescribeInstanceTypes", e))?;
    Ok(answer
        .instance_types()
        .iter()
        .filter_map(|info| {
            Some((
                info.instance_type()?.as_str().to_string(),
                type_facts(info)?,
            ))
        })
        .collect())
}

/// The families kept in the catalogue: those of `deploy/instance-types.yaml`.
pub const FAMILIES: &[&str] = &[
    "g4dn", "g5", "g6", "g6e", "gr6", "p3", "p3dn", "p4d", "p4de", "p5", "p5e", "trn1", "inf2",
];

/// DescribeInstanceTypes for every type of [`FAMILIES`], every page: the facts of each
/// accelerated one. A failed page fails the whole read (a partial catalogue is not kept).
pub async fn describe_families(
    ec2: &aws_sdk_ec2::Client,
) -> Result<BTreeMap<String, TypeFacts>, CloudError> {
    let filter = aws_sdk_ec2::types::Filter::builder()
        .name("instance-type")
        .set_values(Some(FAMILIES.iter().map(|f| format!("{f}.*")).collect()))
        .build();
    let mut pages = ec2
        .describe_instance_types()
        .filters(filter)
        .into_paginator()
        .send();
    let mut out = BTreeMap::new();
    while let Some(page) = pages.next().await {
        let page = page.map_err(|e| cloud_error("DescribeInstanceTypes", e))?;
        out.extend(page.instance_types().iter().filter_map(|info| {
            Some((
                info.instance_type()?.as_str().to_string(),
                type_facts(info)?,
            ))
        }));
    }
    Ok(out)
}
