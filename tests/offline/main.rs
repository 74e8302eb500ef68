//! The integration tests that need no service: the decision core (policies, schedules, the
//! engine and its fuzzing, the replay's decider), the binary's offline commands (`validate`,
//! `plan`, `explain`, `schema`, `replay`, the policy check), the deployment files, the AWS
//! provider against `aws-smithy-mocks`, docs/settings.md against the flags, and the shape of the
//! source. The fast loop:
//! `cargo test --test offline`.

#[path = "../common/mod.rs"]
mod common;

mod activity;
mod advise;
mod aws_mocks;
mod billing;
mod budgets;
mod capacity_risk;
mod cli;
mod cloudwatch_gpus;
mod decider;
mod deploy;
mod doc_names;
mod docs;
mod early_start;
mod eks_mocks;
mod engine;
mod events;
mod fuzz_policy;
mod group_plan;
mod groups;
mod idle_memory;
mod late_start;
mod owners;
mod placement_scores;
mod policy;
mod policy_check;
mod quickstart_zh;
mod reclaim;
mod replay;
mod replay_currencies;
mod replay_disks;
mod replay_groups;
mod replay_pools;
mod reservation_mocks;
mod runtime_limit;
mod schedule;
mod settings;
mod sim_zones;
mod structure;
mod workdays;
