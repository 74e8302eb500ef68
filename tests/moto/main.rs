//! The integration tests that need moto's EC2 emulator (`AWS_ENDPOINT_URL`, started by
//! `scripts/test`) besides Postgres: the AWS provider, `ebb tick` and `ebb serve` as
//! processes, killed ticks, injected EC2 errors, a partitioned leader, spot migrations and the
//! audit log's checkpoints in S3.

#[path = "../common/mod.rs"]
mod common;

mod activity;
mod audit_cli;
mod aws;
mod catalogue;
mod crash;
mod failed_metric_queries;
mod faults;
mod group_protection;
mod held_reservations;
mod lost_answers;
mod node_groups;
mod partition;
mod reclaim;
mod serve;
mod spot;
mod tick;
