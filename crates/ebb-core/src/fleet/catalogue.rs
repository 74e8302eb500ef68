//! The instance catalogue: what each accelerated instance type carries (its GPUs or Neuron
//! devices, their memory and generation, its vCPUs and memory), as EC2's DescribeInstanceTypes
//! says. `ebb advise` chooses right-sized types from it.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// One instance type's accelerators and size.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TypeFacts {
    /// Accelerators (GPUs or Neuron devices) per instance.
    pub gpus: u32,
    /// Who makes them (`NVIDIA`, or `AWS` for Trainium and Inferentia).
    pub maker: String,
    /// The accelerator's model (`A10G`, `H100`, `Trainium`).
    pub model: String,
    /// Memory per accelerator, MiB.
    pub gpu_memory_mib: u32,
    /// vCPUs.
    pub vcpus: u32,
    /// Memory, MiB.
    pub memory_mib: u64,
    /// The accelerator's architecture, higher is newer, within one maker (NVIDIA: 1 Volta,
    /// 2 Turing, 3 Ampere, 4 Ada Lovelace, 5 Hopper; AWS: the NeuronCore version).
    pub generation: u32,
}

impl TypeFacts {
    /// Whether a box of this type could take over the work of one of `other` without an older
    /// accelerator: the same maker, the same or a newer generation, and for AWS's own chips the
    /// same model (Inferentia does not train).
    pub fn can_replace(&self, other: &TypeFacts) -> bool {
        self.maker == other.maker
            && self.generation >= other.generation
            && (self.maker != "AWS" || self.model == other.model)
    }
}

/// The catalogue: instance type → its facts, with where they come from.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Catalogue {
    /// Where the figures were taken from.
    pub source: String,
    /// When they were taken (a date).
    pub as_of: String,
    /// Instance type → facts.
    pub types: BTreeMap<String, TypeFacts>,
}

impl Catalogue {
    /// The facts of `instance_type`, when the catalogue has them.
    pub fn get(&self, instance_type: &str) -> Option<&TypeFacts> {
        self.types.get(instance_type)
    }

    /// Adds or replaces the facts of `more` (fresher figures, from the API).
    pub fn update(&mut self, more: impl IntoIterator<Item = (String, TypeFacts)>) {
        self.types.extend(more);
    }
}

/// The generation (see [`TypeFacts::generation`]) of an NVIDIA GPU model as DescribeInstanceTypes
/// names it, which the API does not say; `None` for a model ebb does not know.
pub fn nvidia_generation(model: &str) -> Option<u32> {
    Some(match model {
        "V100" | "K80" | "M60" => 1,
        "T4" | "T4g" => 2,
        "A10G" | "A100" => 3,
        "L4" | "L40S" => 4,
        "H100" | "H200" => 5,
        "B200" | "GB200" => 6,
        _ => return None,
    })
}
