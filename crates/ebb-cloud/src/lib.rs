//! Where ebb sees and acts on instances: the [`cloud`] providers (AWS, Alibaba Cloud, Tencent
//! Cloud, Prometheus as a GPU source, and the simulated fleet) and the [`clock`] that the
//! simulated fleet and the control loop share. Built on the decision core's model
//! ([`ebb_core::fleet`], [`ebb_core::policy`]).

pub mod clock;
pub mod cloud;

// The core's modules at the paths the providers name them by (`crate::fleet::Instance`).
pub(crate) use ebb_core::{fleet, names, policy};
